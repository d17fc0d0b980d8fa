/*
 * autostop_off.c - autostop power-off (not SLURM power saving: slurm_sleep*.c): whether a cluster is powered off, and why, for the verbs that
 * find its head unreachable (docs/autostop.md).  A cluster that stopped
 * itself (templates/autostop.sh) keeps its disks: on a cloud its head
 * instance is TERMINATED (Compute Engine) or stopped (EC2); on the local
 * cloud the head body runs no process.  The head wrote why on its own
 * disk (var/lib/pbx/autostop.last), which pbx can read where that disk is
 * a directory of this machine (node bodies); on a cloud it is read back
 * when the cluster runs again.
 */
#include "cluster/cluster_internal.h"
#include "cloud/local/body.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/visible.h"
#include "util/xalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUTOSTOP_LAST PBX_NODE_DIR "/autostop.last"

/* "stopped at T: REASON" from a body's autostop.last, or NULL. */
static char *off_last_stop(const char *root)
{
	char *path = xasprintf("%s/" AUTOSTOP_LAST, root), *line, *save = NULL, *res = NULL;
	const char *at = NULL, *reason = NULL;
	struct pbx_buf b = PBX_BUF_INIT;
	if (pbx_read_file(path, &b, NULL) == 0 && b.len < 4096) {
		for (line = strtok_r(b.buf, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			if (!strncmp(line, "stopped_at=", 11))
				at = line + 11;
			else if (!strncmp(line, "reason=", 7))
				reason = line + 7;
		}
		if (at && reason) {
			char *text = xasprintf("stopped itself at %s: %s", at, reason);
			res = pbx_visible(text, PBX_VISIBLE_LINE); /* written on the node */
			free(text);
		}
	}
	pbx_buf_release(&b);
	free(path);
	return res;
}

/* c->stopped_at and c->stops: connections to several nodes at once
 * (discovery's fan-out) may each find the cluster stopped. */
static pthread_mutex_t autostop_off_lock = PTHREAD_MUTEX_INITIALIZER;

/* Each node's stop time as the cloud lists it, into c->stops by name
 * (autostop_off_lock held). */
static void off_stop_times(struct pbx_cluster *c, const struct pbx_instance *v, size_t n)
{
	size_t i, k;
	free(c->stops);
	c->stops = NULL;
	c->nstops = 0;
	for (k = 0; k < c->nnodes; k++)
		for (i = 0; i < n; i++)
			if (c->nodes[k].instance_id && v[i].id && v[i].stopped_at > 0 &&
			    !strcmp(v[i].id, c->nodes[k].instance_id)) {
				c->stops =
					xreallocarray(c->stops, c->nstops + 1, sizeof(*c->stops));
				snprintf(c->stops[c->nstops].name, sizeof(c->stops[0].name), "%s",
					 c->nodes[k].name);
				c->stops[c->nstops++].at = v[i].stopped_at;
			}
}

/* Whether a cloud's instance state is powered off, or going to be (EC2's
 * terminated and shutting-down too when gone_too: an instance being
 * deleted, which bills nothing more). */
static int off_state_off(const char *state, int gone_too)
{
	static const char *const off[] = {
		"TERMINATED", "STOPPING",   "SUSPENDED",  "stopped",
		"stopping",   "SUSPENDING", "terminated", "shutting-down"
	};
	size_t i, n = sizeof(off) / sizeof(off[0]) - (gone_too ? 0 : 3);
	for (i = 0; state && i < n; i++)
		if (!strcmp(state, off[i]))
			return 1;
	return 0;
}

/* The node name of listed instance v in cluster c: the store's node with
 * its id, else the node the cloud says it was made for, else its id. */
static const char *off_node_of(const struct pbx_cluster *c, const struct pbx_instance *v)
{
	size_t k;
	for (k = 0; k < c->nnodes; k++)
		if (c->nodes[k].instance_id && !strcmp(c->nodes[k].instance_id, v->id))
			return c->nodes[k].name;
	return v->node ? v->node : v->id;
}

/* c->still_running: the instances v[0..n) lists running besides the head
 * (autostop_off_lock held): a node SLURM saw go down but the cloud still bills
 * (a resume killed part-way), which autostop's stop did not reach. */
static void off_still_running(struct pbx_cluster *c, const struct pbx_instance *v, size_t n)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	free(c->still_running);
	c->still_running = NULL;
	for (i = 0; i < n; i++) {
		if (!v[i].id || !strcmp(v[i].id, c->nodes[0].instance_id) || !v[i].state ||
		    !pbx_instance_is_machine(&v[i]) || off_state_off(v[i].state, 1))
			continue;
		char *name = pbx_visible(off_node_of(c, &v[i]), PBX_VISIBLE_LINE);
		pbx_buf_addf(&b, "%s%s", b.len ? " " : "", name);
		free(name);
	}
	if (b.len)
		c->still_running = pbx_buf_detach(&b, NULL);
	pbx_buf_release(&b);
}

/* Whether the provider lists the head's instance as powered off (1; then
 * c->stopped_at is when it stopped, as the cloud says (0: not said), and
 * c->stops each node's), or lists it no more (2: deleted, e.g. by the head
 * itself, autostop_action: delete), or neither (0). */
static int off_head_off(struct pbx_cluster *c, char **state)
{
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	const char *head = c->nodes[0].instance_id;
	size_t n = 0, i;
	int off = 2;
	if (!head || !*head || c->provider->list(c->pctx, &v, &n, &err) < 0)
		return 0;
	pthread_mutex_lock(&autostop_off_lock);
	off_stop_times(c, v, n);
	pthread_mutex_unlock(&autostop_off_lock);
	for (i = 0; i < n && off == 2; i++) {
		/* the head's handle: its instance name (gce), its id (aws) */
		if (strcmp(v[i].id, head) != 0)
			continue;
		off = 0;
		if (!v[i].state)
			continue;
		if (off_state_off(v[i].state, 1)) {
			*state = pbx_visible(v[i].state, PBX_VISIBLE_LINE);
			pthread_mutex_lock(&autostop_off_lock);
			c->stopped_at = v[i].stopped_at;
			pthread_mutex_unlock(&autostop_off_lock);
			off = 1;
		}
	}
	pthread_mutex_lock(&autostop_off_lock);
	if (off == 1)
		off_still_running(c, v, n);
	pthread_mutex_unlock(&autostop_off_lock);
	pbx_instances_free(v, n);
	return off;
}

static char *off_stopped_why(struct pbx_cluster *c)
{
	char *state = NULL, *why;
	if (!c->nnodes)
		return NULL;
	if (!strcmp(c->row.cloud, "local")) {
		if (!c->nodes[0].root || !*c->nodes[0].root || pbx_body_running(c->nodes[0].root))
			return NULL;
		why = off_last_stop(c->nodes[0].root);
		return why ? why : xstrdup("its node bodies run no process");
	}
	switch (off_head_off(c, &state)) {
	case 0:
		return NULL;
	case 2:
		state = pbx_visible(c->nodes[0].instance_id, PBX_VISIBLE_LINE);
		why = xasprintf("its head instance %s no longer exists (deleted: by the head "
				"itself with autostop_action: delete, or outside pbx); 'pbx "
				"cluster stop %s' removes what is left and forgets it",
				state, c->row.name);
		free(state);
		return why;
	}
	why = xasprintf("its head instance is %s (powered off: autostop, or a shutdown on the "
			"machine; its disks are kept)%s%s%s",
			state, c->still_running ? "; still running, and billed: " : "",
			c->still_running ? c->still_running : "",
			c->still_running ? " ('pbx cluster start' then lets autostop stop them, "
					   "'pbx cluster stop' deletes the cluster)"
					 : "");
	free(state);
	return why;
}

char *pbx_cluster_stopped_why(struct pbx_cluster *c)
{
	char *why = off_stopped_why(c);
	if (why && strcmp(c->row.state, "stopped") != 0) {
		pbx_cluster_mark(c, "stopped"); /* what `cluster list` shows from now on */
		free(c->row.state);
		c->row.state = xstrdup("stopped");
	}
	return why;
}

char *pbx_cluster_last_stop(const struct pbx_cluster *c)
{
	if (!c->nnodes || !c->nodes[0].root || !*c->nodes[0].root)
		return NULL;
	return off_last_stop(c->nodes[0].root);
}
