#!/usr/bin/env python3
"""metadata.py - the Compute Engine metadata server that booted VMs see
(vms.py), on 169.254.169.254:80 inside the emulator's network namespace,
and that node bodies see (bodies.py), each on its own address.

    ip netns exec NS python3 metadata.py --dir STATE/vm/meta [--bind 169.254.169.254]
                                         [--mint-socket STATE/vm/api.sock]

Which instance asks is told by the source address: DIR/ADDR.json (written
by vms.py, replaced atomically) is that instance's tree {"instance": ...,
"project": ...}.  A node body's server (BodyServer, in the emulator's own
process) serves one instance's tree, made afresh for each look by a
function, on that body's networkIP (a process on this host connects to a
loopback address from 127.0.0.1 whatever it is, so the address it asked
tells the body).  What is served, as the documented server does:

- GET /computeMetadata/v1/PATH: a directory (PATH ending in /) lists its
  keys, one per line, subdirectories with a trailing /; a leaf is its text.
  `?recursive=true` gives the subtree as JSON (`alt=text` refused here);
  `?alt=json` a leaf as JSON.
- Every request needs the header `Metadata-Flavor: Google` (else 403), and
  one with `X-Forwarded-For` is refused (403), as Google's server does; every
  reply carries `Metadata-Flavor: Google` and an `ETag`.
- `?wait_for_change=true` (with `last_etag` and `timeout`, seconds) holds
  the reply until the value's ETag differs from `last_etag` (without one:
  from the value's ETag when the request came) or the timeout passes
  (Google's guest agent watches the whole tree this way; a spot node's
  pbx-preempt watches instance/preempted).
- GET instance/service-accounts/ACCOUNT/token (ACCOUNT: `default` or the
  e-mail), where the instance has that service account: a fresh OAuth 2
  access token {"access_token", "expires_in", "token_type": "Bearer"}
  for the account with the instance's scopes, valid at the emulator's
  compute API (the server's `mint` hook: node bodies' servers have one,
  and a VM's server started with --mint-socket asks the emulator through
  that unix socket, POST /_emulator/metadata-token; without it, and for an
  instance with no account, 404).  Never in a
  recursive listing, as on Google's server.
- Paths are hyphenated (service-accounts, network-interfaces), the tree's
  keys camelCase as recursive JSON shows them; both spellings are found.
- PUT under instance/guest-attributes/ stores a value (the guest agent
  publishes its host keys there); other writes are 405.
- Unknown paths are 404; an address with no instance file is 404 too.

Python standard library only.
"""

import argparse
import hashlib
import http.client
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PREFIX = "/computeMetadata/v1/"


def camel(part):
    """network-interfaces -> networkInterfaces: the server's paths are
    hyphenated, its recursive JSON (the tree here) camelCase."""
    head, *rest = part.split("-")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def lookup(tree, parts):
    node = tree
    for p in parts:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, dict) and camel(p) in node:
            node = node[camel(p)]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return None, False
    return node, True


def listing(node):
    if isinstance(node, dict):
        keys = node.items()
    else:
        keys = ((str(i), v) for i, v in enumerate(node))
    return "".join(k + ("/" if isinstance(v, (dict, list)) else "") + "\n" for k, v in keys)


def leaf_text(node):
    if isinstance(node, str):
        return node
    return json.dumps(node)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    meta_dir = None
    guest = {}          # (addr, path) -> value: guest attributes

    def log_message(self, fmt, *args):
        pass

    def _send(self, code, text, ctype="text/plain", etag=None):
        data = text.encode()
        self.send_response(code)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if etag:
            self.send_header("ETag", etag)
        self.end_headers()
        self.wfile.write(data)

    def _refused(self):
        """403 when the request lacks the flavor header or was forwarded."""
        if self.headers.get("Metadata-Flavor") != "Google":
            self._send(403, "Missing required header: Metadata-Flavor\n")
            return True
        if self.headers.get("X-Forwarded-For"):
            self._send(403, "Forwarded requests are refused\n")
            return True
        return False

    def _load(self):
        """The asking instance's tree, or None."""
        path = os.path.join(self.meta_dir, self.client_address[0] + ".json")
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _tree(self):
        tree = self._load()
        if tree is None:
            return None
        for (addr, key), value in list(self.guest.items()):
            if addr == self.client_address[0]:
                node = tree["instance"].setdefault("guest-attributes", {})
                *dirs, last = key.split("/")
                for d in dirs:
                    node = node.setdefault(d, {})
                node[last] = value
        return tree

    mint = None         # (email, scopes) -> {"access_token", ...}: see BodyServer

    def _token(self, tree, account):
        """(code, text, ctype, etag) of GET .../service-accounts/ACCOUNT/token."""
        sa = tree["instance"].get("serviceAccounts", {}).get(account)
        if sa is None or self.mint is None:
            return 404, "Not Found\n", "text/plain", None
        try:
            return 200, json.dumps(self.mint(sa["email"], sa["scopes"])), "application/json", None
        except (OSError, ValueError) as e:    # the emulator did not answer
            sys.stderr.write("token for %s: %s\n" % (sa["email"], e))
            return 503, "Service Unavailable\n", "text/plain", None

    def _answer(self, parts, q, directory):
        """(code, text, content type, etag) of a GET now."""
        tree = self._tree()
        if tree is None:
            return 404, "no instance at this address\n", "text/plain", None
        if len(parts) == 4 and parts[:2] == ["instance", "service-accounts"] and parts[3] == "token":
            return self._token(tree, parts[2])
        node, found = lookup(tree, parts)
        if not found:
            return 404, "Not Found\n", "text/plain", None
        recursive = q.get("recursive", ["false"])[0].lower() == "true"
        alt = q.get("alt", ["json" if recursive else "text"])[0]
        if isinstance(node, (dict, list)) and recursive:
            if alt != "json":
                return 400, "recursive=true needs alt=json\n", "text/plain", None
            text, ctype = json.dumps(node), "application/json"
        elif isinstance(node, (dict, list)):
            if not directory:
                return 301, "", "text/plain", None
            text, ctype = listing(node), "application/text"
        else:
            text = json.dumps(node) if alt == "json" else leaf_text(node)
            ctype = "application/json" if alt == "json" else "application/text"
        etag = hashlib.sha256(text.encode()).hexdigest()[:16]
        return 200, text, ctype, etag

    def do_GET(self):
        if self._refused():
            return
        url = urlsplit(self.path)
        if not url.path.startswith(PREFIX) and url.path.rstrip("/") + "/" != PREFIX:
            return self._send(404, "Not Found\n")
        rest = url.path[len(PREFIX):] if url.path.startswith(PREFIX) else ""
        parts = [p for p in rest.split("/") if p]
        q = parse_qs(url.query)
        directory = rest == "" or rest.endswith("/")
        wait = q.get("wait_for_change", ["false"])[0].lower() == "true"
        last = q.get("last_etag", [None])[0]
        try:
            timeout = float(q.get("timeout", ["300"])[0])
        except ValueError:
            return self._send(400, "bad timeout\n")
        end = time.time() + min(max(timeout, 0), 3600)
        if wait and last is None:
            last = self._answer(parts, q, directory)[3]
        while True:
            code, text, ctype, etag = self._answer(parts, q, directory)
            if code != 200 or not wait or etag != last or time.time() >= end:
                break
            time.sleep(0.5)
        if code == 301:
            self.send_response(301)
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Location", url.path + "/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._send(code, text, ctype, etag)

    def do_PUT(self):
        if self._refused():
            return
        url = urlsplit(self.path)
        key = url.path[len(PREFIX + "instance/guest-attributes/"):]
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode(errors="replace")
        if not url.path.startswith(PREFIX + "instance/guest-attributes/") or not key.strip("/"):
            return self._send(405, "Method Not Allowed\n")
        self.guest[(self.client_address[0], key.strip("/"))] = body
        self._send(200, "")

    def do_POST(self):
        self._send(405, "Method Not Allowed\n")


class BodyServer:
    """The metadata server of one node body: TREE() (None: no instance)
    served on ADDR:PORT from a thread of this process until close().
    MINT(email, scopes), when given, makes the token of a service account
    the instance has (the emulator's own tokens, so the compute API takes
    them as that account's)."""

    def __init__(self, addr, port, tree, mint=None):
        handler = type("BodyHandler", (Handler,), {"guest": {}, "_load": lambda self: tree(),
                                                   "mint": staticmethod(mint) if mint else None})
        self.httpd = ThreadingHTTPServer((addr, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (the emulator's port, forwarded into the
    namespace by vms.py)."""

    def __init__(self, path):
        super().__init__("127.0.0.1", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def socket_mint(path):
    """A mint hook that asks the emulator behind the unix socket PATH."""
    def mint(email, scopes):
        conn = _UnixConnection(path)
        try:
            conn.request("POST", "/_emulator/metadata-token", json.dumps({"email": email, "scopes": scopes}),
                         {"Content-Type": "application/json", "Host": "127.0.0.1"})
            reply = conn.getresponse()
            body = reply.read()
            if reply.status != 200:
                raise OSError("the emulator answered %d: %s" % (reply.status, body[:200]))
            return json.loads(body)
        finally:
            conn.close()
    return mint


def main(argv):
    ap = argparse.ArgumentParser(description="Compute Engine metadata server for booted test VMs.")
    ap.add_argument("--dir", required=True, help="ADDR.json per instance")
    ap.add_argument("--bind", default="169.254.169.254")
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--mint-socket", help="the emulator's port as a unix socket: tokens come from it")
    args = ap.parse_args(argv)
    Handler.meta_dir = args.dir
    if args.mint_socket:
        Handler.mint = staticmethod(socket_mint(args.mint_socket))
    server = ThreadingHTTPServer((args.bind, args.port), Handler)
    server.daemon_threads = True
    server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
