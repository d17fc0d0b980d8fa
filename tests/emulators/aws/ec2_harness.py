#!/usr/bin/env python3
"""ec2_harness.py - EC2 for tests: moto_server (moto[server], pinned in
scripts/test-requirements.txt) on 127.0.0.1 with signature and credential
checking on, a fault-injecting proxy in front of it, and node bodies (or
booted VMs) for its running instances.

    python3 ec2_harness.py --state-dir D --env-file F --node-body-helper H
        [--login-user U] [--vpc 127.0.0.0/16] [--subnet 127.0.60.0/24 ...]
        [--throttle 0.3] [--capacity SUBNET_OR_TYPE ...] [--vcpu-limit TYPE ...]
        [--no-bodies] [--image-delay 1.0]
    python3 ec2_harness.py --state-dir D --env-file F --backend vm --vm-image DIR
        --vpc 10.94.0.0/16 --subnet 10.94.1.0/24 --public-block 127.0.94.0/24

Setup, before authentication is switched on (POST /moto-api/reset-auth 0):
an IAM user `pbx` with an access key and ec2:* (what pbx signs with), an
IAM user `admin` (the harness's own calls), a role assumed through STS (a
session token), a VPC and subnets in loopback blocks (instances then get
loopback private addresses and no public one).  The env file (JSON) holds
the proxy's URL, moto's URL, the keys, the subnet ids and an AMI id; it is
written once everything is ready.

The proxy (the URL pbx is given) forwards every request unchanged to moto,
except, chosen at random or by rule, answers EC2 would give and moto never
does: RequestLimitExceeded (HTTP 503) with probability --throttle (seeded
by --seed, and always on the first call),
InsufficientInstanceCapacity (HTTP 500) for RunInstances into a subnet id
or of an instance type listed with --capacity (a subnet may be given by its
CIDR block), VcpuLimitExceeded (HTTP 400)
for RunInstances of a type listed with --vcpu-limit, InvalidParameterValue
(HTTP 400) for RunInstances naming an instance profile the account does
not have (setup makes one, pbx-head of role pbx-role, for heads: moto
itself answers IAM's NoSuchEntity), DependencyViolation (HTTP 400) for
DeleteSecurityGroup of a group an instance that is not terminated is in
(moto deletes it).  POST /_harness/capacity with a JSON list replaces
--capacity's while the harness runs.  GET /_harness/calls
counts the calls by action (and `pricing`: GetProducts calls;
`role_credentials`: credential sets the bodies' IMDS gave out, by role;
`s3`: S3 requests by who signed them and what they were,
"PRINCIPAL OPERATION": the user's name or role:ROLE for a role's
instance credentials, ListObjectsV2, GetObject, PutObject, ...).  S3 is
moto's, reached through the proxy (clouds.aws.s3_endpoint: the proxy's
URL); the role and `admin` may use it, the user `pbx` may not.

A body whose instance has an instance profile finds its role's temporary
credentials in its IMDS (meta-data/iam/security-credentials/ROLE, from
STS AssumeRole on moto, so moto checks them as any other): the head's own
identity (docs/head-identity.md).

The Price List Query API (pricing.py): a POST whose X-Amz-Target is
AWSPriceListService.* is answered by the proxy itself (GetProducts over a
fixture catalogue, SigV4 checked against the IAM keys below), never
counted, throttled or forwarded.  So is Service Quotas
(servicequotas.py: X-Amz-Target ServiceQuotasV20190624.*, the EC2 vCPU
quotas; --service-quota CODE=VCPUS gives the account a value of its own,
`viewer` may not read them): moto's Service Quotas knows VPC quotas only.

Bodies: every 0.2 s the harness lists moto's instances; each running one
with a loopback private address gets a node body (tests/emulators/gce's
Bodies, i.e. pbx-node-body, i.e. the local provider's code) listening on
that address, port 22, accepting the instance's key pair (from
DescribeKeyPairs IncludePublicKey) for --login-user, who gets passwordless
sudo as a cloud image's default user has; a stopped or terminated
instance's body is stopped, and a stopped one that is started again gets a
new body.  Each body has an /etc/hosts of its own (bodies.py, `own_hosts`),
as a VM has.  Addresses outside 127.0.0.0/8 are never used.

Power and images (lifecycle.py, patched into moto here): StopInstances
leaves an instance `stopping` until its body or VM is off, then `stopped`;
StartInstances makes it `pending`, then `running`; CreateImage checks the
name (EC2's characters, unique in the account) and the instance's state,
reboots a running instance unless NoReboot, tags the snapshot too, and
leaves the AMI `pending` until the disk is copied (with bodies: after
--image-delay seconds), then `available` (or `failed`).

Booted VMs (--backend vm --vm-image DIR, an image made by tests/vm/image.sh
ec2-stock or ec2-baked): every running instance is a QEMU machine
(tests/emulators/gce/vms.py with the EC2 flavour below) in a network
namespace of the harness's own, whose bridge is the one --subnet (a
private block: its addresses exist only in that namespace); the instance's
private address is its DHCP lease there.  IMDS (imds.py) serves each VM
its metadata, the key pair's key and the RunInstances UserData, IMDSv2
only when the instance was launched with HttpTokens required.  The
subnet maps public addresses on launch, taken from --public-block (a
loopback block): an instance's public address reaches its port 22.  The
SMBIOS says EC2 (uuid and serial "ec2..."), so cloud-init on the image
picks its Ec2 data source and makes the default user from the key pair.
A stopped instance's VM is powered off with its disk kept, and boots from
it when started again.  CreateImage copies the instance's disk (qcow2
overlay -> standalone raw image, qemu-img convert) into
STATE/vm/images/aws/AMI_ID with the kernel and initrd; RunInstances of
that AMI boots from the copy, and DeregisterImage removes it.  EC2's API
is served to the VMs by its own name, ec2.us-east-1.amazonaws.com (vms.py:
DNS to the gateway, https on its port 443 with a certificate from the
image's world CA, forwarded to this proxy; requests by that name get
EC2's API alone, never /_harness/, /moto-api/ or the pricing API), and
S3 by its names, s3.us-east-1.amazonaws.com and every bucket's virtual
host under it (BUCKET.s3.us-east-1.amazonaws.com, the address pbx forms:
requests by them go to moto's S3 as they are, whatever their path, and
are counted by host in `s3_hosts`), and a
VM launched with an instance profile finds its role's credentials in its
IMDS (RoleCredentials, meta-data/iam/, written again when renewed): a
head's own pbx calls EC2 as on EC2 (tests/vm/ec2-power.sh).

Spot interruptions (SpotInterruptions): POST /_harness/spot-interruption
on the proxy gives a running spot instance EC2's notice in its IMDS
(spot/instance-action), then terminates or stops it.  Node bodies get
their own IMDS on their private address, port 80 (--metadata-port;
Ec2BodyMetadata), named `instance-data` in ROOT/etc/hosts.

Private addresses are given as EC2 does (moto draws any address of the
block, the network's and the gateway's included): not the subnet's first
four nor its last, not one in use.
"""

import argparse
import base64
import hashlib
import ipaddress
import json
import logging
import os
import random
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "gce"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s3"))

import boto3  # noqa: E402
import imds  # noqa: E402
import moto.ec2.models.elastic_network_interfaces as moto_eni  # noqa: E402
from lifecycle import Lifecycle  # noqa: E402
from motofix import s3_signature_query_fix  # noqa: E402,F401 (test_imds.py uses it from here)
from moto.ec2.models import ec2_backends  # noqa: E402
from pricing import Pricing  # noqa: E402
from servicequotas import ServiceQuotas  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

REGION = "us-east-1"
EC2_NAME = "ec2.%s.amazonaws.com" % REGION
# S3's regional name: path-style on it, virtual-hosted on BUCKET.S3_NAME
# (the address pbx forms with no s3_endpoint: src/objstore/s3.c)
S3_NAME = "s3.%s.amazonaws.com" % REGION


def s3_named(host):
    """Whether HOST (lower case, no port) is S3's regional name or a
    bucket's virtual host under it."""
    return host == S3_NAME or host.endswith("." + S3_NAME)
NS = "http://ec2.amazonaws.com/doc/2016-11-15/"


def error_xml(code, message):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code>'
            "<Message>%s</Message></Error></Errors><RequestID>harness-%08x</RequestID></Response>"
            % (code, message, random.getrandbits(32))).encode()


class Faults:
    def __init__(self, args):
        self.throttle = args.throttle
        # Seeded, and the first call is always refused: a test asking for
        # throttling always gets some (an unseeded 30% over ~12 calls gave
        # none about once in a hundred runs).
        self.rng = random.Random(args.seed)
        self.capacity = set(args.capacity or [])
        self.by_cidr = {}       # subnet CIDR -> id, for POST /_harness/capacity
        self.vcpu = set(args.vcpu_limit or [])
        self.profiles = set()   # the account's instance profiles (setup makes them)
        self.owner = None       # the account (setup), whose instances DeleteSecurityGroup checks
        self.calls = Counter()
        self.faults = Counter()
        self.lock = threading.Lock()

    def answer(self, form):
        """(status, body) of an injected error for this request, or None."""
        action = form.get("Action", ["?"])[0]
        with self.lock:
            self.calls[action] += 1
            first = sum(self.calls.values()) == 1
            if self.throttle and (first or self.rng.random() < self.throttle):
                self.faults["RequestLimitExceeded"] += 1
                return 503, error_xml("RequestLimitExceeded", "Request limit exceeded.")
            if action == "DeleteSecurityGroup":
                user = self.group_user(form.get("GroupId", [""])[0])
                if user:
                    self.faults["DependencyViolation"] += 1
                    return 400, error_xml("DependencyViolation",
                                          "resource %s has a dependent object" % form["GroupId"][0])
            if action == "RunInstances":
                profile = form.get("IamInstanceProfile.Name", [None])[0]
                if profile is not None and profile not in self.profiles:
                    return 400, error_xml("InvalidParameterValue",
                                          "Value (%s) for parameter iamInstanceProfile.name is invalid. "
                                          "Invalid IAM Instance Profile name" % profile)
                itype = form.get("InstanceType", [""])[0]
                subnet = form.get("SubnetId", [""])[0]
                if itype in self.capacity or subnet in self.capacity:
                    self.faults["InsufficientInstanceCapacity"] += 1
                    return 500, error_xml("InsufficientInstanceCapacity",
                                          "We currently do not have sufficient %s capacity in the "
                                          "Availability Zone you requested (us-east-1a)." % itype)
                if itype in self.vcpu:
                    self.faults["VcpuLimitExceeded"] += 1
                    return 400, error_xml("VcpuLimitExceeded",
                                          "You have requested more vCPU capacity than your current "
                                          "vCPU limit of 0 allows for the instance bucket that the "
                                          "specified instance type belongs to.")
        return None


    def group_user(self, gid):
        """An instance that is not terminated and is in security group GID
        (EC2 refuses to delete such a group: DependencyViolation; moto does
        not), or None."""
        if not gid or self.owner is None:
            return None
        try:
            backend = ec2_backends[self.owner][REGION]
            for reservation in list(backend.reservations.values()):
                for inst in reservation.instances:
                    if inst.state != "terminated" and gid in [g.id for g in inst.security_groups]:
                        return inst.id
        except Exception:
            return None
        return None


class SpotInterruptions:
    """EC2's spot interruption on demand: POST /_harness/spot-interruption
    ?instance=ID[&notice=S][&action=terminate|stop|hibernate] (or those
    fields in a JSON body) on the proxy.  The instance must be a running
    spot instance (else 400).  From then on its IMDS serves
    meta-data/spot/instance-action {"action", "time"} (imds.spot_tree),
    and NOTICE seconds later (EC2: 120, the default; 0 to 600) the harness
    terminates it or, for stop and hibernate, stops it, as EC2 does; the
    notice is gone with that (a started instance has none).  At that end
    EC2 shuts the machine down as for any stop or termination: each of
    on_end is called with the instance id first (a booted VM's power
    button, bodies_loop), and when one says it pressed a button the action
    waits end_grace seconds for the guest's shutdown."""

    ACTIONS = ("terminate", "stop", "hibernate")

    def __init__(self):
        self.lock = threading.Lock()
        self.notices = {}          # instance id -> {"action", "time"}
        self.admin = None          # boto3 EC2 client on moto (set once it runs)
        self.on_notice = []        # functions of an instance id (booted VMs' IMDS files)
        self.on_end = []           # functions of an instance id: True when a button was pressed
        self.end_grace = 20.0      # s a guest has for its shutdown at the end of a notice

    def notice(self, iid):
        with self.lock:
            return self.notices.get(iid)

    def interrupt(self, body):
        """(HTTP status, JSON) of the control call."""
        iid = body.get("instance")
        action = body.get("action", "terminate")
        try:
            notice = float(body.get("notice", 120))
        except (TypeError, ValueError):
            return 400, {"error": "notice must be a number of seconds"}
        if action not in self.ACTIONS or not 0 <= notice <= 600:
            return 400, {"error": "action must be one of %s, notice 0 to 600 s" % "|".join(self.ACTIONS)}
        try:
            inst = self.admin.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
        except Exception as e:
            return 400, {"error": "no instance %s: %s" % (iid, e)}
        if inst["State"]["Name"] != "running" or inst.get("InstanceLifecycle") != "spot":
            return 400, {"error": "instance %s is %s %s, not a running spot instance"
                         % (iid, inst["State"]["Name"], inst.get("InstanceLifecycle", "on-demand"))}
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + notice))
        with self.lock:
            self.notices[iid] = {"action": action, "time": when}
        for f in self.on_notice:
            f(iid)
        timer = threading.Timer(notice, self._act, args=(iid, action))
        timer.daemon = True
        timer.start()
        return 200, {"instance": iid, "action": action, "time": when}

    def _act(self, iid, action):
        pressed = False
        for f in self.on_end:
            try:
                pressed = bool(f(iid)) or pressed
            except Exception as e:
                print("harness: the end of %s's notice: %s" % (iid, e), file=sys.stderr, flush=True)
        if pressed:
            time.sleep(self.end_grace)
        try:
            if action == "terminate":
                self.admin.terminate_instances(InstanceIds=[iid])
            else:
                self.admin.stop_instances(InstanceIds=[iid])
        except Exception as e:
            print("harness: spot interruption of %s: %s" % (iid, e), file=sys.stderr, flush=True)
        with self.lock:
            self.notices.pop(iid, None)


class RoleCredentials:
    """What EC2 gives an instance with an instance profile: temporary
    credentials of the profile's role (STS AssumeRole on moto, so moto
    checks their signatures as any other), one set per instance, renewed
    when under 5 minutes are left; served by its IMDS under
    meta-data/iam/ (info, security-credentials/ROLE).  Counted by role for
    GET /_harness/calls (`role_credentials`)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.iam = self.sts = None     # boto3 clients on moto (set once it runs)
        self.cache = {}                # instance id -> (role, credentials)
        self.issued = Counter()        # role -> sets issued

    def of(self, inst):
        """(role name, credentials dict) for INST's profile, or None."""
        if not inst.profile or self.iam is None:
            return None
        with self.lock:
            got = self.cache.get(inst.iid)
            if got and got[1]["Expiration"].timestamp() - time.time() > 300:
                return got
            name = inst.profile["Arn"].rsplit("/", 1)[-1]
            role = self.iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Roles"][0]
            c = self.sts.assume_role(RoleArn=role["Arn"], RoleSessionName=inst.iid)["Credentials"]
            self.cache[inst.iid] = got = (role["RoleName"], c)
            self.issued[role["RoleName"]] += 1
            return got

    def role_of(self, access_key):
        """The role whose instance credentials have ACCESS_KEY, or None."""
        with self.lock:
            for role, c in self.cache.values():
                if c["AccessKeyId"] == access_key:
                    return role
        return None

    @staticmethod
    def tree(inst, role, c):
        """meta-data/iam/ as EC2 serves it."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        info = {"Code": "Success", "LastUpdated": stamp, "InstanceProfileArn": inst.profile["Arn"],
                "InstanceProfileId": inst.profile.get("Id", "")}
        creds = {"Code": "Success", "LastUpdated": stamp, "Type": "AWS-HMAC",
                 "AccessKeyId": c["AccessKeyId"], "SecretAccessKey": c["SecretAccessKey"],
                 "Token": c["SessionToken"],
                 "Expiration": c["Expiration"].strftime("%Y-%m-%dT%H:%M:%SZ")}
        return {"info": json.dumps(info, indent=2),
                "security-credentials": {role: json.dumps(creds, indent=2)}}


class Ec2BodyMetadata:
    """IMDS for node bodies (gce's Bodies): each body's own imds.BodyServer
    on its private address, named `instance-data` in ROOT/etc/hosts as
    Amazon's DNS names it for a VM: the instance's id, address, life
    cycle, its role's credentials when it has an instance profile
    (RoleCredentials) and, once given, its spot interruption notice."""
    names = "instance-data instance-data.ec2.internal"

    def __init__(self, port, spot, roles=None):
        self.port = port
        self.spot = spot
        self.roles = roles

    @staticmethod
    def address(inst):
        return inst.res["networkInterfaces"][0]["networkIP"]

    def serve(self, inst):
        ip = self.address(inst)

        def doc():
            md = {"instance-id": inst.iid, "local-ipv4": ip, "instance-life-cycle": inst.lifecycle,
                  "instance-action": "none"}
            notice = self.spot.notice(inst.iid)
            if notice:
                md["spot"] = imds.spot_tree(notice)
            got = self.roles.of(inst) if self.roles else None
            if got:
                md["iam"] = RoleCredentials.tree(inst, *got)
            return {"meta-data": md, "dynamic": {}, "user-data": None, "http_tokens": inst.http_tokens}
        return imds.BodyServer(ip, self.port, doc)


def s3_operation(method, path, query):
    """The S3 operation of a path-style request (the ones pbx makes)."""
    q = urllib.parse.parse_qs(query, keep_blank_values=True)
    has_key = bool(path.lstrip("/").partition("/")[2])
    if method == "GET":
        return "GetObject" if has_key else ("ListObjectsV2" if q.get("list-type") == ["2"] else "ListObjects")
    if method == "PUT":
        return ("UploadPart" if "partNumber" in q else "PutObject") if has_key else "CreateBucket"
    if method == "POST":
        return "CompleteMultipartUpload" if "uploadId" in q else "CreateMultipartUpload"
    return {"HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(method, method)


class S3Calls:
    """S3 requests through the proxy, counted by the principal that signed
    them (a user's name, or role:ROLE for an instance's role credentials)
    and operation, for GET /_harness/calls (`s3`)."""

    def __init__(self, principals, roles):
        self.lock = threading.Lock()
        self.principals = principals   # access key id -> user name
        self.roles = roles
        self.calls = Counter()
        self.hosts = Counter()

    def count(self, method, path, authorization, host=""):
        """Counts the request when it is signed for S3 (by the host it was
        sent to as well, in hosts: a bucket's virtual host, S3's name or
        the proxy's loopback address); True if it was."""
        m = re.search(r"Credential=([^/,\s]+)/[^/]+/[^/]+/s3/", authorization or "")
        if not m:
            return False
        key = m.group(1)
        role = self.roles.role_of(key) if self.roles else None
        who = "role:" + role if role else self.principals.get(key, "unknown")
        url = urllib.parse.urlsplit(path)
        where = url.path
        if host.endswith("." + S3_NAME):   # virtual-hosted: the bucket is the host's
            where = "/" + host[:-len(S3_NAME) - 1] + url.path
        with self.lock:
            self.calls["%s %s" % (who, s3_operation(method, where, url.query))] += 1
            self.hosts[host] += 1
        return True


def make_proxy(moto_url, faults, pricing, spot=None, roles=None, quotas=None, s3=None):
    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _send(self, status, body, ctype="text/xml"):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _host(self):
            return (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()

        def _by_s3_name(self, body):
            """A request that came by S3's name (a VM through vms.py's
            gateway): forwarded to moto's S3 as it is (the host kept: SigV4
            signed it, and moto takes a virtual host's bucket from it),
            never the harness's controls even for a key named like one;
            True when it was."""
            if not s3_named(self._host()):
                return False
            self._forward(body)
            return True

        def _by_api_name(self):
            """A request that came by EC2's own name (a VM through vms.py's
            gateway): EC2's API alone, never the harness's controls, the
            pricing API or moto's own (/moto-api/); True when refused."""
            host = self._host()
            if host != EC2_NAME:
                return False
            if urllib.parse.urlsplit(self.path).path == "/" and \
                    not self.headers.get("X-Amz-Target"):
                return False
            self._send(404, error_xml("NotFound", "The requested URL was not found"))
            return True

        def do_GET(self):
            if self._by_s3_name(None) or self._by_api_name():
                return None
            if self.path == "/_harness/calls":
                with faults.lock:
                    body = json.dumps({"calls": faults.calls, "faults": faults.faults,
                                       "pricing": pricing.calls,
                                       "servicequotas": quotas.calls if quotas else 0,
                                       "role_credentials": dict(roles.issued) if roles else {},
                                       "s3": dict(s3.calls) if s3 else {},
                                       "s3_hosts": dict(s3.hosts) if s3 else {}}).encode()
                return self._send(200, body, "application/json")
            return self._forward(None)

        def do_PUT(self):
            """S3 alone (EC2's API is POST and GET)."""
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n)
            if self._by_s3_name(body) or self._by_api_name():
                return None
            return self._forward(body)

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n)
            if self._by_s3_name(body) or self._by_api_name():
                return None
            if self.headers.get("X-Amz-Target", "").startswith("AWSPriceListService."):
                status, text = pricing.get_products(self.headers, body)
                return self._send(status, text.encode(), "application/x-amz-json-1.1")
            if self.headers.get("X-Amz-Target", "").startswith("ServiceQuotasV20190624.") and quotas:
                status, text = quotas.answer(self.headers, body)
                return self._send(status, text.encode(), "application/x-amz-json-1.1")
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/_harness/spot-interruption" and spot is not None:
                return self._spot(url.query, body)
            if url.path == "/_harness/capacity":
                return self._capacity(body)
            form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
            injected = faults.answer(form)
            if injected:
                return self._send(*injected)
            return self._forward(body)

        def _capacity(self, body):
            """POST /_harness/capacity ["SUBNET_OR_CIDR_OR_TYPE", ...]: what
            --capacity lists from now on (an empty list: capacity everywhere)."""
            try:
                out = json.loads(body)
                if not isinstance(out, list) or not all(isinstance(c, str) for c in out):
                    raise ValueError("not a list of names")
            except ValueError as e:
                return self._send(400, json.dumps({"error": "bad JSON: %s" % e}).encode(), "application/json")
            with faults.lock:
                faults.capacity = set(faults.by_cidr.get(c, c) for c in out)
            self._send(200, json.dumps(sorted(faults.capacity)).encode(), "application/json")

        def _spot(self, query, body):
            try:
                fields = json.loads(body) if body.strip() else {}
                if not isinstance(fields, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                return self._send(400, json.dumps({"error": "bad JSON: %s" % e}).encode(), "application/json")
            fields = dict(urllib.parse.parse_qsl(query), **fields)
            code, value = spot.interrupt(fields)
            self._send(code, json.dumps(value).encode(), "application/json")

        def _forward(self, body):
            if s3 is not None:
                s3.count(self.command, self.path, self.headers.get("Authorization"), self._host())
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("connection", "content-length", "accept-encoding")}
            req = urllib.request.Request(moto_url + self.path, data=body, method=self.command,
                                         headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=120) as r:
                    status, data, rh = r.status, r.read(), r.headers
            except urllib.error.HTTPError as e:
                status, data, rh = e.code, e.read(), e.headers
            # S3's reply headers as the service sent them (ETag,
            # Content-Range, x-amz-checksum-crc32c: what a client checks),
            # the body's length ours; a HEAD's length is the object's
            self.send_response(status)
            for k, v in rh.items():
                if k.lower() not in ("connection", "transfer-encoding", "content-length",
                                     "server", "date"):
                    self.send_header(k, v)
            if "Content-Type" not in rh:
                self.send_header("Content-Type", "text/xml")
            head_len = rh.get("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", head_len or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_HEAD(self):
            """S3 alone (HeadObject, HeadBucket)."""
            if self._by_s3_name(None) or self._by_api_name():
                return None
            return self._forward(None)

        def do_DELETE(self):
            """S3 alone (DeleteObject, AbortMultipartUpload)."""
            if self._by_s3_name(None) or self._by_api_name():
                return None
            return self._forward(None)

    return Proxy


class Addresses:
    """EC2's address rules for moto's ENIs: a private address of the
    subnet that is none of its first four or its last (EC2 reserves them)
    and not given out before in this run; a public address from a loopback
    block (--public-block) in place of moto's 54.214.x.y."""

    def __init__(self, public_block):
        self.lock = threading.Lock()
        self.used = set()
        self.public = ipaddress.ip_network(public_block).hosts() if public_block else None
        self._random_private = moto_eni.random_private_ip
        self._random_public = moto_eni.random_public_ip
        moto_eni.random_private_ip = self.private
        moto_eni.random_public_ip = self.public_ip

    def private(self, cidr=None, ipv6=False):
        if not cidr or ipv6:
            return self._random_private(cidr, ipv6)
        net = ipaddress.ip_network(cidr)
        first, last = int(net.network_address) + 4, int(net.broadcast_address) - 1
        with self.lock:
            for _ in range(64):
                ip = str(ipaddress.ip_address(random.randint(first, last))) if last >= first else None
                if ip and ip not in self.used:
                    self.used.add(ip)
                    return ip
            free = [str(ipaddress.ip_address(a)) for a in range(first, last + 1)
                    if str(ipaddress.ip_address(a)) not in self.used]
            if free:
                self.used.add(free[0])
                return free[0]
        return self._random_private(cidr, ipv6)    # a full subnet: as moto does

    def public_ip(self):
        if self.public is None:
            return self._random_public()
        with self.lock:
            ip = next(self.public, None)
        if ip is None:
            raise RuntimeError("--public-block is used up")
        return str(ip)


def ec2_uuid(iid):
    """The SMBIOS uuid (and serial) of an instance: "ec2" first, as on EC2."""
    h = "ec2" + hashlib.sha256(iid.encode()).hexdigest()[:29]
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


class Ec2Flavour:
    """EC2's side of a booted VM (vms.py): IMDS, ec2.internal names, EC2's
    SMBIOS.  Instances are VmInst."""
    metadata_server = ["python3", os.path.join(HERE, "imds.py")]
    domains = ["ec2.internal"]
    dns = {"instance-data": "169.254.169.254"}
    # EC2's API and S3 by the names pbx forms for the region when no
    # endpoint is configured (src/cloud/aws/aws.c, src/objstore/s3.c: a
    # bucket's virtual host under S3's name): vms.py resolves them to the
    # gateway (S3's name with every name under it), whose port 443 serves
    # them with a world-CA certificate (the "*." name: any bucket) and
    # forwards to the harness's proxy (never to moto directly)
    api_names = (EC2_NAME, S3_NAME, "*." + S3_NAME)

    def __init__(self, spot=None, roles=None):
        self.spot = spot           # SpotInterruptions, or None
        self.roles = roles         # RoleCredentials, or None
        self.written = {}          # instance id -> AccessKeyId in its IMDS document

    @staticmethod
    def metadata_args(sock):
        """IMDS needs nothing from the harness: credentials are in the document."""
        return []

    def renewed(self, inst):
        """Whether INST's role credentials were renewed (RoleCredentials
        renews a set with under 5 minutes left) since its IMDS document
        was written: the document is then written again."""
        if not self.roles or not inst.profile or inst.iid not in self.written:
            return False
        got = self.roles.of(inst)
        return bool(got) and got[1]["AccessKeyId"] != self.written[inst.iid]

    @staticmethod
    def addresses(inst):
        return inst.ip, inst.public_ip

    @staticmethod
    def mac(ip):
        return "0e:00:" + ":".join("%02x" % b for b in ipaddress.ip_address(ip).packed)

    @staticmethod
    def dhcp_name(inst):
        return "ip-" + inst.ip.replace(".", "-")

    @staticmethod
    def smbios(inst):
        u = ec2_uuid(inst.name)
        return ["type=0,vendor=Amazon EC2",
                "type=1,manufacturer=Amazon EC2,product=%s,serial=%s,uuid=%s" % (inst.type, u, u),
                "type=3,manufacturer=Amazon EC2,asset=Amazon EC2"]

    def metadata(self, inst, ip, nat, vms):
        i, mac = inst.desc, self.mac(ip)
        host = "ip-%s.ec2.internal" % ip.replace(".", "-")
        az = i["Placement"]["AvailabilityZone"]
        groups = i.get("SecurityGroups", [])
        nic = {"device-number": "0", "interface-id": "eni-" + inst.name[2:], "local-hostname": host,
               "local-ipv4s": ip, "mac": mac, "owner-id": inst.owner,
               "security-group-ids": "\n".join(g["GroupId"] for g in groups),
               "security-groups": "\n".join(g["GroupName"] for g in groups),
               "subnet-id": i.get("SubnetId", ""), "subnet-ipv4-cidr-block": inst.cidr,
               "vpc-id": i.get("VpcId", ""), "vpc-ipv4-cidr-block": inst.vpc_cidr,
               "vpc-ipv4-cidr-blocks": inst.vpc_cidr}
        md = {"ami-id": i["ImageId"], "ami-launch-index": str(i.get("AmiLaunchIndex", 0)),
              "ami-manifest-path": "(unknown)",
              "block-device-mapping": {"ami": "/dev/xvda", "root": "/dev/xvda"},
              "hostname": host, "instance-action": "none", "instance-id": inst.name,
              "instance-life-cycle": "spot" if i.get("InstanceLifecycle") == "spot" else "on-demand",
              "instance-type": inst.type, "local-hostname": host, "local-ipv4": ip, "mac": mac,
              "network": {"interfaces": {"macs": {mac: nic}}},
              "placement": {"availability-zone": az, "availability-zone-id": "use1-az1",
                            "region": REGION},
              "profile": "default-hvm", "reservation-id": inst.reservation,
              "security-groups": nic["security-groups"],
              "services": {"domain": "amazonaws.com", "partition": "aws"}}
        notice = self.spot.notice(inst.name) if self.spot else None
        if notice:
            md["spot"] = imds.spot_tree(notice)
        got = self.roles.of(inst) if self.roles and inst.profile else None
        if got:
            md["iam"] = RoleCredentials.tree(inst, *got)
            self.written[inst.iid] = got[1]["AccessKeyId"]
        if inst.key:
            md["public-keys"] = {"0=%s" % i.get("KeyName", ""): {"openssh-key": inst.key + "\n"}}
        if nat:
            pub = "ec2-%s.compute-1.amazonaws.com" % nat.replace(".", "-")
            md.update({"public-ipv4": nat, "public-hostname": pub})
            nic.update({"public-ipv4s": nat, "public-hostname": pub, "ipv4-associations": {nat: ip}})
        doc = {"accountId": inst.owner, "architecture": "x86_64", "availabilityZone": az,
               "imageId": i["ImageId"], "instanceId": inst.name, "instanceType": inst.type,
               "pendingTime": str(i.get("LaunchTime", "")), "privateIp": ip, "region": REGION,
               "version": "2017-09-30", "billingProducts": None, "devpayProductCodes": None,
               "marketplaceProductCodes": None, "kernelId": None, "ramdiskId": None}
        return {"meta-data": md,
                "dynamic": {"instance-identity": {"document": json.dumps(doc, indent=2),
                                                  "pkcs7": "MIAGCSqGSIb3DQEHAqCAMIACAQEx",
                                                  "signature": "c2lnbmF0dXJl",
                                                  "rsa2048": "MIAGCSqGSIb3DQEHAqCAMIACAQEx"}},
                "user-data": inst.user_data,
                "http_tokens": i.get("MetadataOptions", {}).get("HttpTokens", "optional")}


class VmInst:
    """What vms.py and Ec2Flavour need of a moto instance; `spec` names
    the disk copy of the AMI it was launched from when CreateImage made
    it here (vms.VMs.image_of)."""

    def __init__(self, desc, reservation, owner, key, user_data, cidr, vpc_cidr, image_dir=None):
        self.project, self.zone = "aws", REGION
        self.spec = {"image": {"_dir": image_dir}} if image_dir else {}
        self.name = self.iid = desc["InstanceId"]
        self.desc = desc
        self.profile = desc.get("IamInstanceProfile")   # {"Arn", "Id"}, or None
        self.type = desc["InstanceType"]
        self.ip = desc["PrivateIpAddress"]
        self.public_ip = desc.get("PublicIpAddress")
        self.reservation, self.owner = reservation, owner
        self.key, self.user_data = key, user_data
        self.cidr, self.vpc_cidr = cidr, vpc_cidr


class Inst:
    """What gce's Bodies needs of an instance."""

    def __init__(self, iid, ip, user, key, lifecycle="on-demand", http_tokens="optional", profile=None):
        # the body's root is STATE/bodies/aws/n/ID: short, since slurmd's
        # socket paths under it must stay within 108 bytes
        self.project = "aws"
        self.zone = "n"
        self.name = iid[-12:]
        self.iid = iid
        self.lifecycle = lifecycle
        self.http_tokens = http_tokens
        self.profile = profile     # its IamInstanceProfile {"Arn", "Id"}, or None
        self.res = {"metadata": {"items": [{"key": "ssh-keys", "value": "%s:%s" % (user, key)}]},
                    "networkInterfaces": [{"networkIP": ip}]}


def bodies_loop(args, admin, stop, backend, owner, life, spot):
    """Keeps BACKEND (gce's Bodies, or vms.VMs) in step with moto's
    instances: one body or VM per running instance, powered off (its disk
    kept) once the instance is stopping, and started again when it runs
    again; stopped for good once the instance is shutting down or gone.
    Does LIFE's reboots and disk copies (lifecycle.py)."""
    vm = args.backend == "vm"
    live = {}               # instance id -> Inst
    off = {}                # instance id -> Inst of a stopped instance
    pool_lock = threading.Lock()
    starting = set()
    busy = set()            # ids being powered off, rebooted or copied
    nets = {}               # subnet id -> (subnet CIDR, VPC CIDR)
    power_off = getattr(backend, "power_off", backend.stop)

    def noticed(iid):
        """A spot notice: a VM's IMDS file says so now (a body's server asks
        live).  Only the metadata: EC2 shuts the machine down at the end of
        its notice, not at its start (Compute Engine's power button,
        vms.VMs.preempt_notice)."""
        with pool_lock:
            inst = live.get(iid)
        if inst is not None and hasattr(backend, "refresh"):
            backend.refresh(inst)
    spot.on_notice.append(noticed)

    def ending(iid):
        """The end of a spot notice: EC2 shuts the machine down, so a VM's
        power button is pressed (the guest's systemd stops its units: the
        preemption watcher's ExecStop) before the instance is terminated
        or stopped.  True when it was."""
        with pool_lock:
            inst = live.get(iid)
        if inst is None or not hasattr(backend, "power_button"):
            return False
        why = backend.power_button(inst)
        if why:
            print("harness: %s: the power button: %s" % (iid, why), file=sys.stderr, flush=True)
        return not why
    spot.on_end.append(ending)

    tries = Counter()       # instance id -> failed starts of its kept disk

    def start(iid, inst, again=False):
        try:
            why = backend.start(inst)
        except Exception as e:   # a failure, not a silent end of this thread
            why = "%s: %s" % (type(e).__name__, e)
        retry = bool(why) and again and tries[iid] < 3
        if why and retry:
            power_off(inst)          # a restart keeps its disk: tried again next round
        elif why:
            try:
                backend.stop(inst)   # a body half made leaves nothing behind
            except Exception as e:
                why += "; and its clean-up: %s" % e
        with pool_lock:
            starting.discard(iid)
            if why:
                tries[iid] += 1
                print("harness: %s of %s%s: %s" % ("VM" if vm else "body", iid,
                                                  " (restart, tried again)" if retry else "", why),
                      file=sys.stderr, flush=True)
                if retry:
                    off[iid] = inst
            else:
                tries.pop(iid, None)
                live[iid] = inst

    def halt(iid, inst):
        power_off(inst)
        with pool_lock:
            busy.discard(iid)
            off[iid] = inst
        life.stopped(iid)

    def copy(ami, iid, inst, reboot):
        """CreateImage's disk copy; of a running instance without NoReboot
        with a reboot around it, as EC2 does."""
        err = None
        if reboot:
            power_off(inst)
        if hasattr(backend, "make_image"):
            res = {"name": ami}
            try:
                err = backend.make_image(inst, "aws", res)
            except Exception as e:   # a backend failure fails the image
                err = str(e)
            life.image_done(ami, err, res.get("_dir"))
        else:
            time.sleep(args.image_delay)
            life.image_done(ami)
        why = backend.start(inst) if reboot else None
        with pool_lock:
            busy.discard(iid)
            if why:
                live.pop(iid, None)
        if why:
            print("harness: reboot of %s: %s" % (iid, why), file=sys.stderr, flush=True)

    def make_inst(i, reservation, key):
        iid, ip = i["InstanceId"], i["PrivateIpAddress"]
        if not vm:
            return Inst(iid, ip, args.login_user, key,
                        "spot" if i.get("InstanceLifecycle") == "spot" else "on-demand",
                        i.get("MetadataOptions", {}).get("HttpTokens", "optional"),
                        i.get("IamInstanceProfile"))
        sid = i.get("SubnetId")
        if sid not in nets:
            sub = admin.describe_subnets(SubnetIds=[sid])["Subnets"][0]
            vpc = admin.describe_vpcs(VpcIds=[sub["VpcId"]])["Vpcs"][0]
            nets[sid] = (sub["CidrBlock"], vpc["CidrBlock"])
        ud = admin.describe_instance_attribute(InstanceId=iid, Attribute="userData")
        ud = ud.get("UserData", {}).get("Value")
        ud = base64.b64decode(ud).decode("utf-8", "replace") if ud else None
        return VmInst(i, reservation, owner, key, ud, *nets[sid], life.disk_of(i["ImageId"]))

    while not stop.is_set():
        try:
            seen, resv = {}, {}
            for page in admin.get_paginator("describe_instances").paginate():
                for res in page["Reservations"]:
                    for i in res["Instances"]:
                        seen[i["InstanceId"]] = i
                        resv[i["InstanceId"]] = res["ReservationId"]
            keys = {}
            for iid, i in seen.items():
                state = i["State"]["Name"]
                with pool_lock:
                    known = iid in live or iid in starting or iid in busy
                    again = off.pop(iid, None) if state == "running" and not known else None
                if again is not None:             # StartInstances: the same disk
                    if vm:   # EC2 gives a started instance a new public address
                        again.desc, again.public_ip = i, i.get("PublicIpAddress")
                    with pool_lock:
                        starting.add(iid)
                    threading.Thread(target=start, args=(iid, again, True), daemon=True).start()
                    continue
                if state == "stopping":
                    with pool_lock:
                        inst = None if iid in busy or iid in starting else live.pop(iid, None)
                        if inst is not None:
                            busy.add(iid)
                        idle = iid not in busy and iid not in starting
                    if inst is not None:
                        threading.Thread(target=halt, args=(iid, inst), daemon=True).start()
                    elif idle:
                        life.stopped(iid)         # it never had a body
                    continue
                if state == "running" and not known:
                    ip = i.get("PrivateIpAddress")
                    if not ip:
                        continue
                    if vm:
                        if not ipaddress.ip_address(ip) in ipaddress.ip_network(args.subnet[0]):
                            continue        # not on the VMs' network
                    elif not ipaddress.ip_address(ip).is_loopback:
                        continue            # never used: not ours to connect to
                    kn = i.get("KeyName")
                    if kn not in keys:
                        try:
                            kp = admin.describe_key_pairs(KeyNames=[kn], IncludePublicKey=True)
                            keys[kn] = kp["KeyPairs"][0]["PublicKey"].strip()
                        except Exception:
                            keys[kn] = None
                    if not keys[kn] and not vm:
                        continue
                    inst = make_inst(i, resv[iid], keys[kn])
                    with pool_lock:
                        starting.add(iid)
                    threading.Thread(target=start, args=(iid, inst), daemon=True).start()
            for ami, iid, no_reboot in life.take_copies():
                with pool_lock:
                    running = live.get(iid)
                    inst = running or off.get(iid)
                    busy.add(iid)
                threading.Thread(target=copy, args=(ami, iid, inst, running is not None and not no_reboot),
                                 daemon=True).start()
            shutdown_by_guest(admin, owner, seen, live, busy, starting, pool_lock, backend, life)
            if vm:
                with pool_lock:
                    running = list(live.values())
                for inst in running:        # an instance profile's credentials, renewed
                    if backend.flavour.renewed(inst):
                        backend.refresh(inst)
            with pool_lock:
                dead = lambda iid: (iid not in busy and (iid not in seen or seen[iid]["State"]["Name"]
                                                          in ("shutting-down", "terminated")))
                gone = [(iid, live.pop(iid)) for iid in list(live) if dead(iid)]
                gone += [(iid, off.pop(iid)) for iid in list(off) if dead(iid)]
            for iid, inst in gone:
                backend.stop(inst)
        except Exception as e:  # moto busy or shutting down: next round
            print("harness: bodies: %s" % e, file=sys.stderr, flush=True)
        stop.wait(0.2)
    with pool_lock:
        rest = list(live.values()) + list(off.values())
    for inst in rest:
        backend.stop(inst)


def moto_instance(owner, iid):
    """Moto's own Instance object of IID (this process runs moto)."""
    try:
        return ec2_backends[owner][REGION].get_instance(iid)
    except Exception:
        return None


DOWN_SINCE = {}   # instance id -> when its machine was first seen off (shutdown_by_guest)


def shutdown_by_guest(admin, owner, seen, live, busy, starting, pool_lock, backend, life):
    """An instance whose body or VM powered itself off (`systemctl
    poweroff`, autostop) while `running`: a body whose sshd has ended and
    which has no process left (gce's Bodies.alive: its guest's shutdown
    has completed), a VM whose QEMU ended.  EC2 stops it
    when its InstanceInitiatedShutdownBehavior is `stop` (the default),
    terminates it when `terminate`, and always terminates a one-time Spot
    instance; the stop is the guest's (StateReason
    Client.InstanceInitiatedShutdown).  The stopping branch of the loop
    then ends the rest of the body and keeps its disk."""
    with pool_lock:
        quiet = [(iid, inst) for iid, inst in live.items()
                 if iid not in busy and iid not in starting]
    now = time.time()
    for iid, inst in quiet:
        i = seen.get(iid)
        if i is None or i["State"]["Name"] != "running" or backend.alive(inst) is not False:
            DOWN_SINCE.pop(iid, None)
            continue
        # off on two looks at least a second apart: a machine that powered
        # off stays off, a moment's doubt (a pid file being rewritten) does not
        if now - DOWN_SINCE.setdefault(iid, now) < 1.0:
            continue
        DOWN_SINCE.pop(iid, None)
        how = admin.describe_instance_attribute(InstanceId=iid, Attribute="instanceInitiatedShutdownBehavior")
        how = how.get("InstanceInitiatedShutdownBehavior", {}).get("Value") or "stop"
        if how == "terminate" or i.get("InstanceLifecycle") == "spot":
            admin.terminate_instances(InstanceIds=[iid])
        else:
            admin.stop_instances(InstanceIds=[iid])
        life.guest_initiated(moto_instance(owner, iid))
        print("harness: %s shut itself down: %s" % (iid, "terminated" if how == "terminate" else "stopping"),
              file=sys.stderr, flush=True)


def setup(moto_url, args):
    """IAM users, a role session, the VPC and subnets; then auth on."""
    anon = dict(region_name=REGION, endpoint_url=moto_url, aws_access_key_id="setup",
                aws_secret_access_key="setup")
    iam = boto3.client("iam", **anon)
    allow = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["ec2:*", "sts:*", "iam:*"], "Resource": "*"}]})
    # S3 for the harness's own calls and the heads' role (a head with its
    # own identity stages its buckets itself, docs/data.md), not for the
    # user pbx signs as: what reaches S3 as that user is refused
    with_s3 = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["ec2:*", "sts:*", "iam:*", "s3:*"], "Resource": "*"}]})
    out = {}
    for user in ("pbx", "admin"):
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="all",
                            PolicyDocument=with_s3 if user == "admin" else allow)
        k = iam.create_access_key(UserName=user)["AccessKey"]
        out[user] = {"access_key": k["AccessKeyId"], "secret_key": k["SecretAccessKey"]}
    # a user who may only look (ec2:Describe*): pbx's first change is refused
    look = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["ec2:Describe*"], "Resource": "*"}]})
    iam.create_user(UserName="viewer")
    iam.put_user_policy(UserName="viewer", PolicyName="look", PolicyDocument=look)
    k = iam.create_access_key(UserName="viewer")["AccessKey"]
    out["viewer"] = {"access_key": k["AccessKeyId"], "secret_key": k["SecretAccessKey"]}
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]})
    role = iam.create_role(RoleName="pbx-role", AssumeRolePolicyDocument=trust)["Role"]
    iam.put_role_policy(RoleName="pbx-role", PolicyName="all", PolicyDocument=with_s3)
    # an instance profile for heads (docs/head-identity.md): RunInstances of
    # any other name is refused, as EC2 refuses a profile that does not exist
    iam.create_instance_profile(InstanceProfileName="pbx-head")
    iam.add_role_to_instance_profile(InstanceProfileName="pbx-head", RoleName="pbx-role")
    out["instance_profile"] = "pbx-head"
    sts = boto3.client("sts", **anon)
    c = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="pbx-test")["Credentials"]
    out["session"] = {"access_key": c["AccessKeyId"], "secret_key": c["SecretAccessKey"],
                      "token": c["SessionToken"]}
    ec2 = boto3.client("ec2", **anon)
    vpc = ec2.create_vpc(CidrBlock=args.vpc)["Vpc"]["VpcId"]
    out["vpc"] = vpc
    out["subnets"] = [ec2.create_subnet(VpcId=vpc, CidrBlock=s)["Subnet"]["SubnetId"]
                      for s in args.subnet]
    if args.public_block:
        # public addresses on launch (from --public-block), as a default VPC's subnets
        for sid in out["subnets"]:
            ec2.modify_subnet_attribute(SubnetId=sid, MapPublicIpOnLaunch={"Value": True})
    out["account"] = boto3.client("sts", **anon).get_caller_identity()["Account"]
    out["ami"] = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    req = urllib.request.Request(moto_url + "/moto-api/reset-auth", data=b"0", method="POST",
                                 headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(req).read()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--env-file", required=True)
    ap.add_argument("--node-body-helper")
    ap.add_argument("--login-user", default="pbx")
    ap.add_argument("--vpc", default="127.0.0.0/16")
    ap.add_argument("--subnet", action="append")
    ap.add_argument("--throttle", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1, help="seed for --throttle")
    ap.add_argument("--capacity", action="append")
    ap.add_argument("--vcpu-limit", action="append")
    ap.add_argument("--service-quota", action="append", metavar="CODE=VCPUS",
                    help="the account's value of an EC2 quota in Service Quotas (servicequotas.py)")
    ap.add_argument("--no-bodies", action="store_true")
    ap.add_argument("--metadata-port", type=int, default=80,
                    help="port of each node body's IMDS on its private address (0: none)")
    ap.add_argument("--image-delay", type=float, default=1.0,
                    help="seconds a CreateImage stays pending without VMs (with them: the disk copy)")
    ap.add_argument("--backend", choices=("body", "vm"), default="body",
                    help="what backs a running instance: a node body (default) or a booted VM")
    ap.add_argument("--vm-image", help="with --backend vm: a directory made by tests/vm/image.sh ec2-*")
    ap.add_argument("--vm-memory", type=int, default=1024, help="MiB of memory per VM")
    ap.add_argument("--vm-upstream", default="deb.debian.org:80",
                    help="where the VMs' apt traffic goes (host:port)")
    ap.add_argument("--public-block", help="loopback block of public addresses (subnets map "
                    "them on launch; with --backend vm, they reach the VMs' port 22)")
    args = ap.parse_args()
    loop = ipaddress.ip_network("127.0.0.0/8")
    if args.backend == "vm":
        if not args.vm_image:
            ap.error("--backend vm needs --vm-image DIR")
        if not args.subnet or len(args.subnet) != 1:
            ap.error("--backend vm needs exactly one --subnet (the VMs' network)")
        if not args.public_block:
            ap.error("--backend vm needs --public-block (the head is reached on it)")
        for s in args.subnet + [args.vpc]:
            if not ipaddress.ip_network(s).is_private or ipaddress.ip_network(s).subnet_of(loop):
                ap.error("%s: the VMs' network must be a private block (10/8, 172.16/12, 192.168/16)" % s)
    else:
        args.subnet = args.subnet or ["127.0.60.0/24"]
        for s in args.subnet + [args.vpc]:
            if not ipaddress.ip_network(s).subnet_of(loop):
                ap.error("%s is not inside 127.0.0.0/8" % s)
        if not args.no_bodies and not args.node_body_helper:
            ap.error("--node-body-helper is required unless --no-bodies")
    if args.public_block and not ipaddress.ip_network(args.public_block).subnet_of(loop):
        ap.error("--public-block %s is not inside 127.0.0.0/8" % args.public_block)
    if not ipaddress.ip_network(args.subnet[0]).subnet_of(ipaddress.ip_network(args.vpc)):
        ap.error("--subnet %s is not inside --vpc %s" % (args.subnet[0], args.vpc))
    os.makedirs(args.state_dir, exist_ok=True)
    for k in list(os.environ):
        if k.startswith("AWS_"):
            del os.environ[k]
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

    logging.getLogger("werkzeug").setLevel(logging.ERROR)   # no line per request
    Addresses(args.public_block)
    backend = None
    spot = SpotInterruptions()
    roles = RoleCredentials()
    # the proxy's socket first: the VMs' network forwards EC2's API to it
    # (its handler is set once moto runs)
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    proxy.daemon_threads = True
    if args.backend == "vm":
        import vms
        vms.reap_stale()
        backend = vms.VMs(args.vm_image, args.state_dir, 22, args.subnet[0], upstream=args.vm_upstream,
                          mem_mb=args.vm_memory, flavour=Ec2Flavour(spot, roles),
                          api="127.0.0.1:%d" % proxy.server_address[1])
    elif not args.no_bodies:
        from bodies import Bodies
        meta = Ec2BodyMetadata(args.metadata_port, spot, roles) if args.metadata_port else None
        backend = Bodies(args.node_body_helper, args.state_dir, 22, True, metadata=meta, own_hosts=True)
    life = Lifecycle(backend is not None, image_delay=args.image_delay)

    def dropped(ami):
        d = life.forget_disk(ami)
        if d and hasattr(backend, "drop_image"):
            backend.drop_image("aws", {"_dir": d})
    life.install(on_deregister=dropped)
    s3_signature_query_fix()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    moto_url = "http://127.0.0.1:%d" % moto.get_host_and_port()[1]
    env = setup(moto_url, args)
    # --capacity may name a subnet by its CIDR block (ids are moto's)
    by_cidr = dict(zip(args.subnet, env["subnets"]))
    args.capacity = [by_cidr.get(c, c) for c in args.capacity or []]
    faults = Faults(args)
    faults.by_cidr = by_cidr
    faults.profiles.add(env["instance_profile"])
    faults.owner = env["account"]
    keys = {env[u]["access_key"]: (env[u]["secret_key"], env[u].get("token"))
            for u in ("pbx", "admin", "viewer", "session")}
    spot.admin = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url,
                              aws_access_key_id=env["admin"]["access_key"],
                              aws_secret_access_key=env["admin"]["secret_key"])
    for svc in ("iam", "sts"):
        setattr(roles, svc, boto3.client(svc, region_name=REGION, endpoint_url=moto_url,
                                         aws_access_key_id=env["admin"]["access_key"],
                                         aws_secret_access_key=env["admin"]["secret_key"]))
    applied = {}
    for q in args.service_quota or []:
        code, _, value = q.partition("=")
        applied[code] = float(value)
    quotas = ServiceQuotas(keys, [env["viewer"]["access_key"]], REGION, env["account"], applied)
    s3 = S3Calls({env[u]["access_key"]: u for u in ("pbx", "admin", "viewer", "session")}, roles)
    proxy.RequestHandlerClass = make_proxy(moto_url, faults, Pricing(keys), spot, roles, quotas, s3)
    env["url"] = "http://127.0.0.1:%d/" % proxy.server_address[1]
    env["moto_url"] = moto_url
    env["region"] = REGION
    stop = threading.Event()
    if backend is not None:
        admin = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url,
                             aws_access_key_id=env["admin"]["access_key"],
                             aws_secret_access_key=env["admin"]["secret_key"])
        t = threading.Thread(target=bodies_loop, args=(args, admin, stop, backend, env["account"], life, spot),
                             daemon=True)
        t.start()
    # SIGTERM only sets the flag; the main thread does the rest (a handler
    # that shut the proxy down itself could block forever in it)
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    tmp = args.env_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(env, f)
    os.rename(tmp, args.env_file)
    while not stop.wait(0.5):
        pass
    watchdog = threading.Timer(60, lambda: os._exit(1))
    watchdog.daemon = True
    watchdog.start()
    proxy.shutdown()
    if backend is not None:
        t.join(50)
        if hasattr(backend, "close"):
            backend.close()
    moto.stop()


if __name__ == "__main__":
    main()
