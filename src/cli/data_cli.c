/*
 * data_cli.c - the terminal's side of staging an experiment's data:
 * sources (src/jobs/data.h) for `pbx parrun`, `pbx run`, `pbx rerun` and
 * `pbx parrun --dry-run`: the progress line and one summary line per
 * source, on stderr (nothing with -q).
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "jobs/data.h"
#include "jobs/datacache.h"
#include "config/config.h"

#include <inttypes.h>
#include <stdio.h>

static void data_progress(void *ctx, const char *key, size_t done, size_t total, uint64_t bytes,
			  uint64_t sending)
{
	char what[512], note[64];
	(void)ctx;
	snprintf(what, sizeof(what), "data %s", key);
	snprintf(note, sizeof(note), "sending %.1f MB to the cluster", (double)sending / 1e6);
	/* from 0.1 MB on: a push starts with a few kB (never "0.0 MB") */
	pbx_transfer_progress_note(what, done, total, bytes, sending >= 50000 ? note : NULL);
}

static void data_waiting(void *ctx, const char *key)
{
	(void)ctx;
	pbx_info("data %s: waiting for another pbx staging it on this machine to end", key);
}

/* "1.2 MB" */
static void data_mb(char out[32], uint64_t bytes)
{
	snprintf(out, 32, "%.1f MB", (double)bytes / 1e6);
}

static void data_summary(const struct pbx_data_result *r)
{
	char all[32], moved[32];
	data_mb(all, r->bytes);
	data_mb(moved, r->bytes_moved);
	if (!r->changed && !r->removed && r->staged_before == 1) {
		pbx_info("data %s: %zu objects, 0 moved (staged before)", r->key, r->objects);
		return;
	}
	pbx_info("data %s: %zu objects (%s), %zu moved (%s), %zu removed, %lu downloaded, "
		 "%.1f s (%.1f MB/s)",
		 r->key, r->objects, all, r->changed, moved, r->removed, r->downloads, r->seconds,
		 r->seconds > 0 ? (double)r->bytes_moved / 1e6 / r->seconds : 0.0);
}

static void data_plan(const struct pbx_data_result *r)
{
	char all[32], moved[32];
	data_mb(all, r->bytes);
	data_mb(moved, r->bytes_moved);
	if (r->staged_before < 0)
		printf("data %s -> %s: %zu objects (%s); the cluster was not asked\n", r->key,
		       r->to, r->objects, all);
	else if (r->staged_before == 0)
		printf("data %s -> %s: %zu objects (%s); not staged yet\n", r->key, r->to,
		       r->objects, all);
	else
		printf("data %s -> %s: %zu objects (%s); staged, %zu changed (%s), %zu removed\n",
		       r->key, r->to, r->objects, all, r->changed, moved, r->removed);
}

static void data_cache_removed(void *ctx, const struct pbx_data_cache *e)
{
	char size[32];
	(void)ctx;
	pbx_format_bytes(e->bytes - e->shared, size, sizeof(size));
	pbx_info("data cache: removed %s (%s), the least recently used, to stay within "
		 "data_cache_max",
		 e->key ? e->key : e->id, size);
}

/* After a staging that succeeded (a failed one's downloads are what its
 * retry reads): the download cache trimmed to max; a failure to is a
 * warning, the staging stands. */
static void data_cache_bound(uint64_t max)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_data_cache_trim(max, data_cache_removed, NULL, &err) < 0)
		pbx_warning("data cache: %s", err.msg);
}

int pbx_cli_data_stage(struct pbx_ctx *ctx, struct pbx_cluster *c, const struct pbx_experiment *e,
		       int dry_run)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_data_opts o = { .cfg = ctx->cfg,
				   .dry_run = dry_run,
				   .progress = data_progress,
				   .waiting = data_waiting };
	struct pbx_data_result *res = NULL;
	size_t n = 0, i;
	int rc = 0;
	if (!e->ndata)
		return 0;
	if (pbx_data_stage(c, e, &o, &res, &n, &err) < 0)
		rc = pbx_report(&err);
	else if (!dry_run && ctx->cfg && ctx->cfg->data_cache_bounded)
		data_cache_bound(ctx->cfg->data_cache_max);
	for (i = 0; rc == 0 && i < n; i++) {
		if (dry_run)
			data_plan(&res[i]);
		else
			data_summary(&res[i]);
	}
	pbx_data_results_free(res, n);
	return rc;
}
