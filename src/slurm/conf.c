/*
 * conf.c - slurm.conf rendering (see conf.h).
 */
#include "slurm/conf.h"
#include "tmpl/tmpl.h"
#include "util/buf.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void pbx_slurm_gpu_type(const char *accel, char *out, size_t size)
{
	static const char *const prefixes[] = { "nvidia-tesla-", "nvidia-", NULL };
	size_t i, k = 0;
	if (size == 0)
		return;
	out[0] = '\0';
	if (!accel)
		return;
	for (i = 0; prefixes[i]; i++)
		if (!strncasecmp(accel, prefixes[i], strlen(prefixes[i]))) {
			accel += strlen(prefixes[i]);
			break;
		}
	for (i = 0; accel[i] && k + 1 < size; i++) {
		char ch = (char)tolower((unsigned char)accel[i]);
		if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		    ch == '_' || ch == '.')
			out[k++] = ch;
	}
	out[k] = '\0';
}

static void slurm_node_line(struct pbx_buf *b, const struct pbx_slurm_node *n)
{
	pbx_buf_addf(b, "NodeName=%s NodeHostname=%s NodeAddr=%s", n->name, n->hostname, n->addr);
	if (n->port)
		pbx_buf_addf(b, " Port=%d", n->port);
	if (n->cpus)
		pbx_buf_addf(b, " CPUs=%d", n->cpus);
	if (n->mem_mb)
		pbx_buf_addf(b, " RealMemory=%ld", n->mem_mb);
	if (n->gpus && n->gpu_type && *n->gpu_type)
		pbx_buf_addf(b, " Gres=gpu:%s:%d", n->gpu_type, n->gpus);
	else if (n->gpus)
		pbx_buf_addf(b, " Gres=gpu:%d", n->gpus);
	pbx_buf_adds(b, n->cloud ? " State=CLOUD\n" : " State=UNKNOWN\n");
}

int pbx_slurm_render_conf(const struct pbx_slurm_conf *c, char **out, struct pbx_err *err)
{
	struct pbx_buf tmpl = PBX_BUF_INIT, nodes = PBX_BUF_INIT, names = PBX_BUF_INIT;
	struct pbx_buf result = PBX_BUF_INIT;
	char port[16], sruns[32], arrays[24], jobs[24], auth[48] = "";
	const char *keep[] = { "ROOT", NULL };
	size_t i;
	int rc;

	*out = NULL;
	if (pbx_tmpl_get("slurm.conf.in", &tmpl, err) < 0)
		return -1;
	for (i = 0; i < c->nnodes; i++) {
		slurm_node_line(&nodes, &c->nodes[i]);
		pbx_buf_addf(&names, "%s%s", i ? "," : "", c->nodes[i].name);
	}
	pbx_buf_rtrim(&nodes);
	snprintf(port, sizeof(port), "%d", c->ctld_port);
	snprintf(sruns, sizeof(sruns), "%d-%d", c->srun_port_lo, c->srun_port_hi);
	snprintf(arrays, sizeof(arrays), "%ld", c->max_array_size ? c->max_array_size : 10001);
	snprintf(jobs, sizeof(jobs), "%ld", c->max_job_count ? c->max_job_count : 50000);
	if (c->cred_expire > 0)
		snprintf(auth, sizeof(auth), ",cred_expire=%d", c->cred_expire);
	{
		const char *vars[] = {
			"CLUSTER",
			c->cluster,
			"CTLD_HOST",
			c->ctld_host,
			"CTLD_ADDR",
			c->ctld_addr,
			"CTLD_PORT",
			port,
			"SRUN_PORTS",
			sruns,
			"SLURM_USER",
			c->slurm_user,
			"EXTRA",
			c->extra,
			"NODES",
			nodes.buf,
			"PARTITION_NODES",
			names.buf,
			"MAX_ARRAY_SIZE",
			arrays,
			"MAX_JOB_COUNT",
			jobs,
			"AUTH_OPTIONS",
			auth,
			NULL,
		};
		rc = pbx_tmpl_subst("slurm.conf.in", tmpl.buf, vars, keep, &result, err);
	}
	pbx_buf_release(&tmpl);
	pbx_buf_release(&nodes);
	pbx_buf_release(&names);
	if (rc < 0) {
		pbx_buf_release(&result);
		return -1;
	}
	*out = pbx_buf_detach(&result, NULL);
	return 0;
}
