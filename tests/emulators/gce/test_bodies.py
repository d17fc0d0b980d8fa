"""test_bodies.py - RUNNING instances are real node bodies: an sshd on the
instance's natIP when it has one, else on its networkIP (never both: a
private address does not answer where a public one exists, as seen from
outside a VPC), that lets in the key from
its ssh-keys metadata for that user only; the login user is not root and
has passwordless sudo (--create-accounts, as Google's guest agent does);
the operation is DONE only once sshd listens; an instance that never boots
is RUNNING without sshd; delete and emulator shutdown leave no process and
no file.  A body whose processes all end (its guest shut down) makes the
instance TERMINATED with its root kept, and not before: a body whose sshd
has ended stays RUNNING while another of its processes runs;
instances.start boots the same root (same host key, same files);
instances.stop and
/_emulator/guest-shutdown keep the root too, delete removes it.  A Spot
body's metadata server (port 80 of its networkIP) serves `preempted`
through a preemption's notice.  Internal DNS: inside a body (its own mount
namespace, whose /etc/hosts is ROOT/etc/hosts) every instance of its
project and network resolves by name and by zonal name, from a session and
from a daemon started in one, instances made later too and TERMINATED ones
still; a deleted one stops resolving at once, another project's and made-up
names never do; the host's /etc/hosts is the same, byte for byte, after
every test.  Uses 127.0.86.0/24 (networkIP) and 127.0.87.0/24 (natIP), port
2272: run under flock /tmp/pbx-cluster-tests.lock."""

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ZONE, Emulator, instance_body  # noqa: E402


def host_localhost():
    """What `getent hosts localhost` answers on this machine, whose
    localhost lines a body's /etc/hosts copies: 127.0.0.1, or ::1 where
    /etc/hosts also has Debian's "::1 localhost ip6-localhost ..." line
    (getent asks for IPv6 first)."""
    r = subprocess.run(["getent", "hosts", "localhost"], capture_output=True, text=True)
    return (r.stdout.split() or [None])[0]

PORT = 2272
USER = "pbxgce"
OTHER = "pbx-other"     # a second project of the same emulator
HELPER = os.environ.get("PBX_NODE_BODY") or os.path.join(
    os.path.dirname(__file__), "../../../build/tests/emulators/gce/pbx-node-body")


def listening(addr, port=PORT):
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((addr, port)) == 0


def wait_for(check, timeout):
    """CHECK's first true value within TIMEOUT seconds, else its last value."""
    end = time.time() + timeout
    while True:
        got = check()
        if got or time.time() >= end:
            return got
        time.sleep(0.05)


def procs_naming(text):
    """Pids of processes whose command line names TEXT."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if text.encode() in f.read():
                        out.append(int(pid))
            except OSError:
                pass
    return out


def leads_session(pid):
    """True when PID still runs and leads its own session."""
    try:
        return os.getsid(pid) == pid
    except OSError:
        return False


class Bodies(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open("/etc/hosts", "rb") as f:
            cls.host_hosts = f.read()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.keys = {}
        for who in ("login", "intruder"):
            path = os.path.join(cls.tmp.name, who)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who, "-f", path], check=True)
            with open(path + ".pub") as f:
                cls.keys[who] = (path, f.read().strip())
        # A space in the state directory: sshd's config lines must quote paths.
        os.chmod(cls.tmp.name, 0o711)   # login users walk down to their keys
        cls.state = os.path.join(cls.tmp.name, "state dir")
        os.mkdir(cls.state)
        cls.emu = Emulator(cls.state, "--node-body-helper", os.path.abspath(HELPER),
                           "--ssh-port", str(PORT), "--network-block", "127.0.86.0/25",
                           "--nat-block", "127.0.87.0/25", "--create-accounts", "--project", OTHER,
                           "--fault", "op_delay=0.05").__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.emu.stop()
        cls.tmp.cleanup()

    def tearDown(self):
        with open("/etc/hosts", "rb") as f:
            self.assertEqual(f.read(), self.host_hosts, "the host's /etc/hosts changed")

    def ssh(self, addr, command, key="login", user=USER):
        return subprocess.run(["ssh", "-i", self.keys[key][0], "-p", str(PORT), "-o", "BatchMode=yes",
                               "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                               "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR", "%s@%s" % (user, addr), command],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

    def call(self, method, path, body=None, project=None):
        """A compute call in PROJECT (default the harness's)."""
        if project is None or project == self.emu.project:
            return self.emu.call(method, path, body)
        code, _, value = self.emu.raw(method, self.emu.base + "projects/%s/%s" % (project, path),
                                      json.dumps(body).encode() if body is not None else None,
                                      {"Authorization": "Bearer " + self.emu.token,
                                       "Content-Type": "application/json"})
        return code, value

    def wait(self, op, timeout=60):
        """Polls operation OP (of any project) until DONE; returns it."""
        end = time.time() + timeout
        while True:
            code, _, cur = self.emu.raw("GET", op["selfLink"], None,
                                        {"Authorization": "Bearer " + self.emu.token})
            self.assertEqual(code, 200, cur)
            if cur["status"] == "DONE" or time.time() > end:
                return cur
            time.sleep(0.05)

    def create(self, name, nat=True, project=None, zone=ZONE):
        code, op = self.call("POST", "zones/%s/instances" % zone,
                             instance_body(name, zone=zone, nat=nat, gpus=1,
                                           keys="%s:%s" % (USER, self.keys["login"][1])),
                             project)
        self.assertEqual(code, 200, op)
        done = self.wait(op)
        self.assertNotIn("error", done)
        code, inst = self.call("GET", "zones/%s/instances/%s" % (zone, name), project=project)
        self.assertEqual((code, inst["status"]), (200, "RUNNING"))
        return inst

    def delete(self, name, project=None, zone=ZONE):
        code, op = self.call("DELETE", "zones/%s/instances/%s" % (zone, name), project=project)
        self.assertEqual(code, 200, op)
        self.assertNotIn("error", self.wait(op))

    def test_head_and_node(self):
        head = self.create("head")
        node = self.create("node-1", nat=False)
        ip = head["networkInterfaces"][0]["networkIP"]
        nat = head["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
        nip = node["networkInterfaces"][0]["networkIP"]
        self.assertTrue(ip.startswith("127.0.86.") and nat.startswith("127.0.87.") and nip.startswith("127.0.86."))
        self.assertNotIn("accessConfigs", node["networkInterfaces"][0])
        # The operation was DONE: sshd already listens, on the external
        # address alone when there is one.
        self.assertTrue(listening(nat) and listening(nip))
        self.assertFalse(listening(ip), "the head's private address answers SSH")
        r = self.ssh(nat, 'id -un; echo "$HOME"; echo "$PBX_BODY_ROOT"; sudo -n id -u')
        self.assertEqual(r.returncode, 0, r.stderr)
        user, home, root, sudo_uid = r.stdout.split("\n")[:4]
        self.assertEqual(user, USER)
        self.assertEqual(sudo_uid, "0", "the login user has passwordless sudo")
        key = hashlib.sha1(b"head").hexdigest()[:10]   # bodies.py: short roots
        self.assertTrue(root.endswith("/bodies/pbx-test/%s/%s" % (ZONE, key)), root)
        self.assertEqual(home, root + "/home/" + USER)
        self.assertEqual(os.stat(home).st_uid, int(self.ssh(nat, "id -u").stdout))
        r = self.ssh(nip, "echo $PBX_BODY_ROOT")
        self.assertEqual((r.returncode, r.stdout.strip().rsplit("/", 1)[-1]),
                         (0, hashlib.sha1(b"node-1").hexdigest()[:10]), r.stderr)
        # A key only logs in as the user it was given for.
        self.assertNotEqual(self.ssh(nat, "true", key="intruder").returncode, 0)
        self.assertNotEqual(self.ssh(nat, "true", user="root").returncode, 0)
        # Delete: the body's processes and files go with the instance.
        self.delete("head")
        self.assertFalse(listening(ip) or listening(nat))
        self.assertFalse(os.path.exists(root))
        self.assertEqual(procs_naming(root + "/"), [])
        self.assertTrue(listening(nip), "the other body is untouched")
        self.delete("node-1")
        self.assertFalse(listening(nip))

    def host_key(self, addr):
        p = subprocess.run(["ssh-keyscan", "-p", str(PORT), "-t", "ecdsa", addr],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.split(None, 1)[1].strip() if p.stdout.strip() else None

    def wait_status(self, name, want, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            code, inst = self.emu.call("GET", "zones/%s/instances/%s" % (ZONE, name))
            if code == 200 and inst["status"] == want:
                return inst
            time.sleep(0.05)
        self.fail("%s did not become %s" % (name, want))

    def power(self, name, verb):
        code, op = self.emu.call("POST", "zones/%s/instances/%s/%s" % (ZONE, name, verb))
        self.assertEqual(code, 200, op)
        self.assertNotIn("error", self.emu.wait(op))

    def test_guest_shutdown_keeps_the_disk(self):
        inst = self.create("off-1")
        nat = inst["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
        root = self.ssh(nat, "echo $PBX_BODY_ROOT").stdout.strip()
        key = self.host_key(nat)
        self.assertTrue(key)
        # A file on its disk, and a daemon of its own (as the bootstrap starts them).
        # "; exit" keeps dash from exec'ing sleep, so the shell (named by its $0) stays.
        r = self.ssh(nat, 'echo kept > "$HOME/kept"; setsid sh -c "sleep 600; exit" "$PBX_BODY_ROOT/daemon" '
                          '</dev/null >/dev/null 2>&1 & echo started')
        self.assertEqual(r.returncode, 0, r.stderr)
        # The daemon is its session's leader (setsid execs it); its
        # momentary forks name the same command line but lead nothing.
        daemon = wait_for(lambda: [p for p in procs_naming(root + "/daemon") if leads_session(p)], 10)
        self.assertEqual(len(daemon), 1, "the daemon started")
        # The guest powers off by ending its processes: its sshd first, the
        # rest later (autostop's watcher ends last).  Until the last has
        # ended the machine is not off: RUNNING, look after look (the
        # emulator looks every 0.5 s), however long the sshd has been gone.
        with open(os.path.join(root, "run", "sshd.pid")) as f:
            os.kill(int(f.read()), 15)
        self.assertTrue(wait_for(lambda: not listening(nat), 10), "sshd ended")
        end = time.time() + 3
        while time.time() < end:
            code, inst = self.emu.call("GET", "zones/%s/instances/off-1" % ZONE)
            self.assertEqual((code, inst["status"]), (200, "RUNNING"),
                             "a body with a process left is not off (sshd gone %.1f s)" % (3 - end + time.time()))
            time.sleep(0.1)
        self.assertIn(daemon[0], procs_naming(root + "/daemon"), "the daemon runs on")
        os.killpg(os.getpgid(daemon[0]), 15)     # the last processes (its sleep too) end
        inst = self.wait_status("off-1", "TERMINATED", timeout=10)
        self.assertIn("lastStopTimestamp", inst)
        self.assertFalse(listening(nat))
        self.assertEqual(procs_naming(root + "/"), [], "a powered-off body leaves no process")
        self.assertTrue(os.path.exists(os.path.join(root, "home", USER, "kept")), "the disk is kept")
        code, page = self.emu.call("GET", "zones/%s/operations" % ZONE)
        self.assertIn("compute.instances.guestTerminate", [o["operationType"] for o in page["items"]])
        # instances.start boots the same disk: same host key, same files.
        self.power("off-1", "start")
        self.assertTrue(listening(nat))
        self.assertEqual(self.host_key(nat), key)
        self.assertEqual(self.ssh(nat, 'cat "$HOME/kept"').stdout.strip(), "kept")
        # The power button from outside, then instances.stop: the disk stays.
        op = self.emu.control("POST", "guest-shutdown?instance=off-1")
        self.assertNotIn("error", self.emu.wait(op))
        self.wait_status("off-1", "TERMINATED")
        self.assertFalse(listening(nat))
        self.assertEqual(procs_naming(root + "/"), [])
        self.power("off-1", "start")
        self.power("off-1", "stop")
        self.assertFalse(listening(nat))
        self.assertTrue(os.path.exists(os.path.join(root, "home", USER, "kept")), "instances.stop keeps the disk")
        self.power("off-1", "start")
        self.assertEqual(self.ssh(nat, 'cat "$HOME/kept"').stdout.strip(), "kept")
        self.assertEqual(self.host_key(nat), key)
        # Delete removes the disk.
        self.delete("off-1")
        self.assertFalse(os.path.exists(root))
        self.assertEqual(procs_naming(root + "/"), [])

    def test_preempt_metadata(self):
        """A Spot body's own metadata server (its networkIP, port 80, named
        in ROOT/etc/hosts) says preempted FALSE, then TRUE from the
        preemption on, to a request waiting for the change; the body runs
        through the notice and ends after it; a start says FALSE again;
        delete closes the server."""
        sched = {"onHostMaintenance": "TERMINATE", "automaticRestart": False, "provisioningModel": "SPOT"}
        code, op = self.emu.call("POST", "zones/%s/instances" % ZONE, instance_body(
            "spot-1", nat=False, keys="%s:%s" % (USER, self.keys["login"][1]), scheduling=sched))
        self.assertNotIn("error", self.emu.wait(op))
        nip = self.emu.call("GET", "zones/%s/instances/spot-1" % ZONE)[1]["networkInterfaces"][0]["networkIP"]
        root = self.ssh(nip, "echo $PBX_BODY_ROOT").stdout.strip()
        with open(os.path.join(root, "etc", "hosts")) as f:
            self.assertIn("\n%s metadata.google.internal metadata\n" % nip, "\n" + f.read())
        url = "http://%s/computeMetadata/v1/instance/preempted" % nip

        def get(query="", flavor=True):
            req = urllib.request.Request(url + query, headers={"Metadata-Flavor": "Google"} if flavor else {})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, None
        self.assertEqual(get(), (200, "FALSE"))
        self.assertEqual(get(flavor=False)[0], 403)
        seen = []
        waiter = threading.Thread(target=lambda: seen.append((get("?wait_for_change=true&timeout=30"), time.time())))
        waiter.start()
        time.sleep(0.5)
        t0 = time.time()
        op = self.emu.control("POST", "preempt", {"instance": "spot-1", "notice": 3})
        waiter.join(10)
        self.assertTrue(seen and seen[0][0] == (200, "TRUE"), seen)
        self.assertLess(seen[0][1] - t0, 2, "the waiting request saw TRUE late")
        self.assertTrue(listening(nip), "the body is off before the notice ran out")
        self.assertNotIn("error", self.emu.wait(op))
        self.assertGreaterEqual(time.time() - t0, 3)
        self.wait_status("spot-1", "TERMINATED")
        self.assertFalse(listening(nip))
        self.assertEqual(procs_naming(root + "/"), [])
        self.power("spot-1", "start")
        self.assertEqual(get(), (200, "FALSE"), "a new boot is not preempted")
        self.delete("spot-1")
        self.assertFalse(listening(nip, 80), "delete leaves the metadata server")

    def resolve(self, addr, *names):
        """{name: address or None} as `getent hosts` answers inside the body at ADDR."""
        r = self.ssh(addr, " ; ".join('echo "%s=$(getent hosts %s | head -n1 | cut -d" " -f1)"' % (n, n)
                                      for n in names))
        self.assertEqual(r.returncode, 0, r.stderr)
        got = dict(line.split("=", 1) for line in r.stdout.splitlines())
        return {n: got[n] or None for n in names}

    def test_internal_dns(self):
        """Inside a body, instances of its project and network resolve by
        name and by zonal name (INSTANCE.ZONE.c.PROJECT.internal) through
        its own /etc/hosts, in a mount namespace of its own; later ones
        too, TERMINATED ones still, deleted ones no more; other projects'
        and made-up names never."""
        a = self.create("dns-a")
        nat = a["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
        ip_a = a["networkInterfaces"][0]["networkIP"]
        ip_b = self.create("dns-b", nat=False)["networkInterfaces"][0]["networkIP"]
        x = self.create("dns-x", nat=False, project=OTHER)["networkInterfaces"][0]["networkIP"]
        zonal = lambda name, project="pbx-test": "%s.%s.c.%s.internal" % (name, ZONE, project)  # noqa: E731
        self.assertEqual(self.resolve(nat, "dns-a", "dns-b", zonal("dns-b"), zonal("dns-a"), "dns-x",
                                      zonal("dns-x", OTHER), zonal("dns-x"), "dns-nosuch", zonal("dns-nosuch"),
                                      "metadata.google.internal", "localhost"),
                         {"dns-a": ip_a, "dns-b": ip_b, zonal("dns-b"): ip_b, zonal("dns-a"): ip_a,
                          "dns-x": None, zonal("dns-x", OTHER): None, zonal("dns-x"): None,
                          "dns-nosuch": None, zonal("dns-nosuch"): None,
                          "metadata.google.internal": ip_a, "localhost": host_localhost()})
        # A reverse lookup gives the zonal name, as Google's PTR records do.
        r = self.ssh(nat, "getent hosts %s %s" % (ip_b, ip_a))
        self.assertEqual([line.split()[1:] for line in r.stdout.splitlines()],
                         [[zonal("dns-b"), "dns-b"], [zonal("dns-a"), "dns-a"]], r.stderr)
        # The other project's body sees its own project only.
        self.assertEqual(self.resolve(x, "dns-x", zonal("dns-x", OTHER), "dns-a", "dns-b"),
                         {"dns-x": x, zonal("dns-x", OTHER): x, "dns-a": None, "dns-b": None})
        # This host resolves none of them: the names live in the bodies alone.
        for name in ("dns-a", "dns-b", zonal("dns-b")):
            self.assertNotEqual(subprocess.run(["getent", "hosts", name], capture_output=True).returncode, 0,
                                "the host resolves " + name)
        # sshd and its sessions share one mount namespace, not the host's.
        root = self.ssh(nat, "echo $PBX_BODY_ROOT").stdout.strip()
        with open(os.path.join(root, "run", "sshd.pid")) as f:
            sshd_ns = os.readlink("/proc/%d/ns/mnt" % int(f.read()))
        self.assertNotEqual(sshd_ns, os.readlink("/proc/self/ns/mnt"))
        self.assertEqual(self.ssh(nat, "readlink /proc/self/ns/mnt").stdout.strip(), sshd_ns)
        with open(os.path.join(root, "etc", "hosts")) as f:
            self.assertEqual(self.ssh(nat, "cat /etc/hosts").stdout, f.read())
        # A daemon started in a session (as the bootstrap starts slurmd)
        # keeps resolving: it sees an instance made after it started.
        # "; exit" keeps dash from exec'ing the last command, so the shell stays.
        seen = os.path.join(root, "home", USER, "seen")
        r = self.ssh(nat, 'setsid sh -c \'while :; do getent hosts dns-c > "$0.tmp"; mv "$0.tmp" "$0"; '
                          'sleep 0.1; done; exit\' "$HOME/seen" </dev/null >/dev/null 2>&1 & echo started')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_for(lambda: os.path.exists(seen), 10), "the daemon runs")
        with open(seen) as f:
            self.assertEqual(f.read(), "", "dns-c resolves before it exists")
        ip_c = self.create("dns-c", nat=False)["networkInterfaces"][0]["networkIP"]

        def daemon_sees():
            try:
                with open(seen) as f:
                    return f.read().split()[:1]
            except OSError:
                return None
        self.assertEqual(wait_for(lambda: daemon_sees() == [ip_c], 5) and daemon_sees(), [ip_c])
        self.assertEqual(self.resolve(ip_c, "dns-a", "dns-c")["dns-a"], ip_a, "a new body resolves the others")
        # A deleted instance stops resolving once the delete is DONE; a
        # TERMINATED one keeps its address, and its name with it.
        self.power("dns-c", "stop")
        self.delete("dns-b")
        self.assertEqual(self.resolve(nat, "dns-b", zonal("dns-b"), "dns-c", "dns-a"),
                         {"dns-b": None, zonal("dns-b"): None, "dns-c": ip_c, "dns-a": ip_a})
        # The daemon too.
        self.delete("dns-c")
        self.assertEqual(self.resolve(nat, "dns-c", zonal("dns-c")), {"dns-c": None, zonal("dns-c"): None})
        self.assertTrue(wait_for(lambda: daemon_sees() == [], 2), "the daemon still resolves dns-c")
        # The daemon is a process of the body: the power button ends it with
        # the rest; a start makes a fresh namespace on the same root.
        op = self.emu.control("POST", "guest-shutdown?instance=dns-a")
        self.assertNotIn("error", self.emu.wait(op))
        self.wait_status("dns-a", "TERMINATED")
        self.assertEqual(procs_naming(root + "/"), [])
        self.power("dns-a", "start")
        self.assertEqual(self.resolve(nat, "dns-a", "dns-b"), {"dns-a": ip_a, "dns-b": None})
        self.delete("dns-a")
        self.delete("dns-x", project=OTHER)
        self.assertEqual(procs_naming(root + "/"), [])

    def test_internal_dns_zones(self):
        """Zonal DNS: an instance of another zone resolves by its zonal name
        alone (a bare name goes through the VM's own zone's search domain);
        lines the guest adds to its /etc/hosts outlive the emulator's
        rewrites, as on a VM."""
        other = ZONE[:-1] + ("b" if ZONE[-1] != "b" else "c")
        a = self.create("zn-a")
        nat = a["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
        ip_a = a["networkInterfaces"][0]["networkIP"]
        ip_b = self.create("zn-b", nat=False, zone=other)["networkInterfaces"][0]["networkIP"]
        zb = "zn-b.%s.c.pbx-test.internal" % other
        self.assertEqual(self.resolve(nat, "zn-a", "zn-b", zb), {"zn-a": ip_a, "zn-b": None, zb: ip_b})
        self.assertEqual(self.resolve(ip_b, "zn-b", "zn-a"), {"zn-b": ip_b, "zn-a": None})
        root = self.ssh(nat, "echo $PBX_BODY_ROOT").stdout.strip()
        with open(os.path.join(root, "etc", "hosts"), "a") as f:     # as the guest's root would
            f.write("%s zn-b-alias\n" % ip_b)
        self.create("zn-c", nat=False)       # the emulator rewrites zn-a's file
        got = self.resolve(nat, "zn-b-alias", "zn-c")
        self.assertEqual(got["zn-b-alias"], ip_b, "the guest's line is gone")
        self.assertIsNotNone(got["zn-c"])
        for name, zone in (("zn-a", ZONE), ("zn-b", other), ("zn-c", ZONE)):
            self.delete(name, zone=zone)

    def test_never_boots(self):
        self.emu.control("POST", "faults", {"never_boot": ["dead-1"]})
        inst = self.create("dead-1")
        ip = inst["networkInterfaces"][0]["networkIP"]
        time.sleep(0.5)
        self.assertFalse(listening(ip), "an instance that never boots has no sshd")
        self.delete("dead-1")
        made = self.emu.control("GET", "calls")["calls"].get("POST instances_insert", 0)
        # never_boot_nth counts instances made since start: the next one is
        # number made+1 when every insert so far was admitted.
        self.emu.control("POST", "faults", {"never_boot_nth": made + 2})
        a, b = self.create("nth-a", nat=False), self.create("nth-b", nat=False)
        self.assertTrue(listening(a["networkInterfaces"][0]["networkIP"]))
        self.assertFalse(listening(b["networkInterfaces"][0]["networkIP"]))
        self.delete("nth-a")
        self.delete("nth-b")

    def test_shutdown_stops_bodies(self):
        with tempfile.TemporaryDirectory() as d:
            emu = Emulator(d, "--node-body-helper", os.path.abspath(HELPER), "--ssh-port", str(PORT),
                           "--network-block", "127.0.86.128/25", "--nat-block", "127.0.87.128/25",
                           "--fault", "op_delay=0.05").__enter__()
            try:
                code, op = emu.call("POST", "zones/%s/instances" % ZONE, instance_body("lone", nat=False))
                emu.wait(op)
                ip = emu.call("GET", "zones/%s/instances/lone" % ZONE)[1]["networkInterfaces"][0]["networkIP"]
                self.assertTrue(listening(ip))
            finally:
                emu.stop()
            self.assertFalse(listening(ip), "the emulator's exit ends its bodies")
            self.assertEqual(procs_naming(d + "/bodies/"), [])


class Rewrite(unittest.TestCase):
    """bodies.rewrite: a body's /etc/hosts is a bind mount of its file, which
    holds the file's inode, so the file is rewritten in place."""

    def test_in_place(self):
        import bodies
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "hosts")
            self.assertFalse(bodies.rewrite(path, "x\n"), "made without create")
            self.assertFalse(os.path.exists(path))
            self.assertTrue(bodies.rewrite(path, "127.0.0.1 localhost\n127.0.86.2 a.z.c.p.internal a\n", create=True))
            ino = os.stat(path).st_ino
            for text in ("127.0.0.1 localhost\n", "127.0.0.1 localhost\n" * 40, "", "1\n", "12\n"):
                self.assertTrue(bodies.rewrite(path, text))
                with open(path) as f:
                    self.assertEqual(f.read(), text)
                self.assertEqual(os.stat(path).st_ino, ino, "the file was replaced")
                self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)


if __name__ == "__main__":
    unittest.main(verbosity=2)
