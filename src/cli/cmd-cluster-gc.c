/*
 * cmd-cluster-gc.c - `pbx cluster gc NAME`: removes what no package on the
 * cluster refers to any more (src/jobs/envgc.c): the run directories of
 * packages this store has forgotten, the staged datasets (data:) and the
 * environments (Python environments, container images) no package names,
 * and their unpacked copies on the compute nodes.  --dry-run says what would go.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "jobs/jobs.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

struct gc_opts {
	int dry, json;
};

static const struct pbx_option gc_opts[] = {
	PBX_OPT_FLAG('n', "dry-run", struct gc_opts, dry, "say what would go; remove nothing"),
	PBX_OPT_FLAG('j', "json", struct gc_opts, json,
		     "print what went (or would) as JSON: gone [{kind, node, id,\n"
		     "bytes}], kept (keys), freed_bytes, busy, young, young_data,\n"
		     "dry_run"),
	PBX_OPT_END,
};

static int cmd_cluster_gc_exec(struct pbx_ctx *ctx, int argc, char **argv);

const struct pbx_cmd pbx_cmd_cluster_gc = {
	.name = "gc",
	.summary = "remove environments, datasets and forgotten packages no package refers to",
	.usage = "pbx cluster gc [--dry-run] [--json] NAME",
	.description =
		"Each environment a package builds (environment: python or container) is\n"
		"kept on the cluster's shared disk, and unpacked on each node that ran one\n"
		"of its tasks, so that a rerun or another package with the same lock starts\n"
		"at once.  This removes those that no package on the cluster refers to any\n"
		"more, with the run directories of the packages this store has forgotten\n"
		"('pbx forget'; not on a cluster of cloud ssh, whose work_dir another\n"
		"machine of yours may use too): forget the packages you are done with, then\n"
		"gc.  A dataset an experiment's data: staged on the cluster goes too once\n"
		"no package's run directory names it (it is staged again by the next\n"
		"parrun that needs it).  A run directory changed in the last hour, a\n"
		"dataset staged or named by a parrun in the last hour or being staged, and\n"
		"an environment being built or unpacked, are left.  On a cluster of cloud\n"
		"ssh the compute nodes' copies in /var/tmp are left to the nodes' own\n"
		"cleaning.",
	.examples = "pbx cluster gc --dry-run mycluster\n"
		    "pbx forget old-sweep && pbx cluster gc mycluster",
	.args = "CLUSTER",
	.options = gc_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE | PBX_NEED_CLUSTER,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_gc_exec,
};

static json_t *gc_json(const struct pbx_env_gc *g)
{
	json_t *o = json_object(), *gone = json_array(), *kept = json_array();
	size_t i;
	for (i = 0; i < g->ngone; i++)
		json_array_append_new(gone,
				      json_pack("{s:s, s:s, s:s, s:I}", "kind", g->gone[i].kind,
						"node", g->gone[i].node, "id", g->gone[i].id,
						"bytes", (json_int_t)g->gone[i].bytes));
	for (i = 0; i < g->nkept; i++)
		json_array_append_new(kept, json_string(g->kept[i]));
	json_object_set_new(o, "gone", gone);
	json_object_set_new(o, "kept", kept);
	json_object_set_new(o, "freed_bytes", json_integer(g->freed));
	json_object_set_new(o, "busy", json_integer(g->busy));
	json_object_set_new(o, "young_data", json_integer(g->young_data + g->busy_data));
	json_object_set_new(o, "young", json_integer(g->young));
	json_object_set_new(o, "dry_run", json_boolean(g->dry));
	return o;
}

static void gc_text(const char *name, const struct pbx_env_gc *g)
{
	static const struct {
		const char *kind, *what;
	} words[] = { { "package", "run directory of forgotten package" },
		      { "env", "environment" },
		      { "local", "unpacked environment" },
		      { "data", "staged dataset" } };
	char size[32];
	size_t i, k;
	for (i = 0; i < g->ngone; i++) {
		const char *what = g->gone[i].kind;
		for (k = 0; k < sizeof(words) / sizeof(words[0]); k++)
			if (!strcmp(words[k].kind, g->gone[i].kind))
				what = words[k].what;
		pbx_format_bytes((unsigned long long)g->gone[i].bytes, size, sizeof(size));
		printf("%s %s %.12s on %s (%s)\n", g->dry ? "would remove" : "removed", what,
		       g->gone[i].id, g->gone[i].node, size);
	}
	pbx_format_bytes((unsigned long long)g->freed, size, sizeof(size));
	pbx_info("%s: %s %s; %zu environment%s in use kept%s", name,
		 g->dry ? "would free" : "freed", size, g->nkept, g->nkept == 1 ? "" : "s",
		 g->busy ? ", some left while a build or unpack holds them" : "");
	if (g->young)
		pbx_info("%d forgotten package%s changed in the last hour, left: gc again later",
			 g->young, g->young == 1 ? "" : "s");
	if (g->young_data || g->busy_data)
		pbx_info("%d dataset%s no package names, staged or named in the last hour or being "
			 "staged, left: gc again later",
			 g->young_data + g->busy_data,
			 g->young_data + g->busy_data == 1 ? "" : "s");
}

static int cmd_cluster_gc_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_env_gc g;
	struct gc_opts o = { 0 };
	int first, rc;
	if ((rc = pbx_opts_parse(&pbx_cmd_cluster_gc, argc, argv, &o, &first)))
		return rc;
	rc = pbx_jobs_env_gc(ctx->store, ctx->cluster, o.dry, &g, &err);
	if (rc < 0)
		return pbx_report(&err);
	if (o.json)
		pbx_print_json(gc_json(&g));
	else
		gc_text(argv[first], &g);
	pbx_env_gc_free(&g);
	return 0;
}
