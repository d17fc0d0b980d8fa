"""test_faultproxy.py - faultproxy.py in front of moto_server (started by
the proxy with --moto --auth: signatures checked): boto3 through the proxy
signs and is accepted (Host and Authorization forwarded unchanged), a wrong
secret is refused; If-None-Match: * gives 412; a wrong
x-amz-checksum-crc32c is 400 BadDigest and a right one is kept and
returned with x-amz-checksum-mode; ListObjectsV2 pages; each fault
(corrupt, cut, slowdown, cutput, one armed for an operation) and
/__stats__; a multipart upload's part checksums and its FULL_OBJECT
completion checked (a wrong whole-object CRC32C 400 BadDigest), the
completed object's CRC32C returned with checksum mode.  Loopback only.  Skips (77)
without moto[server]/boto3."""

import base64
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gce"))
from storage import crc32c  # noqa: E402

try:
    import boto3
    import botocore
    from botocore.config import Config
    import moto.server  # noqa: F401
except ImportError:
    print("1..0 # SKIP moto[server]/boto3 missing")
    sys.exit(77)

BUCKET = "pbx-proxy-test"


def b64crc(data):
    return base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()


class Proxy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        env = os.path.join(cls.tmp.name, "env.json")
        cls.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "faultproxy.py"), "--port", "0",
                                     "--moto", "--auth", "--bucket", BUCKET, "--env-file", env,
                                     "--log", os.path.join(cls.tmp.name, "log")], stdin=subprocess.DEVNULL)
        end = time.time() + 120
        while not os.path.exists(env):
            if cls.proc.poll() is not None or time.time() > end:
                raise RuntimeError("faultproxy did not start")
            time.sleep(0.1)
        with open(env) as f:
            cls.env = json.load(f)
        cls.s3 = cls.client(cls.env["secret_key"])

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(30)
        cls.tmp.cleanup()

    @classmethod
    def client(cls, secret, url=None):
        return boto3.client("s3", endpoint_url=url or cls.env["url"], region_name="us-east-1",
                            aws_access_key_id=cls.env["access_key"], aws_secret_access_key=secret,
                            config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1},
                                          request_checksum_calculation="when_required",
                                          response_checksum_validation="when_required"))

    def control(self, method, path):
        req = urllib.request.Request(self.env["url"] + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())

    def code(self, f):
        try:
            f()
            return 200, None
        except botocore.exceptions.ClientError as e:
            return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]

    def test_signatures_pass_through(self):
        self.s3.put_object(Bucket=BUCKET, Key="sig/x", Body=b"x")
        self.assertEqual(self.s3.get_object(Bucket=BUCKET, Key="sig/x")["Body"].read(), b"x")
        bad = self.client("wrong-secret")
        self.assertEqual(self.code(lambda: bad.get_object(Bucket=BUCKET, Key="sig/x")), (403, "SignatureDoesNotMatch"))
        self.assertEqual(self.code(lambda: bad.put_object(Bucket=BUCKET, Key="sig/y", Body=b"y")),
                         (403, "SignatureDoesNotMatch"))

    def test_if_none_match(self):
        self.s3.put_object(Bucket=BUCKET, Key="inm/a", Body=b"first", IfNoneMatch="*")
        self.assertEqual(self.code(lambda: self.s3.put_object(Bucket=BUCKET, Key="inm/a", Body=b"second",
                                                              IfNoneMatch="*")), (412, "PreconditionFailed"))
        self.assertEqual(self.s3.get_object(Bucket=BUCKET, Key="inm/a")["Body"].read(), b"first")

    def test_checksums(self):
        data = b"checksummed bytes"
        wrong = b64crc(data + b"!")
        self.assertEqual(self.code(lambda: self.s3.put_object(Bucket=BUCKET, Key="crc/bad", Body=data,
                                                              ChecksumCRC32C=wrong)), (400, "BadDigest"))
        self.assertEqual(self.code(lambda: self.s3.head_object(Bucket=BUCKET, Key="crc/bad")), (404, "404"))
        # a raw PUT with only x-amz-checksum-crc32c (no sdk algorithm header): kept all the same
        self.s3.put_object(Bucket=BUCKET, Key="crc/good", Body=data, ChecksumCRC32C=b64crc(data))
        r = self.s3.get_object(Bucket=BUCKET, Key="crc/good", ChecksumMode="ENABLED")
        self.assertEqual(r["Body"].read(), data)
        self.assertEqual(r.get("ChecksumCRC32C"), b64crc(data))
        self.assertEqual(self.s3.head_object(Bucket=BUCKET, Key="crc/good", ChecksumMode="ENABLED")
                         .get("ChecksumCRC32C"), b64crc(data))

    def test_list_pages(self):
        for i in range(25):
            self.s3.put_object(Bucket=BUCKET, Key="page-%03d" % i, Body=b"")
        keys, tok, pages = [], None, 0
        while True:
            kw = dict(Bucket=BUCKET, Prefix="page-", MaxKeys=10)
            if tok:
                kw["ContinuationToken"] = tok
            r = self.s3.list_objects_v2(**kw)
            pages += 1
            keys += [o["Key"] for o in r.get("Contents", [])]
            if not r["IsTruncated"]:
                break
            tok = r["NextContinuationToken"]
        self.assertEqual((keys, pages), (["page-%03d" % i for i in range(25)], 3))

    def test_list_prefix_with_slash(self):
        # signed, checked by moto (--auth), with an encoded '/' in the
        # query: moto refuses it without motofix.py's patch
        self.s3.put_object(Bucket=BUCKET, Key="dir/sub/a", Body=b"a")
        self.s3.put_object(Bucket=BUCKET, Key="dirx", Body=b"x")
        r = self.s3.list_objects_v2(Bucket=BUCKET, Prefix="dir/sub/")
        self.assertEqual([o["Key"] for o in r.get("Contents", [])], ["dir/sub/a"])

    def test_corrupt(self):
        data = os.urandom(10000)
        self.s3.put_object(Bucket=BUCKET, Key="f/c", Body=data, ChecksumCRC32C=b64crc(data))
        self.control("POST", "/__fault__?kind=corrupt&n=1")
        r = self.s3.get_object(Bucket=BUCKET, Key="f/c", ChecksumMode="ENABLED")
        body = r["Body"].read()
        self.assertEqual(len(body), len(data))
        self.assertEqual(sum(a != b for a, b in zip(body, data)), 1)
        self.assertEqual(r["ChecksumCRC32C"], b64crc(data))       # headers unchanged
        self.assertEqual(self.s3.get_object(Bucket=BUCKET, Key="f/c")["Body"].read(), data)
        self.assertGreaterEqual(self.control("GET", "/__stats__")["fired"]["corrupt"], 1)

    def test_cut(self):
        data = os.urandom(100000)
        self.s3.put_object(Bucket=BUCKET, Key="f/cut", Body=data)
        self.control("POST", "/__fault__?kind=cut&n=1")
        r = self.s3.get_object(Bucket=BUCKET, Key="f/cut")
        self.assertEqual(r["ContentLength"], len(data))
        with self.assertRaises((botocore.exceptions.ResponseStreamingError,
                                botocore.exceptions.IncompleteReadError)):
            r["Body"].read()
        self.assertEqual(self.control("GET", "/__stats__")["fired"]["cut"], 1)
        self.assertEqual(self.s3.get_object(Bucket=BUCKET, Key="f/cut")["Body"].read(), data)

    def test_slowdown_and_stats(self):
        before = self.control("GET", "/__stats__")
        self.control("POST", "/__fault__?kind=slowdown&n=2")
        self.assertEqual(self.code(lambda: self.s3.put_object(Bucket=BUCKET, Key="f/s", Body=b"s")), (503, "SlowDown"))
        self.assertEqual(self.code(lambda: self.s3.list_objects_v2(Bucket=BUCKET)), (503, "SlowDown"))
        self.assertEqual(self.code(lambda: self.s3.head_object(Bucket=BUCKET, Key="f/s")), (404, "404"))
        after = self.control("GET", "/__stats__")
        self.assertEqual(after["fired"]["slowdown"] - before["fired"].get("slowdown", 0), 2)
        self.assertEqual(after["methods"]["PUT"] - before["methods"].get("PUT", 0), 1)
        self.assertEqual(after["methods"]["HEAD"] - before["methods"].get("HEAD", 0), 1)
        self.assertEqual(after["operations"]["ListObjectsV2"] - before["operations"].get("ListObjectsV2", 0), 1)
        self.assertEqual(after["armed"]["slowdown"], 0)

    def upload(self, key, parts):
        u = self.s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm="CRC32C",
                                            ChecksumType="FULL_OBJECT")["UploadId"]
        done = []
        for i, p in enumerate(parts):
            r = self.s3.upload_part(Bucket=BUCKET, Key=key, UploadId=u, PartNumber=i + 1, Body=p,
                                    ChecksumCRC32C=b64crc(p))
            done.append({"PartNumber": i + 1, "ETag": r["ETag"], "ChecksumCRC32C": b64crc(p)})
        return u, done

    def test_multipart_checksums(self):
        parts = [os.urandom(5 << 20), os.urandom(1000)]
        data = b"".join(parts)
        self.assertEqual(self.code(lambda: self.s3.upload_part(Bucket=BUCKET, Key="mp/x", UploadId="none",
                                                               PartNumber=1, Body=b"p", ChecksumCRC32C=b64crc(b"q"))),
                         (400, "BadDigest"))
        u, done = self.upload("mp/a", parts)
        self.assertEqual(self.code(lambda: self.s3.complete_multipart_upload(
            Bucket=BUCKET, Key="mp/a", UploadId=u, MultipartUpload={"Parts": done},
            ChecksumCRC32C=b64crc(data + b"!"), ChecksumType="FULL_OBJECT")), (400, "BadDigest"))
        self.s3.complete_multipart_upload(Bucket=BUCKET, Key="mp/a", UploadId=u, MultipartUpload={"Parts": done},
                                          ChecksumCRC32C=b64crc(data), ChecksumType="FULL_OBJECT", IfNoneMatch="*")
        r = self.s3.get_object(Bucket=BUCKET, Key="mp/a", ChecksumMode="ENABLED")
        self.assertEqual((r["Body"].read(), r.get("ChecksumCRC32C")), (data, b64crc(data)))
        u, done = self.upload("mp/a", [b"again"])
        self.assertEqual(self.code(lambda: self.s3.complete_multipart_upload(
            Bucket=BUCKET, Key="mp/a", UploadId=u, MultipartUpload={"Parts": done}, IfNoneMatch="*")),
            (412, "PreconditionFailed"))
        self.s3.abort_multipart_upload(Bucket=BUCKET, Key="mp/a", UploadId=u)
        ops = self.control("GET", "/__stats__")["operations"]
        for op in ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "AbortMultipartUpload"):
            self.assertGreaterEqual(ops.get(op, 0), 1, op)

    def test_cutput_for_one_operation(self):
        self.control("POST", "/__fault__?kind=cutput&n=1&op=UploadPart")
        self.s3.put_object(Bucket=BUCKET, Key="cp/whole", Body=b"not an UploadPart")     # not cut
        u = self.s3.create_multipart_upload(Bucket=BUCKET, Key="cp/p")["UploadId"]
        with self.assertRaises((botocore.exceptions.ConnectionClosedError, botocore.exceptions.EndpointConnectionError,
                                botocore.exceptions.HTTPClientError)):
            self.s3.upload_part(Bucket=BUCKET, Key="cp/p", UploadId=u, PartNumber=1, Body=os.urandom(1 << 20))
        st = self.control("GET", "/__stats__")
        self.assertEqual((st["fired"]["cutput"], st["armed"]["cutput"]), (1, 0))
        self.s3.abort_multipart_upload(Bucket=BUCKET, Key="cp/p", UploadId=u)


if __name__ == "__main__":
    unittest.main(verbosity=2)
