/*
 * cmd-publish.c - `pbx publish PKG URL`: the harvested results of each
 * ended task of a package, one object per task with its provenance, into
 * a pool that many users share (gs://BUCKET/PREFIX or s3://BUCKET/PREFIX),
 * under the publisher's name.  The work is in src/pool (pool.h);
 * docs/pooling.md is the guide for a class.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "config/config.h"
#include "pool/pool.h"
#include "util/xalloc.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const struct pbx_cmd pbx_cmd_publish;

struct publish_args {
	const char *as;
	int json;
};

static const struct pbx_option publish_opts[] = {
	PBX_OPT_STRING(0, "as", "NAME", struct publish_args, as,
		       "publish under NAME (default: 'publisher:' in the configuration,\n"
		       "else your login name)"),
	PBX_OPT_FLAG('j', "json", struct publish_args, json, "print the counts as JSON"),
	PBX_OPT_END,
};

/* --as, the configuration's publisher, else the login name. */
static char *publisher_name(const struct pbx_ctx *ctx, const struct publish_args *a)
{
	const struct passwd *pw;
	if (a->as)
		return xstrdup(a->as);
	if (ctx->cfg && ctx->cfg->publisher)
		return xstrdup(ctx->cfg->publisher);
	pw = getpwuid(getuid());
	return xstrdup(pw && pw->pw_name ? pw->pw_name : "unknown");
}

static void publish_progress(void *ctx, size_t done, size_t total, uint64_t bytes)
{
	(void)ctx;
	pbx_transfer_progress("publishing", done, total, bytes);
}

static void publish_print(const struct publish_args *a, const char *who, const char *url,
			  const struct pbx_publish_stats *s)
{
	if (a->json) {
		pbx_print_json(json_pack(
			"{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "pool", url, "publisher",
			who, "tasks", (json_int_t)s->tasks, "uploaded", (json_int_t)s->uploaded,
			"already", (json_int_t)s->already, "not_ended", (json_int_t)s->not_ended,
			"not_home", (json_int_t)s->not_home, "bytes", (json_int_t)s->bytes,
			"identity", s->identity));
		return;
	}
	printf("published %zu task%s as %s to %s (%.1f MB); %zu already there\n", s->uploaded,
	       s->uploaded == 1 ? "" : "s", who, url, (double)s->bytes / 1e6, s->already);
	if (s->not_ended)
		pbx_info("%zu task%s not ended (as last seen: 'pbx state' looks again): not "
			 "published",
			 s->not_ended, s->not_ended == 1 ? "" : "s");
	if (s->not_home)
		pbx_info("%zu ended task%s not harvested: 'pbx harvest' brings them home, then "
			 "publish again",
			 s->not_home, s->not_home == 1 ? "" : "s");
}

static int cmd_publish_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct publish_args a = { 0 };
	struct pbx_publish_opts o;
	struct pbx_publish_stats s;
	struct pbx_err err = PBX_ERR_INIT;
	char *who;
	int first, rc;
	if ((rc = pbx_opts_parse(&pbx_cmd_publish, argc, argv, &a, &first)))
		return rc;
	who = publisher_name(ctx, &a);
	memset(&o, 0, sizeof(o));
	o.url = argv[first + 1];
	o.publisher = who;
	o.progress = publish_progress;
	rc = pbx_pool_publish(ctx->store, ctx->cfg, argv[first], &o, &s, &err);
	if (rc == 0)
		publish_print(&a, who, argv[first + 1], &s);
	else
		rc = pbx_report(&err);
	free(who);
	return rc;
}

const struct pbx_cmd pbx_cmd_publish = {
	.name = "publish",
	.summary = "upload an experiment's results to a pool that others pull from",
	.usage = "pbx publish [--as NAME] [--json] PKG URL",
	.description = "Uploads the results of package PKG (an id prefix or an experiment\n"
		       "name; its newest submission) to the pool URL, gs://BUCKET/PREFIX or\n"
		       "s3://BUCKET/PREFIX: each ended task whose results are home ('pbx\n"
		       "harvest') becomes ONE object, PREFIX/NAME/PKG/TASK.tar.gz, holding its\n"
		       "files under results/ and pbx-task.json, its provenance: publisher,\n"
		       "package id, experiment (and its file), parameters, state, times,\n"
		       "commit and a hash of the uncommitted diff, cluster and cloud, the\n"
		       "environment, cost when known, the pbx version and every metric point.\n"
		       "\n"
		       "Objects are only ever created, never overwritten: publishing again\n"
		       "uploads only tasks not there yet.  The name NAME is claimed with\n"
		       "PREFIX/NAME/publisher.json the first time; a name someone else holds\n"
		       "is refused (exit 4).  Credentials are the cloud's own (clouds.gce:\n"
		       "key file, application default credentials; clouds.aws: the\n"
		       "environment, profiles); endpoints clouds.gce.storage_endpoint and\n"
		       "clouds.aws.s3_endpoint.  See docs/pooling.md for a class's set-up.",
	.args = "PKG URL",
	.options = publish_opts,
	.examples = "pbx harvest sweep-demo && pbx publish sweep-demo gs://stats285-f26/hw3\n"
		    "pbx publish --as team7 3f2a9c0d1e2b s3://stats285-f26/hw3",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 2,
	.max_args = 2,
	.exec = cmd_publish_exec,
};
