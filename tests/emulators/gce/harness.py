"""harness.py - starts emulator.py for a test and talks to it: compute
calls with a bearer token, the control endpoint, waiting for operations.

    with Emulator(tmpdir, "--no-bodies") as emu:
        code, op = emu.call("POST", "zones/us-central1-a/instances", body)
        emu.wait(op)
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ZONE = "us-central1-a"


class Emulator:
    def __init__(self, tmpdir, *args, project="pbx-test"):
        self.tmpdir = tmpdir
        self.args = list(args)
        self.project = project
        self.proc = None
        self.token = None

    def __enter__(self):
        port_file = os.path.join(self.tmpdir, "emu.port")
        self.log = os.path.join(self.tmpdir, "emu.log")
        if os.path.exists(port_file):
            os.unlink(port_file)            # an earlier run's: never trust it
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "emulator.py"), "--port", "0",
                                      "--port-file", port_file, "--state-dir", self.tmpdir,
                                      "--project", self.project, "--log", self.log] + self.args,
                                     stdin=subprocess.DEVNULL)
        end = time.time() + 20
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.time() > end:
                raise RuntimeError("emulator did not start (exit %s)" % self.proc.poll())
            time.sleep(0.05)
        with open(port_file) as f:
            self.port = int(f.read())
        self.url = "http://127.0.0.1:%d" % self.port
        self.base = self.url + "/compute/v1/"
        self.token = self.control("POST", "token", {})["access_token"]
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def raw(self, method, url, data=None, headers=None):
        """(status, headers, parsed JSON body) of one HTTP request."""
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=150) as r:
                return r.status, r.headers, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, e.headers, json.loads(e.read() or b"null")

    def call(self, method, path, body=None, token=True, query="", raw_body=None):
        """A compute call on projects/PROJECT/PATH; (status, JSON)."""
        headers = {}
        if token:
            headers["Authorization"] = "Bearer " + (self.token if token is True else token)
        data = raw_body
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        url = self.base + "projects/%s/%s" % (self.project, path) + ("?" + query if query else "")
        code, _, value = self.raw(method, url, data, headers)
        return code, value

    def control(self, method, what, body=None):
        data = json.dumps(body).encode() if body is not None else None
        code, _, value = self.raw(method, self.url + "/_emulator/" + what, data)
        if code != 200:
            raise RuntimeError("control %s %s: %s %s" % (method, what, code, value))
        return value

    def wait(self, op, timeout=60):
        """Polls operation OP (a compute#operation) until DONE; returns it."""
        path = op["selfLink"][len(self.base):].split("/", 2)[2]
        end = time.time() + timeout
        while True:
            code, cur = self.call("GET", path)
            if code != 200:
                raise RuntimeError("operation get: %s %s" % (code, cur))
            if cur["status"] == "DONE" or time.time() > end:
                return cur
            time.sleep(0.05)


def instance_body(name, zone=ZONE, gpus=0, labels=None, keys=None, nat=True, **extra):
    """An instances.insert body like the one gcloud sends (docs/cloud-api.md,
    "Compute Engine: instance body")."""
    body = {
        "name": name,
        "machineType": "zones/%s/machineTypes/n1-standard-8" % zone,
        "disks": [{"boot": True, "autoDelete": True, "mode": "READ_WRITE", "type": "PERSISTENT",
                   "initializeParams": {"sourceImage": "projects/debian-cloud/global/images/family/debian-12",
                                        "diskSizeGb": "100"}}],
        "networkInterfaces": [{"network": "global/networks/default"}],
        "labels": labels or {},
        "scheduling": {"onHostMaintenance": "TERMINATE", "automaticRestart": False},
    }
    if nat:
        body["networkInterfaces"][0]["accessConfigs"] = [{"name": "external-nat", "type": "ONE_TO_ONE_NAT"}]
    if gpus:
        body["guestAccelerators"] = [{"acceleratorType": "zones/%s/acceleratorTypes/nvidia-tesla-t4" % zone,
                                      "acceleratorCount": gpus}]
    if keys:
        body["metadata"] = {"items": [{"key": "ssh-keys", "value": keys}]}
    body.update(extra)
    return body
