#!/usr/bin/env python3
"""A scripted loopback HTTP/1.1 server for test_http (keep-alive, so the
client's connection reuse shows as one peer port).  Usage: server.py
PORTFILE; it binds 127.0.0.1 on a free port and writes the port there.

  /echo                      200 {"method","path","query","peer_port","headers","body"}
  /fail?k=K&n=N&code=C[&reason=R][&retry_after=S]
                             the first N requests of key K get status C
                             (Google JSON error with reason R), then 200
  /log?k=K                   the query strings key K has seen, in order
  /slow?ms=M                 answers after M ms
  /big?n=N                   N bytes of 'x'
  /autherr                   401 whose JSON carries secret members
  /drop?k=K&n=N              the first N requests of key K: connection closed, no reply
  /token[?expires_in=E&fail=1]
                             an OAuth token endpoint that checks nothing: records
                             the form (see /log?k=token), answers
                             {"access_token": "tok-N", "expires_in": E (3600)}, or
                             400 invalid_grant with fail=1 (the test verifies JWTs)
  /computeMetadata/v1/instance/service-accounts/default/token
                             the metadata server's token (Metadata-Flavor: Google required)
  /latest/api/token, /latest/meta-data/iam/security-credentials/[ROLE]
                             EC2's IMDSv2: PUT a session token, then the role
                             (pbx-role) and its credentials with it
"""
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

seen = {}
lock = threading.Lock()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def reply(self, code, obj=None, raw=None, headers=()):
        data = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        u = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
        key = q.get("k", "")
        if u.path == "/token":
            key = "token"
        with lock:
            if u.path != "/log":
                seen.setdefault(key, []).append(body if u.path == "/token" else u.query)
            count = len(seen.get(key, []))
        if u.path == "/echo":
            return self.reply(200, {"method": self.command, "path": u.path, "query": u.query,
                                    "peer_port": self.client_address[1],
                                    "headers": {k.lower(): v for k, v in self.headers.items()},
                                    "body": body})
        if u.path == "/fail":
            if count <= int(q["n"]):
                hdrs = [("Retry-After", q["retry_after"])] if "retry_after" in q else []
                err = {"error": {"code": int(q["code"]), "message": "scripted failure",
                                 "errors": [{"message": "scripted", "domain": "usageLimits",
                                             "reason": q.get("reason", "backendError")}]}}
                return self.reply(int(q["code"]), err, headers=hdrs)
            return self.reply(200, {"attempts": count})
        if u.path == "/log":
            with lock:
                return self.reply(200, seen.get(key, []))
        if u.path == "/slow":
            time.sleep(int(q["ms"]) / 1000.0)
            return self.reply(200, {"slept": q["ms"]})
        if u.path == "/big":
            return self.reply(200, raw=b"x" * int(q["n"]))
        if u.path == "/autherr":
            return self.reply(401, {"error": "invalid_grant", "access_token": "SECRET-IN-REPLY",
                                    "nested": [{"refresh_token": "SECRET-NESTED"}],
                                    "error_description": "bad grant"})
        if u.path == "/token":
            if q.get("fail"):
                return self.reply(400, {"error": "invalid_grant",
                                        "error_description": "Invalid JWT Signature."})
            return self.reply(200, {"access_token": "tok-%d" % count,
                                    "expires_in": int(q.get("expires_in", "3600")),
                                    "token_type": "Bearer"})
        if u.path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, {"error": "missing Metadata-Flavor"})
            return self.reply(200, {"access_token": "md-%d" % count, "expires_in": 3599,
                                    "token_type": "Bearer"})
        # IMDSv2 (EC2 instance metadata): a session token from PUT, then the
        # role and its credentials, each only with that token.
        if u.path == "/latest/api/token":
            if self.command != "PUT" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                return self.reply(403, raw=b"IMDSv2: PUT with a TTL header")
            return self.reply(200, raw=b"imds-session-token")
        if u.path.startswith("/latest/meta-data/iam/security-credentials/"):
            if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
                return self.reply(401, raw=b"")
            role = u.path[len("/latest/meta-data/iam/security-credentials/"):]
            if not role:
                return self.reply(200, raw=b"pbx-role")
            return self.reply(200, {"Code": "Success", "AccessKeyId": "ASIAIMDS",
                                    "SecretAccessKey": "imds-secret", "Token": "imds-token",
                                    "Expiration": "2030-01-01T00:00:00Z"})
        if u.path == "/redirect":
            return self.reply(302, {"moved": q["to"]}, headers=[("Location", q["to"])])
        if u.path == "/drop":
            if count <= int(q["n"]):
                self.close_connection = True
                return
            return self.reply(200, {"attempts": count})
        return self.reply(404, {"error": {"code": 404, "message": "no such path"}})

    do_GET = do_POST = do_DELETE = do_PUT = handle_any


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # clients that hang up (the timeout test) are expected


srv = Server(("127.0.0.1", 0), H)
srv.daemon_threads = True
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
