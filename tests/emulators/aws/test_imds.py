#!/usr/bin/env python3
"""test_imds.py - the EC2 harness's IMDS (imds.py) and its EC2 flavour for
booted VMs (ec2_harness.py), without a VM: imds.py on 127.0.0.1 (a free
port) serving a document Ec2Flavour made from a moto-shaped instance, read
as cloud-init reads it: IMDSv2 tokens (401 without or with a bad one when
HttpTokens is required, v1 when optional), listings (public-keys as
0=NAME), user data; the SMBIOS cloud-init's ds-identify takes for EC2;
EC2's private-address rule (not the subnet's first four nor its last);
a spot interruption on demand through a node body's IMDS; a VM's role
credentials under meta-data/iam/ (instance profile); the proxy serving
EC2's API alone to requests by EC2's own name; S3 through the proxy on
moto with signatures checked: a listing of a prefix with a '/' refused
by moto 5.2.1 as it comes and taken with the harness's patch
(s3_signature_query_fix), each request counted by its signer.
Python standard library plus what the harness imports (moto, boto3);
skipped (77) without them."""

import argparse
import datetime
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


class FakeEc2:
    """What SpotInterruptions asks of EC2: describe, terminate, stop."""

    def __init__(self, instances):
        self.instances = instances          # id -> (state, lifecycle or None)
        self.calls = []

    def describe_instances(self, InstanceIds):
        iid = InstanceIds[0]
        if iid not in self.instances:
            raise ValueError("InvalidInstanceID.NotFound")
        state, life = self.instances[iid]
        i = {"InstanceId": iid, "State": {"Name": state}}
        if life:
            i["InstanceLifecycle"] = life
        return {"Reservations": [{"Instances": [i]}]}

    def terminate_instances(self, InstanceIds):
        self.calls.append(("terminate", InstanceIds))

    def stop_instances(self, InstanceIds):
        self.calls.append(("stop", InstanceIds))


def spot_notices():
    """A spot interruption on demand (SpotInterruptions) seen through a
    node body's IMDS (Ec2BodyMetadata): spot/instance-action is 404, then
    {"action", "time"} for the notice's seconds, then the instance is
    terminated (or stopped) and the notice is gone; refusals."""
    spot = h.SpotInterruptions()
    spot.admin = FakeEc2({"i-0spot": ("running", "spot"), "i-0ondemand": ("running", None),
                          "i-0stopped": ("stopped", "spot"), "i-0spot2": ("running", "spot")})
    port = free_port()
    inst = h.Inst("i-0spot", "127.0.0.1", "pbx", "ssh-ed25519 AAAA k", "spot", "required")
    server = h.Ec2BodyMetadata(port, spot).serve(inst)
    try:
        st, tok, _ = req(port, "/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        t = {"X-aws-ec2-metadata-token": tok}
        st, body, _ = req(port, "/latest/meta-data/instance-life-cycle", headers=t)
        ok((st, body) == (200, "spot"), "a body's IMDS: instance-life-cycle spot (%d %s)" % (st, body))
        st, _, _ = req(port, "/latest/meta-data/spot/instance-action", headers=t)
        ok(st == 404, "no notice yet: spot/instance-action is 404 (%d)" % st)
        st, _, _ = req(port, "/latest/meta-data/spot/instance-action")
        ok(st == 401, "HttpTokens required: no token, 401 (%d)" % st)
        for fields, why in (({"instance": "i-0ondemand"}, "an on-demand instance"),
                            ({"instance": "i-0stopped"}, "a stopped instance"),
                            ({"instance": "i-0nope"}, "an unknown instance"),
                            ({"instance": "i-0spot", "action": "reboot"}, "an unknown action"),
                            ({"instance": "i-0spot", "notice": "-1"}, "a negative notice"),
                            ({"instance": "i-0spot", "notice": "soon"}, "a notice that is no number")):
            code, _ = spot.interrupt(fields)
            ok(code == 400, "refused: %s (%d)" % (why, code))
        # the end of the notice presses a booted VM's power button first
        # (bodies_loop's hook) and gives its guest end_grace to shut down
        pressed = []
        spot.on_end.append(lambda iid: pressed.append((iid, list(spot.admin.calls))) or True)
        spot.end_grace = 0.5
        t0 = time.time()
        code, v = spot.interrupt({"instance": "i-0spot", "notice": "1.5"})
        ok(code == 200 and v["action"] == "terminate", "a notice: terminate by default (%d %s)" % (code, v))
        st, body, _ = req(port, "/latest/meta-data/spot/instance-action", headers=t)
        got = json.loads(body) if st == 200 else {}
        when = time.mktime(time.strptime(got.get("time", "1970-01-01T00:00:00Z"), "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        ok(st == 200 and got.get("action") == "terminate" and abs(when - (t0 + 1.5)) < 2.5,
           "spot/instance-action says terminate and when (%d %s)" % (st, body))
        st, body2, _ = req(port, "/latest/meta-data/spot/termination-time", headers=t)
        ok((st, body2) == (200, got.get("time")), "spot/termination-time is the same time (%d %s)" % (st, body2))
        st, body, _ = req(port, "/latest/meta-data/spot/", headers=t)
        ok(st == 200 and "instance-action" in body.split("\n"), "meta-data/spot/ lists it")
        ok(spot.admin.calls == [], "nothing is done before the notice runs out")
        for _ in range(50):
            if spot.admin.calls:
                break
            time.sleep(0.1)
        ok(spot.admin.calls == [("terminate", ["i-0spot"])] and time.time() - t0 >= 1.9,
           "after the notice and the guest's grace the instance is terminated (%s, %.1f s)"
           % (spot.admin.calls, time.time() - t0))
        ok(pressed == [("i-0spot", [])], "its power button was pressed before that (%s)" % pressed)
        st, _, _ = req(port, "/latest/meta-data/spot/instance-action", headers=t)
        ok(st == 404, "the notice is gone with the instance (%d)" % st)
        spot.on_end.clear()
        code, v = spot.interrupt({"instance": "i-0spot2", "notice": "0", "action": "stop"})
        time.sleep(0.3)
        ok(code == 200 and spot.admin.calls[-1] == ("stop", ["i-0spot2"]), "action stop stops it (%s)" % v)
        # a booted VM's document carries the notice too
        spot.notices["i-0123456789abcdef0"] = {"action": "hibernate", "time": "2030-01-01T00:00:00Z"}
        vm = h.VmInst(DESC, "r-1", "123456789012", None, None, "10.94.1.0/24", "10.94.0.0/16")
        md = h.Ec2Flavour(spot).metadata(vm, "127.0.0.1", None, None)["meta-data"]
        ok(json.loads(md.get("spot", {}).get("instance-action", "{}")).get("action") == "hibernate"
           and "termination-time" not in md["spot"], "a VM's IMDS document has the notice")
    finally:
        server.close()


class FakeRoles:
    """RoleCredentials without moto: one set per call of renew()."""

    def __init__(self):
        self.n = 0

    def renew(self):
        self.n += 1

    def of(self, inst):
        if not inst.profile:
            return None
        exp = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
        return "pbx-role", {"AccessKeyId": "ASIAFAKE%04d" % self.n, "SecretAccessKey": "s3cr3t",
                            "SessionToken": "tok", "Expiration": exp}


def vm_role_credentials():
    """A booted VM launched with an instance profile finds its role's
    credentials in its IMDS (meta-data/iam/, IMDSv2 token required as for
    the rest), as pbx on an EC2 head reads them (src/cloud/aws/creds.c);
    one without a profile has no iam/; renewed credentials are noticed."""
    roles = FakeRoles()
    fl = h.Ec2Flavour(None, roles)
    desc = dict(DESC, IamInstanceProfile={"Arn": "arn:aws:iam::123456789012:instance-profile/pbx-head",
                                          "Id": "AIPAFAKE"})
    inst = h.VmInst(desc, "r-1", "123456789012", None, None, "10.94.1.0/24", "10.94.0.0/16")
    plain = h.VmInst(DESC, "r-1", "123456789012", None, None, "10.94.1.0/24", "10.94.0.0/16")
    ok("iam" not in fl.metadata(plain, "127.0.0.1", None, None)["meta-data"],
       "a VM without an instance profile has no meta-data/iam/")
    ok(not fl.renewed(plain), "nothing to renew without a profile")
    tmp = tempfile.mkdtemp(prefix="pbx-imds-iam.")
    with open(os.path.join(tmp, "127.0.0.1.json"), "w") as f:
        json.dump(fl.metadata(inst, "127.0.0.1", None, None), f)
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
        st, _, _ = req(port, "/latest/meta-data/iam/security-credentials/")
        ok(st == 401, "iam/ without a token is 401 (HttpTokens required) (%d)" % st)
        st, tok, _ = req(port, "/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        t = {"X-aws-ec2-metadata-token": tok}
        st, body, _ = req(port, "/latest/meta-data/iam/security-credentials/", headers=t)
        ok((st, body) == (200, "pbx-role"), "iam/security-credentials/ lists the role (%d %r)" % (st, body))
        st, body, _ = req(port, "/latest/meta-data/iam/security-credentials/pbx-role", headers=t)
        c = json.loads(body) if st == 200 else {}
        ok(c.get("AccessKeyId") == "ASIAFAKE0000" and c.get("Token") == "tok" and c.get("Code") == "Success"
           and c.get("Expiration") == "2030-01-01T00:00:00Z", "the role's credentials, as EC2 gives them")
        st, body, _ = req(port, "/latest/meta-data/iam/info", headers=t)
        ok(st == 200 and json.loads(body).get("InstanceProfileArn", "").endswith("/pbx-head"),
           "iam/info names the instance profile")
    finally:
        p.terminate()
        p.wait()
        subprocess.run(["rm", "-rf", tmp])
    ok(not fl.renewed(inst), "credentials as written: not renewed")
    roles.renew()
    ok(fl.renewed(inst), "a new set: the document is written again")
    fl.metadata(inst, "127.0.0.1", None, None)
    ok(not fl.renewed(inst), "written again: not renewed")


def api_name_filter():
    """The proxy, asked by EC2's own name (a VM's request through vms.py's
    gateway), serves EC2's API alone: the harness's controls, the pricing
    API and moto's own paths are 404 there and never reach moto; by its
    loopback URL they are served as before; by S3's names every request
    goes to moto as it is (a path like a control's is an object's key)."""
    seen = []

    class Moto(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _ok(self):
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            seen.append((self.command, self.path, self.headers.get("Host")))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(b"ok")
        do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _ok

    moto = ThreadingHTTPServer(("127.0.0.1", 0), Moto)
    threading.Thread(target=moto.serve_forever, daemon=True).start()
    faults = h.Faults(argparse.Namespace(throttle=0.0, seed=1, capacity=[], vcpu_limit=[]))
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), h.make_proxy(
        "http://127.0.0.1:%d" % moto.server_address[1], faults, h.Pricing({})))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    port = proxy.server_address[1]
    api = {"Host": h.Ec2Flavour.api_names[0]}
    ok(h.Ec2Flavour.api_names == ("ec2.us-east-1.amazonaws.com", "s3.us-east-1.amazonaws.com",
                                  "*.s3.us-east-1.amazonaws.com"),
       "EC2's and S3's names are those pbx forms for us-east-1 (%s)" % (h.Ec2Flavour.api_names,))

    def call(path, method="GET", headers=None, data=None):
        r = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                   headers=headers or {}, data=data)
        try:
            with urllib.request.urlopen(r, timeout=10) as resp:
                return resp.status
        except urllib.error.HTTPError as e:
            return e.code

    try:
        form = b"Action=DescribeInstances&Version=2016-11-15"
        st = call("/", "POST", dict(api, **{"Content-Type": "application/x-www-form-urlencoded"}), form)
        ok(st == 200 and seen and seen[-1][:2] == ("POST", "/") and seen[-1][2] == api["Host"],
           "an EC2 call by EC2's name reaches moto, Host kept for SigV4 (%d %s)" % (st, seen[-1:]))
        n = len(seen)
        for what, args in (("GET /_harness/calls", ("/_harness/calls",)),
                           ("POST /_harness/capacity", ("/_harness/capacity", "POST", {}, b"[]")),
                           ("POST /_harness/spot-interruption", ("/_harness/spot-interruption", "POST", {}, b"{}")),
                           ("POST /moto-api/reset-auth", ("/moto-api/reset-auth", "POST", {}, b"1")),
                           ("GET /moto-api/", ("/moto-api/",)),
                           ("the pricing API", ("/", "POST", {"X-Amz-Target": "AWSPriceListService.GetProducts",
                                                             "Content-Type": "application/x-amz-json-1.1"}, b"{}"))):
            a = list(args) + [None] * (4 - len(args))
            hd = dict(api, **(a[2] or {}))
            st = call(a[0], a[1] or "GET", hd, a[3])
            ok(st == 404, "by EC2's name, %s is 404 (%d)" % (what, st))
        hd = {"Host": "EC2.us-east-1.amazonaws.com:443"}
        ok(call("/_harness/calls", headers=hd) == 404, "the name's case and a port change nothing")
        ok(len(seen) == n and faults.calls.get("?", 0) == 0, "none of them reached moto or was counted")
        ok(call("/_harness/calls") == 200, "by the loopback URL the controls are served")
        for host in ("data.s3.us-east-1.amazonaws.com", "s3.us-east-1.amazonaws.com:443"):
            for method in ("GET", "PUT", "POST", "HEAD", "DELETE"):
                st = call("/_harness/calls", method, {"Host": host}, b"" if method in ("PUT", "POST") else None)
                ok(st == 200 and seen[-1] == (method, "/_harness/calls", host),
                   "by S3's name (%s), %s /_harness/calls is an object's, sent to moto, the host kept (%d %s)"
                   % (host, method, st, seen[-1:]))
    finally:
        proxy.shutdown()
        moto.shutdown()


def s3_through_proxy():
    """S3 on moto (signatures and IAM checked) through the proxy: moto
    5.2.1 refuses SignatureDoesNotMatch a ListObjectsV2 of prefix fm/ that
    SigV4 signed right (boto3's), the harness's patch lets it through, and
    the proxy counts each S3 request by the user who signed it."""
    import boto3
    from moto.iam.access_control import S3IAMRequest
    from moto.server import ThreadedMotoServer
    logging.getLogger("werkzeug").setLevel(logging.ERROR)   # no line per request
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    url = "http://127.0.0.1:%d" % moto.get_host_and_port()[1]
    made = S3IAMRequest._create_aws_request
    proxy = None
    try:
        anon = dict(region_name="us-east-1", endpoint_url=url, aws_access_key_id="setup",
                    aws_secret_access_key="setup")
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="u")
        iam.put_user_policy(UserName="u", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": "*"}]}))
        k = iam.create_access_key(UserName="u")["AccessKey"]
        s3 = boto3.client("s3", **anon)
        s3.create_bucket(Bucket="data")
        s3.put_object(Bucket="data", Key="fm/sub/a.txt", Body=b"alpha")
        urllib.request.urlopen(urllib.request.Request(url + "/moto-api/reset-auth", data=b"0", method="POST",
                                                      headers={"Content-Type": "text/plain"})).read()
        faults = h.Faults(argparse.Namespace(throttle=0.0, seed=1, capacity=[], vcpu_limit=[]))
        calls = h.S3Calls({k["AccessKeyId"]: "u"}, None)
        proxy = ThreadingHTTPServer(("127.0.0.1", 0), h.make_proxy(url, faults, h.Pricing({}), s3=calls))
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        user = boto3.client("s3", region_name="us-east-1", aws_access_key_id=k["AccessKeyId"],
                            aws_secret_access_key=k["SecretAccessKey"],
                            endpoint_url="http://127.0.0.1:%d" % proxy.server_address[1])
        try:
            user.list_objects_v2(Bucket="data", Prefix="fm/")
            refused = ""
        except Exception as e:
            refused = str(e)
        ok("SignatureDoesNotMatch" in refused,
           "moto as it comes refuses a listing of prefix fm/ (%s)" %
           (refused or "taken: moto checks it right now, s3_signature_query_fix can go"))
        h.s3_signature_query_fix()
        got = [o["Key"] for o in user.list_objects_v2(Bucket="data", Prefix="fm/s").get("Contents", [])]
        ok(got == ["fm/sub/a.txt"], "with the harness's patch it is taken (%s)" % got)
        body = user.get_object(Bucket="data", Key="fm/sub/a.txt")["Body"].read()
        ok(body == b"alpha", "an object is read through the proxy")
        ok(dict(calls.calls) == {"u ListObjectsV2": 2, "u GetObject": 1},
           "the proxy counts S3 requests by signer and operation (%s)" % dict(calls.calls))
        # virtual-hosted, as pbx asks S3 itself (its bucket in the host):
        # signed for that host, sent to the proxy with it
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        vhost = "data.s3.us-east-1.amazonaws.com"
        signed = AWSRequest(method="GET", url="https://%s/fm/sub/a.txt" % vhost,
                            headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
        S3SigV4Auth(Credentials(k["AccessKeyId"], k["SecretAccessKey"]), "s3", "us-east-1").add_auth(signed)
        hd = dict(signed.headers, Host=vhost)
        with urllib.request.urlopen(urllib.request.Request(
                "http://127.0.0.1:%d/fm/sub/a.txt" % proxy.server_address[1], headers=hd)) as r:
            body = r.read()
        ok(body == b"alpha", "by a bucket's virtual host, its object is read (moto takes the bucket from the host)")
        ok(calls.calls["u GetObject"] == 2 and calls.hosts[vhost] == 1,
           "and counted as a GetObject, by its host (%s %s)" % (dict(calls.calls), dict(calls.hosts)))
    finally:
        S3IAMRequest._create_aws_request = made
        if proxy:
            proxy.shutdown()
        moto.stop()


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

    spot_notices()
    vm_role_credentials()
    api_name_filter()

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

    s3_through_proxy()
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
