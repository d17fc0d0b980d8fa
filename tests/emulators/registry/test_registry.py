"""test_registry.py - registry.py answers as a registry does: an image
pushed here is served by tag and by digest (Content-Type, Docker-Content-
Digest, bytes whose sha256 is that digest), HEAD without a body, blobs
whose bytes match their digest, and the registry's errors with its JSON
body (unknown tag, name or blob; a bad name, tag or digest; any write);
with --users, the token authentication registries answer with (a Bearer
challenge on every read, /token with Basic credentials or none, tokens
scoped to a repository, expired, refused).  Loopback only (127.0.0.1,
ports the kernel picks); stdlib only."""

import base64
import hashlib
import http.client
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse

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


def start(tmp, tag, args):
    """registry.py serve with args on a port the kernel picks: (process, port)."""
    portf = os.path.join(tmp, tag + ".port")
    srv = subprocess.Popen([sys.executable, REG, "serve", "--port", "0", "--port-file", portf] + args)
    for _ in range(400):
        if os.path.exists(portf) or srv.poll() is not None:
            break
        time.sleep(0.05)
    return srv, int(open(portf).read())


def request(port, method, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.headers, body


def error_code(body):
    return json.loads(body)["errors"][0]["code"]


def challenge(h):
    """The WWW-Authenticate Bearer challenge's parameters, as a dict."""
    v = h.get("WWW-Authenticate", "")
    if not v.startswith("Bearer "):
        return {}
    out = {}
    for part in v[7:].split(","):
        k, _, val = part.partition("=")
        out[k.strip()] = val.strip().strip('"')
    return out


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


def bearer(tok):
    return {"Authorization": "Bearer " + tok}


def check_auth(tmp, root, digest):
    """--users: the token protocol, as a client meets it."""
    users = os.path.join(tmp, "users")
    password = "pw-%d-secret" % os.getpid()
    with open(users, "w") as f:
        f.write("alice:%s\n\nbob:other\n" % password)
    log = os.path.join(tmp, "auth.log")
    srv, port = start(tmp, "auth", ["--root", root, "--log", log, "--users", users, "--public", "open/img",
                                    "--token-ttl", "2"])
    try:
        def req(method, path, headers=None):
            return request(port, method, path, headers)

        def token(scope, headers=None, service="pbx-test-registry"):
            q = urllib.parse.urlencode([("service", service)] + ([("scope", scope)] if scope else []))
            return req("GET", "/token?" + q, headers)

        realm = "http://127.0.0.1:%d/token" % port
        st, h, body = req("GET", "/v2/")
        c = challenge(h)
        ok(st == 401 and error_code(body) == "UNAUTHORIZED", "auth: /v2/ without a token: 401 UNAUTHORIZED")
        ok(c.get("realm") == realm and c.get("service") == "pbx-test-registry" and "scope" not in c,
           "auth: /v2/'s challenge names the realm and service, no scope: %s" % h.get("WWW-Authenticate"))
        for path in ("/v2/a/b/manifests/v1", "/v2/a/b/manifests/" + digest, "/v2/a/b/blobs/" + digest,
                     "/v2/no/such/manifests/v1"):
            st, h, body = req("GET", path)
            ok(st == 401 and error_code(body) == "UNAUTHORIZED" and challenge(h).get("realm") == realm
               and challenge(h).get("scope") == "repository:%s/%s:pull" % tuple(path.split("/")[2:4]),
               "auth: %s without a token: 401, scope of its repository" % path)
        st, h, body = req("HEAD", "/v2/a/b/manifests/v1")
        ok(st == 401 and body == b"", "auth: HEAD without a token: 401, no body")
        st, h, body = token("repository:a/b:pull", basic("alice", "wrong"))
        ok(st == 401 and error_code(body) == "UNAUTHORIZED", "auth: /token with a wrong password: 401")
        st, h, body = token("repository:a/b:pull", basic("mallory", password))
        ok(st == 401, "auth: /token for an unknown user: 401")
        st, h, body = token("repository:a/b:pull", {"Authorization": "Basic !!notbase64"})
        ok(st == 401, "auth: /token with malformed Basic credentials: 401")
        st, h, body = token("repository:a/b:pull", basic("alice", password), service="elsewhere")
        ok(st == 400, "auth: /token for another service: 400")
        st, h, body = token("repository:a/b", basic("alice", password))
        ok(st == 400, "auth: /token with a malformed scope: 400")
        st, h, body = token("repository:a/b:pull", basic("alice", password))
        t = json.loads(body) if st == 200 else {}
        ok(st == 200 and t.get("token") and t["token"] == t.get("access_token") and t.get("expires_in") == 2
           and t.get("issued_at", "").endswith("Z"), "auth: /token with the password: token, access_token, "
           "expires_in, issued_at")
        tok = t.get("token", "")
        st, h, body = req("GET", "/v2/a/b/manifests/v1", bearer(tok))
        ok(st == 200 and "sha256:" + hashlib.sha256(body).hexdigest() == digest, "auth: the token reads the manifest")
        blob = json.loads(body)["layers"][0]["digest"] if st == 200 else ""
        st, h, body = req("GET", "/v2/a/b/blobs/" + blob, bearer(tok))
        ok(st == 200 and "sha256:" + hashlib.sha256(body).hexdigest() == blob, "auth: and a blob")
        st, h, body = req("GET", "/v2/", bearer(tok))
        ok(st == 200, "auth: /v2/ with a valid token: 200")
        st, h, body = req("GET", "/v2/open/img/manifests/v1", bearer(tok))
        ok(st == 401 and challenge(h).get("error") == "insufficient_scope",
           "auth: a token of a/b on open/img: 401 insufficient_scope")
        st, h, body = req("GET", "/v2/a/b/manifests/v1", bearer(tok + "x"))
        ok(st == 401 and challenge(h).get("error") == "invalid_token", "auth: an unknown token: 401 invalid_token")
        st, h, body = token("repository:a/b:pull")
        anon = json.loads(body).get("token", "") if st == 200 else ""
        ok(st == 200 and anon, "auth: an anonymous /token answers, with the access it has (none)")
        st, h, body = req("GET", "/v2/a/b/manifests/v1", bearer(anon))
        ok(st == 401 and challenge(h).get("error") == "insufficient_scope",
           "auth: anonymous on a private repository: 401 insufficient_scope")
        st, h, body = token("repository:open/img:pull")
        anon = json.loads(body).get("token", "") if st == 200 else ""
        st, h, body = req("GET", "/v2/open/img/manifests/v1", bearer(anon))
        ok(st == 200, "auth: anonymous on a --public repository: 200")
        st, h, body = token(None, basic("bob", "other"))
        ok(st == 200, "auth: /token without a scope checks the credentials only (a login)")
        time.sleep(2.2)
        st, h, body = req("GET", "/v2/a/b/manifests/v1", bearer(tok))
        ok(st == 401 and challenge(h).get("error") == "invalid_token", "auth: an expired token: 401 invalid_token")
        text = open(log).read()
        ok("GET /token?" in text and password not in text and "Basic" not in text,
           "auth: the log has the requests, no credential")
    finally:
        srv.terminate()
        srv.wait()
    with open(users, "w") as f:
        f.write("alice:%s\nnocolon\n" % password)
    p = subprocess.run([sys.executable, REG, "serve", "--root", root, "--port", "0", "--users", users],
                       capture_output=True, text=True, timeout=30)
    ok(p.returncode != 0 and "users:2: want USER:PASSWORD" in p.stderr and password not in p.stderr,
       "auth: a bad users file names the file and line, not a password: %s" % p.stderr.strip())


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
        log = os.path.join(tmp, "log")
        srv, port = start(tmp, "plain", ["--root", root, "--log", log])
        try:
            def req(method, path):
                return request(port, method, path)

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
        subprocess.check_call([sys.executable, REG, "push", "--root", root, "--name", "open/img", "--tag", "v1",
                               layer], stdout=subprocess.DEVNULL)
        check_auth(tmp, root, digest)
    print("1..%d" % count)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
