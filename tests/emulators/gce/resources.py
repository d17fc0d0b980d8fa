"""resources.py - request bodies -> compute#instance / compute#firewall
resources, in the shapes Compute Engine returns (kind, id as a string,
selfLink, creationTimestamp, networkInterfaces[].networkIP and
accessConfigs[].natIP, labels with labelFingerprint, metadata with its
fingerprint), after validate.py's checks.  Also the catalogue resources
(project, zones, regions, machine and accelerator types, networks)."""

import zlib

import catalog
import validate
from errors import invalid_field
from world import fingerprint, new_id, now_stamp

STATIC_STAMP = "1969-12-31T16:00:00.000-08:00"


def instance(world, project, zone, body, prefix="resource", bare_types=False):
    """(resource, spec) for one instance; BODY already passed schema.check."""
    base = world.base
    validate.name("%s.name" % prefix, body.get("name"))
    name = body["name"]

    def ref(field, value, collection):
        if bare_types:
            if not isinstance(value, str) or not validate.NAME_RE.match(value):
                raise invalid_field(field, value or "",
                                    "Must be the short name of a %s, e.g. %s." % (
                                        collection[:-1], "n1-standard-8" if collection == "machineTypes"
                                        else "nvidia-tesla-t4"))
            return value
        return validate.zonal_ref(field, value, project, zone, collection, base)

    mt = ref("%s.machineType" % prefix, body.get("machineType"), "machineTypes")
    if mt not in catalog.MACHINE_TYPES:
        raise invalid_field("%s.machineType" % prefix, body.get("machineType"),
                            "Machine type with name '%s' does not exist in zone '%s'." % (mt, zone))
    accs = validate.accelerators("%s.guestAccelerators" % prefix, body.get("guestAccelerators"),
                                 lambda f, v: ref(f, v, "acceleratorTypes"))
    sched = validate.scheduling("%s.scheduling" % prefix, body.get("scheduling"), accs)
    labels = validate.labels("%s.labels" % prefix, body.get("labels"))
    items = validate.metadata("%s.metadata" % prefix, body.get("metadata"))
    validate.disks("%s.disks" % prefix, body.get("disks"), project, zone, base)
    nics = validate.interfaces("%s.networkInterfaces" % prefix, body.get("networkInterfaces"),
                               project, world.networks, base)
    if len(set(n for n, _, _ in nics)) != len(nics):
        raise invalid_field("%s.networkInterfaces" % prefix, "",
                            "Networks must be distinct for NICs attached to a VM.")
    validate.tags("%s.tags" % prefix, body.get("tags"))
    if len(body.get("serviceAccounts") or []) > 1:
        raise invalid_field("%s.serviceAccounts" % prefix, "", "At most one service account is allowed.")
    for i, sa in enumerate(body.get("serviceAccounts") or []):
        email = sa.get("email", "default")
        known = getattr(world, "service_account_known", None)
        if email != "default" and known is not None and not known(email):
            raise invalid_field("%s.serviceAccounts[%d].email" % (prefix, i), email,
                                "The user does not have access to service account '%s'. Ask a project "
                                "owner to grant you the iam.serviceAccountUser role on the service "
                                "account" % email)
        scopes = sa.get("scopes", [])
        if not isinstance(scopes, list) or not all(
                isinstance(x, str) and x.startswith("https://www.googleapis.com/auth/") for x in scopes):
            raise invalid_field("%s.serviceAccounts[%d].scopes" % (prefix, i), scopes,
                                "Scopes must be OAuth 2.0 scope URLs.")
    if nics[0][2] is not None and nics[0][2] not in world.net.free:
        raise invalid_field("%s.networkInterfaces[0].networkIP" % prefix, nics[0][2],
                            "IP address '%s' is not available in subnetwork 'default'." % nics[0][2])
    region = catalog.region_of(zone)
    res = {
        "kind": "compute#instance", "id": None, "creationTimestamp": None,
        "name": name, "description": body.get("description", ""),
        "tags": dict(body.get("tags") or {}, fingerprint=fingerprint((body.get("tags") or {}).get("items"))),
        "machineType": world.link("projects", project, "zones", zone, "machineTypes", mt),
        "status": "PROVISIONING", "zone": world.zone_link(project, zone),
        "canIpForward": bool(body.get("canIpForward", False)),
        "networkInterfaces": [_nic(world, project, region, i, n, body["networkInterfaces"][i])
                              for i, n in enumerate(nics)],
        "disks": [_disk(world, project, zone, name, i, d) for i, d in enumerate(body["disks"])],
        "metadata": dict({"kind": "compute#metadata", "fingerprint": fingerprint(items)},
                         **({"items": items} if items else {})),
        "selfLink": world.link("projects", project, "zones", zone, "instances", name),
        "scheduling": sched, "cpuPlatform": "Intel Broadwell",
        "labelFingerprint": fingerprint(labels), "startRestricted": False,
        "deletionProtection": bool(body.get("deletionProtection", False)),
        "fingerprint": fingerprint(new_id()), "satisfiesPzi": False,
    }
    if labels:
        res["labels"] = labels
    if body.get("serviceAccounts"):
        res["serviceAccounts"] = [{"email": s.get("email", "default"), "scopes": s.get("scopes", [])}
                                  for s in body["serviceAccounts"]]
    if accs:
        res["guestAccelerators"] = [{"acceleratorType": world.link("projects", project, "zones", zone,
                                                                   "acceleratorTypes", t),
                                     "acceleratorCount": n} for t, n in accs]
    if body.get("hostname"):
        res["hostname"] = body["hostname"]
    spec = {"machine_type": mt, "accelerators": accs, "nat": nics[0][1], "network_ip": nics[0][2]}
    return res, spec


def _nic(world, project, region, i, parsed, given):
    net, nat, _ = parsed
    out = {"kind": "compute#networkInterface",
           "network": world.link("projects", project, "global", "networks", net),
           "subnetwork": world.link("projects", project, "regions", region, "subnetworks", net),
           "networkIP": None, "name": "nic%d" % i, "fingerprint": fingerprint(new_id()),
           "stackType": "IPV4_ONLY"}
    if nat:
        ac = given["accessConfigs"][0]
        out["accessConfigs"] = [{"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT",
                                 "name": ac.get("name", "External NAT"), "natIP": None,
                                 "networkTier": ac.get("networkTier", "PREMIUM")}]
    return out


def _disk(world, project, zone, name, i, d):
    ip = d.get("initializeParams") or {}
    disk_name = ip.get("diskName") or (name if i == 0 else "%s-%d" % (name, i))
    return {"kind": "compute#attachedDisk", "type": d.get("type", "PERSISTENT"),
            "mode": d.get("mode", "READ_WRITE"),
            "source": d.get("source") or world.link("projects", project, "zones", zone, "disks", disk_name),
            "deviceName": d.get("deviceName") or "persistent-disk-%d" % i, "index": i,
            "boot": bool(d.get("boot", False)), "autoDelete": bool(d.get("autoDelete", False)),
            "interface": d.get("interface", "SCSI"), "diskSizeGb": str(ip.get("diskSizeGb", 10)),
            "architecture": "X86_64", "guestOsFeatures": [{"type": "VIRTIO_SCSI_MULTIQUEUE"}]}


def firewall(world, project, body):
    net, direction, prio = validate.firewall(body, project, world.networks, world.base)
    res = {"kind": "compute#firewall", "id": new_id(), "creationTimestamp": now_stamp(),
           "name": body["name"], "description": body.get("description", ""),
           "network": world.link("projects", project, "global", "networks", net),
           "priority": prio, "direction": direction,
           "logConfig": {"enable": bool((body.get("logConfig") or {}).get("enable", False))},
           "disabled": bool(body.get("disabled", False)),
           "selfLink": world.link("projects", project, "global", "firewalls", body["name"])}
    for key in ("allowed", "denied", "sourceRanges", "destinationRanges", "sourceTags", "targetTags",
                "sourceServiceAccounts", "targetServiceAccounts"):
        if body.get(key):
            res[key] = body[key]
    if direction == "INGRESS" and not any(body.get(k) for k in ("sourceRanges", "sourceTags",
                                                                 "sourceServiceAccounts")):
        res["sourceRanges"] = ["0.0.0.0/0"]
    if direction == "EGRESS" and not body.get("destinationRanges"):
        res["destinationRanges"] = ["0.0.0.0/0"]
    return res


def router(world, project, region, body):
    """compute#router for a routers.insert BODY (schema-checked)."""
    others = [(r["name"], r["_network"], n) for (p, reg, _), r in world.routers.items()
              if p == project and reg == region and r for n in r.get("nats", [])]
    net, nats = validate.router(body, project, region, world.networks, world.base, others)
    res = {"kind": "compute#router", "id": new_id(), "creationTimestamp": now_stamp(),
           "name": body["name"], "description": body.get("description", ""),
           "network": world.link("projects", project, "global", "networks", net),
           "region": world.link("projects", project, "regions", region),
           "selfLink": world.link("projects", project, "regions", region, "routers", body["name"]),
           "encryptedInterconnectRouter": bool(body.get("encryptedInterconnectRouter", False)),
           "_network": net}
    if nats:
        res["nats"] = [dict(n, enableEndpointIndependentMapping=n.get("enableEndpointIndependentMapping", False),
                            logConfig=dict({"enable": False}, **(n.get("logConfig") or {})),
                            endpointTypes=n.get("endpointTypes") or ["ENDPOINT_TYPE_VM"],
                            type=n.get("type", "PUBLIC"))
                       for n in nats]
    return res


def public(res):
    """A resource as the API shows it (without the emulator's own _keys)."""
    return {k: v for k, v in res.items() if not k.startswith("_")}


# ----------------------------------------------------------------- catalogue

def project(world, p):
    return {"kind": "compute#project", "id": world.projects[p], "creationTimestamp": STATIC_STAMP,
            "name": p, "selfLink": world.link("projects", p),
            "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": fingerprint(None)},
            "quotas": [{"metric": "FIREWALLS", "limit": 200.0,
                        "usage": float(sum(1 for (q, _), f in world.firewalls.items() if q == p and f))},
                       {"metric": "NETWORKS", "limit": 15.0, "usage": 1.0}],
            "defaultServiceAccount": "%s-compute@developer.gserviceaccount.com" % world.projects[p],
            "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS", "defaultNetworkTier": "PREMIUM",
            "vmDnsSetting": "ZONAL_ONLY"}


def zone(world, p, z):
    r = catalog.region_of(z)
    return {"kind": "compute#zone", "id": str(2000 + world.zones.index(z)), "creationTimestamp": STATIC_STAMP,
            "name": z, "description": z, "status": "UP",
            "region": world.link("projects", p, "regions", r), "selfLink": world.link("projects", p, "zones", z),
            "availableCpuPlatforms": ["Intel Broadwell", "Intel Cascade Lake"], "supportsPzs": False}


def region(world, p, r):
    insts = [i for i in world.visible_instances(p) if catalog.region_of(i.zone) == r]
    quota = world.faults.snapshot()["quota"]
    usage = {"INSTANCES": len(insts),
             "CPUS": sum(catalog.MACHINE_TYPES[i.spec["machine_type"]][0] for i in insts)}
    for _, (_, _, metric) in sorted(catalog.ACCELERATOR_TYPES.items()):
        usage[metric] = sum(n for i in insts for t, n in i.spec["accelerators"]
                            if catalog.ACCELERATOR_TYPES[t][2] == metric)
    return {"kind": "compute#region", "id": str(1000 + sorted({catalog.region_of(z) for z in world.zones}).index(r)),
            "creationTimestamp": STATIC_STAMP, "name": r, "description": r, "status": "UP",
            "zones": [world.link("projects", p, "zones", z) for z in world.zones if catalog.region_of(z) == r],
            "quotas": [{"metric": m, "limit": float(quota.get(m, 1000.0 if m in ("INSTANCES", "CPUS") else 64.0)),
                        "usage": float(u)} for m, u in sorted(usage.items())],
            "selfLink": world.link("projects", p, "regions", r), "supportsPzs": False}


def machine_type(world, p, z, t):
    cpus, mem = catalog.MACHINE_TYPES[t]
    return {"kind": "compute#machineType", "id": str(zlib.crc32(t.encode())), "creationTimestamp": STATIC_STAMP,
            "name": t, "description": "%d vCPUs, %g GB RAM" % (cpus, mem / 1024.0), "guestCpus": cpus,
            "memoryMb": mem, "imageSpaceGb": 0, "maximumPersistentDisks": 128,
            "maximumPersistentDisksSizeGb": "263168", "zone": z, "isSharedCpu": t.startswith("e2-") and cpus == 2 and mem < 8192,
            "selfLink": world.link("projects", p, "zones", z, "machineTypes", t), "architecture": "X86_64"}


def accelerator_type(world, p, z, t):
    desc, most, _ = catalog.ACCELERATOR_TYPES[t]
    return {"kind": "compute#acceleratorType", "id": str(zlib.crc32(t.encode())), "creationTimestamp": STATIC_STAMP,
            "name": t, "description": desc, "zone": world.link("projects", p, "zones", z),
            "maximumCardsPerInstance": most,
            "selfLink": world.link("projects", p, "zones", z, "acceleratorTypes", t)}


def network(world, p, n):
    return {"kind": "compute#network", "id": world.networks[n], "creationTimestamp": STATIC_STAMP,
            "name": n, "description": "Default network for the project",
            "selfLink": world.link("projects", p, "global", "networks", n),
            "autoCreateSubnetworks": True, "routingConfig": {"routingMode": "REGIONAL"},
            "networkFirewallPolicyEnforcementOrder": "AFTER_CLASSIC_FIREWALL"}

