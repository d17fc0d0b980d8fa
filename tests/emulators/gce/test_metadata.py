#!/usr/bin/env python3
"""test_metadata.py - the metadata server's paths as Compute Engine's
serves them (metadata.py), on 127.0.0.1 (a free port) with a made-up
instance tree: hyphenated paths find the tree's camelCase keys; a service
account's token is minted on each GET for the account the instance runs as
(by `default` or its e-mail), never listed in a recursive dump; an instance
without that account, or a server without a mint hook, gives 404; a
request without Metadata-Flavor gets 403.  Python standard library only."""

import json
import os
import socket
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metadata  # noqa: E402
import vms  # noqa: E402

n = failed = 0


def ok(cond, what):
    global n, failed
    n += 1
    failed += 0 if cond else 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what), flush=True)


def get(port, path, flavor=True):
    r = urllib.request.Request("http://127.0.0.1:%d/computeMetadata/v1/%s" % (port, path),
                               headers={"Metadata-Flavor": "Google"} if flavor else {})
    try:
        with urllib.request.urlopen(r, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


EMAIL = "pbx-head@p.iam.gserviceaccount.com"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
minted = []


def mint(email, scopes):
    minted.append((email, tuple(scopes)))
    return {"access_token": "ya29.t%d" % len(minted), "expires_in": 3599, "token_type": "Bearer"}


def tree(accounts):
    return lambda: {"instance": {"name": "h", "networkInterfaces": [{"ip": "127.0.0.2"}],
                                 "serviceAccounts": vms.service_accounts({"serviceAccounts": accounts})},
                    "project": {"projectId": "p"}}


port = free_port()
head = metadata.BodyServer("127.0.0.1", port, tree([{"email": EMAIL, "scopes": SCOPES}]), mint)
try:
    ok(get(port, "instance/network-interfaces/0/ip") == (200, "127.0.0.2"),
       "a hyphenated path finds the tree's camelCase key")
    ok(get(port, "instance/service-accounts/") == (200, "%s/\ndefault/\n" % EMAIL),
       "service-accounts/ lists the account and default")
    ok(get(port, "instance/service-accounts/default/email") == (200, EMAIL), "default is the account")
    st, body = get(port, "instance/service-accounts/default/token")
    ok(st == 200 and json.loads(body) == {"access_token": "ya29.t1", "expires_in": 3599,
                                          "token_type": "Bearer"} and minted == [(EMAIL, tuple(SCOPES))],
       "its token is minted for the account with the instance's scopes: %s %s" % (st, body))
    st, body = get(port, "instance/service-accounts/%s/token" % EMAIL)
    ok(st == 200 and json.loads(body)["access_token"] == "ya29.t2", "by its e-mail too, a fresh one each GET")
    st, body = get(port, "instance/service-accounts/?recursive=true")
    ok(st == 200 and "token" not in body and "access_token" not in body,
       "a recursive dump holds no token: %s" % body)
    ok(get(port, "instance/service-accounts/other@p.iam.gserviceaccount.com/token")[0] == 404,
       "another account's token: 404")
    ok(get(port, "instance/service-accounts/default/token", flavor=False)[0] == 403,
       "without Metadata-Flavor: 403")
finally:
    head.close()

port = free_port()
node = metadata.BodyServer("127.0.0.1", port, tree([]), mint)
try:
    ok(get(port, "instance/service-accounts/default/token")[0] == 404,
       "an instance with no service account gets no token")
finally:
    node.close()
port = free_port()
plain = metadata.BodyServer("127.0.0.1", port, tree([{"email": EMAIL, "scopes": SCOPES}]))
try:
    ok(get(port, "instance/service-accounts/default/token")[0] == 404, "a server without a mint hook: 404")
finally:
    plain.close()
print("1..%d" % n)
sys.exit(1 if failed else 0)
