#!/usr/bin/env python3
"""registry.py - a strict, minimal, read-only OCI distribution registry for
tests, on 127.0.0.1 only (pbx's `container: docker://REF`,
docs/environments.md).  See README.md here.

    python3 registry.py push --root DIR --name NAME --tag TAG LAYER.tar...
        stores an image: each LAYER.tar (a plain tar) as a gzip layer blob,
        an OCI image config and an OCI image manifest naming them; TAG
        points to the manifest.  Prints the manifest's digest.
    python3 registry.py serve --root DIR --port PORT [--port-file F] [--log F]
                              [--users FILE [--public NAME]... [--token-ttl S]]
        serves DIR read-only until killed:
          GET|HEAD /v2/                          200 {}
          GET|HEAD /v2/NAME/manifests/TAG|DIGEST  the manifest (Content-Type
              its media type, Docker-Content-Digest, Content-Length)
          GET|HEAD /v2/NAME/blobs/DIGEST          the blob
        and what a registry answers otherwise: 404 NAME_UNKNOWN,
        MANIFEST_UNKNOWN, BLOB_UNKNOWN; 400 NAME_INVALID, TAG_INVALID,
        DIGEST_INVALID; 405 UNSUPPORTED for a write (PUT, POST, PATCH,
        DELETE); 404 for a path outside /v2/ -- each with the registry's
        JSON error body {"errors": [{"code", "message", "detail"}]}.
        --log: one line a request, "METHOD PATH STATUS", written at once
        (never a credential: no header is logged, and /token's query
        holds none).
        --users FILE: the distribution spec's token authentication (the
        Docker registry token protocol), as Docker Hub, GHCR and Artifact
        Registry answer it.  FILE has one "USER:PASSWORD" a line (kept
        out of the command line).  Without a token every read, /v2/
        included, answers 401 UNAUTHORIZED with
            WWW-Authenticate: Bearer realm="http://HOST:PORT/token",
                service="pbx-test-registry"[,scope="repository:NAME:pull"]
        (and error="invalid_token" for an unknown or expired token,
        error="insufficient_scope" for one that does not cover NAME);
          GET /token?service=S[&scope=repository:NAME:pull]...
              HTTP Basic credentials (or none: anonymous); a wrong
              user or password answers 401 UNAUTHORIZED; else 200
              {"token", "access_token", "expires_in", "issued_at"} for
              the access the caller has (a user: pull on every
              repository; anonymous: pull on the --public ones only; as
              the protocol says, less than asked is not an error: the
              registry refuses the token later); an unknown service or a
              malformed scope answers 400.
        A token is an opaque random string the registry remembers with
        its access and expiry (--token-ttl, default 300 s).

Layout of DIR: blobs/sha256/HEX (content-addressed, checked on push),
repos/NAME/tags/TAG (a manifest's digest).  Stdlib only.
"""

import argparse
import base64
import gzip
import hashlib
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# the distribution spec's grammar (a repository name and a tag)
NAME_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
SERVICE = "pbx-test-registry"
SCOPE_RE = re.compile(r"^repository:([^:]+):([a-z*]+(?:,[a-z*]+)*)$")


def put_blob(root, data):
    """Stores data under its digest; returns the digest."""
    hexd = hashlib.sha256(data).hexdigest()
    d = os.path.join(root, "blobs", "sha256")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hexd), "wb") as f:
        f.write(data)
    return "sha256:" + hexd


def push(args):
    if not NAME_RE.match(args.name) or not TAG_RE.match(args.tag):
        sys.exit("registry.py: bad name or tag")
    layers, diff_ids = [], []
    for path in args.layers:
        with open(path, "rb") as f:
            raw = f.read()
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        gz = gzip.compress(raw, mtime=0)
        layers.append({"mediaType": LAYER_TYPE, "digest": put_blob(args.root, gz), "size": len(gz)})
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": put_blob(args.root, config), "size": len(config)},
        "layers": layers,
    }, sort_keys=True).encode()
    digest = put_blob(args.root, manifest)
    tags = os.path.join(args.root, "repos", args.name, "tags")
    os.makedirs(tags, exist_ok=True)
    with open(os.path.join(tags, args.tag), "w") as f:
        f.write(digest + "\n")
    print(digest)


class Handler(BaseHTTPRequestHandler):
    server_version = "pbx-test-registry/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):  # the --log file instead of stderr
        pass

    def answer(self, status, body, ctype="application/json", digest=None, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        if digest:
            self.send_header("Docker-Content-Digest", digest)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.server.log("%s %s %d" % (self.command, self.path, status))

    def error(self, status, code, message, detail=None, headers=()):
        body = json.dumps({"errors": [{"code": code, "message": message, "detail": detail}]})
        self.answer(status, body.encode(), headers=headers)

    def challenge(self, scope, why=None):
        """401 UNAUTHORIZED with the Bearer challenge for scope (None: /v2/
        itself); why: the challenge's error (invalid_token,
        insufficient_scope)."""
        c = 'Bearer realm="http://%s:%d/token",service="%s"' % (
            self.server.server_address[0], self.server.server_address[1], SERVICE)
        if scope:
            c += ',scope="%s"' % scope
        if why:
            c += ',error="%s"' % why
        detail = [{"Type": "repository", "Name": scope.split(":")[1], "Action": "pull"}] if scope else None
        self.error(401, "UNAUTHORIZED", "authentication required", detail, [("WWW-Authenticate", c)])
        return False

    def authorized(self, name):
        """Whether the request's Bearer token may read repository name
        (None: any valid token, for /v2/); answers 401 when not."""
        auth = self.server.auth
        if auth is None:
            return True
        scope = "repository:%s:pull" % name if name else None
        h = self.headers.get("Authorization", "")
        if not h.startswith("Bearer "):
            return self.challenge(scope)
        access = auth.lookup(h[7:].strip())
        if access is None:
            return self.challenge(scope, "invalid_token")
        if name and "pull" not in access.get(name, ()):
            return self.challenge(scope, "insufficient_scope")
        return True

    def token(self):
        """GET /token: a token for the access the caller has."""
        auth = self.server.auth
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, keep_blank_values=True)
        if q.get("service") != [SERVICE]:
            return self.error(400, "UNSUPPORTED", "unknown service", q.get("service"))
        wanted = []
        for scope in q.get("scope", []):
            for one in scope.split(" "):  # a scope parameter may list several
                m = SCOPE_RE.match(one)
                if not m or not NAME_RE.match(m.group(1)):
                    return self.error(400, "UNSUPPORTED", "malformed scope", one)
                wanted.append((m.group(1), m.group(2).split(",")))
        ok, user = auth.basic(self.headers.get("Authorization"))
        if not ok:
            return self.error(401, "UNAUTHORIZED", "invalid username or password", None,
                              [("WWW-Authenticate", 'Basic realm="%s"' % SERVICE)])
        tok, issued = auth.issue(user, wanted)
        body = json.dumps({"token": tok, "access_token": tok, "expires_in": auth.ttl,
                           "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(issued))})
        return self.answer(200, body.encode())

    def blob(self, digest):
        """The blob's bytes, or None (no such blob)."""
        path = os.path.join(self.server.root, "blobs", "sha256", digest[7:])
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def route(self):
        path = self.path.split("?", 1)[0]
        if path == "/token" and self.server.auth:
            return self.token()
        if path in ("/v2", "/v2/"):
            if not self.authorized(None):
                return None
            return self.answer(200, b"{}")
        m = re.match(r"^/v2/(.+)/(manifests|blobs)/([^/]+)$", path)
        if not m:
            return self.error(404, "NOT_FOUND", "no such endpoint", path)
        name, kind, ref = m.groups()
        if not NAME_RE.match(name) or len(name) > 255:
            return self.error(400, "NAME_INVALID", "invalid repository name", name)
        # credentials before existence: a registry does not tell who may
        # not read whether a repository exists
        if not self.authorized(name):
            return None
        repo = os.path.join(self.server.root, "repos", name)
        if not os.path.isdir(repo):
            return self.error(404, "NAME_UNKNOWN", "repository name not known to registry", name)
        if kind == "blobs":
            if not DIGEST_RE.match(ref):
                return self.error(400, "DIGEST_INVALID", "provided digest did not match uploaded content", ref)
            data = self.blob(ref)
            if data is None:
                return self.error(404, "BLOB_UNKNOWN", "blob unknown to registry", ref)
            return self.answer(200, data, "application/octet-stream", ref)
        if DIGEST_RE.match(ref):
            digest = ref
        elif TAG_RE.match(ref):
            try:
                with open(os.path.join(repo, "tags", ref)) as f:
                    digest = f.read().strip()
            except FileNotFoundError:
                return self.error(404, "MANIFEST_UNKNOWN", "manifest unknown", {"Tag": ref})
        else:
            return self.error(400, "TAG_INVALID", "manifest tag did not match URI", ref)
        data = self.blob(digest)
        if data is None:
            return self.error(404, "MANIFEST_UNKNOWN", "manifest unknown", {"Digest": ref})
        return self.answer(200, data, json.loads(data)["mediaType"], digest)

    def do_GET(self):
        self.route()

    def do_HEAD(self):
        self.route()

    def refuse(self):
        self.error(405, "UNSUPPORTED", "the operation is unsupported (a read-only registry)")

    do_PUT = do_POST = do_PATCH = do_DELETE = refuse


class Auth:
    """--users: who may pull, and the tokens issued (opaque, remembered
    here with their access and expiry)."""

    def __init__(self, users_file, public, ttl):
        self.users = read_users(users_file)
        self.public = set(public)
        self.ttl = ttl
        self.tokens = {}
        self.lock = threading.Lock()

    def basic(self, header):
        """(True, USER) for good Basic credentials, (True, None) for none
        (anonymous), (False, None) for bad ones."""
        if not header:
            return True, None
        if not header.startswith("Basic "):
            return False, None
        try:
            user, _, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False, None
        want = self.users.get(user)
        if want is None or not secrets.compare_digest(want.encode(), password.encode()):
            return False, None
        return True, user

    def issue(self, user, wanted):
        """A token for what user (None: anonymous) may do of wanted
        [(NAME, ACTIONS)]: pull on any repository for a user, on the public
        ones for anyone; returns (token, issued_at)."""
        access = {}
        for name, actions in wanted:
            if "pull" in actions and (user is not None or name in self.public):
                access[name] = ("pull",)
        tok = secrets.token_urlsafe(32)
        now = time.time()
        with self.lock:
            self.tokens[tok] = (access, now + self.ttl)
        return tok, now

    def lookup(self, tok):
        """The access of token tok, or None (unknown or expired)."""
        with self.lock:
            entry = self.tokens.get(tok)
        if entry is None or time.time() >= entry[1]:
            return None
        return entry[0]


def read_users(path):
    """USER:PASSWORD lines of path (blank lines skipped) as a dict."""
    users = {}
    with open(path) as f:
        for i, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            user, sep, password = line.partition(":")
            if not sep or not user or not password:
                sys.exit("registry.py: %s:%d: want USER:PASSWORD" % (path, i))
            users[user] = password
    return users


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root, port, log, auth=None):
        super().__init__(("127.0.0.1", port), Handler)
        self.root = root
        self.auth = auth
        self.logf = open(log, "a") if log else None
        self.lock = threading.Lock()

    def log(self, line):
        if self.logf:
            with self.lock:
                self.logf.write(line + "\n")
                self.logf.flush()


def serve(args):
    auth = Auth(args.users, args.public, args.token_ttl) if args.users else None
    if args.public and not auth:
        sys.exit("registry.py: --public needs --users")
    srv = Server(args.root, args.port, args.log, auth)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % srv.server_address[1])
        os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("push")
    p.add_argument("--root", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("layers", nargs="+")
    s = sub.add_parser("serve")
    s.add_argument("--root", required=True)
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--port-file")
    s.add_argument("--log")
    s.add_argument("--users", help="USER:PASSWORD lines: token authentication on")
    s.add_argument("--public", action="append", default=[], help="a repository anyone may pull")
    s.add_argument("--token-ttl", type=int, default=300)
    args = ap.parse_args()
    push(args) if args.cmd == "push" else serve(args)


if __name__ == "__main__":
    main()
