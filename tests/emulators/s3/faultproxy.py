#!/usr/bin/env python3
"""faultproxy.py - a fault-injecting HTTP proxy in front of moto_server's S3,
on 127.0.0.1 only.  See README.md here.

    python3 faultproxy.py --port 0 --port-file F (--upstream http://127.0.0.1:MOTO | --moto)
        [--bucket NAME]... [--auth] [--env-file F.json] [--fault KIND=N]... [--log FILE]
        [--transparent]

Every request is forwarded byte for byte (request line, headers as sent,
Host and Authorization included, body) on a fresh connection to moto, so
SigV4 signatures stay valid; the answer comes back as moto gave it.  What
it adds, counted down by --fault KIND=N or POST /__fault__?kind=KIND&n=N:

  corrupt   the next N GetObject bodies with one byte (the middle one) flipped,
            headers (Content-Length, ETag, x-amz-checksum-crc32c) unchanged
  cut       the next N GetObject answers send the whole Content-Length, half
            the body, and close the connection
  slowdown  the next N requests answered 503 <Error><Code>SlowDown</Code>
            (not forwarded)
  internal  the next N requests answered 500 <Error><Code>InternalError</Code>
  cutput    the next N PutObject or UploadPart requests: half the body read,
            then the connection closed with no answer (not forwarded)

(POST /__fault__ takes op=OPERATION too: the fault then fires only on that
S3 operation, e.g. op=UploadPart), and, unless --transparent, S3's checksum
rules moto lacks: a PutObject or UploadPart whose x-amz-checksum-crc32c
does not match its body is refused 400 BadDigest (not forwarded), and one
that matches is forwarded with x-amz-sdk-checksum-algorithm: CRC32C added
when absent (a header outside SignedHeaders: the signature still holds),
without which moto neither keeps nor returns the checksum; a
CompleteMultipartUpload whose x-amz-checksum-crc32c (the whole object's,
FULL_OBJECT) is not the CRC32C of the parts it names is refused 400
BadDigest, and a completed one's CRC32C is what GetObject and HeadObject
return for the object (moto 5.2.1 neither checks it nor returns it).

GET /__stats__: requests by method and by S3 operation, faults fired, what
is still armed.  GET /__fault__: what is armed.  --moto starts moto_server
itself on a free port (--bucket: buckets made first; --auth: an IAM user
with s3:* and moto's signature checking switched on, its keys in the env
file).
"""

import argparse
import base64
import http.client
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gce"))
from storage import crc32c  # noqa: E402  (pure Python CRC32C)

CHUNK = 1 << 20
KINDS = ("corrupt", "cut", "slowdown", "internal", "cutput")
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}
SUBRESOURCES = {"acl", "tagging", "uploads", "uploadId", "versioning", "policy", "cors", "lifecycle",
                "location", "attributes", "legal-hold", "retention", "torrent", "restore", "select"}


def crc32c_combine(crc_a, crc_b, len_b):
    """The CRC32C of A followed by B from theirs and B's length: CRC32C is
    affine in (message, initial value), so crc(B, from=a) = crc(0^n, from=a)
    ^ crc(B) ^ crc(0^n)."""
    zeros = bytes(len_b)
    return crc32c(zeros, crc_a) ^ crc_b ^ crc32c(zeros, 0)


def error_xml(code, message, resource=""):
    rid = base64.b16encode(os.urandom(8)).decode()
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
            '<Resource>%s</Resource><RequestId>%s</RequestId></Error>' % (code, message, resource, rid)).encode()


def operation(method, path, query):
    """S3's name for a path-style request (what /__stats__ counts)."""
    parts = urllib.parse.unquote(path).lstrip("/").split("/", 1)
    q = urllib.parse.parse_qs(query, keep_blank_values=True)
    bucket, key = parts[0], (parts[1] if len(parts) > 1 else "")
    if not bucket:
        return "ListBuckets" if method == "GET" else method + "Service"
    multipart = {("POST", "uploads"): "CreateMultipartUpload", ("PUT", "uploadId"): "UploadPart",
                 ("POST", "uploadId"): "CompleteMultipartUpload",
                 ("DELETE", "uploadId"): "AbortMultipartUpload", ("GET", "uploadId"): "ListParts"}
    if key and "partNumber" in q and "uploadId" in q and method == "PUT":
        return "UploadPart"
    for (m, sub), name in multipart.items():
        if key and m == method and sub in q:
            return name
    if not key and method == "GET" and "uploads" in q:
        return "ListMultipartUploads"
    if SUBRESOURCES & set(q):
        return "%s?%s" % (method, sorted(SUBRESOURCES & set(q))[0])
    if not key:
        return {"GET": "ListObjectsV2" if q.get("list-type") == ["2"] else "ListObjects",
                "PUT": "CreateBucket", "DELETE": "DeleteBucket", "HEAD": "HeadBucket",
                "POST": "DeleteObjects" if "delete" in q else "PostBucket"}.get(method, method + "Bucket")
    return {"GET": "GetObject", "PUT": "PutObject", "DELETE": "DeleteObject",
            "HEAD": "HeadObject", "POST": "PostObject"}.get(method, method + "Object")


class State:
    def __init__(self, upstream, faults, transparent, log):
        u = urllib.parse.urlsplit(upstream)
        self.host, self.port = u.hostname, u.port or 80
        self.armed = dict.fromkeys(KINDS, 0)
        self.armed.update(faults)
        self.only = dict.fromkeys(KINDS, None)  # kind -> the S3 operation it waits for, or None
        self.parts = {}                 # (uploadId, partNumber) -> (crc32c, length) of a checked part
        self.full = {}                  # request path -> the CRC32C of a completed multipart object
        self.transparent = transparent
        self.methods = Counter()
        self.ops = Counter()
        self.fired = Counter()
        self.lock = threading.Lock()
        self.log = open(log, "a") if log else None

    def take(self, kind, op=None):
        with self.lock:
            if self.armed[kind] > 0 and self.only[kind] in (None, op):
                self.armed[kind] -= 1
                self.fired[kind] += 1
                return True
            return False

    def stats(self):
        with self.lock:
            return {"methods": dict(self.methods), "operations": dict(self.ops), "fired": dict(self.fired),
                    "armed": dict(self.armed), "total": sum(self.methods.values())}


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, fmt, *args):
        if self.state.log:
            self.state.log.write("%s %s\n" % (time.strftime("%H:%M:%S"), fmt % args))
            self.state.log.flush()

    def do_GET(self):
        self.serve()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = do_GET

    # ----------------------------------------------------------- helpers

    def answer(self, code, body, ctype="application/xml", headers=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def body_to(self, out):
        """Copies the request body, as it came (chunked framing included), to
        OUT (a file); returns the decoded length or None for chunked."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(1024)
                out.write(line)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        t = self.rfile.readline()
                        out.write(t)
                        if t in (b"\r\n", b"\n", b""):
                            return None
                left = size + 2
                while left:
                    piece = self.rfile.read(min(left, CHUNK))
                    if not piece:
                        raise ConnectionResetError
                    out.write(piece)
                    left -= len(piece)
        n = int(self.headers.get("Content-Length") or 0)
        left = n
        while left > 0:
            piece = self.rfile.read(min(left, CHUNK))
            if not piece:
                raise ConnectionResetError
            out.write(piece)
            left -= len(piece)
        return n

    # ------------------------------------------------------------- serve

    def serve(self):
        st = self.state
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        if not ipaddress.ip_address(self.client_address[0]).is_loopback:
            return self.answer(403, b"loopback clients only", "text/plain")
        url = urllib.parse.urlsplit(self.path)
        if url.path.startswith("/__"):
            return self.control(url)
        op = operation(self.command, url.path, url.query)
        with st.lock:
            st.methods[self.command] += 1
            st.ops[op] += 1
        if self.cut_put(op):
            return
        self.full_crc = None
        with tempfile.SpooledTemporaryFile(max_size=8 << 20, dir=None) as body:
            try:
                n = self.body_to(body)
            except (ValueError, ConnectionResetError):
                self.close_connection = True
                return
            for kind, code, xml_code, msg in (
                    ("slowdown", 503, "SlowDown", "Please reduce your request rate."),
                    ("internal", 500, "InternalError", "We encountered an internal error. Please try again.")):
                if st.take(kind, op):
                    return self.answer(code, error_xml(xml_code, msg, url.path))
            extra = []
            if op in ("PutObject", "UploadPart") and not st.transparent and n is not None:
                refused = self.check_crc(body, url.path, extra)
                if refused:
                    return self.answer(400, refused)
                if op == "UploadPart":
                    self.note_part(body, url.query, n)
            if op == "CompleteMultipartUpload" and not st.transparent:
                refused = self.check_complete(body, url)
                if refused:
                    return self.answer(400, refused)
            body.seek(0)
            self.forward(body, op, extra, url)

    def cut_put(self, op):
        """Fault cutput: reads half the body of a PutObject or UploadPart and
        closes the connection with no answer.  True when it fired."""
        if op not in ("PutObject", "UploadPart") or not self.state.take("cutput", op):
            return False
        left = int(self.headers.get("Content-Length") or 0) // 2
        while left > 0:
            piece = self.rfile.read(min(left, CHUNK))
            if not piece:
                break
            left -= len(piece)
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return True

    def note_part(self, body, query, n):
        """Keeps a checked part's CRC32C and length for its completion."""
        q = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        body.seek(0)
        crc = 0
        while True:
            piece = body.read(CHUNK)
            if not piece:
                break
            crc = crc32c(piece, crc)
        with self.state.lock:
            self.state.parts[(q.get("uploadId"), q.get("partNumber"))] = (crc, n)

    def check_complete(self, body, url):
        """A FULL_OBJECT completion's CRC32C against the parts it names (S3
        checks it; moto does not): an error document, or None."""
        want = self.headers.get("x-amz-checksum-crc32c")
        if want is None:
            return None
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        body.seek(0)
        try:
            root = ET.fromstring(body.read())
        except ET.ParseError:
            return None                 # moto answers MalformedXML
        crc = 0
        for part in root.iter():
            if part.tag.rsplit("}", 1)[-1] != "PartNumber":
                continue
            with self.state.lock:
                got = self.state.parts.get((q.get("uploadId"), part.text))
            if got is None:
                return None             # moto answers InvalidPart
            crc = crc32c_combine(crc, got[0], got[1])
        if want.strip() != base64.b64encode(crc.to_bytes(4, "big")).decode():
            return error_xml("BadDigest", "The CRC32C you specified did not match the calculated checksum.",
                             url.path)
        self.full_crc = want.strip()
        return None

    def check_crc(self, body, resource, extra):
        want = self.headers.get("x-amz-checksum-crc32c")
        if want is None or "aws-chunked" in self.headers.get("Content-Encoding", ""):
            return None
        body.seek(0)
        crc = 0
        while True:
            piece = body.read(CHUNK)
            if not piece:
                break
            crc = crc32c(piece, crc)
        got = base64.b64encode(crc.to_bytes(4, "big")).decode()
        if want.strip() != got:
            try:
                ok = len(base64.b64decode(want.strip(), validate=True)) == 4
            except ValueError:
                ok = False
            if not ok:
                return error_xml("InvalidRequest", "Value for x-amz-checksum-crc32c header is invalid.", resource)
            return error_xml("BadDigest", "The CRC32C you specified did not match the calculated checksum.",
                             resource)
        if "x-amz-sdk-checksum-algorithm" not in self.headers:
            extra.append(("x-amz-sdk-checksum-algorithm", "CRC32C"))
        return None

    def forward(self, body, op, extra, url):
        st = self.state
        up = socket.create_connection((st.host, st.port), timeout=300)
        try:
            head = [self.requestline.encode("latin-1") + b"\r\n"]
            for k, v in self.headers.items():      # as sent: names' case and order kept
                head.append(("%s: %s\r\n" % (k, v)).encode("latin-1"))
            for k, v in extra:
                head.append(("%s: %s\r\n" % (k, v)).encode("latin-1"))
            head.append(b"\r\n")
            up.sendall(b"".join(head))
            while True:
                piece = body.read(CHUNK)
                if not piece:
                    break
                up.sendall(piece)
            resp = http.client.HTTPResponse(up, method=self.command)
            resp.begin()
            self.relay(resp, op, url.path)
        finally:
            up.close()

    def relay(self, resp, op, path):
        st = self.state
        is_get = op == "GetObject" and resp.status in (200, 206) and self.command == "GET"
        corrupt = is_get and st.take("corrupt", op)
        cut = is_get and st.take("cut", op)
        headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP]
        with st.lock:
            if op == "CompleteMultipartUpload" and resp.status == 200 and self.full_crc:
                st.full[path] = self.full_crc   # (a 200 carrying an <Error> is not looked for)
            elif op == "DeleteObject" and resp.status == 204:
                st.full.pop(path, None)
            full = st.full.get(path) if op in ("GetObject", "HeadObject") else None
        if full and self.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED":
            # the whole object's CRC32C, as S3 returns it for a FULL_OBJECT upload
            headers = [(k, v) for k, v in headers
                       if k.lower() not in ("x-amz-checksum-crc32c", "x-amz-checksum-type")]
            headers += [("x-amz-checksum-crc32c", full), ("x-amz-checksum-type", "FULL_OBJECT")]
        length = resp.getheader("Content-Length")
        self.send_response_only(resp.status, resp.reason)
        for k, v in headers:
            self.send_header(k, v)
        chunked = length is None and self.command != "HEAD" and resp.status not in (204, 304)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD" or resp.status in (204, 304):
            return
        total = int(length) if length is not None else None
        send = total // 2 if (cut and total is not None) else None
        flip = total // 2 if (corrupt and total) else -1
        sent = 0
        while True:
            want = CHUNK if send is None else min(CHUNK, send - sent)
            if want <= 0:
                break
            piece = resp.read(want)
            if not piece:
                break
            if sent <= flip < sent + len(piece):
                b = bytearray(piece)
                b[flip - sent] ^= 0x01
                piece = bytes(b)
            if chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                self.wfile.write(piece)
            sent += len(piece)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        if cut:
            self.wfile.flush()
            self.close_connection = True

    def control(self, url):
        st = self.state
        if url.path == "/__stats__" and self.command == "GET":
            return self.answer(200, json.dumps(st.stats()).encode(), "application/json")
        if url.path == "/__stats__/reset" and self.command == "POST":
            with st.lock:
                st.methods.clear()
                st.ops.clear()
                st.fired.clear()
            return self.answer(200, b"{}", "application/json")
        if url.path == "/__fault__" and self.command == "GET":
            return self.answer(200, json.dumps(st.stats()["armed"]).encode(), "application/json")
        if url.path == "/__fault__" and self.command == "POST":
            q = dict(urllib.parse.parse_qsl(url.query))
            if q.get("kind") not in KINDS or not q.get("n", "1").isdigit():
                return self.answer(400, json.dumps({"error": "kind is one of %s, n a count" % (KINDS,)}).encode(),
                                   "application/json")
            with st.lock:
                st.armed[q["kind"]] = int(q.get("n", "1"))
                st.only[q["kind"]] = q.get("op") or None
            return self.answer(200, json.dumps(st.stats()["armed"]).encode(), "application/json")
        return self.answer(404, json.dumps({"error": "no control endpoint %s" % url.path}).encode(),
                           "application/json")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_moto(buckets, auth):
    """moto_server on a free loopback port; (process, url, keys or None)."""
    port = free_port()
    # moto's server with motofix's patch (signatures of encoded queries)
    proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "motofix.py"),
                             "-H", "127.0.0.1", "-p", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % port
    end = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.time() > end:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
    import boto3
    anon = dict(region_name="us-east-1", endpoint_url=url, aws_access_key_id="setup",
                aws_secret_access_key="setup")
    s3 = boto3.client("s3", **anon)
    for b in buckets:
        s3.create_bucket(Bucket=b)
    keys = None
    if auth:
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="pbx")
        iam.put_user_policy(UserName="pbx", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": "*"}]}))
        k = iam.create_access_key(UserName="pbx")["AccessKey"]
        keys = {"access_key": k["AccessKeyId"], "secret_key": k["SecretAccessKey"]}
        req = urllib.request.Request(url + "/moto-api/reset-auth", data=b"0", method="POST",
                                     headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(req).read()
    return proc, url, keys


def _fault(text):
    k, sep, v = text.partition("=")
    if not sep or k not in KINDS or not v.isdigit():
        raise argparse.ArgumentTypeError("--fault wants KIND=N, KIND one of %s" % ", ".join(KINDS))
    return k, int(v)


def main(argv):
    ap = argparse.ArgumentParser(description="Fault-injecting proxy in front of moto_server's S3 (loopback only).")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--upstream", help="moto_server's URL (http://127.0.0.1:PORT)")
    g.add_argument("--moto", action="store_true", help="start moto_server here on a free port")
    ap.add_argument("--bucket", action="append", default=[], help="with --moto: a bucket to make (repeatable)")
    ap.add_argument("--auth", action="store_true",
                    help="with --moto: an IAM user with s3:* and signature checking on (keys in --env-file)")
    ap.add_argument("--env-file", help="JSON written once ready: url, moto_url, region, keys")
    ap.add_argument("--fault", action="append", type=_fault, default=[], help="KIND=N armed from the start")
    ap.add_argument("--transparent", action="store_true", help="no checksum check and no header added")
    ap.add_argument("--log", help="append one line per request")
    args = ap.parse_args(argv)
    if args.upstream and not ipaddress.ip_address(urllib.parse.urlsplit(args.upstream).hostname).is_loopback:
        ap.error("--upstream must be a loopback address")
    if (args.bucket or args.auth) and not args.moto:
        ap.error("--bucket and --auth need --moto")
    moto = None
    keys = None
    upstream = args.upstream
    if args.moto:
        moto, upstream, keys = start_moto(args.bucket, args.auth)
    Proxy.state = State(upstream, dict(args.fault), args.transparent, args.log)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Proxy)
    server.daemon_threads = True
    port = server.server_address[1]

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.env_file:
        env = {"url": "http://127.0.0.1:%d" % port, "moto_url": upstream, "region": "us-east-1",
               "buckets": args.bucket}
        if keys:
            env.update(keys)
        with open(args.env_file + ".tmp", "w") as f:
            json.dump(env, f)
        os.rename(args.env_file + ".tmp", args.env_file)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(args.port_file + ".tmp", args.port_file)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        if moto:
            moto.terminate()
            try:
                moto.wait(10)
            except subprocess.TimeoutExpired:
                moto.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
