#!/bin/sh
# t0120-gce-dry-run.sh - `pbx cluster start|stop --dry-run [--json]` for a
# Compute Engine template: the requests pbx would send, one JSON object a
# line, with the bodies Compute Engine expects (bulkInsert per node kind,
# GPUs with onHostMaintenance TERMINATE, Spot, labels, ssh-keys metadata,
# a requestId on every mutation, compute nodes without an external address
# and the cluster's Cloud Router with Cloud NAT, or with
# compute_external_ips external addresses and no router; which blocks reach
# port 22) and nothing sent: the endpoint is a port
# nobody listens on and the credentials file would be refused.  Talks to
# no network at all.  A new cluster's requests carry a fresh cluster id:
# label pbx-cluster-id = ID on every instance, ID's first 12 digits (P) in
# every name (NAME-P-NODE, pbx-NAME-P-ssh, tags), ID in each rule's
# description; a stop of a name the store does not know only lists (by
# name), with --id ID it lists by name and id and deletes.
. "$(dirname "$0")/lib.sh"
trap 'rm -rf "$TEST_TMP"' EXIT

mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C t0120 -f "$PBX_HOME/id"
echo '{"type": "service_account"}' >"$PBX_HOME/open-key.json"
chmod 644 "$PBX_HOME/open-key.json"
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  g1:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    head: { machine_type: e2-standard-2, service_account: pbx-head@p1.iam.gserviceaccount.com }
    node_groups:
      - { name: gpu, count: 2, machine_type: n1-standard-8, gpus: 2, gpu_type: nvidia-tesla-t4, spot: true }
      - { name: cpu, count: 1, machine_type: e2-standard-8 }
  g2:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    min_nodes: 2
    ssh_from: [203.0.113.0/24, 198.51.100.7/32]
    node_groups:
      - { name: gpu, count: 2, machine_type: n1-standard-8, gpus: 2, gpu_type: nvidia-tesla-t4 }
      - { name: cpu, count: 1, machine_type: e2-standard-8 }
  g3:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    compute_external_ips: true
    node_groups:
      - { name: cpu, count: 1, machine_type: e2-standard-8 }
  g4:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    head: { service_account: pbx-head@p1.iam.gserviceaccount.com }
    node_groups:
      - { name: node, count: 3, min: 1, machine_type: e2-standard-8 }
  loc:
    cloud: local
    node_groups:
      - { name: node, count: 1 }
clouds:
  gce: { project: p1, zone: us-central1-a, endpoint: "http://127.0.0.1:1/compute/v1/",
         credentials: $PBX_HOME/open-key.json }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"

run_pbx cluster start --dry-run --json g1
ok $rc "start --dry-run --json succeeds without credentials or endpoint: $errout"
printf '%s\n' "$out" >"$TEST_TMP/req.jsonl"
cat >"$TEST_TMP/check.py" <<'PY'
import json, re, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bulk = [r for r in reqs if r["url"].split("?")[0].endswith("/instances/bulkInsert")]
ID = bulk[0]["body"]["instanceProperties"]["labels"]["pbx-cluster-id"]
P = ID[:12]
def N(s):   # a name as pbx makes it: "@" is the id prefix
    return s.replace("@", P)
fw = [r for r in reqs if r["method"] == "POST" and "/global/firewalls?" in r["url"]]
rt = [r for r in reqs if r["method"] == "POST" and "/routers?" in r["url"]]
def props(name):
    return [b["body"]["instanceProperties"] for b in bulk if N(name) in b["body"]["perInstanceProperties"]][0]
def rule(name):
    return [f["body"] for f in fw if f["body"]["name"] == N(name)][0]
uuid = re.compile(r"[?&]requestId=[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
mut = [r for r in reqs if r["method"] != "GET"]
checks = {
  "keys": lambda: all(set(r) == {"method", "url", "body"} for r in reqs),
  "endpoint": lambda: all(r["url"].startswith("http://127.0.0.1:1/compute/v1/projects/p1/") for r in reqs),
  "id": lambda: re.fullmatch(r"[0-9a-f]{32}", ID) is not None,
  "bulk": lambda: [sorted(b["body"]["perInstanceProperties"]) for b in bulk] == [[N("g1-@-head")], [N("g1-@-gpu1"), N("g1-@-gpu2")], [N("g1-@-cpu1")]]
          and all(b["body"]["count"] == b["body"]["minCount"] == len(b["body"]["perInstanceProperties"]) for b in bulk),
  "gpu": lambda: props("g1-@-gpu1")["guestAccelerators"] == [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 2}]
         and props("g1-@-gpu1")["scheduling"]["onHostMaintenance"] == "TERMINATE"
         and props("g1-@-gpu1")["scheduling"]["provisioningModel"] == "SPOT"
         and props("g1-@-gpu1")["machineType"] == "n1-standard-8",
  "cpu": lambda: "guestAccelerators" not in props("g1-@-cpu1") and "provisioningModel" not in props("g1-@-cpu1")["scheduling"],
  "identity": lambda: props("g1-@-head")["serviceAccounts"] == [{"email": "pbx-head@p1.iam.gserviceaccount.com",
                       "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]
              and all("serviceAccounts" not in props(n) for n in ("g1-@-gpu1", "g1-@-cpu1")),
  "head": lambda: props("g1-@-head")["machineType"] == "e2-standard-2" and props("g1-@-head")["tags"]["items"] == [N("pbx-g1-@"), N("pbx-g1-@-head")],
  "labels": lambda: all(props(n)["labels"]["pbx-cluster"] == "g1" and props(n)["labels"]["pbx-cluster-id"] == ID
                        for n in ("g1-@-head", "g1-@-gpu1", "g1-@-cpu1")),
  "sshkeys": lambda: all(re.fullmatch(r"pbx:ssh-ed25519 \S+ t0120", props(n)["metadata"]["items"][0]["value"]) and
                 props(n)["metadata"]["items"][0]["key"] == "ssh-keys" for n in ("g1-@-head", "g1-@-gpu1")),
  "disk": lambda: props("g1-@-head")["disks"][0]["initializeParams"]["sourceImage"] == "projects/debian-cloud/global/images/family/debian-12"
          and props("g1-@-head")["disks"][0]["initializeParams"]["diskSizeGb"] == "50",
  "firewall": lambda: sorted(f["body"]["name"] for f in fw) == [N("pbx-g1-@-internal"), N("pbx-g1-@-ssh")]
              and rule("pbx-g1-@-ssh")["targetTags"] == [N("pbx-g1-@-head")]
              and rule("pbx-g1-@-ssh")["allowed"] == [{"IPProtocol": "tcp", "ports": ["22"]}]
              and rule("pbx-g1-@-ssh")["sourceRanges"] == ["0.0.0.0/0"]
              and rule("pbx-g1-@-internal")["sourceTags"] == rule("pbx-g1-@-internal")["targetTags"] == [N("pbx-g1-@")]
              and all(rule(n)["description"].endswith("pbx-cluster-id=" + ID) for n in ("pbx-g1-@-ssh", "pbx-g1-@-internal")),
  "router": lambda: len(rt) == 1
            and rt[0]["url"].startswith("http://127.0.0.1:1/compute/v1/projects/p1/regions/us-central1/routers?requestId=")
            and rt[0]["body"]["name"] == "pbx-nat-default"
            and rt[0]["body"]["network"] == "projects/p1/global/networks/default"
            and rt[0]["body"]["nats"] == [{"name": "pbx-nat", "natIpAllocateOption": "AUTO_ONLY",
                                           "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}]
            and reqs.index(rt[0]) < reqs.index(bulk[0]),
  "addresses": lambda: props("g1-@-head")["networkInterfaces"][0]["accessConfigs"] == [{"name": "external-nat", "type": "ONE_TO_ONE_NAT"}]
               and all("accessConfigs" not in props(n)["networkInterfaces"][0] for n in ("g1-@-gpu1", "g1-@-cpu1")),
  "requestid": lambda: len(mut) == 6 and all(uuid.search(r["url"]) for r in mut) and len({r["url"] for r in mut}) == len(mut),
  "gets": lambda: all("requestId" not in r["url"] and r["body"] is None for r in reqs if r["method"] == "GET"),
  "list": lambda: any(r["method"] == "GET" and "/instances?filter=labels.pbx-cluster%20%3D%20%22g1%22%20AND%20labels.pbx-cluster-id%20%3D%20%22" + ID + "%22&" in r["url"] for r in reqs),
}
try:
    print(checks[sys.argv[2]]())
except (IndexError, KeyError, TypeError) as e:
    print("error: %r" % e)
PY
for c in keys endpoint id bulk gpu cpu identity head labels sshkeys disk firewall router addresses requestid gets list; do
	is "$(python3 "$TEST_TMP/check.py" "$TEST_TMP/req.jsonl" $c)" "True" "dry-run request check: $c"
done
echo "$out" | grep -qi -e authorization -e bearer -e token
ok $((! $?)) "no token or Authorization in the printed requests"
is "$(sqlite3 "$PBX_HOME/pbx.db" 'SELECT count(*) FROM clusters')" "0" "a dry run records no cluster"

# min_nodes 2 of 3: each bulkInsert may fall one node short; ssh_from narrows SSH
run_pbx cluster start --dry-run --json g2
is "$(printf '%s\n' "$out" | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); b = r["body"] or {}
    if "minCount" in b: print(sorted(b["perInstanceProperties"])[0].split("-")[-1], b["count"], b["minCount"])
    if b.get("name", "").endswith("-ssh"): print(*b["sourceRanges"])')" \
	"203.0.113.0/24 198.51.100.7/32
head 1 1
gpu1 2 1
cpu1 1 1" "min_nodes sets minCount; ssh_from sets the SSH rule's sourceRanges"
echo "$errout" | grep -q "SSH (port 22) reaches the head from 203.0.113.0/24, 198.51.100.7/32; compute nodes have no external address"
ok $? "the dry run says which blocks reach port 22: $errout"

# compute_external_ips: every node has an external address, SSH reaches all, no router
run_pbx cluster start --dry-run --json g3
is "$(printf '%s\n' "$out" | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); b = r["body"] or {}
    if "routers" in r["url"]: print("router", r["method"])
    if "instanceProperties" in b: print(sorted(b["perInstanceProperties"])[0].split("-")[-1], len(b["instanceProperties"]["networkInterfaces"][0].get("accessConfigs", [])))
    if b.get("name", "").endswith("-ssh"): print(*(t.split("-")[1] for t in b["targetTags"]))')" \
	"g3
head 1
cpu1 1" "compute_external_ips: compute nodes get an access config, SSH targets every node, no router"
echo "$errout" | grep -q "SSH (port 22) reaches every node (compute_external_ips) from anywhere"
ok $? "and the dry run says so: $errout"

run_pbx cluster start --dry-run g1
echo "$out" | grep -q '^POST http://127.0.0.1:1/compute/v1/projects/p1/zones/us-central1-a/instances/bulkInsert?requestId='
ok $? "plain --dry-run prints METHOD URL lines"
# it opens with a summary on stderr (stdout keeps the requests): where,
# the instances by kind, image, disks, network; and what the image lacks
is "$(echo "$errout" | sed -n '/^dry run of/,/^  network/p' | sed 's/ *$//')" "dry run of 'pbx cluster start g1': nothing is created; it would make
  where   Compute Engine, project p1, zone us-central1-a
  head    1 x e2-standard-2, an external address (SSH)
  gpu     2 x n1-standard-8, 2 GPUs nvidia-tesla-t4, spot
  cpu     1 x e2-standard-8
  image   projects/debian-cloud/global/images/family/debian-12
  disks   a 50 GB boot disk each (4 instances at most)
  network 2 firewall rules (SSH to the head; everything inside the cluster), the region's Cloud NAT for the nodes (made when none is there)" \
	"--dry-run opens with a one-screen summary"
echo "$errout" | grep -q "warning: a GPU group on a stock image (projects/debian-cloud/global/images/family/debian-12), which has no NVIDIA driver"
ok $? "and says the stock image has no NVIDIA driver for the GPU group"

# the calls a stop would make: METHOD:LAST-SEGMENT, and the list filters
stop_calls() {
	printf '%s\n' "$out" | python3 -c 'import json,sys; from urllib.parse import unquote
for l in sys.stdin:
    r = json.loads(l); u = r["url"].split("?")
    q = dict(p.split("=", 1) for p in u[1].split("&")) if len(u) > 1 else {}
    print(r["method"] + ":" + u[0].split("/")[-1], unquote(q.get("filter", "")))'
}
run_pbx cluster stop --discard-results --dry-run --json g1
ok $rc "stop --dry-run --json succeeds: $errout"
is "$(stop_calls)" "GET:instances labels.pbx-cluster = \"g1\"
GET:firewalls name eq \"pbx-g1(-[0-9a-f]{12})?-(ssh|internal)\"" \
	"a name the store does not know: stop only lists what carries the name, deletes nothing"
ID=0123456789abcdef0123456789abcdef
run_pbx cluster stop --discard-results --dry-run --json --id $ID g1
ok $rc "stop --dry-run --id succeeds: $errout"
is "$(stop_calls)" "GET:instances labels.pbx-cluster = \"g1\" AND labels.pbx-cluster-id = \"$ID\"
GET:pbx-g1-0123456789ab-ssh 
GET:pbx-g1-0123456789ab-internal 
GET:pbx-nat-default 
DELETE:pbx-nat-default 
DELETE:pbx-g1-0123456789ab-ssh 
DELETE:pbx-g1-0123456789ab-internal " \
	"with --id: lists by name and id, deletes pbx's shared router (when the cluster is the last in its region) and that id's firewall rules"
run_pbx cluster stop --discard-results --dry-run --id 0123 g1
is "$rc:$(echo "$errout" | grep -c 'takes a cluster id')" "2:1" "--id takes only a cluster id"

run_pbx cluster start --dry-run --json g4
names=$(printf '%s\n' "$out" | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r["url"].split("?")[0].endswith("/instances/bulkInsert"):
        print(" ".join(n.rsplit("-", 1)[-1] for n in r["body"]["perInstanceProperties"]))')
is "$rc:$(echo $names)" "0:head node1" \
	"power saving (min: 1 of 3): the start makes the head and node1; node2 and node3 start asleep"

run_pbx cluster start --json g1
is "$rc" "2" "--json without --dry-run is a usage error"
run_pbx cluster start --dry-run loc
is "$rc:$(echo "$errout" | grep -c 'sends no')" "2:1" "--dry-run of a local cluster is refused (it makes no API calls)"

run_pbx cluster start g1
is "$rc" "4" "a real start refuses the credentials file others can read (exit 4)"
echo "$errout" | grep -q "chmod 600"
ok $? "and says how to fix it: $errout"
done_testing
