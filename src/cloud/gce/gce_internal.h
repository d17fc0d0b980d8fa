/*
 * gce_internal.h - what the files of the gce provider's operations share
 * (gce.h is what the Compute Engine client shares with the rest of pbx):
 * the operations that gce.c puts in the provider's table, and what they
 * use of one another.
 *
 *   gce.c        open, close, plan, login, layout; the table
 *   operation.c  waiting for an operation; a mutation and its wait
 *   list.c       list, and the instance lists the others make
 *   firewall.c   the cluster's two firewall rules
 *   router.c     pbx's shared Cloud Router with its NAT
 *   create.c     create_begin: one bulkInsert per node kind, all or nothing
 *   poll.c       create_poll: operations to DONE, instances to RUNNING
 *   destroy.c    destroy and remove_nodes: DELETEs, then waiting
 */
#ifndef PBX_CLOUD_GCE_GCE_INTERNAL_H
#define PBX_CLOUD_GCE_GCE_INTERNAL_H

#include <stddef.h>

#include "cloud/gce/gce.h"

#define GCE_WAIT_LIMIT_S     600 /* waiting for one operation */
#define GCE_NOT_READY_POLL_S 2   /* a DELETE refused with resourceNotReady, again */

/* -------------------------------------------------------- operation.c */

/* Sends a mutation and waits for its operation (in `scope`, see
 * gce_wait_op, gce.h).  A status listed in `ok` (0-terminated, may be
 * NULL) other than 2xx is no operation. */
int gce_mutate(struct gce *g, const char *method, const char *path, json_t *body, const long *ok,
	       const char *scope, struct pbx_err *err);

/* ------------------------------------------------------------- list.c */

/* Text URL-encoded for a query parameter.  Caller frees. */
char *gce_escape(const char *text);
/* Instances matching `filter` (URL-encoded) in every zone (aggregatedList),
 * every page; *v owned by the caller (pbx_instances_free). */
int gce_list_instances_where(struct gce *g, const char *filter, struct pbx_instance **v, size_t *n,
			     struct pbx_err *err);
/* Instances carrying the cluster's labels, in every zone; *v as above. */
int gce_list_instances(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err);
/* The instance of v named `name`, or NULL; borrowed from v. */
const struct pbx_instance *gce_find(const struct pbx_instance *v, size_t n, const char *name);
int gce_list(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err);
int gce_list_nodes(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err);

/* --------------------------------------------------------- firewall.c */

/* Makes the cluster's firewall rules that are missing; one of another
 * cluster (whose name shares the id prefix) is an error. */
int gce_firewalls(struct gce *g, struct pbx_err *err);
/* Appends to *v (pbx_instances_add) the rules that are the cluster's own
 * (state "FIREWALL"). */
int gce_list_rules(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err);
/* A survey: appends every rule named like a rule of a cluster called NAME,
 * with the id its description carries. */
int gce_survey_rules(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err);
/* Deletes the rules that are the cluster's own and waits for each. */
int gce_delete_firewalls(struct gce *g, struct pbx_err *err);

/* ----------------------------------------------------------- router.c */

/* A Cloud NAT in every region of the cluster's zones (none when compute
 * nodes have external addresses). */
int gce_routers(struct gce *g, struct pbx_err *err);
/* Appends to *v (pbx_instances_add) pbx's routers that this cluster's stop
 * would delete (id = name, zone = region, state "ROUTER"). */
int gce_list_routers(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err);
/* Deletes pbx's router where this cluster is the last to use it. */
int gce_delete_routers(struct gce *g, struct pbx_err *err);

/* ----------------------------------------------------------- create.c */

/* One bulkInsert in `zone` for nodes idx[0..k) of kind grp (NULL = head),
 * at least `min` of which must be made; the operation joins g->pending
 * (strings copied), and each node is recorded. */
int gce_bulk(struct gce *g, const char *zone, const struct pbx_node_group *grp,
	     struct pbx_node_row *nodes, const size_t *idx, size_t k, size_t min,
	     const struct pbx_create_hooks *h, struct pbx_err *err);
int gce_create_begin(void *ctx, struct pbx_node_row *nodes, size_t n,
		     const struct pbx_create_hooks *h, struct pbx_err *err);
/* After a failed creation (err says why): deletes every instance this
 * creation asked for, and the rest when nothing else of the cluster is
 * left (all or nothing), and says so in err. */
void gce_clean_up(struct gce *g, const struct pbx_node_row *nodes, struct pbx_err *err);

/* ----------------------------------------------- poll.c and destroy.c */

int gce_create_poll(void *ctx, struct pbx_node_row *nodes, size_t n,
		    const struct pbx_create_hooks *h, struct pbx_err *err);
/* Deletes the instances of v (the other resources in it are skipped) and
 * waits until none is listed; what is already gone is fine. */
int gce_delete_instances(struct gce *g, const struct pbx_instance *v, size_t n,
			 struct pbx_err *err);
int gce_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err);
int gce_remove_nodes(void *ctx, const struct pbx_node_row *nodes, size_t n, struct pbx_err *err);

#endif
