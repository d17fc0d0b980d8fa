"""json11.py - what the harness's AWS JSON 1.1 APIs (pricing.py,
servicequotas.py) share: the refusal such an API answers with, and the
check of a request's SigV4 signature against the harness's IAM keys for
one signing name and region, as AWS checks it."""

import calendar
import hashlib
import hmac
import json
import time


class Refused(Exception):
    def __init__(self, status, kind, message):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def error_body(namespace, e):
    """The JSON text of refusal e, as the API `namespace` sends it."""
    return json.dumps({"__type": namespace + "#" + e.kind, "message": e.message})


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def request_fields(body, allowed):
    """The JSON object of a request's body, each of its fields in
    `allowed` (SerializationException otherwise, as AWS answers)."""
    try:
        req = json.loads(body)
    except ValueError:
        req = None
    if not isinstance(req, dict):
        raise Refused(400, "SerializationException", "Start of structure or map found where not expected.")
    for k in req:
        if k not in allowed:
            raise Refused(400, "SerializationException", "Unknown field %s" % k)
    return req


def check_request(headers, target_prefix):
    """The operation a JSON 1.1 request names (X-Amz-Target PREFIX.Op)."""
    target = headers.get("X-Amz-Target", "")
    if not target.startswith(target_prefix + "."):
        raise Refused(400, "UnknownOperationException", "")
    if not headers.get("Content-Type", "").startswith("application/x-amz-json-1.1"):
        raise Refused(400, "SerializationException", "Content-Type must be application/x-amz-json-1.1")
    return target[len(target_prefix) + 1:]


def verify(keys, headers, body, service, region):
    """Checks the request's signature; returns its access key.
    keys: access key -> (secret key, session token or None)."""
    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        raise Refused(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(",") if "=" in p)
    try:
        ak, date, scope_region, scope_service, term = parts["Credential"].split("/")
        signed = parts["SignedHeaders"].split(";")
        sig = parts["Signature"]
    except (KeyError, ValueError):
        raise Refused(400, "IncompleteSignatureException", "Authorization header requires Credential, "
                      "SignedHeaders and Signature.")
    if ak not in keys:
        raise Refused(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    secret, token = keys[ak]
    amz = headers.get("X-Amz-Date", "")
    if scope_service != service or scope_region != region or term != "aws4_request" or \
            not amz.startswith(date):
        raise Refused(403, "InvalidSignatureException", "Credential should be scoped to a valid region "
                      "(%s) and service (%s)." % (region, service))
    if "host" not in signed or "x-amz-date" not in signed:
        raise Refused(403, "InvalidSignatureException", "host and x-amz-date must be signed.")
    try:
        t = calendar.timegm(time.strptime(amz, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        raise Refused(400, "IncompleteSignatureException", "X-Amz-Date is malformed.")
    if abs(t - time.time()) > 900:
        raise Refused(403, "InvalidSignatureException", "Signature expired.")
    if token is not None and (headers.get("X-Amz-Security-Token") != token or
                              "x-amz-security-token" not in signed):
        raise Refused(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    canon = "".join("%s:%s\n" % (h, " ".join((headers.get(h) or "").split())) for h in signed)
    creq = "\n".join(["POST", "/", "", canon, ";".join(signed), hashlib.sha256(body).hexdigest()])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, "/".join([date, region, service, term]),
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), date), region), service), term)
    if not hmac.compare_digest(hmac.new(k, sts.encode(), hashlib.sha256).hexdigest(), sig):
        raise Refused(403, "InvalidSignatureException", "The request signature we calculated does not "
                      "match the signature you provided.")
    return ak
