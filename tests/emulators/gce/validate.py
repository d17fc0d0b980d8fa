"""validate.py - what Compute Engine itself refuses in an insert, after the
JSON front end (schema.py) accepted the shape: names (RFC 1035), the form
of resource links (machineType and acceleratorType as zones/ZONE/...
partial URLs or full URLs in instances.insert, bare names in bulkInsert's
instanceProperties), GPUs without onHostMaintenance TERMINATE, Spot and
preemptible rules, labels, metadata, disks, network interfaces, firewall
rules and bulkInsert's count, minCount and namePattern.  Each check raises
ApiError 400 with reason "invalid" and the field named as Google names it
('resource.scheduling.onHostMaintenance').
"""

import ipaddress
import re
import uuid

import catalog
from errors import bad_request, invalid_field, not_found, resource_usage

NAME_RE = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?\Z")
NAME_RULE = "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'"
META_KEY_RE = re.compile(r"[a-zA-Z0-9_-]{1,128}\Z")
PORT_RE = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?\Z")
PROTOCOLS = ("tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all")
HOSTS = ("https://compute.googleapis.com/compute/v1/", "https://www.googleapis.com/compute/v1/")


def name(field, value):
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise invalid_field(field, value or "", NAME_RULE)


def request_id(value):
    """requestId: a UUID other than the zero UUID."""
    if value is None:
        return None
    try:
        u = uuid.UUID(value)
        ok = u.int != 0 and len(value) == 36
    except ValueError:
        ok = False
    if not ok:
        raise invalid_field("requestId", value,
                            "The request id must be a valid UUID with the exception that zero "
                            "UUID is not supported (00000000-0000-0000-0000-000000000000).")
    return value


def strip_host(link, base):
    """A link without its host part: full URLs on Google's hosts or this
    emulator's become partial ones; anything else is returned as is."""
    for h in HOSTS + (base,):
        if link.startswith(h):
            return link[len(h):]
    return link


def zonal_ref(field, value, project, zone, collection, base):
    """The NAME of a zones/ZONE/COLLECTION/NAME link, in one of the forms
    Compute Engine accepts (full URL, projects/P/zones/Z/..., zones/Z/...)."""
    if not isinstance(value, str) or not value:
        raise invalid_field(field, value or "", "Must be specified.")
    rest = strip_host(value, base)
    m = re.match(r"(?:projects/([^/]+)/)?zones/([^/]+)/%s/([^/]+)\Z" % collection, rest)
    if not m or rest.startswith("http"):
        raise invalid_field(field, value, "Invalid URL: %s" % value)
    if m.group(1) and m.group(1) != project:
        raise invalid_field(field, value, "Cross-project references are not allowed.")
    if m.group(2) != zone:
        raise invalid_field(field, value, "%s zone '%s' must match the instance zone '%s'."
                            % (collection[:-1], m.group(2), zone))
    return m.group(3)


def labels(field, value):
    if not value:
        return {}
    if len(value) > 64:
        raise invalid_field(field, "", "Resource has more than 64 labels.")
    for k, v in value.items():
        if not _label_part(k, key=True):
            raise invalid_field(field, "",
                                "Label key '%s' violates format constraints. The key must start with a "
                                "lowercase character, can only contain lowercase letters, numeric "
                                "characters, underscores and dashes. The key can be at most 63 "
                                "characters long. International characters are allowed." % k)
        if not _label_part(v, key=False):
            raise invalid_field(field, "",
                                "Label value '%s' violates format constraints. The value can only "
                                "contain lowercase letters, numeric characters, underscores and "
                                "dashes. The value can be at most 63 characters long. International "
                                "characters are allowed." % v)
    return dict(value)


def _label_part(s, key):
    if len(s) > 63 or (key and not s):
        return False
    for i, ch in enumerate(s):
        lower = ch.islower() or (ch.isalpha() and not ch.isascii() and not ch.isupper())
        if i == 0 and key and not lower:
            return False
        if not (lower or ch.isdigit() or ch in "_-"):
            return False
    return True


def metadata(field, md):
    items = (md or {}).get("items") or []
    seen, total = set(), 0
    for i, it in enumerate(items):
        k, v = it.get("key"), it.get("value", "")
        if not isinstance(k, str) or not META_KEY_RE.match(k):
            raise invalid_field("%s.items[%d].key" % (field, i), k or "",
                                "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'")
        if k in seen:
            raise invalid_field(field, "", "Duplicate keys: '%s'." % k)
        seen.add(k)
        if len((v or "").encode()) > 256 * 1024:
            raise invalid_field("%s.items[%d].value" % (field, i), "", "Value exceeds 256 KB.")
        total += len(k) + len((v or "").encode())
    if total > 512 * 1024:
        raise invalid_field(field, "", "Metadata exceeds the 512 KB limit.")
    return [{"key": it["key"], "value": it.get("value", "")} for it in items]


def scheduling(field, s, gpus):
    s = dict(s or {})
    spot = s.get("provisioningModel") == "SPOT"
    for key, allowed in (("onHostMaintenance", ("MIGRATE", "TERMINATE")),
                         ("provisioningModel", ("STANDARD", "SPOT")),
                         ("instanceTerminationAction", ("STOP", "DELETE"))):
        if key in s and s[key] not in allowed:
            raise invalid_field("%s.%s" % (field, key), s[key],
                                "Must be one of %s." % ", ".join(allowed))
    preemptible = s.get("preemptible", False) or spot
    ohm = s.get("onHostMaintenance", "TERMINATE" if preemptible else "MIGRATE")
    restart = s.get("automaticRestart", not preemptible)
    if preemptible and ohm != "TERMINATE":
        raise invalid_field("%s.onHostMaintenance" % field, ohm,
                            "Scheduling must have preemptible be false when OnHostMaintenance isn't TERMINATE.")
    if preemptible and restart:
        raise invalid_field("%s.automaticRestart" % field, "true",
                            "Preemptible instances cannot be automatically restarted.")
    if "instanceTerminationAction" in s and not spot:
        raise invalid_field("%s.instanceTerminationAction" % field, s["instanceTerminationAction"],
                            "instanceTerminationAction is only supported for Spot VMs.")
    if gpus and ohm != "TERMINATE":
        raise resource_usage("Instances with guest accelerators do not support live migration.")
    s.update({"onHostMaintenance": ohm, "automaticRestart": restart,
              "preemptible": bool(s.get("preemptible", False)),
              "provisioningModel": s.get("provisioningModel", "STANDARD")})
    return s


def accelerators(field, accs, ref):
    """[(type, count)]; REF(field, value) resolves the type link to a name."""
    out = []
    for i, a in enumerate(accs or []):
        f = "%s[%d]" % (field, i)
        t = ref("%s.acceleratorType" % f, a.get("acceleratorType"))
        if t not in catalog.ACCELERATOR_TYPES:
            raise invalid_field("%s.acceleratorType" % f, a.get("acceleratorType"),
                                "Accelerator type '%s' does not exist in zone." % t)
        n = int(a.get("acceleratorCount", 0))
        if n < 1 or n > catalog.ACCELERATOR_TYPES[t][1]:
            raise invalid_field("%s.acceleratorCount" % f, str(n),
                                "Accelerator count must be between 1 and %d for %s."
                                % (catalog.ACCELERATOR_TYPES[t][1], t))
        out.append((t, n))
    return out


def disks(field, ds, project, zone, base):
    if not ds:
        raise invalid_field(field, "", "No disks are specified.")
    for i, d in enumerate(ds):
        f = "%s[%d]" % (field, i)
        if i == 0 and not d.get("boot"):
            raise invalid_field("%s.boot" % f, "false", "Boot disk must be the first disk attached to the instance.")
        if i > 0 and d.get("boot"):
            raise invalid_field("%s.boot" % f, "true", "Only one boot disk may be attached.")
        if d.get("type", "PERSISTENT") not in ("PERSISTENT", "SCRATCH"):
            raise invalid_field("%s.type" % f, d["type"], "Must be one of PERSISTENT, SCRATCH.")
        if d.get("mode", "READ_WRITE") not in ("READ_WRITE", "READ_ONLY"):
            raise invalid_field("%s.mode" % f, d["mode"], "Must be one of READ_WRITE, READ_ONLY.")
        ip = d.get("initializeParams")
        if ip is None and not d.get("source"):
            raise invalid_field(f, "", "Source or initializeParams must be specified.")
        if ip is None:
            continue
        img = ip.get("sourceImage")
        if i == 0 and not img and not ip.get("sourceSnapshot"):
            raise invalid_field("%s.initializeParams.sourceImage" % f, "", "Boot disk requires a source image or snapshot.")
        if img and not re.match(r"(?:projects/[^/]+/)?(?:global/images/(?:family/)?[^/]+|zones/-/imageFamilyViews/[^/]+)\Z",
                                strip_host(img, base)):
            raise invalid_field("%s.initializeParams.sourceImage" % f, img, "Invalid URL: %s" % img)
        size = ip.get("diskSizeGb")
        if size is not None and int(size) < 10:
            raise invalid_field("%s.initializeParams.diskSizeGb" % f, str(size),
                                "Requested disk size cannot be smaller than the image size (10 GB)")
        if ip.get("diskType"):
            t = zonal_ref("%s.initializeParams.diskType" % f, ip["diskType"], project, zone, "diskTypes", base)
            if t not in catalog.DISK_TYPES:
                raise invalid_field("%s.initializeParams.diskType" % f, ip["diskType"],
                                    "Disk type '%s' does not exist in zone." % t)
        if ip.get("labels"):
            labels("%s.initializeParams.labels" % f, ip["labels"])


def network_link(field, value, project, networks, base):
    rest = strip_host(value, base)
    m = re.match(r"(?:projects/([^/]+)/)?global/networks/([^/]+)\Z", rest)
    if not m or (m.group(1) and m.group(1) != project):
        raise invalid_field(field, value, "Invalid URL: %s" % value)
    if m.group(2) not in networks:
        raise not_found("projects/%s/global/networks/%s" % (project, m.group(2)))
    return m.group(2)


def interfaces(field, nics, project, networks, base):
    """[(network, wants_nat, networkIP or None)] for the interfaces."""
    if not nics:
        raise invalid_field(field, "", "At least one network interface is required.")
    if len(nics) > 8:
        raise invalid_field(field, "", "At most 8 network interfaces are allowed.")
    out = []
    for i, nic in enumerate(nics):
        f = "%s[%d]" % (field, i)
        net = network_link("%s.network" % f, nic.get("network", "global/networks/default"),
                           project, networks, base)
        acs = nic.get("accessConfigs") or []
        if len(acs) > 1:
            raise invalid_field("%s.accessConfigs" % f, "", "At most one access config currently supported.")
        for j, ac in enumerate(acs):
            if ac.get("type", "ONE_TO_ONE_NAT") != "ONE_TO_ONE_NAT":
                raise invalid_field("%s.accessConfigs[%d].type" % (f, j), ac["type"], "Must be ONE_TO_ONE_NAT.")
            if ac.get("networkTier", "PREMIUM") not in ("PREMIUM", "STANDARD"):
                raise invalid_field("%s.accessConfigs[%d].networkTier" % (f, j), ac["networkTier"],
                                    "Must be one of PREMIUM, STANDARD.")
            if ac.get("natIP"):
                raise invalid_field("%s.accessConfigs[%d].natIP" % (f, j), ac["natIP"],
                                    "The specified external IP address '%s' was not found." % ac["natIP"])
        out.append((net, bool(acs), nic.get("networkIP")))
    return out


def tags(field, t):
    for i, item in enumerate((t or {}).get("items") or []):
        name("%s.items[%d]" % (field, i), item)


def firewall(body, project, networks, base):
    name("resource.name", body.get("name"))
    net = network_link("resource.network", body.get("network", "global/networks/default"),
                       project, networks, base)
    direction = body.get("direction", "INGRESS")
    if direction not in ("INGRESS", "EGRESS"):
        raise invalid_field("resource.direction", direction, "Must be one of INGRESS, EGRESS.")
    prio = int(body.get("priority", 1000))
    if not 0 <= prio <= 65535:
        raise invalid_field("resource.priority", str(prio), "Must be between 0 and 65535.")
    if bool(body.get("allowed")) == bool(body.get("denied")):
        raise invalid_field("resource.allowed", "", "Exactly one of allowed or denied must be specified.")
    kind = "allowed" if body.get("allowed") else "denied"
    for i, rule in enumerate(body[kind]):
        f = "resource.%s[%d]" % (kind, i)
        proto = rule.get("IPProtocol")
        if proto is None or not (proto in PROTOCOLS or (proto.isdigit() and int(proto) <= 255)):
            raise invalid_field("%s.IPProtocol" % f, proto or "", "Must be one of %s or an IP protocol number."
                                % ", ".join(PROTOCOLS))
        for j, p in enumerate(rule.get("ports") or []):
            m = PORT_RE.match(p)
            if proto not in ("tcp", "udp", "sctp", "all") or not m or int(m.group(1)) > 65535 or \
                    (m.group(2) and not int(m.group(1)) <= int(m.group(2)) <= 65535):
                raise invalid_field("%s.ports[%d]" % (f, j), p, "Invalid port specification.")
    for key in ("sourceRanges", "destinationRanges"):
        for i, r in enumerate(body.get(key) or []):
            try:
                ipaddress.ip_network(r, strict=False)
            except ValueError:
                raise invalid_field("resource.%s[%d]" % (key, i), r, "Must be a valid IPv4 or IPv6 CIDR range.")
    for key in ("sourceTags", "targetTags"):
        for i, t in enumerate(body.get(key) or []):
            name("resource.%s[%d]" % (key, i), t)
    if direction == "EGRESS" and (body.get("sourceTags") or body.get("sourceServiceAccounts")):
        raise invalid_field("resource.sourceTags", "", "Source tags cannot be set for an egress firewall.")
    return net, direction, prio


NAT_ALLOCATE = ("AUTO_ONLY", "MANUAL_ONLY")
NAT_RANGES = ("ALL_SUBNETWORKS_ALL_IP_RANGES", "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES",
              "LIST_OF_SUBNETWORKS")
NAT_ENUMS = (("autoNetworkTier", ("PREMIUM", "STANDARD")), ("type", ("PUBLIC", "PRIVATE")),
             ("sourceSubnetworkIpRangesToNat64", ("ALL_IPV6_SUBNETWORKS", "LIST_OF_IPV6_SUBNETWORKS")))
NAT_LOG_FILTERS = ("ALL", "ERRORS_ONLY", "TRANSLATIONS_ONLY")
NAT_ENDPOINTS = ("ENDPOINT_TYPE_VM", "ENDPOINT_TYPE_SWG", "ENDPOINT_TYPE_MANAGED_PROXY_LB")
NAT_TIMEOUTS = ("icmpIdleTimeoutSec", "tcpEstablishedIdleTimeoutSec", "tcpTimeWaitTimeoutSec",
                "tcpTransitoryIdleTimeoutSec", "udpIdleTimeoutSec", "minPortsPerVm", "maxPortsPerVm")


def _enum(field, value, allowed):
    if value not in allowed:
        raise invalid_field(field, value if isinstance(value, str) else "", "Must be one of %s." % ", ".join(allowed))


def router(body, project, region, networks, base, nats_elsewhere):
    """(network name, nats) of a routers.insert body.  REGION is the URL's;
    NATS_ELSEWHERE: [(router name, nat)] of the other routers on any
    network in this region, as (network, nat) pairs."""
    name("resource.name", body.get("name"))
    if not body.get("network"):
        raise invalid_field("resource.network", "", "Must be specified.")
    net = network_link("resource.network", body["network"], project, networks, base)
    if body.get("region"):
        rest = strip_host(body["region"], base)
        m = re.match(r"(?:projects/([^/]+)/)?regions/([^/]+)\Z", rest)
        if not (m or rest == region) or (m and (m.group(2) != region or m.group(1) not in (None, project))):
            raise invalid_field("resource.region", body["region"],
                                "Region must match the region in the request URL '%s'." % region)
    nats = body.get("nats") or []
    seen = set()
    for i, nat in enumerate(nats):
        _nat("resource.nats[%d]" % i, nat, project, region, base)
        if nat["name"] in seen:
            raise invalid_field("resource.nats[%d].name" % i, nat["name"], "Duplicate NAT name.")
        seen.add(nat["name"])
    everything = [n for n in nats if n["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"]
    others = [(r, n) for r, rnet, n in nats_elsewhere if rnet == net]
    if (everything and (len(nats) > 1 or others)) or (nats and any(
            n["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES" for _, n in others)):
        clash = others[0][0] if others else body["name"]
        raise invalid_field("resource.nats", "",
                            "A NAT with sourceSubnetworkIpRangesToNat ALL_SUBNETWORKS_ALL_IP_RANGES must "
                            "be the only NAT for network '%s' in region '%s' (router '%s' has one)."
                            % (net, region, clash))
    return net, nats


def _nat(f, nat, project, region, base):
    name("%s.name" % f, nat.get("name"))
    if "natIpAllocateOption" not in nat:
        raise invalid_field("%s.natIpAllocateOption" % f, "", "Must be specified.")
    _enum("%s.natIpAllocateOption" % f, nat["natIpAllocateOption"], NAT_ALLOCATE)
    if "sourceSubnetworkIpRangesToNat" not in nat:
        raise invalid_field("%s.sourceSubnetworkIpRangesToNat" % f, "", "Must be specified.")
    _enum("%s.sourceSubnetworkIpRangesToNat" % f, nat["sourceSubnetworkIpRangesToNat"], NAT_RANGES)
    for key, allowed in NAT_ENUMS:
        if key in nat:
            _enum("%s.%s" % (f, key), nat[key], allowed)
    for i, e in enumerate(nat.get("endpointTypes") or []):
        _enum("%s.endpointTypes[%d]" % (f, i), e, NAT_ENDPOINTS)
    ips = nat.get("natIps") or []
    if nat["natIpAllocateOption"] == "AUTO_ONLY" and ips:
        raise invalid_field("%s.natIps" % f, "", "natIps must be empty when natIpAllocateOption is AUTO_ONLY.")
    if nat["natIpAllocateOption"] == "MANUAL_ONLY" and not ips:
        raise invalid_field("%s.natIps" % f, "", "natIps must be specified when natIpAllocateOption is MANUAL_ONLY.")
    for ip in ips:                        # no static addresses exist in the emulator
        raise not_found(strip_host(ip, base))
    subs = nat.get("subnetworks") or []
    if nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS" and not subs:
        raise invalid_field("%s.subnetworks" % f, "", "subnetworks must be specified for LIST_OF_SUBNETWORKS.")
    if nat["sourceSubnetworkIpRangesToNat"] != "LIST_OF_SUBNETWORKS" and subs:
        raise invalid_field("%s.subnetworks" % f, "", "subnetworks may be given only with LIST_OF_SUBNETWORKS.")
    for i, sub in enumerate(subs):
        link = strip_host(sub.get("name") or "", base)
        m = re.match(r"(?:projects/([^/]+)/)?regions/([^/]+)/subnetworks/([^/]+)\Z", link)
        if not m or m.group(2) != region or m.group(3) != "default":
            raise not_found(link or "subnetworks/")
    for key in NAT_TIMEOUTS:
        if key in nat and int(nat[key]) <= 0:
            raise invalid_field("%s.%s" % (f, key), str(nat[key]), "Must be greater than 0.")
    log = nat.get("logConfig") or {}
    if "filter" in log:
        _enum("%s.logConfig.filter" % f, log["filter"], NAT_LOG_FILTERS)


def bulk(body):
    """(count, minCount, namePattern or None, names or None) of a bulkInsert."""
    if body.get("sourceInstanceTemplate"):
        raise not_found(strip_host(body["sourceInstanceTemplate"], ""))
    if "instanceProperties" not in body:
        raise invalid_field("resource.instanceProperties", "", "Instance properties must be specified.")
    count = int(body.get("count", 0))
    if count < 1:
        raise invalid_field("resource.count", str(count), "Count must be greater than 0.")
    if count > 1000:
        raise invalid_field("resource.count", str(count), "Count must be at most 1000.")
    min_count = int(body.get("minCount", count))
    if not 1 <= min_count <= count:
        raise invalid_field("resource.minCount", str(min_count), "minCount must be between 1 and count.")
    pattern, per = body.get("namePattern"), body.get("perInstanceProperties")
    if bool(pattern) == bool(per):
        raise bad_request("Exactly one of namePattern or perInstanceProperties must be specified.", "invalid")
    if pattern:
        runs = re.findall(r"#+", pattern)
        if len(runs) != 1 or len(runs[0]) > 7:
            raise invalid_field("resource.namePattern", pattern,
                                "Name pattern must contain exactly one sequence of 1 to 7 '#' characters.")
        name("resource.namePattern", pattern.replace(runs[0], "1" * len(runs[0])))
        return count, min_count, pattern, None
    if len(per) != count:
        raise invalid_field("resource.count", str(count),
                            "Count must equal the number of perInstanceProperties entries (%d)." % len(per))
    for n, p in per.items():
        name("resource.perInstanceProperties[%s]" % n, n)
        if p.get("name") not in (None, n):
            raise invalid_field("resource.perInstanceProperties[%s].name" % n, p["name"],
                                "Name must match the map key.")
    return count, min_count, None, list(per)
