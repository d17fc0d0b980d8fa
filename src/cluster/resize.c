/*
 * resize.c - `pbx cluster resize NAME +N|-N`: a node group grows or
 * shrinks while the cluster runs.
 *
 * The cluster's size is the group counts recorded with it in the store
 * (template_json.c).  Growing records the new count, then runs `start`,
 * which creates the missing nodes, bootstraps them and rewrites slurm.conf
 * everywhere (daemons restart only where it changed; running jobs go on).
 * Shrinking takes the group's last nodes: it drains them in SLURM and
 * waits until their jobs are over (or, with `force`, marks them down so
 * SLURM requeues their jobs), removes their instances through the
 * provider, forgets their rows and host keys, records the new count, and
 * runs `start` to rewrite slurm.conf without them.  Each step can be run
 * again after an interruption: a second resize finds the same nodes, and
 * `start` repairs the rest.
 */
#include "cluster/cluster_internal.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RESIZE_DRAIN_TIMEOUT_S 3600

/* The group a resize is about: the named one, else the only one. */
static const struct pbx_node_group *resize_group(const struct pbx_cluster *c, const char *name,
						 struct pbx_err *err)
{
	const struct pbx_cluster_template *t = c->spec.t;
	struct pbx_buf names = PBX_BUF_INIT;
	size_t g;
	if (!t) {
		pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster template for cluster '%s' in %s",
			     c->row.name, c->cfg->path);
		return NULL;
	}
	for (g = 0; g < t->ngroups; g++) {
		if (name ? !strcmp(t->groups[g].name, name) : t->ngroups == 1)
			return &t->groups[g];
		pbx_buf_addf(&names, "%s%s", g ? ", " : "", t->groups[g].name);
	}
	if (name)
		pbx_err_setc(err, PBX_EXIT_USAGE, "cluster %s has no node group '%s' (it has: %s)",
			     c->row.name, name, names.buf);
	else
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "cluster %s has several node groups (%s): "
			     "name one with --group",
			     c->row.name, names.buf);
	pbx_buf_release(&names);
	return NULL;
}

/* The new count of the group, checked: no group below zero, no cluster
 * without compute nodes. */
static int resize_count(const struct pbx_cluster *c, const struct pbx_node_group *grp, int delta,
			int *count, struct pbx_err *err)
{
	long n = (long)grp->count + delta;
	if (delta == 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "resize by +N or -N, N >= 1");
	if (n < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "group %s of cluster %s has %d node%s: "
				    "cannot remove %d",
				    grp->name, c->row.name, grp->count, grp->count == 1 ? "" : "s",
				    -delta);
	if (n > 100000 || pbx_template_node_count(c->spec.t) + delta > 100000)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "at most 100000 nodes in a cluster");
	if (pbx_template_node_count(c->spec.t) + delta < 1)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "a cluster keeps at least one compute "
				    "node ('pbx cluster stop %s' removes it all)",
				    c->row.name);
	*count = (int)n;
	return 0;
}

/* The group's nodes numbered above `keep` (GROUPk, k > keep), in order;
 * rows owned by c. */
static size_t resize_victims(const struct pbx_cluster *c, const struct pbx_node_group *grp,
			     int keep, const struct pbx_node_row **out)
{
	size_t i, n = 0, l = strlen(grp->name);
	for (i = 0; i < c->nnodes; i++) {
		const char *name = c->nodes[i].name, *num = name + l;
		if (strcmp(c->nodes[i].role, "compute") != 0 || strncmp(name, grp->name, l) != 0 ||
		    *num < '1' || *num > '9' || strspn(num, "0123456789") != strlen(num) ||
		    strlen(num) > 6 || atoi(num) <= keep)
			continue;
		out[n++] = &c->nodes[i];
	}
	return n;
}

/* ------------------------------------------------------------- draining */

/* "scontrol update nodename=A,B state=STATE reason='pbx resize'" on the head. */
static int resize_scontrol(struct pbx_cluster *c, const struct pbx_node_row *const *v, size_t n,
			   const char *state, struct pbx_err *err)
{
	struct pbx_buf cmd = PBX_BUF_INIT, names = PBX_BUF_INIT;
	struct pbx_cluster_output o;
	size_t i;
	int rc;
	for (i = 0; i < n; i++)
		pbx_buf_addf(&names, "%s%s", i ? "," : "", v[i]->name);
	pbx_buf_addf(&cmd, "scontrol update nodename=");
	pbx_shell_quote(&cmd, names.buf);
	pbx_buf_addf(&cmd, " state=%s reason='pbx resize'", state);
	rc = pbx_cluster_run(c, 0, cmd.buf, NULL, &o, err);
	if (rc == 0)
		pbx_cluster_output_release(&o);
	else
		pbx_err_prefix(err, "cannot %s %s", state, names.buf);
	pbx_buf_release(&cmd);
	pbx_buf_release(&names);
	return rc;
}

/* The nodes of v that SLURM lists (*k of them, into out; idx[j] is out[j]'s
 * place in v). */
static int resize_known_to_slurm(struct pbx_cluster *c, const struct pbx_node_row *const *v,
				 size_t n, const struct pbx_node_row **out, size_t *idx, size_t *k,
				 struct pbx_err *err)
{
	struct pbx_sinfo_node *sn = NULL;
	size_t nsn = 0, i;
	*k = 0;
	if (n == 0)
		return 0;
	if (pbx_cluster_sinfo(c, &sn, &nsn, err) < 0)
		return pbx_err_prefix(err, "cannot ask SLURM about the nodes to remove "
					   "(--force removes them without asking)");
	for (i = 0; i < n; i++)
		if (pbx_sinfo_state_of(sn, nsn, v[i]->name)) {
			idx[*k] = i;
			out[(*k)++] = v[i];
		}
	pbx_sinfo_free(sn, nsn);
	return 0;
}

/* Done draining: no job left on it (drained, down, or SLURM no longer
 * lists it). */
static int resize_drained(const char *state)
{
	char s[32];
	size_t l;
	if (!state)
		return 1;
	snprintf(s, sizeof(s), "%s", state);
	l = strcspn(s, "*~#!%$@^-+");
	s[l] = '\0';
	return !strcmp(s, "drain") || !strcmp(s, "drained") || !strcmp(s, "down") ||
	       !strcmp(s, "fail");
}

/* Polls sinfo until every node of v is drained, showing each one's state. */
static int resize_wait_drained(struct pbx_cluster *c, const struct pbx_node_row *const *v, size_t n,
			       const size_t *shown_as, int timeout_s,
			       const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	time_t until = time(NULL) + (timeout_s > 0 ? timeout_s : RESIZE_DRAIN_TIMEOUT_S);
	for (;;) {
		struct pbx_sinfo_node *sn = NULL;
		struct pbx_buf busy = PBX_BUF_INIT;
		struct timespec delay = { 1, 0 };
		size_t nsn = 0, i, left = 0;
		if (pbx_cluster_sinfo(c, &sn, &nsn, err) < 0)
			return -1;
		for (i = 0; i < n; i++) {
			const char *state = pbx_sinfo_state_of(sn, nsn, v[i]->name);
			int done = resize_drained(state);
			pbx_events_stage(ev, shown_as[i],
					 done ? "drained" : "draining (jobs running)");
			if (!done) {
				left++;
				pbx_buf_addf(&busy, "%s%s=%s", busy.len ? ", " : "", v[i]->name,
					     state);
			}
		}
		pbx_sinfo_free(sn, nsn);
		if (!left) {
			pbx_buf_release(&busy);
			return 0;
		}
		if (time(NULL) >= until) {
			pbx_err_set(
				err,
				"nodes still running jobs after %d s: %s; wait longer "
				"(--timeout) or use --force (their jobs are requeued); the nodes "
				"stay drained until then ('pbx cluster start %s' resumes them)",
				timeout_s > 0 ? timeout_s : RESIZE_DRAIN_TIMEOUT_S, busy.buf,
				c->row.name);
			pbx_buf_release(&busy);
			return -1;
		}
		pbx_buf_release(&busy);
		nanosleep(&delay, NULL);
	}
}

/* ------------------------------------------------------------ shrinking */

static void resize_announce(const struct pbx_cluster_events *ev,
			    const struct pbx_node_row *const *v, size_t n)
{
	const char **names;
	size_t i;
	if (!ev || !ev->nodes)
		return;
	names = xcalloc(n ? n : 1, sizeof(*names));
	for (i = 0; i < n; i++)
		names[i] = v[i]->name;
	ev->nodes(ev->ctx, n, names);
	free(names);
}

/* The rows of v, copied (the provider takes an array). */
static struct pbx_node_row *resize_rows(const struct pbx_node_row *const *v, size_t n)
{
	struct pbx_node_row *rows = xcalloc(n ? n : 1, sizeof(*rows));
	size_t i;
	for (i = 0; i < n; i++)
		rows[i] = *v[i]; /* shallow: strings stay the cluster's */
	return rows;
}

/* Forgets the removed nodes: their rows and their pinned host keys. */
static int resize_forget(struct pbx_cluster *c, const struct pbx_node_row *const *v, size_t n,
			 struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < n; i++) {
		char *prefix = xasprintf("%s/%s@", c->row.name, v[i]->name);
		int removed, rc = pbx_store_hostkey_forget_prefix(c->store, prefix, &removed, err);
		free(prefix);
		if (rc == 0)
			rc = pbx_store_node_delete(c->store, c->row.id, v[i]->name, err);
		if (rc < 0)
			return -1;
		pbx_store_event(c->store, c->row.id, "node.removed", "%s (resize)", v[i]->name);
	}
	return 0;
}

/* Takes the nodes out of SLURM's hands: drained (waiting for their jobs)
 * or, with force, down (SLURM requeues their jobs).  Only the nodes SLURM
 * lists: one whose creation failed never joined; with force, a head that
 * cannot be asked is no obstacle. */
static int resize_drain(struct pbx_cluster *c, const struct pbx_node_row *const *v, size_t n,
			const struct pbx_resize_opts *o, const struct pbx_cluster_events *ev,
			struct pbx_err *err)
{
	const struct pbx_node_row **in_slurm = xcalloc(n ? n : 1, sizeof(*in_slurm));
	size_t *idx = xcalloc(n ? n : 1, sizeof(*idx)), k;
	int rc = resize_known_to_slurm(c, v, n, in_slurm, idx, &k, err);
	if (rc < 0 && o->force) {
		pbx_err_clear(err);
		rc = 0;
		k = 0;
	}
	if (rc == 0 && k && o->force)
		rc = resize_scontrol(c, in_slurm, k, "down", err);
	else if (rc == 0 && k) {
		rc = resize_scontrol(c, in_slurm, k, "drain", err);
		if (rc == 0)
			rc = resize_wait_drained(c, in_slurm, k, idx, o->drain_timeout_s, ev, err);
	}
	free(in_slurm);
	free(idx);
	return rc;
}

/* Drains the nodes, deletes their instances, forgets them. */
static int resize_shrink(struct pbx_cluster *c, const struct pbx_node_row *const *v, size_t n,
			 const struct pbx_resize_opts *o, const struct pbx_cluster_events *ev,
			 struct pbx_err *err)
{
	struct pbx_node_row *rows;
	size_t i;
	int rc;
	resize_announce(ev, v, n);
	if (resize_drain(c, v, n, o, ev, err) < 0)
		return -1;
	for (i = 0; i < n; i++)
		pbx_events_stage(ev, i, "deleting");
	pbx_ssh_pool_free(c->pool); /* no connection may outlive its node */
	c->pool = pbx_ssh_pool_new(&c->hostkeys);
	rows = resize_rows(v, n);
	rc = c->provider->remove_nodes(c->pctx, rows, n, err);
	free(rows);
	if (rc == 0)
		rc = resize_forget(c, v, n, err);
	for (i = 0; i < n && rc == 0; i++)
		pbx_events_stage(ev, i, "deleted");
	return rc;
}

/* -------------------------------------------------------------- dry run */

/* The requests a resize would send: creating the nodes the new size adds,
 * or deleting the ones it drops. */
static int resize_dry(struct pbx_cluster *c, const struct pbx_node_group *grp, int count,
		      const struct pbx_resize_opts *o, struct pbx_err *err)
{
	struct pbx_cluster_spec spec = c->spec;
	struct pbx_cluster_template t = c->sized;
	struct pbx_node_group *groups = xcalloc(t.ngroups, sizeof(*groups));
	struct pbx_node_row *planned = NULL, *add;
	const struct pbx_node_row **v = xcalloc(c->nnodes ? c->nnodes : 1, sizeof(*v));
	size_t nplanned = 0, nadd = 0, i, g;
	void *pctx = NULL;
	int rc;
	if (!strcmp(c->provider->name, "local")) {
		free(groups);
		free(v);
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--dry-run: cloud local sends no requests "
				    "(its nodes are processes on this machine)");
	}
	for (g = 0; g < t.ngroups; g++) {
		groups[g] = t.groups[g];
		if (!strcmp(groups[g].name, grp->name))
			groups[g].count = count;
	}
	t.groups = groups;
	spec.t = &t;
	spec.dry_run = 1;
	spec.print_request = o->print;
	spec.print_ctx = o->print_ctx;
	rc = c->provider->open(&spec, &pctx, err);
	if (rc == 0 && count < grp->count) {
		size_t n = resize_victims(c, grp, count, v);
		struct pbx_node_row *rows = resize_rows(v, n);
		rc = c->provider->remove_nodes(pctx, rows, n, err);
		free(rows);
	} else if (rc == 0) {
		rc = c->provider->plan(pctx, &planned, &nplanned, err);
		add = xcalloc(nplanned ? nplanned : 1, sizeof(*add));
		for (i = 0; rc == 0 && i < nplanned; i++)
			if (pbx_cluster_node_index(c, planned[i].name) < 0) {
				add[nadd++] = planned[i]; /* moved */
				memset(&planned[i], 0, sizeof(planned[i]));
			}
		if (rc == 0)
			rc = c->provider->create_begin(pctx, add, nadd, NULL, err);
		pbx_node_rows_free(add, nadd);
		pbx_node_rows_free(planned, nplanned);
	}
	if (pctx)
		c->provider->close(pctx);
	free(groups);
	free(v);
	return rc;
}

/* --------------------------------------------------------------- resize */

/* After a failed growth the new size stays recorded: say what to do. */
static void resize_grow_hint(const char *name, const char *group, int delta, struct pbx_err *err)
{
	char hint[256];
	snprintf(hint, sizeof(hint),
		 "; the cluster keeps the new size: 'pbx cluster start %s' "
		 "tries again, 'pbx cluster resize %s%s%s%s -%d' gives %s up",
		 name, group ? "-g " : "", group ? group : "", group ? " " : "", name, delta,
		 delta == 1 ? "it" : "them");
	if (strlen(err->msg) + strlen(hint) < sizeof(err->msg))
		strcat(err->msg, hint);
}

int pbx_cluster_resize(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       const struct pbx_resize_opts *o, const struct pbx_cluster_events *ev,
		       struct pbx_err *err)
{
	struct pbx_cluster *c = NULL;
	const struct pbx_node_group *grp;
	const struct pbx_node_row **v = NULL;
	char *json = NULL, *group = NULL;
	int count = 0, rc, k;
	if (pbx_cluster_open(st, cfg, name, &c, err) < 0)
		return -1;
	grp = resize_group(c, o->group, err);
	if (grp && grp->min >= 0 && grp->min < grp->count) { /* sized by SLURM: min/max */
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "node group %s saves power (min: %d, max: %d): "
			     "SLURM makes and removes its nodes; change min: or max: in the "
			     "template instead",
			     grp->name, grp->min, grp->count);
		grp = NULL;
	}
	rc = grp ? resize_count(c, grp, o->delta, &count, err) : -1;
	if (rc == 0 && o->dry_run) {
		rc = resize_dry(c, grp, count, o, err);
		pbx_cluster_close(c);
		return rc;
	}
	if (rc == 0 && !c->provider->remove_nodes)
		rc = pbx_err_set(err, "cloud %s cannot remove single nodes", c->provider->name);
	if (rc == 0) {
		group = xstrdup(grp->name);
		pbx_store_event(st, c->row.id, "cluster.resize", "%s: %d -> %d", group, grp->count,
				count);
	}
	if (rc == 0 && count < grp->count) {
		size_t n;
		v = xcalloc(c->nnodes ? c->nnodes : 1, sizeof(*v));
		n = resize_victims(c, grp, count, v);
		rc = resize_shrink(c, v, n, o, ev, err);
		/* the rows of the nodes the cloud never made (min_nodes) too */
		for (k = count + 1; rc == 0 && k <= grp->count; k++) {
			char *node = xasprintf("%s%d", grp->name, k);
			rc = pbx_store_node_delete(st, c->row.id, node, err);
			free(node);
		}
	}
	if (rc == 0) {
		json = pbx_template_json_resized(c->row.template_json, group, count);
		rc = json ? pbx_store_cluster_set_template_json(st, c->row.id, json, err)
			  : pbx_err_set(err, "cluster %s: its recorded template is not JSON", name);
	}
	pbx_cluster_close(c);
	free(v);
	free(json);
	free(group);
	if (rc < 0)
		return -1;
	/* The new size everywhere: new nodes made and bootstrapped, slurm.conf
	 * rewritten on every node. */
	rc = pbx_cluster_start_name(st, cfg, name, ev, err);
	if (rc < 0 && o->delta > 0 && err->code != PBX_EXIT_SECURITY)
		resize_grow_hint(name, o->group, o->delta, err);
	return rc;
}
