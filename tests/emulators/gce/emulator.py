#!/usr/bin/env python3
"""emulator.py - a strict Compute Engine (compute v1) and OAuth token
emulator for pbx's tests, on 127.0.0.1 only.  See README.md here.

    python3 emulator.py --port 0 --port-file F --state-dir D [--project P]
        [--zones Z1,Z2] [--network-block 127.0.70.0/24] [--nat-block 127.0.71.0/24]
        [--node-body-helper PATH | --no-bodies] [--ssh-port 22] [--metadata-port 80]
        [--preempt-notice 30] [--create-accounts]
        [--service-account KEY.json] [--authorized-user ADC.json] [--token-lifetime S]
        [--static-token TOKEN] [--fault KEY=JSON]... [--seed N] [--wait-max S] [--log FILE]
        [--bucket NAME]...

Cloud Storage's JSON API (storage.py) lives under /storage/v1/,
/upload/storage/v1/ and /download/storage/v1/ (buckets from --bucket).
Compute Engine paths live under /compute/v1/ (several calls at once as a
multipart batch at /batch/compute/v1), the Cloud Billing Catalog API's
Compute Engine SKUs at /v1/services/6F81-5844-456A/skus (billing.py), the token endpoint at /token, and the control endpoint (faults, state, call counts, tokens,
guest shutdowns and preemptions) under /_emulator/, answered only to
loopback clients.
"""

import argparse
import base64
import ipaddress
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import batch  # noqa: E402
from billing import Billing  # noqa: E402
import catalog  # noqa: E402
import errors  # noqa: E402
import filters  # noqa: E402
import images  # noqa: E402
import resources  # noqa: E402
import schema  # noqa: E402
import storage  # noqa: E402
import validate  # noqa: E402
from auth import Auth  # noqa: E402
from bodies import Bodies, GceBodyMetadata  # noqa: E402
from vms import GceFlavour, VMs  # noqa: E402
from errors import ApiError, OAuthError, already_exists, invalid_field, invalid_payload, not_found  # noqa: E402
from faults import Faults  # noqa: E402
from world import World  # noqa: E402

SYSTEM_PARAMS = {"alt", "fields", "prettyPrint", "key", "quotaUser", "userIp", "oauth_token",
                 "callback", "$.xgafv", "upload_protocol", "uploadType", "trace"}
LIST_PARAMS = {"filter", "maxResults", "orderBy", "pageToken", "returnPartialSuccess"}

# (method, path regex, handler name, extra query parameters)
ROUTES = [
    ("GET", r"projects/(?P<p>[^/]+)", "project_get", set()),
    ("GET", r"projects/(?P<p>[^/]+)/zones", "zones_list", LIST_PARAMS),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)", "zone_get", set()),
    ("GET", r"projects/(?P<p>[^/]+)/regions", "regions_list", LIST_PARAMS),
    ("GET", r"projects/(?P<p>[^/]+)/regions/(?P<r>[^/]+)", "region_get", set()),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/machineTypes", "machine_types_list", LIST_PARAMS),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/machineTypes/(?P<n>[^/]+)", "machine_type_get", set()),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/acceleratorTypes", "accelerator_types_list", LIST_PARAMS),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/acceleratorTypes/(?P<n>[^/]+)", "accelerator_type_get", set()),
    ("GET", r"projects/(?P<p>[^/]+)/global/networks/(?P<n>[^/]+)", "network_get", set()),
    ("POST", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/instances/bulkInsert", "instances_bulk_insert", {"requestId"}),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/instances", "instances_list", LIST_PARAMS),
    ("POST", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/instances", "instances_insert",
     {"requestId", "sourceInstanceTemplate", "sourceMachineImage"}),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/instances/(?P<n>[^/]+)", "instances_get", {"view"}),
    ("DELETE", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/instances/(?P<n>[^/]+)", "instances_delete", {"requestId"}),
    ("POST", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/instances/(?P<n>[^/]+)/stop", "instances_stop",
     {"requestId", "discardLocalSsd"}),
    ("POST", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/instances/(?P<n>[^/]+)/start", "instances_start",
     {"requestId"}),
    ("GET", r"projects/(?P<p>[^/]+)/global/images", "images_list", LIST_PARAMS),
    ("POST", r"projects/(?P<p>[^/]+)/global/images", "images_insert", {"requestId", "forceCreate"}),
    ("GET", r"projects/(?P<p>[^/]+)/global/images/(?P<n>[^/]+)", "images_get", set()),
    ("DELETE", r"projects/(?P<p>[^/]+)/global/images/(?P<n>[^/]+)", "images_delete", {"requestId"}),
    ("GET", r"projects/(?P<p>[^/]+)/aggregated/instances", "instances_aggregated",
     LIST_PARAMS | {"includeAllScopes", "serviceProjectNumber"}),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/operations", "zone_ops_list", LIST_PARAMS),
    ("GET", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/operations/(?P<n>[^/]+)", "zone_op_get", set()),
    ("POST", r"projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/operations/(?P<n>[^/]+)/wait", "zone_op_wait", set()),
    ("GET", r"projects/(?P<p>[^/]+)/global/operations", "global_ops_list", LIST_PARAMS),
    ("GET", r"projects/(?P<p>[^/]+)/global/operations/(?P<n>[^/]+)", "global_op_get", set()),
    ("POST", r"projects/(?P<p>[^/]+)/global/operations/(?P<n>[^/]+)/wait", "global_op_wait", set()),
    ("GET", r"projects/(?P<p>[^/]+)/global/firewalls", "firewalls_list", LIST_PARAMS),
    ("POST", r"projects/(?P<p>[^/]+)/global/firewalls", "firewalls_insert", {"requestId"}),
    ("GET", r"projects/(?P<p>[^/]+)/global/firewalls/(?P<n>[^/]+)", "firewalls_get", set()),
    ("DELETE", r"projects/(?P<p>[^/]+)/global/firewalls/(?P<n>[^/]+)", "firewalls_delete", {"requestId"}),
    ("GET", r"projects/(?P<p>[^/]+)/regions/(?P<r>[^/]+)/operations/(?P<n>[^/]+)", "region_op_get", set()),
    ("POST", r"projects/(?P<p>[^/]+)/regions/(?P<r>[^/]+)/operations/(?P<n>[^/]+)/wait", "region_op_wait", set()),
    ("GET", r"projects/(?P<p>[^/]+)/regions/(?P<r>[^/]+)/routers", "routers_list", LIST_PARAMS),
    ("POST", r"projects/(?P<p>[^/]+)/regions/(?P<r>[^/]+)/routers", "routers_insert", {"requestId"}),
    ("GET", r"projects/(?P<p>[^/]+)/regions/(?P<r>[^/]+)/routers/(?P<n>[^/]+)", "routers_get", set()),
    ("DELETE", r"projects/(?P<p>[^/]+)/regions/(?P<r>[^/]+)/routers/(?P<n>[^/]+)", "routers_delete", {"requestId"}),
]
ROUTES = [(m, re.compile(rx + r"\Z"), h, q) for m, rx, h, q in ROUTES]
MUTATING = {"instances_insert", "instances_bulk_insert", "instances_delete", "firewalls_insert",
            "firewalls_delete", "routers_insert", "routers_delete", "instances_stop", "instances_start",
            "images_insert", "images_delete"}


class Compute:
    """The compute v1 handlers: each takes (params, query, body, principal)
    and returns (HTTP status, JSON value)."""

    def __init__(self, world, wait_max):
        self.w = world
        self.wait_max = wait_max

    # ------------------------------------------------------------ helpers

    def _project(self, p):
        if p not in self.w.projects:
            raise not_found("projects/%s" % p)

    def _zone(self, p, z):
        self._project(p)
        if z not in self.w.zones:
            raise not_found("projects/%s/zones/%s" % (p, z))

    def _region(self, p, r):
        self._project(p)
        if r not in {catalog.region_of(z) for z in self.w.zones}:
            raise not_found("projects/%s/regions/%s" % (p, r))

    def _op_reply(self, op):
        return 200, dict(op.res)

    def _list(self, kind, ident, items, q, key=lambda r: r["name"]):
        """A compute#...List page of ITEMS (dicts) after filter, order and paging."""
        items = self._filtered(items, q)
        order = q.get("orderBy")
        if order not in (None, "name", "creationTimestamp", "creationTimestamp desc"):
            raise invalid_field("orderBy", order, "Sorting by this field is not supported.")
        if order and order.startswith("creationTimestamp"):
            items.sort(key=lambda r: (r.get("creationTimestamp") or "", r["name"]),
                       reverse=order.endswith("desc"))
            keyf = lambda r: (r.get("creationTimestamp") or "", r["name"])  # noqa: E731
        else:
            items.sort(key=key)
            keyf = key
        page, token = self._page(items, q, keyf)
        out = {"kind": kind, "id": ident, "selfLink": self.w.base + ident}
        if page:
            out["items"] = page
        if token:
            out["nextPageToken"] = token
        return 200, out

    def _filtered(self, items, q):
        text = q.get("filter")
        if not text:
            return list(items)
        try:
            pred = filters.parse(text)
        except ValueError:
            raise invalid_field("filter", text, "Invalid list filter expression.")
        return [r for r in items if pred(r)]

    def _page(self, items, q, keyf):
        n = q.get("maxResults", "500")
        if not re.match(r"[0-9]+\Z", n) or int(n) > 500:
            raise invalid_field("maxResults", n, "Must be less than or equal to 500")
        n = int(n) or 500
        ctx = "%s|%s" % (q.get("filter", ""), q.get("orderBy", ""))
        start = 0
        if q.get("pageToken"):
            try:
                t = q["pageToken"]
                tok = json.loads(base64.urlsafe_b64decode((t + "=" * (-len(t) % 4)).encode()))
                assert tok["c"] == ctx
                after = tok["a"] if isinstance(tok["a"], str) else tuple(tok["a"])
            except Exception:
                raise invalid_field("pageToken", q["pageToken"], "Invalid page token.")
            while start < len(items) and not keyf(items[start]) > after:
                start += 1
            if q.get("orderBy", "").endswith("desc"):
                start = 0
                while start < len(items) and not keyf(items[start]) < after:
                    start += 1
        page = items[start:start + n]
        token = None
        if start + n < len(items):
            last = keyf(page[-1])
            token = base64.urlsafe_b64encode(json.dumps({"a": last, "c": ctx}).encode()).decode().rstrip("=")
        return page, token

    def _body(self, body, message, where):
        if body is None:
            raise invalid_field("resource", "", "Required field 'resource' not specified")
        schema.check(message, body, where)
        return body

    # ----------------------------------------------------------- catalogue

    def project_get(self, a, q, body, who):
        self._project(a["p"])
        return 200, resources.project(self.w, a["p"])

    def zones_list(self, a, q, body, who):
        self._project(a["p"])
        return self._list("compute#zoneList", "projects/%s/zones" % a["p"],
                          [resources.zone(self.w, a["p"], z) for z in self.w.zones], q)

    def zone_get(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        return 200, resources.zone(self.w, a["p"], a["z"])

    def regions_list(self, a, q, body, who):
        self._project(a["p"])
        regions = sorted({catalog.region_of(z) for z in self.w.zones})
        return self._list("compute#regionList", "projects/%s/regions" % a["p"],
                          [resources.region(self.w, a["p"], r) for r in regions], q)

    def region_get(self, a, q, body, who):
        self._project(a["p"])
        if a["r"] not in {catalog.region_of(z) for z in self.w.zones}:
            raise not_found("projects/%s/regions/%s" % (a["p"], a["r"]))
        return 200, resources.region(self.w, a["p"], a["r"])

    def machine_types_list(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        return self._list("compute#machineTypeList", "projects/%s/zones/%s/machineTypes" % (a["p"], a["z"]),
                          [resources.machine_type(self.w, a["p"], a["z"], t) for t in catalog.MACHINE_TYPES], q)

    def machine_type_get(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        if a["n"] not in catalog.MACHINE_TYPES:
            raise not_found("projects/%s/zones/%s/machineTypes/%s" % (a["p"], a["z"], a["n"]))
        return 200, resources.machine_type(self.w, a["p"], a["z"], a["n"])

    def accelerator_types_list(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        return self._list("compute#acceleratorTypeList",
                          "projects/%s/zones/%s/acceleratorTypes" % (a["p"], a["z"]),
                          [resources.accelerator_type(self.w, a["p"], a["z"], t)
                           for t in catalog.ACCELERATOR_TYPES], q)

    def accelerator_type_get(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        if a["n"] not in catalog.ACCELERATOR_TYPES:
            raise not_found("projects/%s/zones/%s/acceleratorTypes/%s" % (a["p"], a["z"], a["n"]))
        return 200, resources.accelerator_type(self.w, a["p"], a["z"], a["n"])

    def network_get(self, a, q, body, who):
        self._project(a["p"])
        if a["n"] not in self.w.networks:
            raise not_found("projects/%s/global/networks/%s" % (a["p"], a["n"]))
        return 200, resources.network(self.w, a["p"], a["n"])

    # ----------------------------------------------------------- instances

    def instances_insert(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        if q.get("sourceInstanceTemplate"):
            raise not_found(validate.strip_host(q["sourceInstanceTemplate"], self.w.base))
        if q.get("sourceMachineImage"):
            raise not_found(validate.strip_host(q["sourceMachineImage"], self.w.base))
        body = self._body(body, "Instance", "instance_resource")
        res, spec = resources.instance(self.w, a["p"], a["z"], body)
        self._source_image(a["p"], body, spec)
        return self._op_reply(self.w.insert(a["p"], a["z"], res, spec, who, rid))

    def instances_bulk_insert(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        body = self._body(body, "BulkInsertInstanceResource", "bulk_insert_instance_resource")
        count, min_count, pattern, names = validate.bulk(body)
        props = body["instanceProperties"]
        probe = "a" if names is None else names[0]
        # Check the properties once now (400 before any operation), then per name.
        _, probe_spec = resources.instance(self.w, a["p"], a["z"], dict(props, name=probe),
                                           prefix="resource.instanceProperties", bare_types=True)
        self._source_image(a["p"], props, probe_spec)
        per = body.get("perInstanceProperties") or {}

        def make(name):
            b = dict(props, name=name)
            if (per.get(name) or {}).get("hostname"):
                b["hostname"] = per[name]["hostname"]
            res, spec = resources.instance(self.w, a["p"], a["z"], b, prefix="resource.instanceProperties",
                                           bare_types=True)
            spec["image"] = probe_spec.get("image")
            return res, spec
        return self._op_reply(self.w.bulk_insert(a["p"], a["z"], (count, min_count, pattern, names, make),
                                                 who, rid))

    def instances_get(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        return 200, self.w.find_instance(a["p"], a["z"], a["n"]).res

    def instances_list(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        return self._list("compute#instanceList", "projects/%s/zones/%s/instances" % (a["p"], a["z"]),
                          [i.res for i in self.w.visible_instances(a["p"], a["z"])], q)

    def instances_aggregated(self, a, q, body, who):
        self._project(a["p"])
        every = [dict(i.res, _scope="zones/" + i.zone) for i in self.w.visible_instances(a["p"])]
        status, page = self._list("compute#instanceAggregatedList", "projects/%s/aggregated/instances" % a["p"],
                                  every, q, key=lambda r: (r["_scope"], r["name"]))
        items = {"zones/" + z: {"warning": {"code": "NO_RESULTS_ON_PAGE",
                                            "message": "There are no results for scope 'zones/%s' on this page." % z,
                                            "data": [{"key": "scope", "value": "zones/" + z}]}}
                 for z in self.w.zones}
        for r in page.pop("items", []):
            scope = r.pop("_scope")
            items.setdefault(scope, {}).pop("warning", None)
            items[scope].setdefault("instances", []).append(r)
        page["items"] = items
        return status, page

    def _source_image(self, project, body, spec):
        """404/400 for a boot image of one of our projects that does not
        exist or is not READY; spec["image"] is its record (None: an image
        of another project, e.g. debian-cloud's)."""
        src = ((body.get("disks") or [{}])[0].get("initializeParams") or {}).get("sourceImage")
        spec["image"] = images.resolve(self.w, project, src) if src else None

    def instances_stop(self, a, q, body, who):
        return self._power(a, q, body, who, False)

    def instances_start(self, a, q, body, who):
        return self._power(a, q, body, who, True)

    def _power(self, a, q, body, who, on):
        self._zone(a["p"], a["z"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        if q.get("discardLocalSsd") not in (None, "true", "false"):
            raise invalid_payload("Invalid value at 'discard_local_ssd' (TYPE_BOOL), \"%s\"" % q["discardLocalSsd"])
        return self._op_reply(self.w.power(a["p"], a["z"], a["n"], on, who, rid))

    # -------------------------------------------------------------- images

    def images_insert(self, a, q, body, who):
        self._project(a["p"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        force = images.force_create(q.get("forceCreate"))
        body = self._body(body, "Image", "image_resource")
        res, inst = images.image(self.w, a["p"], body, force)
        return self._op_reply(self.w.image_insert(a["p"], res, inst, who, rid))

    def images_get(self, a, q, body, who):
        self._project(a["p"])
        res = self.w.images.get((a["p"], a["n"]))
        if res is None:
            raise not_found("projects/%s/global/images/%s" % (a["p"], a["n"]))
        return 200, resources.public(res)

    def images_list(self, a, q, body, who):
        self._project(a["p"])
        return self._list("compute#imageList", "projects/%s/global/images" % a["p"],
                          [resources.public(r) for (p, _), r in self.w.images.items() if p == a["p"]], q)

    def images_delete(self, a, q, body, who):
        self._project(a["p"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        return self._op_reply(self.w.image_delete(a["p"], a["n"], who, rid))

    def instances_delete(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        return self._op_reply(self.w.delete(a["p"], a["z"], a["n"], who, rid))

    # ---------------------------------------------------------- operations

    def zone_ops_list(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        return self._list("compute#operationList", "projects/%s/zones/%s/operations" % (a["p"], a["z"]),
                          [dict(op.res) for (p, scope, _), op in list(self.w.ops.items())
                           if p == a["p"] and scope == "zones/" + a["z"]], q)

    def zone_op_get(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        return 200, dict(self.w.get_op(a["p"], "zones/" + a["z"], a["n"]).res)

    def zone_op_wait(self, a, q, body, who):
        self._zone(a["p"], a["z"])
        return 200, ("wait", self.w.get_op(a["p"], "zones/" + a["z"], a["n"]))

    def global_ops_list(self, a, q, body, who):
        self._project(a["p"])
        return self._list("compute#operationList", "projects/%s/global/operations" % a["p"],
                          [dict(op.res) for (p, scope, _), op in list(self.w.ops.items())
                           if p == a["p"] and scope == "global"], q)

    def global_op_get(self, a, q, body, who):
        self._project(a["p"])
        return 200, dict(self.w.get_op(a["p"], "global", a["n"]).res)

    def global_op_wait(self, a, q, body, who):
        self._project(a["p"])
        return 200, ("wait", self.w.get_op(a["p"], "global", a["n"]))

    # ----------------------------------------------------------- firewalls

    def firewalls_list(self, a, q, body, who):
        self._project(a["p"])
        return self._list("compute#firewallList", "projects/%s/global/firewalls" % a["p"],
                          [f for (p, _), f in self.w.firewalls.items() if p == a["p"] and f], q)

    def firewalls_get(self, a, q, body, who):
        self._project(a["p"])
        f = self.w.firewalls.get((a["p"], a["n"]))
        if not f:
            raise not_found("projects/%s/global/firewalls/%s" % (a["p"], a["n"]))
        return 200, f

    def firewalls_insert(self, a, q, body, who):
        self._project(a["p"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        body = self._body(body, "Firewall", "firewall_resource")
        res = resources.firewall(self.w, a["p"], body)
        return self._op_reply(self.w.firewall_insert(a["p"], res, who, rid))

    def firewalls_delete(self, a, q, body, who):
        self._project(a["p"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        return self._op_reply(self.w.firewall_delete(a["p"], a["n"], who, rid))


    # ------------------------------------------------------------- routers

    def region_op_get(self, a, q, body, who):
        self._region(a["p"], a["r"])
        return 200, dict(self.w.get_op(a["p"], "regions/" + a["r"], a["n"]).res)

    def region_op_wait(self, a, q, body, who):
        self._region(a["p"], a["r"])
        return 200, ("wait", self.w.get_op(a["p"], "regions/" + a["r"], a["n"]))

    def routers_list(self, a, q, body, who):
        self._region(a["p"], a["r"])
        return self._list("compute#routerList", "projects/%s/regions/%s/routers" % (a["p"], a["r"]),
                          [resources.public(r) for (p, reg, _), r in self.w.routers.items()
                           if p == a["p"] and reg == a["r"] and r], q)

    def routers_get(self, a, q, body, who):
        self._region(a["p"], a["r"])
        r = self.w.routers.get((a["p"], a["r"], a["n"]))
        if not r:
            raise not_found("projects/%s/regions/%s/routers/%s" % (a["p"], a["r"], a["n"]))
        return 200, resources.public(r)

    def routers_insert(self, a, q, body, who):
        self._region(a["p"], a["r"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        body = self._body(body, "Router", "router_resource")
        if (a["p"], a["r"], body.get("name")) in self.w.routers:
            raise already_exists("projects/%s/regions/%s/routers/%s" % (a["p"], a["r"], body["name"]))
        res = resources.router(self.w, a["p"], a["r"], body)
        return self._op_reply(self.w.router_insert(a["p"], a["r"], res, who, rid))

    def routers_delete(self, a, q, body, who):
        self._region(a["p"], a["r"])
        rid = validate.request_id(q.get("requestId"))
        op = self.w.replay(a["p"], rid)
        if op:
            return self._op_reply(op)
        return self._op_reply(self.w.router_delete(a["p"], a["r"], a["n"], who, rid))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ESF"
    sys_version = ""
    app = None                           # set by main(): the App

    def log_message(self, fmt, *args):
        if self.app.log:
            self.app.log.write("%s %s\n" % (time.strftime("%H:%M:%S"), fmt % args))
            self.app.log.flush()

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_DELETE(self):
        self._serve("DELETE")

    def do_PUT(self):
        self._serve("PUT")

    def do_PATCH(self):
        self._serve("PATCH")

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass                # trailers
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, code, value, headers=None):
        self._send_raw(code, "application/json; charset=UTF-8", (json.dumps(value, indent=1) + "\n").encode(),
                       headers)

    def _send_raw(self, code, ctype, data, headers=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _serve(self, method):
        host = self.headers.get("Host", "").split(":")[0]
        if host in GceFlavour.api_paths and not self.path.startswith(GceFlavour.api_paths[host]):
            # a VM came in by a Google API's name (vms.py): that API only,
            # not another one nor this emulator's controls
            self._read_body()
            return self._send(404, ApiError(404, "notFound", "The requested URL %s was not found on this server."
                                            % urllib.parse.urlsplit(self.path).path).body())
        if self.path.startswith(storage.PREFIXES):  # reads and streams its own bodies
            return self.app.storage.serve(self, method)
        try:
            raw = self._read_body()
            url = urllib.parse.urlsplit(self.path)
            if not ipaddress.ip_address(self.client_address[0]).is_loopback:
                return self._send(403, errors.ApiError(403, "forbidden", "loopback clients only").body())
            if url.path.startswith("/_emulator/"):
                return self._send(*self.app.control(method, url.path[len("/_emulator/"):], raw, url.query))
            if url.path == "/token" and method == "POST":
                try:
                    return self._send(200, self.app.auth.token(self.headers.get("Content-Type", ""), raw))
                except OAuthError as e:
                    return self._send(e.code, e.body())
            if url.path.startswith("/v1/services/") and method == "GET":
                return self._send(*self.app.billing.skus(url.path[len("/v1/"):],
                                                         urllib.parse.parse_qsl(url.query, keep_blank_values=True),
                                                         self.headers.get("Authorization")))
            if url.path.startswith("/compute/v1/"):
                return self._send(*self.compute(method, url.path[len("/compute/v1/"):], url.query, raw,
                                                self.headers.get("Authorization")))
            if url.path == "/batch/compute/v1" and method == "POST":
                self.app.count(method, "batch")
                ctype, data = batch.answer(self, self.headers.get("Content-Type", ""), raw)
                return self._send_raw(200, ctype, data)
            raise ApiError(404, "notFound", "The requested URL %s was not found on this server." % url.path)
        except ApiError as e:
            self._send(e.code, e.body(), e.headers)
        except BrokenPipeError:
            pass
        except Exception:                   # an emulator bug: say so, loudly
            traceback.print_exc()
            self._send(500, ApiError(500, "backendError", "emulator bug: %s" % traceback.format_exc(limit=1)).body())

    def compute(self, method, path, query, raw, authorization):
        """(status, JSON) of one compute call; raises ApiError."""
        app = self.app
        path = urllib.parse.unquote(path)
        for m, rx, name, allowed in ROUTES:
            match = rx.match(path)
            if match and m == method:
                break
        else:
            app.count(method, "unknown")
            raise ApiError(404, "notFound", "The requested URL /compute/v1/%s was not found on this server." % path)
        app.count(method, name)
        q = {}
        for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
            if k not in SYSTEM_PARAMS and k not in allowed:
                raise invalid_payload("Unknown name \"%s\": Cannot bind query parameter. Field '%s' could "
                                      "not be found in request message." % (k, k))
            q[k] = v
        if q.get("alt", "json") != "json":
            raise invalid_field("alt", q["alt"], "Only alt=json is supported.")
        who = app.auth.check(authorization)
        refusal = app.faults.refusal()
        if refusal == "throttle":
            app.count(method, "throttled")
            raise errors.rate_limited_429(app.world.projects.get(match.group("p"), "0")) \
                if app.faults.coin() else errors.rate_limited_403()
        if refusal == "unavailable":
            app.count(method, "unavailable")
            raise errors.backend_error()
        body = None
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError as e:
                raise invalid_payload("Unexpected token.\n%s" % e)
        with app.world.lock:
            code, value = getattr(app.compute, name)(match.groupdict(), q, body, who)
        if isinstance(value, tuple) and value[0] == "wait":
            value = app.world.wait_op(value[1], app.wait_max)
        if name in MUTATING and app.faults.chance("lost_reply"):
            app.count(method, "lost_reply")
            raise errors.backend_error()
        return code, value


class App:
    def _metadata_token(self, email, scopes):
        """What a body's metadata server answers for a service account the
        instance runs as: a token for that account with the instance's
        scopes (counted by account in /_emulator/calls' metadata_tokens)."""
        token, life = self.auth.mint(scopes, principal=email)
        with self.calls_lock:
            self.metadata_tokens[email] += 1
        return {"access_token": token, "expires_in": max(int(life) - 1, 0), "token_type": "Bearer"}

    def __init__(self, args, base, token_url):
        self.faults = Faults(args.seed)
        self.faults.update(dict(args.fault))
        bodies = None
        if args.backend == "vm":
            # the projects' names now (the VMs' DNS search domains,
            # c.PROJECT.internal, are set when their network starts); their
            # numbers once the world has made them
            bodies = VMs(args.vm_image, args.state_dir, args.ssh_port, args.network_block,
                         upstream=args.vm_upstream, proxy=args.vm_proxy, mem_mb=args.vm_memory,
                         api=urllib.parse.urlsplit(base).netloc,
                         projects=dict.fromkeys(args.project, "0"))
        elif not args.no_bodies:
            meta = GceBodyMetadata(args.metadata_port) if args.metadata_port else None
            bodies = Bodies(args.node_body_helper, args.state_dir, args.ssh_port, args.create_accounts,
                            metadata=meta, internal_dns=True)
        try:
            self.world = World(args.project, args.zones, self.faults, bodies, args.network_block,
                               args.nat_block, base)
        except Exception:
            if bodies is not None and hasattr(bodies, "close"):
                bodies.close()
            raise
        if args.backend == "vm":
            bodies.projects = dict(self.world.projects)
        elif bodies is not None and bodies.metadata is not None:
            bodies.metadata.flavour.projects = dict(self.world.projects)
        self.preempt_notice = args.preempt_notice
        self.compute = Compute(self.world, args.wait_max)
        self.wait_max = args.wait_max
        self.auth = Auth(args.token_lifetime, token_url)
        # instances.insert attaches only service accounts the project has
        self.world.service_account_known = lambda email: email in self.auth.accounts
        for f in args.service_account:
            self.auth.add_service_account_file(f)
        for f in args.authorized_user:
            self.auth.add_authorized_user_file(f)
        for t in args.static_token:
            with self.auth.lock:
                self.auth.tokens[t] = (float("inf"), ("https://www.googleapis.com/auth/cloud-platform",), "static")
        if args.backend != "vm" and bodies is not None and bodies.metadata is not None:
            bodies.metadata.mint = self._metadata_token
        self.billing = Billing(self.auth)
        self.storage = storage.Storage(self.auth, self.faults, os.path.join(args.state_dir, "storage"),
                                       args.bucket, base[:base.index("/compute/v1/")])
        self.calls = Counter()
        self.metadata_tokens = Counter()
        self.calls_lock = threading.Lock()
        self.log = open(args.log, "a") if args.log else None
        self.server = None

    def count(self, method, name):
        with self.calls_lock:
            self.calls["%s %s" % (method, name)] += 1

    def control(self, method, what, raw, query=""):
        """(status, JSON) for /_emulator/WHAT; QUERY's parameters stand in
        for a JSON body's fields."""
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            return 400, {"error": "bad JSON: %s" % e}
        if not isinstance(body, dict):
            return 400, {"error": "the body must be a JSON object"}
        body = dict(urllib.parse.parse_qsl(query), **body)
        try:
            if method == "GET" and what == "state":
                return 200, self.state()
            if method == "GET" and what == "calls":
                with self.calls_lock:
                    return 200, {"calls": dict(self.calls), "total": sum(
                        v for k, v in self.calls.items() if not k.endswith((" throttled", " unavailable",
                                                                           " lost_reply"))),
                        "token_grants": self.auth.grants,
                        "metadata_tokens": dict(self.metadata_tokens),
                        "storage": self.storage.snapshot()["calls"]}
            if method == "POST" and what == "calls/reset":
                with self.calls_lock:
                    self.calls.clear()
                with self.storage.lock:
                    self.storage.counts.clear()
                    self.storage.principals.clear()
                return 200, {}
            if method == "GET" and what == "storage":
                return 200, self.storage.snapshot()
            if method == "GET" and what == "billing":
                return 200, self.billing.snapshot()
            if method == "POST" and what == "billing":
                return 200, self.billing.set_mode(body.get("mode", "ok"))
            if method == "GET" and what == "faults":
                return 200, self.faults.snapshot()
            if method == "POST" and what == "faults":
                self.faults.update(body)
                return 200, self.faults.snapshot()
            if method == "POST" and what == "metadata-token":   # a VM's metadata server asks
                if body.get("email") not in self.auth.accounts or not isinstance(body.get("scopes"), list):
                    raise ValueError("no service account %r, or no scopes" % body.get("email"))
                return 200, self._metadata_token(body["email"], body["scopes"])
            if method == "POST" and what == "token":
                token, life = self.auth.mint(body.get("scopes", ["https://www.googleapis.com/auth/cloud-platform"]),
                                             body.get("lifetime"))
                return 200, {"access_token": token, "expires_in": life}
            if method == "POST" and what == "auth":
                if "token_lifetime" in body:
                    self.auth.lifetime = float(body["token_lifetime"])
                return 200, {"token_lifetime": self.auth.lifetime}
            if method == "POST" and what == "service-accounts":
                if "key_file" in body:
                    self.auth.add_service_account_file(body["key_file"])
                else:
                    self.auth.add_service_account_pem(body["client_email"], body["public_key_pem"])
                return 200, {}
            if method == "POST" and what == "authorized-users":
                self.auth.add_authorized_user(body["client_id"], body["client_secret"], body["refresh_token"])
                return 200, {}
            if method == "POST" and what in ("guest-shutdown", "preempt"):
                return 200, self.system_stop(what, body)
            if method == "POST" and what == "shutdown":
                threading.Thread(target=self.stop, daemon=True).start()
                return 200, {}
        except (ValueError, KeyError, TypeError, OSError) as e:
            return 400, {"error": str(e)}
        return 404, {"error": "no control endpoint %s %s" % (method, what)}

    def system_stop(self, what, body):
        """POST guest-shutdown or preempt {"instance": NAME, "zone": Z,
        "project": P} (zone and project needed only when NAME is ambiguous;
        preempt also takes "notice", seconds, default --preempt-notice):
        the instance's guest powers off, or Compute Engine preempts it.
        Returns the system operation."""
        w = self.world
        name = body["instance"]
        with w.lock:
            keys = [k for k, i in w.instances.items() if k[2] == name and i.visible
                    and body.get("project", k[0]) == k[0] and body.get("zone", k[1]) == k[1]]
            if len(keys) != 1:
                raise ValueError("%s instance named %s (give zone and project)"
                                 % ("no" if not keys else "more than one", name))
            if what == "guest-shutdown":
                op = w.guest_shutdown(*keys[0])
            else:
                op = w.preempt(*keys[0], notice=body.get("notice", self.preempt_notice))
            return dict(op.res)

    def state(self):
        w = self.world
        with w.lock:
            insts = [{"project": i.project, "zone": i.zone, "name": i.name, "status": i.res["status"],
                      "id": i.res["id"], "labels": i.res.get("labels", {}),
                      "networkIP": i.res["networkInterfaces"][0]["networkIP"],
                      "natIP": ([ac.get("natIP") for ac in i.res["networkInterfaces"][0].get("accessConfigs", [])]
                                or [None])[0],
                      "body": i.body, "body_error": i.body_error, "preempted": i.preempted,
                      "serviceAccounts": i.res.get("serviceAccounts", []),
                      "creationTimestamp": i.res.get("creationTimestamp"),
                      "lastStartTimestamp": i.res.get("lastStartTimestamp"),
                      "lastStopTimestamp": i.res.get("lastStopTimestamp"),
                      "metadata_error": (w.bodies.metadata_error(i)
                                         if hasattr(w.bodies, "metadata_error") else None)}
                     for i in w.instances.values() if i.visible]
            fws = [f for f in w.firewalls.values() if f]
            routers = [resources.public(r) for r in w.routers.values() if r]
            imgs = [{"name": r["name"], "status": r["status"], "labels": r.get("labels", {}),
                     "sourceDisk": r["sourceDisk"], "dir": r.get("_dir")} for r in w.images.values()]
            return {"instances": insts, "firewalls": fws, "routers": routers, "images": imgs,
                    "operations": {"total": len(w.ops), "active": len(w.active)}}

    def stop(self):
        self.world.shutdown()
        if self.server:
            self.server.shutdown()


def _fault(text):
    k, sep, v = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError("--fault wants KEY=JSON, e.g. throttle=0.3")
    try:
        return k, json.loads(v)
    except ValueError:
        return k, v


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Strict Compute Engine emulator for pbx's tests (loopback only).")
    ap.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free port)")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--state-dir", required=True, help="where node bodies live")
    ap.add_argument("--project", action="append", default=[], help="a project that exists (repeatable)")
    ap.add_argument("--bucket", action="append", default=[],
                    help="a Cloud Storage bucket that exists, empty at start (repeatable)")
    ap.add_argument("--zones", default=",".join(catalog.DEFAULT_ZONES))
    ap.add_argument("--network-block", default="127.0.70.0/24", help="networkIP addresses (loopback)")
    ap.add_argument("--nat-block", default="127.0.71.0/24", help="natIP addresses (loopback)")
    ap.add_argument("--node-body-helper", help="pbx-node-body (built by CMake)")
    ap.add_argument("--no-bodies", action="store_true", help="instances become RUNNING without an sshd")
    ap.add_argument("--backend", choices=("body", "vm"), default="body",
                    help="what backs a RUNNING instance: a node body (default) or a booted VM (vms.py)")
    ap.add_argument("--vm-image", help="with --backend vm: a directory made by tests/vm/image.sh")
    ap.add_argument("--vm-memory", type=int, default=1024, help="MiB of memory per VM")
    ap.add_argument("--vm-upstream", default="deb.debian.org:80",
                    help="where the VMs' apt traffic goes (host:port; an apt cache, say)")
    ap.add_argument("--vm-proxy", help="a site's HTTP proxy (host:port, outside the VMs' network) that the "
                    "VMs reach at the gateway's port 3128: a template's proxy: http://GATEWAY:3128")
    ap.add_argument("--ssh-port", type=int, default=22, help="port of the node bodies' sshd")
    ap.add_argument("--metadata-port", type=int, default=80,
                    help="port of each node body's metadata server on its networkIP (0: none)")
    ap.add_argument("--preempt-notice", type=float, default=30.0,
                    help="seconds a preempted instance's guest has before its machine ends")
    ap.add_argument("--create-accounts", action="store_true",
                    help="create ssh-keys users with passwordless sudo, as Google's guest agent does")
    ap.add_argument("--service-account", action="append", default=[], help="service-account key file to accept")
    ap.add_argument("--authorized-user", action="append", default=[], help="authorized_user file to accept")
    ap.add_argument("--token-lifetime", type=float, default=3600.0, help="seconds an access token lives")
    ap.add_argument("--static-token", action="append", default=[], help="a bearer token that never expires")
    ap.add_argument("--fault", action="append", type=_fault, default=[], help="KEY=JSON (see faults.py)")
    ap.add_argument("--seed", type=int, default=1, help="seed for fault fractions")
    ap.add_argument("--wait-max", type=float, default=120.0, help="longest operations.wait, seconds")
    ap.add_argument("--log", help="append one line per request to this file")
    args = ap.parse_args(argv)
    args.project = args.project or ["pbx-test"]
    args.zones = [z for z in args.zones.split(",") if z]
    if args.backend == "vm":
        if not args.vm_image:
            ap.error("--backend vm needs --vm-image DIR")
        return args
    if not args.no_bodies and not args.node_body_helper:
        ap.error("--node-body-helper is needed unless --no-bodies")
    if not args.no_bodies and not os.access(args.node_body_helper, os.X_OK):
        ap.error("--node-body-helper %s is not an executable file" % args.node_body_helper)
    return args


def main(argv):
    args = parse_args(argv)
    # a listen backlog for many clients at once (socketserver's default 5
    # resets connections when a bench uploads 16 objects at a time)
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    base = "http://127.0.0.1:%d/compute/v1/" % port
    try:
        app = App(args, base, "http://127.0.0.1:%d/token" % port)
    except (ValueError, OSError, KeyError) as e:
        print("emulator: %s" % e, file=sys.stderr)
        return 2
    app.server = server
    Handler.app = app
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=app.stop, daemon=True).start())
    signal.signal(signal.SIGINT, lambda *_: threading.Thread(target=app.stop, daemon=True).start())
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        app.world.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
