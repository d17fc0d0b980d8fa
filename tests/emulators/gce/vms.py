"""vms.py - booted Debian 12 VMs as the emulator's instances (`--backend
vm`), in place of node bodies (bodies.py).  Same interface: start(inst)
when an instance reaches STAGING, stop(inst) when it is deleted, close()
when the emulator exits; power_off(inst) for instances.stop (QEMU
ended, the disk kept: a later start(inst) boots the same disk); alive(inst),
False once QEMU has exited by itself (the guest powered off: `systemctl
poweroff`, or ACPI's power button; a guest reboot restarts the machine in
the same QEMU, as a Compute Engine instance stays RUNNING through one),
which the emulator turns into a TERMINATED instance with its disk kept;
make_image / drop_image for images.insert / delete: an image is a
directory like --vm-image's (rootfs.img converted from the instance's
qcow2 disk, the kernel and initrd of the image the instance booted from),
and an instance whose sourceImage is such an image boots from it.

A VM here is what Compute Engine runs: QEMU (TCG: this machine kind has no
usable KVM, tests/vm/README.md) booting an image made by tests/vm/image.sh,
with systemd as PID 1, Google's guest agent making the login users from
the `ssh-keys` metadata, and no SLURM until pbx's bootstrap installs it.

The network is a cloud's, inside a network namespace this emulator makes
and removes (nothing else on this machine is addressed):

- a bridge is the VPC subnet (--network-block, e.g. 10.128.0.0/20; the
  gateway is its first address); each VM's tap joins it;
- dnsmasq there answers DHCP (each instance's networkIP and MAC, derived
  from the address as Compute Engine does, and its name as hostname) and
  DNS (instance names, metadata.google.internal; deb.debian.org as the
  gateway, nothing else);
- metadata.py serves each VM its metadata on 169.254.169.254:80;
- the gateway's port 80 reaches the Debian mirror through a forward out of
  the namespace (socat pairs over a unix socket): the part of Cloud NAT
  that apt needs, and the only way out;
- with `api` (the emulator's own 127.0.0.1:PORT) and an image that has the
  test world's CA (tests/vm/image.sh: DIR/world-ca.key and .crt; the image
  trusts the certificate), the cloud's API host names (the flavour's
  `api_names`: compute.googleapis.com) resolve to the gateway, whose port
  443 serves https with a certificate for them made from that CA and
  forwards the plain requests out of the namespace to the emulator: a
  head's pbx calls "Compute Engine" at its real address, with tokens from
  the metadata server, which asks the emulator for them over the same
  socket (metadata.py --mint-socket);
- an instance with an access config (natIP, a loopback address here) is
  reachable from this machine at natIP:--ssh-port, forwarded to its port
  22; an instance without one only from the other VMs, as on Compute
  Engine (pbx reaches it through the head).

What is cloud-specific is a flavour: GceFlavour (the default: the
metadata server, Compute Engine's MACs, DHCP host names and DNS domains,
the SMBIOS of a Compute Engine VM) or one the caller passes, such as the
EC2 harness's (tests/emulators/aws/ec2_harness.py: IMDS, ec2.internal,
an SMBIOS that cloud-init's ds-identify takes for EC2).  A flavour has
`metadata_server` (the server's argv, run in the namespace with --dir
DIR), `domains`, `dns` (extra dnsmasq --address names),
`addresses(inst)` -> (private IP, public IP or None), `mac(ip)`,
`dhcp_name(inst)`, `metadata(inst, ip, nat, vms)` (the JSON document the
server serves that address), `smbios(inst)` (QEMU -smbios values),
`api_names` (the API's host names the gateway serves) and
`metadata_args(sock)` (the metadata server's extra argv when the API is
served: how it reaches the emulator).  refresh(inst) writes an instance's
metadata document again (a flavour whose document changes: EC2's renewed
role credentials).
"""

import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = ("qemu-system-x86_64", "qemu-img", "ip", "dnsmasq", "socat")


def why_not(image_dir):
    """None when VMs can boot here, else the reason (for SKIPPED lines)."""
    if os.geteuid() != 0:
        return "booted VMs need root (network namespaces, taps)"
    for tool in TOOLS:
        if not shutil.which(tool):
            return "booted VMs need %s (apt-get install qemu-system-x86 qemu-utils iproute2 dnsmasq-base socat)" % tool
    if not os.path.exists("/dev/net/tun"):
        return "booted VMs need /dev/net/tun"
    for f in ("rootfs.img", "vmlinuz", "initrd.img"):
        if not os.path.exists(os.path.join(image_dir, f)):
            return "no VM image in %s (sh tests/vm/image.sh stock %s)" % (image_dir, image_dir)
    return None


def reap_stale():
    """Removes the namespaces (and ends their processes: VMs, dnsmasq, the
    metadata server) of emulators that died without closing them."""
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith("pbxvm-") or not name[6:].isdigit():
            continue
        if os.path.exists("/proc/%s" % name[6:]):
            continue
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def mac_of(ip):
    """Compute Engine's MAC for an address: 42:01 and the address's bytes."""
    return "42:01:" + ":".join("%02x" % b for b in ipaddress.ip_address(ip).packed)


def spot(inst):
    """Whether INST is Spot or preemptible."""
    sched = inst.res.get("scheduling", {})
    return bool(sched.get("preemptible") or sched.get("provisioningModel") == "SPOT")


class GceFlavour:
    """Compute Engine's side of a VM: instances are the emulator's."""
    metadata_server = ["python3", os.path.join(HERE, "metadata.py")]

    # the names a VM reaches the emulator by, each with the paths it serves
    # there (emulator.py refuses the rest): Compute Engine's API, and Cloud
    # Storage's JSON API (storage.py) for a head that stages data itself
    api_paths = {"compute.googleapis.com": ("/compute/v1/", "/batch/compute/v1"),
                 "storage.googleapis.com": ("/storage/v1/", "/upload/storage/v1/", "/download/storage/v1/")}
    api_names = tuple(api_paths)

    def __init__(self, projects=None):
        self.projects = projects or {}
        self.domains = ["c.%s.internal" % p for p in self.projects] or ["internal"]
        self.dns = {"metadata.google.internal": "169.254.169.254"}

    @staticmethod
    def metadata_args(sock):
        """Service accounts' tokens come from the emulator through SOCK."""
        return ["--mint-socket", sock]

    @staticmethod
    def addresses(inst):
        nic = inst.res["networkInterfaces"][0]
        return nic["networkIP"], next((ac.get("natIP") for ac in nic.get("accessConfigs", [])), None)

    @staticmethod
    def mac(ip):
        return mac_of(ip)

    @staticmethod
    def dhcp_name(inst):
        return inst.name

    @staticmethod
    def smbios(inst):
        return ["type=1,manufacturer=Google,product=Google Compute Engine"]

    def metadata(self, inst, ip, nat, vms):
        res = inst.res
        num = str(self.projects.get(inst.project, "0"))
        attrs = {it["key"]: it.get("value", "") for it in res.get("metadata", {}).get("items", [])}
        nic = {"ip": ip, "mac": mac_of(ip), "network": "projects/%s/networks/default" % num,
               "gateway": vms.gateway, "subnetmask": vms.netmask, "mtu": 1460,
               "dnsServers": [vms.gateway], "forwardedIps": [], "forwardedIpv6s": [],
               "targetInstanceIps": [], "ipAliases": [],
               "accessConfigs": [{"externalIp": nat, "type": "ONE_TO_ONE_NAT"}] if nat else []}
        return {
            "instance": {
                "id": int(res.get("id") or 0), "name": inst.name,
                "hostname": "%s.%s.c.%s.internal" % (inst.name, inst.zone, inst.project),
                "zone": "projects/%s/zones/%s" % (num, inst.zone),
                "machineType": "projects/%s/machineTypes/%s" % (num, inst.spec.get("machine_type", "")),
                "attributes": attrs, "tags": res.get("tags", {}).get("items", []),
                "networkInterfaces": [nic], "serviceAccounts": service_accounts(res),
                "maintenanceEvent": "NONE",
                "preempted": "TRUE" if getattr(inst, "preempted", False) else "FALSE",
                "virtualClock": {"driftToken": "0"}, "description": "",
                "cpuPlatform": "Intel Broadwell", "licenses": [], "disks": [],
                "scheduling": {"onHostMaintenance": "TERMINATE", "automaticRestart": "FALSE",
                               "preemptible": "TRUE" if spot(inst) else "FALSE"},
            },
            "project": {"projectId": inst.project, "numericProjectId": int(num), "attributes": {}},
        }


def service_accounts(res):
    """The metadata server's instance/service-accounts/: each account the
    instance runs as, under its e-mail and (the first) under `default`."""
    out = {}
    for i, sa in enumerate(res.get("serviceAccounts") or []):
        entry = {"aliases": ["default"] if i == 0 else [], "email": sa["email"],
                 "scopes": list(sa.get("scopes", []))}
        out[sa["email"]] = entry
        if i == 0:
            out["default"] = entry
    return out


class VMs:
    private_network = True         # networkIP addresses live in our namespace only

    def __init__(self, image_dir, state_dir, ssh_port, net_cidr, upstream="deb.debian.org:80",
                 mem_mb=1024, projects=None, flavour=None, api=None, proxy=None):
        why = why_not(image_dir)
        if why:
            raise ValueError(why)
        self.image = os.path.abspath(image_dir)
        self.dir = os.path.join(os.path.abspath(state_dir), "vm")
        self.meta_dir = os.path.join(self.dir, "meta")
        os.makedirs(self.meta_dir, exist_ok=True)
        self.ssh_port = ssh_port
        self.mem_mb = mem_mb
        self.flavour = flavour or GceFlavour(projects)
        net = ipaddress.ip_network(net_cidr)
        self.gateway = str(next(net.hosts()))
        self.prefix = net.prefixlen
        self.netmask = str(net.netmask)
        self.ns = "pbxvm-%d" % os.getpid()
        self.lock = threading.Lock()
        self.procs = {}            # instance name -> [Popen] (qemu first)
        self.infra = []            # namespace-wide processes
        self.hosts = {}            # instance name -> dhcp-hosts line
        ca = os.path.join(self.image, "world-ca.key")
        self.api = api if api and os.path.exists(ca) and getattr(self.flavour, "api_names", ()) else None
        self._netns_up(upstream)
        if proxy:
            self._proxy_up(proxy)

    @property
    def projects(self):
        """Compute Engine's project numbers (the emulator sets them once its
        world exists); the flavour's metadata needs them."""
        return self.flavour.projects

    @projects.setter
    def projects(self, value):
        self.flavour.projects = value

    # ------------------------------------------------------------ network
    def _ip(self, *args, ns=True):
        argv = ["ip"] + (["-n", self.ns] if ns else []) + list(args)
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            raise OSError("%s: %s" % (" ".join(argv), p.stderr.strip()))

    def _spawn(self, argv, in_ns, log):
        prefix = ["ip", "netns", "exec", self.ns] if in_ns else []
        with open(os.path.join(self.dir, log), "ab") as out:
            return subprocess.Popen(prefix + argv, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def _netns_up(self, upstream):
        reap_stale()
        self._ip("netns", "add", self.ns, ns=False)
        self._ip("link", "set", "lo", "up")
        self._ip("link", "add", "br0", "type", "bridge")
        self._ip("addr", "add", "%s/%d" % (self.gateway, self.prefix), "dev", "br0")
        self._ip("addr", "add", "169.254.169.254/32", "dev", "br0")
        self._ip("link", "set", "br0", "up")
        self.hosts_file = os.path.join(self.dir, "dhcp-hosts")
        open(self.hosts_file, "w").close()
        domains = self.flavour.domains
        self.dnsmasq = self._spawn(
            ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--user=root",
             "--interface=br0", "--bind-interfaces", "--except-interface=lo",
             "--dhcp-range=%s,static,%s,1h" % (self.gateway, self.netmask),
             "--dhcp-hostsfile=" + self.hosts_file, "--dhcp-authoritative",
             "--dhcp-leasefile=" + os.path.join(self.dir, "leases"),
             "--dhcp-option=option:router,%s" % self.gateway,
             "--dhcp-option=option:domain-search,%s" % " ".join(domains),
             "--domain=%s" % domains[0], "--local=/internal/"]
            + ["--address=/%s/%s" % kv for kv in sorted(self.flavour.dns.items())]
            # a name answers for every name under it: a certificate's
            # wildcard ("*.NAME") needs no entry of its own
            + ["--address=/%s/%s" % (n, self.gateway) for n in (self.flavour.api_names if self.api else ())
               if not n.startswith("*.")]
            + ["--address=/deb.debian.org/%s" % self.gateway,
               "--pid-file=" + os.path.join(self.dir, "dnsmasq.pid")], True, "dnsmasq.log")
        self.infra.append(self.dnsmasq)
        api_sock = os.path.join(self.dir, "api.sock")
        self.infra.append(self._spawn(self.flavour.metadata_server + ["--dir", self.meta_dir]
                                      + (self.flavour.metadata_args(api_sock) if self.api else []),
                                      True, "metadata.log"))
        if self.api:
            self._api_up(api_sock)
        apt = os.path.join(self.dir, "apt.sock")
        self.infra.append(self._spawn(["socat", "UNIX-LISTEN:%s,fork,unlink-early" % apt,
                                       "TCP:%s" % upstream], False, "apt.log"))
        self.infra.append(self._spawn(["socat", "TCP-LISTEN:80,bind=%s,fork,reuseaddr" % self.gateway,
                                       "UNIX-CONNECT:%s" % apt], True, "apt.log"))

    def _proxy_up(self, proxy):
        """A site's HTTP proxy (host:port outside the namespace) at the
        gateway's port 3128, forwarded out through a unix socket as apt's
        port 80 is: a template's proxy: http://GATEWAY:3128."""
        sock = os.path.join(self.dir, "proxy.sock")
        self.infra.append(self._spawn(["socat", "UNIX-LISTEN:%s,fork,unlink-early" % sock,
                                       "TCP:%s" % proxy], False, "proxy.log"))
        self.infra.append(self._spawn(["socat", "TCP-LISTEN:3128,bind=%s,fork,reuseaddr" % self.gateway,
                                       "UNIX-CONNECT:%s" % sock], True, "proxy.log"))

    def _api_up(self, sock):
        """The cloud's API on the gateway's port 443 (https, a certificate
        for the flavour's api_names from the image's world CA), forwarded
        out of the namespace to the emulator at self.api through SOCK."""
        key, pem = os.path.join(self.dir, "api.key"), os.path.join(self.dir, "api.pem")
        names = self.flavour.api_names
        conf = os.path.join(self.dir, "api.ext")
        with open(conf, "w") as f:
            f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n"
                    % ",".join("DNS:" + n for n in names))
        csr = os.path.join(self.dir, "api.csr")
        for argv in (["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + names[0],
                      "-keyout", key, "-out", csr],
                     ["openssl", "x509", "-req", "-in", csr, "-days", "30", "-CA",
                      os.path.join(self.image, "world-ca.crt"), "-CAkey", os.path.join(self.image, "world-ca.key"),
                      "-CAcreateserial", "-CAserial", os.path.join(self.dir, "api.srl"),
                      "-extfile", conf, "-out", pem]):
            p = subprocess.run(argv, capture_output=True, text=True)
            if p.returncode != 0:
                raise OSError("%s: %s" % (" ".join(argv[:2]), p.stderr.strip()))
        self.infra.append(self._spawn(["socat", "UNIX-LISTEN:%s,fork,unlink-early" % sock,
                                       "TCP:%s" % self.api], False, "api.log"))
        self.infra.append(self._spawn(
            ["socat", "OPENSSL-LISTEN:443,bind=%s,fork,reuseaddr,cert=%s,key=%s,verify=0" % (self.gateway, pem, key),
             "UNIX-CONNECT:%s" % sock], True, "api.log"))

    def _dhcp_hosts(self):
        tmp = self.hosts_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("".join(line + "\n" for line in self.hosts.values()))
        os.rename(tmp, self.hosts_file)
        self.dnsmasq.send_signal(signal.SIGHUP)

    # ----------------------------------------------------------- metadata
    def _write_json(self, path, value):
        # root's alone: a document may hold credentials (EC2's iam/)
        tmp = path + ".tmp"
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump(value, f)
        os.rename(tmp, path)

    # ------------------------------------------------------------ machines
    def _tap(self, inst):
        return "t" + str(abs(hash((inst.project, inst.zone, inst.name))) % 10 ** 10)

    def start(self, inst):
        """Boots INST's VM (returns once QEMU runs, as an instance is RUNNING
        before its guest has booted); None, or what went wrong."""
        fl = self.flavour
        ip, nat = fl.addresses(inst)
        vdir = os.path.join(self.dir, inst.name)
        tap = self._tap(inst)
        image = self.image_of(inst)
        try:
            os.makedirs(vdir, exist_ok=True)
            self._write_json(os.path.join(self.meta_dir, ip + ".json"), fl.metadata(inst, ip, nat, self))
            with self.lock:
                self.hosts[inst.name] = "%s,%s,%s" % (fl.mac(ip), ip, fl.dhcp_name(inst))
                self._dhcp_hosts()
            disk = os.path.join(vdir, "disk.qcow2")
            if not os.path.exists(disk):       # a restarted instance keeps its disk
                subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                                os.path.join(image, "rootfs.img"), disk], check=True,
                               capture_output=True)
            self._ip("tuntap", "add", "dev", tap, "mode", "tap")
            self._ip("link", "set", tap, "master", "br0", "up")
        except (OSError, subprocess.CalledProcessError) as e:
            return "cannot prepare VM %s: %s" % (inst.name, e)
        qemu = self._spawn(
            ["qemu-system-x86_64", "-accel", "tcg,thread=multi", "-cpu", "max", "-smp", "1",
             "-m", str(self.mem_mb), "-display", "none", "-monitor", "none",
             "-qmp", "unix:%s,server=on,wait=off" % os.path.join(vdir, "qmp.sock"),
             "-serial", "file:" + os.path.join(vdir, "console.log"),
             "-kernel", os.path.join(image, "vmlinuz"),
             "-initrd", os.path.join(image, "initrd.img"),
             "-append", "root=/dev/vda rw console=ttyS0 quiet" + TCG_PATIENCE + CONSOLE_JOURNAL,
             "-drive", "file=%s,if=virtio,format=qcow2" % disk,
             "-netdev", "tap,id=n0,ifname=%s,script=no,downscript=no" % tap,
             "-device", "virtio-net-pci,netdev=n0,mac=%s" % fl.mac(ip),
             "-device", "virtio-rng-pci"]
            + [a for v in fl.smbios(inst) for a in ("-smbios", v)]
            + ["-pidfile", os.path.join(vdir, "qemu.pid")], True, inst.name + "/qemu.log")
        procs = [qemu]
        if nat:
            sock = os.path.join(vdir, "ssh.sock")
            procs.append(self._spawn(["socat", "UNIX-LISTEN:%s,fork,unlink-early" % sock,
                                      "TCP:%s:22" % ip], True, inst.name + "/forward.log"))
            procs.append(self._spawn(["socat", "TCP-LISTEN:%d,bind=%s,fork,reuseaddr" % (self.ssh_port, nat),
                                      "UNIX-CONNECT:%s" % sock], False, inst.name + "/forward.log"))
        with self.lock:
            self.procs[inst.name] = procs
        time.sleep(0.5)
        for p, log in zip(procs, ("qemu.log", "forward.log", "forward.log")):
            if p.poll() is not None:      # QEMU, or a forward that could not bind
                with open(os.path.join(vdir, log), errors="replace") as f:
                    what = p.args[4] if p.args[0] == "ip" else p.args[0]
                    return "%s exited %d: %s" % (what, p.returncode, f.read().strip()[-400:])
        return None

    def alive(self, inst):
        """Whether INST's QEMU still runs (None: no VM of that name here).
        Cheap (a waitpid), so the emulator can ask often."""
        with self.lock:
            procs = self.procs.get(inst.name)
        return procs[0].poll() is None if procs else None

    def image_of(self, inst):
        """The image directory INST boots from: its sourceImage's when that
        is an image made here (images.insert), else --vm-image."""
        rec = (getattr(inst, "spec", None) or {}).get("image")   # EC2's instances have none
        return rec["_dir"] if rec and rec.get("_dir") else self.image

    def preempt_notice(self, inst):
        """INST is being preempted: its metadata says preempted TRUE now
        (inst.preempted is set), and its power button is pressed: Compute
        Engine's notice is "an ACPI G2 Soft Off signal" at the start of the
        notice, and the machine ends NOTICE seconds later however far its
        shutdown got.  So the guest shuts down while its jobs checkpoint."""
        self.refresh(inst)
        why = self.power_button(inst)
        if why:
            print("vms: %s: the power button: %s" % (inst.name, why), file=sys.stderr, flush=True)

    def refresh(self, inst):
        """INST's metadata document written again (what the flavour says
        of it now: a notice, renewed credentials)."""
        fl = self.flavour
        ip, nat = fl.addresses(inst)
        self._write_json(os.path.join(self.meta_dir, ip + ".json"), fl.metadata(inst, ip, nat, self))

    def power_button(self, inst):
        """Presses INST's ACPI power button (QMP system_powerdown on its
        QEMU's socket).  None, or what went wrong."""
        return qmp_command(os.path.join(self.dir, inst.name, "qmp.sock"), "system_powerdown")

    def power_off(self, inst):
        """instances.stop: QEMU, tap, forwards and lease go; the disk stays."""
        self._halt(inst)

    def stop(self, inst):
        """Powers INST's VM off (QEMU ended, as a deleted instance is) and
        removes its disk, tap, forwards, lease and metadata."""
        self._halt(inst)
        try:
            os.unlink(os.path.join(self.dir, inst.name, "disk.qcow2"))
        except OSError:
            pass

    def make_image(self, inst, project, res):
        """images.insert from INST's disk: a new image directory (raw
        rootfs.img, kernel and initrd of INST's own image); res["_dir"] and
        archiveSizeBytes are set.  None, or what went wrong."""
        out = os.path.join(self.dir, "images", project, res["name"])
        disk = os.path.join(self.dir, inst.name, "disk.qcow2")
        src = self.image_of(inst)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        p = subprocess.run(["qemu-img", "convert", "-U", "-O", "raw", disk,
                            os.path.join(out, "rootfs.img")], capture_output=True, text=True)
        if p.returncode != 0:
            shutil.rmtree(out, ignore_errors=True)
            return "qemu-img convert %s: %s" % (disk, p.stderr.strip()[-300:])
        for f in ("vmlinuz", "initrd.img"):
            shutil.copyfile(os.path.join(src, f), os.path.join(out, f))
        res["_dir"] = out
        res["archiveSizeBytes"] = str(os.stat(os.path.join(out, "rootfs.img")).st_blocks * 512)
        return None

    def drop_image(self, project, res):
        if res.get("_dir"):
            shutil.rmtree(res["_dir"], ignore_errors=True)

    def _halt(self, inst):
        with self.lock:
            procs = self.procs.pop(inst.name, [])
            self.hosts.pop(inst.name, None)
            self._dhcp_hosts()
        for p in procs:
            _end(p)
        ip, _ = self.flavour.addresses(inst)
        subprocess.run(["ip", "-n", self.ns, "link", "del", self._tap(inst)], capture_output=True)
        try:
            os.unlink(os.path.join(self.meta_dir, "%s.json" % ip))
        except OSError:
            pass

    def close(self):
        """Ends every VM and the namespace's processes; removes the namespace."""
        with self.lock:
            procs = [p for ps in self.procs.values() for p in ps] + self.infra
            self.procs.clear()
        for p in procs:
            _end(p)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)


# systemd's patience with a TCG VM on a loaded machine: with its defaults
# (a unit or device 90 s to start, services' watchdogs) two runs of
# vm.gce-data-env at load 14-16, each VM at a fifth of a core, had
# systemd-networkd fail to start on all three VMs ("Timed out waiting for
# device ttyS0" at 264 s), hence no address, no SSH, no cluster.
TCG_PATIENCE = " systemd.default_timeout_start_sec=900 systemd.service_watchdogs=0"

# PBX_VM_CONSOLE_JOURNAL=1 in the emulator's environment: each VM's
# journal (and systemd's unit status) also goes to its serial console,
# i.e. to VM_DIR/NAME/console.log on this machine, which outlives the VM:
# what a test reads of a machine that was preempted or powered off.
CONSOLE_JOURNAL = (" systemd.journald.forward_to_console=1 systemd.show_status=1"
                   if os.environ.get("PBX_VM_CONSOLE_JOURNAL") == "1" else "")


def qmp_command(path, command, timeout=5.0):
    """One QMP COMMAND (no arguments) on the QEMU monitor socket PATH: the
    greeting, qmp_capabilities, then COMMAND, each answered with "return".
    None, or what went wrong (no socket, an error reply, a timeout)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            f = s.makefile("rwb")
            greeting = json.loads(f.readline() or b"null")
            if not isinstance(greeting, dict) or "QMP" not in greeting:
                return "%s: no QMP greeting" % path
            for cmd in ("qmp_capabilities", command):
                f.write(json.dumps({"execute": cmd}).encode() + b"\n")
                f.flush()
                while True:                   # events may come before the reply
                    reply = json.loads(f.readline() or b"null")
                    if not isinstance(reply, dict):
                        return "%s: the connection ended before %s's reply" % (path, cmd)
                    if "return" in reply:
                        break
                    if "error" in reply:
                        return "%s: %s: %s" % (path, cmd, reply["error"].get("desc", reply["error"]))
        return None
    except (OSError, ValueError) as e:
        return "%s: %s" % (path, e)


def _end(p, grace=5.0):
    """Ends P and its process group (each was spawned in a session of its
    own): a forwarding socat's children, one per connection still open,
    would otherwise outlive it, blocked on a peer that is gone."""
    def group(sig):
        try:
            os.killpg(p.pid, sig)
        except OSError:
            pass
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    group(signal.SIGTERM)
    time.sleep(0.05)
    group(signal.SIGKILL)
