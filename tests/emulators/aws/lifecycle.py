"""lifecycle.py - what EC2 does with an instance's power and with images
made from it that moto (5.2) does not, patched into the moto that
ec2_harness.py runs in its own process (Lifecycle.install):

- StopInstances: the instance is `stopping` until its node body or VM is
  powered off (the harness's bodies loop calls stopped()), then
  `stopped`; its disk stays.  Stopping a stopped instance is a no-op; one
  that is pending, shutting down or terminated: IncorrectInstanceState.
- A one-time Spot instance cannot be stopped (UnsupportedOperation).
- A guest that powers itself off (the harness's bodies loop sees its body
  or VM end) is stopped as by StopInstances, with StateReason
  Client.InstanceInitiatedShutdown (guest_stopped()); with shutdown
  behaviour `terminate`, and a Spot instance always, it is terminated.
- StartInstances of a stopped instance: `pending`, then `running` (the
  bodies loop starts its body, or boots its VM from the same disk); of a
  running one: a no-op; of one stopping, shutting down or terminated:
  IncorrectInstanceState.
- CreateImage: the name is 3 to 128 characters of a-z A-Z 0-9 ( ) [ ] . /
  - ' @ _ and space (InvalidAMIName.Malformed) and not the name of another
  of the account's AMIs (InvalidAMIName.Duplicate); the instance is
  running (EC2 reboots it unless NoReboot=true: its body or VM is powered
  off and started again) or stopped, never pending, stopping, shutting
  down or terminated (IncorrectInstanceState).  TagSpecifications of
  ResourceType `snapshot` tag the AMI's snapshot (moto raises
  NotImplementedError); any other type but `image` is refused.  The AMI
  is `pending` until the instance's disk is copied (image_done(); with
  VMs a qemu-img convert into STATE/vm/images/aws/AMI, else after
  --image-delay seconds), then `available`, or `failed` with a
  stateReason when the copy failed.
- DeregisterImage also drops the AMI's disk copy; RunInstances of such an
  AMI boots from it (disk_of()).  DeleteSnapshot of a snapshot of a
  registered AMI is refused by moto itself (InvalidSnapshot.InUse).
"""

import copy
import re
import threading

import moto.ec2.models.amis as moto_amis
import moto.ec2.models.instances as moto_instances
import moto.ec2.responses.amis as moto_ami_responses
from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.instances import StateReason

AMI_NAME = re.compile(r"^[A-Za-z0-9()\[\] ./\-'@_]{3,128}$")
PENDING, RUNNING, STOPPING, STOPPED = (0, "pending"), (16, "running"), (64, "stopping"), (80, "stopped")


def _set(inst, state):
    inst._state.code, inst._state.name = state


def _incorrect(inst, action):
    return EC2ClientError("IncorrectInstanceState",
                          "The instance '%s' is not in a state from which it can be %s."
                          % (inst.id, action))


class Lifecycle:
    def __init__(self, machines, image_delay=1.0, start_delay=0.3):
        """machines: whether a bodies loop powers instances off and copies
        their disks (else the state changes happen on timers)."""
        self.machines = machines
        self.image_delay = image_delay
        self.start_delay = start_delay
        self.lock = threading.Lock()
        self.instances = {}     # id -> moto Instance stopping or imaged
        self.copies = []        # (ami id, instance id, no_reboot) to copy
        self.amis = {}          # ami id -> moto Ami
        self.disks = {}         # ami id -> directory of its disk copy

    # -------------------------------------------------- the bodies loop
    def take_copies(self):
        with self.lock:
            c, self.copies = self.copies, []
        return c

    def stopped(self, iid):
        """The body or VM of instance IID is off: `stopping` -> `stopped`."""
        with self.lock:
            inst = self.instances.get(iid)
        if inst is not None and inst._state.name == "stopping":
            _set(inst, STOPPED)

    @staticmethod
    def guest_initiated(inst):
        """The stop or termination of moto instance INST was its guest's own
        shutdown, not StopInstances or TerminateInstances: the StateReason
        EC2 gives for that."""
        if inst is not None:
            inst.state_reason = StateReason("Client.InstanceInitiatedShutdown: Instance initiated shutdown",
                                            "Client.InstanceInitiatedShutdown")

    def image_done(self, ami_id, error=None, disk_dir=None):
        with self.lock:
            ami = self.amis.get(ami_id)
            if disk_dir:
                self.disks[ami_id] = disk_dir
        if ami is None:
            return
        if error:
            ami.state = "failed"
            ami.state_reason = {"Code": "Server.InternalError", "Message": error}
        elif ami.state == "pending":
            ami.state = "available"

    def disk_of(self, ami_id):
        """The directory of the disk copy behind AMI_ID, or None."""
        with self.lock:
            return self.disks.get(ami_id)

    def forget_disk(self, ami_id):
        with self.lock:
            return self.disks.pop(ami_id, None)

    # ---------------------------------------------------------- patches
    def install(self, on_deregister=None):
        life = self
        inst_stop, inst_start = moto_instances.Instance.stop, moto_instances.Instance.start
        create_image = moto_amis.AmiBackend.create_image
        deregister = moto_amis.AmiBackend.deregister_image

        def stop(inst):
            state = inst._state.name
            if inst.lifecycle == "spot":
                raise EC2ClientError("UnsupportedOperation",
                                     "You can't stop the Spot Instance '%s' because it is associated "
                                     "with a one-time Spot Instance request." % inst.id)
            if state == "stopped":
                return inst_stop(inst)
            if state != "running" and state != "stopping":
                raise _incorrect(inst, "stopped")
            prev = inst_stop(inst)
            _set(inst, STOPPING)
            with life.lock:
                life.instances[inst.id] = inst
            if not life.machines:
                threading.Timer(0.2, life.stopped, args=(inst.id,)).start()
            return prev

        def start(inst):
            state = inst._state.name
            if state in ("running", "pending"):
                return copy.copy(inst._state)
            if state != "stopped":
                raise _incorrect(inst, "started")
            prev = inst_start(inst)
            _set(inst, PENDING)
            threading.Timer(life.start_delay, _running, args=(inst,)).start()
            return prev

        def _running(inst):
            if inst._state.name == "pending":
                _set(inst, RUNNING)

        def backend_create_image(backend, instance_id, name, description, tag_specifications,
                                 no_reboot=False):
            inst = backend.get_instance(instance_id)
            if not isinstance(name, str) or not AMI_NAME.match(name):
                raise EC2ClientError("InvalidAMIName.Malformed",
                                     "AMI names must be between 3 and 128 characters long, and "
                                     "may contain letters, numbers, '(', ')', '.', '-', '/' and '_'")
            if any(a.name == name for a in backend.describe_images(owners=["self"])):
                raise EC2ClientError("InvalidAMIName.Duplicate",
                                     "AMI name %s is already in use by AMI %s" % (name, next(
                                         a.id for a in backend.describe_images(owners=["self"])
                                         if a.name == name)))
            if inst._state.name not in ("running", "stopped"):
                raise _incorrect(inst, "imaged")
            image_specs, snap_tags = [], []
            for spec in tag_specifications:
                if spec.get("ResourceType") == "snapshot":
                    snap_tags += spec.get("Tags", [])
                else:
                    image_specs.append(spec)
            ami = create_image(backend, instance_id, name, description, image_specs)
            for t in snap_tags:
                ami.ebs_snapshot.add_tag(t["Key"], t["Value"])
            ami.state = "pending"
            with life.lock:
                life.amis[ami.id] = ami
                life.instances[inst.id] = inst
                if life.machines:
                    life.copies.append((ami.id, inst.id, no_reboot))
            if not life.machines:
                threading.Timer(life.image_delay, life.image_done, args=(ami.id,)).start()
            return ami

        def response_create_image(resp):
            name = resp._get_param("Name")
            description = resp._get_param("Description", "")
            instance_id = resp._get_param("InstanceId")
            no_reboot = str(resp._get_param("NoReboot", "false")).lower() == "true"
            specs = resp._get_param("TagSpecifications", [])
            resp.error_on_dryrun()
            image = backend_create_image(resp.ec2_backend, instance_id, name, description, specs,
                                         no_reboot)
            return ActionResult({"ImageId": image.id})

        def backend_deregister(backend, ami_id):
            deregister(backend, ami_id)
            with life.lock:
                life.amis.pop(ami_id, None)
            if on_deregister:
                on_deregister(ami_id)

        moto_instances.Instance.stop = stop
        moto_instances.Instance.start = start
        moto_amis.AmiBackend.create_image = backend_create_image
        moto_amis.AmiBackend.deregister_image = backend_deregister
        moto_ami_responses.AmisResponse.create_image = response_create_image
