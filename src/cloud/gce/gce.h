/*
 * gce.h - what the files of the Compute Engine provider share: its
 * context, the compute v1 call (auth header, retries, errors, dry-run),
 * the request bodies, and the parsers of its replies (fuzzed:
 * tests/fuzz/fuzz_gce_reply.c).  What the files of the provider's
 * operations share besides is gce_internal.h.
 */
#ifndef PBX_CLOUD_GCE_GCE_H
#define PBX_CLOUD_GCE_GCE_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "cloud/gce/auth.h"
#include "cloud/provider.h"
#include "http/http.h"

#define PBX_GCE_ENDPOINT "https://compute.googleapis.com/compute/v1/"
/* The head's machine type when the template names none. */
#define GCE_HEAD_MACHINE "e2-standard-4"

/* One creation under way: a bulkInsert operation and the nodes it makes. */
struct gce_pending {
	char *op; /* operation name */
	char *zone;
	const struct pbx_node_group *grp; /* NULL: the head */
	size_t *nodes;                    /* indexes into the node list */
	size_t n;
	size_t min; /* minCount: fewest instances the call accepts */
	int done;
};

#define GCE_HTTP_POOL 16 /* calls in flight at once (deletes fan out) */

struct gce {
	const struct pbx_cluster_spec *s;
	struct pbx_http *http;                /* the token's handle, and the pool's first */
	struct pbx_http *pool[GCE_HTTP_POOL]; /* one connection each, made on demand */
	unsigned char busy[GCE_HTTP_POOL];
	pthread_mutex_t pool_mu;
	pthread_cond_t pool_cv;
	struct pbx_gce_auth *auth; /* NULL in dry-run */
	char *base;                /* endpoint, ends in '/' */
	char *project, *zone;      /* zone: where new instances go first */
	char **zones;              /* zone, then clouds.gce.zones' others: the
					order tried on a stockout */
	size_t nzones;
	char *user, *key_path, *pubkey; /* login; pubkey is the .pub line */
	struct gce_pending *pending;
	size_t npending;
	int polls;
	time_t started_at; /* when this start sent instances.start, or 0 */
};

/* ------------------------------------------------------------ compute.c */

/*
 * One compute v1 call: `path` is relative to the endpoint (or a full URL),
 * `body` may be NULL.  A mutating call gets ?requestId=UUID (the same on
 * every retry).  Returns 0 with *reply (owned by the caller, may be NULL
 * for an empty body) and *status; -1 on transport failure or an error
 * status other than those listed in `ok_statuses` (e.g. 404 for a get that
 * may find nothing; 0-terminated, may be NULL), with err quoting Google's
 * error message and reason.  In dry-run the request is printed and the
 * reply is a 404 for GET and a finished operation otherwise.  Thread-safe:
 * each call takes a handle of the pool.
 */
int gce_call(struct gce *g, const char *method, const char *path, json_t *body,
	     const long *ok_statuses, json_t **reply, long *status, struct pbx_err *err);
/* Sets up / releases the handle pool (g->http must be open). */
void gce_pool_init(struct gce *g);
void gce_pool_free(struct gce *g);
/* A random RFC 4122 version-4 UUID into out[37]. */
void gce_uuid(char out[37]);

/* Waits for operation `op` to be DONE (operation.c); its error becomes err.
 * `scope` is where the operation lives: "zones/Z", "regions/R" or
 * "global". */
int gce_wait_op(struct gce *g, const char *scope, const char *op, struct pbx_err *err);

/* -------------------------------------------------------------- image.c */

/* `pbx image build|delete` on Compute Engine (see struct pbx_image_ops). */
extern const struct pbx_image_ops gce_image_ops;
/* The sourceImage of the template's nodes: its `image` as given, or for a
 * bare name (no '/': an image `pbx image build` made)
 * projects/PROJECT/global/images/NAME.  Caller frees. */
char *gce_source_image(const struct gce *g);

/* -------------------------------------------------------------- parse.c */

/* Google's error reply ({"error": {"code", "message", "errors": [{reason}]}}):
 * "message (reason)" into out; 0, or -1 when `text` has no such error. */
int gce_error_text(const char *text, size_t len, char *out, size_t size);
/* Is a Google error reply a rate-limit one (403 rateLimitExceeded,
 * userRateLimitExceeded, 429 RESOURCE_EXHAUSTED)? */
int gce_retryable(long status, const char *body, size_t len, void *ctx);

struct gce_op {
	char name[128];
	char status[16];     /* PENDING, RUNNING, DONE */
	char error_code[64]; /* first error's code, "" when none */
	char error[512];     /* "code: message" of every error, "" when none */
};
/* Reads an Operation; -1 when it is not one (no name or status). */
int gce_op_parse(json_t *v, struct gce_op *op, struct pbx_err *err);

/* Reads an instances.list or aggregatedList page: appends to *v (free
 * with pbx_instances_free) each instance as the one record both providers
 * fill (src/cloud/provider.h): id its name, zone, state its status,
 * cluster, both addresses as the reply has them (not yet judged:
 * pbx_instance_check_addresses), stopped_at (lastStopTimestamp, not
 * RUNNING), started_at (RUNNING: lastStartTimestamp, else
 * creationTimestamp) and uid (the numeric `id`, 1 to 20 digits that fit
 * in 64 bits, else NULL); *next gets nextPageToken (caller frees) or NULL.  -1 also when an
 * address is not an IP address (err names the instance; it is appended
 * without that address). */
int gce_list_parse(json_t *v, struct pbx_instance **out, size_t *n, char **next,
		   struct pbx_err *err);

/* What pbx reads of an Image resource. */
struct gce_image {
	char name[64];           /* RFC 1035, at most 63 characters */
	char status[16];         /* PENDING, READY, FAILED, DELETING */
	char owner[64];          /* its pbx-image-id label, "" when none */
	long long disk_gb;       /* diskSizeGb, 0 when absent */
	long long archive_bytes; /* archiveSizeBytes, 0 when absent */
};
/* Reads an Image; -1 when it is not one (no valid name or status). */
int gce_image_parse(json_t *v, struct gce_image *img, struct pbx_err *err);

/* -------------------------------------------------------------- bodies.c */

/*
 * The name of one of the cluster's resources, the one place names are
 * made: PREFIX NAME-IDP[-PART], IDP being the first GCE_ID_PREFIX hex
 * digits of the cluster id (a legacy cluster's names have no IDP; see
 * pbx_cluster_uid_legacy).  Names must be unique in the project (instances
 * in a zone), so two pbx homes' clusters called NAME never share one; the
 * full id is on each resource as the pbx-cluster-id label (firewall rules,
 * which have no labels: in the description, see gce_firewall_owner).
 *
 * Why a prefix: names are [a-z]([-a-z0-9]{0,61}[a-z0-9])?, at most 63
 * characters, and a cluster name is up to 31.  With 12 digits the longest
 * rule name, pbx-NAME-IDP-internal, is 57 characters; the full 32 would
 * leave no room.  48 bits make two live clusters of one name in one
 * project sharing a prefix unlikely (k clusters: about k^2 / 2^49), and if
 * it happens pbx refuses rather than shares: an instance name in use fails
 * its insert, and a rule carrying another id is neither used nor deleted.
 *
 * Instances: gce_name(g, "", NODE); firewall rules gce_name(g, "pbx-",
 * "ssh" | "internal"); network tags gce_name(g, "pbx-", NULL | "head").
 * Caller frees.
 */
#define GCE_ID_PREFIX 12
char *gce_name(const struct gce *g, const char *prefix, const char *part);
/* Node `node`'s instance name: NAME-IDP-NODE (the head's is its host
 * name).  Caller frees. */
char *gce_instance_name(const struct gce *g, const char *node);
/* The firewall rules of the cluster (2): SSH to the head, all inside. */
json_t *gce_firewall_body(const struct gce *g, int which);
char *gce_firewall_name(const struct gce *g, int which);
/* The Cloud Router (with its Cloud NAT) pbx makes in a region where no NAT
 * serves the network yet; shared by every pbx cluster there, so its name
 * carries no cluster id.  Caller frees. */
char *gce_router_name(const struct gce *g);
/* The router's description: how pbx recognises a router it made. */
#define GCE_ROUTER_DESCRIPTION                                      \
	"pbx: Cloud NAT for pbx compute nodes without an external " \
	"address; shared by the pbx clusters in this region, deleted by the stop that leaves none"
/* routers.insert body: the router on the cluster's network with one NAT
 * (AUTO_ONLY addresses, every subnetwork range).  New reference. */
json_t *gce_router_body(const struct gce *g);
/* Whether nodes of this kind (head, or compute) get an external address:
 * the head always, compute nodes only with compute_external_ips. */
int gce_nodes_external(const struct gce *g, int head);
/* A rule's description ends in GCE_OWNER_KEY ID; gce_firewall_owner
 * returns that ID (caller frees), or NULL (a legacy cluster's rule). */
#define GCE_OWNER_KEY PBX_LABEL_CLUSTER_ID "="
char *gce_firewall_owner(json_t *rule);
/* bulkInsert body for nodes idx[0..n) of one kind: the head (grp NULL) or
 * node group grp; Compute Engine makes at least min_count of them or none.
 * New reference. */
json_t *gce_bulk_body(const struct gce *g, const struct pbx_node_group *grp,
		      const struct pbx_node_row *nodes, const size_t *idx, size_t n,
		      size_t min_count);

/* `pbx config check --clouds` (check.c): regions.get of the zone's
 * region, and the quotas the template needs there. */
int gce_check(void *ctx, struct pbx_cloud_check *c, struct pbx_err *err);

#endif
