#!/usr/bin/env python3
"""preempt.py - templates/preempt.sh (pbx-preempt, docs/spot.md) against
the emulators' own metadata servers, with SLURM's commands stubbed: on
Compute Engine it waits on instance/preempted and acts once it is TRUE, on
EC2 it polls IMDSv2's spot/instance-action and acts once it answers 200.
Acting is: the node drained, then `scancel --signal=TERM --batch` for each
job squeue lists on it, then a log line; once only.  `pbx-preempt stop`
(the machine's shutdown: Compute Engine presses the power button with its
notice) acts on a notice the watch has not acted on yet, never twice, and
then waits (PBX_PREEMPT_STOP_WAIT) for the node's jobs to leave; without a
notice it does nothing.  Hostile values from
the metadata server or squeue are never run.  Servers on 127.0.100.250 and
127.0.100.251, port 80 (so root; skipped, 77, otherwise).  TAP output.

    python3 preempt.py SOURCE_DIR
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
sys.path.insert(0, os.path.join(SRC, "tests/emulators/gce"))
sys.path.insert(0, os.path.join(SRC, "tests/emulators/aws"))
import imds  # noqa: E402
import metadata  # noqa: E402

n = failed = 0


def ok(cond, what):
    global n, failed
    n += 1
    failed += not cond
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what), flush=True)


def wait_for(check, timeout):
    end = time.time() + timeout
    while not check() and time.time() < end:
        time.sleep(0.1)
    return check()


STUB = """#!/bin/sh
# a stand-in for SLURM's %s: records its arguments, one per line, then a blank line
{ echo "%s"; for a in "$@"; do printf '%%s\\n' "$a"; done; echo; } >>"%s"
%s
"""


def node(tmp, cloud, addr, name, power, where=None):
    """A node body's root (tmp/WHERE, default tmp/CLOUD) with the watcher,
    its settings, a slurm.conf (with SLURM's power saving when POWER),
    /etc/hosts and stubs of scontrol, squeue and scancel; returns (root,
    bin dir)."""
    root = os.path.join(tmp, where or cloud)
    for d in ("usr/local/sbin", "etc/pbx", "bin"):
        os.makedirs(os.path.join(root, d))
    shutil.copy(os.path.join(SRC, "templates/preempt.sh"), os.path.join(root, "usr/local/sbin/pbx-preempt"))
    with open(os.path.join(root, "etc/hosts"), "w") as f:
        f.write("# the emulator's\n%s %s\n" % (addr, name))
    with open(os.path.join(root, "etc/pbx/preempt.conf"), "w") as f:
        f.write("PBX_MODE='direct'\nPBX_NODE='spot1'\nPBX_ROOT='%s'\nSLURM_CONF='%s/slurm.conf'\n"
                "PBX_SPOT='%s'\nPBX_PREEMPT_POLL='1'\nPBX_PREEMPT_STOP_WAIT='2'\n" % (root, root, cloud))
    with open(os.path.join(root, "slurm.conf"), "w") as f:
        # without power saving, the words only in a comment and a value
        f.write("# ResumeProgram=x\nClusterName=c1\nSuspendExcNodes=ResumeProgram=\n")
        if power:
            f.write("ResumeProgram=/usr/local/lib/pbx/pbx-resume\n")
    # (a wait of 2 s, counted in whole seconds of `date +%s`, lasts 1 to 2 s)
    calls = os.path.join(root, "calls")
    pwned = os.path.join(root, "PWNED")
    for cmd, body in (("scontrol", ""), ("scancel", ""),
                      ("squeue", "printf '41\\n42_3\\n$(touch %s)\\n43;touch %s\\n`touch %s`\\n' " % (pwned, pwned, pwned))):
        path = os.path.join(root, "bin", cmd)
        with open(path, "w") as f:
            f.write(STUB % (cmd, cmd, calls, body))
        os.chmod(path, 0o755)
    return root, os.path.join(root, "bin")


def start(root, bindir, verb="watch"):
    env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])
    log = open(os.path.join(root, "log"), "a")
    return subprocess.Popen(["sh", os.path.join(root, "usr/local/sbin/pbx-preempt"), verb], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(root, bindir):
    """`pbx-preempt stop` as the shutdown runs it: (exit status, seconds)."""
    t0 = time.time()
    p = start(root, bindir, "stop")
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        rc = p.wait()
    return rc, time.time() - t0


def actions(root):
    """The calls that act: scontrol update and scancel."""
    return [c for c in read(root, "calls").split("\n\n") if c.startswith(("scontrol\nupdate", "scancel"))]


def read(root, name):
    try:
        with open(os.path.join(root, name)) as f:
            return f.read()
    except OSError:
        return ""


def acted(root, cloud, how):
    """The checks of a notice acted on: the node marked HOW (DRAIN, or
    POWER_DOWN_ASAP on a cluster with power saving)."""
    calls = read(root, "calls").split("\n\n")
    want = ["scontrol\nupdate\nnodename=spot1\nstate=%s\nreason=spot preemption notice" % how,
            "squeue\n-h\n-w\nspot1\n-t\nRUNNING\n-o\n%A",
            "scancel\n--signal=TERM\n--batch\n41", "scancel\n--signal=TERM\n--batch\n42_3", ""]
    ok(calls == want, "%s: %s, then SIGTERM to the batch step of jobs 41 and 42_3 only: %r" % (cloud, how, calls))
    ok(not os.path.exists(os.path.join(root, "PWNED")), "%s: nothing a value held was run" % cloud)
    ok("preemption notice (" in read(root, "log") and "job 42_3: SIGTERM sent to its batch step" in read(root, "log"),
       "%s: it says what it did" % cloud)
    ok("noticed_at=" in read(root, "var/lib/pbx/preempted"), "%s: the notice is recorded" % cloud)


def gce(tmp):
    # a node power saving makes: powered down once its jobs leave
    root, bindir = node(tmp, "gce", "127.0.100.250", "metadata.google.internal", True)
    pwned = os.path.join(root, "PWNED")
    tree = {"instance": {"preempted": "$(touch %s)`touch %s`" % (pwned, pwned)}}
    server = metadata.BodyServer("127.0.100.250", 80, lambda: json.loads(json.dumps(tree)))
    p = start(root, bindir)
    try:
        time.sleep(2)
        ok(read(root, "calls") == "" and p.poll() is None,
           "gce: a preempted value that is not TRUE is no notice (%r)" % read(root, "log"))
        tree["instance"]["preempted"] = "FALSE"
        time.sleep(1.5)
        ok(read(root, "calls") == "", "gce: FALSE is no notice")
        t0 = time.time()
        tree["instance"]["preempted"] = "TRUE"
        ok(wait_for(lambda: read(root, "calls").count("scancel") == 2, 10),
           "gce: TRUE is acted on (%.1f s; the server is waited on, not polled)" % (time.time() - t0))
        time.sleep(1.5)
        acted(root, "gce", "POWER_DOWN_ASAP")
        # the shutdown that follows: acted already, so it only waits
        before = actions(root)
        rc, took = stop(root, bindir)
        ok(rc == 0 and actions(root) == before and 1 <= took < 10,
           "gce: stop after the watch acted: no second action, it waits for the jobs (%.1f s)" % took)
        ok("jobs still run on spot1 after 2 s" in read(root, "log"), "gce: and says they had not left")
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait()
        server.close()


def gce_shutdown(tmp):
    """The shutdown comes before the watch saw the notice (or with no
    watch): stop acts on it itself, once."""
    root, bindir = node(tmp, "gce", "127.0.100.250", "metadata.google.internal", True, "gce-stop")
    tree = {"instance": {"preempted": "FALSE"}}
    server = metadata.BodyServer("127.0.100.250", 80, lambda: json.loads(json.dumps(tree)))
    try:
        rc, took = stop(root, bindir)
        ok(rc == 0 and read(root, "calls") == "" and took < 10,
           "gce: a shutdown without a notice (autostop's, a reboot) does nothing (%.1f s)" % took)
        tree["instance"]["preempted"] = "TRUE"
        rc, took = stop(root, bindir)
        calls = read(root, "calls").split("\n\n")
        ok(rc == 0 and calls[0:4] == [
            "scontrol\nupdate\nnodename=spot1\nstate=POWER_DOWN_ASAP\nreason=spot preemption notice",
            "squeue\n-h\n-w\nspot1\n-t\nRUNNING\n-o\n%A",
            "scancel\n--signal=TERM\n--batch\n41", "scancel\n--signal=TERM\n--batch\n42_3"],
           "gce: a shutdown with a notice the watch had not seen acts on it: %r" % calls[:4])
        ok("seen at the machine's shutdown" in read(root, "log") and 1 <= took < 10,
           "gce: says so, and waits for the jobs (%.1f s)" % took)
        before = actions(root)
        stop(root, bindir)
        ok(actions(root) == before, "gce: a second stop does not act again")
    finally:
        server.close()


def aws(tmp):
    # a cluster without power saving: the node is drained, as nothing makes it again
    root, bindir = node(tmp, "aws", "127.0.100.251", "instance-data", False)
    notice = {}

    def doc():
        md = {"instance-id": "i-0spot", "instance-life-cycle": "spot"}
        if notice:
            md["spot"] = {"instance-action": json.dumps(notice)}
        return {"meta-data": md, "dynamic": {}, "user-data": None, "http_tokens": "required"}
    server = imds.BodyServer("127.0.100.251", 80, doc)
    p = start(root, bindir)
    try:
        rc, took = stop(root, bindir)
        ok(rc == 0 and read(root, "calls") == "" and took < 10,
           "aws: a shutdown without a notice does nothing (%.1f s)" % took)
        time.sleep(2.5)
        ok(read(root, "calls") == "" and p.poll() is None, "aws: no notice (404), nothing done")
        notice.update(action="terminate", time="2030-01-01T00:02:00Z$(touch %s)" % os.path.join(root, "PWNED"))
        ok(wait_for(lambda: read(root, "calls").count("scancel") == 2, 10), "aws: a notice is acted on")
        time.sleep(1.5)
        acted(root, "aws", "DRAIN")
        ok('"action": "terminate"' in read(root, "log"), "aws: the log quotes the notice: %r"
           % read(root, "log").splitlines()[-4:])
        before = actions(root)
        rc, took = stop(root, bindir)
        ok(rc == 0 and actions(root) == before and 1 <= took < 10,
           "aws: stop after the watch acted: no second action, it waits for the jobs (%.1f s)" % took)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait()
        server.close()


def main():
    if os.geteuid() != 0:
        print("1..0 # SKIP the metadata servers listen on port 80: root only")
        return 77
    tmp = tempfile.mkdtemp(prefix="pbx-preempt.")
    try:
        gce(tmp)
        gce_shutdown(tmp)
        aws(tmp)
    except OSError as e:
        print("1..0 # SKIP %s" % e)
        return 77
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
