/*
 * bootstrap_render.h - the node bootstrap's decisions that are pure data,
 * rendered by pbx into the stage (templates/README.md, "The stage"), so
 * that templates/bootstrap/ only carries them out: each node's gres.conf and
 * environment file (etc/pbx/env.sh), the head's NFS export line, the
 * systemd units of pbx's watchers and power saving's block of /etc/hosts.
 * No I/O: golden-file tests in tests/cluster/test_bootstrap_render.c.
 */
#ifndef PBX_CLUSTER_BOOTSTRAP_RENDER_H
#define PBX_CLUSTER_BOOTSTRAP_RENDER_H

#include <stddef.h>

#include "util/buf.h"
#include "util/err.h"

/* The user pbx submits every task as (docs/SECURITY.md, "Who is who on a
 * node"): templates/bootstrap/40-task-user.sh makes it (TASK_USER there). */
#define PBX_TASK_USER "pbx-task"

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

/* What a node's environment file says (pbx sources it before every remote
 * command: src/cluster/cluster.c).  Borrowed strings. */
struct pbx_bootstrap_env {
	const char *root;            /* the node's root prefix, no '/' at its end ("" on a VM) */
	const char *node;            /* the SLURM node name */
	const char *cluster;         /* the cluster's name */
	const char *shared;          /* the shared directory (PBX_SHARED) */
	int direct;                  /* a node body: Open MPI over loopback TCP, PBX_ENV_DIR */
	int train_on_path;           /* a node body given pbx-train: ROOT/usr/local/bin on PATH */
	const char *proxy;           /* the template's proxy ("http://HOST:PORT"), or NULL */
	const char *const *no_proxy; /* the template's no_proxy, nno_proxy of them */
	size_t nno_proxy;
};

/*
 * Appends node e's etc/pbx/env.sh to `out` (caller-owned): a comment line,
 * then an `export` line per variable (PATH with pbx-train's directory,
 * Open MPI's transports and PBX_ENV_DIR on a node body, SLURM_CONF,
 * PBX_SHARED, PBX_ROOT, PBX_NODE, PBX_CLUSTER; behind a proxy http_proxy,
 * https_proxy, no_proxy and their upper-case forms, no_proxy being
 * PBX_NO_PROXY_ALWAYS and e->no_proxy), every value quoted for sh
 * (pbx_shell_quote), so no byte of it is interpreted.  Without
 * PBX_TASK_USER: see pbx_bootstrap_env_task_user.
 */
void pbx_bootstrap_env_sh(struct pbx_buf *out, const struct pbx_bootstrap_env *e);

/* The hosts every node reaches without a proxy, whatever no_proxy says:
 * loopback, the clouds' metadata servers and their internal DNS names. */
#define PBX_NO_PROXY_ALWAYS \
	"localhost,127.0.0.1,::1,169.254.169.254,metadata.google.internal,.internal,fd00:ec2::254"

/*
 * Appends the apt configuration of a cluster behind proxy e->proxy to
 * `out` (caller-owned; nothing when e->proxy is NULL): a comment, apt's
 * http and https proxy, and "DIRECT" for each host of e->no_proxy that
 * apt can name (a host or an address; apt has no domains or blocks).
 * templates/bootstrap/15-install.sh installs it as
 * /etc/apt/apt.conf.d/80pbx-proxy before apt runs.  Values are checked by
 * src/config/proxy.c: no quote or newline reaches the file.
 */
void pbx_bootstrap_apt_proxy(struct pbx_buf *out, const struct pbx_bootstrap_env *e);

/*
 * Appends the line a node whose tasks run as the task user adds to its
 * env.sh (`export PBX_TASK_USER=pbx-task`) to `out` (caller-owned).  The
 * node decides whether they do (root runs its bootstrap, and on a node
 * body the task user reaches its files: templates/bootstrap/40-task-user.sh);
 * pbx submits tasks as that user.
 */
void pbx_bootstrap_env_task_user(struct pbx_buf *out);

/* A line of power saving's block of /etc/hosts.  Borrowed strings. */
struct pbx_hosts_entry {
	const char *address; /* IPv4 or IPv6: [0-9a-f.:] */
	const char *name;    /* the name slurm.conf's NodeAddr says: [a-z0-9-], not '-' first */
};

/*
 * Appends cluster `cluster`'s block of /etc/hosts to `out` (caller-owned;
 * `cluster` a checked cluster name, [A-Za-z0-9_.-]):
 * its begin marker, "ADDRESS NAME" for each of the `n` entries, its end
 * marker, each a line.  The bootstrap merges it into a node's /etc/hosts
 * (templates/bootstrap/45-hosts.sh: the block's lines of names not in it
 * stay).  Returns -1, with nothing appended and err naming the entry, when
 * an address or a name is not one (a newline or a space in either would
 * add a line of its own to the node's /etc/hosts).
 */
int pbx_bootstrap_hosts_block(struct pbx_buf *out, const char *cluster,
			      const struct pbx_hosts_entry *entries, size_t n, struct pbx_err *err);

#endif
