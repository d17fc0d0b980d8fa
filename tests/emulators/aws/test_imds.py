#!/usr/bin/env python3
"""test_imds.py - the EC2 harness's IMDS (imds.py) and its EC2 flavour for
booted VMs (ec2_harness.py), without a VM: imds.py on 127.0.0.1 (a free
port) serving a document Ec2Flavour made from a moto-shaped instance, read
as cloud-init reads it: IMDSv2 tokens (401 without or with a bad one when
HttpTokens is required, v1 when optional), listings (public-keys as
0=NAME), user data; the SMBIOS cloud-init's ds-identify takes for EC2;
EC2's private-address rule (not the subnet's first four nor its last).
Python standard library plus what the harness imports (moto, boto3);
skipped (77) without them."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import ec2_harness as h
except ImportError as e:
    print("1..0 # SKIP the harness's modules: %s" % e)
    sys.exit(77)

n = 0
failed = 0


def ok(cond, what):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what), flush=True)


def req(port, path, method="GET", headers=None):
    r = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                               headers=headers or {}, data=b"" if method == "PUT" else None)
    try:
        with urllib.request.urlopen(r, timeout=10) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


DESC = {"InstanceId": "i-0123456789abcdef0", "ImageId": "ami-12c6146b", "InstanceType": "m5.large",
        "PrivateIpAddress": "127.0.0.1", "PublicIpAddress": "127.0.94.7", "KeyName": "pbx-e1-x",
        "Placement": {"AvailabilityZone": "us-east-1a"}, "SubnetId": "subnet-1", "VpcId": "vpc-1",
        "SecurityGroups": [{"GroupId": "sg-1", "GroupName": "pbx-e1-x"}], "AmiLaunchIndex": 0,
        "MetadataOptions": {"HttpTokens": "required"}}


def main():
    tmp = tempfile.mkdtemp(prefix="pbx-imds.")
    fl = h.Ec2Flavour()
    inst = h.VmInst(DESC, "r-1", "123456789012", "ssh-ed25519 AAAAC3Nza test", "#cloud-config\nhostname: e1-head\n",
                    "10.94.1.0/24", "10.94.0.0/16")
    doc = fl.metadata(inst, "127.0.0.1", "127.0.94.7", None)

    def write(d):
        with open(os.path.join(tmp, "127.0.0.1.json.tmp"), "w") as f:
            json.dump(d, f)
        os.rename(os.path.join(tmp, "127.0.0.1.json.tmp"), os.path.join(tmp, "127.0.0.1.json"))

    write(doc)
    port = free_port()
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "imds.py"), "--dir", tmp, "--bind", "127.0.0.1",
                          "--port", str(port)])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        # IMDSv2 only (HttpTokens required)
        st, _, _ = req(port, "/latest/meta-data/instance-id")
        ok(st == 401, "v2 only: a GET without a token is 401 (%d)" % st)
        st, _, _ = req(port, "/latest/meta-data/instance-id", headers={"X-aws-ec2-metadata-token": "nope"})
        ok(st == 401, "a made-up token is 401 (%d)" % st)
        st, _, _ = req(port, "/latest/api/token", "PUT")
        ok(st == 400, "a token PUT without a TTL is 400 (%d)" % st)
        st, _, _ = req(port, "/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "21601"})
        ok(st == 400, "a TTL over 21600 is 400 (%d)" % st)
        st, _, _ = req(port, "/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "60",
                                                          "X-Forwarded-For": "10.0.0.1"})
        ok(st == 403, "a forwarded token PUT is 403 (%d)" % st)
        st, _, _ = req(port, "/latest/api/token", "GET")
        ok(st == 401, "the token path is PUT only: a GET without a token is refused (%d)" % st)
        st, tok, hd = req(port, "/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
        ok(st == 200 and len(tok) > 20 and hd.get("X-aws-ec2-metadata-token-ttl-seconds") == "21600",
           "PUT /latest/api/token gives a token and echoes its TTL")
        t = {"X-aws-ec2-metadata-token": tok}
        st, body, _ = req(port, "/2021-03-23/meta-data/instance-id", headers=t)
        ok((st, body) == (200, DESC["InstanceId"]), "instance-id with the token, dated version (%d %s)" % (st, body))
        for path, want in (("local-ipv4", "127.0.0.1"), ("public-ipv4", "127.0.94.7"),
                           ("local-hostname", "ip-127-0-0-1.ec2.internal"),
                           ("hostname", "ip-127-0-0-1.ec2.internal"),
                           ("placement/availability-zone", "us-east-1a"),
                           ("public-keys/0/openssh-key", "ssh-ed25519 AAAAC3Nza test\n"),
                           ("public-keys/", "0=pbx-e1-x"), ("public-keys/0/", "openssh-key"),
                           ("instance-type", "m5.large")):
            st, body, _ = req(port, "/latest/meta-data/" + path, headers=t)
            ok((st, body) == (200, want), "meta-data/%s is %r (%d %r)" % (path, want, st, body))
        st, body, _ = req(port, "/latest/meta-data/", headers=t)
        lines = body.split("\n")
        ok(st == 200 and "instance-id" in lines and "placement/" in lines and "public-keys/" in lines
           and "network/" in lines, "meta-data/ lists leaves and directories/")
        mac = fl.mac("127.0.0.1")
        st, body, _ = req(port, "/latest/meta-data/network/interfaces/macs/%s/local-ipv4s" % mac, headers=t)
        ok((st, body) == (200, "127.0.0.1"), "the NIC's local-ipv4s under macs/MAC/")
        st, body, _ = req(port, "/latest/user-data", headers=t)
        ok((st, body) == (200, "#cloud-config\nhostname: e1-head\n"), "user-data is RunInstances' UserData")
        st, body, _ = req(port, "/latest/dynamic/instance-identity/document", headers=t)
        ok(st == 200 and json.loads(body)["instanceId"] == DESC["InstanceId"], "the identity document")
        st, _, _ = req(port, "/latest/meta-data/no-such", headers=t)
        ok(st == 404, "an unknown path is 404")
        st, _, _ = req(port, "/1999-01-01/meta-data/instance-id", headers=t)
        ok(st == 404, "an unknown version is 404")
        st, _, _ = req(port, "/latest/meta-data/instance-id", "POST", t)
        ok(st == 405, "POST is 405")
        # IMDSv1 allowed (HttpTokens optional), no user data
        doc["http_tokens"] = "optional"
        doc["user-data"] = None
        write(doc)
        st, body, _ = req(port, "/latest/meta-data/instance-id")
        ok((st, body) == (200, DESC["InstanceId"]), "HttpTokens optional: v1 without a token (%d)" % st)
        st, _, _ = req(port, "/latest/meta-data/instance-id", headers={"X-aws-ec2-metadata-token": "bad"})
        ok(st == 401, "HttpTokens optional: a bad token is still 401 (%d)" % st)
        st, _, _ = req(port, "/latest/user-data")
        ok(st == 404, "no user data is 404")
        os.unlink(os.path.join(tmp, "127.0.0.1.json"))
        st, _, _ = req(port, "/latest/meta-data/instance-id")
        ok(st == 404, "an address with no instance is 404")
    finally:
        p.terminate()
        p.wait()
        subprocess.run(["rm", "-rf", tmp])

    # SMBIOS: what cloud-init 22.4's ds-identify needs to say AWS: product
    # uuid and serial start with "ec2" and are equal (case aside)
    sm = fl.smbios(inst)
    t1 = dict(kv.split("=", 1) for kv in [x for x in sm if x.startswith("type=1,")][0].split(","))
    ok(t1["uuid"].lower().startswith("ec2") and t1["uuid"].lower() == t1["serial"].lower()
       and len(t1["uuid"]) == 36, "SMBIOS uuid = serial = ec2... (%s)" % t1["uuid"])
    ok(t1["manufacturer"] == "Amazon EC2" and t1["product"] == "m5.large", "SMBIOS says Amazon EC2, m5.large")

    # EC2's private addresses: never the subnet's first four nor its last
    a = h.Addresses(None)
    try:
        got = {a.private("10.94.1.0/28") for _ in range(11)}
        ok(got == {"10.94.1.%d" % i for i in range(4, 15)},
           "11 addresses of a /28: .4 to .14, each once (%s)" % sorted(got))
    finally:
        h.moto_eni.random_private_ip, h.moto_eni.random_public_ip = a._random_private, a._random_public
    a = h.Addresses("127.0.94.0/30")
    try:
        ok([a.public_ip(), a.public_ip()] == ["127.0.94.1", "127.0.94.2"], "public addresses from the block")
    finally:
        h.moto_eni.random_private_ip, h.moto_eni.random_public_ip = a._random_private, a._random_public

    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
