/*
 * cost.c - node-hours and estimated cost of an experiment's tasks (see
 * cost.h for the definitions): the share of a node from the submission's
 * sbatch options, the price from the node run covering the task's start,
 * and exact sums in 1e-9 units of the currency.
 */
#include "results/cost.h"

#include "slurm/sbatch.h"
#include "util/money.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- resources */

/* What a task allocates, from its sbatch options. */
struct alloc {
	int64_t nodes;    /* --nodes' lower bound, >= 1 */
	int64_t per_node; /* GPUs on each node (--gres gpu, --gpus-per-node); 0 = none */
	int64_t total;    /* GPUs in all (--gpus, --gpus-per-task x tasks); 0 = none */
	int exclusive;
};

/* A count "N", "[TYPE:]N" or "N-M" (its lower bound); a bare name is 1. */
static int64_t count_of(const char *v, size_t len)
{
	const char *colon = NULL;
	size_t i;
	for (i = 0; i < len; i++)
		if (v[i] == ':')
			colon = v + i;
	if (colon)
		return strtoll(colon + 1, NULL, 10);
	if (len && v[0] >= '0' && v[0] <= '9')
		return strtoll(v, NULL, 10);
	return 1;
}

/* The GPUs of a --gres value: the sum of its gpu entries
 * ("gpu:2", "gpu:a100:2", "gpu"), other kinds left out. */
static int64_t gres_gpus(const char *v)
{
	int64_t sum = 0;
	while (v && *v) {
		size_t len = strcspn(v, ",");
		if (!strncmp(v, "gpu", 3) && (len == 3 || v[3] == ':'))
			sum += len == 3 ? 1 : count_of(v + 4, len - 4);
		v += len + (v[len] == ',');
	}
	return sum;
}

static int64_t opt_count(const struct pbx_sbatch_opts *o, const char *key)
{
	const char *v = pbx_sbatch_opts_get(o, key);
	return v ? count_of(v, strcspn(v, ",")) : 0;
}

static void alloc_of(const char *resources_json, struct alloc *a)
{
	struct pbx_sbatch_opts o;
	struct pbx_err err = PBX_ERR_INIT;
	int64_t ntasks, per_task;
	memset(a, 0, sizeof(*a));
	a->nodes = 1;
	if (!resources_json || pbx_sbatch_opts_from_json(resources_json, &o, &err) < 0)
		return; /* nothing known: one node, no GPUs */
	if (opt_count(&o, "nodes") > 1)
		a->nodes = opt_count(&o, "nodes");
	a->exclusive = pbx_sbatch_opts_get(&o, "exclusive") != NULL;
	a->per_node = gres_gpus(pbx_sbatch_opts_get(&o, "gres")) + opt_count(&o, "gpus-per-node");
	a->total = opt_count(&o, "gpus");
	per_task = opt_count(&o, "gpus-per-task");
	if (!a->total && per_task > 0) {
		ntasks = opt_count(&o, "ntasks");
		if (ntasks < 1)
			ntasks = opt_count(&o, "ntasks-per-node") * a->nodes;
		a->total = per_task * (ntasks > 0 ? ntasks : a->nodes);
	}
	pbx_sbatch_opts_free(&o);
}

/* ------------------------------------------------------------------ nodes */

/* GPUs of node `name`: its row's, else its node group's in the template
 * (the name without its number); 0 when unknown. */
static int64_t node_gpus(const struct pbx_cost_inputs *in, json_t *tmpl, const char *name)
{
	json_t *groups = json_object_get(tmpl, "node_groups"), *g;
	size_t i, len;
	for (i = 0; i < in->nnodes; i++)
		if (in->nodes[i].name && !strcmp(in->nodes[i].name, name))
			return in->nodes[i].gpus;
	json_array_foreach(groups, i, g)
	{
		const char *gname = json_string_value(json_object_get(g, "name"));
		if (!gname)
			continue;
		len = strlen(gname);
		if (!strncmp(name, gname, len) && name[len] &&
		    strspn(name + len, "0123456789") == strlen(name + len))
			return json_integer_value(json_object_get(g, "gpus"));
	}
	return 0;
}

/* The run of `node` covering time t (started <= t < ended, or open). */
static const struct pbx_node_run *covering_run(const struct pbx_cost_inputs *in, const char *node,
					       int64_t t)
{
	size_t i;
	for (i = 0; i < in->nruns; i++) {
		const struct pbx_node_run *r = &in->runs[i];
		if (r->node && !strcmp(r->node, node) && r->started <= t &&
		    (!r->ended || t < r->ended))
			return r;
	}
	return NULL;
}

/* -------------------------------------------------------------------- sums */

/* seconds x num x price / (den x 3600), rounded half up: exact in 64-bit
 * integers when the product fits (it does for centuries of any node), else
 * through a long double. */
static int64_t cost_nanos(int64_t secs, int64_t num, int64_t den, int64_t price)
{
	int64_t p, q = den * 3600;
	if (!__builtin_mul_overflow(secs, num, &p) && !__builtin_mul_overflow(p, price, &p))
		return p / q + (2 * (p % q) >= q);
	return (int64_t)((long double)secs * (long double)num * (long double)price /
				 (long double)q +
			 0.5L);
}

static void task_cost(const struct pbx_cost_inputs *in, json_t *tmpl, const struct alloc *a,
		      const struct pbx_task_row *t, int64_t now, struct pbx_task_cost *c)
{
	const struct pbx_node_run *run = NULL;
	int64_t end = 0, gpus;
	memset(c, 0, sizeof(*c));
	c->idx = t->idx;
	c->share_num = c->share_den = 1;
	c->nanos = -1;
	if (t->start_time > 0 && t->node && *t->node)
		run = covering_run(in, t->node, t->start_time);
	if (t->start_time > 0 && t->end_time >= t->start_time)
		end = t->end_time;
	else if (t->start_time > 0 && t->state && !strcmp(t->state, "RUNNING"))
		end = run && run->ended && run->ended < now ? run->ended : now;
	c->seconds = end > t->start_time ? end - t->start_time : 0;
	/* the share: GPUs over the node's, else whole nodes */
	gpus = t->node && *t->node ? node_gpus(in, tmpl, t->node) : 0;
	if (!a->exclusive && gpus > 0 && (a->per_node > 0 || a->total > 0)) {
		c->share_num = a->per_node > 0 ? a->per_node * a->nodes : a->total;
		c->share_den = gpus;
	} else {
		c->share_num = a->nodes;
		c->whole = 1;
	}
	c->node_hours = (double)c->seconds * (double)c->share_num / ((double)c->share_den * 3600.0);
	if (!in->nruns)
		return; /* a local cluster: its nodes are processes here, unpriced */
	if (!c->seconds) {
		c->nanos = 0; /* nothing ran: nothing spent, priced or not */
		return;
	}
	if (!run || run->nanos < 0)
		return;
	c->nanos = cost_nanos(c->seconds, c->share_num, c->share_den, run->nanos);
	snprintf(c->currency, sizeof(c->currency), "%s", run->currency);
}

void pbx_cost_compute(const struct pbx_cost_inputs *in, const struct pbx_task_row *tasks, size_t n,
		      int64_t now, struct pbx_cost *out)
{
	json_t *tmpl = in->template_json ? json_loads(in->template_json, 0, NULL) : NULL;
	struct alloc a;
	int mixed = 0;
	size_t i;
	memset(out, 0, sizeof(*out));
	alloc_of(in->resources_json, &a);
	out->tracked = in->nruns > 0;
	out->n = n;
	out->tasks = xcalloc(n ? n : 1, sizeof(*out->tasks));
	for (i = 0; i < n; i++) {
		struct pbx_task_cost *c = &out->tasks[i];
		task_cost(in, tmpl, &a, &tasks[i], now, c);
		out->node_hours += c->node_hours;
		if (c->nanos < 0) {
			out->unpriced += c->seconds > 0;
			out->nanos = -1;
			continue;
		}
		if (c->currency[0] && !out->currency[0])
			memcpy(out->currency, c->currency, sizeof(out->currency));
		else if (c->currency[0] && strcmp(c->currency, out->currency))
			mixed = 1;
		if (out->nanos >= 0)
			out->nanos += c->nanos;
	}
	if (mixed || !out->tracked) {
		out->nanos = -1; /* no one amount; a local cluster has no price */
		out->currency[0] = '\0';
	}
	json_decref(tmpl);
}

/* The cluster row `id`, deleted or not (a submission outlives its cluster). */
static int cluster_template(struct pbx_store *st, int64_t id, char **tmpl, struct pbx_err *err)
{
	struct pbx_cluster_row *rows;
	size_t n, i;
	*tmpl = NULL;
	if (pbx_store_cluster_list(st, 1, &rows, &n, err) < 0)
		return -1;
	for (i = 0; i < n; i++)
		if (rows[i].id == id && rows[i].template_json)
			*tmpl = xstrdup(rows[i].template_json);
	pbx_cluster_rows_free(rows, n);
	return 0;
}

int pbx_cost_of(struct pbx_store *st, const struct pbx_submission_row *sub,
		const struct pbx_task_row *tasks, size_t n, int64_t now, struct pbx_cost *out,
		struct pbx_err *err)
{
	struct pbx_cost_inputs in;
	struct pbx_node_row *nodes = NULL;
	struct pbx_node_run *runs = NULL;
	char *tmpl = NULL;
	int rc = -1;
	memset(&in, 0, sizeof(in));
	memset(out, 0, sizeof(*out));
	out->nanos = -1;
	if (cluster_template(st, sub->cluster_id, &tmpl, err) < 0 ||
	    pbx_store_node_list(st, sub->cluster_id, &nodes, &in.nnodes, err) < 0 ||
	    pbx_store_runs_list(st, sub->cluster_id, &runs, &in.nruns, err) < 0)
		goto out;
	in.template_json = tmpl;
	in.nodes = nodes;
	in.runs = runs;
	in.resources_json = sub->resources_json;
	pbx_cost_compute(&in, tasks, n, now, out);
	rc = 0;
out:
	pbx_node_runs_free(runs, in.nruns);
	pbx_node_rows_free(nodes, in.nnodes);
	free(tmpl);
	return rc;
}

void pbx_cost_free(struct pbx_cost *c)
{
	if (!c)
		return;
	free(c->tasks);
	memset(c, 0, sizeof(*c));
}

void pbx_cost_text(int64_t nanos, const char *currency, char *out, size_t size)
{
	char amount[32];
	if (nanos < 0) {
		snprintf(out, size, "-");
		return;
	}
	pbx_money_format(nanos, 4, amount, sizeof(amount));
	snprintf(out, size, "%s%s%s", amount, currency && *currency ? " " : "",
		 currency ? currency : "");
}

void pbx_node_hours_text(double h, char *out, size_t size)
{
	snprintf(out, size, "%.2f", h);
}
