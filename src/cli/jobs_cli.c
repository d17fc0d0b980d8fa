/*
 * jobs_cli.c - helpers of the experiment verbs (see jobs_cli.h).
 */
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "util/buf.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

int pbx_cli_pkg_task(const char *arg, char **pkg, long *task)
{
	const char *colon = strrchr(arg, ':');
	char *end;
	*task = -1;
	if (!colon) {
		*pkg = xstrdup(arg);
		return 0;
	}
	*task = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end || *task < 0) {
		pbx_error("'%s': expected PKG:TASK with TASK a task index", arg);
		return -1;
	}
	*pkg = xstrndup(arg, (size_t)(colon - arg));
	return 0;
}

static const char *const state_order[] = {
	"NEW",       "PENDING",   "RUNNING",       "COMPLETED", "FAILED",  "CANCELLED", "TIMEOUT",
	"PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "MISSING",   "UNKNOWN", NULL,
};

json_t *pbx_cli_state_counts(const struct pbx_task_row *tasks, size_t n)
{
	json_t *o = json_object();
	size_t i, k;
	for (k = 0; state_order[k]; k++) {
		size_t c = 0;
		for (i = 0; i < n; i++)
			c += !strcmp(tasks[i].state, state_order[k]);
		if (c)
			json_object_set_new(o, state_order[k], json_integer((json_int_t)c));
	}
	return o;
}

char *pbx_cli_state_summary(const struct pbx_task_row *tasks, size_t n)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i, k;
	int first = 1;
	pbx_buf_addf(&b, "%zu task%s:", n, n == 1 ? "" : "s");
	for (k = 0; state_order[k]; k++) {
		size_t c = 0;
		for (i = 0; i < n; i++)
			c += !strcmp(tasks[i].state, state_order[k]);
		if (c) {
			pbx_buf_addf(&b, "%s %zu %s", first ? "" : ",", c, state_order[k]);
			first = 0;
		}
	}
	return pbx_buf_detach(&b, NULL);
}

int pbx_cli_results_pending(struct pbx_store *st, int64_t cluster_id, int64_t sub, long *live,
			    long *ended)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_unharvested *u = NULL;
	size_t n = 0, i;
	int pending = 1; /* when the store cannot say */
	if (live)
		*live = 0;
	if (ended)
		*ended = 0;
	if (pbx_store_unharvested(st, cluster_id, &u, &n, &err) == 0)
		for (pending = 0, i = 0; i < n; i++)
			if (u[i].submission_id == sub) {
				pending = 1;
				if (live)
					*live = u[i].live;
				if (ended)
					*ended = u[i].ended;
			}
	pbx_unharvested_free(u, n);
	return pending;
}
