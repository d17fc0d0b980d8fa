"""test_api.py - the emulator is as strict and as asynchronous as Compute
Engine: every rejection pbx may meet (with nothing created), operations
that move PENDING -> RUNNING -> DONE, requestId idempotency, paging and
label filters, bulkInsert, the token endpoint's grants, the billing
catalogue's SKU pages (BillingCatalog), faults on
demand, guest shutdowns and preemptions (/_emulator/guest-shutdown,
/_emulator/preempt).  No node bodies (--no-bodies); talks only to
127.0.0.1.  GuestShutdownWatch drives world.py directly with a fake
backend whose machines are `sleep` processes standing in for QEMU
(vms.VMs.alive), so a machine that ends by itself is seen without booting
a VM."""

import base64
import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ZONE, Emulator, instance_body  # noqa: E402
import vms  # noqa: E402
from faults import Faults as FaultSet  # noqa: E402
from world import World  # noqa: E402

ZONE_B = "us-central1-b"


def reason(value):
    return value["error"]["errors"][0]["reason"]


class Base(unittest.TestCase):
    ARGS = ("--no-bodies", "--fault", "op_delay=0.05")

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.emu = Emulator(cls.tmp.name, *cls.ARGS).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.emu.stop()
        cls.tmp.cleanup()

    def setUp(self):
        self.emu.control("POST", "faults", {"throttle": 0.0, "throttle_next": 0, "unavailable": 0.0,
                                            "unavailable_next": 0, "lost_reply": 0.0, "quota": {},
                                            "stockout": [], "op_delay": 0.05, "slow_ops": 0.0})
        for inst in self.emu.control("GET", "state")["instances"]:
            code, op = self.emu.call("DELETE", "zones/%s/instances/%s" % (inst["zone"], inst["name"]))
            self.assertEqual(code, 200, op)
            self.emu.wait(op)
        for fw in self.emu.control("GET", "state")["firewalls"]:
            code, op = self.emu.call("DELETE", "global/firewalls/" + fw["name"])
            self.emu.wait(op)
        for rt in self.emu.control("GET", "state")["routers"]:
            code, op = self.emu.call("DELETE", "regions/%s/routers/%s" % (rt["region"].rsplit("/", 1)[1], rt["name"]))
            self.emu.wait(op)
        self.assertEqual(self.emu.control("GET", "state")["instances"], [])

    def insert(self, body, zone=ZONE, query=""):
        return self.emu.call("POST", "zones/%s/instances" % zone, body, query=query)

    def create(self, body, zone=ZONE):
        code, op = self.insert(body, zone)
        self.assertEqual(code, 200, op)
        done = self.emu.wait(op)
        self.assertNotIn("error", done)
        return done

    def names(self, zone=ZONE, query=""):
        code, page = self.emu.call("GET", "zones/%s/instances" % zone, query=query)
        self.assertEqual(code, 200, page)
        return [i["name"] for i in page.get("items", [])]

    def assertRejected(self, code, value, status, why, text=None):
        self.assertEqual(code, status, value)
        self.assertEqual(reason(value), why, value)
        self.assertEqual(value["error"]["code"], status)
        if text:
            self.assertIn(text, value["error"]["message"])
        self.assertEqual(self.emu.control("GET", "state")["instances"], [], "a rejected call created something")


class Strictness(Base):
    def bad(self, mutate, text, status=400, why="invalid", zone=ZONE):
        body = instance_body("vm-1", gpus=1)
        mutate(body)
        code, value = self.insert(body, zone)
        self.assertRejected(code, value, status, why, text)

    def test_accepts_the_body_gcloud_sends(self):
        body = instance_body("vm-ok", gpus=1, labels={"pbx-cluster": "c1"},
                             keys="pbx:ssh-ed25519 AAAAC3 test",
                             scheduling={"onHostMaintenance": "TERMINATE", "automaticRestart": False,
                                         "preemptible": True, "provisioningModel": "SPOT"},
                             serviceAccounts=[{"email": "default", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
                             canIpForward=False, deletionProtection=False)
        body["machineType"] = self.emu.base + "projects/pbx-test/zones/%s/machineTypes/n1-standard-8" % ZONE
        done = self.create(body)
        code, inst = self.emu.call("GET", "zones/%s/instances/vm-ok" % ZONE)
        self.assertEqual(code, 200)
        self.assertEqual(inst["kind"], "compute#instance")
        self.assertIsInstance(inst["id"], str)
        self.assertEqual(done["targetId"], inst["id"])
        self.assertEqual(inst["selfLink"], self.emu.base + "projects/pbx-test/zones/%s/instances/vm-ok" % ZONE)
        self.assertEqual(inst["status"], "RUNNING")
        self.assertTrue(inst["creationTimestamp"].startswith("20"))
        nic = inst["networkInterfaces"][0]
        self.assertTrue(nic["networkIP"].startswith("127.0.70."), nic)
        self.assertTrue(nic["accessConfigs"][0]["natIP"].startswith("127.0.71."), nic)
        self.assertEqual(inst["labels"], {"pbx-cluster": "c1"})
        self.assertTrue(inst["labelFingerprint"])
        self.assertEqual(inst["metadata"]["items"], [{"key": "ssh-keys", "value": "pbx:ssh-ed25519 AAAAC3 test"}])
        self.assertEqual(inst["guestAccelerators"][0]["acceleratorCount"], 1)
        self.assertEqual(inst["scheduling"]["provisioningModel"], "SPOT")

    def test_unknown_fields(self):
        self.bad(lambda b: b.update(colour="blue"),
                 "Unknown name \"colour\" at 'instance_resource': Cannot find field.")
        self.bad(lambda b: b["scheduling"].update(onHostMaintenanse="TERMINATE"),
                 "Unknown name \"onHostMaintenanse\" at 'instance_resource.scheduling'")
        self.bad(lambda b: b["networkInterfaces"][0]["accessConfigs"][0].update(natIp="1.2.3.4"),
                 "at 'instance_resource.network_interfaces[0].access_configs[0]'")

    def test_wrong_json_types(self):
        self.bad(lambda b: b.update(canIpForward="yes"), "Invalid value at 'instance_resource.can_ip_forward' (TYPE_BOOL)")
        self.bad(lambda b: b.update(labels=["a"]), "instance_resource.labels")
        self.bad(lambda b: b["guestAccelerators"][0].update(acceleratorCount="two"), "TYPE_INT32")

    def test_machine_type_form(self):
        self.bad(lambda b: b.update(machineType="n1-standard-8"), "Invalid URL: n1-standard-8")
        self.bad(lambda b: b.update(machineType="machineTypes/n1-standard-8"), "Invalid URL")
        self.bad(lambda b: b.update(machineType="zones/%s/machineTypes/n1-standard-8" % ZONE_B), "must match the instance zone")
        self.bad(lambda b: b.update(machineType="zones/%s/machineTypes/n9-huge" % ZONE), "does not exist")
        self.bad(lambda b: b.pop("machineType"), "resource.machineType")

    def test_accelerator_type_form(self):
        self.bad(lambda b: b["guestAccelerators"][0].update(acceleratorType="nvidia-tesla-t4"), "Invalid URL")
        self.bad(lambda b: b["guestAccelerators"][0].update(acceleratorType="zones/%s/acceleratorTypes/nvidia-tesla-z9" % ZONE),
                 "does not exist")
        self.bad(lambda b: b["guestAccelerators"][0].update(acceleratorCount=9), "acceleratorCount")

    def test_gpus_need_terminate(self):
        self.bad(lambda b: b["scheduling"].update(onHostMaintenance="MIGRATE"), "do not support live migration")
        self.bad(lambda b: b.pop("scheduling"), "do not support live migration")

    def test_spot_rules(self):
        self.bad(lambda b: b.update(scheduling={"provisioningModel": "SPOT", "onHostMaintenance": "MIGRATE"}),
                 "preemptible be false when OnHostMaintenance isn't TERMINATE")
        self.bad(lambda b: b.update(scheduling={"preemptible": True, "onHostMaintenance": "TERMINATE",
                                                "automaticRestart": True}), "cannot be automatically restarted")
        self.bad(lambda b: b["scheduling"].update(provisioningModel="CHEAP"), "provisioningModel")

    def test_names(self):
        for name in ("VM-1", "1vm", "vm_1", "vm-", "a" * 64, "", "vm.1"):
            self.bad(lambda b, n=name: b.update(name=n), "resource.name")
        self.create(instance_body("a" * 63))

    def test_duplicate_name(self):
        self.create(instance_body("vm-dup"))
        code, value = self.insert(instance_body("vm-dup"))
        self.assertEqual(code, 409, value)
        self.assertEqual(reason(value), "alreadyExists")
        self.assertIn("projects/pbx-test/zones/%s/instances/vm-dup' already exists" % ZONE, value["error"]["message"])
        code, op = self.insert(instance_body("vm-dup", zone=ZONE_B), zone=ZONE_B)   # names are per zone
        self.assertEqual(code, 200, op)
        self.emu.wait(op)

    def test_labels(self):
        for labels in ({"Pbx": "a"}, {"1st": "a"}, {"k": "A"}, {"k": "a.b"}, {"k" * 64: "a"},
                       {"k": "v" * 64}, {"": "a"}, {"k%d" % i: "v" for i in range(65)}):
            self.bad(lambda b, l=labels: b.update(labels=l), "resource.labels")
        self.create(instance_body("vm-l", labels={"pbx-cluster": "c_1-x", "pbx-id": "", "k" * 63: "v" * 63}))

    def test_metadata(self):
        self.bad(lambda b: b.update(metadata={"items": [{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]}),
                 "Duplicate keys")
        self.bad(lambda b: b.update(metadata={"items": [{"key": "a b", "value": "1"}]}), "key")

    def test_disks_and_network(self):
        self.bad(lambda b: b.update(disks=[]), "No disks are specified")
        self.bad(lambda b: b["disks"][0]["initializeParams"].update(diskSizeGb="5"), "cannot be smaller")
        self.bad(lambda b: b["disks"][0]["initializeParams"].update(sourceImage="debian-12"), "Invalid URL")
        self.bad(lambda b: b.update(networkInterfaces=[]), "network interface is required")
        self.bad(lambda b: b["networkInterfaces"][0]["accessConfigs"][0].update(natIP="34.1.2.3"), "was not found")
        self.bad(lambda b: b["networkInterfaces"][0].update(network="global/networks/nope"), None, 404, "notFound")

    def test_request_id(self):
        for rid in ("abc", "00000000-0000-0000-0000-000000000000", str(uuid.uuid4()) + "0"):
            code, value = self.insert(instance_body("vm-r"), query="requestId=" + rid)
            self.assertRejected(code, value, 400, "invalid", "The request id must be a valid UUID")

    def test_query_parameters(self):
        code, value = self.insert(instance_body("vm-q"), query="colour=blue")
        self.assertRejected(code, value, 400, "invalid", "Cannot bind query parameter")
        for q in ("maxResults=501", "maxResults=-1", "pageToken=garbage", "filter=labels.a%20%3D",
                  "orderBy=status"):
            code, value = self.emu.call("GET", "zones/%s/instances" % ZONE, query=q)
            self.assertEqual(code, 400, (q, value))
            self.assertEqual(reason(value), "invalid")

    def test_not_found(self):
        for path in ("zones/%s/instances/none" % ZONE, "zones/mars-1a/instances", "global/firewalls/none",
                     "zones/%s/operations/operation-1" % ZONE, "zones/%s/machineTypes/n9" % ZONE):
            code, value = self.emu.call("GET", path)
            self.assertEqual(code, 404, (path, value))
            self.assertEqual(reason(value), "notFound")
        code, value = self.emu.call("DELETE", "zones/%s/instances/none" % ZONE)
        self.assertEqual((code, reason(value)), (404, "notFound"))
        code, value = self.emu.raw("GET", self.emu.base + "projects/other/zones/%s/instances" % ZONE, None,
                                   {"Authorization": "Bearer " + self.emu.token})[::2]
        self.assertEqual(code, 404)

    def test_body_not_json(self):
        code, value = self.emu.call("POST", "zones/%s/instances" % ZONE, raw_body=b"{name:")
        self.assertRejected(code, value, 400, "invalid", "Invalid JSON payload received")

    def test_chunked_body(self):
        import http.client
        body = json.dumps(instance_body("vm-chunked")).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.emu.port, timeout=30)
        conn.request("POST", "/compute/v1/projects/pbx-test/zones/%s/instances" % ZONE,
                     body=iter([body[:7], body[7:]]), encode_chunked=True,
                     headers={"Authorization": "Bearer " + self.emu.token, "Content-Type": "application/json"})
        r = conn.getresponse()
        op = json.loads(r.read())
        self.assertEqual(r.status, 200, op)
        conn.request("GET", "/compute/v1/projects/pbx-test/zones/%s/operations/%s" % (ZONE, op["name"]),
                     headers={"Authorization": "Bearer " + self.emu.token})   # same connection
        self.assertEqual(conn.getresponse().status, 200)
        conn.close()
        self.emu.wait(op)
        self.assertEqual(self.names(), ["vm-chunked"])

    def test_firewalls(self):
        fw = {"name": "pbx-c1-ssh", "network": "global/networks/default", "direction": "INGRESS",
              "priority": 1000, "sourceRanges": ["127.0.0.1/32"],
              "allowed": [{"IPProtocol": "tcp", "ports": ["22", "6817-6819"]}], "targetTags": ["pbx-c1"]}
        for mutate, text in ((lambda f: f.update(labels={"pbx-cluster": "c1"}), "Unknown name \"labels\" at 'firewall_resource'"),
                             (lambda f: f["allowed"][0].update(ports=["70000"]), "ports"),
                             (lambda f: f["allowed"][0].update(ports=["22-20"]), "ports"),
                             (lambda f: f["allowed"][0].update(IPProtocol="tcpp"), "IPProtocol"),
                             (lambda f: f.update(denied=[{"IPProtocol": "udp"}]), "Exactly one of allowed or denied"),
                             (lambda f: f.update(sourceRanges=["10.0.0.0/33"]), "sourceRanges"),
                             (lambda f: f.update(name="Pbx"), "resource.name"),
                             (lambda f: f.update(targetTags=["Bad_Tag"]), "targetTags")):
            body = copy.deepcopy(fw)
            mutate(body)
            code, value = self.emu.call("POST", "global/firewalls", body)
            self.assertEqual(code, 400, (body, value))
            self.assertIn(text, value["error"]["message"])
        code, op = self.emu.call("POST", "global/firewalls", fw)
        self.assertEqual(code, 200, op)
        self.assertNotIn("zone", op)
        self.assertIn("/global/operations/", op["selfLink"])
        self.assertEqual(self.emu.wait(op)["status"], "DONE")
        code, got = self.emu.call("GET", "global/firewalls/pbx-c1-ssh")
        self.assertEqual((code, got["allowed"], got["kind"]), (200, fw["allowed"], "compute#firewall"))
        code, value = self.emu.call("POST", "global/firewalls", fw)
        self.assertEqual((code, reason(value)), (409, "alreadyExists"))
        code, page = self.emu.call("GET", "global/firewalls", query="filter=" + urllib.parse.quote("name = pbx-c1-ssh"))
        self.assertEqual([f["name"] for f in page["items"]], ["pbx-c1-ssh"])
        # globalOperations.list: the project's global operations, with their
        # targets, filtered like every list (a stop looks for unfinished ones)
        code, page = self.emu.call("GET", "global/operations")
        self.assertEqual((code, page["kind"]), (200, "compute#operationList"))
        self.assertTrue(any(o["targetLink"].endswith("/global/firewalls/pbx-c1-ssh") and
                            o["operationType"] == "insert" for o in page["items"]), page)
        code, page = self.emu.call("GET", "global/operations",
                                   query="filter=" + urllib.parse.quote('status != "DONE"'))
        self.assertEqual((code, page.get("items", [])), (200, []))
        code, op = self.emu.call("DELETE", "global/firewalls/pbx-c1-ssh")
        self.emu.wait(op)
        self.assertEqual(self.emu.call("GET", "global/firewalls/pbx-c1-ssh")[0], 404)

    def test_routers(self):
        """routers.insert: a regional resource with a regional operation;
        the Router and RouterNat bodies checked as Compute Engine does
        (docs/gce-network.md)."""
        region = "us-central1"
        rt = {"name": "pbx-c1-nat", "network": "projects/pbx-test/global/networks/default",
              "nats": [{"name": "pbx-nat", "natIpAllocateOption": "AUTO_ONLY",
                        "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}]}
        path = "regions/%s/routers" % region
        nat = lambda f: f["nats"][0]  # noqa: E731
        for mutate, text, status in (
                (lambda f: f.update(labels={"pbx-cluster": "c1"}), "Unknown name \"labels\" at 'router_resource'", 400),
                (lambda f: nat(f).update(bogus=1), "Unknown name \"bogus\" at 'router_resource.nats[0]'", 400),
                (lambda f: nat(f).update(natIpAllocateOption=3), "router_resource.nats[0].nat_ip_allocate_option", 400),
                (lambda f: f.pop("network"), "resource.network", 400),
                (lambda f: f.update(network="global/networks/other"), "networks/other", 404),
                (lambda f: f.update(name="Pbx_nat"), "resource.name", 400),
                (lambda f: f.update(region="projects/pbx-test/regions/europe-west4"), "resource.region", 400),
                (lambda f: nat(f).pop("name"), "resource.nats[0].name", 400),
                (lambda f: nat(f).pop("natIpAllocateOption"), "natIpAllocateOption", 400),
                (lambda f: nat(f).update(natIpAllocateOption="AUTO"), "natIpAllocateOption", 400),
                (lambda f: nat(f).pop("sourceSubnetworkIpRangesToNat"), "sourceSubnetworkIpRangesToNat", 400),
                (lambda f: nat(f).update(sourceSubnetworkIpRangesToNat="ALL"), "sourceSubnetworkIpRangesToNat", 400),
                (lambda f: nat(f).update(natIpAllocateOption="MANUAL_ONLY"), "natIps must be specified", 400),
                (lambda f: nat(f).update(natIps=["regions/us-central1/addresses/a"]), "natIps must be empty", 400),
                (lambda f: nat(f).update(sourceSubnetworkIpRangesToNat="LIST_OF_SUBNETWORKS"), "subnetworks", 400),
                (lambda f: nat(f).update(logConfig={"enable": True, "filter": "SOME"}), "logConfig.filter", 400),
                (lambda f: nat(f).update(udpIdleTimeoutSec=0), "udpIdleTimeoutSec", 400),
                (lambda f: f["nats"].append(dict(nat(f), name="second")), "must be the only NAT", 400)):
            body = copy.deepcopy(rt)
            mutate(body)
            code, value = self.emu.call("POST", path, body)
            self.assertEqual(code, status, (body, value))
            self.assertIn(text, value["error"]["message"], body)
        self.assertEqual(self.emu.control("GET", "state")["routers"], [], "a rejected call created something")
        self.assertEqual(self.emu.call("POST", "regions/mars-1/routers", rt)[0], 404)
        code, op = self.emu.call("POST", path, rt)
        self.assertEqual(code, 200, op)
        self.assertNotIn("zone", op)
        self.assertTrue(op["region"].endswith("/regions/" + region), op)
        self.assertIn("/regions/%s/operations/" % region, op["selfLink"])
        self.assertEqual(self.emu.call("GET", "%s/%s" % (path, rt["name"]))[0], 404, "made before its operation ran")
        self.assertEqual(self.emu.wait(op)["status"], "DONE")
        code, got = self.emu.call("GET", "%s/%s" % (path, rt["name"]))
        self.assertEqual((code, got["kind"], got["nats"][0]["name"]), (200, "compute#router", "pbx-nat"), got)
        self.assertTrue(got["region"].endswith("/regions/" + region), got)
        self.assertNotIn("labels", got)
        code, value = self.emu.call("POST", path, rt)
        self.assertEqual((code, reason(value)), (409, "alreadyExists"))
        # ALL_SUBNETWORKS_ALL_IP_RANGES: the only NAT of the network in the region
        code, value = self.emu.call("POST", path, dict(rt, name="pbx-c2-nat"))
        self.assertEqual(code, 400, value)
        self.assertIn("router 'pbx-c1-nat' has one", value["error"]["message"])
        code, op = self.emu.call("POST", "regions/europe-west4/routers", rt)
        self.assertEqual(self.emu.wait(op).get("error"), None, "another region is another router")
        code, page = self.emu.call("GET", path)
        self.assertEqual([r["name"] for r in page["items"]], ["pbx-c1-nat"])
        for reg in (region, "europe-west4"):
            code, op = self.emu.call("DELETE", "regions/%s/routers/pbx-c1-nat" % reg)
            self.assertEqual(code, 200, op)
            self.assertEqual(self.emu.wait(op)["status"], "DONE")
        self.assertEqual(self.emu.call("GET", "%s/pbx-c1-nat" % path)[0], 404)
        self.assertEqual(self.emu.call("DELETE", "%s/pbx-c1-nat" % path)[0], 404)
        self.assertEqual(self.emu.control("GET", "state")["routers"], [])

    def test_bulk_insert_rejections(self):
        props = instance_body("x", gpus=1)
        props.pop("name")
        props["machineType"] = "n1-standard-8"
        props["guestAccelerators"][0]["acceleratorType"] = "nvidia-tesla-t4"
        good = {"count": 2, "namePattern": "gpu-##", "instanceProperties": props}
        for mutate, text in (
                (lambda b: b["instanceProperties"].update(machineType="zones/%s/machineTypes/n1-standard-8" % ZONE),
                 "resource.instanceProperties.machineType"),
                (lambda b: b["instanceProperties"]["guestAccelerators"][0].update(
                    acceleratorType="zones/%s/acceleratorTypes/nvidia-tesla-t4" % ZONE), "acceleratorType"),
                (lambda b: b["instanceProperties"].update(name="x"), "Unknown name \"name\""),
                (lambda b: b.update(namePattern="gpu-#-#"), "namePattern"),
                (lambda b: b.update(perInstanceProperties={"a": {}, "b": {}}), "Exactly one of namePattern"),
                (lambda b: b.update(minCount=3), "minCount"),
                (lambda b: b.update(count=0), "count"),
                (lambda b: b["instanceProperties"]["scheduling"].update(onHostMaintenance="MIGRATE"), "live migration"),
                (lambda b: b["instanceProperties"].update(serviceAccounts=[{
                    "email": "nobody@pbx-test.iam.gserviceaccount.com",
                    "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]),
                 "does not have access to service account 'nobody@pbx-test.iam.gserviceaccount.com'"),
                (lambda b: b["instanceProperties"].update(serviceAccounts=[{
                    "email": "default", "scopes": ["cloud-platform"]}]), "serviceAccounts[0].scopes")):
            body = copy.deepcopy(good)
            mutate(body)
            code, value = self.emu.call("POST", "zones/%s/instances/bulkInsert" % ZONE, body)
            self.assertRejected(code, value, 400, "invalid", text)
        code, op = self.emu.call("POST", "zones/%s/instances/bulkInsert" % ZONE, good)
        self.assertEqual(code, 200, op)
        self.assertNotIn("error", self.emu.wait(op))
        self.assertEqual(self.names(), ["gpu-01", "gpu-02"])


class BillingCatalog(Base):
    """The Cloud Billing Catalog API's Compute Engine SKUs (billing.py)."""
    SKUS = "/v1/services/6F81-5844-456A/skus"

    def get(self, query="", token=True, path=None):
        headers = {}
        if token:
            headers["Authorization"] = "Bearer " + (self.emu.token if token is True else token)
        url = self.emu.url + (path or self.SKUS) + ("?" + query if query else "")
        code, _, value = self.emu.raw("GET", url, None, headers)
        return code, value

    def test_pages_follow_next_page_token(self):
        seen, token, pages = [], None, 0
        while True:
            code, page = self.get("currencyCode=USD&pageSize=5000" +
                                  ("&pageToken=" + urllib.parse.quote(token) if token else ""))
            self.assertEqual(code, 200, page)
            self.assertLessEqual(len(page["skus"]), 4)
            seen += [s["description"] for s in page["skus"]]
            pages += 1
            token = page.get("nextPageToken")
            if not token:
                break
        self.assertEqual((pages, len(seen), len(set(seen))), (4, 15, 15))
        price = page["skus"][0]["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]
        self.assertIsInstance(price["units"], str)
        self.assertIsInstance(price["nanos"], int)

    def test_currency(self):
        code, page = self.get("currencyCode=EUR")
        self.assertEqual(code, 200, page)
        price = page["skus"][0]["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]
        self.assertEqual(price, {"currencyCode": "EUR", "units": "0", "nanos": 27600000})
        code, page = self.get("pageToken=" + urllib.parse.quote(page["nextPageToken"]))
        self.assertEqual(code, 400, "a token of another currency")

    def test_bad_parameters(self):
        for q in ("currencyCode=XYZ", "pageSize=0", "pageSize=ten", "pageToken=forged", "filter=x"):
            code, value = self.get(q)
            self.assertEqual((code, value["error"]["status"]), (400, "INVALID_ARGUMENT"), q)
        code, value = self.get(path="/v1/services/0000-0000-0000/skus")
        self.assertEqual(code, 404, value)

    def test_tokens_and_scopes(self):
        self.assertEqual(self.get(token=False)[0], 401)
        self.assertEqual(self.get(token="ya29.forged")[0], 401)
        compute = self.emu.control("POST", "token", {"scopes": ["https://www.googleapis.com/auth/compute"]})
        self.assertEqual(self.get(token=compute["access_token"])[0], 403)
        billing = self.emu.control("POST", "token", {
            "scopes": ["https://www.googleapis.com/auth/cloud-billing.readonly"]})
        self.assertEqual(self.get(token=billing["access_token"])[0], 200)

    def test_modes(self):
        try:
            self.emu.control("POST", "billing", {"mode": "malformed"})
            self.assertNotIn("skus", self.get()[1])
            self.emu.control("POST", "billing", {"mode": "error"})
            self.assertEqual(self.get()[0], 500)
        finally:
            self.emu.control("POST", "billing", {"mode": "ok"})
        self.assertEqual(self.get()[0], 200)


class Auth(Base):
    def test_missing_and_bad_tokens(self):
        for token, why in ((None, "required"), ("ya29.forged", "authError")):
            url = self.emu.base + "projects/pbx-test/zones/%s/instances" % ZONE
            code, headers, value = self.emu.raw("GET", url, None, {"Authorization": "Bearer " + token} if token else {})
            self.assertEqual(code, 401, value)
            self.assertEqual(reason(value), why)
            self.assertEqual(value["error"]["status"], "UNAUTHENTICATED")
            self.assertIn("Bearer", headers["WWW-Authenticate"])
        token = self.emu.control("POST", "token", {"scopes": ["https://www.googleapis.com/auth/devstorage.read_only"]})
        code, value = self.emu.call("GET", "zones/%s/instances" % ZONE, token=token["access_token"])
        self.assertEqual((code, reason(value)), (403, "insufficientPermissions"))
        code, value = self.emu.call("POST", "zones/%s/instances" % ZONE, instance_body("vm-a"), token=False)
        self.assertRejected(code, value, 401, "required")

    def test_token_expiry(self):
        token = self.emu.control("POST", "token", {"lifetime": 0.5})["access_token"]
        self.assertEqual(self.emu.call("GET", "zones/%s/instances" % ZONE, token=token)[0], 200)
        time.sleep(0.7)
        code, value = self.emu.call("GET", "zones/%s/instances" % ZONE, token=token)
        self.assertEqual((code, reason(value)), (401, "authError"))


class TokenEndpoint(unittest.TestCase):
    """JWT and refresh-token grants against files made here."""

    @classmethod
    def setUpClass(cls):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        cls.tmp = tempfile.TemporaryDirectory()
        cls.keys = {}
        for which in ("good", "other"):
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            cls.keys[which] = key
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
            with open(os.path.join(cls.tmp.name, which + ".json"), "w") as f:
                json.dump({"type": "service_account", "project_id": "pbx-test", "private_key_id": "k1",
                           "private_key": pem, "client_email": "pbx@pbx-test.iam.gserviceaccount.com",
                           "client_id": "1", "token_uri": "http://127.0.0.1:1/token"}, f)
        with open(os.path.join(cls.tmp.name, "adc.json"), "w") as f:
            json.dump({"type": "authorized_user", "client_id": "cid.apps.googleusercontent.com",
                       "client_secret": "s3cret", "refresh_token": "1//refresh"}, f)
        cls.emu = Emulator(cls.tmp.name, "--no-bodies", "--token-lifetime", "1.5",
                           "--service-account", os.path.join(cls.tmp.name, "good.json"),
                           "--authorized-user", os.path.join(cls.tmp.name, "adc.json")).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.emu.stop()
        cls.tmp.cleanup()

    def jwt(self, key="good", **claims):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        now = int(time.time())
        c = {"iss": "pbx@pbx-test.iam.gserviceaccount.com", "scope": "https://www.googleapis.com/auth/compute",
             "aud": self.emu.url + "/token", "iat": now, "exp": now + 3600}
        c.update(claims)
        c = {k: v for k, v in c.items() if v is not None}
        enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
        signing = enc({"alg": "RS256", "typ": "JWT", "kid": "k1"}) + "." + enc(c)
        sig = self.keys[key].sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()

    def post(self, form, ctype="application/x-www-form-urlencoded"):
        code, _, value = self.emu.raw("POST", self.emu.url + "/token", urllib.parse.urlencode(form).encode(),
                                      {"Content-Type": ctype})
        return code, value

    def grant(self, assertion):
        return self.post({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion})

    def test_service_account_jwt(self):
        for aud in (self.emu.url + "/token", "https://oauth2.googleapis.com/token"):
            code, value = self.grant(self.jwt(aud=aud))
            self.assertEqual(code, 200, value)
            self.assertEqual(value["token_type"], "Bearer")
            self.assertLessEqual(value["expires_in"], 1)
            code, _ = self.emu.call("GET", "zones/%s/instances" % ZONE, token=value["access_token"])
            self.assertEqual(code, 200)
        time.sleep(1.6)                     # --token-lifetime 1.5: the token has expired
        code, page = self.emu.call("GET", "zones/%s/instances" % ZONE, token=value["access_token"])
        self.assertEqual((code, reason(page)), (401, "authError"))

    def test_lifetime_set_at_run_time(self):
        self.emu.control("POST", "auth", {"token_lifetime": 30})
        try:
            code, value = self.grant(self.jwt())
            self.assertEqual((code, value["expires_in"]), (200, 29))
        finally:
            self.emu.control("POST", "auth", {"token_lifetime": 1.5})

    def test_bad_assertions(self):
        now = int(time.time())
        cases = (
            (self.jwt(key="other"), "invalid_grant", "Invalid JWT Signature."),
            (self.jwt(iss="who@x.iam.gserviceaccount.com"), "invalid_grant", "account not found"),
            (self.jwt(aud="https://evil.example/token"), "invalid_grant", "audience"),
            (self.jwt(iat=now - 7200, exp=now - 3600), "invalid_grant", "short-lived"),
            (self.jwt(exp=now + 7200), "invalid_grant", "short-lived"),
            (self.jwt(scope=None), "invalid_scope", "scope"),
            ("a.b", "invalid_grant", "malformed"),
            (self.jwt()[:-4] + "AAAA", "invalid_grant", "Signature"),
        )
        for assertion, error, text in cases:
            code, value = self.grant(assertion)
            self.assertEqual((code, value["error"]), (400, error), value)
            self.assertIn(text, value["error_description"])

    def test_refresh_token(self):
        form = {"grant_type": "refresh_token", "client_id": "cid.apps.googleusercontent.com",
                "client_secret": "s3cret", "refresh_token": "1//refresh"}
        code, value = self.post(form)
        self.assertEqual(code, 200, value)
        self.assertEqual(self.emu.call("GET", "zones/%s/instances" % ZONE, token=value["access_token"])[0], 200)
        for change, status, error in (({"refresh_token": "1//stale"}, 400, "invalid_grant"),
                                      ({"client_secret": "nope"}, 401, "invalid_client"),
                                      ({"client_id": "other"}, 401, "invalid_client"),
                                      ({"grant_type": "password"}, 400, "unsupported_grant_type")):
            code, value = self.post(dict(form, **change))
            self.assertEqual((code, value["error"]), (status, error), change)
        code, value = self.post(form, ctype="application/json")
        self.assertEqual((code, value["error"]), (400, "invalid_request"))


class Operations(Base):
    def test_insert_lifecycle(self):
        self.emu.control("POST", "faults", {"op_delay": 0.3})
        code, op = self.insert(instance_body("vm-life", labels={"pbx-cluster": "c1"}))
        self.assertEqual(code, 200, op)
        self.assertEqual(op["status"], "PENDING")
        for key in ("kind", "id", "name", "zone", "operationType", "targetLink", "selfLink", "insertTime", "user"):
            self.assertIn(key, op)
        self.assertEqual((op["kind"], op["operationType"]), ("compute#operation", "insert"))
        self.assertEqual(self.emu.call("GET", "zones/%s/instances/vm-life" % ZONE)[0], 404)   # not yet admitted
        seen_ops, seen_inst = [], []
        end = time.time() + 20
        while time.time() < end:
            cur = self.emu.call("GET", op["selfLink"].split("/pbx-test/", 1)[1])[1]
            if not seen_ops or seen_ops[-1] != cur["status"]:
                seen_ops.append(cur["status"])
            code, inst = self.emu.call("GET", "zones/%s/instances/vm-life" % ZONE)
            if code == 200 and (not seen_inst or seen_inst[-1] != inst["status"]):
                seen_inst.append(inst["status"])
            if cur["status"] == "DONE":
                break
            time.sleep(0.03)
        self.assertEqual(seen_ops, ["PENDING", "RUNNING", "DONE"])
        self.assertEqual(seen_inst, ["PROVISIONING", "STAGING", "RUNNING"])
        self.assertEqual(cur["progress"], 100)
        self.assertIn("endTime", cur)
        code, dop = self.emu.call("DELETE", "zones/%s/instances/vm-life" % ZONE)
        self.assertEqual((code, dop["operationType"]), (200, "delete"))
        code, waited = self.emu.call("POST", "zones/%s/operations/%s/wait" % (ZONE, dop["name"]))
        self.assertEqual((code, waited["status"]), (200, "DONE"))
        self.assertEqual(self.emu.call("GET", "zones/%s/instances/vm-life" % ZONE)[0], 404)

    def test_delete_while_provisioning(self):
        self.emu.control("POST", "faults", {"op_delay": 0.4})
        code, op = self.insert(instance_body("vm-early"))
        end = time.time() + 10
        while self.emu.call("GET", "zones/%s/instances/vm-early" % ZONE)[0] != 200 and time.time() < end:
            time.sleep(0.02)
        code, inst = self.emu.call("GET", "zones/%s/instances/vm-early" % ZONE)
        self.assertEqual((code, inst["status"]), (200, "PROVISIONING"))
        code, dop = self.emu.call("DELETE", "zones/%s/instances/vm-early" % ZONE)
        self.assertEqual(code, 200, dop)
        self.assertEqual(self.emu.wait(dop)["status"], "DONE")
        self.assertEqual(self.emu.wait(op)["status"], "DONE")
        self.assertEqual(self.names(), [])

    def test_request_id_idempotency(self):
        rid = str(uuid.uuid4())
        code, first = self.insert(instance_body("vm-idem"), query="requestId=" + rid)
        self.assertEqual(code, 200, first)
        self.assertEqual(first["clientOperationId"], rid)
        code, again = self.insert(instance_body("vm-idem"), query="requestId=" + rid)
        self.assertEqual((code, again["name"]), (200, first["name"]))
        self.emu.wait(first)
        code, later = self.insert(instance_body("vm-idem"), query="requestId=" + rid)
        self.assertEqual((code, later["name"], later["status"]), (200, first["name"], "DONE"))
        code, other = self.insert(instance_body("vm-idem"), query="requestId=" + str(uuid.uuid4()))
        self.assertEqual((code, reason(other)), (409, "alreadyExists"))
        self.assertEqual(self.names(), ["vm-idem"])

    def test_lost_reply_then_retry(self):
        self.emu.control("POST", "faults", {"lost_reply": 1.0})
        rid = str(uuid.uuid4())
        code, value = self.insert(instance_body("vm-lost"), query="requestId=" + rid)
        self.assertEqual((code, reason(value)), (503, "backendError"))
        self.emu.control("POST", "faults", {"lost_reply": 0.0})
        code, op = self.insert(instance_body("vm-lost"), query="requestId=" + rid)
        self.assertEqual(code, 200, op)
        self.assertNotIn("error", self.emu.wait(op))
        self.assertEqual(self.names(), ["vm-lost"])

    def test_paging_and_filters(self):
        props = instance_body("x", labels={"pbx-cluster": "big"})
        props.pop("name")
        props["machineType"] = "n1-standard-8"
        code, op = self.emu.call("POST", "zones/%s/instances/bulkInsert" % ZONE,
                                 {"count": 7, "namePattern": "node-###", "instanceProperties": props})
        self.assertEqual(code, 200, op)
        self.assertEqual(op["operationType"], "bulkInsert")
        done = self.emu.wait(op)
        self.assertNotIn("error", done)
        status = done["instancesBulkInsertOperationMetadata"]["perLocationStatus"]["zones/" + ZONE]
        self.assertEqual((status["createdVmCount"], status["targetVmCount"]), (7, 7))
        self.create(instance_body("other", labels={"pbx-cluster": "small"}))
        pages, token = [], None
        while True:
            q = "maxResults=3&filter=" + urllib.parse.quote("labels.pbx-cluster=big") + (
                "&pageToken=" + token if token else "")
            code, page = self.emu.call("GET", "zones/%s/instances" % ZONE, query=q)
            self.assertEqual(code, 200, page)
            pages.append([i["name"] for i in page["items"]])
            token = page.get("nextPageToken")
            if not token:
                break
        self.assertEqual(pages, [["node-001", "node-002", "node-003"], ["node-004", "node-005", "node-006"],
                                 ["node-007"]])
        for f, want in (('labels.pbx-cluster = "small"', ["other"]), ("labels.pbx-cluster eq sm.*", ["other"]),
                        ("(labels.pbx-cluster = big) (name = node-002)", ["node-002"]),
                        ("labels.pbx-cluster = none", [])):
            self.assertEqual(self.names(query="filter=" + urllib.parse.quote(f)), want, f)
        code, page = self.emu.call("GET", "aggregated/instances",
                                   query="maxResults=5&filter=" + urllib.parse.quote("labels.pbx-cluster=big"))
        self.assertEqual(code, 200)
        self.assertEqual(len(page["items"]["zones/" + ZONE]["instances"]), 5)
        self.assertIn("warning", page["items"]["zones/" + ZONE_B])
        self.assertIn("nextPageToken", page)
        # a second bulkInsert with the same pattern continues after node-007
        code, op = self.emu.call("POST", "zones/%s/instances/bulkInsert" % ZONE,
                                 {"count": 2, "namePattern": "node-###", "instanceProperties": props})
        self.emu.wait(op)
        self.assertIn("node-009", self.names())

    def test_bulk_per_instance_names_count_existing(self):
        props = instance_body("x")
        props.pop("name")
        props["machineType"] = "n1-standard-8"
        self.create(instance_body("w1"))
        code, op = self.emu.call("POST", "zones/%s/instances/bulkInsert" % ZONE,
                                 {"count": 3, "perInstanceProperties": {"w1": {}, "w2": {}, "w3": {}},
                                  "instanceProperties": props})
        self.assertEqual(code, 200, op)
        done = self.emu.wait(op)
        self.assertNotIn("error", done)
        self.assertEqual(self.names(), ["w1", "w2", "w3"])


class Faults(Base):
    def test_throttling_shapes(self):
        self.emu.control("POST", "faults", {"throttle_next": 12})
        seen = set()
        for _ in range(12):
            code, value = self.emu.call("GET", "zones/%s/instances" % ZONE)
            self.assertIn(code, (429, 403), value)
            self.assertEqual(reason(value), "rateLimitExceeded")
            if code == 429:
                self.assertEqual(value["error"]["status"], "RESOURCE_EXHAUSTED")
            else:
                self.assertEqual(value["error"]["errors"][0]["domain"], "usageLimits")
            seen.add(code)
        self.assertEqual(seen, {429, 403})
        self.assertEqual(self.emu.call("GET", "zones/%s/instances" % ZONE)[0], 200)

    def test_throttle_fraction_and_no_side_effects(self):
        self.emu.control("POST", "faults", {"throttle": 0.3})
        refused, made = 0, 0
        for i in range(60):
            code, value = self.insert(instance_body("t%d" % i, nat=False))
            if code == 200:
                made += 1
            else:
                self.assertIn(code, (429, 403))
                refused += 1
        self.assertTrue(8 <= refused <= 30, refused)
        self.emu.control("POST", "faults", {"throttle": 0.0})
        time.sleep(0.5)
        end = time.time() + 20
        while len(self.names()) < made and time.time() < end:
            time.sleep(0.1)
        self.assertEqual(len(self.names()), made)

    def test_unavailable(self):
        self.emu.control("POST", "faults", {"unavailable_next": 1})
        code, value = self.insert(instance_body("u1"))
        self.assertRejected(code, value, 503, "backendError")

    def test_quota_on_third_instance(self):
        self.emu.control("POST", "faults", {"quota": {"INSTANCES": 2}})
        self.create(instance_body("q1"))
        self.create(instance_body("q2"))
        code, op = self.insert(instance_body("q3"))
        self.assertEqual(code, 200, op)
        done = self.emu.wait(op)
        err = done["error"]["errors"][0]
        self.assertEqual(err["code"], "QUOTA_EXCEEDED")
        self.assertIn("Quota 'INSTANCES' exceeded.  Limit: 2.0 in region us-central1", err["message"])
        self.assertEqual(err["errorDetails"][0]["quotaInfo"]["metricName"], "compute.googleapis.com/instances")
        self.assertEqual(done["httpErrorStatusCode"], 403)
        self.assertEqual(self.names(), ["q1", "q2"])
        code, region = self.emu.call("GET", "regions/us-central1")
        quota = {q["metric"]: q for q in region["quotas"]}
        self.assertEqual((quota["INSTANCES"]["limit"], quota["INSTANCES"]["usage"]), (2.0, 2.0))

    def test_gpu_quota_all_or_nothing_bulk(self):
        self.emu.control("POST", "faults", {"quota": {"NVIDIA_T4_GPUS": 2}})
        props = instance_body("x", gpus=1)
        props.pop("name")
        props["machineType"] = "n1-standard-8"
        props["guestAccelerators"][0]["acceleratorType"] = "nvidia-tesla-t4"
        code, op = self.emu.call("POST", "zones/%s/instances/bulkInsert" % ZONE,
                                 {"count": 3, "namePattern": "g-#", "instanceProperties": props})
        done = self.emu.wait(op)
        self.assertEqual(done["error"]["errors"][0]["code"], "QUOTA_EXCEEDED")
        self.assertEqual(self.names(), [])
        code, op = self.emu.call("POST", "zones/%s/instances/bulkInsert" % ZONE,
                                 {"count": 3, "minCount": 2, "namePattern": "g-#", "instanceProperties": props})
        done = self.emu.wait(op)
        self.assertNotIn("error", done)
        self.assertEqual(self.names(), ["g-1", "g-2"])

    def test_stockout_in_one_zone(self):
        self.emu.control("POST", "faults", {"stockout": [ZONE]})
        code, op = self.insert(instance_body("s1", gpus=1))
        done = self.emu.wait(op)
        self.assertEqual(done["status"], "DONE")
        self.assertEqual(done["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED")
        self.assertIn("zones/%s' does not have enough resources" % ZONE, done["error"]["errors"][0]["message"])
        self.assertEqual(self.names(), [])
        done = self.create(instance_body("s1", zone=ZONE_B, gpus=1), zone=ZONE_B)
        self.assertEqual(self.names(zone=ZONE_B), ["s1"])

    def test_slow_operations(self):
        self.emu.control("POST", "faults", {"slow_ops": 1.0, "slow_op_delay": 1.0})
        t = time.time()
        code, op = self.insert(instance_body("slow"))
        time.sleep(0.5)
        self.assertEqual(self.emu.wait(op)["status"], "DONE")   # waited through the steps
        self.assertGreater(time.time() - t, 2.5)

    def test_control_refuses_unknown_faults(self):
        with self.assertRaises(RuntimeError):
            self.emu.control("POST", "faults", {"throtle": 0.3})
        with self.assertRaises(RuntimeError):
            self.emu.control("POST", "faults", {"throttle": 3})


class Images(Base):
    """images.insert/get/list/delete and instances.stop/start."""

    def setUp(self):
        super().setUp()
        for img in self.emu.control("GET", "state")["images"]:
            code, op = self.emu.call("DELETE", "global/images/" + img["name"])
            self.assertEqual(code, 200, op)
            self.emu.wait(op)

    def stopped(self, name):
        self.create(instance_body(name))
        code, op = self.emu.call("POST", "zones/%s/instances/%s/stop" % (ZONE, name))
        self.assertEqual((code, op["operationType"]), (200, "stop"), op)
        self.assertNotIn("error", self.emu.wait(op))

    def image(self, body, query=""):
        return self.emu.call("POST", "global/images", body, query=query)

    def status(self, name):
        return self.emu.call("GET", "zones/%s/instances/%s" % (ZONE, name))[1]["status"]

    def test_stop_and_start(self):
        self.emu.control("POST", "faults", {"op_delay": 0.3})
        self.create(instance_body("vm-pw"))
        code, op = self.emu.call("POST", "zones/%s/instances/vm-pw/stop" % ZONE)
        self.assertEqual((code, op["status"], op["operationType"]), (200, "PENDING", "stop"), op)
        seen = []
        while True:
            st = self.status("vm-pw")
            if not seen or seen[-1] != st:
                seen.append(st)
            if st == "TERMINATED":
                break
            time.sleep(0.03)
        self.assertEqual(seen, ["RUNNING", "STOPPING", "TERMINATED"])
        self.assertEqual(self.emu.wait(op)["status"], "DONE")
        inst = self.emu.call("GET", "zones/%s/instances/vm-pw" % ZONE)[1]
        self.assertIn("lastStopTimestamp", inst)
        code, again = self.emu.call("POST", "zones/%s/instances/vm-pw/stop" % ZONE)   # no-op
        self.assertNotIn("error", self.emu.wait(again))
        code, op = self.emu.call("POST", "zones/%s/instances/vm-pw/start" % ZONE, query="requestId=" + str(uuid.uuid4()))
        self.assertEqual((code, op["operationType"]), (200, "start"), op)
        seen = []
        while True:
            st = self.status("vm-pw")
            if not seen or seen[-1] != st:
                seen.append(st)
            if st == "RUNNING":
                break
            time.sleep(0.03)
        self.assertEqual(seen, ["TERMINATED", "STAGING", "RUNNING"])
        self.assertNotIn("error", self.emu.wait(op))

    def test_stop_refusals(self):
        code, v = self.emu.call("POST", "zones/%s/instances/nope/stop" % ZONE)
        self.assertRejected(code, v, 404, "notFound", "projects/pbx-test/zones/%s/instances/nope" % ZONE)
        code, v = self.emu.call("POST", "zones/%s/instances/nope/start" % ZONE, query="force=1")
        self.assertEqual((code, reason(v)), (400, "invalid"))
        self.emu.control("POST", "faults", {"op_delay": 0.5})
        code, op = self.insert(instance_body("vm-busy"))
        while self.emu.call("GET", "zones/%s/instances/vm-busy" % ZONE)[0] != 200:
            time.sleep(0.02)
        code, v = self.emu.call("POST", "zones/%s/instances/vm-busy/stop" % ZONE)
        self.assertEqual((code, reason(v)), (400, "resourceNotReady"), v)
        self.emu.wait(op)

    def test_insert_from_a_stopped_instance(self):
        self.stopped("vm-src")
        rid = str(uuid.uuid4())
        body = {"name": "img-1", "sourceDisk": "zones/%s/disks/vm-src" % ZONE,
                "labels": {"pbx-image": "img-1", "pbx-image-id": "ab12"}, "family": "pbx-fam",
                "description": "made by a test"}
        code, op = self.image(body, query="requestId=" + rid)
        self.assertEqual((code, op["operationType"], op["status"]), (200, "insert", "PENDING"), op)
        self.assertNotIn("zone", op)
        self.assertTrue(op["selfLink"].startswith(self.emu.base + "projects/pbx-test/global/operations/"))
        self.assertEqual(op["targetLink"], self.emu.base + "projects/pbx-test/global/images/img-1")
        code, img = self.emu.call("GET", "global/images/img-1")
        self.assertEqual((code, img["status"]), (200, "PENDING"))
        self.assertEqual(self.image(body, query="requestId=" + rid)[1]["name"], op["name"])
        self.assertNotIn("error", self.emu.wait(op))
        code, img = self.emu.call("GET", "global/images/img-1")
        self.assertEqual((img["kind"], img["status"], img["family"]), ("compute#image", "READY", "pbx-fam"))
        self.assertEqual(img["sourceDisk"], self.emu.base + "projects/pbx-test/zones/%s/disks/vm-src" % ZONE)
        self.assertEqual(img["labels"], {"pbx-image": "img-1", "pbx-image-id": "ab12"})
        self.assertEqual((img["diskSizeGb"], img["sourceType"]), ("100", "RAW"))
        self.assertIsInstance(img["id"], str)
        self.assertFalse([k for k in img if k.startswith("_")], img)
        code, v = self.image(dict(body, labels={}))
        self.assertEqual((code, reason(v)), (409, "alreadyExists"))
        # an instance booted from it, by full and partial link and by family
        for n, src in (("from-1", "projects/pbx-test/global/images/img-1"), ("from-2", "global/images/img-1"),
                       ("from-3", self.emu.base + "projects/pbx-test/global/images/family/pbx-fam")):
            b = instance_body(n)
            b["disks"][0]["initializeParams"]["sourceImage"] = src
            self.create(b)
        b = instance_body("from-x")
        b["disks"][0]["initializeParams"]["sourceImage"] = "projects/pbx-test/global/images/no-such"
        code, v = self.insert(b)
        self.assertEqual((code, reason(v)), (404, "notFound"))
        self.assertIn("projects/pbx-test/global/images/no-such", v["error"]["message"])
        # delete: DONE, then 404
        code, op = self.emu.call("DELETE", "global/images/img-1")
        self.assertEqual((code, op["operationType"]), (200, "delete"), op)
        self.assertNotIn("error", self.emu.wait(op))
        self.assertEqual(self.emu.call("GET", "global/images/img-1")[0], 404)
        code, v = self.emu.call("DELETE", "global/images/img-1")
        self.assertEqual((code, reason(v)), (404, "notFound"))

    def test_running_disk_needs_force_create(self):
        self.create(instance_body("vm-hot"))
        body = {"name": "img-hot", "sourceDisk": self.emu.base + "projects/pbx-test/zones/%s/disks/vm-hot" % ZONE}
        code, v = self.image(body)
        self.assertEqual((code, reason(v)), (400, "resourceInUseByAnotherResource"), v)
        self.assertIn("is already being used by 'projects/pbx-test/zones/%s/instances/vm-hot'" % ZONE,
                      v["error"]["message"])
        self.assertEqual(self.emu.control("GET", "state")["images"], [])
        code, v = self.image(body, query="forceCreate=maybe")
        self.assertEqual((code, reason(v)), (400, "invalid"))
        code, op = self.image(body, query="forceCreate=true")
        self.assertEqual(code, 200, op)
        self.assertNotIn("error", self.emu.wait(op))

    def test_image_rejections(self):
        self.stopped("vm-r")
        disk = "zones/%s/disks/vm-r" % ZONE
        for body, status, why, text in (
                ({"name": "Bad_Name", "sourceDisk": disk}, 400, "invalid", "resource.name"),
                ({"name": "img-x"}, 400, "invalid", "Exactly one of"),
                ({"name": "img-x", "sourceDisk": disk, "sourceImage": "global/images/y"}, 400, "invalid", "Exactly one"),
                ({"name": "img-x", "sourceDisk": "disks/vm-r"}, 400, "invalid", "Invalid URL"),
                ({"name": "img-x", "sourceDisk": "zones/%s/disks/none" % ZONE}, 404, "notFound",
                 "projects/pbx-test/zones/%s/disks/none" % ZONE),
                ({"name": "img-x", "sourceDisk": "zones/mars-1a/disks/vm-r"}, 404, "notFound", "mars-1a"),
                ({"name": "img-x", "sourceDisk": "projects/other/zones/%s/disks/vm-r" % ZONE}, 404, "notFound",
                 "projects/other/"),
                ({"name": "img-x", "sourceDisk": disk, "labels": {"Bad": "x"}}, 400, "invalid", "resource.labels"),
                ({"name": "img-x", "sourceDisk": disk, "family": "Fam"}, 400, "invalid", "resource.family"),
                ({"name": "img-x", "sourceDisk": disk, "colour": "red"}, 400, "invalid",
                 "Unknown name \"colour\" at 'image_resource'"),
                ({"name": "img-x", "sourceDisk": 7}, 400, "invalid", "TYPE_STRING")):
            code, v = self.image(body)
            self.assertEqual((code, reason(v)), (status, why), (body, v))
            self.assertIn(text, v["error"]["message"], body)
        self.assertEqual(self.emu.control("GET", "state")["images"], [])
        code, v = self.image({"name": "img-x", "sourceDisk": disk}, query="requestId=0000")
        self.assertEqual((code, reason(v)), (400, "invalid"))
        code, v = self.emu.call("GET", "global/images/none")
        self.assertEqual((code, reason(v)), (404, "notFound"))

    def test_disk_is_the_instance(self):
        self.stopped("vm-gone")
        code, op = self.emu.call("DELETE", "zones/%s/instances/vm-gone" % ZONE)
        self.assertNotIn("error", self.emu.wait(op))
        code, v = self.image({"name": "img-g", "sourceDisk": "zones/%s/disks/vm-gone" % ZONE})
        self.assertEqual((code, reason(v)), (404, "notFound"))

    def test_delete_instance_while_imaging(self):
        self.stopped("vm-img")
        self.emu.control("POST", "faults", {"op_delay": 0.5})
        code, op = self.image({"name": "img-busy", "sourceDisk": "zones/%s/disks/vm-img" % ZONE})
        self.assertEqual(code, 200, op)
        code, v = self.emu.call("DELETE", "zones/%s/instances/vm-img" % ZONE)
        self.assertEqual((code, reason(v)), (400, "resourceInUseByAnotherResource"), v)
        code, v = self.emu.call("DELETE", "global/images/img-busy")
        self.assertEqual((code, reason(v)), (400, "resourceNotReady"), v)
        b = instance_body("from-busy")
        b["disks"][0]["initializeParams"]["sourceImage"] = "global/images/img-busy"
        code, v = self.insert(b)
        self.assertEqual((code, reason(v)), (400, "resourceNotReady"), v)
        self.assertNotIn("error", self.emu.wait(op))

    def test_list_paging_and_filter(self):
        self.stopped("vm-l")
        for i in range(5):
            code, op = self.image({"name": "img-%d" % i, "sourceDisk": "zones/%s/disks/vm-l" % ZONE,
                                   "labels": {"pbx-image-id": "even" if i % 2 == 0 else "odd"}})
            self.assertEqual(code, 200, op)
            self.emu.wait(op)
        names, token = [], None
        while True:
            q = "maxResults=2" + ("&pageToken=" + token if token else "")
            code, page = self.emu.call("GET", "global/images", query=q)
            self.assertEqual((code, page["kind"]), (200, "compute#imageList"), page)
            names += [i["name"] for i in page["items"]]
            token = page.get("nextPageToken")
            if not token:
                break
        self.assertEqual(names, ["img-%d" % i for i in range(5)])
        q = "filter=" + urllib.parse.quote("labels.pbx-image-id = even")
        code, page = self.emu.call("GET", "global/images", query=q)
        self.assertEqual([i["name"] for i in page["items"]], ["img-0", "img-2", "img-4"])
        code, page = self.emu.call("GET", "global/images", query="filter=" + urllib.parse.quote("name = none"))
        self.assertNotIn("items", page)


class GuestShutdown(Base):
    """/_emulator/guest-shutdown and /_emulator/preempt: Compute Engine's own
    stop of a RUNNING instance, as a system operation."""

    def control_error(self, what, query):
        code, _, value = self.emu.raw("POST", self.emu.url + "/_emulator/%s?%s" % (what, query))
        return code, value

    def status_of(self, name):
        code, inst = self.emu.call("GET", "zones/%s/instances/%s" % (ZONE, name))
        return inst if code == 200 else None

    def test_guest_shutdown_then_start(self):
        self.create(instance_body("vm-g"))
        op = self.emu.control("POST", "guest-shutdown?instance=vm-g")
        self.assertEqual((op["operationType"], op["status"], op["user"]),
                         ("compute.instances.guestTerminate", "RUNNING", "system@google.com"), op)
        self.assertEqual(self.status_of("vm-g")["status"], "STOPPING")
        self.assertNotIn("error", self.emu.wait(op))
        inst = self.status_of("vm-g")
        self.assertEqual(inst["status"], "TERMINATED")
        self.assertIn("lastStopTimestamp", inst)
        # The operation is listed in its zone, as Compute Engine lists it.
        code, page = self.emu.call("GET", "zones/%s/operations" % ZONE,
                                   query=urllib.parse.urlencode({"filter": 'operationType = "compute.instances.guestTerminate"'}))
        self.assertEqual(code, 200, page)
        self.assertIn(op["name"], [o["name"] for o in page["items"]])
        # Not RUNNING any more: refused, as a stopped machine has no guest.
        code, v = self.control_error("guest-shutdown", "instance=vm-g")
        self.assertEqual(code, 400, v)
        self.assertIn("TERMINATED, not RUNNING", v["error"])
        code, op = self.emu.call("POST", "zones/%s/instances/vm-g/start" % ZONE)
        self.assertNotIn("error", self.emu.wait(op))
        self.assertEqual(self.status_of("vm-g")["status"], "RUNNING")
        # A start of a RUNNING instance still changes nothing.
        code, op = self.emu.call("POST", "zones/%s/instances/vm-g/start" % ZONE)
        self.assertNotIn("error", self.emu.wait(op))
        self.assertEqual(self.status_of("vm-g")["status"], "RUNNING")

    def test_refusals(self):
        code, v = self.control_error("guest-shutdown", "instance=nope")
        self.assertEqual(code, 400, v)
        code, v = self.control_error("guest-shutdown", "")
        self.assertEqual(code, 400, v)
        self.create(instance_body("vm-twin"))
        self.create(instance_body("vm-twin", zone=ZONE_B), zone=ZONE_B)
        code, v = self.control_error("guest-shutdown", "instance=vm-twin")
        self.assertEqual(code, 400, v)
        self.assertIn("more than one", v["error"])
        op = self.emu.control("POST", "guest-shutdown", {"instance": "vm-twin", "zone": ZONE_B})
        self.assertTrue(op["zone"].endswith("/zones/" + ZONE_B), op)
        self.emu.wait(op)
        code, v = self.control_error("preempt", "instance=vm-twin&zone=" + ZONE)
        self.assertEqual(code, 400, v)
        self.assertIn("neither Spot nor preemptible", v["error"])

    def test_preempt_spot(self):
        sched = {"onHostMaintenance": "TERMINATE", "automaticRestart": False, "provisioningModel": "SPOT"}
        self.create(instance_body("vm-spot", scheduling=sched))
        op = self.emu.control("POST", "preempt?instance=vm-spot&notice=0")
        self.assertEqual((op["operationType"], op["statusMessage"]),
                         ("compute.instances.preempted", "Instance was preempted."), op)
        state = {i["name"]: i for i in self.emu.control("GET", "state")["instances"]}
        self.assertTrue(state["vm-spot"]["preempted"])
        self.assertNotIn("error", self.emu.wait(op))
        self.assertEqual(self.status_of("vm-spot")["status"], "TERMINATED")
        code, op = self.emu.call("POST", "zones/%s/instances/vm-spot/start" % ZONE)
        self.assertNotIn("error", self.emu.wait(op))
        state = {i["name"]: i for i in self.emu.control("GET", "state")["instances"]}
        self.assertFalse(state["vm-spot"]["preempted"], "a new boot is not preempted")
        # instanceTerminationAction DELETE: preemption deletes it.
        self.create(instance_body("vm-spot-del", scheduling=dict(sched, instanceTerminationAction="DELETE")))
        op = self.emu.control("POST", "preempt", {"instance": "vm-spot-del", "notice": 0})
        self.assertNotIn("error", self.emu.wait(op))
        self.assertIsNone(self.status_of("vm-spot-del"))
        # The older preemptible flag counts too.
        self.create(instance_body("vm-pre", scheduling={"onHostMaintenance": "TERMINATE",
                                                        "automaticRestart": False, "preemptible": True}))
        self.assertNotIn("error", self.emu.wait(self.emu.control("POST", "preempt?instance=vm-pre&notice=0")))
        self.assertEqual(self.status_of("vm-pre")["status"], "TERMINATED")

    def test_preempt_notice(self):
        """The guest has the notice's seconds (Compute Engine: 30; here the
        call's `notice`) between `preempted` turning TRUE and its machine's
        end: STOPPING all along, TERMINATED only after it."""
        sched = {"onHostMaintenance": "TERMINATE", "automaticRestart": False, "provisioningModel": "SPOT"}
        self.create(instance_body("vm-notice", scheduling=sched))
        t0 = time.time()
        op = self.emu.control("POST", "preempt", {"instance": "vm-notice", "notice": 2})
        state = {i["name"]: i for i in self.emu.control("GET", "state")["instances"]}
        self.assertTrue(state["vm-notice"]["preempted"])
        self.assertEqual(self.status_of("vm-notice")["status"], "STOPPING")
        time.sleep(1.0)
        self.assertEqual(self.status_of("vm-notice")["status"], "STOPPING", "ended before the notice ran out")
        self.assertNotIn("error", self.emu.wait(op))
        self.assertGreaterEqual(time.time() - t0, 2.0)
        self.assertEqual(self.status_of("vm-notice")["status"], "TERMINATED")
        sched_pre = {"onHostMaintenance": "TERMINATE", "automaticRestart": False, "preemptible": True}
        self.create(instance_body("vm-notice2", scheduling=sched_pre))
        for bad in ("-1", "601", "soon"):
            code, v = self.control_error("preempt", "instance=vm-notice2&notice=" + bad)
            self.assertEqual(code, 400, (bad, v))
        self.assertEqual(self.status_of("vm-notice2")["status"], "RUNNING", "a refused preemption did something")


class BodyMetadata(unittest.TestCase):
    """metadata.BodyServer, a node body's metadata server: the documented
    header rule, leaves and listings, and wait_for_change with and without
    last_etag (without one it waits for a change from the value it found)."""

    def setUp(self):
        import metadata
        self.tree = {"instance": {"preempted": "FALSE", "name": "n1"}, "project": {"projectId": "p"}}
        self.server = metadata.BodyServer("127.0.0.1", 0, lambda: copy.deepcopy(self.tree))
        self.url = "http://127.0.0.1:%d/computeMetadata/v1/" % self.server.httpd.server_address[1]

    def tearDown(self):
        self.server.close()

    def get(self, path, flavor=True):
        req = urllib.request.Request(self.url + path, headers={"Metadata-Flavor": "Google"} if flavor else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode(), r.headers.get("ETag")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), None

    def test_leaf_and_header(self):
        self.assertEqual(self.get("instance/preempted")[:2], (200, "FALSE"))
        self.assertEqual(self.get("instance/preempted", flavor=False)[0], 403)
        self.assertEqual(self.get("instance/nope")[0], 404)
        self.assertIn("preempted\n", self.get("instance/")[1])

    def test_wait_for_change(self):
        t0 = time.time()
        code, value, etag = self.get("instance/preempted?wait_for_change=true&timeout=1")
        self.assertEqual((code, value), (200, "FALSE"))
        self.assertGreaterEqual(time.time() - t0, 0.9, "returned at once without a change")
        threading.Timer(0.5, lambda: self.tree["instance"].update(preempted="TRUE")).start()
        t0 = time.time()
        code, value, etag2 = self.get("instance/preempted?wait_for_change=true&timeout=20&last_etag=" + etag)
        self.assertEqual((code, value), (200, "TRUE"))
        self.assertLess(time.time() - t0, 5)
        self.assertNotEqual(etag, etag2)
        # An old ETag: the new value at once.
        t0 = time.time()
        self.assertEqual(self.get("instance/preempted?wait_for_change=true&last_etag=" + etag)[1], "TRUE")
        self.assertLess(time.time() - t0, 2)


class FakeQemu(vms.VMs):
    """vms.VMs whose machines are `sleep` processes (a fake QEMU that a test
    can end, as a guest's poweroff ends QEMU): no namespace, no network."""

    def __init__(self, state_dir):
        self.dir = state_dir
        self.lock = threading.Lock()
        self.procs = {}
        self.boots = []

    def start(self, inst):
        with self.lock:
            self.procs[inst.name] = [subprocess.Popen(["sleep", "300"])]
            self.boots.append(inst.name)
        return None

    def _halt(self, inst):
        with self.lock:
            procs = self.procs.pop(inst.name, [])
        for p in procs:
            p.kill()
            p.wait()

    def close(self):
        for name in list(self.procs):
            self._halt(type("Named", (), {"name": name}))


class GuestShutdownWatch(unittest.TestCase):
    """world.py notices a machine that ended by itself (vms.VMs.alive false:
    QEMU exited) and stops its instance as Compute Engine stops one whose
    guest powered off; instances.start boots it again."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.vms = FakeQemu(self.tmp.name)
        faults = FaultSet(1)
        faults.update({"op_delay": 0.2})          # STOPPING lasts long enough to be seen
        self.world = World(["pbx-test"], [ZONE], faults, self.vms, "127.0.88.0/25", "127.0.89.0/25",
                           "http://127.0.0.1:1/compute/v1/")

    def tearDown(self):
        self.world.shutdown()
        self.tmp.cleanup()

    def until(self, what, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            with self.world.lock:
                if what():
                    return
            time.sleep(0.02)
        self.fail("timed out")

    def running(self, name):
        link = "http://127.0.0.1:1/compute/v1/projects/pbx-test/zones/%s/instances/%s" % (ZONE, name)
        res = {"name": name, "selfLink": link, "networkInterfaces": [{}], "status": "PENDING"}
        spec = {"nat": False, "machine_type": "n1-standard-1", "accelerators": []}
        with self.world.lock:
            op = self.world.insert("pbx-test", ZONE, res, spec, "test", None)
        self.until(lambda: op.res["status"] == "DONE")
        return self.world.instances[("pbx-test", ZONE, name)]

    def op_types(self):
        with self.world.lock:
            return [op.res["operationType"] for op in self.world.ops.values()]

    def test_qemu_exit_terminates_and_start_boots_again(self):
        inst = self.running("vm-w")
        qemu = self.vms.procs["vm-w"][0]
        self.assertTrue(self.vms.alive(inst))
        seen = []
        qemu.terminate()                          # the guest powered off: QEMU exits
        end = time.time() + 5
        while inst.res["status"] != "TERMINATED" and time.time() < end:
            if not seen or seen[-1] != inst.res["status"]:
                seen.append(inst.res["status"])
            time.sleep(0.01)
        self.assertEqual(seen + [inst.res["status"]], ["RUNNING", "STOPPING", "TERMINATED"])
        self.assertIn("lastStopTimestamp", inst.res)
        self.assertEqual(self.op_types().count("compute.instances.guestTerminate"), 1)
        self.assertIsNone(self.vms.alive(inst), "power_off let the machine go")
        with self.world.lock:
            op = self.world.power("pbx-test", ZONE, "vm-w", True, "test", None)
        self.until(lambda: op.res["status"] == "DONE" and inst.res["status"] == "RUNNING")
        self.assertEqual(self.vms.boots, ["vm-w", "vm-w"])
        self.assertTrue(self.vms.alive(inst))

    def test_instances_stop_is_no_guest_shutdown(self):
        inst = self.running("vm-s")
        with self.world.lock:
            op = self.world.power("pbx-test", ZONE, "vm-s", False, "test", None)
        self.until(lambda: op.res["status"] == "DONE")
        time.sleep(1.2)                           # two looks of the watch
        self.assertEqual(inst.res["status"], "TERMINATED")
        self.assertNotIn("compute.instances.guestTerminate", self.op_types())


class QmpCommand(unittest.TestCase):
    """vms.qmp_command, which presses a VM's power button at a preemption
    (QMP system_powerdown), against a fake QEMU monitor on a unix socket:
    the greeting and capabilities first, events before a reply skipped,
    an error reply and a missing socket said."""

    def serve(self, replies):
        """A one-connection fake monitor: greets, then answers each command
        read with the next of REPLIES (lists of lines); records commands."""
        import socket
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        path = os.path.join(self.tmp.name, "qmp.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(1)
        self.got = []

        def run():
            conn, _ = srv.accept()
            f = conn.makefile("rwb")
            f.write(b'{"QMP": {"version": {}, "capabilities": []}}\n')
            f.flush()
            for lines in replies:
                line = f.readline()
                if not line:
                    break
                self.got.append(json.loads(line)["execute"])
                for r in lines:
                    f.write(r.encode() + b"\n")
                f.flush()
            conn.close()
            srv.close()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.addCleanup(t.join, 5)
        return path

    def test_powerdown(self):
        path = self.serve([['{"return": {}}'],
                           ['{"event": "POWERDOWN", "timestamp": {}}', '{"return": {}}']])
        self.assertIsNone(vms.qmp_command(path, "system_powerdown"))
        self.assertEqual(self.got, ["qmp_capabilities", "system_powerdown"])

    def test_error_reply(self):
        path = self.serve([['{"return": {}}'],
                           ['{"error": {"class": "GenericError", "desc": "no ACPI"}}']])
        why = vms.qmp_command(path, "system_powerdown")
        self.assertIn("system_powerdown: no ACPI", why or "")

    def test_no_socket(self):
        why = vms.qmp_command("/nonexistent/qmp.sock", "system_powerdown", timeout=1)
        self.assertIn("/nonexistent/qmp.sock", why or "")


class VmApi(Base):
    """What a booted VM's head reaches of the emulator (vms.py's forward of
    compute.googleapis.com and storage.googleapis.com): its metadata
    server's tokens come from /_emulator/metadata-token over a unix socket
    (metadata.socket_mint), only for a service account the project has, and
    are good at the compute and storage APIs; a request by one API's host
    name gets that API alone, never another nor the emulator's controls."""

    ARGS = Base.ARGS + ("--bucket", "pbx-vm-data")

    EMAIL = "vm-head@pbx-test.iam.gserviceaccount.com"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        cls.emu.control("POST", "service-accounts", {"client_email": cls.EMAIL, "public_key_pem": pem})

    def relay(self):
        """A unix socket relayed to the emulator's port (socat's part in
        vms.py); its path."""
        import socket
        import socketserver
        path = os.path.join(self.tmp.name, "api.sock")
        port = int(urllib.parse.urlsplit(self.emu.url).port)

        class Relay(socketserver.BaseRequestHandler):
            def handle(self):
                up = socket.create_connection(("127.0.0.1", port))
                def pump(a, b):
                    while True:
                        data = a.recv(65536)
                        if not data:
                            b.shutdown(socket.SHUT_WR)
                            return
                        b.sendall(data)
                t = threading.Thread(target=pump, args=(up, self.request), daemon=True)
                t.start()
                pump(self.request, up)
                t.join(10)
                up.close()
        if os.path.exists(path):
            os.unlink(path)
        server = socketserver.ThreadingUnixStreamServer(path, Relay)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return path

    def test_metadata_token_over_the_socket(self):
        import metadata
        mint = metadata.socket_mint(self.relay())
        before = self.emu.control("GET", "calls")["metadata_tokens"].get(self.EMAIL, 0)
        reply = mint(self.EMAIL, ["https://www.googleapis.com/auth/cloud-platform"])
        self.assertEqual(reply["token_type"], "Bearer")
        self.assertGreater(reply["expires_in"], 0)
        code, value = self.emu.call("GET", "zones/%s/instances" % ZONE, token=reply["access_token"])
        self.assertEqual(code, 200, value)
        self.assertEqual(self.emu.control("GET", "calls")["metadata_tokens"][self.EMAIL], before + 1)
        with self.assertRaises(OSError):     # an account the project does not have
            mint("nobody@pbx-test.iam.gserviceaccount.com", ["https://www.googleapis.com/auth/cloud-platform"])

    def test_cloud_host_name_gets_the_api_alone(self):
        host = {"Host": "compute.googleapis.com"}
        for path in ("/_emulator/state", "/token"):
            code, _, value = self.emu.raw("POST" if path == "/token" else "GET", self.emu.url + path, b"", host)
            self.assertEqual((code, reason(value)), (404, "notFound"), path)
        code, _, value = self.emu.raw("GET", self.emu.base + "projects/pbx-test/zones/%s/instances" % ZONE,
                                      None, dict(host, Authorization="Bearer " + self.emu.token))
        self.assertEqual(code, 200, value)
        # Compute Engine's name is not Cloud Storage's
        code, _, value = self.emu.raw("GET", self.emu.url + "/storage/v1/b/pbx-vm-data/o", None,
                                      dict(host, Authorization="Bearer " + self.emu.token))
        self.assertEqual((code, reason(value)), (404, "notFound"))

    def test_storage_host_name_gets_storage_alone(self):
        """storage.googleapis.com (a head staging data with its own
        identity): the JSON API with a metadata-server token, nothing else."""
        import metadata
        host = {"Host": "storage.googleapis.com"}
        token = metadata.socket_mint(self.relay())(self.EMAIL, ["https://www.googleapis.com/auth/cloud-platform"])
        auth = dict(host, Authorization="Bearer " + token["access_token"])
        code, _, value = self.emu.raw("GET", self.emu.url + "/storage/v1/b/pbx-vm-data/o", None, auth)
        self.assertEqual(code, 200, value)
        self.assertEqual(self.emu.control("GET", "storage")["principals"].get(self.EMAIL), {"objects.list": 1},
                         "the call is counted as the account's")
        for method, path in (("GET", "/_emulator/state"), ("POST", "/token"),
                             ("GET", "/compute/v1/projects/pbx-test/zones/%s/instances" % ZONE)):
            code, _, value = self.emu.raw(method, self.emu.url + path, b"" if method == "POST" else None, auth)
            self.assertEqual((code, reason(value)), (404, "notFound"), path)


if __name__ == "__main__":
    unittest.main(verbosity=2)
