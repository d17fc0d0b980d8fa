/*
 * conf.h - rendering slurm.conf for a cluster from templates/slurm.conf.in.
 *
 * pbx renders one slurm.conf per cluster; it still contains @ROOT@, which
 * the node bootstrap replaces with each node's root prefix.
 */
#ifndef PBX_SLURM_CONF_H
#define PBX_SLURM_CONF_H

#include <stddef.h>

#include "util/err.h"

struct pbx_slurm_node {
	const char *name;     /* SLURM node name */
	const char *hostname; /* NodeHostname (local: "localhost") */
	const char *addr;     /* NodeAddr */
	int port;             /* slurmd port; 0 = SLURM's default */
	int cpus;             /* 0 = let slurmd report */
	long mem_mb;          /* RealMemory; 0 = SLURM's default */
	int gpus;             /* GRES gpu count */
	const char *gpu_type; /* GRES type (pbx_slurm_gpu_type); NULL = untyped */
	int cloud;            /* State=CLOUD: made on demand (power saving) */
};

struct pbx_slurm_conf {
	const char *cluster;
	const char *ctld_host; /* controller hostname (must be `hostname -s` on the head) */
	const char *ctld_addr;
	int ctld_port;
	int srun_port_lo, srun_port_hi;
	const char *slurm_user;
	const char *extra;                  /* mode-specific lines, may be "" */
	long max_array_size;                /* MaxArraySize; 0 = 10001 */
	long max_job_count;                 /* MaxJobCount; 0 = 50000 */
	const struct pbx_slurm_node *nodes; /* compute nodes */
	size_t nnodes;
	int cred_expire; /* AuthInfo cred_expire (s), also how long a
				   requeued job waits to start again; 0 = 120 */
};

/* Renders slurm.conf; *out is owned by the caller (free). */
/*
 * The SLURM GRES type name for a cloud accelerator type, into out (size
 * bytes): lower case, "nvidia-tesla-" / "nvidia-" dropped, only [a-z0-9_.-]
 * kept, e.g. nvidia-tesla-t4 -> t4, nvidia-h100-80gb -> h100-80gb, T4 -> t4.
 * "" when nothing is left (then the GRES stays untyped).
 */
void pbx_slurm_gpu_type(const char *accel, char *out, size_t size);

int pbx_slurm_render_conf(const struct pbx_slurm_conf *c, char **out, struct pbx_err *err);

#endif
