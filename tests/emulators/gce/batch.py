"""batch.py - POST /batch/compute/v1: several compute calls in one
multipart/mixed request, as gcloud sends them when one command names
several instances.  Each part is an application/http request; the answer
is a multipart/mixed of application/http responses, part by part, with
Content-ID <response-ID> for a request's <ID>.  A part without its own
Authorization header uses the batch request's.  The MIME structure is
parsed by the email package, each part's request line and headers by
http.client."""

import email
import email.policy
import http.client
import io
import json
import secrets
import urllib.parse

from errors import ApiError, bad_request


def answer(handler, content_type, raw):
    """(Content-Type, body) of the multipart answer; raises ApiError 400
    for a body that is not a multipart batch."""
    if not content_type.startswith("multipart/mixed"):
        raise bad_request("Batch requests must be multipart/mixed.", "invalid")
    msg = email.message_from_bytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw,
                                   policy=email.policy.HTTP)
    if not msg.is_multipart():
        raise bad_request("Batch request has no parts.", "invalid")
    boundary = "batch_" + secrets.token_hex(12)
    out = []
    for part in msg.iter_parts():
        cid = part.get("Content-ID", "")
        code, value = _one(handler, part.get_payload(decode=True) or b"")
        text = json.dumps(value, indent=1).encode()
        resp_id = "<response-%s>" % cid.strip().strip("<>") if cid else None
        head = "--%s\r\nContent-Type: application/http\r\n" % boundary
        if resp_id:
            head += "Content-ID: %s\r\n" % resp_id
        head += "\r\nHTTP/1.1 %d %s\r\nContent-Type: application/json; charset=UTF-8\r\nContent-Length: %d\r\n\r\n" % (
            code, http.client.responses.get(code, ""), len(text))
        out.append(head.encode() + text + b"\r\n")
    out.append(("--%s--\r\n" % boundary).encode())
    return "multipart/mixed; boundary=%s" % boundary, b"".join(out)


def _one(handler, payload):
    """(status, JSON) of one inner request."""
    stream = io.BytesIO(payload)
    line = stream.readline().decode("latin-1").strip()
    try:
        method, target, _ = line.split(" ", 2)
    except ValueError:
        return 400, bad_request("Bad request line in batch part: %r" % line).body()
    headers = http.client.parse_headers(stream)
    body = stream.read()
    url = urllib.parse.urlsplit(target)
    path = url.path
    if not path.startswith("/compute/v1/"):
        return 404, ApiError(404, "notFound", "The requested URL %s was not found." % path).body()
    auth = headers.get("Authorization") or handler.headers.get("Authorization")
    try:
        return handler.compute(method, path[len("/compute/v1/"):], url.query, body, auth)
    except ApiError as e:
        return e.code, e.body()
