/*
 * operation.c - Compute Engine's operations, as the gce provider's files
 * wait for them: a mutation (insert, delete) returns an Operation, which
 * is polled until DONE and whose error then becomes the call's
 * (gce_wait_op); gce_mutate sends one and waits.  The firewall rules
 * (firewall.c), the routers (router.c) and the images (image.c) wait
 * here; bulkInsert's operations are polled without waiting (poll.c).
 */
#include "cloud/gce/gce_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/xalloc.h"

int gce_wait_op(struct gce *g, const char *scope, const char *op, struct pbx_err *err)
{
	struct timespec delay = { 0, 250 * 1000 * 1000 };
	time_t until = time(NULL) + GCE_WAIT_LIMIT_S;
	char *path = xasprintf("projects/%s/%s/operations/%s", g->project, scope, op);
	int rc = -1;
	while (time(NULL) < until) {
		json_t *r = NULL;
		struct gce_op o;
		long st;
		if (g->s->dry_run) {
			rc = 0;
			break;
		}
		if (gce_call(g, "GET", path, NULL, NULL, &r, &st, err) < 0 ||
		    gce_op_parse(r, &o, err) < 0) {
			json_decref(r);
			break;
		}
		json_decref(r);
		if (!strcmp(o.status, "DONE")) {
			rc = o.error[0] ? pbx_err_set(err, "operation %s failed: %s", op, o.error)
					: 0;
			break;
		}
		nanosleep(&delay, NULL);
	}
	if (rc < 0 && !err->msg[0])
		pbx_err_set(err, "operation %s not done after %d s", op, GCE_WAIT_LIMIT_S);
	free(path);
	return rc;
}

/* Sends a mutation and waits for its operation (in `scope`, see
 * gce_wait_op).  A status listed in `ok` other than 2xx is no operation. */
int gce_mutate(struct gce *g, const char *method, const char *path, json_t *body, const long *ok,
	       const char *scope, struct pbx_err *err)
{
	json_t *r = NULL;
	struct gce_op o;
	long st;
	int rc = gce_call(g, method, path, body, ok, &r, &st, err);
	if (rc == 0 && st >= 200 && st < 300) {
		rc = gce_op_parse(r, &o, err);
		if (rc == 0)
			rc = gce_wait_op(g, scope, o.name, err);
	}
	json_decref(r);
	return rc;
}
