"""world.py - the emulated project state: instances, firewalls and
operations, and the clock that moves them.

Operations are asynchronous as on Compute Engine.  An insert is
PENDING for one step, then admitted (quota, stockout and address checks;
a refusal ends the operation DONE with error.errors[]) and RUNNING while
its instance goes PROVISIONING -> STAGING -> RUNNING, one step each; in
STAGING the instance's node body starts (bodies.py) and the instance is
RUNNING only once its sshd listens.  The operation is DONE when its
instances are RUNNING.  A delete is PENDING, then RUNNING with the instance
STOPPING, then DONE once the body is gone and the instance with it.
Firewall operations are global: PENDING, RUNNING, DONE, with the change
made at DONE.  instances.stop: RUNNING -> STOPPING -> TERMINATED (the
backend's machine ends, its boot disk stays); instances.start: TERMINATED
-> STAGING -> RUNNING on the same disk.  A guest shutdown (the backend's
machine ended by itself: a body's sshd ended and no process of the body
is left, bodies.alive; a VM's QEMU exited; checked every WATCH_PERIOD
seconds outside the lock) or a /_emulator/ call
(guest_shutdown, preempt) does what Compute Engine does: a system
operation (compute.instances.guestTerminate or compute.instances.preempted)
while the instance goes RUNNING -> STOPPING -> TERMINATED, disk kept (a
Spot instance with instanceTerminationAction DELETE is deleted when
preempted).  images.insert (global): the image
is PENDING from the call, the operation RUNNING while the backend copies
the disk (booted VMs), then the image READY and the operation DONE;
images.delete removes it at DONE.  Internal DNS: whenever an instance
gets its networkIP (at admission) or gives it back (at delete; a
TERMINATED instance keeps it), the tick hands the backend every instance
that holds one, by project and network (bodies.dns: each body's
/etc/hosts), before the next tick, so before the operation is DONE.  A step
lasts faults.op_delay seconds (slow_op_delay for
the slow_ops fraction).  One thread (tick) moves everything; handlers only
read and enqueue, under one lock.
"""

import base64
import datetime
import hashlib
import ipaddress
import json
import secrets
import threading
import time
import traceback

import catalog
from errors import ApiError, already_exists, not_found

WATCH_PERIOD = 0.5                 # seconds between looks for machines that ended by themselves
SYSTEM_USER = "system@google.com"  # the principal of operations Compute Engine starts itself


def now_stamp(t=None):
    t = time.time() if t is None else t
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).astimezone(
        datetime.timezone(datetime.timedelta(hours=-8))).isoformat(timespec="milliseconds")


def new_id():
    return str(secrets.randbits(63) | (1 << 62))


def fingerprint(value):
    if not value:
        return "42WmSpB8rSM="
    return base64.b64encode(hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()[:8]).decode()


class Pool:
    """Addresses handed out from a block (.0, .1 and the last two reserved, as in a GCE subnet)."""

    def __init__(self, cidr, private_ok=False):
        self.net = ipaddress.ip_network(cidr)
        if not self.net.network_address.is_loopback and not (private_ok and self.net.is_private):
            raise ValueError("address block %s is not loopback" % cidr)
        hosts = list(self.net.hosts())
        self.free = [str(a) for a in hosts[1:-1]]
        self.used = set()

    def take(self, want=None):
        if want is not None:
            if want in self.used or want not in self.free:
                return None
            self.free.remove(want)
        elif not self.free:
            return None
        else:
            want = self.free.pop(0)
        self.used.add(want)
        return want

    def give(self, addr):
        if addr in self.used:
            self.used.discard(addr)
            self.free.insert(0, addr)


class Instance:
    def __init__(self, project, zone, name, res, spec):
        self.project, self.zone, self.name = project, zone, name
        self.res = res                 # the compute#instance resource
        self.spec = spec               # validated: machine type, accelerators, nat, ...
        self.visible = False
        self.gone = False
        self.deleting = False
        self.stage_at = 0.0            # when the next lifecycle step is due
        self.delay = 0.1
        self.body = "none"             # none | starting | up | failed | stopping | stopped | skipped
                                       # | off (instances.stop, guest shutdown: machine ended, disk kept)
        self.body_error = None
        self.never_boot = False
        self.powering_off = False      # STOPPING for instances.stop, not a delete
        self.disk_id = new_id()        # its boot disk's id
        self.boots = 0                 # machines started so far: tells one boot's death from the next's
        self.preempted = False         # the guest's `preempted` metadata value (TRUE once preempted)


class Operation:
    def __init__(self, res, kind, delay):
        self.res = res
        self.kind = kind               # insert | delete | bulkInsert | fwInsert | fwDelete
        self.delay = delay
        self.next_at = time.time() + delay
        self.targets = []              # Instances it waits for
        self.payload = None


class World:
    def __init__(self, projects, zones, faults, bodies, net_cidr, nat_cidr, base):
        self.lock = threading.Condition(threading.RLock())
        self.projects = {p: new_id() for p in projects}
        self.zones = list(zones)
        self.faults = faults
        self.bodies = bodies           # None: instances have no node body
        self.base = base               # http://127.0.0.1:PORT/compute/v1/
        self.networks = {"default": new_id()}
        self.instances = {}            # (project, zone, name) -> Instance
        self.firewalls = {}            # (project, name) -> resource (or None while pending)
        self.routers = {}              # (project, region, name) -> resource (or None while pending)
        self.ops = {}                  # (project, scope, name) -> Operation; scope 'zones/Z',
                                       # 'regions/R' or 'global'
        self.active = []               # Operations not DONE
        self.request_ids = {}          # (project, requestId) -> Operation
        self.images = {}               # (project, name) -> compute#image (with _keys, images.py)
        # VMs' private addresses exist only in the backend's own namespace
        self.net = Pool(net_cidr, private_ok=getattr(bodies, "private_network", False))
        self.nat = Pool(nat_cidr)
        self.created = 0               # instances admitted since start (never_boot_nth)
        self.stopping = False
        self.addressed = 0             # bumped when an instance gets or gives back its networkIP
        self.named = 0                 # the value of `addressed` the backend's DNS was last told
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()
        if hasattr(bodies, "alive"):
            threading.Thread(target=self._watch, daemon=True).start()

    # ----------------------------------------------------------- links

    def link(self, *parts):
        return self.base + "/".join(parts)

    def zone_link(self, project, zone):
        return self.link("projects", project, "zones", zone)

    # ------------------------------------------------------ operations

    def _new_op(self, project, scope, kind, op_type, target_link, principal, request_id):
        t = time.time()
        name = "operation-%d-%s-%s-%s" % (int(t * 1000), secrets.token_hex(7)[:13],
                                          secrets.token_hex(4), secrets.token_hex(4))
        res = {"kind": "compute#operation", "id": new_id(), "name": name,
               "operationType": op_type, "targetLink": target_link, "status": "PENDING",
               "user": principal, "progress": 0, "insertTime": now_stamp(t),
               "selfLink": self.link("projects", project, scope, "operations", name)}
        if scope.startswith("zones/"):
            res["zone"] = self.zone_link(project, scope[6:])
        if scope.startswith("regions/"):
            res["region"] = self.link("projects", project, scope)
        if request_id:
            res["clientOperationId"] = request_id
        op = Operation(res, kind, self.faults.op_delay())
        op.project, op.scope = project, scope
        self.ops[(project, scope, name)] = op
        self.active.append(op)
        if request_id:
            self.request_ids[(project, request_id)] = op
        return op

    def replay(self, project, request_id):
        """The operation an earlier call with REQUEST_ID made, or None."""
        op = self.request_ids.get((project, request_id)) if request_id else None
        return op

    def get_op(self, project, scope, name):
        op = self.ops.get((project, scope, name))
        if op is None:
            raise not_found("projects/%s/%s/operations/%s" % (project, scope, name))
        return op

    def wait_op(self, op, timeout):
        end = time.time() + timeout
        with self.lock:
            while op.res["status"] != "DONE" and time.time() < end and not self.stopping:
                self.lock.wait(min(0.5, max(end - time.time(), 0.01)))
            return dict(op.res)

    def _op_running(self, op, t):
        op.res["status"] = "RUNNING"
        op.res["startTime"] = now_stamp(t)

    def _op_done(self, op, t, errors=None, http=None):
        if op.res["status"] == "PENDING":
            op.res["startTime"] = now_stamp(t)
        op.res.update(status="DONE", progress=100, endTime=now_stamp(t))
        if errors:
            op.res["error"] = {"errors": errors}
            op.res["httpErrorStatusCode"], op.res["httpErrorMessage"] = http
        if op in self.active:
            self.active.remove(op)

    # ------------------------------------------------------- instances

    def find_instance(self, project, zone, name):
        inst = self.instances.get((project, zone, name))
        if inst is None or not inst.visible:
            raise not_found("projects/%s/zones/%s/instances/%s" % (project, zone, name))
        return inst

    def visible_instances(self, project, zone=None):
        return [i for (p, z, _), i in sorted(self.instances.items())
                if p == project and (zone is None or z == zone) and i.visible]

    def insert(self, project, zone, res, spec, principal, request_id):
        """Starts instances.insert; returns the operation (409 if the name is taken)."""
        key = (project, zone, res["name"])
        if key in self.instances:
            raise already_exists("projects/%s/zones/%s/instances/%s" % key)
        inst = Instance(project, zone, res["name"], res, spec)
        self.instances[key] = inst
        op = self._new_op(project, "zones/" + zone, "insert", "insert",
                          self.link("projects", project, "zones", zone, "instances", res["name"]),
                          principal, request_id)
        res["id"] = new_id()
        op.res["targetId"] = res["id"]
        op.targets = [inst]
        return op

    def bulk_insert(self, project, zone, plan, principal, request_id):
        """Starts instances.bulkInsert; PLAN is (count, min_count, pattern, names, make)
        where make(name) gives (res, spec) for one instance."""
        op = self._new_op(project, "zones/" + zone, "bulkInsert", "bulkInsert",
                          self.link("projects", project, "zones", zone, "instances"),
                          principal, request_id)
        op.res["operationGroupId"] = op.res["id"]
        op.payload = plan
        return op

    def delete(self, project, zone, name, principal, request_id):
        inst = self.find_instance(project, zone, name)
        if inst.deleting:
            raise ApiError(400, "resourceNotReady",
                           "The resource 'projects/%s/zones/%s/instances/%s' is not ready" % (project, zone, name))
        for img in self.images.values():
            if img["status"] == "PENDING" and img["_instance"] == name and img["_zone"] == zone:
                raise ApiError(400, "resourceInUseByAnotherResource",
                               "The disk resource '%s' is already being used by '%s'"
                               % (img["sourceDisk"][len(self.base):],
                                  img["selfLink"][len(self.base):]))
        if inst.res.get("deletionProtection"):
            raise ApiError(400, "resourceInUseByAnotherResource",
                           "Invalid resource usage: 'Resource cannot be deleted if it's protected against deletion.'.")
        op = self._new_op(project, "zones/" + zone, "delete", "delete",
                          inst.res["selfLink"], principal, request_id)
        op.res["targetId"] = inst.res["id"]
        op.targets = [inst]
        inst.deleting = True
        return op

    def power(self, project, zone, name, on, principal, request_id):
        """instances.start (ON) or instances.stop; a start of a RUNNING or a
        stop of a TERMINATED instance is an operation that changes nothing."""
        inst = self.find_instance(project, zone, name)
        status = inst.res["status"]
        busy = inst.deleting or status in ("PROVISIONING", "STOPPING") or \
            (status == "STAGING" and not on)
        if busy or (on and status not in ("TERMINATED", "RUNNING", "STAGING")):
            raise ApiError(400, "resourceNotReady",
                           "The resource 'projects/%s/zones/%s/instances/%s' is not ready" % (project, zone, name))
        kind = "start" if on else "stop"
        op = self._new_op(project, "zones/" + zone, kind, kind, inst.res["selfLink"], principal, request_id)
        op.res["targetId"] = inst.res["id"]
        op.targets = [inst]
        op.payload = status == ("RUNNING" if on else "TERMINATED")   # nothing to do
        return op

    def guest_shutdown(self, project, zone, name):
        """The guest powers itself off (its power button, `poweroff`): the
        instance must be RUNNING (else ValueError); returns the system
        operation."""
        inst = self._running(project, zone, name)
        return self._system_stop(inst, time.time(), "compute.instances.guestTerminate")

    def preempt(self, project, zone, name, notice=0.0):
        """Compute Engine preempts a Spot or preemptible instance: `preempted`
        becomes TRUE in its metadata and the instance STOPPING at once; the
        guest has NOTICE seconds (30 on Compute Engine) before its machine
        ends, then it is TERMINATED (or deleted: Spot with
        instanceTerminationAction DELETE).  ValueError when it is not
        RUNNING or not preemptible, or NOTICE is not 0 to 600."""
        inst = self._running(project, zone, name)
        sched = inst.res.get("scheduling", {})
        if not (sched.get("preemptible") or sched.get("provisioningModel") == "SPOT"):
            raise ValueError("instance %s is neither Spot nor preemptible" % name)
        notice = float(notice)
        if not 0 <= notice <= 600:
            raise ValueError("notice must be 0 to 600 seconds, not %s" % notice)
        inst.preempted = True
        if self.bodies is not None and hasattr(self.bodies, "preempt_notice"):
            self.bodies.preempt_notice(inst)      # a VM's metadata file says so now
        delete = sched.get("instanceTerminationAction") == "DELETE"
        return self._system_stop(inst, time.time(), "compute.instances.preempted",
                                 "Instance was preempted.", delete, notice)

    def _running(self, project, zone, name):
        inst = self.instances.get((project, zone, name))
        if inst is None or not inst.visible or inst.gone:
            raise ValueError("no instance %s in %s/%s" % (name, project, zone))
        if inst.res["status"] != "RUNNING" or inst.deleting:
            raise ValueError("instance %s is %s, not RUNNING" % (name, inst.res["status"]))
        return inst

    def _system_stop(self, inst, t, op_type, message=None, delete=False, hold=0.0):
        """Compute Engine's own stop (or delete) of INST, RUNNING now: a zonal
        operation by SYSTEM_USER, RUNNING at once, while the instance goes
        STOPPING and its machine ends HOLD seconds later (world's usual stop
        and delete steps)."""
        kind = "delete" if delete else "stop"
        op = self._new_op(inst.project, "zones/" + inst.zone, kind, op_type, inst.res["selfLink"],
                          SYSTEM_USER, None)
        op.res["targetId"] = inst.res["id"]
        op.targets = [inst]
        op.payload = False
        if message:
            op.res["statusMessage"] = message
        self._op_running(op, t)
        inst.res["status"] = "STOPPING"
        inst.deleting = delete
        inst.powering_off = not delete
        inst.stage_at = t + op.delay + hold
        inst.delay = op.delay
        return op

    # ---------------------------------------------------------- images

    def image_insert(self, project, res, inst, principal, request_id):
        self.images[(project, res["name"])] = res
        op = self._new_op(project, "global", "imgInsert", "insert", res["selfLink"], principal, request_id)
        op.res["targetId"] = res["id"]
        op.payload = (res, inst)
        return op

    def image_delete(self, project, name, principal, request_id):
        res = self.images.get((project, name))
        if res is None:
            raise not_found("projects/%s/global/images/%s" % (project, name))
        if res["status"] != "READY" or res.get("_deleting"):
            raise ApiError(400, "resourceNotReady",
                           "The resource 'projects/%s/global/images/%s' is not ready" % (project, name))
        res["_deleting"] = True
        op = self._new_op(project, "global", "imgDelete", "delete", res["selfLink"], principal, request_id)
        op.res["targetId"] = res["id"]
        op.payload = res
        return op

    # ------------------------------------------------------- firewalls

    def firewall_insert(self, project, res, principal, request_id):
        key = (project, res["name"])
        if key in self.firewalls:
            raise already_exists("projects/%s/global/firewalls/%s" % key)
        self.firewalls[key] = None
        op = self._new_op(project, "global", "fwInsert", "insert", res["selfLink"], principal, request_id)
        op.res["targetId"] = res["id"]
        op.payload = res
        return op

    def firewall_delete(self, project, name, principal, request_id):
        res = self.firewalls.get((project, name))
        if res is None:
            raise not_found("projects/%s/global/firewalls/%s" % (project, name))
        op = self._new_op(project, "global", "fwDelete", "delete", res["selfLink"], principal, request_id)
        op.res["targetId"] = res["id"]
        op.payload = name
        return op

    # --------------------------------------------------------- routers

    def router_insert(self, project, region, res, principal, request_id):
        key = (project, region, res["name"])
        if key in self.routers:
            raise already_exists("projects/%s/regions/%s/routers/%s" % key)
        self.routers[key] = None
        op = self._new_op(project, "regions/" + region, "rtInsert", "insert", res["selfLink"],
                          principal, request_id)
        op.res["targetId"] = res["id"]
        op.payload = res
        return op

    def router_delete(self, project, region, name, principal, request_id):
        res = self.routers.get((project, region, name))
        if res is None:
            raise not_found("projects/%s/regions/%s/routers/%s" % (project, region, name))
        op = self._new_op(project, "regions/" + region, "rtDelete", "delete", res["selfLink"],
                          principal, request_id)
        op.res["targetId"] = res["id"]
        op.payload = (region, name)
        return op

    # ------------------------------------------------------------ clock

    def _dns_table(self):
        """{(project, network): [(zone, name, networkIP)]} of the instances
        that hold an address (PROVISIONING on, until deleted)."""
        table = {}
        for (project, zone, name), inst in sorted(self.instances.items()):
            nic = inst.res["networkInterfaces"][0]
            if inst.gone or not inst.visible or not nic.get("networkIP"):
                continue
            net = nic.get("network", "global/networks/default").rsplit("/", 1)[-1]
            table.setdefault((project, net), []).append((zone, name, nic["networkIP"]))
        return table

    def _tick(self):
        dns = getattr(self.bodies, "dns", None)
        while True:
            table = None
            with self.lock:
                if self.stopping:
                    return
                t = time.time()
                for op in list(self.active):
                    try:
                        self._advance_op(op, t)
                    except Exception:           # an emulator bug: fail this operation, loudly
                        traceback.print_exc()
                        self._op_done(op, t, [{"code": "EMULATOR_BUG", "message": traceback.format_exc(limit=1)}],
                                      (500, "INTERNAL SERVER ERROR"))
                for inst in list(self.instances.values()):
                    try:
                        self._advance_instance(inst, t)
                    except Exception:
                        traceback.print_exc()
                if dns is not None and self.named != self.addressed:
                    self.named = self.addressed
                    table = self._dns_table()
                self.lock.notify_all()
            if table is not None:      # outside the lock; only this thread writes
                try:
                    dns(table)
                except Exception:       # an emulator bug: say so, keep ticking
                    traceback.print_exc()
            time.sleep(0.02)

    def _advance_op(self, op, t):
        if op.res["status"] == "PENDING":
            if t < op.next_at:
                return
            getattr(self, "_admit_" + op.kind)(op, t)
            return
        if op.kind in ("fwInsert", "fwDelete", "rtInsert", "rtDelete"):
            if t >= op.next_at:
                if op.kind == "fwInsert":
                    self.firewalls[(op.project, op.payload["name"])] = op.payload
                elif op.kind == "fwDelete":
                    self.firewalls.pop((op.project, op.payload), None)
                elif op.kind == "rtInsert":
                    region = op.scope[len("regions/"):]
                    self.routers[(op.project, region, op.payload["name"])] = op.payload
                else:
                    self.routers.pop((op.project,) + op.payload, None)
                self._op_done(op, t)
            return
        if op.kind == "delete":
            if all(i.gone for i in op.targets):
                self._op_done(op, t)
            return
        if op.kind in ("imgInsert", "imgDelete"):
            self._advance_image(op, t)
            return
        if op.kind == "stop":
            if all(i.gone or i.res["status"] == "TERMINATED" for i in op.targets):
                self._op_done(op, t)
            return
        if all(i.gone or i.res["status"] in ("RUNNING", "TERMINATED") for i in op.targets):
            failed = [i for i in op.targets if i.body_error]
            if failed:
                self._op_done(op, t, [{"code": "EMULATOR_NODE_BODY_FAILED",
                                       "message": "node body of %s: %s" % (i.name, i.body_error)}
                                      for i in failed], (500, "INTERNAL SERVER ERROR"))
            else:
                if op.kind == "bulkInsert":
                    self._bulk_status(op, "DONE")
                self._op_done(op, t)

    def _admit_fwInsert(self, op, t):
        self._op_running(op, t)
        op.next_at = t + op.delay

    def _admit_fwDelete(self, op, t):
        self._op_running(op, t)
        op.next_at = t + op.delay

    _admit_rtInsert = _admit_fwInsert
    _admit_rtDelete = _admit_fwDelete

    def _admit_stop(self, op, t):
        self._op_running(op, t)
        inst = op.targets[0]
        if op.payload or inst.gone or inst.res["status"] in ("STOPPING", "TERMINATED"):
            return                     # e.g. the guest shut down while this stop was PENDING
        inst.res["status"] = "STOPPING"
        inst.powering_off = True
        inst.stage_at = t + op.delay
        inst.delay = op.delay

    def _admit_start(self, op, t):
        self._op_running(op, t)
        inst = op.targets[0]
        if op.payload or inst.gone:
            return
        inst.res["status"] = "STAGING"
        inst.res.pop("statusMessage", None)
        inst.preempted = False
        inst.stage_at = t + op.delay
        inst.delay = op.delay
        self._body_launch(inst)

    def _admit_imgInsert(self, op, t):
        self._op_running(op, t)
        res, inst = op.payload
        op.copy = "none"
        if self.bodies is not None and hasattr(self.bodies, "make_image"):
            op.copy = "running"
            threading.Thread(target=self._image_copy, args=(op, res, inst), daemon=True).start()
        op.next_at = t + op.delay

    def _admit_imgDelete(self, op, t):
        self._op_running(op, t)
        op.next_at = t + op.delay

    def _image_copy(self, op, res, inst):
        err = None
        try:
            err = self.bodies.make_image(inst, op.project, res)
        except Exception as e:          # a backend failure fails the operation
            err = str(e)
        with self.lock:
            op.copy = ("failed: " + err) if err else "done"

    def _advance_image(self, op, t):
        if t < op.next_at:
            return
        if op.kind == "imgDelete":
            res = op.payload
            self.images.pop((op.project, res["name"]), None)
            if self.bodies is not None and hasattr(self.bodies, "drop_image"):
                self.bodies.drop_image(op.project, res)
            self._op_done(op, t)
            return
        if op.copy == "running":
            return
        res = op.payload[0]
        if op.copy.startswith("failed"):
            self.images.pop((op.project, res["name"]), None)
            self._op_done(op, t, [{"code": "EMULATOR_IMAGE_COPY_FAILED", "message": op.copy}],
                          (500, "INTERNAL SERVER ERROR"))
            return
        res["status"] = "READY"
        self._op_done(op, t)

    def _admit_delete(self, op, t):
        self._op_running(op, t)
        for inst in op.targets:
            inst.res["status"] = "STOPPING"
            inst.stage_at = t + op.delay
            inst.delay = op.delay

    def _admit_insert(self, op, t):
        inst = op.targets[0]
        refusal = self._refusal(op.project, inst.zone, [inst.spec])
        if refusal:
            del self.instances[(inst.project, inst.zone, inst.name)]
            inst.gone = True
            self._op_done(op, t, *refusal)
            return
        self._launch(inst, op, t)
        self._op_running(op, t)

    def _admit_bulkInsert(self, op, t):
        count, min_count, pattern, names, make = op.payload
        zone = op.scope[6:]
        existing = 0
        if names is None:
            names = self._pattern_names(op.project, zone, pattern, count)
        else:
            taken = [n for n in names if (op.project, zone, n) in self.instances]
            existing = len(taken)
            names = [n for n in names if n not in taken]
        made = [make(n) for n in names]
        allowed = len(made)
        refusal = self._refusal(op.project, zone, [s for _, s in made])
        if refusal and refusal[0][0]["code"] == "QUOTA_EXCEEDED":
            while allowed > 0 and self._refusal(op.project, zone, [s for _, s in made[:allowed]]):
                allowed -= 1
            if existing + allowed >= min_count:
                refusal = None
                made = made[:allowed]
        if refusal:
            self._bulk_status(op, "DONE", failed=len(made))
            self._op_done(op, t, *refusal)
            return
        self._op_running(op, t)
        for res, spec in made:
            res["id"] = new_id()
            inst = Instance(op.project, zone, res["name"], res, spec)
            self.instances[(op.project, zone, res["name"])] = inst
            self._launch(inst, op, t)
            op.targets.append(inst)
        op.bulk_counts = (count, existing + len(made))
        self._bulk_status(op, "CREATING")

    def _bulk_status(self, op, status, failed=0):
        count, created = getattr(op, "bulk_counts", (op.payload[0], 0))
        op.res["instancesBulkInsertOperationMetadata"] = {"perLocationStatus": {
            "zones/" + op.scope[6:]: {"status": status, "targetVmCount": count,
                                      "createdVmCount": created, "failedToCreateVmCount": failed,
                                      "deletedVmCount": 0}}}

    def _pattern_names(self, project, zone, pattern, count):
        hashes = len(pattern) - len(pattern.replace("#", ""))
        pre, post = pattern.split("#" * hashes)
        top = 0
        for (p, z, n) in self.instances:
            if p == project and z == zone and n.startswith(pre) and n.endswith(post):
                mid = n[len(pre):len(n) - len(post)] if post else n[len(pre):]
                if mid.isdigit():
                    top = max(top, int(mid))
        return ["%s%0*d%s" % (pre, hashes, top + k, post) for k in range(1, count + 1)]

    def _refusal(self, project, zone, specs):
        """(errors, (http code, message)) when these new instances cannot be made."""
        if zone in self.faults.snapshot()["stockout"]:
            return ([{"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                      "message": "The zone 'projects/%s/zones/%s' does not have enough resources "
                                 "available to fulfill the request.  Try a different zone, or try "
                                 "again later." % (project, zone)}], (503, "SERVICE UNAVAILABLE"))
        region = catalog.region_of(zone)
        quota = self.faults.snapshot()["quota"]
        for metric, limit in sorted(quota.items()):
            used = sum(self._usage(i.spec, metric) for (p, z, _), i in self.instances.items()
                       if p == project and catalog.region_of(z) == region and i.visible and not i.gone)
            want = sum(self._usage(s, metric) for s in specs)
            if want and used + want > limit:
                return ([{"code": "QUOTA_EXCEEDED",
                          "message": "Quota '%s' exceeded.  Limit: %.1f in region %s." % (metric, limit, region),
                          "errorDetails": [{"quotaInfo": {
                              "metricName": "compute.googleapis.com/%s" % metric.lower(),
                              "limitName": "%s-per-project-region" % metric.replace("_", "-"),
                              "dimensions": {"region": region}, "limit": limit}}]}],
                        (403, "FORBIDDEN"))
        if len(self.net.free) < len(specs) or len(self.nat.free) < sum(1 for s in specs if s["nat"]):
            return ([{"code": "IP_SPACE_EXHAUSTED",
                      "message": "IP space of 'projects/%s/regions/%s/subnetworks/default' is exhausted."
                                 % (project, region)}], (400, "BAD REQUEST"))
        return None

    @staticmethod
    def _usage(spec, metric):
        if metric == "INSTANCES":
            return 1
        if metric == "CPUS":
            return catalog.MACHINE_TYPES[spec["machine_type"]][0]
        return sum(n for t, n in spec["accelerators"] if catalog.ACCELERATOR_TYPES[t][2] == metric)

    def _launch(self, inst, op, t):
        """Makes an admitted instance visible, PROVISIONING, with its addresses."""
        nic = inst.res["networkInterfaces"][0]
        nic["networkIP"] = self.net.take(inst.spec.get("network_ip"))
        for ac in nic.get("accessConfigs", []):
            ac["natIP"] = self.nat.take()
        self.addressed += 1
        inst.res["status"] = "PROVISIONING"
        inst.res["creationTimestamp"] = now_stamp(t)
        inst.visible = True
        inst.delay = op.delay
        inst.stage_at = t + op.delay
        self.created += 1
        f = self.faults.snapshot()
        inst.never_boot = inst.name in f["never_boot"] or self.created == f["never_boot_nth"]

    def _advance_instance(self, inst, t):
        if inst.gone or not inst.visible or t < inst.stage_at:
            return
        status = inst.res["status"]
        if status == "PROVISIONING" and not inst.deleting:
            inst.res["status"] = "STAGING"
            inst.stage_at = t + inst.delay
            self._body_launch(inst)
        elif status == "STAGING" and not inst.deleting and inst.body != "starting":
            if inst.body == "failed":
                inst.res["status"] = "TERMINATED"
                inst.res["statusMessage"] = "node body failed: %s" % inst.body_error
            else:
                inst.res["status"] = "RUNNING"
                inst.res["lastStartTimestamp"] = now_stamp(t)
        elif status == "STOPPING" and inst.powering_off and not inst.deleting:
            if inst.body in ("up", "failed"):
                inst.body = "stopping"
                threading.Thread(target=self._body_power_off, args=(inst,), daemon=True).start()
            elif inst.body not in ("stopping", "starting"):
                inst.powering_off = False
                inst.res["status"] = "TERMINATED"
                inst.res["lastStopTimestamp"] = now_stamp(t)
        elif status == "STOPPING" and inst.body != "starting":
            inst.powering_off = False
            if inst.body in ("up", "failed", "off"):
                inst.body = "stopping"
                threading.Thread(target=self._body_stop, args=(inst,), daemon=True).start()
            elif inst.body != "stopping":
                self._remove(inst)

    def _remove(self, inst):
        nic = inst.res["networkInterfaces"][0]
        self.net.give(nic.get("networkIP"))
        for ac in nic.get("accessConfigs", []):
            self.nat.give(ac.get("natIP"))
        inst.gone = True
        inst.visible = False
        self.instances.pop((inst.project, inst.zone, inst.name), None)
        self.addressed += 1

    def _body_start(self, inst):
        err = self.bodies.start(inst)
        with self.lock:
            inst.body, inst.body_error = ("failed", err) if err else ("up", None)
            late = self.stopping
        if late:                       # shutdown() has already passed this one
            self.bodies.stop(inst)

    def _body_launch(self, inst):
        inst.boots += 1
        if self.bodies is None or inst.never_boot:
            inst.body = "skipped"
        else:
            inst.body = "starting"
            threading.Thread(target=self._body_start, args=(inst,), daemon=True).start()

    # ------------------------------------------------- guest shutdowns

    def _watch(self):
        """Every WATCH_PERIOD: RUNNING instances whose machine ended by itself
        (bodies.alive(inst) is False) are shut down as Compute Engine does.
        The backend is asked outside the lock; an instance is taken only if
        it is still RUNNING on the same boot."""
        while not self.stopping:
            time.sleep(WATCH_PERIOD)
            with self.lock:
                up = [(i, i.boots) for i in self.instances.values() if self._watched(i)]
            dead = []
            for inst, boot in up:
                try:
                    if self.bodies.alive(inst) is False:
                        dead.append((inst, boot))
                except Exception:       # an emulator bug: say so, keep watching
                    traceback.print_exc()
            if not dead:
                continue
            with self.lock:
                t = time.time()
                for inst, boot in dead:
                    if self._watched(inst) and inst.boots == boot and not self.stopping:
                        self._system_stop(inst, t, "compute.instances.guestTerminate")
                self.lock.notify_all()

    @staticmethod
    def _watched(inst):
        return (inst.visible and not inst.gone and not inst.deleting and inst.body == "up"
                and inst.res["status"] == "RUNNING")

    def _body_power_off(self, inst):
        off = getattr(self.bodies, "power_off", self.bodies.stop)
        off(inst)
        with self.lock:
            inst.body = "off"

    def _body_stop(self, inst):
        self.bodies.stop(inst)
        with self.lock:
            inst.body = "stopped"

    def shutdown(self):
        """Stops the clock and every node body."""
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
            insts = [i for i in self.instances.values() if i.body in ("up", "starting", "failed", "off")]
        if self.bodies is not None:
            for inst in insts:
                self.bodies.stop(inst)
            if hasattr(self.bodies, "close"):
                self.bodies.close()
