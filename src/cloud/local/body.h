/*
 * body.h - a node body: an sshd on its own loopback address(es) with its
 * own root prefix (ROOT/etc/ssh, ROOT/run, ROOT/var/log), which the same
 * bootstrap then treats as a machine.  The local provider makes its nodes
 * with it, and so does the Compute Engine emulator under tests/ (through
 * tests/emulators/gce/node_body.c), so both hand out the same bodies.
 */
#ifndef PBX_CLOUD_LOCAL_BODY_H
#define PBX_CLOUD_LOCAL_BODY_H

#include "util/err.h"

struct pbx_body {
	const char *root;             /* the body's prefix; made if missing */
	const char *const *addresses; /* where sshd listens, NULL-terminated (>= 1) */
	int port;                     /* the same port on every address */
	const char *authorized_keys;  /* sshd's AuthorizedKeysFile (tokens such as %u allowed) */
	const char *home;             /* HOME of every session: made (0700) if missing */
};

/* Makes the body's directories and host key (once) and starts its sshd
 * unless it already runs, after the body's last shutdown has ended (every
 * process of it gone; at most 15 s); returns once sshd listens, or -1 with err
 * quoting sshd's last log line.  Sessions get HOME=b->home and
 * PBX_BODY_ROOT=b->root in their environment. */
int pbx_body_start(const struct pbx_body *b, struct pbx_err *err);
/* 1 when the body at `root` runs (its sshd's pid file names a live sshd),
 * else 0: never started, or powered off (autostop ends every process of
 * the body, templates/autostop.sh). */
int pbx_body_running(const char *root);

struct pbx_slurm_layout;

/* The SLURM layout of `nodes` node bodies on this host (the local
 * provider's, and pbx's on an emulator's bodies): daemons started
 * directly, SLURM on ports [port_base, port_base + ports), each node an
 * equal part of this machine's memory, the cluster's files under `dir`,
 * the local pbx-train linked onto the nodes, requeued jobs restarting
 * after 15 s.  Fills *l; -1 with err set when the host name is unknown. */
int pbx_body_layout(int port_base, int ports, int nodes, const char *dir,
		    struct pbx_slurm_layout *l, struct pbx_err *err);

#endif
