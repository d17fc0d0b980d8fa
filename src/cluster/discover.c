/*
 * discover.c - what differs between a VM and a node body, asked of the
 * nodes rather than hard-wired per provider.  A node body (the local
 * provider's, or a cloud emulator's instance) says so in its SSH sessions'
 * environment: PBX_BODY_ROOT is its root prefix.  When the head is one,
 * the cluster runs like a local one on this host: bootstrap in direct
 * mode under each node's prefix, SLURM ports of its own (from the
 * cluster's slot, above the local provider's blocks), the head's lock.
 * On a VM nothing changes: the provider's layout (systemd mode) stands.
 */
#include "cluster/cluster_internal.h"
#include "cloud/local/body.h"
#include "util/fanout.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DISCOVER_CONNECT_S \
	300 /* a fresh VM's sshd and login user may take this
					  long, unless the template says (boot_timeout) */
#define BODY_PORTS_PER_SLOT 64
#define BODY_SLOT_OFFSET    8 /* past the local provider's 7 slots */

struct discover_run {
	struct pbx_cluster *c;
	char **roots; /* per node: PBX_BODY_ROOT, "" on a VM */
	const struct pbx_cluster_events *ev;
};

/* Connects to node i, retrying while it boots: its sshd not up yet, or up
 * before the guest agent has made the login user from the ssh-keys
 * metadata (a refused login, for a few seconds on a fresh VM).  Never after
 * a refused host key. */
static int discover_connect(struct pbx_cluster *c, size_t i, struct pbx_ssh **s,
			    const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	const struct pbx_cluster_template *t = c->spec.t;
	time_t until = time(NULL) + (t && t->boot_timeout ? t->boot_timeout : DISCOVER_CONNECT_S);
	int said = 0;
	for (;;) {
		if (pbx_cluster_connect(c, i, s, err) == 0)
			return 0;
		if (err->code == PBX_EXIT_SECURITY || time(NULL) >= until)
			return -1;
		if (!said++)
			pbx_events_stage(ev, i, "booting");
		pbx_err_clear(err);
		sleep(2);
	}
}

static int discover_one(void *ctx, size_t i, struct pbx_err *err)
{
	struct discover_run *r = ctx;
	struct pbx_buf out = PBX_BUF_INIT;
	struct pbx_ssh *s;
	int status = 0, rc;
	pbx_events_stage(r->ev, i, "ssh");
	if (r->c->here == (int)i) { /* pbx on the head: its own environment */
		const char *root = getenv("PBX_BODY_ROOT");
		pbx_buf_adds(&out, root ? root : "");
		rc = 0;
	} else {
		rc = discover_connect(r->c, i, &s, r->ev, err);
		if (rc == 0)
			rc = pbx_ssh_capture(s, "printf '%s' \"${PBX_BODY_ROOT-}\"", &out, NULL,
					     &status, err);
	}
	if (rc < 0) {
		pbx_buf_release(&out);
		return -1;
	}
	r->roots[i] = pbx_buf_detach(&out, NULL);
	if (status != 0 || (r->roots[i][0] && r->roots[i][0] != '/'))
		return pbx_err_set(err, "node %s: PBX_BODY_ROOT is not an absolute path",
				   r->c->nodes[i].name);
	return 0;
}

/* On the head, the head's pbx (pbx-head): the first SLURM port and the
 * shared directory as the head's bootstrap has them (its cluster directory
 * is not the user's, from which the user's pbx derives them).  0, or -1
 * when pbx-head did not say. */
static int discover_head_layout(const struct pbx_cluster *c, int *base, const char **shared)
{
	const char *port = getenv("PBX_BODY_PORT_BASE");
	char *end = NULL;
	long v;
	*shared = getenv("PBX_BODY_SHARED");
	if (c->here < 0 || !port || !*shared || (*shared)[0] != '/')
		return -1;
	v = strtol(port, &end, 10);
	if (end == port || *end || v < 1024 || v > 65535 - BODY_PORTS_PER_SLOT)
		return -1;
	*base = (int)v;
	return 0;
}

/* The layout of node bodies on this host (the local provider's, with the
 * ports of a block of the cluster's own).  It is the same whichever nodes
 * are awake: slurm.conf never changes as nodes sleep and wake. */
static int discover_body_layout(struct pbx_cluster *c, struct pbx_slurm_layout *l,
				struct pbx_err *err)
{
	int base = (c->cfg->local.slurm_port_base ? c->cfg->local.slurm_port_base : 17000) +
		   (BODY_SLOT_OFFSET + c->row.slot) * BODY_PORTS_PER_SLOT;
	int nodes = c->spec.t ? pbx_template_node_count(c->spec.t) : (int)c->nnodes - 1;
	const char *shared = NULL;
	int head = discover_head_layout(c, &base, &shared) == 0;
	if (base + BODY_PORTS_PER_SLOT > 65535)
		return pbx_err_set(err, "no SLURM ports left for node bodies of slot %d",
				   c->row.slot);
	/* the memory of every compute node (asleep ones too) is shared out */
	if (pbx_body_layout(base, BODY_PORTS_PER_SLOT, nodes > 1 ? nodes : 1, c->dir, l, err) < 0)
		return -1;
	if (head && strlen(shared) >= sizeof(l->shared_dir))
		return pbx_err_set(err, "PBX_BODY_SHARED is longer than %zu bytes",
				   sizeof(l->shared_dir) - 1);
	if (head)
		snprintf(l->shared_dir, sizeof(l->shared_dir), "%s", shared);
	return 0;
}

int pbx_cluster_discover(struct pbx_cluster *c, struct pbx_slurm_layout *l,
			 const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	struct discover_run r = { c, xcalloc(c->nnodes ? c->nnodes : 1, sizeof(char *)), ev };
	struct pbx_err *errs = xcalloc(c->nnodes ? c->nnodes : 1, sizeof(*errs));
	size_t i;
	int rc = 0;
	if (pbx_fanout(c->nnodes, 32, discover_one, &r, errs) > 0) {
		for (i = 0; i < c->nnodes; i++)
			if (errs[i].msg[0]) {
				*err = errs[i];
				break;
			}
		rc = -1;
	}
	if (rc == 0 && c->nnodes && r.roots[0][0]) {
		for (i = 0; i < c->nnodes; i++) {
			free(c->nodes[i].root);
			c->nodes[i].root = xstrdup(r.roots[i]);
		}
		rc = discover_body_layout(c, l, err);
	}
	for (i = 0; i < c->nnodes; i++)
		free(r.roots[i]);
	free(r.roots);
	free(errs);
	return rc;
}
