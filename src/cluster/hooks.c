/*
 * hooks.c - what the features add to the session (cluster.c), which names
 * none of them: on close, the node runs of the spend are brought in line
 * with what the verb did (spend.c); when the head does not answer, why the
 * cluster is powered off (autostop_off.c), in place of the connection's
 * error.  pbx's main installs them once, before any verb
 * (pbx_cluster_hooks_install); a program that does not (a unit test) opens
 * and closes clusters without them.
 */
#include "cluster/cluster_internal.h"

#include <stdint.h>

static void hooks_closing(struct pbx_cluster *c, int64_t now)
{
	pbx_cluster_spend_sync(c, now);
}

void pbx_cluster_hooks_install(void)
{
	static const struct pbx_cluster_hooks h = {
		.closing = hooks_closing,
		.stopped_why = pbx_cluster_stopped_why,
	};
	pbx_cluster_set_hooks(&h);
}
