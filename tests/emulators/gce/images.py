"""images.py - the images resource of the emulator (compute v1
images.insert / get / list / delete), checked as Compute Engine checks it:
a name (RFC 1035) not taken, exactly one source (only sourceDisk is
served), the source disk as a full or partial link (`zones/Z/disks/D`,
`projects/P/zones/Z/disks/D`) of a disk that exists, and a disk attached
to an instance that is not TERMINATED refused unless forceCreate=true
(Compute Engine: "The disk resource ... is already being used by ...",
resourceInUseByAnotherResource), labels and family as elsewhere.

A boot disk is named like its instance (Compute Engine's default) and
exists exactly while its instance does; an instance's disk source link
says which disk it is.  The image resource is made here, PENDING; world.py
makes it READY when its operation ends (after the backend copied the disk,
for booted VMs)."""

import re

import validate
from errors import ApiError, already_exists, invalid_field, invalid_payload, not_found
from world import fingerprint, new_id, now_stamp

DISK_RE = re.compile(r"(?:projects/(?P<p>[^/]+)/)?zones/(?P<z>[^/]+)/disks/(?P<d>[^/]+)\Z")
SOURCES = ("sourceDisk", "sourceImage", "sourceSnapshot", "rawDisk")


def force_create(value):
    """The forceCreate query parameter: a JSON-style boolean."""
    if value is None or value == "false":
        return False
    if value == "true":
        return True
    raise invalid_payload("Invalid value at 'force_create' (TYPE_BOOL), \"%s\"" % value)


def disk_owner(world, project, zone, disk):
    """The instance whose boot disk is DISK, or None."""
    for inst in world.visible_instances(project, zone):
        src = inst.res["disks"][0].get("source", "")
        if src.rsplit("/", 1)[-1] == disk:
            return inst
    return None


def source_disk(world, project, link):
    """(zone, disk, instance) of a sourceDisk link; 400 for a malformed
    link, 404 for a disk that does not exist."""
    m = DISK_RE.match(validate.strip_host(link, world.base))
    if not m:
        raise invalid_field("resource.sourceDisk", link, "Invalid URL: %s" % link)
    p, z, d = m.group("p") or project, m.group("z"), m.group("d")
    path = "projects/%s/zones/%s/disks/%s" % (p, z, d)
    if p != project or z not in world.zones:
        raise not_found(path)
    inst = disk_owner(world, project, z, d)
    if inst is None:
        raise not_found(path)
    return z, d, inst


def image(world, project, body, force):
    """(resource, instance) for an images.insert BODY (schema-checked)."""
    validate.name("resource.name", body.get("name"))
    name = body["name"]
    if (project, name) in world.images:
        raise already_exists("projects/%s/global/images/%s" % (project, name))
    given = [k for k in SOURCES if body.get(k)]
    if len(given) != 1:
        raise invalid_field("resource", "", "Exactly one of sourceDisk, sourceImage, "
                            "sourceSnapshot or rawDisk.source must be specified.")
    if given[0] != "sourceDisk":
        raise invalid_field("resource.%s" % given[0], str(body[given[0]]),
                            "This emulator makes images from disks only (sourceDisk).")
    zone, disk, inst = source_disk(world, project, body["sourceDisk"])
    if inst.res["status"] != "TERMINATED" and not force:
        raise ApiError(400, "resourceInUseByAnotherResource",
                       "The disk resource 'projects/%s/zones/%s/disks/%s' is already being used by "
                       "'projects/%s/zones/%s/instances/%s'" % (project, zone, disk, project, zone,
                                                               inst.name))
    labels = validate.labels("resource.labels", body.get("labels"))
    if body.get("family") is not None:
        validate.name("resource.family", body["family"])
    res = {
        "kind": "compute#image", "id": new_id(), "creationTimestamp": now_stamp(),
        "name": name, "description": body.get("description", ""), "sourceType": "RAW",
        "status": "PENDING", "archiveSizeBytes": "0",
        "diskSizeGb": str(inst.res["disks"][0].get("diskSizeGb", "10")),
        "sourceDisk": world.link("projects", project, "zones", zone, "disks", disk),
        "sourceDiskId": inst.disk_id, "licenses": [], "architecture": "X86_64",
        "guestOsFeatures": [{"type": "VIRTIO_SCSI_MULTIQUEUE"}, {"type": "UEFI_COMPATIBLE"}],
        "storageLocations": body.get("storageLocations") or [zone.split("-")[0]],
        "labelFingerprint": fingerprint(labels),
        "selfLink": world.link("projects", project, "global", "images", name),
        "_zone": zone, "_instance": inst.name,
    }
    if labels:
        res["labels"] = labels
    if body.get("family"):
        res["family"] = body["family"]
    return res, inst


def resolve(world, project, link):
    """The image record an instance's sourceImage names when it lives in one
    of the emulator's projects (None for images of other projects, e.g.
    debian-cloud, which are taken on trust); 404 when it does not exist,
    400 when it is not READY."""
    rel = validate.strip_host(link, world.base)
    m = re.match(r"(?:projects/(?P<p>[^/]+)/)?global/images/(?:(?P<fam>family)/)?(?P<n>[^/]+)\Z", rel)
    if not m:
        return None
    p = m.group("p") or project
    if p not in world.projects:
        return None
    path = "projects/%s/global/images/%s%s" % (p, "family/" if m.group("fam") else "", m.group("n"))
    if m.group("fam"):
        ready = [r for (q, _), r in world.images.items()
                 if q == p and r.get("family") == m.group("n") and r["status"] == "READY"]
        if not ready:
            raise not_found(path)
        return max(ready, key=lambda r: (r["creationTimestamp"], r["name"]))
    rec = world.images.get((p, m.group("n")))
    if rec is None:
        raise not_found(path)
    if rec["status"] != "READY":
        raise ApiError(400, "resourceNotReady", "The resource '%s' is not ready" % path)
    return rec
