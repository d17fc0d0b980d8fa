/*
 * image.c - prebaked images on EC2 (struct pbx_image_ops, used by `pbx
 * image build|delete`, src/cluster/image.c): StopInstances of the builder
 * until DescribeInstances says `stopped`, CreateImage from it (the AMI and
 * its EBS snapshots tagged pbx-image=NAME and pbx-image-id=ID) until
 * DescribeImages says `available`, and DeregisterImage followed by
 * DeleteSnapshot of every snapshot behind the AMI (a deregistered AMI's
 * snapshots stay, and are billed, until deleted).  An AMI is pbx's when
 * its pbx-image-id tag is the build's id; pbx neither waits for, adopts
 * nor deletes one that carries another.  Images are found by name among
 * the account's own (Owner self): EC2 keeps AMI names unique per account
 * and region.  A template names the image by its AMI id.
 */
#include "cloud/aws/aws.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/xalloc.h"

#define IMAGE_WAIT_S 1800 /* an AMI of a large volume takes many minutes */
#define STOP_WAIT_S  600
#define SEEN_GRACE_S 60 /* DescribeImages may not list a new AMI at once */
#define POLL_BASE_MS 250
#define POLL_CAP_MS  5000

/* ------------------------------------------------------------- helpers */

/* Sleeps before poll `attempt` (1, 2, ...): the HTTP layer's exponential
 * backoff with full jitter, from POLL_BASE_MS up to POLL_CAP_MS, never
 * less than POLL_BASE_MS. */
static void image_pause(int attempt)
{
	unsigned char b[4];
	double rnd = 0.5;
	long ms;
	struct timespec d;
	if (RAND_bytes(b, sizeof(b)) == 1)
		rnd = (double)((unsigned)b[0] << 16 | (unsigned)b[1] << 8 | b[2]) / 16777216.0;
	ms = POLL_BASE_MS + pbx_http_backoff_ms(attempt, POLL_BASE_MS, POLL_CAP_MS, rnd);
	d.tv_sec = ms / 1000;
	d.tv_nsec = (ms % 1000) * 1000000L;
	nanosleep(&d, NULL);
}

/* One call whose reply may be wanted (reply may be NULL); an error whose
 * code is in ok (NULL-terminated, may be NULL) is success with *hit = 1. */
static int image_call(struct aws *a, const char *action, struct aws_params *p,
		      const char *const *ok, int *hit, struct pbx_buf *reply, struct pbx_err *err)
{
	struct pbx_buf r = PBX_BUF_INIT;
	char code[64] = "";
	int rc = aws_call(a, action, p, reply ? reply : &r, code, err);
	if (hit)
		*hit = 0;
	for (; rc < 0 && ok && *ok; ok++)
		if (!strcmp(code, *ok)) {
			pbx_err_clear(err);
			rc = 0;
			if (hit)
				*hit = 1;
		}
	pbx_buf_release(&r);
	aws_params_free(p);
	return rc;
}

/* TagSpecification.N of resource type `type`: pbx-image=NAME and
 * pbx-image-id=UID. */
static void image_tags(struct aws_params *p, int n, const char *type, const char *name,
		       const char *uid)
{
	char k[64];
	snprintf(k, sizeof(k), "TagSpecification.%d.ResourceType", n);
	aws_param(p, k, "%s", type);
	snprintf(k, sizeof(k), "TagSpecification.%d.Tag.1.Key", n);
	aws_param(p, k, "%s", PBX_LABEL_IMAGE);
	snprintf(k, sizeof(k), "TagSpecification.%d.Tag.1.Value", n);
	aws_param(p, k, "%s", name);
	snprintf(k, sizeof(k), "TagSpecification.%d.Tag.2.Key", n);
	aws_param(p, k, "%s", PBX_LABEL_IMAGE_ID);
	snprintf(k, sizeof(k), "TagSpecification.%d.Tag.2.Value", n);
	aws_param(p, k, "%s", uid);
}

/* ---------------------------------------------------------------- stop */

/* The state of instance `id`: 1 with *state (caller frees), 0 when EC2
 * does not know it, -1 on error. */
static int instance_state(struct aws *a, const char *id, char **state, struct pbx_err *err)
{
	static const char *const nf[] = { "InvalidInstanceID.NotFound", NULL };
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	struct pbx_instance *v = NULL;
	char *next = NULL;
	size_t n = 0;
	int gone = 0;
	int rc;
	*state = NULL;
	aws_param(&p, "InstanceId.1", "%s", id);
	rc = image_call(a, "DescribeInstances", &p, nf, &gone, &r, err);
	if (rc == 0 && !gone)
		rc = aws_insts_parse(r.buf, r.len, &v, &n, &next, err);
	if (rc == 0 && n == 1 && !strcmp(v[0].id, id)) {
		*state = xstrdup(v[0].state);
		rc = 1;
	}
	free(next);
	pbx_instances_free(v, n);
	pbx_buf_release(&r);
	return rc;
}

static int aws_image_stop_node(void *ctx, const struct pbx_node_row *node, struct pbx_err *err)
{
	struct aws *a = ctx;
	struct aws_params p = { 0 };
	time_t until = time(NULL) + STOP_WAIT_S;
	char *state = NULL;
	int rc, attempt = 0;
	if (!node->instance_id || !*node->instance_id)
		return pbx_err_set(err, "node %s has no instance to stop", node->name);
	aws_param(&p, "InstanceId.1", "%s", node->instance_id);
	rc = image_call(a, "StopInstances", &p, NULL, NULL, NULL, err);
	while (rc == 0 && !a->s->dry_run) {
		free(state);
		rc = instance_state(a, node->instance_id, &state, err);
		if (rc == 0)
			rc = pbx_err_set(err, "instance %s is gone", node->instance_id);
		if (rc < 0 || !strcmp(state, "stopped"))
			break;
		if (!strcmp(state, "terminated") || !strcmp(state, "shutting-down"))
			rc = pbx_err_set(err, "instance %s is %s", node->instance_id, state);
		else if (time(NULL) >= until)
			rc = pbx_err_set(err, "instance %s is still %s after %d s",
					 node->instance_id, state, STOP_WAIT_S);
		else
			image_pause(++attempt);
	}
	free(state);
	return rc < 0 ? pbx_err_prefix(err, "stopping %s", node->instance_id) : 0;
}

/* -------------------------------------------------------------- images */

/* The account's image named `name`: 1 with *img (aws_images_free(img, 1))
 * when there is one, 0 when not, -1 on error. */
static int image_find(struct aws *a, const char *name, struct aws_image **img, struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	struct aws_image *v = NULL;
	size_t n = 0, i;
	int rc;
	*img = NULL;
	aws_param(&p, "Owner.1", "self");
	aws_param(&p, "Filter.1.Name", "name");
	aws_param(&p, "Filter.1.Value.1", "%s", name);
	rc = image_call(a, "DescribeImages", &p, NULL, NULL, &r, err);
	if (rc == 0 && !a->s->dry_run)
		rc = aws_images_parse(r.buf, r.len, &v, &n, err);
	pbx_buf_release(&r);
	for (i = 0; rc == 0 && i < n; i++)
		if (!strcmp(v[i].name, name))
			break;
	if (rc < 0 || i >= n) {
		aws_images_free(v, n);
		return rc;
	}
	*img = xcalloc(1, sizeof(**img));
	**img = v[i];
	memset(&v[i], 0, sizeof(v[i]));
	aws_images_free(v, n);
	return 1;
}

/* Waits while image `name` is pending (or, for a `grace` of seconds after
 * CreateImage, not listed yet); its last state in *img.  Returns as
 * image_find does. */
static int image_settle(struct aws *a, const char *name, int grace, struct aws_image **img,
			struct pbx_err *err)
{
	time_t start = time(NULL);
	int attempt = 0;
	for (;;) {
		int rc = image_find(a, name, img, err);
		if (rc < 0 || a->s->dry_run)
			return rc;
		if (rc > 0 && strcmp((*img)->state, "pending") != 0)
			return 1;
		if (rc == 0 && time(NULL) >= start + grace)
			return 0;
		if (time(NULL) >= start + IMAGE_WAIT_S) {
			aws_images_free(*img, 1);
			*img = NULL;
			return pbx_err_set(err, "image %s still pending after %d s", name,
					   IMAGE_WAIT_S);
		}
		aws_images_free(*img, rc);
		*img = NULL;
		image_pause(++attempt);
	}
}

/* Refuses an image that is not this build's. */
static int image_mine(const struct aws *a, const struct aws_image *img, const char *uid,
		      struct pbx_err *err)
{
	if (!strcmp(img->owner, uid))
		return 0;
	return pbx_err_setc(err, PBX_EXIT_SECURITY,
			    "image %s (%s) in region %s is not this "
			    "build's (its %s tag is '%.64s', this build's id is %s): left alone",
			    img->name, img->id, a->region, PBX_LABEL_IMAGE_ID, img->owner, uid);
}

/* CreateImage of node's instance; a name taken meanwhile (a rerun, or
 * someone else) is left to the caller's look at it. */
static int image_make(struct aws *a, const struct pbx_node_row *node, const char *name,
		      const char *uid, const char *description, struct pbx_err *err)
{
	static const char *const dup[] = { "InvalidAMIName.Duplicate", NULL };
	struct aws_params p = { 0 };
	if (!node->instance_id || !*node->instance_id)
		return pbx_err_set(err, "node %s has no instance to image", node->name);
	aws_param(&p, "InstanceId", "%s", node->instance_id);
	aws_param(&p, "Name", "%s", name);
	aws_param(&p, "Description", "%s", description);
	image_tags(&p, 1, "image", name, uid);
	image_tags(&p, 2, "snapshot", name, uid);
	return image_call(a, "CreateImage", &p, dup, NULL, NULL, err);
}

static int aws_image_create(void *ctx, const struct pbx_node_row *node, const char *name,
			    const char *uid, const char *description, char **link,
			    struct pbx_err *err)
{
	struct aws *a = ctx;
	struct aws_image *img = NULL;
	int rc = image_find(a, name, &img, err);
	if (rc > 0)
		rc = image_mine(a, img, uid, err); /* a rerun waits for its own */
	else if (rc == 0)
		rc = image_make(a, node, name, uid, description, err);
	aws_images_free(img, img ? 1 : 0);
	img = NULL;
	if (rc == 0 && a->s->dry_run) {
		*link = xstrdup("ami-dry-run");
		return 0;
	}
	if (rc == 0) {
		rc = image_settle(a, name, SEEN_GRACE_S, &img, err);
		if (rc == 0)
			rc = pbx_err_set(err, "image %s was not made", name);
		else if (rc > 0)
			rc = image_mine(a, img, uid, err);
	}
	if (rc == 0 && !strcmp(img->state, "failed"))
		rc = pbx_err_set(err, "image %s (%s) failed: %.300s", name, img->id,
				 img->reason ? img->reason : "EC2 gave no reason");
	else if (rc == 0 && strcmp(img->state, "available") != 0)
		rc = pbx_err_set(err, "image %s (%s) is %s, not available", name, img->id,
				 img->state);
	if (rc == 0)
		*link = xstrdup(img->id);
	aws_images_free(img, img ? 1 : 0);
	return rc < 0 ? pbx_err_prefix(err, "image %s", name) : 0;
}

/* ------------------------------------------------------------- remove */

/* DeleteSnapshot of each of v[0..n); one already gone is done, one still
 * in use by the AMI just deregistered is retried for a while. */
static int snapshots_delete(struct aws *a, char *const *v, size_t n, struct pbx_err *err)
{
	static const char *const gone[] = { "InvalidSnapshot.NotFound", NULL };
	size_t i;
	for (i = 0; i < n; i++) {
		time_t until = time(NULL) + STOP_WAIT_S;
		int attempt = 0;
		for (;;) {
			struct aws_params p = { 0 };
			char code[64] = "";
			struct pbx_buf r = PBX_BUF_INIT;
			int rc;
			aws_param(&p, "SnapshotId", "%s", v[i]);
			rc = aws_call(a, "DeleteSnapshot", &p, &r, code, err);
			aws_params_free(&p);
			pbx_buf_release(&r);
			if (rc < 0 && !strcmp(code, gone[0]))
				rc = 0;
			if (rc == 0) {
				pbx_err_clear(err);
				break;
			}
			if (strcmp(code, "InvalidSnapshot.InUse") != 0 || time(NULL) >= until)
				return pbx_err_prefix(err, "deleting snapshot %s", v[i]);
			pbx_err_clear(err);
			image_pause(++attempt);
		}
	}
	return 0;
}

/* The account's snapshots tagged pbx-image-id=UID (what a CreateImage of
 * this build made: left behind when a delete was killed between
 * DeregisterImage and DeleteSnapshot), appended to *v. */
static int snapshots_tagged(struct aws *a, const char *uid, char ***v, size_t *n,
			    struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	char **ids = NULL;
	size_t nids = 0, i;
	int rc;
	aws_param(&p, "Owner.1", "self");
	aws_param(&p, "Filter.1.Name", "tag:%s", PBX_LABEL_IMAGE_ID);
	aws_param(&p, "Filter.1.Value.1", "%s", uid);
	rc = image_call(a, "DescribeSnapshots", &p, NULL, NULL, &r, err);
	if (rc == 0 && !a->s->dry_run &&
	    aws_xml_texts(r.buf, r.len, "snapshotSet", "snapshotId", &ids, &nids) < 0)
		rc = pbx_err_set(err, "EC2 DescribeSnapshots: the reply is not XML");
	for (i = 0; i < nids; i++) {
		int known = 0;
		size_t k;
		for (k = 0; k < *n; k++)
			known |= !strcmp((*v)[k], ids[i]);
		if (rc == 0 && !known && !strncmp(ids[i], "snap-", 5)) {
			*v = xreallocarray(*v, *n + 1, sizeof(**v));
			(*v)[(*n)++] = ids[i];
		} else {
			free(ids[i]);
		}
	}
	free(ids);
	pbx_buf_release(&r);
	return rc;
}

/* DeregisterImage of img, then waits until the name is free. */
static int image_deregister(struct aws *a, const struct aws_image *img, struct pbx_err *err)
{
	static const char *const gone[] = { "InvalidAMIID.NotFound", "InvalidAMIID.Unavailable",
					    NULL };
	struct aws_params p = { 0 };
	struct aws_image *left = NULL;
	time_t until = time(NULL) + STOP_WAIT_S;
	int rc, attempt = 0;
	aws_param(&p, "ImageId", "%s", img->id);
	rc = image_call(a, "DeregisterImage", &p, gone, NULL, NULL, err);
	while (rc == 0 && !a->s->dry_run) {
		rc = image_find(a, img->name, &left, err);
		if (rc <= 0 || strcmp(left->id, img->id) != 0 ||
		    !strcmp(left->state, "deregistered"))
			break;
		aws_images_free(left, 1);
		left = NULL;
		if (time(NULL) >= until)
			return pbx_err_set(err, "image %s (%s) still there after %d s", img->name,
					   img->id, STOP_WAIT_S);
		image_pause(++attempt);
	}
	aws_images_free(left, left ? 1 : 0);
	return rc < 0 ? -1 : 0;
}

static int aws_image_remove(void *ctx, const char *name, const char *uid, int *existed,
			    struct pbx_err *err)
{
	struct aws *a = ctx;
	struct aws_image *img = NULL;
	char **snaps = NULL;
	size_t nsnaps = 0, i;
	int rc = image_settle(a, name, 0, &img, err);
	*existed = rc > 0;
	if (rc > 0 && image_mine(a, img, uid, err) < 0) {
		aws_images_free(img, 1);
		return -1;
	}
	if (rc > 0) { /* its snapshots, read before it goes */
		snaps = img->snapshots;
		nsnaps = img->nsnapshots;
		img->snapshots = NULL;
		img->nsnapshots = 0;
		rc = image_deregister(a, img, err);
	}
	if (rc == 0)
		rc = snapshots_tagged(a, uid, &snaps, &nsnaps, err);
	if (rc == 0)
		rc = snapshots_delete(a, snaps, nsnaps, err);
	for (i = 0; i < nsnaps; i++)
		free(snaps[i]);
	free(snaps);
	aws_images_free(img, img ? 1 : 0);
	return rc < 0 ? pbx_err_prefix(err, "deleting image %s", name) : 0;
}

/* ------------------------------------------------------------- where */

static const char *aws_image_project(void *ctx)
{
	return ((struct aws *)ctx)->region;
}

static const char *aws_image_zone(void *ctx)
{
	const struct aws *a = ctx;
	return a->nsubnets ? a->subnets[0] : "";
}

const struct pbx_image_ops aws_image_ops = {
	.stop_node = aws_image_stop_node,
	.create = aws_image_create,
	.remove = aws_image_remove,
	.project = aws_image_project,
	.zone = aws_image_zone,
	.project_key = "clouds.aws.region",
	.name_min = 3,
};
