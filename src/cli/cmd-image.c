/*
 * cmd-image.c - `pbx image build|list|delete`: prebaked images, so that a
 * cluster's nodes skip apt-get at start (src/cluster/image.c).
 *
 * Thin: parses, calls src/cluster, prints.  Progress of build and delete
 * is a display on stderr (one line per stage when not on a terminal,
 * nothing with -q); results on stdout.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/image.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct image_progress {
	struct pbx_progress *p;
	const char *title;
};

static void image_progress_nodes(void *ctx, size_t n, const char *const *names)
{
	struct image_progress *ip = ctx;
	pbx_progress_free(ip->p);
	ip->p = pbx_progress_new(ip->title, n, names);
}

static void image_progress_stage(void *ctx, size_t i, const char *stage)
{
	struct image_progress *ip = ctx;
	pbx_progress_set(ip->p, i, stage);
}

/* -j/--json, the one option of list and build */
struct image_opts {
	int json;
};

/* Parses cmd's options: 0 (json set, *first the first argument) or the
 * usage error's exit code. */
static int image_json_flag(const struct pbx_cmd *cmd, int argc, char **argv, int *json, int *first)
{
	struct image_opts o = { 0 };
	int rc = pbx_opts_parse(cmd, argc, argv, &o, first);
	*json = o.json;
	return rc;
}

static json_t *image_row_json(const struct pbx_image_row *r)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "name",
			 r->name, "id", r->uid, "cloud", r->cloud, "project", r->project, "zone",
			 r->zone, "source_image", r->source_image, "template", r->template_name,
			 "image", r->link, "state", r->state, "detail", r->detail, "created",
			 (json_int_t)r->created, "updated", (json_int_t)r->updated);
}

/* ---------------------------------------------------------------- build */

static const struct pbx_cmd cmd_image_build;

static void image_print_built(const struct pbx_image_row *r, const struct pbx_image_times *t,
			      int json)
{
	if (json) {
		json_t *o = image_row_json(r);
		json_object_set_new(o, "seconds",
				    json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "instance",
					      t->instance, "install", t->install, "stop", t->stop,
					      "image", t->image, "cleanup", t->cleanup, "total",
					      t->total));
		pbx_print_json(o);
		return;
	}
	printf("%s\n", r->link);
	pbx_info("image %s is ready (%.0f s: instance %.0f s, install %.0f s, stop %.0f s, "
		 "image %.0f s, cleanup %.0f s); a template uses it with  image: %s",
		 r->name, t->total, t->instance, t->install, t->stop, t->image, t->cleanup,
		 r->link);
}

static int cmd_image_build_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct image_progress ip = { NULL, NULL };
	struct pbx_cluster_events ev = { image_progress_nodes, image_progress_stage, &ip };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_image_row row;
	struct pbx_image_times times;
	int json, rc, first;
	char *title;
	if ((rc = image_json_flag(&cmd_image_build, argc, argv, &json, &first)))
		return rc;
	title = xasprintf("building image from template %s", argv[first]);
	ip.title = title;
	rc = pbx_image_build(ctx->store, ctx->cfg, argv[first],
			     argc - first == 2 ? argv[first + 1] : NULL, &ev, &row, &times, &err);
	pbx_progress_free(ip.p);
	free(title);
	if (rc < 0)
		return pbx_report(&err);
	image_print_built(&row, &times, json);
	pbx_image_row_free(&row);
	return 0;
}

static const struct pbx_option image_build_opts[] = {
	PBX_OPT_FLAG('j', "json", struct image_opts, json,
		     "print the image as a JSON object, with the seconds each stage took"),
	PBX_OPT_END,
};

static const struct pbx_cmd cmd_image_build = {
	.name = "build",
	.summary = "make an image with SLURM, munge, NFS and pbx-train's runtime installed",
	.usage = "pbx image build [-j] TEMPLATE [NAME]",
	.description = "Starts one instance from TEMPLATE's image (its head machine type),\n"
		       "runs the bootstrap's install phase on it (the packages both the head and\n"
		       "the compute nodes need, and pbx-train's runtime; nothing configured),\n"
		       "stops it, makes image NAME from its disk (default\n"
		       "pbx-TEMPLATE-YYYYMMDD-HHMMSS), waits until the image is ready, deletes\n"
		       "the instance and records the image.  A template then names it, and its\n"
		       "nodes skip apt-get at start: on Compute Engine as\n"
		       "projects/P/global/images/NAME, or just NAME for an image of\n"
		       "clouds.gce.project; on EC2 by the AMI id (ami-...) that the build prints\n"
		       "(CreateImage, in clouds.aws.region; NAME is the AMI's name).\n"
		       "\n"
		       "The instance and the image carry the labels (EC2: tags; the AMI's EBS\n"
		       "snapshot too) pbx-cluster=pbx-image, pbx-cluster-id and pbx-image-id\n"
		       "(the build's id) and pbx-image=NAME; the record is written before\n"
		       "anything is made, so a build that was killed is cleaned up by\n"
		       "'pbx image delete NAME' or by building NAME again.  A NAME recorded as\n"
		       "ready is refused (exit 2); an image of that name that carries another\n"
		       "build's id is left alone (exit 4).",
	.args = "TEMPLATE",
	.options = image_build_opts,
	.examples = "pbx image build gce-gpu\n"
		    "pbx image build gce-gpu slurm-base-1\n"
		    "pbx image build aws-gpu slurm-base-1",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 2,
	.exec = cmd_image_build_exec,
};

/* ----------------------------------------------------------------- list */

static const struct pbx_cmd cmd_image_list;

static void image_print_table(const struct pbx_image_row *rows, size_t n)
{
	static const char *const hdr[] = { "NAME",  "CLOUD",   "PROJECT",
					   "STATE", "CREATED", "SOURCE IMAGE" };
	struct pbx_table *t = pbx_table_new(6, hdr);
	size_t i;
	for (i = 0; i < n; i++) {
		char when[32];
		const char *cells[6] = { rows[i].name,  rows[i].cloud, rows[i].project,
					 rows[i].state, when,          rows[i].source_image };
		pbx_format_time(rows[i].created, when, sizeof(when));
		pbx_table_add(t, cells);
	}
	pbx_table_print(t);
}

static int cmd_image_list_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_image_row *rows;
	size_t n, i;
	int json, rc, first;
	if ((rc = image_json_flag(&cmd_image_list, argc, argv, &json, &first)))
		return rc;
	if (pbx_store_image_list(ctx->store, 0, &rows, &n, &err) < 0)
		return pbx_report(&err);
	if (json) {
		json_t *a = json_array();
		for (i = 0; i < n; i++)
			json_array_append_new(a, image_row_json(&rows[i]));
		pbx_print_json(a);
	} else {
		image_print_table(rows, n);
	}
	pbx_image_rows_free(rows, n);
	return 0;
}

static const struct pbx_option image_list_opts[] = {
	PBX_OPT_FLAG('j', "json", struct image_opts, json,
		     "print a JSON array of {name, id, cloud, project, zone, source_image,\n"
		     "template, image, state, detail, created, updated}"),
	PBX_OPT_END,
};

static const struct pbx_cmd cmd_image_list = {
	.name = "list",
	.summary = "list the images pbx built",
	.usage = "pbx image list [-j]",
	.description = "Images from the store, with their state: building (a build under way,\n"
		       "or killed: 'pbx image delete NAME' cleans up), ready, failed (detail\n"
		       "says why).",
	.options = image_list_opts,
	.flags = PBX_NEED_STORE,
	.min_args = 0,
	.max_args = 0,
	.exec = cmd_image_list_exec,
};

/* --------------------------------------------------------------- delete */

static int cmd_image_delete_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	static const char *const names[] = { "image" };
	struct image_progress ip = { NULL, NULL };
	struct pbx_cluster_events ev = { image_progress_nodes, image_progress_stage, &ip };
	struct pbx_err err = PBX_ERR_INIT;
	char *title;
	int rc;
	(void)argc;
	title = xasprintf("deleting image %s", argv[1]);
	ip.title = title;
	image_progress_nodes(&ip, 1, names);
	rc = pbx_image_delete(ctx->store, ctx->cfg, argv[1], &ev, &err);
	pbx_progress_free(ip.p);
	free(title);
	if (rc < 0)
		return pbx_report(&err);
	pbx_info("image %s deleted, with anything its build left", argv[1]);
	return 0;
}

static const struct pbx_cmd cmd_image_delete = {
	.name = "delete",
	.summary = "delete an image, or clean up after a build that failed or was killed",
	.usage = "pbx image delete NAME",
	.description = "Deletes what a build of NAME left (its instance and firewall rules,\n"
		       "or security group and key pair, found by the build's labels) and the\n"
		       "cloud image if it carries the build's id (an image of that name that\n"
		       "does not is left alone, exit 4), then marks the record deleted.  On EC2\n"
		       "the AMI is deregistered and its EBS snapshots deleted (a deregistered\n"
		       "AMI's snapshots are kept, and billed, until deleted), with any snapshot\n"
		       "tagged with the build's id.  An unknown NAME is exit 3.",
	.args = "IMAGE",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_image_delete_exec,
};

/* ---------------------------------------------------------------- group */

static const struct pbx_cmd *const cmd_image_subcmds[] = {
	&cmd_image_build,
	&cmd_image_list,
	&cmd_image_delete,
	NULL,
};

const struct pbx_cmd pbx_cmd_image = {
	.name = "image",
	.summary = "prebaked images: nodes that skip apt-get at start",
	.description = "A fresh cloud node installs SLURM, munge and NFS with apt-get when\n"
		       "it is bootstrapped: minutes per node.  'pbx image build' installs them\n"
		       "once into an image; a template that names the image starts nodes whose\n"
		       "bootstrap finds everything installed.  Compute Engine (images) and EC2\n"
		       "(AMIs).",
	.examples = "pbx image build gce-gpu base-1\n"
		    "pbx image list\n"
		    "pbx image delete base-1",
	.subcmds = cmd_image_subcmds,
};
