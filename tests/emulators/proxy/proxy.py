#!/usr/bin/env python3
"""proxy.py - the HTTP proxy of a site whose clusters have no other way out
(a template's `proxy:`, docs/configuration.md "A cluster behind a proxy"),
for tests: it logs every request it is asked, and answers only what it is
told to, as a site's proxy with an allow list does:

  --index HOST=DIR      plain-http requests for http://HOST/... are answered
                        here as a package index (PEP 503: /simple/,
                        /simple/NAME/ and the files) of the wheels in DIR:
                        an index only the proxy can reach
  --forward HOST=ADDR   plain-http requests for http://HOST/... are passed
                        on to ADDR (host:port, e.g. an apt cache), path as
                        asked
  --connect HOST:PORT   CONNECT to HOST:PORT is tunnelled (pypi.org:443,
                        files.pythonhosted.org:443): TLS end to end
Anything else gets 403 and is logged as refused.  The log (--log FILE) has
one line per request: "METHOD TARGET STATUS".  It binds 127.0.0.1 (--bind
to choose) on --port (0: a free one), written to --port-file once it
listens.  The HTTP is parsed by Python's http.server, never by hand.
"""
import argparse
import html
import http.client
import http.server
import os
import re
import select
import socket
import sys
import threading
import urllib.parse

LOCK = threading.Lock()


def normalise(name):
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_project(filename):
    """The normalised project of a wheel's file name, or None."""
    if not filename.endswith(".whl"):
        return None
    return normalise(filename.split("-", 1)[0])


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pbx-test-proxy"

    def log_message(self, fmt, *args):  # the log is ours: see note()
        pass

    def note(self, status):
        with LOCK:
            with open(self.server.opts.log, "a") as f:
                f.write("%s %s %d\n" % (self.command, self.path, status))

    def refuse(self, why):
        self.note(403)
        body = (why + "\n").encode()
        self.send_response(403)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def reply(self, status, body, ctype="text/html"):
        self.note(status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    # ---------------------------------------------------------- CONNECT
    def do_CONNECT(self):
        target = self.path
        if target not in self.server.opts.connect:
            return self.refuse("CONNECT to %s is not allowed here" % target)
        host, port = target.rsplit(":", 1)
        try:
            up = socket.create_connection((host, int(port)), timeout=30)
        except OSError as e:
            self.note(502)
            self.send_error(502, "cannot reach %s: %s" % (target, e))
            return
        self.note(200)
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        relay(self.connection, up)

    # ------------------------------------------------------- plain http
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.scheme != "http" or not url.hostname:
            return self.refuse("not a proxy request: %s" % self.path)
        host = url.hostname.lower()
        if host in self.server.opts.index:
            return self.serve_index(self.server.opts.index[host], url.path)
        if host in self.server.opts.forward:
            return self.pass_on(self.server.opts.forward[host], url)
        return self.refuse("%s is not allowed here" % host)

    do_HEAD = do_GET

    def serve_index(self, wheels, path):
        files = sorted(f for f in os.listdir(wheels) if wheel_project(f))
        if path == "/simple/":
            names = sorted({wheel_project(f) for f in files})
            links = "".join('<a href="/simple/%s/">%s</a>\n' % (n, n) for n in names)
            return self.reply(200, ("<html><body>\n%s</body></html>\n" % links).encode())
        m = re.fullmatch(r"/simple/([^/]+)/", path)
        if m:
            mine = [f for f in files if wheel_project(f) == normalise(m.group(1))]
            if not mine:
                return self.reply(404, b"no such project\n", "text/plain")
            links = "".join('<a href="/files/%s">%s</a>\n' % (urllib.parse.quote(f), html.escape(f))
                            for f in mine)
            return self.reply(200, ("<html><body>\n%s</body></html>\n" % links).encode())
        m = re.fullmatch(r"/files/([^/]+)", path)
        name = urllib.parse.unquote(m.group(1)) if m else ""
        if name in files:
            with open(os.path.join(wheels, name), "rb") as f:
                return self.reply(200, f.read(), "application/octet-stream")
        return self.reply(404, b"not found\n", "text/plain")

    def pass_on(self, upstream, url):
        host, port = upstream.rsplit(":", 1)
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("proxy-connection", "connection", "keep-alive")}
        try:
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            conn.request(self.command, path, headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            self.note(502)
            self.send_error(502, "cannot reach %s: %s" % (upstream, e))
            return
        self.note(resp.status)
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "keep-alive", "transfer-encoding"):
                self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        while self.command != "HEAD":
            chunk = resp.read(65536)
            if not chunk:
                break
            self.wfile.write(chunk)
        conn.close()

    def do_other(self):
        self.refuse("%s is not proxied here" % self.command)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_other


def relay(a, b):
    """Bytes both ways between sockets a and b until either closes."""
    socks = [a, b]
    try:
        while True:
            ready, _, _ = select.select(socks, [], [], 300)
            if not ready:
                return
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return
    finally:
        b.close()


def pairs(values, what):
    out = {}
    for v in values:
        k, sep, rest = v.partition("=")
        if not sep or not k or not rest:
            sys.exit("proxy.py: %s wants HOST=VALUE, got %r" % (what, v))
        out[k.lower()] = rest
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log", required=True)
    ap.add_argument("--index", action="append", default=[])
    ap.add_argument("--forward", action="append", default=[])
    ap.add_argument("--connect", action="append", default=[])
    opts = ap.parse_args()
    opts.index = pairs(opts.index, "--index")
    opts.forward = pairs(opts.forward, "--forward")
    opts.connect = set(opts.connect)
    server = http.server.ThreadingHTTPServer((opts.bind, opts.port), Proxy)
    server.daemon_threads = True
    server.opts = opts
    open(opts.log, "a").close()
    if opts.port_file:
        tmp = opts.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % server.server_address[1])
        os.replace(tmp, opts.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
