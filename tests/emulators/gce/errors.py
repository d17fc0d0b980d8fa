"""errors.py - Google API errors in the shapes Compute Engine and its OAuth
endpoint send, raised by handlers and turned into responses by emulator.py.

    {"error": {"code": 409, "message": "...", "errors": [{"message": "...",
     "domain": "global", "reason": "alreadyExists"}], "status": "..."}}
"""

import json


class ApiError(Exception):
    """An HTTP error with Google's JSON error body."""

    def __init__(self, code, reason, message, domain="global", status=None,
                 details=None, extra=None, headers=None, item_message=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.domain = domain
        self.status = status
        self.details = details
        self.extra = extra or {}        # more keys of errors[0] (location, ...)
        self.headers = headers or {}
        self.item_message = item_message  # errors[0].message when it differs

    def body(self):
        item = {"message": self.item_message or self.message, "domain": self.domain, "reason": self.reason}
        item.update(self.extra)
        err = {"code": self.code, "message": self.message, "errors": [item]}
        if self.status:
            err["status"] = self.status
        if self.details:
            err["details"] = self.details
        return {"error": err}


class OAuthError(Exception):
    """An error of the token endpoint: {"error": ..., "error_description": ...}."""

    def __init__(self, code, error, description):
        super().__init__(description)
        self.code = code
        self.error = error
        self.description = description

    def body(self):
        return {"error": self.error, "error_description": self.description}


def invalid_field(field, value, why):
    """400 for a field Compute Engine checks itself ('resource.name', ...)."""
    if not isinstance(value, str):
        value = json.dumps(value)
    return ApiError(400, "invalid", "Invalid value for field '%s': '%s'. %s" % (field, value, why))


def invalid_payload(message):
    """400 from the JSON front end (unknown names, wrong JSON types)."""
    return ApiError(400, "invalid", "Invalid JSON payload received. " + message,
                    status="INVALID_ARGUMENT",
                    details=[{"@type": "type.googleapis.com/google.rpc.BadRequest",
                              "fieldViolations": [{"description": "Invalid JSON payload received. " + message}]}])


def bad_request(message, reason="badRequest"):
    return ApiError(400, reason, message)


def resource_usage(message):
    """400 for a combination Compute Engine refuses (GPUs that would live-migrate ...)."""
    return ApiError(400, "invalid", "Invalid resource usage: '%s'." % message)


def not_found(path):
    return ApiError(404, "notFound", "The resource '%s' was not found" % path)


def already_exists(path):
    return ApiError(409, "alreadyExists", "The resource '%s' already exists" % path)


def login_required():
    return ApiError(401, "required",
                    "Request is missing required authentication credential. Expected OAuth 2 "
                    "access token, login cookie or other valid authentication credential. See "
                    "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                    status="UNAUTHENTICATED",
                    extra={"location": "Authorization", "locationType": "header"},
                    headers={"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'},
                    item_message="Login Required.")


def invalid_credentials():
    e = login_required()
    e.reason = "authError"
    e.message = ("Request had invalid authentication credentials. Expected OAuth 2 access token, "
                 "login cookie or other valid authentication credential. See "
                 "https://developers.google.com/identity/sign-in/web/devconsole-project.")
    e.item_message = "Invalid Credentials"
    e.headers = {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/", error="invalid_token"'}
    return e


def insufficient_scopes():
    return ApiError(403, "insufficientPermissions",
                    "Request had insufficient authentication scopes.",
                    status="PERMISSION_DENIED",
                    headers={"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/", '
                                                 'error="insufficient_scope"'})


def rate_limited_429(project):
    msg = ("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service "
           "'compute.googleapis.com' for consumer 'project_number:%s'." % project)
    return ApiError(429, "rateLimitExceeded", msg, status="RESOURCE_EXHAUSTED",
                    details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                              "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
                              "metadata": {"service": "compute.googleapis.com",
                                           "quota_metric": "compute.googleapis.com/default",
                                           "quota_limit": "defaultPerMinutePerProject",
                                           "consumer": "projects/%s" % project}}])


def rate_limited_403():
    return ApiError(403, "rateLimitExceeded", "Rate Limit Exceeded", domain="usageLimits")


def backend_error():
    return ApiError(503, "backendError",
                    "Internal error. Please try again or contact Google Support. (Code: '-1')",
                    status="UNAVAILABLE")
