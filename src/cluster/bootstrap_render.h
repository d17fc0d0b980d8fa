/*
 * bootstrap_render.h - the node bootstrap's decisions that are pure data,
 * rendered by pbx into the stage (templates/README.md, "The stage"), so
 * that templates/bootstrap/ only carries them out: each node's gres.conf,
 * the head's NFS export line and the systemd units of pbx's watchers.  No I/O: golden-file tests in
 * tests/cluster/test_bootstrap_render.c.
 */
#ifndef PBX_CLUSTER_BOOTSTRAP_RENDER_H
#define PBX_CLUSTER_BOOTSTRAP_RENDER_H

#include <stddef.h>

#include "util/buf.h"

/*
 * Appends node `node`'s gres.conf to `out` (caller-owned): a comment line
 * and, with `gpus` > 0, one NodeName= line whose File= names `gpus`
 * devices `dev_base`0, `dev_base`1, ... (slurmd registers one GPU per
 * file).  `gpu_type` (pbx_slurm_gpu_type; NULL or "" = untyped) becomes
 * Type=.  `dev_base`: "/dev/nvidia" on a VM; a node body's stand-ins,
 * ROOT/dev/nvidia, which the bootstrap links to /dev/null.
 */
void pbx_bootstrap_gres_conf(struct pbx_buf *out, const char *node, int gpus, const char *gpu_type,
			     const char *dev_base);

/*
 * Appends the head's /etc/exports line for the shared directory `shared`
 * to `out` (caller-owned): "SHARED CLIENT(OPTIONS)..." and a newline, one
 * CLIENT per entry of `clients` (the compute nodes' NodeAddr, `n` of them),
 * root squashed to the anonymous uid 65534 (docs/SECURITY.md).  Nothing
 * when `n` is 0: the head then exports nothing.
 */
void pbx_bootstrap_exports(struct pbx_buf *out, const char *shared, const char *const *clients,
			   size_t n);

/*
 * Appends the systemd unit of pbx's watcher `watcher` ("pbx-preempt":
 * templates/preempt.sh, docs/spot.md; "pbx-autostop": templates/autostop.sh,
 * docs/autostop.md) to `out` (caller-owned), for a node whose root prefix
 * is `root` ("" on a VM) and whose SLURM daemon is `slurm_daemon`
 * (slurmctld or slurmd), which the watcher starts after.  Returns -1, with
 * nothing appended, for another name.
 */
int pbx_bootstrap_watcher_unit(struct pbx_buf *out, const char *watcher, const char *root,
			       const char *slurm_daemon);

#endif
