"""test_registry.py - registry.py answers as a registry does: an image
pushed here is served by tag and by digest (Content-Type, Docker-Content-
Digest, bytes whose sha256 is that digest), HEAD without a body, blobs
whose bytes match their digest, and the registry's errors with its JSON
body (unknown tag, name or blob; a bad name, tag or digest; any write).
Loopback only (127.0.0.1:30790); stdlib only."""

import hashlib
import http.client
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REG = os.path.join(HERE, "registry.py")
failures = 0
count = 0


def ok(cond, what):
    global failures, count
    count += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", count, what))
    if not cond:
        failures += 1


def main():
    with tempfile.TemporaryDirectory() as tmp:
        layer = os.path.join(tmp, "l.tar")
        with open(os.path.join(tmp, "marker"), "w") as f:
            f.write("x\n")
        with tarfile.open(layer, "w") as t:
            t.add(os.path.join(tmp, "marker"), "etc/marker")
        root = os.path.join(tmp, "reg")
        digest = subprocess.check_output(
            [sys.executable, REG, "push", "--root", root, "--name", "a/b", "--tag", "v1", layer]).decode().strip()
        ok(digest.startswith("sha256:") and len(digest) == 71, "push prints the manifest's digest")
        portf = os.path.join(tmp, "port")
        log = os.path.join(tmp, "log")
        srv = subprocess.Popen([sys.executable, REG, "serve", "--root", root, "--port", "30790",
                                "--port-file", portf, "--log", log])
        try:
            for _ in range(100):
                if os.path.exists(portf):
                    break
                time.sleep(0.05)
            port = int(open(portf).read())

            def req(method, path):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request(method, path)
                r = c.getresponse()
                body = r.read()
                c.close()
                return r.status, r.headers, body

            def error_code(body):
                return json.loads(body)["errors"][0]["code"]

            st, h, body = req("GET", "/v2/")
            ok(st == 200 and h["Docker-Distribution-API-Version"] == "registry/2.0", "/v2/ answers 200")
            st, h, body = req("GET", "/v2/a/b/manifests/v1")
            ok(st == 200, "the manifest by tag")
            ok(h["Content-Type"] == "application/vnd.oci.image.manifest.v1+json", "its media type")
            ok(h["Docker-Content-Digest"] == digest, "its digest header")
            ok("sha256:" + hashlib.sha256(body).hexdigest() == digest, "its bytes hash to the digest")
            man = json.loads(body)
            st, h, body2 = req("GET", "/v2/a/b/manifests/" + digest)
            ok(st == 200 and body2 == body, "the manifest by digest")
            st, h, body3 = req("HEAD", "/v2/a/b/manifests/v1")
            ok(st == 200 and body3 == b"" and h["Content-Length"] == str(len(body)), "HEAD: headers, no body")
            for blob in [man["config"]] + man["layers"]:
                st, h, data = req("GET", "/v2/a/b/blobs/" + blob["digest"])
                ok(st == 200 and "sha256:" + hashlib.sha256(data).hexdigest() == blob["digest"]
                   and len(data) == blob["size"], "blob %s matches its digest and size" % blob["mediaType"])
            cases = [
                ("GET", "/v2/a/b/manifests/nope", 404, "MANIFEST_UNKNOWN"),
                ("GET", "/v2/a/c/manifests/v1", 404, "NAME_UNKNOWN"),
                ("GET", "/v2/a/b/blobs/sha256:" + "0" * 64, 404, "BLOB_UNKNOWN"),
                ("GET", "/v2/a/b/blobs/sha256:xyz", 400, "DIGEST_INVALID"),
                ("GET", "/v2/A/B/manifests/v1", 400, "NAME_INVALID"),
                ("GET", "/v2/a/b/manifests/-bad", 400, "TAG_INVALID"),
                ("PUT", "/v2/a/b/manifests/v2", 405, "UNSUPPORTED"),
                ("DELETE", "/v2/a/b/manifests/" + digest, 405, "UNSUPPORTED"),
                ("GET", "/elsewhere", 404, "NOT_FOUND"),
            ]
            for method, path, want, code in cases:
                st, h, body = req(method, path)
                ok(st == want and error_code(body) == code, "%s %s: %d %s" % (method, path, want, code))
            lines = open(log).read().splitlines()
            ok("GET /v2/a/b/manifests/v1 200" in lines and "PUT /v2/a/b/manifests/v2 405" in lines,
               "the log has one line a request")
        finally:
            srv.terminate()
            srv.wait()
    print("1..%d" % count)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
