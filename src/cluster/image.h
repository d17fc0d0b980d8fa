/*
 * image.h - prebaked images (`pbx image build|list|delete`): a builder
 * cluster of one node made from a template's image, pbx's bootstrap
 * `install` action on it (SLURM, munge, NFS, pbx-train's runtime), then
 * the provider's image made from its disk (struct pbx_image_ops), the
 * builder deleted, the image recorded in the store.  A template naming
 * such an image starts nodes whose bootstrap finds everything installed.
 *
 * Library code: reports through struct pbx_err and the events callbacks.
 */
#ifndef PBX_CLUSTER_IMAGE_H
#define PBX_CLUSTER_IMAGE_H

#include "cloud/provider.h"
#include "config/config.h"
#include "store/store.h"
#include "util/err.h"

/* The cluster name the builder's resources carry (label pbx-cluster, and
 * in their names: instance pbx-image-IDP-head). */
#define PBX_IMAGE_BUILDER "pbx-image"

/* Seconds each stage of a build took (0: not reached). */
struct pbx_image_times {
	double instance; /* create until sshd answers and the login works
			      (a VM's boot included) */
	double install;  /* bootstrap install */
	double stop;     /* instances.stop */
	double image;    /* images.insert until READY */
	double cleanup;  /* the builder deleted */
	double total;
};

/*
 * Builds image `name` (NULL: pbx-TEMPLATE-YYYYMMDD-HHMMSS) from template
 * `tmpl`.  The store row is written first (state building); a name
 * recorded as ready is refused (PBX_EXIT_USAGE), one left building or
 * failed by an earlier build is cleaned up and built again.  On success
 * *row (owned by the caller: pbx_image_row_free) is the ready image.  On
 * failure what was made is removed (best effort) and the row is marked
 * failed; `pbx image delete` removes what is left.
 */
int pbx_image_build(struct pbx_store *st, const struct pbx_config *cfg, const char *tmpl,
		    const char *name, const struct pbx_cluster_events *ev,
		    struct pbx_image_row *row, struct pbx_image_times *times, struct pbx_err *err);

/* Deletes image `name`: the cloud image (when it carries the row's id),
 * whatever its build left, then marks the row deleted. */
int pbx_image_delete(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		     const struct pbx_cluster_events *ev, struct pbx_err *err);

#endif
