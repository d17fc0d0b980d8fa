/*
 * slurm_sleep_steps.c - SLURM power saving (docs/power-saving.md; not
 * autostop's power-off, autostop_off.c): compute
 * nodes that exist only while jobs need them.  This file holds the steps a
 * start takes (the asleep nodes split off, slurm.conf's lines, the stage's
 * programs); which nodes may sleep is slurm_sleep_plan.c, the resume and
 * suspend verb slurm_sleep.c.
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
 * (EC2: sleep_stage_hosts).
 */
#include "cluster/bootstrap_render.h"
#include "cluster/cluster_internal.h"
#include "tmpl/tmpl.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/quote.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POWER_SUSPEND_DEFAULT_S 600 /* ParallelCluster's ScaledownIdletime */

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

static int sleep_place_cmp(const void *a, const void *b)
{
	const struct power_place *x = a, *y = b;
	return x->place != y->place ? (x->place > y->place) - (x->place < y->place)
				    : strcmp(x->name, y->name);
}

/* "node1,node2" of the nodes that always run, awake or (a Spot node since
 * a preemption) asleep, in the template's order: slurm.conf must not
 * change as nodes wake and sleep (a change restarts slurmctld).  One
 * sort, not a search a node: a group may have 10,000. */
static void sleep_always_on(const struct pbx_cluster *c, struct pbx_buf *b)
{
	const struct pbx_cluster_template *t = c->spec.t;
	struct power_place *v = xcalloc(c->nnodes + c->nasleep + 1, sizeof(*v));
	size_t i, n = 0;
	for (i = 0; i < c->nnodes + c->nasleep; i++) {
		const struct pbx_node_row *r =
			i < c->nnodes ? &c->nodes[i] : &c->asleep[i - c->nnodes];
		int k;
		const struct pbx_node_group *g = pbx_power_group(t, r->name, &k);
		if (strcmp(r->role, "compute") != 0 || pbx_power_may_sleep(t, r->name))
			continue;
		v[n].place = g ? (long)(g - t->groups) * (PBX_CONFIG_MAX_COUNT + 1) + k : -1;
		v[n++].name = r->name;
	}
	qsort(v, n, sizeof(*v), sleep_place_cmp);
	for (i = 0; i < n; i++)
		pbx_buf_addf(b, "%s%s", b->len ? "," : "", v[i].name);
	free(v);
}

/* SLURM's ResumeTimeout: the template's, else the boot timeout and 5
 * minutes more (the bootstrap's install). */
static int sleep_resume_timeout(const struct pbx_cluster *c)
{
	const struct pbx_cluster_template *t = c->spec.t;
	return t->resume_timeout ? t->resume_timeout
				 : (t->boot_timeout ? t->boot_timeout : 300) + 300;
}

/* The head's root ("" on a VM; a node body's directory); borrowed. */
static const char *sleep_root(const struct pbx_cluster *c)
{
	return c->nnodes && c->nodes[0].root ? c->nodes[0].root : "";
}

char *pbx_power_conf_lines(const struct pbx_cluster *c)
{
	const struct pbx_cluster_template *t = c->spec.t;
	struct pbx_buf b = PBX_BUF_INIT, on = PBX_BUF_INIT;
	int suspend = t->suspend_time ? t->suspend_time : POWER_SUSPEND_DEFAULT_S;
	int resume = sleep_resume_timeout(c);
	sleep_always_on(c, &on);
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
static void sleep_names(const struct pbx_cluster_template *t, int always_on, struct pbx_buf *b)
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
static void sleep_script_exec(const struct pbx_cluster *c, const char *root, const char *action,
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
 * reason: sleep_mark_failed in slurm_sleep.c; powering it up would loop). */
static void sleep_keep_up(const char *root, const char *keep, struct pbx_buf *b)
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
static char *sleep_script(const struct pbx_cluster *c, const char *action)
{
	struct pbx_buf b = PBX_BUF_INIT, keep = PBX_BUF_INIT;
	const char *root = sleep_root(c);
	pbx_buf_addf(&b,
		     "#!/bin/sh\n# pbx-%s HOSTLIST - SLURM's %s for cluster %s: written by "
		     "pbx (src/cluster/slurm_sleep_steps.c)\n"
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
		sleep_names(c->spec.t, 1, &keep);
	sleep_script_exec(c, root, action, keep.len ? "" : "exec ", &b);
	if (keep.len)
		sleep_keep_up(root, keep.buf, &b);
	pbx_buf_release(&keep);
	return pbx_buf_detach(&b, NULL);
}

/* pbx-ready, SLURM's PrologSlurmctld on a power-saving cluster
 * (templates/power-ready.sh: a batch job on woken nodes starts once they
 * respond) with its settings filled in, shell-quoted: the head's
 * slurm.conf and state directory, the nodes that may sleep and how long
 * it waits (ResumeTimeout).  Appends it to *out. */
static int sleep_ready_script(const struct pbx_cluster *c, struct pbx_buf *out, struct pbx_err *err)
{
	struct pbx_buf text = PBX_BUF_INIT, sleepers = PBX_BUF_INIT;
	struct pbx_buf q[4] = { PBX_BUF_INIT, PBX_BUF_INIT, PBX_BUF_INIT, PBX_BUF_INIT };
	char *conf = xasprintf("%s/etc/slurm/slurm.conf", sleep_root(c));
	char *state = xasprintf("%s/var/spool/slurmctld", sleep_root(c));
	int rc, i;
	sleep_names(c->spec.t, 0, &sleepers);
	pbx_shell_quote(&q[0], conf);
	pbx_shell_quote(&q[1], state);
	pbx_shell_quote(&q[2], sleepers.len ? sleepers.buf : "");
	pbx_buf_addf(&q[3], "%d", sleep_resume_timeout(c));
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
 * the nodes power saving makes (provider->names_in_hosts: EC2): the
 * cluster's block of /etc/hosts (pbx_bootstrap_hosts_block), "ADDRESS
 * NAME" of each awake one, which the bootstrap merges into every node's
 * /etc/hosts, a staged name's line replacing that name's (so the nodes up
 * already learn a woken node's new address as the resume checks them).
 * The head's own pbx, which makes and removes them, stages every awake
 * one; the user's start only the Spot nodes that always run, which it
 * makes itself: the user's store may not know what the head woke. */
static int sleep_stage_hosts(const struct pbx_cluster *c, struct pbx_buf *tar, time_t now,
			     struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_hosts_entry *entries;
	size_t i, n = 0;
	int rc;
	if (!c->provider->names_in_hosts || !c->provider->dns_name)
		return 0;
	entries = xcalloc(c->nnodes ? c->nnodes : 1, sizeof(*entries));
	for (i = 0; i < c->nnodes; i++) {
		const struct pbx_node_row *nd = &c->nodes[i];
		if (strcmp(nd->role, "compute") != 0 || !nd->address || !*nd->address ||
		    !pbx_power_remade(c->spec.t, nd->name) ||
		    (c->here < 0 && pbx_power_may_sleep(c->spec.t, nd->name)))
			continue;
		entries[n].address = nd->address;
		entries[n].name = c->provider->dns_name(c->pctx, nd->name);
		if (entries[n].name)
			n++;
	}
	rc = c->here < 0 && !n ? 0 : pbx_bootstrap_hosts_block(&b, c->row.name, entries, n, err);
	if (rc == 0 && b.len)
		rc = pbx_ustar_file(tar, PBX_STAGE_DIR "/hosts", 0644, now, b.buf, b.len, err);
	for (i = 0; i < n; i++)
		free((char *)entries[i].name);
	free(entries);
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
	if (sleep_stage_hosts(c, tar, now, err) < 0)
		return -1;
	for (i = 0; i < 2; i++) {
		char *script = sleep_script(c, actions[i]);
		char *path = xasprintf(PBX_STAGE_DIR "/pbx-%s", actions[i]);
		rc = pbx_ustar_file(tar, path, 0755, now, script, strlen(script), err);
		free(path);
		free(script);
		if (rc < 0)
			return -1;
	}
	rc = sleep_ready_script(c, &ready, err);
	if (rc == 0)
		rc = pbx_ustar_file(tar, PBX_STAGE_DIR "/pbx-ready", 0755, now, ready.buf,
				    ready.len, err);
	pbx_buf_release(&ready);
	return rc;
}

/* ------------------------------------------------------------ the verb */
