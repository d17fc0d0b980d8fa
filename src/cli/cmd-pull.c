/*
 * cmd-pull.c - `pbx pull URL`: everyone's published results from a pool
 * into this store (read-only; `pbx report --pool URL` reports them).  The
 * work is in src/pool (pool.h).
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "pool/pool.h"
#include "util/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct pbx_cmd pbx_cmd_pull;

struct pull_args {
	int json;
};

static const struct pbx_option pull_opts[] = {
	PBX_OPT_FLAG('j', "json", struct pull_args, json, "print the counts as JSON"),
	PBX_OPT_END,
};

static void pull_progress(void *ctx, size_t done, size_t total, uint64_t bytes)
{
	(void)ctx;
	pbx_transfer_progress("pulling", done, total, bytes);
}

static void pull_print(const struct pull_args *a, const char *url, const struct pbx_pull_stats *s)
{
	if (a->json) {
		pbx_print_json(json_pack(
			"{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s?}", "pool", url, "objects",
			(json_int_t)s->objects, "pulled", (json_int_t)s->pulled, "already",
			(json_int_t)s->already, "refused", (json_int_t)s->refused, "other",
			(json_int_t)s->other, "bytes", (json_int_t)s->bytes, "identity",
			s->identity, "first_refusal", s->first_refusal));
		return;
	}
	printf("pulled %zu task%s from %s (%.1f MB); %zu already here, %zu in the pool\n",
	       s->pulled, s->pulled == 1 ? "" : "s", url, (double)s->bytes / 1e6, s->already,
	       s->objects);
	if (s->refused)
		pbx_warning("%zu object%s refused; the first: %s", s->refused,
			    s->refused == 1 ? "" : "s", s->first_refusal);
}

static int cmd_pull_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pull_args a = { 0 };
	struct pbx_pull_opts o;
	struct pbx_pull_stats s;
	struct pbx_err err = PBX_ERR_INIT;
	int first, rc;
	if ((rc = pbx_opts_parse(&pbx_cmd_pull, argc, argv, &a, &first)))
		return rc;
	memset(&o, 0, sizeof(o));
	o.url = argv[first];
	o.progress = pull_progress;
	rc = pbx_pool_pull(ctx->store, ctx->cfg, &o, &s, &err);
	if (rc == 0) {
		pull_print(&a, argv[first], &s);
		/* refused objects are reported; the exit says some were */
		rc = s.refused ? PBX_EXIT_SECURITY : 0;
	} else {
		rc = pbx_report(&err);
	}
	pbx_pull_stats_release(&s);
	return rc;
}

const struct pbx_cmd pbx_cmd_pull = {
	.name = "pull",
	.summary = "bring everyone's published results from a pool into the store",
	.usage = "pbx pull [--json] URL",
	.description = "Lists the pool URL (gs://BUCKET/PREFIX or s3://BUCKET/PREFIX) once and\n"
		       "downloads, in parallel, every task object ('pbx publish') not pulled\n"
		       "yet or changed since; each is checked (its CRC32C against the store's,\n"
		       "an archive of plain files only, a record that names the publisher,\n"
		       "package and task its place says) and unpacked into\n"
		       "$PBX_HOME/pool/SCHEME/BUCKET/PREFIX/PUBLISHER/PKG/TASK/, then recorded\n"
		       "in the store.  Pulling again moves only what is new.  An object that\n"
		       "fails a check is skipped and counted, and the exit status is 4.\n"
		       "'pbx report --pool URL' reports what was pulled.",
	.args = "URL",
	.options = pull_opts,
	.examples = "pbx pull gs://stats285-f26/hw3\n"
		    "pbx report --pool gs://stats285-f26/hw3 -g lr sweep-demo",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_pull_exec,
};
