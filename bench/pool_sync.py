"""pool_sync.py - bench/pool.sh's baseline: what `aws s3 sync DIR s3://B/P/`
and back does, one object per file, 10 requests at a time (the AWS CLI's
default max_concurrent_requests), with boto3.

Usage: pool_sync.py ENDPOINT BUCKET PREFIX DIR DEST
Prints "UP_SECONDS DOWN_SECONDS".
"""
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config


def main():
    endpoint, bucket, prefix, src, dest = sys.argv[1:6]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      config=Config(max_pool_connections=10))
    files = []
    for root, _, names in os.walk(src):
        for n in names:
            path = os.path.join(root, n)
            files.append((path, prefix + "/" + os.path.relpath(path, src)))
    t0 = time.monotonic()
    with ThreadPoolExecutor(10) as ex:
        list(ex.map(lambda f: s3.upload_file(f[0], bucket, f[1]), files))
    t1 = time.monotonic()
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        keys += [o["Key"] for o in page.get("Contents", [])]

    def get(key):
        path = os.path.join(dest, os.path.relpath(key, prefix))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s3.download_file(bucket, key, path)

    with ThreadPoolExecutor(10) as ex:
        list(ex.map(get, keys))
    t2 = time.monotonic()
    if len(keys) != len(files):
        sys.exit("pool_sync: listed %d objects, uploaded %d" % (len(keys), len(files)))
    print("%.2f %.2f" % (t1 - t0, t2 - t1))


if __name__ == "__main__":
    main()
