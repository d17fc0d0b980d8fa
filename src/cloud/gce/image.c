/*
 * image.c - prebaked images on Compute Engine (struct pbx_image_ops, used
 * by `pbx image build|delete`, src/cluster/image.c): instances.stop of the
 * builder, images.insert from its boot disk (named like the instance:
 * Compute Engine's default for an instance's boot disk), waiting for the
 * global operation and the image's READY status, images.delete.  An image
 * is pbx's when its pbx-image-id label is the build's id; pbx neither
 * waits for, adopts nor deletes one that carries another.
 */
#include "cloud/gce/gce.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/xalloc.h"

#define IMAGE_WAIT_S 1800 /* an image of a large disk takes minutes */

static const long ok_404_409[] = { 404, 409, 0 };

char *gce_source_image(const struct gce *g)
{
	const char *img = g->s->t && g->s->t->image ? g->s->t->image : "";
	if (*img && !strchr(img, '/'))
		return xasprintf("projects/%s/global/images/%s", g->project, img);
	return xstrdup(img);
}

/* Sends a mutation whose operation lives in `scope`; waits for it unless
 * the reply is a status listed in ok (then *status says which). */
static int image_mutate(struct gce *g, const char *method, const char *path, json_t *body,
			const char *scope, long *status, struct pbx_err *err)
{
	json_t *r = NULL;
	struct gce_op o;
	int rc = gce_call(g, method, path, body, ok_404_409, &r, status, err);
	if (rc == 0 && *status >= 200 && *status < 300) {
		rc = gce_op_parse(r, &o, err);
		if (rc == 0)
			rc = gce_wait_op(g, scope, o.name, err);
	}
	json_decref(r);
	return rc;
}

static int gce_image_stop_node(void *ctx, const struct pbx_node_row *node, struct pbx_err *err)
{
	struct gce *g = ctx;
	char *path, *scope;
	long st = 0;
	int rc;
	if (!node->instance_id || !node->zone)
		return pbx_err_set(err, "node %s has no instance to stop", node->name);
	path = xasprintf("projects/%s/zones/%s/instances/%s/stop", g->project, node->zone,
			 node->instance_id);
	scope = xasprintf("zones/%s", node->zone);
	rc = image_mutate(g, "POST", path, NULL, scope, &st, err);
	if (rc == 0 && st == 404)
		rc = pbx_err_set(err, "instance %s is gone", node->instance_id);
	free(path);
	free(scope);
	return rc < 0 ? pbx_err_prefix(err, "stopping %s", node->instance_id) : 0;
}

/* GET the image: 1 and *img when it exists, 0 when not, -1 on error. */
static int image_get(struct gce *g, const char *name, struct gce_image *img, struct pbx_err *err)
{
	char *path = xasprintf("projects/%s/global/images/%s", g->project, name);
	static const long ok_404[] = { 404, 0 };
	json_t *r = NULL;
	long st = 0;
	int rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
	if (rc == 0 && st == 404)
		rc = 0;
	else if (rc == 0)
		rc = gce_image_parse(r, img, err) == 0 ? 1 : -1;
	json_decref(r);
	free(path);
	return rc;
}

/* Waits while image `name` is PENDING; its last state in *img.  Returns as
 * image_get does. */
static int image_settle(struct gce *g, const char *name, struct gce_image *img, struct pbx_err *err)
{
	struct timespec delay = { 1, 0 };
	time_t until = time(NULL) + IMAGE_WAIT_S;
	int rc;
	for (;;) {
		rc = image_get(g, name, img, err);
		if (rc <= 0 || strcmp(img->status, "PENDING") != 0 || g->s->dry_run)
			return rc;
		if (time(NULL) >= until)
			return pbx_err_set(err, "image %s still PENDING after %d s", name,
					   IMAGE_WAIT_S);
		nanosleep(&delay, NULL);
	}
}

/* Refuses an image that is not this build's. */
static int image_mine(const struct gce *g, const struct gce_image *img, const char *uid,
		      struct pbx_err *err)
{
	if (!strcmp(img->owner, uid))
		return 0;
	return pbx_err_setc(err, PBX_EXIT_SECURITY,
			    "image %s in project %s is not this build's "
			    "(its %s label is '%s', this build's id is %s): left alone",
			    img->name, g->project, PBX_LABEL_IMAGE_ID, img->owner, uid);
}

static json_t *image_body(const struct gce *g, const struct pbx_node_row *node, const char *name,
			  const char *uid, const char *description)
{
	char *disk = xasprintf("projects/%s/zones/%s/disks/%s", g->project, node->zone,
			       node->instance_id);
	json_t *b = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}}", "name", name, "sourceDisk", disk,
			      "description", description, "labels", PBX_LABEL_IMAGE, name,
			      PBX_LABEL_IMAGE_ID, uid);
	free(disk);
	return b;
}

static int gce_image_create(void *ctx, const struct pbx_node_row *node, const char *name,
			    const char *uid, const char *description, char **link,
			    struct pbx_err *err)
{
	struct gce *g = ctx;
	char *path = xasprintf("projects/%s/global/images", g->project);
	json_t *body = image_body(g, node, name, uid, description);
	struct gce_image img;
	long st = 0;
	int rc = image_mutate(g, "POST", path, body, "global", &st, err);
	json_decref(body);
	free(path);
	if (rc == 0 && st == 404)
		rc = pbx_err_set(err, "the disk of instance %s is gone", node->instance_id);
	if (rc == 0 && !g->s->dry_run) {
		rc = image_settle(g, name, &img, err);
		if (rc == 0)
			rc = pbx_err_set(err, "image %s was not made", name);
		else if (rc > 0)
			rc = image_mine(g, &img, uid, err);
		if (rc == 0 && strcmp(img.status, "READY") != 0)
			rc = pbx_err_set(err, "image %s is %s, not READY", name, img.status);
	}
	if (rc < 0)
		return pbx_err_prefix(err, "image %s", name);
	*link = xasprintf("projects/%s/global/images/%s", g->project, name);
	return 0;
}

static int gce_image_remove(void *ctx, const char *name, const char *uid, int *existed,
			    struct pbx_err *err)
{
	struct gce *g = ctx;
	struct gce_image img;
	char *path;
	long st = 0;
	int rc = image_settle(g, name, &img, err);
	*existed = rc > 0;
	if (rc <= 0)
		return rc;
	if (image_mine(g, &img, uid, err) < 0)
		return -1;
	path = xasprintf("projects/%s/global/images/%s", g->project, name);
	rc = image_mutate(g, "DELETE", path, NULL, "global", &st, err);
	free(path);
	return rc < 0 ? pbx_err_prefix(err, "deleting image %s", name) : 0;
}

static const char *gce_image_project(void *ctx)
{
	return ((struct gce *)ctx)->project;
}

static const char *gce_image_zone(void *ctx)
{
	const struct gce *g = ctx;
	return g->zone ? g->zone : "";
}

const struct pbx_image_ops gce_image_ops = {
	.stop_node = gce_image_stop_node,
	.create = gce_image_create,
	.remove = gce_image_remove,
	.project = gce_image_project,
	.zone = gce_image_zone,
	.project_key = "clouds.gce.project",
	.name_min = 1,
};
