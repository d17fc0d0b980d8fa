/*
 * provider.h - what a cloud provider does for a cluster, and nothing more:
 * plan the nodes, create them (idempotently, until each node's sshd
 * answers), describe the SLURM network layout, and destroy everything that
 * belongs to the cluster, found by label (or, for the local provider, by
 * directory) rather than only by what the store remembers.
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
	void (*nodes)(void *ctx, size_t n, const char *const *names);  /* once, first */
	void (*stage)(void *ctx, size_t node, const char *stage);
	void *ctx;
};

void pbx_events_stage(const struct pbx_cluster_events *ev, size_t node, const char *stage);

/* One cluster as a provider sees it. */
struct pbx_cluster_spec {
	const struct pbx_config *cfg;
	const struct pbx_cluster_template *t;   /* NULL when destroying */
	const char *name;
	int64_t id;
	int slot;          /* per-provider allocation from the store */
	const char *dir;   /* $PBX_HOME/clusters/NAME: pbx's local files for the cluster */
};

/* How SLURM is laid out on this provider's nodes. */
struct pbx_slurm_layout {
	char ctld_host[256];     /* controller hostname (`hostname -s` of the head) */
	int ctld_port;
	int srun_port_lo, srun_port_hi;
	int node_port_base;      /* node i (0-based, compute only) listens on base+1+i; 0 = default */
	int node_cpus;           /* 0 = what slurmd reports */
	long node_mem_mb;        /* RealMemory per node; 0 = SLURM's default */
	int same_host;           /* node bodies on one host: NodeHostname=localhost */
	const char *slurm_user;
	const char *bootstrap_mode;   /* "direct" or "systemd" */
	const char *extra;       /* extra slurm.conf lines */
	char shared_dir[1024];   /* the shared directory path on the nodes */
	/* A file pbx holds locked (flock) on this host while the head
	 * bootstraps, which compute nodes on the same host wait on before
	 * asking for slurmctld; "" = none (nodes on other hosts poll). */
	char ctld_lock[1024];
	/* pbx-train for the nodes: direct mode, a path on this host the nodes
	 * link to (PBX_TRAIN_BIN); "" = none. */
	char train_bin[1024];
	int cred_expire;         /* slurm.conf AuthInfo cred_expire; 0 = SLURM's 120 s */
};

struct pbx_provider {
	const char *name;
	/* Fills the node list: head first, then compute nodes named GROUPn.
	 * *nodes owned by the caller (pbx_node_rows_free). */
	int (*plan)(const struct pbx_cluster_spec *s, struct pbx_node_row **nodes, size_t *n,
		    struct pbx_err *err);
	/* Creates what is missing; returns once every node's sshd listens.
	 * May fill in addresses and instance ids. */
	int (*create)(const struct pbx_cluster_spec *s, struct pbx_node_row *nodes, size_t n,
		      const struct pbx_cluster_events *ev, struct pbx_err *err);
	/* Removes every process, port, file or cloud resource of the cluster. */
	int (*destroy)(const struct pbx_cluster_spec *s, struct pbx_err *err);
	/* SSH login for the nodes; *key_path is owned by the caller (NULL = agent). */
	int (*login)(const struct pbx_cluster_spec *s, char **user, char **key_path,
		     struct pbx_err *err);
	int (*layout)(const struct pbx_cluster_spec *s, struct pbx_slurm_layout *l,
		      struct pbx_err *err);
};

/* The provider for a cloud name, or NULL. */
const struct pbx_provider *pbx_provider_find(const char *cloud);


#endif
