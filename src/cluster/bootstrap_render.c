/*
 * bootstrap_render.c - gres.conf, the NFS export line and the watchers'
 * systemd units, rendered for the node bootstrap's stage (see
 * bootstrap_render.h).
 */
#include "cluster/bootstrap_render.h"

#include <string.h>

void pbx_bootstrap_gres_conf(struct pbx_buf *out, const char *node, int gpus, const char *gpu_type,
			     const char *dev_base)
{
	const char *type = gpu_type && *gpu_type ? " Type=" : "";
	pbx_buf_addf(out, "# gres.conf for %s, written by the pbx bootstrap\n", node);
	if (gpus == 1)
		pbx_buf_addf(out, "NodeName=%s Name=gpu%s%s File=%s0\n", node, type,
			     *type ? gpu_type : "", dev_base);
	else if (gpus > 1)
		pbx_buf_addf(out, "NodeName=%s Name=gpu%s%s File=%s[0-%d]\n", node, type,
			     *type ? gpu_type : "", dev_base, gpus - 1);
}

void pbx_bootstrap_exports(struct pbx_buf *out, const char *shared, const char *const *clients,
			   size_t n)
{
	size_t i;
	if (!n)
		return;
	pbx_buf_adds(out, shared);
	/* root_squash: a compute node's root is the anonymous uid 65534 on
	 * the shared disk (it writes only its autostop answer, in a
	 * directory of that uid: templates/autostop.sh); a task is its own
	 * uid, and neither is the head's root (docs/SECURITY.md) */
	for (i = 0; i < n; i++)
		pbx_buf_addf(
			out,
			" %s(rw,sync,no_subtree_check,root_squash,anonuid=65534,anongid=65534)",
			clients[i]);
	pbx_buf_addc(out, '\n');
}

/* What a watcher's unit says beyond its name, path and SLURM daemon. */
struct watcher_kind {
	const char *name;
	const char *description; /* and the comment lines after it */
	int preempt;             /* Wants= the network; an ExecStop= (a preemption's) */
	int restart_sec;
};

static const struct watcher_kind watcher_kinds[] = {
	{ "pbx-preempt",
	  "pbx preempt: a spot preemption notice drains this node and sends its jobs SIGTERM\n"
	  "# stopped before these at a shutdown: its ExecStop (a preemption's) needs them",
	  1, 2 },
	{ "pbx-autostop", "pbx autostop: powers this cluster off when it is idle", 0, 10 },
};

int pbx_bootstrap_watcher_unit(struct pbx_buf *out, const char *watcher, const char *root,
			       const char *slurm_daemon)
{
	const struct watcher_kind *k = NULL;
	size_t i;
	for (i = 0; i < sizeof(watcher_kinds) / sizeof(watcher_kinds[0]); i++)
		if (!strcmp(watcher_kinds[i].name, watcher))
			k = &watcher_kinds[i];
	if (!k)
		return -1;
	pbx_buf_addf(out, "[Unit]\nDescription=%s\n", k->description);
	pbx_buf_addf(out, "After=network-online.target remote-fs.target %s.service\n",
		     slurm_daemon);
	if (k->preempt)
		pbx_buf_adds(out, "Wants=network-online.target\n");
	pbx_buf_addf(out, "\n[Service]\nExecStart=%s/usr/local/sbin/%s watch\n", root, k->name);
	if (k->preempt)
		pbx_buf_addf(out, "ExecStop=%s/usr/local/sbin/%s stop\nTimeoutStopSec=60\n", root,
			     k->name);
	pbx_buf_addf(out, "Restart=always\nRestartSec=%d\n", k->restart_sec);
	pbx_buf_adds(out, "\n[Install]\nWantedBy=multi-user.target\n");
	return 0;
}
