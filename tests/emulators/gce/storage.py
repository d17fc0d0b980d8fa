"""storage.py - the Cloud Storage JSON API (storage v1) in the Compute
Engine emulator, as strict as the real service where pbx can tell: buckets
exist only when made (--bucket), objects are listed by name in pages of at
most 1000, read whole or by Range with x-goog-hash, written by
uploadType=media, multipart or resumable with preconditions
(ifGenerationMatch=0: only when absent) and x-goog-hash checked, deleted;
every call needs a bearer token with a devstorage (or cloud-platform)
scope.  Object bytes live on disk (STATE/storage/BUCKET/<sha256 of the
name>-<generation>), written and read in chunks, so a 1 GB object or
10,000 small ones never sit in memory.  See README.md here.

    GET    /storage/v1/b/B                       buckets.get
    GET    /storage/v1/b/B/o                     objects.list
    GET    /storage/v1/b/B/o/NAME[?alt=media]    objects.get (metadata or bytes)
    GET    /download/storage/v1/b/B/o/NAME?alt=media
    DELETE /storage/v1/b/B/o/NAME                objects.delete
    POST   /upload/storage/v1/b/B/o?uploadType=media|multipart|resumable
    PUT    /upload/storage/v1/b/B/o?uploadType=resumable&upload_id=U   (POST too)

CRC32C (Castagnoli) is computed here in pure Python: crc32c() folds the
whole chunk as one GF(2) polynomial with Python's big integers (~50 MB/s),
crc32c_bytewise() is the classic reflected table (the reference the tests
compare it with).
"""

import base64
import bisect
import functools
import hashlib
import ipaddress
import json
import os
import re
import secrets
import socket
import threading
import time
import urllib.parse
from collections import Counter, defaultdict

from errors import ApiError

PREFIXES = ("/storage/v1/", "/upload/storage/v1/", "/download/storage/v1/")
CHUNK = 1 << 20
RESUMABLE_UNIT = 256 * 1024
MAX_PAGE = 1000

READ_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_only",
               "https://www.googleapis.com/auth/devstorage.read_write",
               "https://www.googleapis.com/auth/devstorage.full_control",
               "https://www.googleapis.com/auth/cloud-platform",
               "https://www.googleapis.com/auth/cloud-platform.read-only")
WRITE_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",
                "https://www.googleapis.com/auth/devstorage.full_control",
                "https://www.googleapis.com/auth/cloud-platform")

# ---------------------------------------------------------------- CRC32C

_POLY_REFLECTED = 0x82F63B78
_POLY = 0x11EDC6F41                  # x^32 + the Castagnoli polynomial, MSB first
_REV8 = bytes(int("{:08b}".format(i)[::-1], 2) for i in range(256))


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY_REFLECTED if c & 1 else c >> 1
        t.append(c)
    return t


_T0 = _table()


def crc32c_bytewise(data, crc=0):
    """CRC32C of DATA continuing from CRC, a byte at a time (the reference)."""
    crc ^= 0xFFFFFFFF
    for b in bytes(data):
        crc = _T0[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _rev32(v):
    return int.from_bytes(v.to_bytes(4, "little").translate(_REV8), "big")


def _mulmod(a, b):
    r = 0
    while b:
        if b & 1:
            r ^= a
        b >>= 1
        a <<= 1
        if a >> 32:
            a ^= _POLY
    return r


@functools.lru_cache(maxsize=None)
def _xpow(k):
    """x^k mod P."""
    r, base = 1, 2
    while k:
        if k & 1:
            r = _mulmod(r, base)
        base = _mulmod(base, base)
        k >>= 1
    return r


def _polymod(a):
    # fold the upper half down: H*x^k + L == H*(x^k mod P) + L (mod P)
    while a.bit_length() > 64:
        k = a.bit_length() // 2
        h = a >> k
        acc = a & ((1 << k) - 1)
        r, i = _xpow(k), 0
        while r:
            if r & 1:
                acc ^= h << i
            r >>= 1
            i += 1
        a = acc
    for i in range(a.bit_length() - 1, 31, -1):
        if a >> i & 1:
            a ^= _POLY << (i - 32)
    return a


def crc32c(data, crc=0):
    """CRC32C (Castagnoli, reflected) of DATA continuing from CRC: the
    message is one polynomial M (bit-reversed bytes, MSB first) and the
    register is (S*x^n + M*x^32) mod P."""
    n = len(data) * 8
    if not n:
        return crc
    s = _rev32(crc ^ 0xFFFFFFFF)
    m = int.from_bytes(bytes(data).translate(_REV8), "big")
    return _rev32(_polymod((s << n) ^ (m << 32))) ^ 0xFFFFFFFF


def b64_crc(v):
    return base64.b64encode(v.to_bytes(4, "big")).decode()


# ---------------------------------------------------------------- errors

def _err(code, reason, message, domain="global", **extra):
    return ApiError(code, reason, message, domain=domain, extra=extra)


def bucket_not_found():
    return _err(404, "notFound", "The specified bucket does not exist.")


def object_not_found(bucket, name):
    return _err(404, "notFound", "No such object: %s/%s" % (bucket, name))


def precondition_failed():
    return _err(412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold.",
                locationType="header", location="If-Match")


def invalid(message, reason="invalid"):
    return _err(400, reason, message)


def backend_error():
    return _err(503, "backendError", "Backend Error")


def rate_limited(bucket, name):
    if name is not None:
        msg = ("The object %s/%s exceeded the rate limit for object mutation operations "
               "(create, update, and delete). Please reduce your request rate. See "
               "https://cloud.google.com/storage/docs/gcs429." % (bucket, name))
    else:
        msg = "The rate of requests to this bucket exceeds the rate limit. Please reduce your request rate."
    return _err(429, "rateLimitExceeded", msg, domain="usageLimits")


def _time(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def validate_name(name):
    """GCS's object naming rules: 1-1024 bytes of UTF-8, no CR or LF, not
    '.' or '..', not under .well-known/acme-challenge/.  Anything else
    ("../x", "/abs", "a//b") is a legal name and kept as given."""
    if name is None or name == "":
        raise invalid("Required", reason="required")
    raw = name.encode("utf-8", "surrogatepass")
    if len(raw) > 1024:
        raise invalid("The maximum object length is 1024 characters, but got a name with %d characters: "
                      "''%s...''" % (len(raw), name[:64]))
    if "\r" in name or "\n" in name or name in (".", "..") or name.startswith(".well-known/acme-challenge/"):
        raise invalid("The specified object name is not valid.")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("The specified object name is not valid.")


_BUCKET_RX = re.compile(r"[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]\Z")


def valid_bucket(name):
    return bool(_BUCKET_RX.match(name)) and ".." not in name


# ------------------------------------------------------------ field masks

def _parse_fields(text):
    """'items(name,size),nextPageToken' -> {"items": {"name": {}, "size": {}}, "nextPageToken": {}}
    ({} selects the whole value); raises ValueError."""
    pos = 0

    def parse_list():
        nonlocal pos
        out = {}
        while True:
            m = re.compile(r"[A-Za-z0-9_*]+(/[A-Za-z0-9_*]+)*").match(text, pos)
            if not m:
                raise ValueError(text)
            path = m.group(0).split("/")
            pos = m.end()
            sub = {}
            if pos < len(text) and text[pos] == "(":
                pos += 1
                sub = parse_list()
                if pos >= len(text) or text[pos] != ")":
                    raise ValueError(text)
                pos += 1
            node = out
            for p in path[:-1]:
                node = node.setdefault(p, {})
            node[path[-1]] = sub
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            return out

    tree = parse_list()
    if pos != len(text):
        raise ValueError(text)
    return tree


def _mask(value, tree):
    if not tree or "*" in tree:
        return value
    if isinstance(value, list):
        return [_mask(v, tree) for v in value]
    if not isinstance(value, dict):
        return value
    return {k: _mask(value[k], sub) for k, sub in tree.items() if k in value}


# ---------------------------------------------------------------- storage

class Obj:
    __slots__ = ("name", "generation", "metageneration", "size", "content_type", "crc", "md5",
                 "created", "path", "metadata")


class Bucket:
    def __init__(self, name, path):
        self.name = name
        self.path = path
        self.names = []                 # sorted
        self.objs = {}                  # name -> Obj


class Upload:
    """A resumable upload session."""

    def __init__(self, bucket, name, ctype, pre, metadata, tmp, total):
        self.bucket, self.name, self.ctype, self.pre, self.metadata = bucket, name, ctype, pre, metadata
        self.tmp = tmp
        self.received = 0
        self.total = total
        self.crc = 0
        self.md5 = hashlib.md5()
        self.done = None                # the object resource once finalized
        self.lock = threading.Lock()


COMMON_Q = {"alt", "fields", "prettyPrint", "quotaUser", "userIp", "key", "userProject", "projection",
            "upload_protocol", "$.xgafv", "callback", "trace"}
PRE_Q = {"ifGenerationMatch", "ifGenerationNotMatch", "ifMetagenerationMatch", "ifMetagenerationNotMatch"}
Q_ALLOWED = {
    "objects.list": COMMON_Q | {"prefix", "delimiter", "pageToken", "maxResults", "versions",
                                "includeTrailingDelimiter", "startOffset", "endOffset", "matchGlob",
                                "includeFoldersAsPrefixes", "softDeleted"},
    "objects.get": COMMON_Q | PRE_Q | {"generation", "softDeleted", "restoreToken"},
    "objects.delete": COMMON_Q | PRE_Q | {"generation"},
    "objects.insert": COMMON_Q | PRE_Q | {"uploadType", "name", "contentEncoding", "kmsKeyName",
                                          "predefinedAcl", "upload_id"},
    "buckets.get": COMMON_Q | {"ifMetagenerationMatch", "ifMetagenerationNotMatch"},
}


class Storage:
    def __init__(self, auth, faults, root, buckets, url):
        self.auth = auth
        self.faults = faults
        self.root = root
        self.url = url                  # http://127.0.0.1:PORT
        self.lock = threading.Lock()
        self.counts = Counter()
        self.principals = defaultdict(Counter)  # principal -> {kind: calls} it was let make
        self.last_gen = 0
        self.uploads = {}
        self.buckets = {}
        os.makedirs(root, exist_ok=True)
        for b in buckets:
            if not valid_bucket(b):
                raise ValueError("--bucket %r is not a valid bucket name (3-63 of a-z 0-9 - _ ., "
                                 "beginning and ending with a letter or digit)" % b)
            d = os.path.join(root, b)
            os.makedirs(d, exist_ok=True)
            for f in os.listdir(d):          # an earlier run's bytes: not this run's objects
                os.unlink(os.path.join(d, f))
            self.buckets[b] = Bucket(b, d)

    # ------------------------------------------------------------ helpers

    def _gen(self):
        g = max(int(time.time() * 1e6), self.last_gen + 1)
        self.last_gen = g
        return g

    def count(self, kind):
        with self.lock:
            self.counts[kind] += 1

    def snapshot(self):
        with self.lock:
            return {"buckets": {b.name: {"objects": len(b.names), "bytes": sum(o.size for o in b.objs.values())}
                                for b in self.buckets.values()},
                    "calls": dict(self.counts),
                    "principals": {p: dict(c) for p, c in self.principals.items()}, "uploads_open": sum(1 for u in self.uploads.values()
                                                                    if u.done is None)}

    def _bucket(self, name):
        b = self.buckets.get(name)
        if b is None:
            raise bucket_not_found()
        return b

    def resource(self, b, o, fields=None):
        enc = urllib.parse.quote(o.name, safe="")
        etag = base64.b64encode(b"\x08" + _varint(o.generation) + b"\x10" + _varint(o.metageneration)).decode()
        r = {"kind": "storage#object", "id": "%s/%s/%d" % (b.name, o.name, o.generation),
             "selfLink": "%s/storage/v1/b/%s/o/%s" % (self.url, b.name, enc),
             "mediaLink": "%s/download/storage/v1/b/%s/o/%s?generation=%d&alt=media" % (
                 self.url, b.name, enc, o.generation),
             "name": o.name, "bucket": b.name, "generation": str(o.generation),
             "metageneration": str(o.metageneration), "contentType": o.content_type,
             "storageClass": "STANDARD", "size": str(o.size), "md5Hash": base64.b64encode(o.md5).decode(),
             "crc32c": b64_crc(o.crc), "etag": etag, "timeCreated": _time(o.created),
             "updated": _time(o.created), "timeStorageClassUpdated": _time(o.created)}
        if o.metadata:
            r["metadata"] = dict(o.metadata)
        return r

    @staticmethod
    def _preconditions(q):
        pre = {}
        for k in PRE_Q:
            if k in q:
                if not re.match(r"-?[0-9]+\Z", q[k]):
                    raise invalid("Invalid Value")
                pre[k] = int(q[k])
        return pre

    @staticmethod
    def _check_pre(pre, o, get=False):
        """Raises 412 (304 for a read's NotMatch) when PRE does not hold for O (None: absent)."""
        gen = o.generation if o else 0
        if "ifGenerationMatch" in pre and pre["ifGenerationMatch"] != gen:
            raise precondition_failed()
        if "ifMetagenerationMatch" in pre and (o is None or pre["ifMetagenerationMatch"] != o.metageneration):
            raise precondition_failed()
        not_mod = ApiError(304, "notModified", "Not Modified") if get else precondition_failed()
        if "ifGenerationNotMatch" in pre and pre["ifGenerationNotMatch"] == gen:
            raise not_mod
        if "ifMetagenerationNotMatch" in pre and o is not None and pre["ifMetagenerationNotMatch"] == o.metageneration:
            raise not_mod

    # --------------------------------------------------------------- HTTP

    def serve(self, h, method):
        """Answers one request under PREFIXES on handler H (BaseHTTPRequestHandler),
        reading (or draining) its body itself."""
        state = {"body_read": False}
        kind = "unknown"
        try:
            # headers and body go in separate writes: without this, Nagle and
            # the client's delayed ACK cost 40 ms a request
            h.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        try:
            if not ipaddress.ip_address(h.client_address[0]).is_loopback:
                raise ApiError(403, "forbidden", "loopback clients only")
            url = urllib.parse.urlsplit(h.path)
            try:
                q = {}
                for k, v in urllib.parse.parse_qsl(url.query, keep_blank_values=True, errors="strict"):
                    q[k] = v
            except UnicodeDecodeError:
                raise invalid("Invalid UTF-8 in the query string")
            kind, args = self._route(method, url.path)
            self.count(kind)
            for k in q:
                if k not in Q_ALLOWED[kind.split(" ")[0]]:
                    raise invalid("Invalid argument: unknown query parameter %s" % k)
            if q.get("alt", "json") not in ("json", "media"):
                raise invalid("Invalid Value")
            write = kind in ("objects.insert", "objects.delete", "objects.insert resumable")
            if "upload_id" not in q:        # a session URI is its own credential, as in GCS
                self._auth(h.headers.get("Authorization"), write, kind, args)
            latency = self.faults.value("storage_latency")
            if latency:                     # a real store's round trip, before its answer
                time.sleep(latency)
            if self.faults.take("storage_503"):
                self.count("fault.503")
                raise backend_error()
            if self.faults.take("storage_429"):
                self.count("fault.429")
                raise rate_limited(args.get("b"), args.get("o"))
            fields = None
            if q.get("fields"):
                try:
                    fields = _parse_fields(q["fields"])
                except ValueError:
                    raise invalid("Invalid field selection %s" % q["fields"])
            code, value, headers = getattr(self, kind.replace(".", "_").replace(" ", "_"))(h, args, q, state)
            if code is None:
                return                      # the handler answered itself (media)
            if fields and isinstance(value, dict):
                value = _mask(value, fields)
            self._drain(h, state)
            self._send_json(h, code, value, headers)
        except ApiError as e:
            self._drain(h, state)
            if e.code == 304:
                return self._send_raw(h, 304, None, b"", e.headers)
            self._send_json(h, e.code, e.body(), e.headers)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True

    def _route(self, method, path):
        if path.startswith("/upload/storage/v1/"):
            m = re.match(r"/upload/storage/v1/b/([^/]+)/o\Z", path)
            if m and method == "POST":
                return "objects.insert", {"b": self._seg(m.group(1))}
            if m and method == "PUT":
                return "objects.insert resumable", {"b": self._seg(m.group(1))}
        elif path.startswith("/download/storage/v1/"):
            m = re.match(r"/download/storage/v1/b/([^/]+)/o/(.+)\Z", path, re.S)
            if m and method == "GET":
                return "objects.get", {"b": self._seg(m.group(1)), "o": self._seg(m.group(2)), "download": True}
        else:
            m = re.match(r"/storage/v1/b/([^/]+)\Z", path)
            if m and method == "GET":
                return "buckets.get", {"b": self._seg(m.group(1))}
            m = re.match(r"/storage/v1/b/([^/]+)/o\Z", path)
            if m and method == "GET":
                return "objects.list", {"b": self._seg(m.group(1))}
            # the object is everything after /o/: '/' may come encoded (%2F) or not
            m = re.match(r"/storage/v1/b/([^/]+)/o/(.+)\Z", path, re.S)
            if m and method in ("GET", "DELETE"):
                return ("objects.get" if method == "GET" else "objects.delete"), \
                    {"b": self._seg(m.group(1)), "o": self._seg(m.group(2))}
        raise ApiError(404, "notFound", "Not Found")

    @staticmethod
    def _seg(s):
        try:
            return urllib.parse.unquote_to_bytes(s).decode("utf-8")
        except UnicodeDecodeError:
            raise invalid("The specified object name is not valid.")

    def _auth(self, authorization, write, kind, args):
        perm = {"objects.list": "storage.objects.list", "objects.get": "storage.objects.get",
                "buckets.get": "storage.buckets.get", "objects.delete": "storage.objects.delete"}.get(
                    kind, "storage.objects.create")
        try:
            principal = self.auth.check(authorization, READ_SCOPES)
        except ApiError as e:
            if e.code == 401 and e.reason == "required":
                what = ("bucket" if kind in ("objects.list", "buckets.get") or kind.startswith("objects.insert")
                        else "object")
                e.message = e.item_message = ("Anonymous caller does not have %s access to the Google Cloud "
                                              "Storage %s. Permission '%s' denied on resource (or it may not "
                                              "exist)." % (perm, what, perm))
                e.status = None
            elif e.code == 403:
                e.message = e.item_message = "Provided scope(s) are not authorized"
                e.status = None
            raise
        if write:
            try:
                self.auth.check(authorization, WRITE_SCOPES)
            except ApiError as e:
                e.message = e.item_message = "Provided scope(s) are not authorized"
                e.status = None
                raise
        with self.lock:     # who read and wrote (a head's own identity, the user's)
            self.principals[principal][kind] += 1

    # --------------------------------------------------------- body I/O

    def _chunks(self, h, state):
        """The request body in pieces (Content-Length or chunked)."""
        state["body_read"] = True
        if "chunked" in h.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = h.rfile.readline(1024)
                if not line:
                    raise ConnectionResetError("body cut")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                while size:
                    piece = h.rfile.read(min(size, CHUNK))
                    if not piece:
                        raise ConnectionResetError("body cut")
                    size -= len(piece)
                    yield piece
                h.rfile.readline()
        else:
            n = int(h.headers.get("Content-Length") or 0)
            while n > 0:
                piece = h.rfile.read(min(n, CHUNK))
                if not piece:
                    raise ConnectionResetError("body cut")
                n -= len(piece)
                yield piece

    def _drain(self, h, state):
        if not state["body_read"]:
            try:
                for _ in self._chunks(h, state):
                    pass
            except (ValueError, ConnectionResetError):
                h.close_connection = True

    def _read_small(self, h, state, limit=64 << 20):
        data = bytearray()
        for piece in self._chunks(h, state):
            data += piece
            if len(data) > limit:
                raise invalid("Request too large for this emulator's in-memory path (use uploadType=media)")
        return bytes(data)

    @staticmethod
    def _send_raw(h, code, ctype, data, headers=None):
        h.send_response(code, "Resume Incomplete" if code == 308 else None)
        if ctype:
            h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _send_json(self, h, code, value, headers=None):
        data = b"" if value is None else (json.dumps(value, indent=1) + "\n").encode()
        self._send_raw(h, code, "application/json; charset=UTF-8" if value is not None else None, data, headers)

    # --------------------------------------------------------- handlers

    def buckets_get(self, h, a, q, state):
        with self.lock:
            b = self._bucket(a["b"])
        return 200, {"kind": "storage#bucket", "id": b.name, "name": b.name,
                     "selfLink": "%s/storage/v1/b/%s" % (self.url, b.name), "projectNumber": "0",
                     "metageneration": "1", "location": "US", "storageClass": "STANDARD",
                     "locationType": "multi-region", "etag": "CAE="}, None

    def objects_list(self, h, a, q, state):
        prefix = q.get("prefix", "")
        delim = q.get("delimiter", "")
        n = q.get("maxResults", "")
        if n and not re.match(r"[0-9]+\Z", n):
            raise invalid("Invalid value for UInt32: %s" % n)
        n = min(int(n), MAX_PAGE) if n and int(n) > 0 else MAX_PAGE
        ctx = hashlib.sha256(json.dumps([prefix, delim, q.get("startOffset", ""), q.get("endOffset", ""),
                                         q.get("includeTrailingDelimiter", "")]).encode()).hexdigest()[:16]
        after, after_prefix = None, False
        if q.get("pageToken"):
            try:
                t = q["pageToken"]
                tok = json.loads(base64.urlsafe_b64decode((t + "=" * (-len(t) % 4)).encode()))
                assert tok["c"] == ctx and isinstance(tok["a"], str)
                after, after_prefix = tok["a"], bool(tok["p"])
            except Exception:
                raise invalid("The page token is invalid.")
        trailing = q.get("includeTrailingDelimiter", "false").lower() == "true"
        with self.lock:
            b = self._bucket(a["b"])
            names = b.names
            start = bisect.bisect_left(names, max(prefix, q.get("startOffset", "")))
            if after is not None:
                start = max(start, bisect.bisect_right(names, after))
            end_off = q.get("endOffset") or None
            items, prefixes, last, last_is_prefix, more = [], [], None, False, False
            i = start
            while i < len(names):
                name = names[i]
                if not name.startswith(prefix) or (end_off is not None and name >= end_off):
                    break
                if after_prefix and name.startswith(after):
                    i += 1
                    continue
                if len(items) + len(prefixes) >= n:
                    more = True
                    break
                cut = name.find(delim, len(prefix)) if delim else -1
                if cut >= 0:
                    p = name[:cut + len(delim)]
                    prefixes.append(p)
                    if trailing and p in b.objs:
                        items.append(self.resource(b, b.objs[p]))
                    last, last_is_prefix = p, True
                    while i < len(names) and names[i].startswith(p):
                        i += 1
                    continue
                items.append(self.resource(b, b.objs[name]))
                last, last_is_prefix = name, False
                i += 1
        out = {"kind": "storage#objects"}
        if prefixes:
            out["prefixes"] = prefixes
        if items:
            out["items"] = items
        if more:
            out["nextPageToken"] = base64.urlsafe_b64encode(
                json.dumps({"a": last, "p": last_is_prefix, "c": ctx}).encode()).decode().rstrip("=")
        return 200, out, None

    def objects_get(self, h, a, q, state):
        pre = self._preconditions(q)
        media = q.get("alt") == "media"
        if a.get("download") and not media:
            raise invalid("Invalid Value")
        with self.lock:
            b = self._bucket(a["b"])
            validate_name(a["o"])
            o = b.objs.get(a["o"])
            if o is None or ("generation" in q and q["generation"] != str(o.generation)):
                raise object_not_found(b.name, a["o"])
            self._check_pre(pre, o, get=True)
            if not media:
                return 200, self.resource(b, o), None
            f = open(o.path, "rb")       # opened under the lock: a replace cannot swap it
        with f:
            return self._media(h, b, o, f)

    def _media(self, h, b, o, f):
        size = o.size
        code, first, last = 200, 0, size - 1
        rng = h.headers.get("Range")
        headers = {"x-goog-hash": "crc32c=%s,md5=%s" % (b64_crc(o.crc), base64.b64encode(o.md5).decode()),
                   "x-goog-generation": str(o.generation), "x-goog-metageneration": str(o.metageneration),
                   "x-goog-stored-content-length": str(size), "x-goog-stored-content-encoding": "identity",
                   "x-goog-storage-class": "STANDARD", "Accept-Ranges": "bytes",
                   "ETag": '"%s"' % o.md5.hex(), "Last-Modified": time.strftime(
                       "%a, %d %b %Y %H:%M:%S GMT", time.gmtime(o.created))}
        if rng:
            m = re.match(r"bytes=(\d*)-(\d*)\Z", rng.strip())
            if m and (m.group(1) or m.group(2)):
                if m.group(1):
                    first = int(m.group(1))
                    last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                else:                       # a suffix: the last N bytes
                    first, last = max(size - int(m.group(2)), 0), size - 1
                if first >= size or (m.group(2) and m.group(1) and int(m.group(2)) < first):
                    raise ApiError(416, "requestedRangeNotSatisfiable", "Request range not satisfiable",
                                   headers={"Content-Range": "bytes */%d" % size})
                code = 206
                headers["Content-Range"] = "bytes %d-%d/%d" % (first, last, size)
            # a Range GCS cannot parse is ignored: the whole object
        length = last - first + 1 if size else 0
        corrupt = self.faults.take("storage_corrupt")
        cut = self.faults.take("storage_cut")
        garble = self.faults.take("storage_garble_cut")
        if corrupt:
            self.count("fault.corrupt")
        if cut:
            self.count("fault.cut")
        if garble:
            self.count("fault.garble_cut")
            cut = True
        h.send_response(code)
        h.send_header("Content-Type", o.content_type)
        h.send_header("Content-Length", str(length))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        f.seek(first)
        send = length // 2 if cut else length
        flip = length // 2 if corrupt and length else -1
        if garble and length:
            flip = length // 4              # before the cut, so it is sent
        rate = self.faults.value("storage_rate")
        piece_max = min(CHUNK, max(rate // 16, 4096)) if rate else CHUNK
        start = time.monotonic()
        sent = 0
        while sent < send:
            if rate:                    # paced: sent bytes at most rate a second
                early = start + sent / rate - time.monotonic()
                if early > 0:
                    time.sleep(early)
            piece = f.read(min(piece_max, send - sent))
            if not piece:
                break
            if sent <= flip < sent + len(piece):
                piece = bytearray(piece)
                piece[flip - sent] ^= 0x01
                piece = bytes(piece)
            h.wfile.write(piece)
            sent += len(piece)
        if cut:
            h.wfile.flush()
            h.close_connection = True
        return None, None, None

    def objects_delete(self, h, a, q, state):
        pre = self._preconditions(q)
        with self.lock:
            b = self._bucket(a["b"])
            validate_name(a["o"])
            o = b.objs.get(a["o"])
            if o is None or ("generation" in q and q["generation"] != str(o.generation)):
                raise object_not_found(b.name, a["o"])
            self._check_pre(pre, o)
            del b.objs[o.name]
            del b.names[bisect.bisect_left(b.names, o.name)]
            os.unlink(o.path)
        return 204, None, None

    # ----------------------------------------------------------- uploads

    @staticmethod
    def _goog_hash(header_values):
        """{'crc32c': int, 'md5': bytes} from x-goog-hash headers; raises 400."""
        out = {}
        for hv in header_values:
            for part in hv.split(","):
                k, sep, v = part.strip().partition("=")
                if not sep:
                    continue
                try:
                    raw = base64.b64decode(v.strip(), validate=True)
                except ValueError:
                    raise invalid("Invalid x-goog-hash header: %s" % hv)
                if k == "crc32c":
                    if len(raw) != 4:
                        raise invalid("Invalid x-goog-hash header: %s" % hv)
                    out["crc32c"] = int.from_bytes(raw, "big")
                elif k == "md5":
                    if len(raw) != 16:
                        raise invalid("Invalid x-goog-hash header: %s" % hv)
                    out["md5"] = raw
        return out

    @staticmethod
    def _check_hashes(want, crc, md5):
        if "crc32c" in want and want["crc32c"] != crc:
            raise invalid('Provided CRC32C "%s" doesn\'t match calculated CRC32C "%s".'
                          % (b64_crc(want["crc32c"]), b64_crc(crc)))
        if "md5" in want and want["md5"] != md5:
            raise invalid('Provided MD5 hash "%s" doesn\'t match calculated MD5 hash "%s".'
                          % (base64.b64encode(want["md5"]).decode(), base64.b64encode(md5).decode()))

    def _tmp(self, b):
        return os.path.join(b.path, "tmp-" + secrets.token_hex(8))

    def _commit(self, b, name, tmp, size, crc, md5, ctype, pre, metadata):
        """Makes TMP object NAME (preconditions checked now, atomically)."""
        with self.lock:
            old = b.objs.get(name)
            try:
                self._check_pre(pre, old)
            except ApiError:
                os.unlink(tmp)
                raise
            o = Obj()
            o.name, o.generation, o.metageneration = name, self._gen(), 1
            o.size, o.content_type, o.crc, o.md5 = size, ctype, crc, md5
            o.created, o.metadata = time.time(), metadata
            o.path = os.path.join(b.path, "%s-%d" % (hashlib.sha256(name.encode()).hexdigest(), o.generation))
            os.rename(tmp, o.path)
            b.objs[name] = o
            if old is None:
                bisect.insort(b.names, name)
            else:
                os.unlink(old.path)     # a reader that opened it keeps its bytes
            return self.resource(b, o)

    def objects_insert(self, h, a, q, state):
        ut = q.get("uploadType")
        if ut not in ("media", "multipart", "resumable"):
            raise invalid("Upload requests must include an uploadType URL parameter and a URL path "
                          "beginning with /upload/" if not ut else "Invalid upload type: %s" % ut,
                          reason="wrongUrlForUpload" if not ut else "invalid")
        if "upload_id" in q:
            return self.objects_insert_resumable(h, a, q, state)
        pre = self._preconditions(q)
        with self.lock:
            b = self._bucket(a["b"])
        if ut == "media":
            name = q.get("name")
            validate_name(name)
            if ("Content-Length" not in h.headers
                    and "chunked" not in h.headers.get("Transfer-Encoding", "").lower()):
                raise ApiError(411, "lengthRequired", "Length Required")
            want = self._goog_hash(h.headers.get_all("x-goog-hash") or [])
            ctype = h.headers.get("Content-Type") or "application/octet-stream"
            tmp = self._tmp(b)
            crc, md5, size = 0, hashlib.md5(), 0
            try:
                with open(tmp, "wb") as f:
                    for piece in self._chunks(h, state):
                        f.write(piece)
                        crc = crc32c(piece, crc)
                        md5.update(piece)
                        size += len(piece)
                self._check_hashes(want, crc, md5.digest())
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
            return 200, self._commit(b, name, tmp, size, crc, md5.digest(), ctype, pre, None), None
        if ut == "multipart":
            meta, media, mtype = self._multipart(h, state)
            name = meta.get("name") or q.get("name")
            if q.get("name") and meta.get("name") and q["name"] != meta["name"]:
                raise invalid("Object name in the request body and URL differ")
            validate_name(name)
            want = self._goog_hash(h.headers.get_all("x-goog-hash") or [])
            try:
                if "crc32c" in meta:
                    want["crc32c"] = int.from_bytes(base64.b64decode(meta["crc32c"], validate=True), "big")
                if "md5Hash" in meta:
                    want["md5"] = base64.b64decode(meta["md5Hash"], validate=True)
            except ValueError:
                raise invalid("Invalid Value")
            crc, md5 = crc32c(media), hashlib.md5(media).digest()
            self._check_hashes(want, crc, md5)
            tmp = self._tmp(b)
            with open(tmp, "wb") as f:
                f.write(media)
            return 200, self._commit(b, name, tmp, len(media), crc, md5,
                                     meta.get("contentType") or mtype or "application/octet-stream", pre,
                                     meta.get("metadata")), None
        # resumable: start a session
        raw = self._read_small(h, state, 1 << 20)
        meta = {}
        if raw.strip():
            try:
                meta = json.loads(raw)
                assert isinstance(meta, dict)
            except (ValueError, AssertionError):
                raise invalid("Parse Error", reason="parseError")
        name = meta.get("name") or q.get("name")
        validate_name(name)
        with self.lock:                  # checked now (and again at the end)
            self._check_pre(pre, b.objs.get(name))
        total = h.headers.get("X-Upload-Content-Length")
        uid = "ADPycd" + secrets.token_urlsafe(24)
        up = Upload(b, name, meta.get("contentType") or h.headers.get("X-Upload-Content-Type")
                    or "application/octet-stream", pre, meta.get("metadata"), self._tmp(b),
                    int(total) if total and total.isdigit() else None)
        open(up.tmp, "wb").close()
        with self.lock:
            self.uploads[uid] = up
        loc = "%s/upload/storage/v1/b/%s/o?uploadType=resumable&name=%s&upload_id=%s" % (
            self.url, b.name, urllib.parse.quote(name, safe=""), uid)
        return 200, None, {"Location": loc, "X-GUploader-UploadID": uid}

    def _multipart(self, h, state):
        ctype = h.headers.get("Content-Type", "")
        m = re.match(r'multipart/related\s*;\s*boundary="?([^";]+)"?', ctype, re.I)
        if not m:
            raise invalid("Invalid multipart request with 0 mime parts.")
        raw = self._read_small(h, state)
        delim = b"--" + m.group(1).encode()
        parts = raw.split(delim)
        # parts[0] preamble, then parts, the last is "--\r\n..."
        body_parts = []
        for p in parts[1:]:
            if p.startswith(b"--"):
                break
            p = p[2:] if p.startswith(b"\r\n") else p
            head, sep, content = p.partition(b"\r\n\r\n")
            if not sep:
                raise invalid("Invalid multipart request.")
            if content.endswith(b"\r\n"):
                content = content[:-2]
            hdrs = {}
            for line in head.decode("latin-1").split("\r\n"):
                k, _, v = line.partition(":")
                hdrs[k.strip().lower()] = v.strip()
            body_parts.append((hdrs, content))
        if len(body_parts) != 2:
            raise invalid("Invalid multipart request with %d mime parts." % len(body_parts))
        try:
            meta = json.loads(body_parts[0][1] or b"{}")
            assert isinstance(meta, dict)
        except (ValueError, AssertionError):
            raise invalid("Parse Error", reason="parseError")
        return meta, body_parts[1][1], body_parts[1][0].get("content-type")

    def objects_insert_resumable(self, h, a, q, state):
        uid = q.get("upload_id")
        with self.lock:
            up = self.uploads.get(uid)
        if up is None or up.bucket.name != a["b"]:
            raise _err(404, "notFound", "No such upload session.")
        cr = h.headers.get("Content-Range", "").strip()
        with up.lock:
            if up.done is not None:
                return 200, up.done, None
            m = re.match(r"bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)\Z", cr)
            if cr and not m:
                raise invalid("Failed to parse Content-Range header.")
            if m and m.group(3) != "*":
                total = int(m.group(3))
                if up.total is not None and up.total != total:
                    raise invalid("Invalid request. The total size %d differs from the size %d given before."
                                  % (total, up.total))
                up.total = total
            if m and m.group(1) is not None and self.faults.take("storage_upload_503"):
                self.count("fault.upload_503")
                raise backend_error()
            if m and m.group(1) is not None:
                first, last = int(m.group(1)), int(m.group(2))
                if last < first:
                    raise invalid("Failed to parse Content-Range header.")
                if first > up.received:
                    raise invalid("Invalid request.  According to the Content-Range header, the upload offset "
                                  "is %d byte(s), which exceeds already uploaded size of %d byte(s)."
                                  % (first, up.received))
                length = last - first + 1
                if int(h.headers.get("Content-Length") or -1) != length:
                    raise invalid("Content-Range and Content-Length disagree")
                final = up.total is not None and last + 1 == up.total
                if not final and length < RESUMABLE_UNIT:
                    raise invalid("Invalid request. The number of bytes uploaded is required to be equal or "
                                  "greater than 262144, except for the final request (it's recommended to be "
                                  "the exact multiple of 262144). The received request contained %d bytes, "
                                  "which does not meet this requirement." % length)
                # fault storage_upload_cut: only the first half of the chunk arrives
                stop = first + length // 2 if self.faults.take("storage_upload_cut") else None
                if stop is not None:
                    self.count("fault.upload_cut")
                with open(up.tmp, "r+b") as f:
                    f.seek(up.received)
                    pos = first
                    for piece in self._chunks(h, state):
                        if stop is not None:
                            piece = piece[:max(0, stop - pos)]
                        if pos < up.received:
                            cut = min(up.received - pos, len(piece))
                            pos += cut
                            piece = piece[cut:]
                        if not piece:
                            if stop is not None and pos >= stop:
                                break
                            continue
                        f.write(piece)
                        pos += len(piece)
                    if stop is not None:
                        final = False       # what came is kept, as GCS persists in 256 KiB units
                    keep = pos if final else (pos // RESUMABLE_UNIT) * RESUMABLE_UNIT
                    keep = max(keep, up.received)
                    f.seek(up.received)
                    # hashes over what is kept (re-read the new part: bounded by one request)
                    while f.tell() < keep:
                        piece = f.read(min(CHUNK, keep - f.tell()))
                        up.crc = crc32c(piece, up.crc)
                        up.md5.update(piece)
                    f.truncate(keep)
                    up.received = keep
                if stop is not None:
                    raise ConnectionResetError("chunk cut (fault storage_upload_cut)")
            elif h.headers.get("Content-Length") not in (None, "0"):
                raise invalid("Failed to parse Content-Range header.")
            if up.total is not None and up.received == up.total:
                want = self._goog_hash(h.headers.get_all("x-goog-hash") or [])
                try:
                    self._check_hashes(want, up.crc, up.md5.digest())
                except ApiError:
                    os.unlink(up.tmp)
                    with self.lock:
                        self.uploads.pop(uid, None)
                    raise
                try:
                    up.done = self._commit(up.bucket, up.name, up.tmp, up.received, up.crc, up.md5.digest(),
                                           up.ctype, up.pre, up.metadata)
                except ApiError:
                    with self.lock:
                        self.uploads.pop(uid, None)
                    raise
                return 200, up.done, None
            headers = {"X-GUploader-UploadID": uid}
            if up.received:
                headers["Range"] = "bytes=0-%d" % (up.received - 1)
            return 308, None, headers
