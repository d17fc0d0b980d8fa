#!/usr/bin/env python3
"""aws_sigv4_cases.py OUT.json - EC2 Query API requests signed by botocore
(test-only dependency, scripts/test-requirements.txt), for test_aws_sigv4
to sign again with pbx and compare: the form body (botocore's urlencode of
the serialized parameters) and the whole Authorization header.

Cases are generated (fixed seed): tag keys and values with spaces, '+',
'/', '=', '%', '~', '&', quotes, newlines, tabs, non-ASCII UTF-8 (2, 3 and
4 bytes), empty values; long filter lists (up to 40 filters of 25 values);
with and without a session token; hosts with and without a port; several
regions and timestamps.  Exits 77 (ctest: skipped) without botocore.
"""
import datetime
import json
import random
import sys
from collections import OrderedDict
from unittest import mock

try:
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    print("botocore is not installed", file=sys.stderr)
    sys.exit(77)

HOSTILE = [" ", "+", "/", "=", "%", "~", "&", "'", '"', "\n", "\t", "é", "日本", "🚀", "%20", "a b",
           "*", "?", "#", ":", ";", ",", "\\", "<>", "\r\n", ""]
CT = "application/x-www-form-urlencoded; charset=utf-8"


def word(rnd):
    return "".join(rnd.choice(HOSTILE + ["x", "Tag", "9", "-", "_", "."]) for _ in range(rnd.randint(0, 12)))


def params(rnd, n):
    action = rnd.choice(["RunInstances", "DescribeInstances", "CreateTags", "CreateSecurityGroup"])
    p = [("Action", action), ("Version", "2016-11-15")]
    if n % 3 == 0:
        for f in range(1, rnd.randint(20, 40) + 1):
            p.append(("Filter.%d.Name" % f, "tag:" + word(rnd)))
            for v in range(1, rnd.randint(1, 25) + 1):
                p.append(("Filter.%d.Value.%d" % (f, v), word(rnd)))
    else:
        p.append(("ResourceId.1", "i-%017x" % rnd.getrandbits(68)))
        for t in range(1, rnd.randint(1, 12) + 1):
            p.append(("Tag.%d.Key" % t, word(rnd) or "k"))
            p.append(("Tag.%d.Value" % t, word(rnd)))
    return p


def sign(case):
    host = case["host"]
    req = AWSRequest(method="POST", url="http://%s/" % host,
                     data=OrderedDict(case["params"]), headers={"Content-Type": CT})
    creds = Credentials(case["access_key"], case["secret_key"], case["token"])
    when = datetime.datetime.strptime(case["amz_date"], "%Y%m%dT%H%M%SZ")
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when):
        botocore.auth.SigV4Auth(creds, "ec2", case["region"]).add_auth(req)
    body = req.body
    case["body"] = body.decode() if isinstance(body, bytes) else body
    case["authorization"] = req.headers["Authorization"]
    return case


def main():
    rnd = random.Random(12)
    cases = []
    for n in range(60):
        cases.append(sign({
            "params": params(rnd, n),
            "access_key": rnd.choice(["AKIDEXAMPLE", "AKIA" + "%016X" % rnd.getrandbits(64)]),
            "secret_key": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" + word(rnd).encode("ascii", "ignore").decode(),
            "token": None if n % 2 else "FQoGZXIvYXdz+/=token%d" % n,
            "region": rnd.choice(["us-east-1", "eu-west-1", "ap-southeast-2"]),
            "host": rnd.choice(["ec2.us-east-1.amazonaws.com", "127.0.0.1:%d" % rnd.randint(1024, 65535)]),
            "amz_date": "20%02d%02d%02dT%02d%02d%02dZ" % (rnd.randint(15, 30), rnd.randint(1, 12),
                                                       rnd.randint(1, 28), rnd.randint(0, 23),
                                                       rnd.randint(0, 59), rnd.randint(0, 59)),
        }))
    with open(sys.argv[1], "w") as f:
        json.dump(cases, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
