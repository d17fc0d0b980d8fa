"""pricing.py - the AWS Price List Query API's GetProducts for the EC2
harness (ec2_harness.py answers a POST with X-Amz-Target
AWSPriceListService.* here instead of forwarding it to moto), strict as
api.pricing.us-east-1.amazonaws.com is, over a small fixture catalogue
(PRODUCTS below; docs/cost.md says how pbx reads it).

Checks: JSON 1.1 (Content-Type application/x-amz-json-1.1, X-Amz-Target
AWSPriceListService.GetProducts); a SigV4 signature of one of the
harness's IAM keys for service `pricing` in us-east-1 over host and
x-amz-date at least (403 UnrecognizedClientException for an unknown key,
InvalidSignatureException for a wrong signature, a missing session token
or a date more than 15 minutes off); ServiceCode AmazonEC2, Filters of
TERM_MATCH on known fields, FormatVersion aws_v1, MaxResults 1..100, a
NextToken it issued (400 otherwise).  A page holds at most PAGE_MAX
products.  Each PriceList entry is a JSON text in a string, as AWS sends
it.  Calls are counted (calls)."""

import hashlib
import json
import threading

from json11 import Refused, check_request, error_body, request_fields, verify

PAGE_MAX = 2
FIELDS = {"instanceType", "regionCode", "location", "operatingSystem", "tenancy", "preInstalledSw",
          "capacitystatus", "licenseModel", "productFamily"}


def _product(itype, usd, os_="Linux", capacity="Used", region="us-east-1"):
    sku = hashlib.sha256(("%s/%s/%s/%s" % (itype, os_, capacity, region)).encode()).hexdigest()[:14].upper()
    return {"product": {"productFamily": "Compute Instance", "sku": sku,
                        "attributes": {"instanceType": itype, "regionCode": region,
                                       "location": "US East (N. Virginia)", "operatingSystem": os_,
                                       "tenancy": "Shared", "preInstalledSw": "NA",
                                       "capacitystatus": capacity, "licenseModel": "No License required",
                                       "servicecode": "AmazonEC2"}},
            "serviceCode": "AmazonEC2", "version": "20240501000000", "publicationDate": "2024-05-01T00:00:00Z",
            "terms": {"OnDemand": {sku + ".JRTCKXETXF": {
                "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2024-05-01T00:00:00Z",
                "termAttributes": {},
                "priceDimensions": {sku + ".JRTCKXETXF.6YS6EN2CT7": {
                    "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                    "rateCode": sku + ".JRTCKXETXF.6YS6EN2CT7",
                    "description": "$%s per On Demand %s %s Instance Hour" % (usd, os_, itype),
                    "pricePerUnit": {"USD": usd}}}}}}}


PRODUCTS = [
    _product("m5.large", "0.0960000000"), _product("m5.xlarge", "0.1920000000"),
    _product("g4dn.xlarge", "0.5260000000"),
    # what the filters must leave out
    _product("g4dn.xlarge", "0.8200000000", os_="Windows"),
    _product("g4dn.xlarge", "0.0000000000", capacity="UnusedCapacityReservation"),
    _product("g4dn.xlarge", "0.5870000000", region="eu-west-1"),
]


class Pricing:
    def __init__(self, keys):
        """keys: access key -> (secret key, session token or None)."""
        self.keys = keys
        self.lock = threading.Lock()
        self.calls = 0
        self.tokens = {}

    def _verify(self, headers, body):
        verify(self.keys, headers, body, "pricing", "us-east-1")

    @staticmethod
    def _bad(message):
        return Refused(400, "InvalidParameterException", message)

    def _request(self, body):
        req = request_fields(body, ("ServiceCode", "Filters", "FormatVersion", "NextToken", "MaxResults"))
        if req.get("ServiceCode") != "AmazonEC2":
            raise self._bad("Input ServiceCode %s is not valid." % req.get("ServiceCode"))
        if req.get("FormatVersion", "aws_v1") != "aws_v1":
            raise self._bad("Input FormatVersion is not valid.")
        size = req.get("MaxResults", 100)
        if not isinstance(size, int) or not 1 <= size <= 100:
            raise self._bad("MaxResults must be between 1 and 100.")
        filters = req.get("Filters", [])
        if not isinstance(filters, list):
            raise Refused(400, "SerializationException", "Filters must be a list.")
        for f in filters:
            if (not isinstance(f, dict) or set(f) != {"Type", "Field", "Value"} or f["Type"] != "TERM_MATCH"
                    or f["Field"] not in FIELDS or not isinstance(f["Value"], str)):
                raise self._bad("Input Filters is not valid: %s" % json.dumps(f))
        return req, filters, min(size, PAGE_MAX)

    def get_products(self, headers, body):
        """(status, JSON text) of one call."""
        try:
            if check_request(headers, "AWSPriceListService") != "GetProducts":
                raise Refused(400, "UnknownOperationException", "")
            self._verify(headers, body)
            req, filters, size = self._request(body)
            match = [p for p in PRODUCTS
                     if all(p["product"]["attributes"].get(f["Field"]) == f["Value"] for f in filters)]
            start = 0
            with self.lock:
                self.calls += 1
                if "NextToken" in req:
                    start = self.tokens.get(req["NextToken"], -1)
                    if start < 0:
                        raise self._bad("Invalid NextToken.")
                reply = {"FormatVersion": "aws_v1",
                         "PriceList": [json.dumps(p) for p in match[start:start + size]]}
                if start + size < len(match):
                    tok = hashlib.sha256(("%d/%d" % (start + size, len(self.tokens))).encode()).hexdigest()
                    self.tokens[tok] = start + size
                    reply["NextToken"] = tok
            return 200, json.dumps(reply)
        except Refused as e:
            return e.status, error_body("com.amazonaws.pricing", e)
