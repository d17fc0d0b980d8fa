/*
 * parrun_hold.c - the sweep points `pbx parrun` holds back, so a class can
 * share one sweep with no coordination but a bucket:
 *   --skip-done POOL  the points a pool holds done (pulled first, as
 *                     `pbx pull POOL` does; src/pool/done.c matches them);
 *   --split K/N       all but share K of N: point i is share (i mod N) + 1,
 *                     the same split on every student's machine.
 * Held points stay NEW in the store; a later parrun without them held
 * submits them.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cli/parrun_internal.h"
#include "experiment/experiment.h"
#include "pool/pool.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "K/N" with 1 <= K <= N into *k, *n; -1 when it is not one. */
static int split_parse(const char *s, unsigned long *k, unsigned long *n)
{
	char *end;
	if (*s < '1' || *s > '9')
		return -1;
	errno = 0;
	*k = strtoul(s, &end, 10);
	if (errno || *end != '/' || end[1] < '1' || end[1] > '9')
		return -1;
	*n = strtoul(end + 1, &end, 10);
	return errno || *end || *k > *n ? -1 : 0;
}

static int hold_split(const char *arg, const struct pbx_experiment *e, struct pbx_parrun_hold *h)
{
	unsigned long k, n;
	size_t i;
	if (split_parse(arg, &k, &n) < 0) {
		pbx_error("--split '%s': expected K/N, share K of N (1 <= K <= N), e.g. 2/5", arg);
		return PBX_EXIT_USAGE;
	}
	for (i = 0; i < e->npoints; i++)
		if (i % n != k - 1 && !h->hold[i]) {
			h->hold[i] = 1;
			h->other_shares++;
		}
	return 0;
}

static void hold_progress(void *ctx, size_t done, size_t total, uint64_t bytes)
{
	(void)ctx;
	pbx_transfer_progress("pulling", done, total, bytes);
}

/* Pulls the pool (a dry run too: it reads the bucket and writes only
 * this store's copy of the pool), then holds the points it holds done. */
static int hold_pool(struct pbx_ctx *ctx, const char *url, const struct pbx_experiment *e,
		     struct pbx_parrun_hold *h)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_pull_opts o;
	struct pbx_pull_stats s;
	long done;
	memset(&o, 0, sizeof(o));
	o.url = url;
	o.progress = hold_progress;
	if (pbx_pool_pull(ctx->store, ctx->cfg, &o, &s, &err) < 0)
		return pbx_report(&err);
	if (s.refused)
		pbx_warning("%zu object%s of %s refused; the first: %s", s.refused,
			    s.refused == 1 ? "" : "s", url, s.first_refusal);
	pbx_pull_stats_release(&s);
	done = pbx_pool_points_done(ctx->store, url, e, h->hold, &err);
	if (done < 0)
		return pbx_report(&err);
	h->pool_done = (size_t)done;
	pbx_info("%s holds %zu of the %zu points of %s done", url, h->pool_done, e->npoints,
		 e->name);
	return 0;
}

int pbx_parrun_hold(struct pbx_ctx *ctx, const struct pbx_parrun_values *v,
		    const struct pbx_experiment *e, struct pbx_parrun_hold *h)
{
	int rc = 0;
	memset(h, 0, sizeof(*h));
	if (!v->skip_done && !v->split)
		return 0;
	h->hold = xcalloc(e->npoints + 1, 1);
	if (v->skip_done)
		rc = hold_pool(ctx, v->skip_done, e, h);
	if (rc == 0 && v->split)
		rc = hold_split(v->split, e, h);
	return rc;
}

void pbx_parrun_hold_release(struct pbx_parrun_hold *h)
{
	free(h->hold);
	h->hold = NULL;
}
