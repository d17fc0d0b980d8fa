/*
 * record.c - writing a cluster's record: its store row, its nodes and
 * their pinned host keys as one JSON document (struct pbx_cluster_record
 * in cluster_plan.h), for another pbx's store to take in with `pbx cluster
 * adopt` (record_parse.c reads it, adopt.c writes it there).  pbx on a
 * cluster's head needs the cluster as the user's store knows it to run
 * SLURM's power saving there (docs/power-saving.md, "A store on the
 * head").
 */
#include "cluster/cluster_internal.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *record_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* The public half of c's login key (KEY.pub) when it is one key line,
 * else NULL; caller frees. */
static char *record_user_key(const struct pbx_cluster *c)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_buf pub = PBX_BUF_INIT;
	char *path = c->key_path ? xasprintf("%s.pub", c->key_path) : NULL, *key = NULL;
	if (path && pbx_read_file(path, &pub, &err) == 0) {
		pbx_buf_rtrim(&pub);
		if (pbx_pubkey_line_ok(pub.buf))
			key = xstrdup(pub.buf);
	}
	pbx_buf_release(&pub);
	free(path);
	return key;
}

/* The template record the head gets: the store's, with the user's public
 * key (user_key) where pbx on a cloud head makes nodes, so they authorize
 * it too; caller frees. */
static char *record_template(const struct pbx_cluster *c)
{
	char *key = NULL, *json = NULL, *with_budget;
	if (strcmp(c->row.cloud, "local") != 0 && pbx_head_runs_pbx(c) && c->here < 0)
		key = record_user_key(c);
	if (key)
		json = pbx_template_json_user_key(c->row.template_json, key);
	free(key);
	if (!json)
		json = xstrdup(c->row.template_json);
	/* the budget's deadline, as the user's start computed it (the head
	 * has no prices; none: removed); pbx on the cluster keeps the one its
	 * record got */
	with_budget = c->budget_until > 0 || c->here < 0
			      ? pbx_template_json_budget_until(json, c->budget_until)
			      : NULL;
	if (with_budget) {
		free(json);
		json = with_budget;
	}
	return json;
}

static json_t *record_cluster(const struct pbx_cluster *c)
{
	const struct pbx_cluster_row *r = &c->row;
	char *tmpl = record_template(c);
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(r->name));
	json_object_set_new(o, "uid", json_string(r->uid));
	json_object_set_new(o, "cloud", json_string(r->cloud));
	json_object_set_new(o, "state", json_string(r->state));
	json_object_set_new(o, "template_json", json_string(tmpl));
	free(tmpl);
	json_object_set_new(o, "template_name", record_str(r->template_name));
	json_object_set_new(o, "slot", json_integer(r->slot));
	json_object_set_new(o, "created", json_integer(r->created));
	return o;
}

static json_t *record_node(const struct pbx_node_row *n)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(n->name));
	json_object_set_new(o, "role", json_string(n->role));
	json_object_set_new(o, "address", json_string(n->address ? n->address : ""));
	json_object_set_new(o, "ssh_port", json_integer(n->ssh_port));
	json_object_set_new(o, "gpus", json_integer(n->gpus));
	json_object_set_new(o, "instance_id", record_str(n->instance_id));
	json_object_set_new(o, "root", json_string(n->root ? n->root : ""));
	json_object_set_new(o, "state", json_string(n->state));
	json_object_set_new(o, "zone", record_str(n->zone));
	json_object_set_new(o, "public_address", record_str(n->public_address));
	return o;
}

/* Whether pin `hostport` is node n's at its address or public address
 * and SSH port (NAME/NODE@HOST:PORT): a pin of an address the node no
 * longer has is left out. */
static int record_pin_current(const char *cluster, const struct pbx_node_row *n,
			      const char *hostport)
{
	const char *hosts[2] = { n->address, n->public_address };
	size_t i;
	int same = 0;
	for (i = 0; i < 2 && !same; i++) {
		char *want;
		if (!hosts[i] || !*hosts[i])
			continue;
		want = xasprintf("%s/%s@%s:%d", cluster, n->name, hosts[i], n->ssh_port);
		same = !strcmp(want, hostport);
		free(want);
	}
	return same;
}

/* Appends node n's current pins to `pins`; -1 when the store fails. */
static int record_node_pins(const struct pbx_cluster *c, const struct pbx_node_row *n, json_t *pins)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_hostkey_row *v = NULL;
	char *prefix = xasprintf("%s/%s@", c->row.name, n->name);
	size_t nv = 0, i;
	int rc = pbx_store_hostkey_list_prefix(c->store, prefix, &v, &nv, &err);
	for (i = 0; rc == 0 && i < nv; i++)
		if (record_pin_current(c->row.name, n, v[i].hostport))
			json_array_append_new(pins, json_pack("{s:s, s:s, s:s}", "hostport",
							      v[i].hostport, "type", v[i].type,
							      "key", v[i].key_b64));
	pbx_hostkey_rows_free(v, nv);
	free(prefix);
	return rc;
}

char *pbx_cluster_record_json(const struct pbx_cluster *c)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_node_row *rows = NULL;
	size_t n = 0, i;
	json_t *o, *nodes, *pins;
	char *s = NULL;
	if (pbx_store_node_list(c->store, c->row.id, &rows, &n, &err) < 0)
		return NULL;
	o = json_object();
	nodes = json_array();
	pins = json_array();
	json_object_set_new(o, "version", json_integer(PBX_CLUSTER_RECORD_VERSION));
	json_object_set_new(o, "cluster", record_cluster(c));
	for (i = 0; i < n; i++)
		json_array_append_new(nodes, record_node(&rows[i]));
	json_object_set_new(o, "nodes", nodes);
	json_object_set_new(o, "pins", pins);
	for (i = 0; i < n; i++)
		if (record_node_pins(c, &rows[i], pins) < 0)
			break;
	if (i == n)
		s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	pbx_node_rows_free(rows, n);
	return s;
}

int pbx_cluster_record(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       char **json, struct pbx_err *err)
{
	struct pbx_cluster *c;
	*json = NULL;
	if (pbx_cluster_name_check(name, err) < 0 || pbx_cluster_open(st, cfg, name, &c, err) < 0)
		return -1;
	*json = pbx_cluster_record_json(c);
	pbx_cluster_close(c);
	return *json ? 0 : pbx_err_set(err, "cannot read cluster %s's nodes and host keys", name);
}
