/*
 * headdelete.c - what the head of a cluster with `autostop_action: delete`
 * needs to delete its own cluster with the laptop off (docs/autostop.md), and
 * the head of a cloud cluster that saves power
 * (slurm_sleep*.c) to make and remove its nodes: the stage gets a configuration for pbx on the head
 * and, on a VM, pbx itself; the bootstrap installs them and the head's
 * pbx-autostop (templates/autostop.sh) runs `pbx cluster stop --id ID
 * --self INSTANCE NAME` as the head's own cloud identity
 * (docs/head-identity.md) once every result is harvested.
 *
 * The configuration holds no credential: pbx on the head finds none and
 * asks the metadata server (Compute Engine) or IMDS (EC2), as on any VM.
 * It holds the cluster's whole template in config syntax (config_write.c:
 * every field, the cluster's sizes), naming the head's own key (made by
 * the bootstrap, authorized on every node) instead of the user's, and
 * after each start the head's store takes in the cluster's record
 * (record.c) from the user's: pbx on the head knows the cluster as the
 * user's pbx does, and would make its nodes as the user's pbx does.
 */
#include "cluster/cluster_internal.h"
#include "config/config_write.h"
#include "http/http.h"
#include "util/proc.h"
#include "util/quote.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The head's own key, made by its bootstrap (its HOME: pbx-head's). */
#define PBX_HEAD_SSH_KEY "~/.ssh/id_ed25519"

/* The endpoints a head on a VM leaves out of cloud (config_write.c's
 * keys): those on loopback, this machine's. */
static void drop_loopback_endpoints(json_t *cloud)
{
	static const char *const keys[] = { "endpoint", "billing_endpoint", "pricing_endpoint",
					    "storage_endpoint", "s3_endpoint" };
	size_t i;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *url = json_string_value(json_object_get(cloud, keys[i]));
		if (url && pbx_http_url_loopback(url))
			json_object_del(cloud, keys[i]);
	}
}

char *pbx_head_config(const struct pbx_cluster *c, int vm)
{
	const struct pbx_cluster_template *t = c->spec.t;
	json_t *clusters = json_object(), *clouds = json_object(), *root = json_object();
	json_t *cloud = pbx_config_cloud_write(c->cfg, t->cloud);
	char *s;
	/* the whole template as the cluster has it (its sizes), naming the
	 * head's own key instead of the user's */
	json_object_set_new(clusters, c->row.name, pbx_config_template_write(t, PBX_HEAD_SSH_KEY));
	if (vm && cloud)
		drop_loopback_endpoints(cloud);
	json_object_set_new(clouds, t->cloud, cloud);
	json_object_set_new(root, "clusters", clusters);
	json_object_set_new(root, "clouds", clouds);
	s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	return s;
}

int pbx_head_stage(const struct pbx_cluster *c, struct pbx_buf *tar, time_t now, int vm,
		   struct pbx_err *err)
{
	char *conf = pbx_head_config(c, vm), *self;
	int rc = pbx_ustar_file(tar, PBX_STAGE_DIR "/head-config.yaml", 0600, now, conf,
				strlen(conf), err);
	free(conf);
	if (rc < 0 || !vm)
		return rc; /* a node body runs this very binary (PBX_SELF_BIN) */
	self = pbx_self_path();
	rc = self ? pbx_stage_binary(tar, self, "pbx", now, err)
		  : pbx_err_set(err, "cannot find this pbx (/proc/self/exe) to put on the head");
	free(self);
	return rc;
}

int pbx_head_adopt(struct pbx_cluster *c, struct pbx_err *err)
{
	struct pbx_buf script = PBX_BUF_INIT, in = PBX_BUF_INIT;
	struct pbx_cluster_output o;
	char *record = pbx_cluster_record_json(c), *root;
	int rc;
	if (!record)
		return pbx_err_set(err, "cluster %s: cannot read its record from the store",
				   c->row.name);
	pbx_buf_adds(&in, record);
	free(record);
	root = xstrdup(c->nodes[0].root ? c->nodes[0].root : "");
	/* written whole, then taken in: a record cut short is never adopted */
	pbx_buf_adds(&script, "set -e; umask 077; f=");
	pbx_shell_quote(&script, root);
	pbx_buf_adds(&script, "/" PBX_NODE_DIR "/cluster-record.json; cat >\"$f.new\"; "
			      "mv -f \"$f.new\" \"$f\"; exec ");
	pbx_shell_quote(&script, root);
	pbx_buf_adds(&script, "/usr/local/sbin/pbx-head -q cluster adopt \"$f\"");
	rc = pbx_cluster_run(c, 0, script.buf, &in, &o, err);
	if (rc == 0)
		pbx_cluster_output_release(&o);
	else
		pbx_err_prefix(err, "the head's pbx could not take in the cluster's record");
	free(root);
	pbx_buf_release(&script);
	pbx_buf_release(&in);
	return rc;
}
