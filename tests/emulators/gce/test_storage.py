"""test_storage.py - the emulator's Cloud Storage JSON API (storage.py) is
as strict as the real one where pbx can tell: CRC32C, uploads with and
without preconditions (412 conditionNotMet), x-goog-hash checked (400),
media with x-goog-hash and Range, paging over 2,500 objects (and with a
delimiter), hostile names ("../x", "/abs", "a//b") kept as given, names
GCS refuses, scopes (401, 403 insufficientPermissions, read-only reads),
multipart and resumable uploads, and each fault (storage_503, storage_429,
storage_corrupt, storage_cut) with its counter.  No node bodies; talks
only to 127.0.0.1."""

import base64
import hashlib
import http.client
import json
import os
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Emulator  # noqa: E402
import storage  # noqa: E402

BUCKET = "pbx-test-bucket"
TOKEN = "static-test-token"
RO = "https://www.googleapis.com/auth/devstorage.read_only"
RW = "https://www.googleapis.com/auth/devstorage.read_write"


def q(name):
    return urllib.parse.quote(name, safe="")


def b64crc(data):
    return base64.b64encode(storage.crc32c_bytewise(data).to_bytes(4, "big")).decode()


def reason(value):
    return value["error"]["errors"][0]["reason"]


class Crc32c(unittest.TestCase):
    def test_check_value(self):
        self.assertEqual(storage.crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(storage.crc32c_bytewise(b"123456789"), 0xE3069283)
        self.assertEqual(storage.crc32c(b""), 0)

    def test_fast_matches_bytewise_and_continues(self):
        for n in (1, 3, 7, 8, 9, 31, 64, 65, 1000, 70001):
            data = os.urandom(n)
            self.assertEqual(storage.crc32c(data), storage.crc32c_bytewise(data), n)
            cut = n // 3
            self.assertEqual(storage.crc32c(data[cut:], storage.crc32c(data[:cut])), storage.crc32c(data))


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.emu = Emulator(cls.tmp.name, "--no-bodies", "--bucket", BUCKET, "--bucket", "other-bucket",
                           "--static-token", TOKEN).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.emu.stop()
        cls.tmp.cleanup()

    def setUp(self):
        self.emu.control("POST", "faults", {"storage_503": 0, "storage_429": 0, "storage_corrupt": 0,
                                            "storage_cut": 0, "storage_upload_cut": 0,
                                            "storage_upload_503": 0, "storage_rate": 0,
                                            "storage_latency": 0, "storage_garble_cut": 0})

    def req(self, method, path, body=None, headers=None, token=TOKEN):
        """(status, headers, raw body) of one request on a fresh connection."""
        c = http.client.HTTPConnection("127.0.0.1", self.emu.port, timeout=120)
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        try:
            data = r.read()
        except http.client.IncompleteRead as e:
            data = ("cut", e.partial)
        c.close()
        return r.status, r.headers, data

    def jreq(self, *a, **k):
        code, hdrs, data = self.req(*a, **k)
        return code, (json.loads(data) if data else None)

    def put(self, name, data, pre=None, ctype="application/octet-stream", headers=None, token=TOKEN):
        path = "/upload/storage/v1/b/%s/o?uploadType=media&name=%s" % (BUCKET, q(name))
        if pre is not None:
            path += "&ifGenerationMatch=%s" % pre
        h = {"Content-Type": ctype}
        h.update(headers or {})
        return self.jreq("POST", path, data, h, token=token)

    def get(self, name, headers=None, query=""):
        return self.req("GET", "/storage/v1/b/%s/o/%s?alt=media%s" % (BUCKET, q(name), query), headers=headers)

    def delete(self, name):
        return self.req("DELETE", "/storage/v1/b/%s/o/%s" % (BUCKET, q(name)))[0]

    def list_all(self, prefix="", extra=""):
        names, pages, token = [], 0, None
        while True:
            path = "/storage/v1/b/%s/o?prefix=%s%s" % (BUCKET, q(prefix), extra)
            if token:
                path += "&pageToken=" + q(token)
            code, page = self.jreq("GET", path)
            self.assertEqual(code, 200, page)
            pages += 1
            names += [i["name"] for i in page.get("items", [])] + page.get("prefixes", [])
            token = page.get("nextPageToken")
            if not token:
                return names, pages


class Objects(Base):
    def test_upload_get_resource(self):
        data = b"hello, storage\n"
        code, obj = self.put("t/one.txt", data, ctype="text/plain")
        self.assertEqual(code, 200, obj)
        self.assertEqual(obj["kind"], "storage#object")
        self.assertEqual((obj["name"], obj["bucket"], obj["size"], obj["contentType"]),
                         ("t/one.txt", BUCKET, str(len(data)), "text/plain"))
        self.assertEqual(obj["crc32c"], b64crc(data))
        self.assertEqual(obj["md5Hash"], base64.b64encode(hashlib.md5(data).digest()).decode())
        self.assertIsInstance(obj["generation"], str)
        for k in ("metageneration", "etag", "timeCreated", "updated"):
            self.assertIn(k, obj)
        # the resource by %2F and by a raw '/'
        for path in ("t%2Fone.txt", "t/one.txt"):
            code, got = self.jreq("GET", "/storage/v1/b/%s/o/%s" % (BUCKET, path))
            self.assertEqual(code, 200, got)
            self.assertEqual(got["generation"], obj["generation"])
        code, hdrs, body = self.get("t/one.txt")
        self.assertEqual((code, body), (200, data))
        self.assertEqual(hdrs["x-goog-hash"], "crc32c=%s,md5=%s" % (obj["crc32c"], obj["md5Hash"]))
        self.assertEqual(hdrs["x-goog-generation"], obj["generation"])
        self.assertEqual(hdrs["x-goog-stored-content-length"], str(len(data)))
        self.assertEqual(hdrs["Content-Length"], str(len(data)))
        self.assertEqual(hdrs["Content-Type"], "text/plain")

    def test_preconditions_and_generations(self):
        code, first = self.put("pre/a", b"1", pre=0)
        self.assertEqual(code, 200, first)
        code, err = self.put("pre/a", b"2", pre=0)
        self.assertEqual(code, 412, err)
        self.assertEqual(reason(err), "conditionNotMet")
        self.assertEqual(self.get("pre/a")[2], b"1")           # nothing written
        code, err = self.put("pre/a", b"2", pre=int(first["generation"]) + 1)
        self.assertEqual(code, 412, err)
        code, second = self.put("pre/a", b"2", pre=first["generation"])
        self.assertEqual(code, 200, second)
        self.assertGreater(int(second["generation"]), int(first["generation"]))
        code, third = self.put("pre/a", b"3")                   # no precondition: replaces
        self.assertEqual(code, 200, third)
        self.assertGreater(int(third["generation"]), int(second["generation"]))
        # get with ifGenerationMatch
        self.assertEqual(self.get("pre/a", query="&ifGenerationMatch=" + third["generation"])[0], 200)
        code, _, body = self.get("pre/a", query="&ifGenerationMatch=" + first["generation"])
        self.assertEqual(code, 412, body)
        self.assertEqual(self.get("pre/a", query="&ifGenerationNotMatch=" + third["generation"])[0], 304)
        # a missing object with ifGenerationMatch=1 cannot be made; the bucket has other objects
        self.assertEqual(self.put("pre/missing", b"x", pre=1)[0], 412)
        self.assertEqual(self.delete("pre/a"), 204)
        self.assertEqual(self.get("pre/a")[0], 404)
        self.assertEqual(self.delete("pre/a"), 404)
        code, _, body = self.get("pre/never")
        self.assertEqual(code, 404)
        self.assertEqual(reason(json.loads(body)), "notFound")
        # made again after the delete, with ifGenerationMatch=0
        self.assertEqual(self.put("pre/a", b"4", pre=0)[0], 200)

    def test_bad_hashes_refused(self):
        data = b"checked bytes"
        wrong = base64.b64encode((storage.crc32c(data) ^ 1).to_bytes(4, "big")).decode()
        code, err = self.put("hash/x", data, headers={"x-goog-hash": "crc32c=" + wrong})
        self.assertEqual(code, 400, err)
        self.assertEqual(reason(err), "invalid")
        self.assertIn("Provided CRC32C \"%s\" doesn't match calculated CRC32C \"%s\"" % (wrong, b64crc(data)),
                      err["error"]["message"])
        self.assertEqual(self.get("hash/x")[0], 404)
        code, err = self.put("hash/x", data, headers={"x-goog-hash": "md5=" + base64.b64encode(b"\0" * 16).decode()})
        self.assertEqual(code, 400, err)
        self.assertIn("MD5", err["error"]["message"])
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
        code, obj = self.put("hash/x", data, headers={"x-goog-hash": "crc32c=%s,md5=%s" % (b64crc(data), md5)})
        self.assertEqual(code, 200, obj)

    def test_range(self):
        data = bytes(range(256)) * 40
        self.put("range/r", data)
        code, hdrs, body = self.get("range/r", headers={"Range": "bytes=10-19"})
        self.assertEqual((code, body), (206, data[10:20]))
        self.assertEqual(hdrs["Content-Range"], "bytes 10-19/%d" % len(data))
        self.assertEqual(hdrs["x-goog-hash"].split(",")[0], "crc32c=" + b64crc(data))   # the whole object's
        code, hdrs, body = self.get("range/r", headers={"Range": "bytes=10000-"})
        self.assertEqual((code, body), (206, data[10000:]))
        code, hdrs, body = self.get("range/r", headers={"Range": "bytes=-5"})
        self.assertEqual((code, body), (206, data[-5:]))
        self.assertEqual(self.get("range/r", headers={"Range": "bytes=20000-"})[0], 416)

    def test_hostile_names_round_trip(self):
        names = ["../x", "/abs", "a//b", "..", "./y", "sp ace", "plus+sign", "pct%2Fnot-a-slash", "q?uery#frag",
                 "uni\u00e9\u4e2d", "trail/", "x" * 1024, "\x01ctl", "back\\slash"]
        names.remove("..")
        for i, name in enumerate(names):
            data = ("body %d" % i).encode()
            code, obj = self.put("hostile/" + name if not name.startswith("x" * 10) else name, data, pre=0)
            self.assertEqual(code, 200, (name, obj))
        got, _ = self.list_all("hostile/")
        self.assertEqual(got, sorted("hostile/" + n for n in names if not n.startswith("x" * 10)))
        for i, name in enumerate(names):
            full = "hostile/" + name if not name.startswith("x" * 10) else name
            code, _, body = self.get(full)
            self.assertEqual((code, body), (200, ("body %d" % i).encode()), name)
        # raw (unencoded) '/' and "..": the name as given, no normalisation
        code, _, body = self.req("GET", "/storage/v1/b/%s/o/hostile/../x?alt=media" % BUCKET)
        self.assertEqual((code, body), (200, b"body 0"))

    def test_names_refused(self):
        for name in (".", "..", "cr\rlf", "new\nline", "x" * 1025, "\u00e9" * 513):
            code, err = self.put(name, b"x")
            self.assertEqual(code, 400, (name, err))
        code, err = self.jreq("POST", "/upload/storage/v1/b/%s/o?uploadType=media" % BUCKET, b"x")
        self.assertEqual(code, 400, err)

    def test_unknown_bucket_and_parameters(self):
        code, err = self.jreq("GET", "/storage/v1/b/no-such-bucket/o")
        self.assertEqual(code, 404)
        self.assertEqual(err["error"]["code"], 404)
        self.assertEqual(err["error"]["errors"][0]["domain"], "global")
        self.assertEqual(reason(err), "notFound")
        self.assertEqual(self.put("x", b"x")[0], 200)
        code, err = self.jreq("POST", "/upload/storage/v1/b/no-such-bucket/o?uploadType=media&name=x", b"x")
        self.assertEqual(code, 404, err)
        code, err = self.jreq("GET", "/storage/v1/b/%s/o?ifGenerationmatch=0" % BUCKET)
        self.assertEqual(code, 400, err)
        self.assertEqual(self.jreq("GET", "/storage/v1/b/" + BUCKET)[0], 200)

    def test_other_bucket_separate(self):
        self.put("sep/1", b"in the first")
        code, page = self.jreq("GET", "/storage/v1/b/other-bucket/o?prefix=sep/")
        self.assertEqual((code, page), (200, {"kind": "storage#objects"}))

    def test_fields(self):
        self.put("fields/a", b"a")
        code, page = self.jreq("GET", "/storage/v1/b/%s/o?prefix=fields/&fields=items(name,crc32c),nextPageToken"
                               % BUCKET)
        self.assertEqual(page, {"items": [{"name": "fields/a", "crc32c": b64crc(b"a")}]})


class Listing(Base):
    N = 2500

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        c = http.client.HTTPConnection("127.0.0.1", cls.emu.port, timeout=60)   # one keep-alive connection
        for i in range(cls.N):
            name = "many/%05d" % i
            c.request("POST", "/upload/storage/v1/b/%s/o?uploadType=media&name=%s" % (BUCKET, q(name)),
                      body=name.encode(), headers={"Authorization": "Bearer " + TOKEN})
            r = c.getresponse()
            r.read()
            assert r.status == 200, r.status
        for d in ("d/a/1", "d/a/2", "d/b/1", "d/c", "d/e/1"):
            c.request("POST", "/upload/storage/v1/b/%s/o?uploadType=media&name=%s" % (BUCKET, q(d)), body=b"d",
                      headers={"Authorization": "Bearer " + TOKEN})
            c.getresponse().read()
        c.close()

    def test_pages_of_1000(self):
        names, pages = self.list_all("many/")
        self.assertEqual(names, ["many/%05d" % i for i in range(self.N)])
        self.assertEqual(pages, 3)
        code, page = self.jreq("GET", "/storage/v1/b/%s/o?prefix=many/&maxResults=5000" % BUCKET)
        self.assertEqual(len(page["items"]), 1000)              # capped
        self.assertIn("nextPageToken", page)
        item = page["items"][0]
        self.assertEqual((item["kind"], item["size"], item["crc32c"]), ("storage#object", "10",
                                                                       b64crc(b"many/00000")))

    def test_small_pages(self):
        names, pages = self.list_all("many/000", "&maxResults=7")
        self.assertEqual(names, ["many/%05d" % i for i in range(100)])
        self.assertEqual(pages, 15)

    def test_delimiter(self):
        names, _ = self.list_all("d/", "&delimiter=/")
        self.assertEqual(names, ["d/c", "d/a/", "d/b/", "d/e/"])
        names, pages = self.list_all("d/", "&delimiter=/&maxResults=1")
        self.assertEqual(sorted(names), ["d/a/", "d/b/", "d/c", "d/e/"])
        self.assertEqual(pages, 4)

    def test_bad_page_token(self):
        for tok in ("garbage", base64.urlsafe_b64encode(b'{"a": "x"}').decode()):
            code, err = self.jreq("GET", "/storage/v1/b/%s/o?pageToken=%s" % (BUCKET, tok))
            self.assertEqual(code, 400, err)
        code, page = self.jreq("GET", "/storage/v1/b/%s/o?prefix=many/&maxResults=3" % BUCKET)
        code, err = self.jreq("GET", "/storage/v1/b/%s/o?prefix=d/&pageToken=%s" % (BUCKET, page["nextPageToken"]))
        self.assertEqual(code, 400, err)                        # a token of another listing
        self.assertEqual(self.jreq("GET", "/storage/v1/b/%s/o?maxResults=x" % BUCKET)[0], 400)


class Scopes(Base):
    def token(self, scopes):
        return self.emu.control("POST", "token", {"scopes": scopes})["access_token"]

    def test_no_token_401(self):
        code, err = self.jreq("GET", "/storage/v1/b/%s/o" % BUCKET, token=None)
        self.assertEqual(code, 401, err)
        self.assertEqual(reason(err), "required")
        code, err = self.put("s/x", b"x", token=None)
        self.assertEqual(code, 401, err)
        code, err = self.jreq("GET", "/storage/v1/b/%s/o" % BUCKET, token="ya29.not-issued")
        self.assertEqual(code, 401, err)
        self.assertEqual(reason(err), "authError")

    def test_read_only_reads_not_writes(self):
        self.put("s/ro", b"ro")
        ro = self.token([RO])
        self.assertEqual(self.jreq("GET", "/storage/v1/b/%s/o" % BUCKET, token=ro)[0], 200)
        code, _, body = self.req("GET", "/storage/v1/b/%s/o/s%%2Fro?alt=media" % BUCKET, token=ro)
        self.assertEqual((code, body), (200, b"ro"))
        code, err = self.put("s/ro2", b"x", token=ro)
        self.assertEqual(code, 403, err)
        self.assertEqual(reason(err), "insufficientPermissions")
        code, _, _ = self.req("DELETE", "/storage/v1/b/%s/o/s%%2Fro" % BUCKET, token=ro)
        self.assertEqual(code, 403)

    def test_write_scopes(self):
        for scope in (RW, "https://www.googleapis.com/auth/devstorage.full_control",
                      "https://www.googleapis.com/auth/cloud-platform"):
            self.assertEqual(self.put("s/w", b"w", token=self.token([scope]))[0], 200, scope)
        compute = self.token(["https://www.googleapis.com/auth/compute"])
        code, err = self.jreq("GET", "/storage/v1/b/%s/o" % BUCKET, token=compute)
        self.assertEqual(code, 403, err)
        self.assertEqual(reason(err), "insufficientPermissions")


class Uploads(Base):
    def test_multipart(self):
        body = (b'--BND\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n'
                b'{"name": "mp/one", "contentType": "text/x-mp"}\r\n'
                b'--BND\r\nContent-Type: text/plain\r\n\r\nmultipart body\r\n--BND--\r\n')
        code, obj = self.jreq("POST", "/upload/storage/v1/b/%s/o?uploadType=multipart&ifGenerationMatch=0" % BUCKET,
                              body, {"Content-Type": "multipart/related; boundary=BND"})
        self.assertEqual(code, 200, obj)
        self.assertEqual((obj["name"], obj["size"], obj["contentType"]), ("mp/one", "14", "text/x-mp"))
        self.assertEqual(self.get("mp/one")[2], b"multipart body")
        code, err = self.jreq("POST", "/upload/storage/v1/b/%s/o?uploadType=multipart&ifGenerationMatch=0" % BUCKET,
                              body, {"Content-Type": "multipart/related; boundary=BND"})
        self.assertEqual(code, 412, err)

    def start(self, name, pre=None):
        path = "/upload/storage/v1/b/%s/o?uploadType=resumable&name=%s" % (BUCKET, q(name))
        if pre is not None:
            path += "&ifGenerationMatch=%d" % pre
        code, hdrs, body = self.req("POST", path, b"", {"X-Upload-Content-Type": "application/x-r"})
        self.assertEqual(code, 200, body)
        loc = urllib.parse.urlsplit(hdrs["Location"])
        return loc.path + "?" + loc.query

    def test_resumable(self):
        unit = storage.RESUMABLE_UNIT
        data = os.urandom(2 * unit + 1000)
        sess = self.start("res/one", pre=0)
        code, hdrs, _ = self.req("PUT", sess, b"", {"Content-Range": "bytes */*"}, token=None)
        self.assertEqual(code, 308)
        self.assertNotIn("Range", hdrs)
        # a non-final chunk under 256 KiB: refused
        code, _, _ = self.req("PUT", sess, data[:1000], {"Content-Range": "bytes 0-999/*"}, token=None)
        self.assertEqual(code, 400)
        # 1.5 units: only one unit kept
        code, hdrs, _ = self.req("PUT", sess, data[:unit + unit // 2],
                                 {"Content-Range": "bytes 0-%d/*" % (unit + unit // 2 - 1)}, token=None)
        self.assertEqual(code, 308)
        self.assertEqual(hdrs["Range"], "bytes=0-%d" % (unit - 1))
        # beyond what was kept: refused
        code, _, _ = self.req("PUT", sess, data[2 * unit:], {"Content-Range": "bytes %d-%d/%d" % (
            2 * unit, len(data) - 1, len(data))}, token=None)
        self.assertEqual(code, 400)
        code, hdrs, body = self.req("PUT", sess, data[unit:], {"Content-Range": "bytes %d-%d/%d" % (
            unit, len(data) - 1, len(data))}, token=None)
        self.assertEqual(code, 200, body)
        obj = json.loads(body)
        self.assertEqual((obj["size"], obj["crc32c"], obj["contentType"]),
                         (str(len(data)), b64crc(data), "application/x-r"))
        self.assertEqual(self.get("res/one")[2], data)
        # the session asked again: the object
        self.assertEqual(self.req("PUT", sess, b"", {"Content-Range": "bytes */%d" % len(data)}, token=None)[0], 200)
        # a second session for the same name with ifGenerationMatch=0: 412 at the start
        code, _, _ = self.req("POST", "/upload/storage/v1/b/%s/o?uploadType=resumable&name=res%%2Fone"
                              "&ifGenerationMatch=0" % BUCKET, b"")
        self.assertEqual(code, 412)

    def test_resumable_race_412_at_finish(self):
        sess = self.start("res/race", pre=0)
        self.assertEqual(self.put("res/race", b"winner", pre=0)[0], 200)
        code, _, body = self.req("PUT", sess, b"loser", {"Content-Range": "bytes 0-4/5"}, token=None)
        self.assertEqual(code, 412, body)
        self.assertEqual(self.get("res/race")[2], b"winner")

    def test_upload_cut(self):
        unit = storage.RESUMABLE_UNIT
        data = os.urandom(4 * unit + 1000)
        sess = self.start("res/cut", pre=0)
        self.emu.control("POST", "faults", {"storage_upload_cut": 1})
        try:
            code = self.req("PUT", sess, data[:4 * unit], {"Content-Range": "bytes 0-%d/*" % (4 * unit - 1)},
                            token=None)[0]
        except (ConnectionError, http.client.HTTPException):
            code = None
        self.assertIsNone(code)         # no answer: the connection closed
        code, hdrs, _ = self.req("PUT", sess, b"", {"Content-Range": "bytes */%d" % len(data)}, token=None)
        self.assertEqual((code, hdrs.get("Range")), (308, "bytes=0-%d" % (2 * unit - 1)))
        code, _, body = self.req("PUT", sess, data[2 * unit:], {"Content-Range": "bytes %d-%d/%d" % (
            2 * unit, len(data) - 1, len(data))}, token=None)
        self.assertEqual(code, 200, body)
        self.assertEqual(self.get("res/cut")[2], data)

    def test_upload_503(self):
        unit = storage.RESUMABLE_UNIT
        data = os.urandom(unit + 10)
        sess = self.start("res/503", pre=0)
        self.emu.control("POST", "faults", {"storage_upload_503": 1})
        rng = {"Content-Range": "bytes 0-%d/%d" % (len(data) - 1, len(data))}
        self.assertEqual(self.req("PUT", sess, data, rng, token=None)[0], 503)
        self.assertNotIn("Range", self.req("PUT", sess, b"", {"Content-Range": "bytes */%d" % len(data)},
                                           token=None)[1])      # nothing kept
        self.assertEqual(self.req("PUT", sess, data, rng, token=None)[0], 200)
        self.assertEqual(self.get("res/503")[2], data)

    def test_big_object_streams(self):
        size = 24 << 20
        path = os.path.join(self.tmp.name, "big.bin")
        with open(path, "wb") as f:
            for _ in range(size >> 20):
                f.write(os.urandom(1 << 20))
        with open(path, "rb") as f:
            code, obj = self.jreq("POST", "/upload/storage/v1/b/%s/o?uploadType=media&name=big" % BUCKET, f,
                                  {"Content-Length": str(size)})
        self.assertEqual(code, 200, obj)
        self.assertEqual(obj["size"], str(size))
        code, hdrs, body = self.get("big")
        with open(path, "rb") as f:
            self.assertEqual(body, f.read())
        self.assertEqual(hdrs["x-goog-hash"].split(",")[0], "crc32c=" + obj["crc32c"])


class Faults(Base):
    def calls(self):
        return self.emu.control("GET", "storage")["calls"]

    def test_503_and_429(self):
        self.put("f/x", b"x")
        before = self.calls()
        self.emu.control("POST", "faults", {"storage_503": 2})
        code, err = self.put("f/y", b"y")
        self.assertEqual(code, 503, err)
        self.assertEqual(reason(err), "backendError")
        self.assertEqual(self.get("f/x")[0], 503)
        self.assertEqual(self.get("f/x")[0], 200)
        self.assertEqual(self.get("f/y")[0], 404)               # nothing was written
        self.emu.control("POST", "faults", {"storage_429": 1})
        code, err = self.jreq("GET", "/storage/v1/b/%s/o" % BUCKET)
        self.assertEqual(code, 429, err)
        self.assertEqual(reason(err), "rateLimitExceeded")
        after = self.calls()
        self.assertEqual(after.get("fault.503", 0) - before.get("fault.503", 0), 2)
        self.assertEqual(after.get("fault.429", 0) - before.get("fault.429", 0), 1)
        self.assertGreater(after["objects.get"], before.get("objects.get", 0))
        self.assertEqual(self.emu.control("GET", "faults")["storage_503"], 0)

    def test_corrupt(self):
        data = os.urandom(5000)
        self.put("f/c", data)
        self.emu.control("POST", "faults", {"storage_corrupt": 1})
        code, hdrs, body = self.get("f/c")
        self.assertEqual(code, 200)
        self.assertEqual(len(body), len(data))
        self.assertNotEqual(body, data)
        self.assertEqual(sum(a != b for a, b in zip(body, data)), 1)
        self.assertEqual(hdrs["x-goog-hash"].split(",")[0], "crc32c=" + b64crc(data))  # the stored one
        self.assertNotEqual(b64crc(body), b64crc(data))
        self.assertEqual(self.get("f/c")[2], data)              # only the next one
        self.assertGreaterEqual(self.calls()["fault.corrupt"], 1)

    def test_cut(self):
        data = os.urandom(100000)
        self.put("f/cut", data)
        self.emu.control("POST", "faults", {"storage_cut": 1})
        code, hdrs, body = self.get("f/cut")
        self.assertEqual(code, 200)
        self.assertEqual(hdrs["Content-Length"], str(len(data)))
        self.assertEqual(body[0], "cut")
        self.assertEqual(body[1], data[:len(data) // 2])
        self.assertEqual(self.get("f/cut")[2], data)
        self.assertGreaterEqual(self.calls()["fault.cut"], 1)

    def test_garble_cut(self):
        data = os.urandom(100000)
        self.put("f/gc", data)
        self.emu.control("POST", "faults", {"storage_garble_cut": 1})
        code, hdrs, body = self.get("f/gc")
        self.assertEqual(body[0], "cut")
        got = body[1]
        self.assertEqual(len(got), len(data) // 2)
        self.assertEqual(sum(a != b for a, b in zip(got, data)), 1)  # one byte flipped
        self.assertNotEqual(got[len(data) // 4], data[len(data) // 4])  # a quarter in
        self.assertEqual(self.get("f/gc")[2], data)             # only the next one
        self.assertGreaterEqual(self.calls()["fault.garble_cut"], 1)

    def test_rate(self):
        data = os.urandom(300000)
        self.put("f/rate", data)
        self.emu.control("POST", "faults", {"storage_rate": 400000})
        t0 = time.monotonic()
        body = self.get("f/rate")[2]
        slow = time.monotonic() - t0
        self.emu.control("POST", "faults", {"storage_rate": 0})
        t0 = time.monotonic()
        self.assertEqual(self.get("f/rate")[2], data)
        fast = time.monotonic() - t0
        self.assertEqual(body, data)                            # paced, not changed
        self.assertGreaterEqual(slow, 0.6)                      # 300,000 bytes at 400,000 a second
        self.assertLess(fast, slow)
        with self.assertRaises(Exception):
            self.emu.control("POST", "faults", {"storage_rate": -1})

    def test_latency(self):
        self.put("f/lat", b"x")
        self.emu.control("POST", "faults", {"storage_latency": 0.3})
        t0 = time.monotonic()
        code = self.get("f/lat")[0]
        slow = time.monotonic() - t0
        self.emu.control("POST", "faults", {"storage_latency": 0})
        self.assertEqual(code, 200)
        self.assertGreaterEqual(slow, 0.3)                      # the call waited
        with self.assertRaises(Exception):
            self.emu.control("POST", "faults", {"storage_latency": 2.0})  # at most 1 s

    def test_fault_from_the_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            with Emulator(d, "--no-bodies", "--bucket", BUCKET, "--static-token", TOKEN,
                          "--fault", "storage_503=1") as emu:
                c = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=30)
                for want in (503, 200):
                    c.request("GET", "/storage/v1/b/%s/o" % BUCKET, headers={"Authorization": "Bearer " + TOKEN})
                    r = c.getresponse()
                    r.read()
                    self.assertEqual(r.status, want)
                c.close()
                self.assertEqual(emu.control("GET", "calls")["storage"]["fault.503"], 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
