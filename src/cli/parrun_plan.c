/*
 * parrun_plan.c - `pbx parrun --dry-run` (and `pbx run --dry-run`): what a
 * submission would do, with nothing sent: the files that would ship
 * (count, bytes, the largest), the tasks and the first commands, the
 * sbatch options, the environment and where notify: goes (its host
 * alone: the URL is a secret).  The package is collected exactly as
 * parrun collects it (pbx_package_build), so an un-shippable path (a
 * .venv's links out of the directory, a file too large) fails here with
 * the same message.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cli/parrun_internal.h"
#include "experiment/package.h"
#include "util/buf.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_LARGEST  3 /* files named by size */
#define PLAN_COMMANDS 3 /* task commands shown */

/* The indexes of p's PLAN_LARGEST largest files, largest first, into
 * top[] (-1 where there are fewer). */
static void plan_largest(const struct pbx_package *p, long top[PLAN_LARGEST])
{
	size_t i, k, j;
	for (k = 0; k < PLAN_LARGEST; k++)
		top[k] = -1;
	for (i = 0; i < p->nfiles; i++) {
		if (p->files[i].type != 'f')
			continue;
		for (k = 0; k < PLAN_LARGEST; k++)
			if (top[k] < 0 || p->files[i].size > p->files[top[k]].size)
				break;
		if (k == PLAN_LARGEST)
			continue;
		for (j = PLAN_LARGEST - 1; j > k; j--)
			top[j] = top[j - 1];
		top[k] = (long)i;
	}
}

static size_t plan_regular_files(const struct pbx_package *p)
{
	size_t i, n = 0;
	for (i = 0; i < p->nfiles; i++)
		n += p->files[i].type == 'f';
	return n;
}

/* The environment line ("python requirements.txt (wheels: wheels/)"), or
 * NULL: none.  Caller frees. */
static char *plan_environment(const struct pbx_experiment *e)
{
	const struct pbx_exp_environment *v = &e->env;
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	if (!v->line)
		return NULL;
	if (v->container)
		pbx_buf_addf(&b, "container %s (unpacked once per node before the tasks)",
			     v->container);
	else if (v->container_ref)
		pbx_buf_addf(&b,
			     "container %s (pulled once on the head, unpacked once per node "
			     "before the tasks)",
			     v->container_ref);
	else if (v->python_file || v->python_text)
		pbx_buf_addf(&b,
			     "python %s%s%s%s (built once on the cluster, in a SLURM job before "
			     "the array)",
			     v->python_file ? v->python_file : "(inline list)",
			     v->wheels ? " (wheels: " : "", v->wheels ? v->wheels : "",
			     v->wheels ? ")" : "");
	if (v->napt) {
		pbx_buf_adds(&b, b.len ? "; apt" : "apt");
		for (i = 0; i < v->napt; i++)
			pbx_buf_addf(&b, " %s", v->apt[i]);
		pbx_buf_adds(&b, " (installed on every node that is up, before the tasks)");
	}
	return pbx_buf_detach(&b, NULL);
}

/* The first PLAN_COMMANDS points not held, into first[]; how many. */
static size_t plan_first(const struct pbx_experiment *e, const struct pbx_parrun_hold *h,
			 size_t first[PLAN_COMMANDS])
{
	size_t i, n = 0;
	for (i = 0; i < e->npoints && n < PLAN_COMMANDS; i++)
		if (!h->hold || !h->hold[i])
			first[n++] = i;
	return n;
}

static size_t plan_held(const struct pbx_parrun_hold *h)
{
	return h->pool_done + h->other_shares;
}

static json_t *plan_json(const struct pbx_experiment *e, const struct pbx_package *p,
			 const char *cluster, const struct pbx_parrun_hold *h, char **args,
			 size_t nargs)
{
	json_t *o = json_object(), *pk = json_object(), *big = json_array(), *cmds = json_array(),
	       *sb = json_array();
	long top[PLAN_LARGEST];
	char *envline = plan_environment(e), *host = pbx_experiment_notify_host(e);
	size_t i, first[PLAN_COMMANDS], nfirst = plan_first(e, h, first);
	plan_largest(p, top);
	for (i = 0; i < PLAN_LARGEST && top[i] >= 0; i++) {
		json_t *f = json_object();
		json_object_set_new(f, "path", json_string(p->files[top[i]].path));
		json_object_set_new(f, "size", json_integer((json_int_t)p->files[top[i]].size));
		json_array_append_new(big, f);
	}
	json_object_set_new(pk, "id", json_string(p->short_id));
	json_object_set_new(pk, "files", json_integer((json_int_t)plan_regular_files(p)));
	json_object_set_new(pk, "bytes", json_integer((json_int_t)p->bytes));
	json_object_set_new(pk, "largest", big);
	for (i = 0; i < nfirst; i++) {
		char *cmd = pbx_experiment_task_command(e, first[i]);
		json_array_append_new(cmds, json_string(cmd));
		free(cmd);
	}
	for (i = 0; i < nargs; i++)
		json_array_append_new(sb, json_string(args[i]));
	json_object_set_new(o, "dry_run", json_true());
	json_object_set_new(o, "name", json_string(e->name));
	json_object_set_new(o, "cluster", json_string(cluster));
	json_object_set_new(o, "package", pk);
	json_object_set_new(o, "tasks", json_integer((json_int_t)e->npoints));
	json_object_set_new(o, "held", json_integer((json_int_t)plan_held(h)));
	json_object_set_new(o, "pool_done", json_integer((json_int_t)h->pool_done));
	json_object_set_new(o, "other_shares", json_integer((json_int_t)h->other_shares));
	json_object_set_new(o, "commands", cmds);
	json_object_set_new(o, "sbatch", sb);
	json_object_set_new(o, "environment", envline ? json_string(envline) : json_null());
	json_object_set_new(o, "notify", host ? json_string(host) : json_null());
	free(envline);
	free(host);
	return o;
}

static void plan_text(const struct pbx_experiment *e, const struct pbx_package *p,
		      const char *cluster, const struct pbx_parrun_hold *h, char **args,
		      size_t nargs)
{
	char total[32], one[32], *host = pbx_experiment_notify_host(e);
	long top[PLAN_LARGEST];
	char *envline = plan_environment(e);
	size_t i, first[PLAN_COMMANDS], nfirst = plan_first(e, h, first),
					todo = e->npoints - plan_held(h);
	pbx_format_bytes(p->bytes, total, sizeof(total));
	plan_largest(p, top);
	printf("dry run: nothing is sent to cluster %s\n", cluster);
	printf("experiment %s: %zu task%s", e->name, e->npoints, e->npoints == 1 ? "" : "s");
	if (plan_held(h))
		printf("; %zu held back (%zu done in the pool, %zu of other shares), %zu to "
		       "submit",
		       plan_held(h), h->pool_done, h->other_shares, todo);
	printf("\n");
	printf("package %s: %zu file%s, %s%s", p->short_id, plan_regular_files(p),
	       plan_regular_files(p) == 1 ? "" : "s", total, top[0] >= 0 ? "; the largest: " : "");
	for (i = 0; i < PLAN_LARGEST && top[i] >= 0; i++) {
		pbx_format_bytes(p->files[top[i]].size, one, sizeof(one));
		printf("%s%s (%s)", i ? ", " : "", p->files[top[i]].path, one);
	}
	printf("\n  (leave files out with .pbxignore or name them with files:, "
	       "pbx-experiment(5))\n");
	for (i = 0; i < nfirst; i++) {
		char *cmd = pbx_experiment_task_command(e, first[i]);
		printf("task %zu: %s\n", first[i], cmd);
		free(cmd);
	}
	if (todo > nfirst)
		printf("... and %zu more task%s\n", todo - nfirst, todo - nfirst == 1 ? "" : "s");
	printf("sbatch:");
	for (i = 0; i < nargs; i++)
		printf(" %s", args[i]);
	printf("%s --array sized from the cluster's MaxArraySize at submission\n",
	       nargs ? "," : "");
	if (envline)
		printf("environment: %s\n", envline);
	free(envline);
	if (host)
		printf("notify: the webhook at %s, when the last task has ended\n", host);
	free(host);
}

int pbx_parrun_dry_run(const struct pbx_experiment *e, const char *cluster,
		       const struct pbx_parrun_hold *h, int json)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package *p = NULL;
	char **args;
	size_t nargs, i;
	if (pbx_package_build(e, &p, &err) < 0)
		return pbx_report(&err);
	args = pbx_experiment_sbatch_args(e, &nargs);
	if (json)
		pbx_print_json(plan_json(e, p, cluster, h, args, nargs));
	else
		plan_text(e, p, cluster, h, args, nargs);
	for (i = 0; i < nargs; i++)
		free(args[i]);
	free(args);
	pbx_package_free(p);
	return 0;
}
