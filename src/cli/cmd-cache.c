/*
 * cmd-cache.c - `pbx cache`: this machine's download cache of staged data
 * ($PBX_HOME/data, src/jobs/datacache.h): `ls` says what each source
 * keeps and when a staging last used it, `rm` removes the caches named,
 * every one (--all) or those unused for a while (--older-than), leaving
 * any a staging holds.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "jobs/datacache.h"
#include "util/duration.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const struct pbx_cmd pbx_cmd_cache_ls, pbx_cmd_cache_rm;

/* ------------------------------------------------------------ cache ls */

struct ls_opts {
	int json;
};

static const struct pbx_option cache_ls_opts[] = {
	PBX_OPT_FLAG('j', "json", struct ls_opts, json,
		     "print {dir, caches: [{id, source, objects, bytes, shared_bytes,\n"
		     "used (Unix time), busy}], bytes, shared_bytes}"),
	PBX_OPT_END,
};

static json_t *cache_json(const struct pbx_data_cache *e)
{
	return json_pack("{s:s, s:s?, s:I, s:I, s:I, s:I, s:b}", "id", e->id, "source", e->key,
			 "objects", (json_int_t)e->files, "bytes", (json_int_t)e->bytes,
			 "shared_bytes", (json_int_t)e->shared, "used", (json_int_t)e->used, "busy",
			 e->busy);
}

static void cache_ls_json(const struct pbx_data_cache *v, size_t n)
{
	json_t *o = json_object(), *a = json_array();
	uint64_t bytes = 0, shared = 0;
	char *dir = pbx_home_path("data");
	size_t i;
	for (i = 0; i < n; i++) {
		json_array_append_new(a, cache_json(&v[i]));
		bytes += v[i].bytes;
		shared += v[i].shared;
	}
	json_object_set_new(o, "dir", json_string(dir));
	json_object_set_new(o, "caches", a);
	json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
	json_object_set_new(o, "shared_bytes", json_integer((json_int_t)shared));
	pbx_print_json(o);
	free(dir);
}

static void cache_ls_text(const struct pbx_data_cache *v, size_t n)
{
	static const char *const head[] = { "SOURCE", "OBJECTS", "SIZE", "LAST USED", "ID" };
	struct pbx_table *t = pbx_table_new(5, head);
	uint64_t bytes = 0, shared = 0;
	char *dir = pbx_home_path("data");
	char objects[32], size[32], used[48], all[32], linked[32];
	size_t i;
	for (i = 0; i < n; i++) {
		const char *row[5] = { v[i].key ? v[i].key : "?", objects, size, used, v[i].id };
		snprintf(objects, sizeof(objects), "%zu", v[i].files);
		pbx_format_bytes(v[i].bytes, size, sizeof(size));
		pbx_format_time((int64_t)v[i].used, used, sizeof(used));
		if (v[i].busy)
			strcat(used, " (staging now)");
		pbx_table_add(t, row);
		bytes += v[i].bytes;
		shared += v[i].shared;
	}
	pbx_table_print(t);
	pbx_format_bytes(bytes, all, sizeof(all));
	pbx_format_bytes(shared, linked, sizeof(linked));
	if (shared)
		pbx_info("%s in %s; %s of it is also a local cluster's staged data (the same "
			 "files): removing the cache frees that part only once the cluster's "
			 "copy goes too",
			 all, dir, linked);
	else
		pbx_info("%s in %s", all, dir);
	free(dir);
}

static int cmd_cache_ls_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_data_cache *v;
	struct ls_opts o = { 0 };
	size_t n;
	int first, rc;
	(void)ctx;
	if ((rc = pbx_opts_parse(&pbx_cmd_cache_ls, argc, argv, &o, &first)))
		return rc;
	if (pbx_data_cache_list(&v, &n, &err) < 0)
		return pbx_report(&err);
	if (o.json)
		cache_ls_json(v, n);
	else if (n)
		cache_ls_text(v, n);
	else
		pbx_info("no staged data is cached on this machine");
	pbx_data_cache_list_free(v, n);
	return 0;
}

const struct pbx_cmd pbx_cmd_cache_ls = {
	.name = "ls",
	.summary = "list the download cache: each data source, its size, its last use",
	.usage = "pbx cache ls [--json]",
	.description = "Lists what the download cache keeps for each data: source an experiment\n"
		       "staged from this machine (docs/data.md, \"The download cache\"): the\n"
		       "source, the objects kept and the disk they use, and when a staging last\n"
		       "took it (\"staging now\" while one does).  The last line gives the total,\n"
		       "and how much of it a local cluster's staged data shares (its files are\n"
		       "the cache's: removing the cache does not free those bytes until the\n"
		       "cluster's copy goes too).",
	.examples = "pbx cache ls\npbx cache ls --json",
	.options = cache_ls_opts,
	.min_args = 0,
	.max_args = 0,
	.exec = cmd_cache_ls_exec,
};

/* ------------------------------------------------------------ cache rm */

struct rm_opts {
	int all, dry, json;
	const char *older;
};

static const struct pbx_option cache_rm_opts[] = {
	PBX_OPT_FLAG('a', "all", struct rm_opts, all, "every source's cache"),
	PBX_OPT_STRING(0, "older-than", "DURATION", struct rm_opts, older,
		       "only caches no staging used for DURATION (\"30d\", \"12h\"): of\n"
		       "those named, or of all when none is"),
	PBX_OPT_FLAG('n', "dry-run", struct rm_opts, dry, "say what would go; remove nothing"),
	PBX_OPT_FLAG('j', "json", struct rm_opts, json,
		     "print {gone: [{id, source, bytes}], busy: [ids], freed_bytes,\n"
		     "dry_run}"),
	PBX_OPT_END,
};

/* The entries argv[first, argc) name (every one when none), in *pick. */
static int rm_pick(const struct pbx_data_cache *v, size_t n, int argc, char **argv, int first,
		   char *pick)
{
	struct pbx_err err = PBX_ERR_INIT;
	char id[17];
	size_t i;
	int a;
	memset(pick, first >= argc, n);
	for (a = first; a < argc; a++) {
		if (pbx_data_cache_resolve(argv[a], v, n, id, &err) < 0)
			return err.code == PBX_EXIT_USAGE
				       ? pbx_usage_error(&pbx_cmd_cache_rm, "%s", err.msg)
				       : pbx_report(&err);
		for (i = 0; i < n && strcmp(v[i].id, id); i++)
			;
		if (i == n) {
			pbx_error("%s is not cached on this machine (id %s; 'pbx cache ls' lists "
				  "what is)",
				  argv[a], id);
			return PBX_EXIT_NOTFOUND;
		}
		pick[i] = 1;
	}
	return 0;
}

static int cache_rm_one(const struct pbx_data_cache *e, int dry, json_t *gone, json_t *busy,
			uint64_t *freed)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *what = e->key ? e->key : e->id;
	uint64_t frees = e->bytes - e->shared;
	char size[32], kept[32];
	int rc = dry ? (e->busy ? 1 : 0) : pbx_data_cache_remove(e->id, &err);
	if (rc < 0)
		return pbx_report(&err);
	if (rc == 1) {
		json_array_append_new(busy, json_string(e->id));
		pbx_warning("%s: left, a staging holds it now", what);
		return PBX_EXIT_FAIL;
	}
	*freed += frees;
	json_array_append_new(gone, json_pack("{s:s, s:s?, s:I}", "id", e->id, "source", e->key,
					      "bytes", (json_int_t)frees));
	pbx_format_bytes(frees, size, sizeof(size));
	pbx_format_bytes(e->shared, kept, sizeof(kept));
	if (e->shared)
		pbx_info("%s %s (%s; %s stay in a local cluster's staged copy until it goes)",
			 dry ? "would remove" : "removed", what, size, kept);
	else
		pbx_info("%s %s (%s)", dry ? "would remove" : "removed", what, size);
	return 0;
}

static int cmd_cache_rm_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_data_cache *v;
	struct rm_opts o = { 0 };
	json_t *gone = json_array(), *busy = json_array(), *j;
	uint64_t freed = 0;
	long older = 0;
	char *pick = NULL, size[32];
	size_t n = 0, i;
	int first, rc, failed = 0;
	(void)ctx;
	if ((rc = pbx_opts_parse(&pbx_cmd_cache_rm, argc, argv, &o, &first)))
		goto out;
	if (o.older && pbx_duration_parse(o.older, 100L * 366 * 86400, &older) < 0) {
		rc = pbx_usage_error(&pbx_cmd_cache_rm,
				     "--older-than: '%s' is not a duration (\"30d\", \"12h\")",
				     o.older);
		goto out;
	}
	if ((first == argc && !o.all && !o.older) || (first < argc && o.all)) {
		rc = pbx_usage_error(&pbx_cmd_cache_rm,
				     "name the sources, or give --all or --older-than");
		goto out;
	}
	if (pbx_data_cache_list(&v, &n, &err) < 0) {
		rc = pbx_report(&err);
		goto out;
	}
	pick = xcalloc(n ? n : 1, 1);
	rc = rm_pick(v, n, argc, argv, first, pick);
	for (i = 0; rc == 0 && i < n; i++) {
		if (!pick[i] || (o.older && v[i].used > time(NULL) - older))
			continue;
		rc = cache_rm_one(&v[i], o.dry, gone, busy, &freed);
		if (rc == PBX_EXIT_FAIL) { /* busy: the others still go */
			failed = rc;
			rc = 0;
		}
	}
	pbx_data_cache_list_free(v, n);
	if (rc == 0 && o.json) {
		j = json_pack("{s:O, s:O, s:I, s:b}", "gone", gone, "busy", busy, "freed_bytes",
			      (json_int_t)freed, "dry_run", o.dry);
		pbx_print_json(j);
	} else if (rc == 0) {
		pbx_format_bytes(freed, size, sizeof(size));
		pbx_info("%s %s", o.dry ? "would free" : "freed", size);
	}
	if (rc == 0)
		rc = failed;
out:
	free(pick);
	json_decref(gone);
	json_decref(busy);
	return rc;
}

const struct pbx_cmd pbx_cmd_cache_rm = {
	.name = "rm",
	.summary = "remove data sources' caches from this machine",
	.usage = "pbx cache rm [--dry-run] [--json] [--older-than DURATION] SOURCE...\n"
		 "pbx cache rm [--dry-run] [--json] (--all | --older-than DURATION)",
	.description = "Removes the download cache of each SOURCE: a gs:// or s3:// URL as the\n"
		       "experiment names it, a local directory, or a source or id (or its first\n"
		       "4 digits or more) as 'pbx cache ls' shows it.  --all removes every one,\n"
		       "--older-than those no staging used for that long.  Nothing on a cluster\n"
		       "changes: the next staging of a removed source to a cluster that already\n"
		       "has it lists it and moves nothing; to one that does not, it downloads it\n"
		       "again.  A cache a staging holds now is left (exit status 1, after the\n"
		       "others).\n"
		       "The bytes a local cluster's staged data shares with the cache are freed\n"
		       "only when that copy goes too (pbx cluster gc, pbx cluster stop).",
	.examples = "pbx cache rm gs://my-bucket/fashion-mnist/\n"
		    "pbx cache rm --older-than 30d\n"
		    "pbx cache rm --all --dry-run",
	.options = cache_rm_opts,
	.min_args = 0,
	.max_args = PBX_ARGS_MANY,
	.exec = cmd_cache_rm_exec,
};

/* --------------------------------------------------------------- cache */

static const struct pbx_cmd *const cmd_cache_subcmds[] = {
	&pbx_cmd_cache_ls,
	&pbx_cmd_cache_rm,
	NULL,
};

const struct pbx_cmd pbx_cmd_cache = {
	.name = "cache",
	.summary = "list and remove this machine's download cache of staged data",
	.description = "Each data: source an experiment stages from this machine is downloaded\n"
		       "once into $PBX_HOME/data, so that staging it to another cluster, or again\n"
		       "after a failure, reads only what changed.  'pbx cache ls' says what it\n"
		       "holds, 'pbx cache rm' frees it; data_cache_max in config.yaml bounds it\n"
		       "(the least recently used go after each staging).",
	.examples = "pbx cache ls\n"
		    "pbx cache rm --older-than 30d",
	.subcmds = cmd_cache_subcmds,
};
