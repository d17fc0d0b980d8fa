"""servicequotas.py - Service Quotas' GetServiceQuota and
GetAWSDefaultServiceQuota for the EC2 harness (ec2_harness.py answers a
POST with X-Amz-Target ServiceQuotasV20190624.* here instead of
forwarding it to moto, whose Service Quotas knows only VPC quotas), strict
as servicequotas.REGION.amazonaws.com is, for the EC2 vCPU quotas.

Checks: JSON 1.1 (json11.py); a SigV4 signature of one of the harness's
IAM keys for service `servicequotas` in the harness's region; an access
key whose policy does not allow servicequotas:Get* (the harness's
`viewer`) gets AccessDeniedException; ServiceCode and QuotaCode present
and well formed, no other field but ContextId.  GetServiceQuota answers
a quota the account has a value of (--service-quota CODE=VALUE) and
NoSuchResourceException for the others, whose AWS default
GetAWSDefaultServiceQuota gives (DEFAULTS).  Calls are counted."""

import json
import re
import threading

from json11 import Refused, check_request, error_body, request_fields, verify

# The EC2 vCPU quotas pbx reads (src/cloud/aws/quota.c), with the defaults
# this harness gives an account that has no value of its own.
QUOTAS = {
    "L-1216C47A": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 5.0),
    "L-34B43A08": ("All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", 5.0),
    "L-DB2E81BA": ("Running On-Demand G and VT instances", 0.0),
    "L-3819A6DF": ("All G and VT Spot Instance Requests", 0.0),
    "L-417A185B": ("Running On-Demand P instances", 0.0),
    "L-7212CCBC": ("All P Spot Instance Requests", 0.0),
    "L-1945791B": ("Running On-Demand Inf instances", 0.0),
    "L-B5D1601B": ("All Inf Spot Instance Requests", 0.0),
}
SERVICE = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{1,63}$")
CODE = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{1,128}$")


class ServiceQuotas:
    def __init__(self, keys, denied, region, account, applied):
        """keys: access key -> (secret, token); denied: access keys whose
        policy does not allow reading quotas; applied: code -> value."""
        self.keys, self.denied, self.region, self.account = keys, set(denied), region, account
        self.applied = dict(applied)
        self.lock = threading.Lock()
        self.calls = 0

    def _request(self, body):
        req = request_fields(body, ("ServiceCode", "QuotaCode", "ContextId"))
        for k, pattern in (("ServiceCode", SERVICE), ("QuotaCode", CODE)):
            if not isinstance(req.get(k), str) or not pattern.match(req[k]):
                raise Refused(400, "ValidationException", "1 validation error detected: Value at '%s' "
                              "failed to satisfy constraint" % (k[0].lower() + k[1:]))
        return req["ServiceCode"], req["QuotaCode"]

    def _quota(self, service, code, value):
        name = QUOTAS[code][0]
        return {"ServiceCode": service, "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                "QuotaArn": "arn:aws:servicequotas:%s:%s:%s/%s" % (self.region, self.account, service, code),
                "QuotaCode": code, "QuotaName": name, "Value": value, "Unit": "None",
                "Adjustable": True, "GlobalQuota": False}

    def answer(self, headers, body):
        """(status, JSON text) of one call."""
        try:
            op = check_request(headers, "ServiceQuotasV20190624")
            if op not in ("GetServiceQuota", "GetAWSDefaultServiceQuota"):
                raise Refused(400, "UnknownOperationException", "")
            ak = verify(self.keys, headers, body, "servicequotas", self.region)
            if ak in self.denied:
                raise Refused(400, "AccessDeniedException", "You do not have sufficient access to perform "
                              "this action.")
            service, code = self._request(body)
            with self.lock:
                self.calls += 1
            if service != "ec2" or code not in QUOTAS:
                raise Refused(400, "NoSuchResourceException", "The request failed because the specified "
                              "service or quota does not exist.")
            if op == "GetAWSDefaultServiceQuota":
                return 200, json.dumps({"Quota": self._quota(service, code, QUOTAS[code][1])})
            if code not in self.applied:
                raise Refused(400, "NoSuchResourceException", "The request failed because the specified "
                              "quota does not exist.")
            return 200, json.dumps({"Quota": self._quota(service, code, self.applied[code])})
        except Refused as e:
            return e.status, error_body("com.amazonaws.servicequotas.model", e)
