"""bodies.py - node bodies for RUNNING instances, made by pbx-node-body
(node_body.c: the local provider's body code).

Each instance's body lives in STATE/bodies/PROJECT/ZONE/KEY, KEY being
the first 10 hex digits of the SHA-1 of the instance's name (names are up
to 63 characters; slurmd's socket paths under the body's root must stay
within 108 bytes; pbx's names carry a cluster id prefix): an sshd
listening at --ssh-port on the instance's natIP when it has an access
config, else on its networkIP.  Never on both: from the user's side a VM
is reached on its external address only, and a node without one only
through another node (pbx's jump through the head), so a client that
connects to a private address where a public one exists fails here as it
would against Google.  Keys come from the `ssh-keys`
metadata item ("user:keytype key comment" lines), one authorized-keys file
per user (sshd's AuthorizedKeysFile .../etc/ssh/keys/%u), so a key logs in
only as the user it was given for.  Sessions get HOME=ROOT/home/USER (the
first user in ssh-keys; ROOT/root when there is none).

ROOT is the instance's boot disk.  A body is powered off (power_off:
instances.stop, or a guest shutdown) when every process naming ROOT/ has
ended, ROOT kept; start(inst) on that ROOT boots it again (same host key,
same files).  stop(inst) (delete, emulator exit) ends them and removes
ROOT.  A guest shuts itself down by ending its own processes (autostop's
watcher ends them all, itself last): alive(inst) is False only once that
shutdown has completed, as a cloud sees a machine off only then: the
body's sshd (its pid in ROOT/run/sshd.pid, written by
src/cloud/local/body.c) no longer runs AND no process of the body is left
(none that halt would end: `pbx-node-body procs ROOT`, the same finder,
src/cloud/local/procs.c, asked only once sshd is gone).  The emulator then
stops the instance as Compute Engine does (world.py), and the EC2 harness
as EC2 does (ec2_harness.py's shutdown_by_guest, which uses these bodies).

The metadata server: a VM asks metadata.google.internal (169.254.169.254,
which its /etc/hosts and DNS name); a body, a process of this host, cannot
reach that address, so with a `metadata` server maker (GceBodyMetadata
here, the EC2 harness's IMDS maker) each body gets its own server on its
networkIP, port 80 (--metadata-port), started with the body and kept
across power-offs (a VM's server answers whatever the guest's state),
closed when the body is removed.  ROOT/etc/hosts names it as a VM's
/etc/hosts does ("ADDR metadata.google.internal metadata"); programs that
ask for the server by name read it there (templates/preempt.sh).  A port
that cannot be bound (another server holds it) leaves the body without a
metadata server, said on stderr and in /_emulator/state, and the body
still boots.

Internal DNS (Compute Engine's bodies, `internal_dns`): on Compute
Engine every VM resolves the instances of its project's VPC network by
name (INSTANCE through the search domain, INSTANCE.ZONE.c.PROJECT.internal,
zonal DNS), served by the metadata server's DNS.  A body is a process of
this host and shares its resolver, so each body runs in a mount namespace
of its own (`unshare --mount`, made by start before pbx-node-body runs;
sshd, its sessions and every daemon they start inherit it) in which
/etc/hosts is a bind mount of ROOT/etc/hosts.  That file holds, between
the lines DNS_BEGIN and DNS_END, the host's localhost and hostname lines
(the body runs under this host's hostname),
"NETWORKIP INSTANCE.ZONE.c.PROJECT.internal INSTANCE" for every instance
of the same project and network that holds an address (from admission to
delete, TERMINATED ones included: Compute Engine keeps their address;
world.py calls dns() with them whenever one gets or gives back its
address), then the metadata server's line (last: it shares the body's
address here, and a reverse lookup must find the instance's name first),
and no other name.  The bare INSTANCE is there only for instances of the
body's own zone: zonal DNS answers it through the VM's search domain,
ZONE.c.PROJECT.internal, so another zone's instance resolves by its zonal
name alone.  What the guest writes outside the block stays (a VM's
/etc/hosts is its own file, which pbx's bootstrap writes names into).  A bind mount of a file holds its inode, so the file is
only ever rewritten in place (never renamed over), padded so that a reader
in between sees whole lines.  The host's /etc/hosts is never written.

An /etc/hosts of its own (EC2's bodies, `own_hosts`): a VM's /etc/hosts
is its own file, which its root may edit (pbx's bootstrap keeps the names
of nodes that sleep there on EC2: docs/power-saving.md).  Such a body
runs in a mount namespace of its own as above, /etc/hosts a bind mount of
ROOT/etc/hosts, which is made once (the host's localhost and hostname
lines, then the metadata server's) and never written again by the
harness: the guest's edits stay, across power-offs too, as on a disk.

Login users must exist on this machine for sshd to accept them.  With
--create-accounts the emulator does what Google's guest agent does on a
VM: it creates each ssh-keys user (useradd) in group google-sudoers, which
/etc/sudoers.d/google-sudoers gives passwordless sudo; accounts are kept
(they are the same for every body and every run).
"""

import grp
import hashlib
import os
import pwd
import subprocess
import sys
import threading

import metadata


def _traversable(state_dir):
    """sshd reads a user's authorized keys as that user, so login users
    must be able to walk down to the bodies: the state directory is made
    0711 (others may enter, not list); an ancestor others cannot enter is
    an error (ValueError)."""
    os.makedirs(state_dir, exist_ok=True)
    mode = os.stat(state_dir).st_mode
    if mode & 0o011 != 0o011:
        os.chmod(state_dir, (mode & 0o7777) | 0o711)
    d = os.path.dirname(state_dir)
    while True:
        if os.stat(d).st_mode & 0o001 == 0:
            raise ValueError("--state-dir %s: login users cannot enter %s (needs o+x)" % (state_dir, d))
        if d == "/":
            return
        d = os.path.dirname(d)


def ssh_keys(items):
    """{user: [key lines]} from metadata items, in the order given."""
    out = {}
    for it in items or []:
        if it.get("key") != "ssh-keys":
            continue
        for line in (it.get("value") or "").splitlines():
            user, sep, key = line.strip().partition(":")
            if sep and user and key.strip():
                out.setdefault(user, []).append(key.strip())
    return out


class GceBodyMetadata:
    """Compute Engine's metadata server for node bodies: the same tree a VM
    gets (vms.GceFlavour), `preempted` included, made afresh per request."""
    names = "metadata.google.internal metadata"

    def __init__(self, port, projects=None, mint=None):
        import vms
        self.port = port
        self.mint = mint               # (email, scopes) -> token reply; None: no tokens
        self.flavour = vms.GceFlavour(projects)
        self.net = type("Net", (), {"gateway": "127.0.0.1", "netmask": "255.0.0.0"})()

    @staticmethod
    def address(inst):
        return inst.res["networkInterfaces"][0]["networkIP"]

    def serve(self, inst):
        ip = self.address(inst)
        nat = next((ac.get("natIP") for ac in inst.res["networkInterfaces"][0].get("accessConfigs", [])), None)

        def tree():
            try:
                return self.flavour.metadata(inst, ip, nat, self.net)
            except (KeyError, TypeError, ValueError, RuntimeError):
                return None
        return metadata.BodyServer(ip, self.port, tree, self.mint)


def internal_name(project, zone, name):
    """NAME's zonal DNS name on Compute Engine."""
    return "%s.%s.c.%s.internal" % (name, zone, project)


def network_of(inst):
    """The name of INST's network (its first interface's)."""
    return inst.res["networkInterfaces"][0].get("network", "global/networks/default").rsplit("/", 1)[-1]


def host_lines(path="/etc/hosts"):
    """The lines of this host's /etc/hosts that name localhost (ip6-*) or
    this host's hostname: a body runs under the host's hostname (no UTS
    namespace), which resolves on a VM too; every other name is left out."""
    host = os.uname().nodename
    mine = {host, host.split(".")[0], "localhost", "localhost.localdomain"}
    out = []
    try:
        with open(path) as f:
            for line in f:
                fields = line.split("#", 1)[0].split()
                if len(fields) >= 2 and any(n in mine or n.startswith("ip6-") for n in fields[1:]):
                    out.append(" ".join(fields) + "\n")
    except OSError:
        pass
    return "".join(out) or "127.0.0.1 localhost\n"


DNS_BEGIN = "# Compute Engine's internal DNS (the emulator's; begin)"
DNS_END = "# Compute Engine's internal DNS (the emulator's; end)"


def guest_lines(path):
    """The lines of PATH outside the emulator's DNS block: what the guest
    wrote there itself (pbx's bootstrap does), kept as a VM keeps its
    /etc/hosts; "" when there is no file."""
    try:
        with open(path) as f:
            lines = f.read().splitlines(True)
    except OSError:
        return ""
    out, inside = [], False
    for line in lines:
        if line.rstrip("\n") == DNS_BEGIN:
            inside = True
        elif line.rstrip("\n") == DNS_END:
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)


def rewrite(path, text, create=False):
    """Makes PATH hold TEXT, in place: a bind mount of PATH holds its
    inode, so the file is never replaced.  The new text goes in with one
    write, padded with a comment to the old length when shorter, then the
    file is cut to it: a reader in between sees whole lines (the new ones
    and a comment).  Unchanged text is not written.  False when PATH does
    not exist (and not CREATE)."""
    data = text.encode()
    try:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    except FileNotFoundError:
        return False
    try:
        old = b""
        while True:
            chunk = os.pread(fd, 1 << 20, len(old))
            if not chunk:
                break
            old += chunk
        if old == data:
            return True
        pad = len(old) - len(data)
        out = data + (b"" if pad <= 0 else b"\n" if pad == 1 else b"#" + b" " * (pad - 2) + b"\n")
        done = 0
        while done < len(out):
            done += os.pwrite(fd, out[done:], done)
        os.ftruncate(fd, len(data))
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)
    return True


class Bodies:
    def __init__(self, helper, state_dir, port, create_accounts, parallel=8, metadata=None,
                 internal_dns=False, own_hosts=False):
        self.metadata = metadata       # a GceBodyMetadata (or the like), or None: no server
        self.internal_dns = internal_dns   # Compute Engine's: own mount namespace, names in /etc/hosts
        # EC2's: own mount namespace, /etc/hosts the guest's own (made once)
        self.own_hosts = own_hosts or internal_dns
        self.hosts_lock = threading.Lock()
        self.names = {}                # (project, network) -> [(zone, name, networkIP)]: dns()
        self.base_hosts = host_lines() if self.own_hosts else ""
        self.servers = {}              # body root -> its metadata server
        self.meta_errors = {}          # body root -> why it has none
        self.helper = helper
        self.dir = os.path.join(os.path.abspath(state_dir), "bodies")
        _traversable(os.path.abspath(state_dir))
        self.port = port
        self.create_accounts = create_accounts
        self.gate = threading.Semaphore(parallel)
        self.account_lock = threading.Lock()

    def root(self, inst):
        return self._root(inst.project, inst.zone, inst.name)

    def _root(self, project, zone, name):
        key = hashlib.sha1(name.encode()).hexdigest()[:10]
        return os.path.join(self.dir, project, zone, key)

    def dns(self, table):
        """The instances that hold an address, {(project, network): [(zone,
        name, networkIP)]} (world.py, whenever that changes): every body of
        them gets its hosts file rewritten (bodies not started yet get
        theirs from start)."""
        with self.hosts_lock:
            self.names = {k: sorted(v) for k, v in table.items()}
            for (project, _), members in self.names.items():
                for zone, name, ip in members:
                    root = self._root(project, zone, name)
                    try:
                        path = os.path.join(root, "etc", "hosts")
                        rewrite(path, self._hosts_text(project, zone, members, root, ip, guest_lines(path)))
                    except OSError as e:    # a body being removed
                        print("emulator: %s: hosts: %s" % (name, e), file=sys.stderr)

    def _hosts_text(self, project, zone, members, root, ip, guest=""):
        # The instances before the metadata server, which shares the body's
        # address here: a reverse lookup finds the instance's zonal name first.
        # A bare INSTANCE resolves through the search domain, the body's own
        # zone's (ZONE.c.PROJECT.internal): another zone's instance has its
        # zonal name only.  Then the guest's own lines, kept.
        text = DNS_BEGIN + "\n" + self.base_hosts
        for z, name, addr in members:
            text += "%s %s%s\n" % (addr, internal_name(project, z, name), " " + name if z == zone else "")
        if self.metadata is not None and root in self.servers:
            text += "%s %s\n" % (ip, self.metadata.names)
        return text + DNS_END + "\n" + guest

    def _write_hosts(self, inst, root):
        """ROOT/etc/hosts as the body must see it at its start."""
        path = os.path.join(root, "etc", "hosts")
        with self.hosts_lock:
            if self.internal_dns:
                ip = inst.res["networkInterfaces"][0]["networkIP"]
                members = self.names.get((inst.project, network_of(inst)), [])
                rewrite(path, self._hosts_text(inst.project, inst.zone, members, root, ip, guest_lines(path)),
                        create=True)
            elif self.own_hosts:
                # the guest's file from then on, kept across power-offs as a disk keeps it
                if not os.path.exists(path):
                    meta = ""
                    if self.metadata is not None and root in self.servers:
                        meta = "%s %s\n" % (self.metadata.address(inst), self.metadata.names)
                    rewrite(path, self.base_hosts + meta, create=True)
            elif self.metadata is not None and root in self.servers:
                rewrite(path, "%s %s\n" % (self.metadata.address(inst), self.metadata.names), create=True)

    def start(self, inst):
        """Starts the body of INST; None, or what went wrong."""
        root = self.root(inst)
        keys = ssh_keys(inst.res.get("metadata", {}).get("items"))
        nic = inst.res["networkInterfaces"][0]
        addrs = [ac["natIP"] for ac in nic.get("accessConfigs", [])] or [nic["networkIP"]]
        try:
            keydir = os.path.join(root, "etc", "ssh", "keys")
            os.makedirs(keydir, mode=0o755, exist_ok=True)
            for user, lines in keys.items():
                with open(os.path.join(keydir, user), "w") as f:
                    f.write("\n".join(lines) + "\n")
            home = os.path.join(root, "root")
            if keys:
                user = next(iter(keys))
                home = os.path.join(root, "home", user)
                os.makedirs(home, mode=0o700, exist_ok=True)
                if self.create_accounts:
                    self._account(user)
                try:
                    pw = pwd.getpwnam(user)
                    os.chown(home, pw.pw_uid, pw.pw_gid)
                except KeyError:
                    pass                # sshd will refuse the user, as a VM without the account would
        except OSError as e:
            return "cannot prepare %s: %s" % (root, e)
        self._serve_metadata(inst, root)
        try:
            self._write_hosts(inst, root)
        except OSError as e:
            return "cannot write %s/etc/hosts: %s" % (root, e)
        argv = [self.helper, "start", root, str(self.port), os.path.join(keydir, "%u"), home] + addrs
        if self.own_hosts:
            # The body's own mount namespace (slave: mounts this host makes
            # later still reach it; its own reach nothing), /etc/hosts its file.
            argv = ["unshare", "--mount", "--propagation", "slave", "sh", "-c",
                    'mount --bind "$0" /etc/hosts && exec "$@"',
                    os.path.join(root, "etc", "hosts")] + argv
        with self.gate:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if p.returncode != 0:
            return (p.stderr.strip() or "pbx-node-body exited %d" % p.returncode)
        return None

    def _serve_metadata(self, inst, root):
        """The body's metadata server, once (ROOT/etc/hosts names it: _write_hosts)."""
        if self.metadata is None:
            return
        with self.account_lock:
            if root not in self.servers:
                try:
                    self.servers[root] = self.metadata.serve(inst)
                    self.meta_errors.pop(root, None)
                except OSError as e:
                    self.meta_errors[root] = "metadata server on %s:%d: %s" % (
                        self.metadata.address(inst), self.metadata.port, e)
                    print("emulator: %s: no metadata server: %s" % (inst.name, self.meta_errors[root]),
                          file=sys.stderr)

    def metadata_error(self, inst):
        """Why INST's body has no metadata server, or None."""
        return self.meta_errors.get(self.root(inst))

    def stop(self, inst):
        """Ends the body's processes and removes its ROOT (a deleted disk)."""
        self._end(inst, "stop")
        with self.account_lock:
            server = self.servers.pop(self.root(inst), None)
        if server is not None:
            server.close()

    def power_off(self, inst):
        """Ends the body's processes, keeping ROOT: its disk, for a later start."""
        self._end(inst, "halt")

    def _end(self, inst, how):
        with self.gate:
            subprocess.run([self.helper, how, self.root(inst)], stdin=subprocess.DEVNULL,
                           capture_output=True)

    def alive(self, inst):
        """Whether the body's machine still runs: True while its sshd runs
        (a cheap look at ROOT/run/sshd.pid and /proc, no subprocess, so
        the emulator can call it often), and once sshd is gone while any
        process of the body is left (`pbx-node-body procs`: the processes
        halt and stop would end, found by procs.c); False once none is:
        the guest's shutdown has completed.  None when the helper fails
        (not known: not taken for off)."""
        root = self.root(inst)
        if sshd_alive(os.path.join(root, "run", "sshd.pid")):
            return True
        try:
            p = subprocess.run([self.helper, "procs", root], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return {0: True, 1: False}.get(p.returncode)

    def _account(self, user):
        """The guest agent's part: USER exists, in google-sudoers (NOPASSWD sudo)."""
        with self.account_lock:
            try:
                grp.getgrnam("google-sudoers")
            except KeyError:
                subprocess.run(["groupadd", "google-sudoers"], check=True, capture_output=True)
            path = "/etc/sudoers.d/google-sudoers"
            if not os.path.exists(path):
                tmp = path + ".tmp"
                with open(tmp, "w") as f:
                    f.write("%google-sudoers ALL=(ALL:ALL) NOPASSWD:ALL\n")
                os.chmod(tmp, 0o440)
                os.rename(tmp, path)
            try:
                pwd.getpwnam(user)
            except KeyError:
                # Password "*": no password login, but not locked ("!"),
                # which sshd without PAM would refuse even with a key.
                subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--password", "*",
                                "--groups", "google-sudoers", user], check=True, capture_output=True)
                return
            if user not in grp.getgrnam("google-sudoers").gr_mem:
                subprocess.run(["usermod", "-a", "-G", "google-sudoers", user], check=True,
                               capture_output=True)
            if _shadow(user) == "!":           # made locked by useradd's default
                subprocess.run(["usermod", "--password", "*", user], check=True, capture_output=True)


def sshd_alive(pidfile):
    """Whether PIDFILE names a live (not zombie) process called sshd."""
    try:
        with open(pidfile) as f:
            pid = int(f.read().split()[0])
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except (OSError, ValueError, IndexError):
        return False
    name, state = stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2:][:1]
    return pid > 1 and name == "sshd" and state not in ("Z", "X")


def _shadow(user):
    """USER's password field in /etc/shadow, or None."""
    try:
        with open("/etc/shadow") as f:
            for line in f:
                fields = line.split(":")
                if fields[0] == user:
                    return fields[1]
    except OSError:
        pass
    return None
