/*
 * provider.h - what a cloud provider does for a cluster, and nothing more:
 * open a context of its own from its `clouds.X` section (credentials, an
 * HTTP handle), plan the nodes, begin creating them and poll until each
 * node's sshd can be reached, describe the SLURM network layout, and list
 * and destroy everything that carries the cluster's labels, so `stop`
 * removes a cluster completely even when the store has forgotten it.
 *
 * A cluster is known to the cloud by its id (struct pbx_cluster_spec's
 * uid), never by its name alone: two pbx homes using one project may both
 * call a cluster `gpu`.  Every resource carries the id as a label or tag,
 * every name that must be unique in the project contains it, and every
 * list filters by it (see docs/SECURITY.md, "Cloud resources").
 *
 * Creation reports every instance the moment the cloud accepts it (the
 * `record` hook), so a pbx killed mid-create leaves each instance id in
 * the store, and its labels let `stop` find it even if not.
 *
 * Everything after sshd answers — SSH, bootstrap, SLURM — is the same for
 * every provider and lives in src/cluster/.
 */
#ifndef PBX_CLOUD_PROVIDER_H
#define PBX_CLOUD_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "store/store.h"
#include "util/err.h"

/* Progress reports from long operations (all callbacks may be NULL;
 * called from several threads). */
struct pbx_cluster_events {
	void (*nodes)(void *ctx, size_t n, const char *const *names); /* once, first */
	void (*stage)(void *ctx, size_t node, const char *stage);
	void *ctx;
};

void pbx_events_stage(const struct pbx_cluster_events *ev, size_t node, const char *stage);

/* One cluster as a provider sees it. */
struct pbx_cluster_spec {
	const struct pbx_config *cfg;
	const struct pbx_cluster_template *t; /* NULL when destroying */
	const char *name;
	int64_t id; /* store id; 0 when the store has forgotten the cluster */
	int slot;   /* the store's slot (the local provider's addresses and ports) */
	/* The cluster's id in the cloud (pbx_cluster_uid_new; a legacy
	 * cluster's is its decimal store number, see pbx_cluster_uid_legacy).
	 * NULL only for a survey: list what carries the name, whoever's it
	 * is; a provider then creates and destroys nothing. */
	const char *uid;
	struct pbx_store *store; /* the request log and the provider's allocations */
	int dry_run;             /* print the requests instead of sending them */
	/* With dry_run: receives each request that would be sent (no token in
	 * it); may be NULL. */
	void (*print_request)(void *ctx, const char *method, const char *url, const char *body);
	void *print_ctx;
	/* Set only while `pbx image build` makes image `image` (NULL
	 * otherwise): every resource also carries the label pbx-image=IMAGE. */
	const char *image;
	/* A public key line (pbx_pubkey_line_ok) the nodes authorize next to
	 * the login key's: the user's, when pbx on the head makes nodes
	 * (power saving), so the user's pbx reaches them too.  NULL: none.
	 * Borrowed from whoever fills the spec. */
	const char *user_key;
	/* Set only when a head deletes its own cluster (`cluster stop --self`):
	 * the instance (id or name) this pbx runs on.  destroy deletes it last,
	 * once everything else that can go while it runs is gone, so the
	 * process that asks is the last thing to end. */
	const char *self;
};

/* ----------------------------------------------------------------- labels */

/* The labels every cloud resource of a cluster carries, made here only:
 * pbx-cluster = NAME and pbx-cluster-id = UID (when s->uid is set).  Lists
 * find a cluster's resources by both; a survey (uid NULL) by the first. */
#define PBX_LABEL_CLUSTER    "pbx-cluster"
#define PBX_LABEL_CLUSTER_ID "pbx-cluster-id"
#define PBX_LABEL_IMAGE      "pbx-image"
#define PBX_LABEL_IMAGE_ID   "pbx-image-id"
struct pbx_labels {
	const char *keys[3];
	char values[3][64];
	size_t n;
};
void pbx_cluster_labels(const struct pbx_cluster_spec *s, struct pbx_labels *l);

/* ------------------------------------------------------------- cluster id */

/* A cluster id: 128 random bits (OpenSSL RAND_bytes) as 32 lowercase hex
 * digits, which fit every cloud's label and tag value rules. */
#define PBX_CLUSTER_UID_LEN 32
/* Makes a new id into out; -1 with err when there is no randomness. */
int pbx_cluster_uid_new(char out[PBX_CLUSTER_UID_LEN + 1], struct pbx_err *err);
/* 1 when `uid` is a legacy id: the decimal store number that a pbx from
 * before cluster ids put on its resources as pbx-cluster-id (store
 * migration 6 gives its clusters that id).  Such a cluster's names carry
 * no id (pbx-NAME-ssh, pbx-NAME); its resources are found by name and that
 * number, which another pbx home may share. */
int pbx_cluster_uid_legacy(const char *uid);
/* 1 when `text` can be a cluster id: 32 lowercase hex digits, or a legacy
 * one (1 to 18 decimal digits, no leading zero). */
int pbx_cluster_uid_valid(const char *text);

/* -------------------------------------------------------------- instances */

/* One resource found by label (an instance, or the local provider's
 * cluster directory): the one instance record of every provider, what
 * the Compute Engine and EC2 parsers fill (gce_list_parse,
 * aws_insts_parse) and their lists give on.  All strings owned by the
 * array: pbx_instances_free.  Whoever builds one zero-initialises it: a
 * field a provider does not read stays NULL or 0. */
struct pbx_instance {
	char *id;           /* the provider's handle: instance name / directory */
	char *zone;         /* may be NULL */
	char *state;        /* the cloud's status, e.g. RUNNING; may be NULL */
	char *cluster;      /* the cluster id it carries (pbx-cluster-id); NULL when
	                  the provider did not read it or it carries none */
	int64_t stopped_at; /* when a powered-off instance (TERMINATED / STOPPING /
	                         SUSPENDED on Compute Engine, stopped / stopping on
	                         EC2) stopped, unix seconds, as the cloud reports it;
	                         0 when unknown or running */
	char *private_ip;   /* the instance's addresses where the provider's list
	                       reads them (pbx_instances_set_addresses), else NULL */
	char *public_ip;
	int private_direct; /* whether pbx may dial private_ip itself (an
	                       emulator's API: loopback addresses only); else it
	                       reaches the instance only through the head
	                       (pbx_cloud_dial_allowed's rule) */
	int64_t started_at; /* a running instance's last start (made or started),
	                       unix s, where the provider's list_nodes reads it
	                       (Compute Engine lastStartTimestamp or
	                       creationTimestamp, EC2 launchTime); else 0 */
	char *node;         /* the node it was made for, where the provider's list
	                       reads it (EC2: its pbx-node tag), else NULL: then
	                       its node is the one whose dns_name is its id
	                       (Compute Engine's instance names) */
	char *uid;          /* an identity the cloud never gives another instance,
	                       where the provider's list_nodes reads it (Compute
	                       Engine: the numeric `id`, digits only; EC2: the
	                       instance id, i-..., never reused), else NULL; the
	                       store keeps it as the node's instance_uid, and the
	                       user's pbx keeps a node's host-key pins only while
	                       it stays the same (src/cluster/awake.c) */
	/* what EC2's replies say besides (aws_insts_parse); NULL or 0 elsewhere */
	char *subnet;      /* subnetId */
	char *reason;      /* stateReason's message */
	char *type;        /* instanceType */
	long launch_index; /* amiLaunchIndex, -1 when absent or not 0 to 99999 */
	int spot;          /* instanceLifecycle is spot */
};
void pbx_instances_free(struct pbx_instance *v, size_t n);
/* Whether x is a machine, not one of the other resources a provider's
 * list gives with a marker for a state: FIREWALL and ROUTER (gce),
 * SECURITY_GROUP and KEY_PAIR (aws). */
int pbx_instance_is_machine(const struct pbx_instance *x);
/* Splits v[0..n) into *rest and *me: the entries whose id is `self` (a
 * head deleting its own cluster, spec.self; NULL: none) go to *me, the
 * others to *rest.  Shallow: the strings stay v's; the caller frees the
 * two arrays alone (free). */
void pbx_instances_split_self(const struct pbx_instance *v, size_t n, const char *self,
			      struct pbx_instance **rest, size_t *nrest, struct pbx_instance **me,
			      size_t *nme);
/* Appends one resource to the array *v of *n (grown; strings copied; zone,
 * state and cluster may be NULL and stay so; addresses and node are NULL);
 * *v stays the caller's, to free with pbx_instances_free. */
void pbx_instances_add(struct pbx_instance **v, size_t *n, const char *id, const char *zone,
		       const char *state, const char *cluster, int64_t stopped_at);
/* Moves the n entries of w (an array of its own, freed here: its strings
 * go to *v) to the end of *v of *nv. */
void pbx_instances_append(struct pbx_instance **v, size_t *nv, struct pbx_instance *w, size_t n);
/* Gives x (an entry of such an array) its addresses for the API at
 * `base`, copied; either may be NULL.  A public address pbx may not
 * connect to (pbx_cloud_address_allowed: an emulator's are loopback ones
 * only) is left out; the private one is kept, with x->private_direct
 * saying whether pbx may dial it itself (else only through the head,
 * which dials it on its own network: an emulator's booted VMs). */
void pbx_instances_set_addresses(struct pbx_instance *x, const char *base, const char *private_ip,
				 const char *public_ip);
/* The same rule for the addresses x holds already (a parser's, as the
 * reply had them): a public one pbx may not connect to is dropped, and
 * x->private_direct set. */
void pbx_instance_check_addresses(struct pbx_instance *x, const char *base);
/* Whether pbx may use compute node instance x's private address (as
 * pbx_cloud_dial_allowed judges it): it dials it itself (x->private_direct),
 * or x has no public address and the head (may be NULL) has one, so pbx
 * goes through the head, which dials it on its own network. */
int pbx_instance_private_usable(const struct pbx_instance *x, const struct pbx_node_row *head);
/* Whether template t has a power-saving group (min: below its count;
 * src/cluster/slurm_sleep_steps.c, docs/power-saving.md). */
int pbx_power_saving(const struct pbx_cluster_template *t);

/* ----------------------------------------------------------------- images */

/* What a provider does for `pbx image build|delete` (src/cluster/image.c);
 * a provider without prebaked images has none (NULL).  The builder is a
 * cluster of one node (the head) opened as any other, whose spec carries
 * `image`. */
struct pbx_image_ops {
	/* Powers node's instance off and waits until it is (its disk stays). */
	int (*stop_node)(void *ctx, const struct pbx_node_row *node, struct pbx_err *err);
	/* Makes image `name` from node's boot disk, labelled pbx-image=NAME
	 * and pbx-image-id=UID, and waits until it is ready; an image of that
	 * name carrying UID already (a rerun) is waited for, one carrying
	 * another id is refused (PBX_EXIT_SECURITY).  *link (caller frees):
	 * how a template names it, e.g. projects/P/global/images/NAME or an
	 * AMI id. */
	int (*create)(void *ctx, const struct pbx_node_row *node, const char *name, const char *uid,
		      const char *description, char **link, struct pbx_err *err);
	/* Deletes image `name` if it carries UID (waiting while it is still
	 * being made) and waits until it is gone, with whatever storage the
	 * cloud keeps behind it (EC2: its EBS snapshots); *existed = 0 when
	 * there was none.  One carrying another id is refused
	 * (PBX_EXIT_SECURITY). */
	int (*remove)(void *ctx, const char *name, const char *uid, int *existed,
		      struct pbx_err *err);
	/* Where images are made: the project (Compute Engine) or region
	 * (EC2), recorded with the image; owned by ctx. */
	const char *(*project)(void *ctx);
	/* Where the builder runs: a zone, a subnet; "" when the cloud
	 * chooses.  Owned by ctx. */
	const char *(*zone)(void *ctx);
	/* The configuration key that sets project(), for messages
	 * ("clouds.gce.project"). */
	const char *project_key;
	/* The shortest image name the cloud takes (EC2: 3). */
	size_t name_min;
};

/* How SLURM is laid out on this provider's nodes. */
struct pbx_slurm_layout {
	char ctld_host[256]; /* controller hostname (`hostname -s` of the head) */
	int ctld_port;
	int srun_port_lo, srun_port_hi;
	int node_port_base; /* node i (0-based, compute only) listens on base+1+i; 0 = default */
	int node_cpus;      /* 0 = what slurmd reports */
	long node_mem_mb;   /* RealMemory per node; 0 = SLURM's default */
	int same_host;      /* node bodies on one host: NodeHostname=localhost */
	const char *slurm_user;
	const char *bootstrap_mode; /* "direct" or "systemd" */
	const char *extra;          /* extra slurm.conf lines */
	char shared_dir[1024];      /* the shared directory path on the nodes */
	/* A file pbx holds locked (flock) on this host while the head
	 * bootstraps, which compute nodes on the same host wait on before
	 * asking for slurmctld; "" = none (nodes on other hosts poll). */
	char ctld_lock[1024];
	/* pbx-train for the nodes: direct mode, a path on this host the nodes
	 * link to (PBX_TRAIN_BIN); "" = none. */
	char train_bin[1024];
	int cred_expire; /* slurm.conf AuthInfo cred_expire; 0 = SLURM's 120 s */
};

/* The state a provider gives a compute node the cloud did not make when
 * the template's min_nodes policy lets the cluster start without it
 * (quota, capacity).  The cluster runs without such nodes; a later start
 * tries to make them again. */
#define PBX_NODE_NOT_CREATED "not-created"
/* Power saving (src/cluster/slurm_sleep_steps.c): a node SLURM may wake that has
 * no instance now, and one being made because SLURM woke it. */
#define PBX_NODE_ASLEEP      "asleep"
#define PBX_NODE_WAKING      "waking"

/* What creation tells its caller as it goes. */
struct pbx_create_hooks {
	/* Called (from any thread) with node i's row as soon as something
	 * about it is known that must survive a crash: the instance id and
	 * operation once the cloud accepted it, its addresses once assigned,
	 * its state.  The caller saves the row. */
	void (*record)(void *ctx, const struct pbx_node_row *node);
	void *ctx;
	const struct pbx_cluster_events *ev;
};

/* What `pbx config check --clouds` learns of a cloud (the check op). */
struct pbx_cloud_quota {
	char metric[64];    /* the cloud's name of the limit */
	double limit, used; /* as the cloud says them */
	double need;        /* what the template asks for at most */
};
#define PBX_CLOUD_CHECK_QUOTAS 16
struct pbx_cloud_check {
	char identity[320]; /* whose credentials, from where (never a secret) */
	char where[256];    /* what was asked, e.g. "project P, region R" */
	struct pbx_cloud_quota quotas[PBX_CLOUD_CHECK_QUOTAS];
	size_t nquotas;
	char note[256]; /* what could not be checked; "" when nothing */
};

struct pbx_provider {
	const char *name;
	/* Opens the provider's context for cluster s (s must outlive it):
	 * reads clouds.NAME, credentials; *ctx released with close. */
	int (*open)(const struct pbx_cluster_spec *s, void **ctx, struct pbx_err *err);
	void (*close)(void *ctx);
	/* Fills the node list: head first, then compute nodes named GROUPn.
	 * *nodes owned by the caller (pbx_node_rows_free). */
	int (*plan)(void *ctx, struct pbx_node_row **nodes, size_t *n, struct pbx_err *err);
	/* Begins creating what is missing (idempotent: a node that exists is
	 * kept).  Calls h->record for each node the cloud accepted. */
	int (*create_begin)(void *ctx, struct pbx_node_row *nodes, size_t n,
			    const struct pbx_create_hooks *h, struct pbx_err *err);
	/* Polls creation: 1 when every node's sshd can be reached (addresses
	 * filled in) or is PBX_NODE_NOT_CREATED, 0 while it is under way (call
	 * again), -1 on failure. */
	int (*create_poll)(void *ctx, struct pbx_node_row *nodes, size_t n,
			   const struct pbx_create_hooks *h, struct pbx_err *err);
	/* Everything carrying the cluster's labels (with s->uid NULL: its
	 * name label, each with the id it carries); *v owned by the caller
	 * (pbx_instances_free). */
	int (*list)(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err);
	/* The instances alone of what list finds, with their addresses where
	 * the cloud gives them (pbx_instance's private_ip, public_ip), in as
	 * few requests as the cloud allows (Compute Engine: one a page),
	 * without waiting for creations under way: what `cluster show` asks
	 * to learn which nodes the head woke (src/cluster/awake.c), which
	 * finds node N's instance by its `node` where the list gives one
	 * (EC2: the pbx-node tag), else by its id, dns_name(N).  *v owned by
	 * the caller (pbx_instances_free).  NULL: nothing is learnt. */
	int (*list_nodes)(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err);
	/* Removes the given resources and the cluster's own ones (firewall
	 * rule, files), waiting until they are gone. */
	int (*destroy)(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err);
	/* Removes these nodes' instances only (a resize), waiting until they
	 * are gone; the cluster's own resources stay.  A node already gone is
	 * fine.  In a dry run, prints the requests. */
	int (*remove_nodes)(void *ctx, const struct pbx_node_row *nodes, size_t n,
			    struct pbx_err *err);
	/* SSH login for the nodes; *key_path is owned by the caller (NULL = agent). */
	int (*login)(void *ctx, char **user, char **key_path, struct pbx_err *err);
	int (*layout)(void *ctx, struct pbx_slurm_layout *l, struct pbx_err *err);
	/* The name the cloud's internal DNS gives node `node`'s instance once
	 * it exists (Compute Engine: the instance name), for slurm.conf to
	 * name a node that does not exist yet (power saving); owned by the
	 * caller.  NULL (the member, or the result): no such name. */
	char *(*dns_name)(void *ctx, const char *node);
	/* Set when the cloud's DNS may not answer dns_name's names everywhere
	 * (EC2: nowhere; Compute Engine: not from another zone): the head's pbx
	 * writes them, for the awake nodes, into a block of every node's
	 * /etc/hosts as it wakes nodes (docs/power-saving.md). */
	int names_in_hosts;
	/* One cheap authenticated call (are the credentials good?) and the
	 * quotas the template (s->t) needs where the cloud says them; NULL:
	 * the provider has no cloud account to check. */
	int (*check)(void *ctx, struct pbx_cloud_check *c, struct pbx_err *err);
	/* Prebaked images; NULL when the provider has none yet. */
	const struct pbx_image_ops *images;
};

/* The request log of a cloud's HTTP handle (pbx_http_set_log's function):
 * each line an "http" event of the store `store` (a struct pbx_store *),
 * for cluster `cluster_id` (0: none). */
void pbx_cloud_http_log(void *store, int64_t cluster_id, const char *line);

/* An API on a loopback address is an emulator: pbx then connects only to
 * loopback addresses.  Returns 0 when `ip` (may be NULL) may be connected
 * to for the API at `base` (a URL), or -1 with err naming both. */
int pbx_cloud_address_allowed(const char *base, const char *instance, const char *ip,
			      struct pbx_err *err);

/* The same check on the address pbx will dial for node i of nodes[] (the
 * head first) whose instance has private_ip and public_ip (may be NULL):
 * its public address; else, for a compute node behind a head that has a
 * public address, none (pbx goes through the head, which dials the
 * private one: an emulator's booted VMs have private addresses of their
 * own network); else its private address.  Returns 0 when allowed, 1 when
 * it cannot be told yet (a compute node without a public address while the
 * head is not running: poll again), -1 with err.  Every provider checks
 * the addresses a cloud hands out with it. */
int pbx_cloud_dial_allowed(const char *base, const struct pbx_node_row *nodes, size_t i,
			   const char *instance, const char *private_ip, const char *public_ip,
			   struct pbx_err *err);

/* One round of pbx_cloud_wait_gone: adds to *left (0 at first) how many
 * of the instances waited for are still there and sets *one (NULL at
 * first) to the id of one of them, which must stay valid until the wait
 * returns; 0, or -1 with err. */
typedef int (*pbx_cloud_left_fn)(void *ctx, size_t *left, const char **one, struct pbx_err *err);
/* Waits until no instance is left, as destroy and remove_nodes do on every
 * cloud: a round of `left` every delay_ms until it finds none (0).  -1 when
 * a round fails, or with err "N instances still there after LIMIT_S s
 * (e.g. ONE)" when some are after limit_s seconds. */
int pbx_cloud_wait_gone(pbx_cloud_left_fn left, void *ctx, int limit_s, long delay_ms,
			struct pbx_err *err);

/* What creation tells of a node as it goes, the same on every cloud (h
 * may be NULL).  Node i of nodes[] takes `state`, is recorded (h->record)
 * and reported as `stage`. */
void pbx_cloud_node_state(struct pbx_node_row *nodes, size_t i, const char *state,
			  const char *stage, const struct pbx_create_hooks *h);
/* The cloud accepted node i's instance `instance` (operation and zone as
 * the cloud has them; strings copied): the node takes them and is
 * "creating", recorded and reported "created".  Its instance_uid is
 * cleared: a new instance's is learnt when the poll sees it run
 * (pbx_cloud_node_running). */
void pbx_cloud_node_created(struct pbx_node_row *nodes, size_t i, const char *instance,
			    const char *operation, const char *zone,
			    const struct pbx_create_hooks *h);
/* Node i's instance `instance` runs, with private_ip and public_ip (may be
 * NULL), in `zone` (NULL: the node's is kept), with `uid` (pbx_instance's
 * uid: an identity never given to another instance; NULL when the cloud
 * gave none).  Unless the address pbx would dial is not allowed or cannot
 * be told yet (pbx_cloud_dial_allowed against the API at base), a node not
 * yet "running" takes the addresses and uid (strings copied) and that
 * state, and is recorded and reported.  Returns 0 when the node runs, 1
 * when it cannot be told yet (poll again), -1 with err. */
int pbx_cloud_node_running(const char *base, struct pbx_node_row *nodes, size_t i,
			   const char *instance, const char *uid, const char *private_ip,
			   const char *public_ip, const char *zone,
			   const struct pbx_create_hooks *h, struct pbx_err *err);

/* The nodes of a cloud cluster s (s->t set): "head", then GROUPn for each
 * node group, each "planned" with ssh_port 22 in `zone` (may be NULL).
 * *nodes owned by the caller (pbx_node_rows_free). */
void pbx_cloud_plan(const struct pbx_cluster_spec *s, const char *zone, struct pbx_node_row **nodes,
		    size_t *n);
/* The node group of compute node `node` (GROUPn), or NULL. */
const struct pbx_node_group *pbx_cloud_group_of(const struct pbx_cluster_template *t,
						const char *node);
/* 1 when `node` is of kind grp of template t: a compute node of group grp,
 * or, with grp NULL, the head; else 0. */
int pbx_cloud_node_of(const struct pbx_cluster_template *t, const struct pbx_node_row *node,
		      const struct pbx_node_group *grp);

/* The SLURM layout of a cloud cluster's VMs: SLURM's default ports, the
 * head's host name `head_host`, daemons under systemd, NFS /shared from
 * the head. */
void pbx_cloud_vm_layout(const char *head_host, struct pbx_slurm_layout *l);
/* How many compute nodes the template's policy lets go unmade: all but
 * min_nodes of them (none when min_nodes is not set). */
size_t pbx_cloud_slack(const struct pbx_cluster_template *t);
/* The fewest of k new nodes of kind grp (NULL = the head) a creation may
 * make: all of the head; compute nodes short of the slack, at least 1. */
size_t pbx_cloud_min_count(const struct pbx_cluster_template *t, const struct pbx_node_group *grp,
			   size_t k);

/* The SSH login of cloud cluster s's nodes, from its template (nothing to
 * do without one): *user is its login_user, else default_user; *key_path
 * its ssh_key, which is required (the error says it is "required for
 * WHY"); *pubkey the one line of ssh_key.pub.  Each owned by the caller
 * (free), set as it is read: on error the caller frees what was set. */
int pbx_cloud_login_read(const struct pbx_cluster_spec *s, const char *default_user,
			 const char *why, char **user, char **key_path, char **pubkey,
			 struct pbx_err *err);

/* The provider for a cloud name, or NULL. */
const struct pbx_provider *pbx_provider_find(const char *cloud);
/* The providers, NULL-terminated (stop looks for orphans in each). */
extern const struct pbx_provider *const pbx_providers[];

/* onmachine.c: whether pbx may ask `cloud`'s ("aws", "gce") metadata
 * server for credentials: on a machine of that cloud (its firmware says
 * so), on a cluster's node (PBX_THIS_NODE), or where the server's address
 * is set (AWS_EC2_METADATA_SERVICE_ENDPOINT, GCE_METADATA_HOST).  A
 * laptop with no cloud configured never probes 169.254.169.254. */
int pbx_may_ask_metadata(const char *cloud);

#endif
