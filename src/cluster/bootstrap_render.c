/*
 * bootstrap_render.c - gres.conf and the NFS export line, rendered for the
 * node bootstrap's stage (see bootstrap_render.h).
 */
#include "cluster/bootstrap_render.h"

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
