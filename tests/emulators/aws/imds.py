#!/usr/bin/env python3
"""imds.py - the EC2 instance metadata service (IMDS) that booted VMs see
(tests/emulators/gce/vms.py with the harness's EC2 flavour), on
169.254.169.254:80 inside the harness's network namespace.

    ip netns exec NS python3 imds.py --dir STATE/vm/meta [--bind 169.254.169.254]

Which instance asks is told by the source address: DIR/ADDR.json (written
by the harness through vms.py, replaced atomically) is that instance's
{"meta-data": TREE, "dynamic": TREE, "user-data": TEXT or null,
"http_tokens": "required" | "optional"}.  What is served, as EC2 does:

- PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds (1 to
  21600; missing or out of range: 400) gives an IMDSv2 session token for
  that address, echoing the TTL header; a PUT carrying X-Forwarded-For is
  403.
- GET /VERSION/meta-data/PATH, /VERSION/dynamic/PATH, /VERSION/user-data
  (VERSION: `latest` or one of EC2's dated versions; GET / lists them): a
  directory lists its entries one per line, subdirectories with a trailing
  /; `public-keys/` lists `0=KEYNAME` and `public-keys/0/` lists
  `openssh-key`, as EC2's does; a leaf is its text.  No user data is 404.
- X-aws-ec2-metadata-token: a token this server issued to this address and
  not expired, else 401.  Without the header: 401 when the instance's
  HttpTokens is `required` (IMDSv2 only), served when `optional` (IMDSv1).
- Unknown paths and addresses without an instance file are 404; methods
  other than GET and PUT are 405.
- meta-data/spot/instance-action exists only once the instance has a
  spot interruption notice (the harness's POST /_harness/spot-interruption):
  JSON {"action": "terminate" | "stop" | "hibernate", "time": "...Z"}, the
  time of the action; until then it is 404, as on EC2.  A terminate
  notice also gives meta-data/spot/termination-time (the same time).

A node body's IMDS (BodyServer, in the harness's own process) serves one
instance's document, made afresh for each request by a function, on that
body's private address, port 80: a process on this host connects to a
loopback address from 127.0.0.1 whatever it is, so the address asked
tells the body.

Python standard library only.
"""

import argparse
import json
import os
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

VERSIONS = ["1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15",
            "2008-02-01", "2008-09-01", "2009-04-04", "2011-01-01", "2011-05-01", "2012-01-12",
            "2014-02-25", "2014-11-05", "2015-10-20", "2016-04-19", "2016-06-30", "2016-09-02",
            "2018-03-28", "2018-08-17", "2018-09-24", "2019-10-01", "2020-10-27", "2021-01-03",
            "2021-03-23", "2021-07-15", "2022-09-24", "latest"]
TTL_MAX = 21600


def lookup(tree, parts):
    """The node at PARTS; `public-keys` entries are named "N=KEYNAME" and
    found by N."""
    node = tree
    for p in parts:
        if not isinstance(node, dict):
            return None
        if p in node:
            node = node[p]
            continue
        hit = [k for k in node if "=" in k and k.split("=", 1)[0] == p]
        if not hit:
            return None
        node = node[hit[0]]
    return node


def listing(node):
    out = []
    for k, v in node.items():
        # "0=name" entries list without the slash, as EC2's public-keys/
        out.append(k + ("/" if isinstance(v, dict) and "=" not in k else ""))
    return "".join(line + "\n" for line in out)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "EC2ws"
    sys_version = ""
    meta_dir = None
    tokens = {}         # token -> (address, expiry)
    lock = threading.Lock()

    def log_message(self, fmt, *args):
        pass

    def _send(self, code, text, extra=()):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _doc(self):
        path = os.path.join(self.meta_dir, self.client_address[0] + ".json")
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _drain(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)

    def do_PUT(self):
        self._drain()
        if urlsplit(self.path).path != "/latest/api/token":
            return self._send(404, "Not Found\n")
        if self.headers.get("X-Forwarded-For"):
            return self._send(403, "Forbidden\n")
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        if ttl is None or not ttl.isdigit() or not 1 <= int(ttl) <= TTL_MAX:
            return self._send(400, "Bad Request\n")
        if self._doc() is None:
            return self._send(404, "Not Found\n")
        token = secrets.token_urlsafe(40)
        with self.lock:
            now = time.time()
            for t, (_, exp) in list(self.tokens.items()):
                if exp < now:
                    del self.tokens[t]
            self.tokens[token] = (self.client_address[0], now + int(ttl))
        self._send(200, token, [("X-aws-ec2-metadata-token-ttl-seconds", ttl)])

    def _authorised(self, doc):
        token = self.headers.get("X-aws-ec2-metadata-token")
        if token is None:
            return doc.get("http_tokens", "required") == "optional"
        with self.lock:
            addr, exp = self.tokens.get(token, (None, 0))
        return addr == self.client_address[0] and exp >= time.time()

    def do_GET(self):
        doc = self._doc()
        if doc is None:
            return self._send(404, "Not Found\n")
        if not self._authorised(doc):
            return self._send(401, "Unauthorized\n")
        path = urlsplit(self.path).path
        if path == "/":
            return self._send(200, "\n".join(VERSIONS))
        parts = [p for p in path.split("/") if p]
        if parts[0] not in VERSIONS:
            return self._send(404, "Not Found\n")
        if len(parts) == 1:
            top = ["dynamic", "meta-data"] + (["user-data"] if doc.get("user-data") is not None else [])
            return self._send(200, "\n".join(top))
        if parts[1] == "user-data" and len(parts) == 2:
            if doc.get("user-data") is None:
                return self._send(404, "Not Found\n")
            return self._send(200, doc["user-data"])
        if parts[1] not in ("meta-data", "dynamic"):
            return self._send(404, "Not Found\n")
        node = lookup(doc.get(parts[1], {}), parts[2:])
        if node is None:
            return self._send(404, "Not Found\n")
        if isinstance(node, dict):
            return self._send(200, listing(node).rstrip("\n"))
        return self._send(200, node if isinstance(node, str) else json.dumps(node))

    def do_POST(self):
        self._drain()
        self._send(405, "Method Not Allowed\n")

    do_DELETE = do_POST
    do_PATCH = do_POST


def spot_tree(notice):
    """meta-data/spot/ for a spot interruption NOTICE {"action", "time"}."""
    tree = {"instance-action": json.dumps({"action": notice["action"], "time": notice["time"]})}
    if notice["action"] == "terminate":
        tree["termination-time"] = notice["time"]
    return tree


class BodyServer:
    """The IMDS of one node body: DOC() (None: no instance) served on
    ADDR:PORT from a thread of this process until close()."""

    def __init__(self, addr, port, doc):
        handler = type("BodyHandler", (Handler,), {"tokens": {}, "lock": threading.Lock(),
                                                   "_doc": lambda self: doc()})
        self.httpd = ThreadingHTTPServer((addr, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv):
    ap = argparse.ArgumentParser(description="EC2 instance metadata service for booted test VMs.")
    ap.add_argument("--dir", required=True, help="ADDR.json per instance")
    ap.add_argument("--bind", default="169.254.169.254")
    ap.add_argument("--port", type=int, default=80)
    args = ap.parse_args(argv)
    Handler.meta_dir = args.dir
    server = ThreadingHTTPServer((args.bind, args.port), Handler)
    server.daemon_threads = True
    server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
