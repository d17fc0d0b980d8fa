/*
 * powersave.c - SLURM power saving (issue 19, section 2; docs/power-saving.md):
 * compute nodes that exist only while jobs need them.
 *
 * A node group with `min:` has `count` nodes (max:), of which NAME1..NAMEmin
 * always run; the others are "asleep": store state PBX_NODE_ASLEEP, no
 * instance, and State=CLOUD in slurm.conf, which also names SLURM's
 * ResumeProgram and SuspendProgram: two scripts pbx stages on the head
 * (pbx-resume, pbx-suspend; the bootstrap installs them in
 * /usr/local/lib/pbx).  When jobs wait for an asleep node slurmctld
 * runs pbx-resume with the nodes, which runs `pbx cluster power NAME resume
 * NODE...`: the nodes become "waking" (a resume killed on the way leaves
 * them so; SLURM's next resume of them goes on), and a start of the cluster makes
 * them and bootstraps them (the rest of the cluster is already up: only
 * checked).  When a node has been idle for SuspendTime, pbx-suspend runs
 * `... suspend NODE...`: its instance goes and it is asleep again.  The
 * slurm.conf of a cluster never changes as nodes wake and sleep.
 *
 * On a cloud the head's own pbx (pbx-head) runs the two, as the head's
 * own cloud identity (docs/head-identity.md); slurm.conf names a node that
 * sleeps by a name (provider->dns_name) that the cloud's DNS resolves
 * (Compute Engine) or that the head writes into every node's /etc/hosts
 * (EC2: power_stage_hosts).
 */
#include "cluster/cluster_internal.h"
#include "tmpl/tmpl.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/quote.h"
#include "util/testkill.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define POWER_SUSPEND_DEFAULT_S 600 /* ParallelCluster's ScaledownIdletime */

/* Node `name`'s group and its number in it (gpu3: 3), or NULL. */
static const struct pbx_node_group *power_group(const struct pbx_cluster_template *t,
						const char *name, int *k)
{
	const struct pbx_node_group *g = t ? pbx_cloud_group_of(t, name) : NULL;
	*k = g ? atoi(name + strlen(g->name)) : 0;
	return g;
}

int pbx_power_may_sleep(const struct pbx_cluster_template *t, const char *name)
{
	int k;
	const struct pbx_node_group *g = power_group(t, name, &k);
	return g && g->min >= 0 && k > g->min;
}

int pbx_power_remade(const struct pbx_cluster_template *t, const char *name)
{
	int k;
	const struct pbx_node_group *g = power_group(t, name, &k);
	return g && k >= 1 && k <= g->count && pbx_power_saving(t) &&
	       (g->spot || pbx_power_may_sleep(t, name));
}

void pbx_power_plan(struct pbx_cluster *c, struct pbx_node_row *planned, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(planned[i].role, "compute") &&
		    pbx_power_may_sleep(c->spec.t, planned[i].name)) {
			free(planned[i].state);
			planned[i].state = xstrdup(PBX_NODE_ASLEEP);
		}
}

int pbx_power_split(struct pbx_cluster *c, struct pbx_err *err)
{
	size_t i, k = 0;
	int rc = 0;
	pbx_node_rows_free(c->asleep, c->nasleep);
	c->asleep = NULL;
	c->nasleep = 0;
	/* every row moves (a failed record does not stop the move: a row
	 * must never be in both arrays) */
	for (i = 0; i < c->nnodes; i++) {
		/* a Spot node that always runs, asleep since a preemption (its
		 * suspend removed it; docs/spot.md): the user's start makes it,
		 * as the head's pbx-suspend would have SLURM do */
		if (c->here < 0 && c->nodes[i].state &&
		    !strcmp(c->nodes[i].state, PBX_NODE_ASLEEP) &&
		    !pbx_power_may_sleep(c->spec.t, c->nodes[i].name)) {
			free(c->nodes[i].state);
			c->nodes[i].state = xstrdup(PBX_NODE_WAKING);
		}
		if (c->nodes[i].state && !strcmp(c->nodes[i].state, PBX_NODE_ASLEEP)) {
			if (rc == 0 && pbx_store_node_put(c->store, &c->nodes[i], err) < 0)
				rc = -1;
			c->asleep = xreallocarray(c->asleep, c->nasleep + 1, sizeof(*c->asleep));
			c->asleep[c->nasleep++] = c->nodes[i];
			continue;
		}
		c->nodes[k++] = c->nodes[i];
	}
	c->nnodes = k;
	return rc;
}

struct power_place {
	long place; /* group index * (PBX_CONFIG_MAX_COUNT + 1) + number */
	const char *name;
};

static int power_place_cmp(const void *a, const void *b)
{
	const struct power_place *x = a, *y = b;
	return x->place != y->place ? (x->place > y->place) - (x->place < y->place)
				    : strcmp(x->name, y->name);
}

/* "node1,node2" of the nodes that always run, awake or (a Spot node since
 * a preemption) asleep, in the template's order: slurm.conf must not
 * change as nodes wake and sleep (a change restarts slurmctld).  One
 * sort, not a search a node: a group may have 10,000. */
static void power_always_on(const struct pbx_cluster *c, struct pbx_buf *b)
{
	const struct pbx_cluster_template *t = c->spec.t;
	struct power_place *v = xcalloc(c->nnodes + c->nasleep + 1, sizeof(*v));
	size_t i, n = 0;
	for (i = 0; i < c->nnodes + c->nasleep; i++) {
		const struct pbx_node_row *r =
			i < c->nnodes ? &c->nodes[i] : &c->asleep[i - c->nnodes];
		int k;
		const struct pbx_node_group *g = power_group(t, r->name, &k);
		if (strcmp(r->role, "compute") != 0 || pbx_power_may_sleep(t, r->name))
			continue;
		v[n].place = g ? (long)(g - t->groups) * (PBX_CONFIG_MAX_COUNT + 1) + k : -1;
		v[n++].name = r->name;
	}
	qsort(v, n, sizeof(*v), power_place_cmp);
	for (i = 0; i < n; i++)
		pbx_buf_addf(b, "%s%s", b->len ? "," : "", v[i].name);
	free(v);
}

/* SLURM's ResumeTimeout: the template's, else the boot timeout and 5
 * minutes more (the bootstrap's install). */
static int power_resume_timeout(const struct pbx_cluster *c)
{
	const struct pbx_cluster_template *t = c->spec.t;
	return t->resume_timeout ? t->resume_timeout
				 : (t->boot_timeout ? t->boot_timeout : 300) + 300;
}

/* The head's root ("" on a VM; a node body's directory); borrowed. */
static const char *power_root(const struct pbx_cluster *c)
{
	return c->nnodes && c->nodes[0].root ? c->nodes[0].root : "";
}

char *pbx_power_conf_lines(const struct pbx_cluster *c)
{
	const struct pbx_cluster_template *t = c->spec.t;
	struct pbx_buf b = PBX_BUF_INIT, on = PBX_BUF_INIT;
	int suspend = t->suspend_time ? t->suspend_time : POWER_SUSPEND_DEFAULT_S;
	int resume = power_resume_timeout(c);
	power_always_on(c, &on);
	pbx_buf_addf(&b,
		     "\n# Power saving (docs/power-saving.md): nodes above a group's min: are\n"
		     "# made when jobs wait for them and removed after SuspendTime idle.\n"
		     "ResumeProgram=@ROOT@/usr/local/lib/pbx/pbx-resume\n"
		     "SuspendProgram=@ROOT@/usr/local/lib/pbx/pbx-suspend\n"
		     "SuspendTime=%d\nResumeTimeout=%d\nSuspendTimeout=30\n"
		     "ResumeRate=0\nSuspendRate=0\nPrivateData=cloud\n"
		     "# every node's address is in this file: no alias lists (a job requeued\n"
		     "# from a node that failed to wake would carry its address \"TBD\" and\n"
		     "# fail to launch anywhere: \"set_nodes_alias failed\", held)\n"
		     "SlurmctldParameters=cloud_dns\n"
		     "# slurmctld sends to every node itself: a slurmd forwarding a message\n"
		     "# would use the address it resolved once for a node since made anew\n"
		     "# (SLURM's cloud guide asks the same; bootstrap.sh's ctld_readdress\n"
		     "# has slurmctld resolve a woken node afresh)\n"
		     "TreeWidth=65533\n"
		     "# a batch job on woken nodes starts once they respond, not at\n"
		     "# slurmctld's next periodic pass (pbx-ready)\n"
		     "PrologSlurmctld=@ROOT@/usr/local/lib/pbx/pbx-ready\n",
		     suspend, resume);
	if (on.len)
		pbx_buf_addf(&b, "SuspendExcNodes=%s\n", on.buf);
	pbx_buf_release(&on);
	return pbx_buf_detach(&b, NULL);
}

/* "node2,node3" of the nodes power saving may make (pbx_power_remade):
 * those that sleep, NAMEk for k from a group's min + 1 to its count, and
 * the Spot nodes; with always_on, only the Spot nodes that do not sleep. */
static void power_names(const struct pbx_cluster_template *t, int always_on, struct pbx_buf *b)
{
	size_t i;
	int k;
	for (i = 0; t && i < t->ngroups; i++)
		for (k = 1; k <= t->groups[i].count; k++) {
			char *name = xasprintf("%s%d", t->groups[i].name, k);
			if (pbx_power_remade(t, name) &&
			    !(always_on && pbx_power_may_sleep(t, name)))
				pbx_buf_addf(b, "%s%s", b->len ? "," : "", name);
			free(name);
		}
}

/* The command line of one of the two programs after its host list is
 * expanded into $nodes.  On the local cloud, this very pbx with the user's
 * home and configuration (the head is a process of this machine); on a
 * cloud, the head's own pbx, pbx-head (its key, store and cloud identity:
 * docs/head-identity.md), as root: slurmctld runs the programs as
 * SlurmUser, for which the head's bootstrap allows that one command
 * through sudo on a VM (on a node body SlurmUser is root).  RUN is "exec "
 * or "" (the script goes on after it). */
static void power_script_exec(const struct pbx_cluster *c, const char *root, const char *action,
			      const char *run, struct pbx_buf *b)
{
	char *self;
	if (strcmp(c->row.cloud, "local") != 0) {
		pbx_buf_adds(b, "head=");
		pbx_shell_quote(b, root);
		pbx_buf_addf(b,
			     "/usr/local/sbin/pbx-head\n"
			     "[ \"$(id -u)\" = 0 ] || set -- sudo -n\n"
			     "# shellcheck disable=SC2086 # one word a node\n"
			     "%s\"$@\" \"$head\" -q cluster power ",
			     run);
		pbx_shell_quote(b, c->row.name);
		pbx_buf_addf(b, " %s $nodes\n", action);
		return;
	}
	self = pbx_self_path();
	pbx_buf_addf(b, "# shellcheck disable=SC2086 # one word a node\n%senv PBX_HOME=", run);
	pbx_shell_quote(b, pbx_home());
	pbx_buf_adds(b, " PBX_CONFIG=");
	pbx_shell_quote(b, c->cfg && c->cfg->path ? c->cfg->path : "");
	pbx_buf_addc(b, ' ');
	pbx_shell_quote(b, self ? self : "pbx");
	free(self);
	pbx_buf_adds(b, " -q cluster power ");
	pbx_shell_quote(b, c->row.name);
	pbx_buf_addf(b, " %s $nodes\n", action);
}

/* pbx-suspend's end on a cluster with Spot nodes that always run (keep,
 * "spot1,spot2"; docs/spot.md): their preemption watcher had SLURM power
 * them down after a notice (POWER_DOWN_ASAP), so once the suspend has
 * removed them and SLURM has them down (SuspendTimeout after it began)
 * they are powered up again, which runs pbx-resume: made anew.  A detached
 * waiter a node, so SLURM does not wait for it; it gives up when the node
 * is neither powering down nor powered down (a job's resume took it
 * first), and leaves a node DOWN (a failed resume marked it so, with the
 * reason: power_mark_failed; powering it up would loop). */
static void power_keep_up(const char *root, const char *keep, struct pbx_buf *b)
{
	pbx_buf_adds(b, "rc=$?\nkeep=");
	pbx_shell_quote(b, keep);
	pbx_buf_adds(b, "\nSLURM_CONF=");
	pbx_shell_quote(b, root);
	pbx_buf_adds(
		b,
		"/etc/slurm/slurm.conf\nexport SLURM_CONF\n"
		"for n in $nodes; do\n"
		"\tcase ,$keep, in *,\"$n\",*) ;; *) continue ;; esac\n"
		"\tif [ \"$rc\" != 0 ]; then\n"
		"\t\techo \"$(date -u +%Y-%m-%dT%H:%M:%SZ) $n: the suspend failed: not powered up\"\n"
		"\t\tcontinue\n\tfi\n"
		"\t# shellcheck disable=SC2016 # the waiter's own text\n"
		"\tsetsid sh -c 'i=0\n"
		"\t\twhile [ \"$i\" -lt 600 ]; do\n"
		"\t\t\tsleep 5\n\t\t\ti=$((i + 5))\n"
		"\t\t\tst=$(scontrol show node -o \"$1\" | tr \" \" \"\\n\" | grep -m 1 \"^State=\")\n"
		"\t\t\tcase $st in\n"
		"\t\t\tState=DOWN*) exit ;;\n"
		"\t\t\t*POWERING_DOWN*) ;;\n"
		"\t\t\t*POWERED_DOWN*)\n"
		"\t\t\t\tscontrol update nodename=\"$1\" state=power_up &&\n"
		"\t\t\t\t\techo \"$(date -u +%Y-%m-%dT%H:%M:%SZ) power_up $1 (a Spot node that always "
		"runs)\"\n"
		"\t\t\t\texit ;;\n"
		"\t\t\t*) exit ;;\n"
		"\t\t\tesac\n"
		"\t\tdone' sh \"$n\" &\n"
		"done\n"
		"exit \"$rc\"\n");
}

/* One of the two programs: `pbx cluster power NAME ACTION NODE...` with
 * SLURM's host list expanded, logged on the head. */
static char *power_script(const struct pbx_cluster *c, const char *action)
{
	struct pbx_buf b = PBX_BUF_INIT, keep = PBX_BUF_INIT;
	const char *root = power_root(c);
	pbx_buf_addf(&b,
		     "#!/bin/sh\n# pbx-%s HOSTLIST - SLURM's %s for cluster %s: written by "
		     "pbx (src/cluster/powersave.c)\n"
		     "# node names are split into words, never globbed\nset -f\n",
		     action, !strcmp(action, "resume") ? "ResumeProgram" : "SuspendProgram",
		     c->row.name);
	pbx_buf_adds(&b, "exec >>");
	pbx_shell_quote(&b, root);
	pbx_buf_adds(&b, "/var/log/pbx-power.log 2>&1 </dev/null\nnodes=$(SLURM_CONF=");
	pbx_shell_quote(&b, root);
	pbx_buf_adds(&b, "/etc/slurm/slurm.conf scontrol show hostnames \"$1\") || exit 1\n"
			 "echo \"$(date -u +%Y-%m-%dT%H:%M:%SZ) ");
	pbx_buf_addf(&b, "%s $1\"\nset --\n", action);
	if (!strcmp(action, "suspend"))
		power_names(c->spec.t, 1, &keep);
	power_script_exec(c, root, action, keep.len ? "" : "exec ", &b);
	if (keep.len)
		power_keep_up(root, keep.buf, &b);
	pbx_buf_release(&keep);
	return pbx_buf_detach(&b, NULL);
}

/* pbx-ready, SLURM's PrologSlurmctld on a power-saving cluster
 * (templates/power-ready.sh: a batch job on woken nodes starts once they
 * respond) with its settings filled in, shell-quoted: the head's
 * slurm.conf and state directory, the nodes that may sleep and how long
 * it waits (ResumeTimeout).  Appends it to *out. */
static int power_ready_script(const struct pbx_cluster *c, struct pbx_buf *out, struct pbx_err *err)
{
	struct pbx_buf text = PBX_BUF_INIT, sleepers = PBX_BUF_INIT;
	struct pbx_buf q[4] = { PBX_BUF_INIT, PBX_BUF_INIT, PBX_BUF_INIT, PBX_BUF_INIT };
	char *conf = xasprintf("%s/etc/slurm/slurm.conf", power_root(c));
	char *state = xasprintf("%s/var/spool/slurmctld", power_root(c));
	int rc, i;
	power_names(c->spec.t, 0, &sleepers);
	pbx_shell_quote(&q[0], conf);
	pbx_shell_quote(&q[1], state);
	pbx_shell_quote(&q[2], sleepers.len ? sleepers.buf : "");
	pbx_buf_addf(&q[3], "%d", power_resume_timeout(c));
	{
		const char *const vars[] = { "SLURM_CONF", q[0].buf,   "STATE_DIR",
					     q[1].buf,     "SLEEPERS", q[2].buf,
					     "TIMEOUT",    q[3].buf,   NULL };
		rc = pbx_tmpl_get("power-ready.sh", &text, err);
		if (rc == 0)
			rc = pbx_tmpl_subst("power-ready.sh", text.buf, vars, NULL, out, err);
	}
	for (i = 0; i < 4; i++)
		pbx_buf_release(&q[i]);
	pbx_buf_release(&text);
	pbx_buf_release(&sleepers);
	free(conf);
	free(state);
	return rc;
}

/* PBX_STAGE_DIR/hosts on a cloud whose DNS does not know the names of
 * the nodes power saving makes (provider->names_in_hosts: EC2): "ADDRESS
 * NAME" of each awake one, which the bootstrap writes into a block of every
 * node's /etc/hosts, a staged name's line replacing that name's (so the
 * nodes up already learn a woken node's new address as the resume checks
 * them).  The head's own pbx, which makes and removes them, stages every
 * awake one; the user's start only the Spot nodes that always run, which
 * it makes itself: the user's store may not know what the head woke. */
static int power_stage_hosts(const struct pbx_cluster *c, struct pbx_buf *tar, time_t now,
			     struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	int rc;
	if (!c->provider->names_in_hosts || !c->provider->dns_name)
		return 0;
	for (i = 0; i < c->nnodes; i++) {
		const struct pbx_node_row *n = &c->nodes[i];
		char *name;
		if (strcmp(n->role, "compute") != 0 || !n->address || !*n->address ||
		    !pbx_power_remade(c->spec.t, n->name) ||
		    (c->here < 0 && pbx_power_may_sleep(c->spec.t, n->name)))
			continue;
		name = c->provider->dns_name(c->pctx, n->name);
		if (name)
			pbx_buf_addf(&b, "%s %s\n", n->address, name);
		free(name);
	}
	rc = c->here < 0 && !b.len ? 0
				   : pbx_ustar_file(tar, PBX_STAGE_DIR "/hosts", 0644, now,
						    b.len ? b.buf : "", b.len, err);
	pbx_buf_release(&b);
	return rc;
}

int pbx_power_stage(const struct pbx_cluster *c, struct pbx_buf *tar, time_t now,
		    struct pbx_err *err)
{
	static const char *const actions[] = { "resume", "suspend" };
	size_t i;
	struct pbx_buf ready = PBX_BUF_INIT;
	int rc;
	if (power_stage_hosts(c, tar, now, err) < 0)
		return -1;
	for (i = 0; i < 2; i++) {
		char *script = power_script(c, actions[i]);
		char *path = xasprintf(PBX_STAGE_DIR "/pbx-%s", actions[i]);
		rc = pbx_ustar_file(tar, path, 0755, now, script, strlen(script), err);
		free(path);
		free(script);
		if (rc < 0)
			return -1;
	}
	rc = power_ready_script(c, &ready, err);
	if (rc == 0)
		rc = pbx_ustar_file(tar, PBX_STAGE_DIR "/pbx-ready", 0755, now, ready.buf,
				    ready.len, err);
	pbx_buf_release(&ready);
	return rc;
}

/* ------------------------------------------------------------ the verb */

/* Marks SLURM nodes `names` ("node2,node3") failed in one round trip,
 * with "pbx resume failed: WHY" as the reason: drained (SLURM requeues the
 * jobs it was starting there and sends no new one), powered down at once
 * (SLURM does not wait for them until ResumeTimeout, which would replace
 * the reason), then DOWN (not woken again until someone resumes them).
 * WHY may carry a node's own words: only printable ASCII of it, one line,
 * at most 200 bytes, goes into the reason.  Best effort. */
static void power_mark_failed(struct pbx_cluster *c, const char *names, const char *why)
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
static size_t power_wake(struct pbx_cluster *c, char **names, size_t n)
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

static int power_resume(struct pbx_store *st, const struct pbx_config *cfg, struct pbx_cluster *c,
			char **names, size_t n, struct pbx_err *err)
{
	struct pbx_err oerr = PBX_ERR_INIT;
	char *name = xstrdup(c->row.name);
	size_t i, woken = power_wake(c, names, n);
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
			power_mark_failed(c, down.buf, err->msg);
		pbx_buf_release(&down);
		pbx_cluster_close(c);
	}
	free(name);
	return rc;
}

static int power_suspend(struct pbx_cluster *c, char **names, size_t n, struct pbx_err *err)
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
static int power_lock(struct pbx_store *st, const char *name, int *fd, struct pbx_err *err)
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
	if (power_lock(st, name, &lock, err) < 0 || pbx_cluster_open(st, cfg, name, &c, err) < 0) {
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
		rc = power_resume(st, cfg, c, nodes, n, err);
	else
		rc = power_suspend(c, nodes, n, err);
	close(lock);
	return rc;
}
