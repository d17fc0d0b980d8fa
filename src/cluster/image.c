/*
 * image.c - `pbx image build|delete` (see image.h).
 *
 *   provider opened  ->  store row (building, a fresh id)  ->  builder: a
 *   cluster of one node (the template's image and head machine type, no
 *   node groups, no NAT), its resources labelled pbx-cluster=pbx-image,
 *   pbx-cluster-id=ID and pbx-image=NAME  ->  bootstrap.sh install over
 *   SSH  ->  instance stopped  ->  image from its disk  ->  builder deleted
 *   ->  row ready.
 *
 * The same code for every cloud: what differs (stopping, imaging,
 * deleting an image, where it lives) is the provider's struct
 * pbx_image_ops (src/cloud/gce/image.c, src/cloud/aws/image.c).
 *
 * The builder is never a cluster row: it lives in memory (struct
 * pbx_cluster with store id 0).  A kill -9 at any point leaves the image
 * row (building) whose id the builder's resources and the image carry, so
 * `pbx image delete NAME` or another build of NAME finds and removes them.
 */
#include "cluster/image.h"
#include "cluster/cluster.h"
#include "cluster/cluster_internal.h"
#include "util/buf.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One build or delete: the builder cluster and what it was made for. */
struct image_job {
	struct pbx_cluster c;                /* in memory only (row.id 0) */
	struct pbx_cluster_template builder; /* the template, one node */
	struct pbx_image_row *row;           /* borrowed */
	const struct pbx_cluster_events *ev;
	int opened;                     /* c.pctx is the provider's */
	struct pbx_slurm_layout layout; /* the builder's (image_connect) */
};

static double image_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ------------------------------------------------------------- checks */

/* Is `s` an image name every cloud takes: [a-z]([-a-z0-9]{0,61}[a-z0-9])?
 * (a Compute Engine resource name; EC2 also takes it as an AMI name and a
 * tag value), at least `min` characters long? */
static int image_name_ok(const char *s, size_t min)
{
	size_t len = strlen(s), i;
	if (len < min || len == 0 || len > 63 || !islower((unsigned char)s[0]) || s[len - 1] == '-')
		return 0;
	for (i = 0; i < len; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
			return 0;
	return 1;
}

/* pbx-TEMPLATE-YYYYMMDD-HHMMSS, the template's name lowercased with
 * anything else made '-'.  Caller frees. */
static char *image_default_name(const char *tmpl)
{
	char stamp[32], *name, *p;
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	name = xasprintf("pbx-%.36s-%s", tmpl, stamp);
	for (p = name; *p; p++)
		*p = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '-';
	return name;
}

/* The provider of template t, with images; PBX_EXIT_USAGE otherwise. */
static const struct pbx_provider *image_provider(const struct pbx_config *cfg,
						 const struct pbx_cluster_template *t,
						 struct pbx_err *err)
{
	const struct pbx_provider *p = pbx_provider_find(t->cloud);
	if (!p || !p->images) {
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "%s:%d: clusters.%s: cloud %s has no images "
			     "(pbx image build needs a cloud gce or aws template)",
			     cfg->path, t->line, t->name, t->cloud);
		return NULL;
	}
	return p;
}

/* ------------------------------------------------------------ builder */

static void image_stage(const struct image_job *j, const char *stage)
{
	pbx_events_stage(j->ev, 0, stage);
}

/* The record hook of the builder's creation: the instance goes into the
 * row's detail, so `pbx image list` shows what a killed build left. */
static void image_record(void *ctx, const struct pbx_node_row *node)
{
	struct image_job *j = ctx;
	struct pbx_err err = PBX_ERR_INIT;
	char *detail;
	if (!node->instance_id)
		return;
	detail = xasprintf("builder instance %s in %s", node->instance_id,
			   node->zone ? node->zone : "?");
	if (pbx_store_image_set(j->c.store, j->row->id, j->row->state, detail, NULL, &err) < 0)
		pbx_store_event(j->c.store, 0, "error", "%s", err.msg);
	free(detail);
}

/* Opens the provider for the builder of j->row (t: its template, NULL
 * when only deleting). */
static int image_open(struct image_job *j, struct pbx_store *st, const struct pbx_config *cfg,
		      const struct pbx_cluster_template *t, struct pbx_err *err)
{
	struct pbx_cluster *c = &j->c;
	c->store = st;
	c->cfg = cfg;
	c->provider = pbx_provider_find(j->row->cloud);
	if (!c->provider || !c->provider->images)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "image %s: cloud %s has no images",
				    j->row->name, j->row->cloud);
	c->row.name = xasprintf("%s-%s", PBX_IMAGE_BUILDER, j->row->uid); /* host key pins */
	c->row.uid = xstrdup(j->row->uid);
	c->row.cloud = xstrdup(j->row->cloud);
	c->dir = pbx_cluster_dir(c->row.name);
	if (t) {
		j->builder = *t;
		j->builder.groups = NULL;
		j->builder.ngroups = 0;
		j->builder.min_nodes = 0;
		j->builder.compute_external_ips = true; /* one node: no Cloud NAT */
		c->spec.t = &j->builder;
	}
	c->spec.cfg = cfg;
	c->spec.name = PBX_IMAGE_BUILDER;
	c->spec.uid = j->row->uid;
	c->spec.store = st;
	c->spec.image = j->row->name;
	if (c->provider->open(&c->spec, &c->pctx, err) < 0)
		return -1;
	j->opened = 1;
	if (t && c->provider->login(c->pctx, &c->user, &c->key_path, err) < 0)
		return -1;
	pbx_hostkeys_from_store(&c->hostkeys, st);
	c->pool = pbx_ssh_pool_new(&c->hostkeys);
	return 0;
}

static void image_close(struct image_job *j)
{
	struct pbx_cluster *c = &j->c;
	struct pbx_err err = PBX_ERR_INIT;
	int removed;
	if (c->row.name) { /* the builder's pins are never needed again */
		char *prefix = xasprintf("%s/", c->row.name);
		pbx_store_hostkey_forget_prefix(c->store, prefix, &removed, &err);
		free(prefix);
	}
	if (!j->opened)
		c->pctx = NULL; /* an open that failed left nothing to close */
	pbx_cluster_release(c);
}

/* Creates the builder's one node and waits until its sshd answers. */
static int image_create(struct image_job *j, struct pbx_err *err)
{
	struct pbx_cluster *c = &j->c;
	struct pbx_create_hooks h = { image_record, j, j->ev };
	struct timespec delay = { 0, 200 * 1000 * 1000 };
	int rc = c->provider->plan(c->pctx, &c->nodes, &c->nnodes, err);
	if (rc == 0)
		rc = c->provider->create_begin(c->pctx, c->nodes, c->nnodes, &h, err);
	while (rc == 0) {
		rc = c->provider->create_poll(c->pctx, c->nodes, c->nnodes, &h, err);
		if (rc != 0)
			break;
		nanosleep(&delay, NULL);
	}
	return rc < 0 ? -1 : 0;
}

/* The stage an install needs: bootstrap.sh and its parts, and apt's
 * proxy when the template has one (pbx_bootstrap_stage_apt_proxy). */
static int image_stage_tar(const struct image_job *j, struct pbx_buf *tar, struct pbx_err *err)
{
	time_t now = time(NULL);
	int rc = pbx_bootstrap_stage_begin(tar, now, err);
	if (rc == 0) /* a template behind a proxy: the builder's apt uses it */
		rc = pbx_bootstrap_stage_apt_proxy(&j->c, tar, now, err);
	if (rc == 0)
		pbx_ustar_end(tar);
	return rc;
}

/* Connects, waiting for a fresh VM's sshd and login user (the
 * provider's layout, or a node body's, into j->layout). */
static int image_connect(struct image_job *j, struct pbx_err *err)
{
	int rc = j->c.provider->layout(j->c.pctx, &j->layout, err);
	if (rc == 0)
		rc = pbx_cluster_discover(&j->c, &j->layout, j->ev, err);
	return rc;
}

/* Runs bootstrap install on the connected builder. */
static int image_install(struct image_job *j, struct pbx_err *err)
{
	struct pbx_buf tar = PBX_BUF_INIT;
	int rc = image_stage_tar(j, &tar, err);
	if (rc == 0)
		rc = pbx_bootstrap_node(&j->c, 0, &j->layout, &tar, "install", j->ev, err);
	pbx_buf_release(&tar);
	return rc;
}

/* Removes what the builder left (instance; firewall rules, or security
 * group and key pair), found by its labels. */
static int image_remove_builder(struct image_job *j, struct pbx_err *err)
{
	image_stage(j, "deleting builder");
	return pbx_stop_by_label(j->c.provider, j->c.pctx, 1, NULL, err);
}

/* ------------------------------------------------------------- build */

static int image_set(struct image_job *j, const char *state, const char *detail, const char *link,
		     struct pbx_err *err)
{
	if (pbx_store_image_set(j->c.store, j->row->id, state, detail, link, err) < 0)
		return -1;
	free(j->row->state);
	j->row->state = xstrdup(state);
	if (link) {
		free(j->row->link);
		j->row->link = xstrdup(link);
	}
	return 0;
}

/* The steps after the row: builder, install, stop, image, cleanup. */
static int image_steps(struct image_job *j, struct pbx_image_times *tm, struct pbx_err *err)
{
	const struct pbx_image_ops *ops = j->c.provider->images;
	char *link = NULL, *desc;
	double t = image_now();
	int rc = image_create(j, err);
	if (rc == 0)
		rc = image_connect(j, err);
	tm->instance = image_now() - t;
	if (rc == 0) {
		t = image_now();
		rc = image_install(j, err);
		tm->install = image_now() - t;
	}
	if (rc == 0) {
		image_stage(j, "stopping");
		t = image_now();
		rc = ops->stop_node(j->c.pctx, &j->c.nodes[0], err);
		tm->stop = image_now() - t;
	}
	if (rc == 0) {
		image_stage(j, "imaging");
		desc = xasprintf("pbx: template %s (%s) with SLURM, munge, NFS and pbx-train's "
				 "runtime installed",
				 j->row->template_name, j->row->source_image);
		t = image_now();
		rc = ops->create(j->c.pctx, &j->c.nodes[0], j->row->name, j->row->uid, desc, &link,
				 err);
		tm->image = image_now() - t;
		free(desc);
	}
	if (rc == 0) {
		t = image_now();
		rc = image_remove_builder(j, err);
		tm->cleanup = image_now() - t;
	}
	if (rc == 0)
		rc = image_set(j, "ready", "", link, err);
	free(link);
	return rc;
}

/* Removes image `name` of j's build (waiting while it is still being
 * made: its disk cannot be deleted before) and then what the builder
 * left, that even when the image is refused.  err: the first failure. */
static int image_remove_all(struct image_job *j, int *existed, struct pbx_err *err)
{
	struct pbx_err berr = PBX_ERR_INIT;
	int rc, brc;
	image_stage(j, "deleting image");
	rc = j->c.provider->images->remove(j->c.pctx, j->row->name, j->row->uid, existed, err);
	/* the builder goes even when the image was refused (another's) */
	brc = image_remove_builder(j, rc < 0 ? &berr : err);
	if (rc < 0 && brc < 0) {
		char first[1024];
		snprintf(first, sizeof(first), "%.1000s", err->msg); /* err->msg is rewritten */
		pbx_err_setc(err, err->code, "%s; and removing the builder failed: %.600s", first,
			     berr.msg);
	}
	return rc < 0 || brc < 0 ? -1 : 0;
}

/* After a failure (err): the image, if one was begun, and the builder go;
 * the row says why; when the cleanup fails too (not merely refusing the
 * image err already refused), err says so and what removes the rest.
 * Keeps err's code. */
static void image_fail(struct image_job *j, struct pbx_err *err)
{
	struct pbx_err cerr = PBX_ERR_INIT, serr = PBX_ERR_INIT;
	int existed = 0;
	if (j->opened)
		image_remove_all(j, &existed, &cerr);
	if (cerr.msg[0] && !strstr(err->msg, cerr.msg)) {
		char first[1024];
		snprintf(first, sizeof(first), "%.1000s", err->msg); /* err->msg is rewritten */
		pbx_err_setc(err, err->code,
			     "%s; and the cleanup failed: %.600s ('pbx image delete "
			     "%s' removes what is left)",
			     first, cerr.msg, j->row->name);
	}
	image_set(j, "failed", err->msg, NULL, &serr);
}

/* A name an earlier build left building or failed: its leftovers go, its
 * row is marked deleted.  A ready one is refused. */
static int image_reclaim(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			 const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	struct pbx_image_row old;
	int rc;
	if (pbx_store_image_get(st, name, &old, err) < 0) {
		if (err->code != PBX_EXIT_NOTFOUND)
			return -1;
		pbx_err_clear(err);
		return 0;
	}
	if (!strcmp(old.state, "ready"))
		rc = pbx_err_setc(err, PBX_EXIT_USAGE,
				  "image %s exists (%s); 'pbx image delete %s' "
				  "first, or give another name",
				  name, old.link, name);
	else
		rc = pbx_image_delete(st, cfg, name, ev, err);
	pbx_image_row_free(&old);
	return rc;
}

/* The row (building, a fresh id) for a build of `name` from t, in memory;
 * project and zone come once the provider is open (image_record_row). */
static int image_row_init(const struct pbx_cluster_template *t, const char *name,
			  struct pbx_image_row *row, struct pbx_err *err)
{
	char uid[PBX_CLUSTER_UID_LEN + 1];
	if (pbx_cluster_uid_new(uid, err) < 0)
		return -1;
	memset(row, 0, sizeof(*row));
	row->name = xstrdup(name);
	row->uid = xstrdup(uid);
	row->cloud = xstrdup(t->cloud);
	row->project = xstrdup("");
	row->zone = xstrdup("");
	row->source_image = xstrdup(t->image ? t->image : "");
	row->template_name = xstrdup(t->name);
	row->link = xstrdup("");
	row->state = xstrdup("building");
	row->detail = xstrdup("");
	row->created = row->updated = (int64_t)time(NULL);
	return 0;
}

/* Writes j's row, with where the open provider makes the image, before
 * anything is made. */
static int image_record_row(struct image_job *j, struct pbx_err *err)
{
	const struct pbx_image_ops *ops = j->c.provider->images;
	free(j->row->project);
	free(j->row->zone);
	j->row->project = xstrdup(ops->project(j->c.pctx));
	j->row->zone = xstrdup(ops->zone(j->c.pctx));
	return pbx_store_image_create(j->c.store, j->row, &j->row->id, err);
}

int pbx_image_build(struct pbx_store *st, const struct pbx_config *cfg, const char *tmpl,
		    const char *name_opt, const struct pbx_cluster_events *ev,
		    struct pbx_image_row *row, struct pbx_image_times *tm, struct pbx_err *err)
{
	const struct pbx_cluster_template *t = pbx_config_template(cfg, tmpl);
	static const char *const names[] = { "builder" };
	const struct pbx_provider *p;
	struct image_job j;
	char *name;
	double t0 = image_now();
	int rc;
	memset(tm, 0, sizeof(*tm));
	memset(row, 0, sizeof(*row));
	if (!t)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND,
				    "no cluster template named '%s' in %s%s", tmpl, cfg->path,
				    pbx_config_none_hint(cfg));
	if (!(p = image_provider(cfg, t, err)))
		return -1;
	if (!t->image || !*t->image)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "%s:%d: clusters.%s.image: required to "
				    "build an image",
				    cfg->path, t->line, t->name);
	name = name_opt ? xstrdup(name_opt) : image_default_name(tmpl);
	if (!image_name_ok(name, p->images->name_min)) {
		rc = pbx_err_setc(err, PBX_EXIT_USAGE,
				  "image name '%s': %zu to 63 characters, "
				  "a-z, 0-9 and '-', starting with a letter, not ending with '-'",
				  name, p->images->name_min ? p->images->name_min : 1);
		free(name);
		return rc;
	}
	if (ev && ev->nodes)
		ev->nodes(ev->ctx, 1, names);
	rc = image_reclaim(st, cfg, name, ev, err);
	if (rc == 0)
		rc = image_row_init(t, name, row, err);
	free(name);
	if (rc < 0)
		return -1;
	memset(&j, 0, sizeof(j));
	j.row = row;
	j.ev = ev;
	image_stage(&j, "creating");
	/* opening makes nothing: a refused credential leaves no row */
	rc = image_open(&j, st, cfg, t, err);
	if (rc == 0 && (rc = image_record_row(&j, err)) == 0) {
		rc = image_steps(&j, tm, err);
		if (rc < 0)
			image_fail(&j, err);
		else
			image_stage(&j, "ready");
	}
	image_close(&j);
	tm->total = image_now() - t0;
	if (rc < 0)
		pbx_image_row_free(row);
	return rc;
}

/* ------------------------------------------------------------- delete */

int pbx_image_delete(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		     const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	struct pbx_image_row row;
	struct image_job j;
	int rc, existed = 0;
	if (pbx_store_image_get(st, name, &row, err) < 0)
		return -1;
	memset(&j, 0, sizeof(j));
	j.row = &row;
	j.ev = ev;
	rc = image_open(&j, st, cfg, NULL, err);
	if (rc == 0 && *row.project &&
	    strcmp(row.project, j.c.provider->images->project(j.c.pctx)) != 0)
		rc = pbx_err_setc(err, PBX_EXIT_USAGE, "image %s was built in %s; %s is %s", name,
				  row.project, j.c.provider->images->project_key,
				  j.c.provider->images->project(j.c.pctx));
	if (rc == 0)
		rc = image_remove_all(&j, &existed, err);
	if (rc == 0)
		rc = image_set(&j, "deleted", existed ? "deleted" : "deleted (there was no image)",
			       NULL, err);
	image_close(&j);
	pbx_image_row_free(&row);
	return rc;
}
