/*
 * slurm_sleep.c - `pbx cluster power NAME resume|suspend NODE...`, what
 * SLURM's ResumeProgram and SuspendProgram run on a cluster that saves
 * power (docs/power-saving.md; not autostop's power-off, autostop_off.c).
 * A verb: a resume marks the nodes waking and runs the start verb
 * (start.c), which makes and bootstraps them; a suspend removes their
 * instances.  slurm_sleep_plan.c says which nodes may sleep,
 * slurm_sleep_steps.c stages the programs that call this.
 */
#include "cluster/cluster_internal.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/quote.h"
#include "util/testkill.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* Marks SLURM nodes `names` ("node2,node3") failed in one round trip,
 * with "pbx resume failed: WHY" as the reason: drained (SLURM requeues the
 * jobs it was starting there and sends no new one), powered down at once
 * (SLURM does not wait for them until ResumeTimeout, which would replace
 * the reason), then DOWN (not woken again until someone resumes them).
 * WHY may carry a node's own words: only printable ASCII of it, one line,
 * at most 200 bytes, goes into the reason.  Best effort. */
static void sleep_mark_failed(struct pbx_cluster *c, const char *names, const char *why)
{
	static const char *const states[] = { "drain", "power_down_force", "down" };
	struct pbx_buf script = PBX_BUF_INIT, reason = PBX_BUF_INIT;
	struct pbx_cluster_output o;
	struct pbx_err err = PBX_ERR_INIT;
	size_t i;
	pbx_buf_adds(&reason, "reason=pbx resume failed: ");
	for (i = 0; why[i] && i < 200; i++)
		pbx_buf_addc(&reason, why[i] >= 0x20 && why[i] < 0x7f ? why[i] : ' ');
	for (i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		pbx_buf_addf(&script, "scontrol update state=%s nodename=", states[i]);
		pbx_shell_quote(&script, names);
		pbx_buf_addc(&script, ' ');
		pbx_shell_quote(&script, reason.buf);
		pbx_buf_addc(&script, '\n');
	}
	pbx_cluster_run(c, 0, script.buf, NULL, &o, &err);
	pbx_cluster_output_release(&o);
	pbx_buf_release(&script);
	pbx_buf_release(&reason);
}

/* Marks "waking" each node of names[0..n) that may sleep and is not up:
 * asleep, or left half made by a resume killed on the way (waking,
 * creating, bootstrapping), which the start that follows makes anew.  Names
 * are only matched against the store's rows: the head, a node that always
 * runs, a node that is up and any other name are left alone.  Returns how
 * many are waking now. */
static size_t sleep_wake(struct pbx_cluster *c, char **names, size_t n)
{
	struct pbx_node_row *rows = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t nr = 0, i, k, done = 0;
	if (pbx_store_node_list(c->store, c->row.id, &rows, &nr, &err) < 0)
		return 0;
	for (i = 0; i < n; i++)
		for (k = 0; k < nr; k++) {
			const char *st = rows[k].state;
			if (strcmp(rows[k].name, names[i]) != 0 || !st || !strcmp(st, "up") ||
			    !pbx_power_remade(c->spec.t, names[i]))
				continue;
			if (!strcmp(st, PBX_NODE_WAKING) ||
			    pbx_store_node_set_state(c->store, c->row.id, names[i], PBX_NODE_WAKING,
						     &err) == 0)
				done++;
		}
	pbx_node_rows_free(rows, nr);
	return done;
}

static int sleep_resume(struct pbx_store *st, const struct pbx_config *cfg, struct pbx_cluster *c,
			char **names, size_t n, struct pbx_err *err)
{
	struct pbx_err oerr = PBX_ERR_INIT;
	char *name = xstrdup(c->row.name);
	size_t i, woken = sleep_wake(c, names, n);
	int rc = 0;
	/* each is made anew, with a new host key: pinned again on first
	 * contact, as for any node pbx makes */
	for (i = 0; i < n; i++) {
		char *prefix = xasprintf("%s/%s@", name, names[i]);
		int removed = 0;
		pbx_store_hostkey_forget_prefix(st, prefix, &removed, &oerr);
		free(prefix);
	}
	pbx_store_event(st, c->row.id, "power.resume", "%zu of %zu nodes", woken, n);
	pbx_test_kill_point("power", 1);
	pbx_cluster_close(c);
	if (woken)
		rc = pbx_cluster_start_name(st, cfg, name, NULL, err);
	if (rc < 0 && pbx_cluster_open(st, cfg, name, &c, &oerr) == 0) {
		/* nothing is left half made: the nodes sleep again, their jobs
		 * go back to the queue, and SLURM hears why (DOWN with the
		 * reason: it does not try them again by itself) */
		const struct pbx_provider *p = c->provider;
		struct pbx_buf down = PBX_BUF_INIT;
		for (i = 0; i < c->nnodes; i++) {
			size_t k;
			for (k = 0; k < n && strcmp(names[k], c->nodes[i].name); k++)
				;
			if (k == n || !c->nodes[i].state || !strcmp(c->nodes[i].state, "up"))
				continue;
			if (p->remove_nodes)
				p->remove_nodes(c->pctx, &c->nodes[i], 1, &oerr);
			pbx_store_node_set_state(st, c->row.id, c->nodes[i].name, PBX_NODE_ASLEEP,
						 &oerr);
			pbx_buf_addf(&down, "%s%s", down.len ? "," : "", c->nodes[i].name);
		}
		if (down.len)
			sleep_mark_failed(c, down.buf, err->msg);
		pbx_buf_release(&down);
		pbx_cluster_close(c);
	}
	free(name);
	return rc;
}

static int sleep_suspend(struct pbx_cluster *c, char **names, size_t n, struct pbx_err *err)
{
	struct pbx_node_row *v = xcalloc(n ? n : 1, sizeof(*v));
	size_t i, k, m = 0;
	int rc = 0;
	/* asleep ones too: SLURM has them up, so an instance may exist that
	 * the store missed; removing a node that is gone is fine */
	for (i = 0; i < n; i++)
		for (k = 0; k < c->nnodes; k++)
			if (!strcmp(c->nodes[k].name, names[i]) &&
			    pbx_power_remade(c->spec.t, names[i]))
				v[m++] = c->nodes[k]; /* borrowed */
	pbx_store_event(c->store, c->row.id, "power.suspend", "%zu of %zu nodes", m, n);
	if (m && c->provider->remove_nodes)
		rc = c->provider->remove_nodes(c->pctx, v, m, err);
	for (i = 0; rc == 0 && i < m; i++)
		rc = pbx_store_node_set_state(c->store, c->row.id, v[i].name, PBX_NODE_ASLEEP, err);
	free(v);
	pbx_cluster_close(c);
	return rc;
}

/* One power action of a cluster at a time: SLURM runs ResumeProgram and
 * SuspendProgram as it sees fit, and a suspend that read the store while
 * a resume was making the same node would miss its instance (seen with a
 * power_down_force during a resume).  The lock is CLUSTER_DIR/power.lock,
 * held (flock) until *fd is closed; a SIGKILL lets it go. */
static int slurm_sleep_lock(struct pbx_store *st, const char *name, int *fd, struct pbx_err *err)
{
	struct pbx_cluster_row row;
	char *dir, *path;
	int rc = 0;
	*fd = -1;
	if (!pbx_config_name_ok(name))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "'%s' is not a cluster name", name);
	if (pbx_store_cluster_get(st, name, &row, err) < 0)
		return -1; /* no such cluster: nothing made for it */
	pbx_cluster_row_free(&row);
	dir = pbx_cluster_dir(name);
	path = xasprintf("%s/power.lock", dir);
	if (pbx_mkdir_p(dir, 0700, err) < 0)
		rc = -1;
	else if ((*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		rc = pbx_err_set(err, "%s: %s", path, strerror(errno));
	else if (flock(*fd, LOCK_EX) < 0)
		rc = pbx_err_set(err, "%s: flock: %s", path, strerror(errno));
	free(path);
	free(dir);
	return rc;
}

int pbx_cluster_power(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		      const char *action, char **nodes, size_t n, struct pbx_err *err)
{
	struct pbx_cluster *c = NULL;
	int lock = -1, rc;
	size_t i;
	if (strcmp(action, "resume") != 0 && strcmp(action, "suspend") != 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "expected resume or suspend, got '%s'",
				    action);
	if (slurm_sleep_lock(st, name, &lock, err) < 0 ||
	    pbx_cluster_open(st, cfg, name, &c, err) < 0) {
		if (lock >= 0)
			close(lock);
		return -1;
	}
	if (!pbx_power_saving(c->spec.t)) {
		pbx_cluster_close(c);
		close(lock);
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "cluster %s has no power-saving node "
				    "group (min: below its count)",
				    name);
	}
	for (i = 0; i < n; i++)
		if (!pbx_power_remade(c->spec.t, nodes[i])) {
			pbx_cluster_close(c);
			close(lock);
			return pbx_err_setc(err, PBX_EXIT_USAGE,
					    "'%.64s' is not a node of cluster %s that power saving "
					    "makes and removes: nothing done",
					    nodes[i], name);
		}
	if (!strcmp(action, "resume"))
		rc = sleep_resume(st, cfg, c, nodes, n, err);
	else
		rc = sleep_suspend(c, nodes, n, err);
	close(lock);
	return rc;
}
