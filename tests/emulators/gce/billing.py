"""billing.py - the Cloud Billing Catalog API's services.skus.list for the
Compute Engine service (GET /v1/services/6F81-5844-456A/skus), strict as
cloudbilling.googleapis.com is, serving a small fixture catalogue
(SKUS below; docs/cost.md says how pbx reads it).

Checks: a bearer token with the cloud-billing(.readonly) or
cloud-platform scope (401 without a valid one, 403 with another scope);
only the documented query parameters (400 INVALID_ARGUMENT for others);
currencyCode USD or EUR (EUR at EUR_PER_USD, rounded to the nano); pageSize
1..5000; a pageToken this emulator issued for the same currency.  Pages
hold at most PAGE_MAX SKUs whatever pageSize asks, so clients must follow
nextPageToken.  /_emulator/billing (emulator.py) sets a mode for the
tests: "ok", "malformed" (a reply that is no SKU list), "bad-price" (a
SKU pbx prices with no unitPrice), or "error" (HTTP 500)."""

import base64
import json
import threading

from errors import ApiError

SERVICE = "6F81-5844-456A"
SCOPES = ("https://www.googleapis.com/auth/cloud-billing",
          "https://www.googleapis.com/auth/cloud-billing.readonly",
          "https://www.googleapis.com/auth/cloud-platform")
PARAMS = {"currencyCode", "pageSize", "pageToken", "startTime", "endTime"}
PAGE_MAX = 4
EUR_PER_USD = (92, 100)
AMERICAS = ["us-central1", "us-east1", "us-west1"]


def _sku(n, desc, family, group, usage, regions, unit, usd_nanos):
    return {"name": "services/%s/skus/%04X-0000-%04X" % (SERVICE, n, n), "skuId": "%04X-0000-%04X" % (n, n),
            "description": desc,
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": family,
                         "resourceGroup": group, "usageType": usage},
            "serviceRegions": regions,
            "pricingInfo": [{"summary": "", "effectiveTime": "2024-05-01T00:00:00Z",
                             "currencyConversionRate": 1,
                             "pricingExpression": {
                                 "usageUnit": unit, "usageUnitDescription": unit, "baseUnit": "s",
                                 "baseUnitDescription": "second", "baseUnitConversionFactor": 3600,
                                 "displayQuantity": 1,
                                 "tieredRates": [{"startUsageAmount": 0,
                                                  "unitPrice": {"currencyCode": "USD",
                                                                "units": str(usd_nanos // 10**9),
                                                                "nanos": usd_nanos % 10**9}}]},
                             "aggregationInfo": {"aggregationLevel": "ACCOUNT",
                                                 "aggregationInterval": "DAILY", "aggregationCount": 1}}],
            "serviceProviderName": "Google"}


# The fixture: prices in nano-dollars chosen so sums are exact.
SKUS = [
    _sku(1, "N1 Predefined Instance Core running in Americas", "Compute", "N1Standard", "OnDemand",
         AMERICAS, "h", 30000000),
    _sku(2, "N1 Predefined Instance Ram running in Americas", "Compute", "N1Standard", "OnDemand",
         AMERICAS, "GiBy.h", 4000000),
    _sku(3, "Spot Preemptible N1 Predefined Instance Core running in Americas", "Compute", "N1Standard",
         "Preemptible", AMERICAS, "h", 6000000),
    _sku(4, "Spot Preemptible N1 Predefined Instance Ram running in Americas", "Compute", "N1Standard",
         "Preemptible", AMERICAS, "GiBy.h", 800000),
    _sku(5, "E2 Instance Core running in Americas", "Compute", "CPU", "OnDemand", AMERICAS, "h", 20000000),
    _sku(6, "E2 Instance Ram running in Americas", "Compute", "RAM", "OnDemand", AMERICAS, "GiBy.h", 2500000),
    _sku(7, "Spot Preemptible E2 Instance Core running in Americas", "Compute", "CPU", "Preemptible",
         AMERICAS, "h", 5000000),
    _sku(8, "Spot Preemptible E2 Instance Ram running in Americas", "Compute", "RAM", "Preemptible",
         AMERICAS, "GiBy.h", 600000),
    _sku(9, "Nvidia Tesla T4 GPU running in Americas", "Compute", "GPU", "OnDemand", AMERICAS, "h", 350000000),
    _sku(10, "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", "Compute", "GPU",
         "Preemptible", AMERICAS, "h", 140000000),
    _sku(11, "Nvidia L4 GPU running in Americas", "Compute", "GPU", "OnDemand", AMERICAS, "h", 560000000),
    # what pbx must not take: a commitment, another region, a custom type, a disk
    _sku(12, "Commitment v1: Cpu in Americas for 1 Year", "Compute", "CPU", "Commit1Yr", AMERICAS, "h",
         19000000),
    _sku(13, "N1 Predefined Instance Core running in EMEA", "Compute", "N1Standard", "OnDemand",
         ["europe-west4"], "h", 33000000),
    _sku(14, "Custom Instance Core running in Americas", "Compute", "CPU", "OnDemand", AMERICAS, "h", 33174000),
    _sku(15, "Storage PD Capacity", "Storage", "PDStandard", "OnDemand", AMERICAS, "GiBy.mo", 40000000),
]


class Billing:
    def __init__(self, auth):
        self.auth = auth
        self.lock = threading.Lock()
        self.mode = "ok"
        self.calls = 0

    def set_mode(self, mode):
        if mode not in ("ok", "malformed", "bad-price", "error"):
            raise ValueError("mode must be ok, malformed, bad-price or error")
        with self.lock:
            self.mode = mode
        return {"mode": mode, "calls": self.calls}

    def snapshot(self):
        with self.lock:
            return {"mode": self.mode, "calls": self.calls}

    @staticmethod
    def _bad(message):
        return ApiError(400, "badRequest", message, status="INVALID_ARGUMENT")

    def _query(self, params):
        for k, _ in params:
            if k not in PARAMS and k not in ("alt", "fields", "prettyPrint", "key", "quotaUser", "$.xgafv"):
                raise self._bad("Invalid JSON payload received. Unknown name \"%s\": Cannot bind query "
                                "parameter. Field '%s' could not be found in request message." % (k, k))
        q = dict(params)
        cur = q.get("currencyCode", "USD")
        if cur not in ("USD", "EUR"):
            raise self._bad("Currency code %s is not supported." % cur)
        try:
            size = int(q.get("pageSize", "5000"))
        except ValueError:
            raise self._bad("Invalid value at 'page_size' (TYPE_INT32), \"%s\"" % q["pageSize"])
        if not 1 <= size <= 5000:
            raise self._bad("Page size must be between 1 and 5000.")
        start = 0
        if "pageToken" in q:
            try:
                tok = json.loads(base64.urlsafe_b64decode(q["pageToken"].encode()))
                start, tcur = int(tok["o"]), tok["c"]
            except (ValueError, KeyError, TypeError):
                raise self._bad("Invalid page token.")
            if tcur != cur or not 0 < start < len(SKUS):
                raise self._bad("Invalid page token.")
        return cur, min(size, PAGE_MAX), start

    @staticmethod
    def _convert(sku, cur):
        if cur == "USD":
            return sku
        sku = json.loads(json.dumps(sku))
        for info in sku["pricingInfo"]:
            for rate in info["pricingExpression"]["tieredRates"]:
                p = rate["unitPrice"]
                n = (int(p["units"]) * 10**9 + p["nanos"]) * EUR_PER_USD[0] // EUR_PER_USD[1]
                rate["unitPrice"] = {"currencyCode": cur, "units": str(n // 10**9), "nanos": n % 10**9}
            info["currencyConversionRate"] = EUR_PER_USD[0] / EUR_PER_USD[1]
        return sku

    def skus(self, path, params, authorization):
        """(status, JSON) of GET /v1/PATH; raises ApiError."""
        if path != "services/%s/skus" % SERVICE:
            raise ApiError(404, "notFound", "Requested entity was not found.", status="NOT_FOUND")
        self.auth.check(authorization, SCOPES)
        cur, size, start = self._query(params)
        with self.lock:
            self.calls += 1
            mode = self.mode
        if mode == "error":
            raise ApiError(500, "backendError", "Internal error.", status="INTERNAL")
        if mode == "malformed":
            return 200, {"services": []}
        page = [self._convert(s, cur) for s in SKUS[start:start + size]]
        if mode == "bad-price":   # a copy: the fixture stays whole
            page[0] = json.loads(json.dumps(page[0]))
            del page[0]["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]
        reply = {"skus": page}
        if start + size < len(SKUS):
            reply["nextPageToken"] = base64.urlsafe_b64encode(
                json.dumps({"o": start + size, "c": cur}).encode()).decode()
        return 200, reply
