/*
 * unharvested.c - what a stop of a cluster would lose: the tasks of its
 * packages whose results are not home (docs/experiments.md, "Results"; `pbx cluster
 * stop` refuses while there are any, unless told to discard them).
 *
 * The store knows what `pbx harvest` brought home (the `harvested` table:
 * a task's status file, which its wrapper writes last, as it was at the
 * task's end) and where each task stood when last refreshed.  Tasks the
 * store still has pending or running are refreshed first where the
 * cluster is up, so a sweep that ended since the last `pbx state` counts
 * as ended, not running.
 */
#include "jobs/jobs_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* Refreshes, on the open cluster c, the tasks of each submission in u that
 * the store has not seen end; a failure leaves the store's view. */
static void unharvested_refresh(struct pbx_store *st, struct pbx_cluster *c,
				const struct pbx_unharvested *u, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		struct pbx_jobs_target t;
		struct pbx_err err = PBX_ERR_INIT;
		if (u[i].live == 0)
			continue;
		memset(&t, 0, sizeof(t));
		if (pbx_store_package_find(st, u[i].package_id, &t.pkg, &err) == 0 &&
		    pbx_store_submission_get(st, u[i].package_id, c->row.id, &t.sub, &err) == 0) {
			t.cluster = c;
			pbx_jobs_refresh(st, &t, &err);
			t.cluster = NULL; /* the caller's */
		}
		pbx_jobs_target_free(&t);
	}
}

int pbx_jobs_unharvested(struct pbx_store *st, const struct pbx_config *cfg, const char *cluster,
			 struct pbx_unharvested **rows, size_t *n, struct pbx_err *err)
{
	struct pbx_cluster *c = NULL;
	struct pbx_err open_err = PBX_ERR_INIT;
	int rc;
	*rows = NULL;
	*n = 0;
	if (pbx_cluster_open(st, cfg, cluster, &c, &open_err) < 0)
		return 0; /* not a cluster of this store: nothing of its is recorded */
	rc = pbx_store_unharvested(st, c->row.id, rows, n, err);
	if (rc == 0 && *n && (!strcmp(c->row.state, "up") || !strcmp(c->row.state, "degraded"))) {
		unharvested_refresh(st, c, *rows, *n);
		pbx_unharvested_free(*rows, *n);
		rc = pbx_store_unharvested(st, c->row.id, rows, n, err);
	}
	pbx_cluster_close(c);
	return rc;
}
