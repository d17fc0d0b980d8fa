/*
 * record_parse.c - reading a cluster's record (struct pbx_cluster_record
 * in cluster_plan.h; record.c writes it) as hostile input: it comes from
 * another machine, and what it holds goes into this store, then into
 * slurm.conf, /etc/hosts, known_hosts, SSH and shell command lines.  So
 * every field must be there with its type and pass the rules the store's
 * own writers follow (names as config.c makes them, addresses as
 * inet_pton reads them, ports, states pbx writes); no other field may be.
 * An error names the record and the field, never echoes the value.
 */
#include "cluster/cluster_internal.h"
#include "util/addr.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORD_MAX_NODES    (PBX_CONFIG_MAX_GROUPS * PBX_CONFIG_MAX_COUNT + 1)
#define RECORD_MAX_TEXT     4096      /* a path; a key's base64 is at most 4 times that */
#define RECORD_MAX_TEMPLATE (1 << 20) /* the template's JSON */

/* Where the parser is: the record's name, the object being read
 * ("cluster", "nodes[3]"; "" at the top), the error. */
struct rp {
	const char *what;
	char path[64];
	struct pbx_err *err;
};

static int rp_fail(struct rp *p, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int rp_fail(struct rp *p, const char *key, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pbx_err_setc(p->err, PBX_EXIT_USAGE, "%s: %s%s%s: %s", p->what, p->path,
			    *p->path && key ? "." : "", key ? key : "", msg);
}

/* ------------------------------------------------------------- values */

/* Every byte of s in `set`, and 1..max of them. */
static int rp_chars(const char *s, const char *set, size_t max)
{
	size_t n = strlen(s);
	return n > 0 && n <= max && strspn(s, set) == n;
}

static int rp_in(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return 1;
	return 0;
}

static int ok_cloud(const char *s)
{
	static const char *const v[] = { "local", "gce", "aws", NULL };
	return rp_in(s, v);
}

static int ok_cluster_state(const char *s)
{
	static const char *const v[] = { "starting", "up", "degraded", "stopping", "stopped", NULL };
	return rp_in(s, v);
}

static int ok_node_state(const char *s)
{
	static const char *const v[] = {
		"planned",       "creating",      "running", "bootstrapping", "up",
		"down",          "failed",        "deleted", "stopped",       PBX_NODE_NOT_CREATED,
		PBX_NODE_ASLEEP, PBX_NODE_WAKING, NULL
	};
	return rp_in(s, v);
}

static int ok_name(const char *s)
{
	return pbx_config_name_ok(s);
}

static int ok_uid(const char *s)
{
	return pbx_cluster_uid_valid(s);
}

/* "" (not known yet) or an address as inet_pton reads it. */
static int ok_address(const char *s)
{
	return !*s || pbx_ip_literal_ok(s);
}

static int ok_instance(const char *s)
{
	return !*s || rp_chars(s,
			       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			       "0123456789._:/@-",
			       255);
}

static int ok_zone(const char *s)
{
	return !*s || rp_chars(s, "abcdefghijklmnopqrstuvwxyz0123456789-", 63);
}

/* "" (a VM's own root) or an absolute path of printable ASCII without a
 * "." or ".." part (a node body's prefix). */
static int ok_root(const char *s)
{
	const char *part;
	size_t i, n = strlen(s);
	if (!n)
		return 1;
	if (s[0] != '/' || n > RECORD_MAX_TEXT)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	for (part = s; part; part = strchr(part + 1, '/'))
		if (!strncmp(part, "/./", 3) || !strncmp(part, "/../", 4) || !strcmp(part, "/.") ||
		    !strcmp(part, "/.."))
			return 0;
	return 1;
}

/* The record's JSON of the template: parsed after (rp_template). */
static int ok_template_text(const char *s)
{
	return *s && strlen(s) <= RECORD_MAX_TEMPLATE;
}

/* NAME/NODE@HOST:PORT: matched against the nodes after (rp_pin_node). */
static int ok_hostport(const char *s)
{
	return *s && strlen(s) <= 256;
}

static int ok_key_type(const char *s)
{
	return rp_chars(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@._+-",
			64);
}

static int ok_key(const char *s)
{
	return rp_chars(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=",
			4 * RECORD_MAX_TEXT) &&
	       strlen(s) % 4 == 0;
}

/* ------------------------------------------------------------- fields */

/* o is an object with exactly the fields `keys`. */
static int rp_fields(struct rp *p, json_t *o, const char *const *keys)
{
	const char *k;
	json_t *v;
	size_t i;
	if (!json_is_object(o))
		return rp_fail(p, NULL, "not a JSON object");
	for (i = 0; keys[i]; i++)
		if (!json_object_get(o, keys[i]))
			return rp_fail(p, keys[i], "missing");
	json_object_foreach(o, k, v)
	{
		for (i = 0; keys[i] && strcmp(keys[i], k); i++)
			;
		if (!keys[i])
			return rp_fail(p, rp_chars(k, "abcdefghijklmnopqrstuvwxyz_", 32) ? k : NULL,
				       "an unknown field (a new field is a new version)");
	}
	return 0;
}

/* *out: a copy of string field `key` that passes ok(); with `nullable`,
 * null gives NULL. */
static int rp_text(struct rp *p, json_t *o, const char *key, int nullable, int (*ok)(const char *),
		   const char *rule, char **out)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (nullable && json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return rp_fail(p, key, "not a string%s", nullable ? " or null" : "");
	if (strlen(json_string_value(v)) != json_string_length(v) || !ok(json_string_value(v)))
		return rp_fail(p, key, "not %s", rule);
	*out = xstrdup(json_string_value(v));
	return 0;
}

static int rp_int(struct rp *p, json_t *o, const char *key, json_int_t lo, json_int_t hi,
		  json_int_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v))
		return rp_fail(p, key, "not an integer");
	*out = json_integer_value(v);
	if ((*out < lo || *out > hi) && lo == hi)
		return rp_fail(p, key, "not %lld", (long long)lo);
	if (*out < lo || *out > hi)
		return rp_fail(p, key, "not in %lld..%lld", (long long)lo, (long long)hi);
	return 0;
}

/* ------------------------------------------------------------ cluster */

/* The group names of template record `json` (as keys of *groups): it must
 * be a JSON object of `cloud` with named node groups. */
static int rp_template(struct rp *p, const char *json, const char *cloud, json_t **groups)
{
	json_t *t = json_loads(json, JSON_REJECT_DUPLICATES, NULL), *g;
	const char *c = json_string_value(json_object_get(t, "cloud")), *n;
	size_t i;
	int rc = 0;
	*groups = json_object();
	if (!json_is_object(t) || !c || strcmp(c, cloud) != 0)
		rc = rp_fail(p, "template_json", "not a JSON object of the cluster's cloud");
	json_array_foreach(json_object_get(t, "node_groups"), i, g)
	{
		n = json_string_value(json_object_get(g, "name"));
		if (rc == 0 && (!n || !pbx_config_name_ok(n)))
			rc = rp_fail(p, "template_json", "node_groups[%zu]: bad name", i);
		if (rc == 0)
			json_object_set_new(*groups, n, json_true());
	}
	if (rc == 0 && !json_object_size(*groups))
		rc = rp_fail(p, "template_json", "no node group");
	/* the user's key, which the nodes the head makes authorize */
	if (rc == 0 && json_object_get(t, "user_key") &&
	    !pbx_pubkey_line_ok(json_string_value(json_object_get(t, "user_key"))))
		rc = rp_fail(p, "template_json", "user_key: not one public key line");
	/* the budget's deadline the user's start computed (unix s) */
	if (rc == 0 && json_object_get(t, "budget_until") &&
	    (!json_is_integer(json_object_get(t, "budget_until")) ||
	     json_integer_value(json_object_get(t, "budget_until")) <= 0))
		rc = rp_fail(p, "template_json", "budget_until: not a time in unix seconds");
	json_decref(t);
	return rc;
}

static int rp_cluster(struct rp *p, json_t *o, struct pbx_cluster_row *r, json_t **groups)
{
	static const char *const keys[] = { "name",  "uid",           "cloud",
					    "state", "template_json", "template_name",
					    "slot",  "created",       NULL };
	json_int_t slot, created;
	snprintf(p->path, sizeof(p->path), "cluster");
	if (rp_fields(p, o, keys) < 0 ||
	    rp_text(p, o, "name", 0, ok_name, "a cluster name ([a-z][a-z0-9-]{0,30})", &r->name) <
		    0 ||
	    rp_text(p, o, "uid", 0, ok_uid, "a cluster id", &r->uid) < 0 ||
	    rp_text(p, o, "cloud", 0, ok_cloud, "local, gce or aws", &r->cloud) < 0 ||
	    rp_text(p, o, "state", 0, ok_cluster_state, "a live cluster's state", &r->state) < 0 ||
	    rp_text(p, o, "template_json", 0, ok_template_text, "a template's JSON",
		    &r->template_json) < 0 ||
	    rp_text(p, o, "template_name", 1, ok_name, "a template name", &r->template_name) < 0 ||
	    rp_int(p, o, "slot", 0, 65535, &slot) < 0 ||
	    rp_int(p, o, "created", 0, (json_int_t)1 << 40, &created) < 0 ||
	    rp_template(p, r->template_json, r->cloud, groups) < 0)
		return -1;
	r->slot = (int)slot;
	r->created = created;
	return 0;
}

/* -------------------------------------------------------------- nodes */

/* A compute node's name is GROUPk (k from 1, no leading zero) of one of
 * the template's groups. */
static int rp_compute_name(const char *name, json_t *groups)
{
	const char *g;
	json_t *v;
	json_object_foreach(groups, g, v)
	{
		size_t l = strlen(g);
		if (!strncmp(name, g, l) && name[l] >= '1' && name[l] <= '9' &&
		    strspn(name + l, "0123456789") == strlen(name + l) && strlen(name + l) <= 6)
			return 1;
	}
	return 0;
}

static int rp_node_name(struct rp *p, struct pbx_node_row *n, json_t *groups, json_t *seen)
{
	if (strcmp(n->role, "head") != 0 && strcmp(n->role, "compute") != 0)
		return rp_fail(p, "role", "not head or compute");
	if (!strcmp(n->role, "head") ? strcmp(n->name, "head") != 0
				     : !rp_compute_name(n->name, groups))
		return rp_fail(p, "name", "not a node name of the template (head, GROUP1, ...)");
	if (json_object_get(seen, n->name))
		return rp_fail(p, "name", "a second node of that name");
	json_object_set_new(seen, n->name, json_true());
	return 0;
}

static int rp_node(struct rp *p, json_t *o, struct pbx_node_row *n, json_t *groups, json_t *seen)
{
	static const char *const keys[] = { "name", "role",           "address", "ssh_port",
					    "gpus", "instance_id",    "root",    "state",
					    "zone", "public_address", NULL };
	json_int_t port, gpus;
	if (rp_fields(p, o, keys) < 0 ||
	    rp_text(p, o, "name", 0, ok_name, "a node name", &n->name) < 0 ||
	    rp_text(p, o, "role", 0, ok_name, "head or compute", &n->role) < 0 ||
	    rp_node_name(p, n, groups, seen) < 0 ||
	    rp_text(p, o, "address", 0, ok_address, "an IP address", &n->address) < 0 ||
	    rp_int(p, o, "ssh_port", 1, 65535, &port) < 0 ||
	    rp_int(p, o, "gpus", 0, PBX_CONFIG_MAX_GPUS, &gpus) < 0 ||
	    rp_text(p, o, "instance_id", 1, ok_instance, "an instance id", &n->instance_id) < 0 ||
	    rp_text(p, o, "root", 0, ok_root, "an absolute path or \"\"", &n->root) < 0 ||
	    rp_text(p, o, "state", 0, ok_node_state, "a node state", &n->state) < 0 ||
	    rp_text(p, o, "zone", 1, ok_zone, "a zone", &n->zone) < 0 ||
	    rp_text(p, o, "public_address", 1, ok_address, "an IP address", &n->public_address) < 0)
		return -1;
	n->ssh_port = (int)port;
	n->gpus = (int)gpus;
	return 0;
}

static int rp_nodes(struct rp *p, json_t *a, struct pbx_cluster_record *rec, json_t *groups)
{
	json_t *seen = json_object(), *o;
	size_t i;
	int rc = 0;
	snprintf(p->path, sizeof(p->path), "nodes");
	if (!json_is_array(a) || !json_array_size(a) || json_array_size(a) > RECORD_MAX_NODES)
		rc = rp_fail(p, NULL, "not an array of 1 to %d nodes", RECORD_MAX_NODES);
	if (rc == 0)
		rec->nodes = xcalloc(json_array_size(a), sizeof(*rec->nodes));
	json_array_foreach(a, i, o)
	{
		if (rc < 0)
			break;
		snprintf(p->path, sizeof(p->path), "nodes[%zu]", i);
		rec->nnodes = i + 1;
		rc = rp_node(p, o, &rec->nodes[i], groups, seen);
	}
	snprintf(p->path, sizeof(p->path), "nodes");
	if (rc == 0 && (!json_object_get(seen, "head") || strcmp(rec->nodes[0].name, "head")))
		rc = rp_fail(p, NULL, "the head is not the first node");
	json_decref(seen);
	return rc;
}

/* --------------------------------------------------------------- pins */

/* The node pin `hostport` (NAME/NODE@HOST:PORT) is for: NAME the
 * cluster's, NODE one of its nodes, HOST its address or public address
 * and PORT its SSH port. */
static const struct pbx_node_row *rp_pin_node(const struct pbx_cluster_record *rec,
					      const char *hostport)
{
	size_t i, l = strlen(rec->row.name);
	if (strncmp(hostport, rec->row.name, l) != 0 || hostport[l] != '/')
		return NULL;
	for (i = 0; i < rec->nnodes; i++) {
		const struct pbx_node_row *n = &rec->nodes[i];
		const char *hosts[2] = { n->address, n->public_address };
		size_t k;
		for (k = 0; k < 2; k++) {
			char *want;
			int same;
			if (!hosts[k] || !*hosts[k])
				continue;
			want = xasprintf("%s/%s@%s:%d", rec->row.name, n->name, hosts[k],
					 n->ssh_port);
			same = !strcmp(want, hostport);
			free(want);
			if (same)
				return n;
		}
	}
	return NULL;
}

static int rp_pin(struct rp *p, json_t *o, const struct pbx_cluster_record *rec,
		  struct pbx_record_pin *pin, json_t *seen)
{
	static const char *const keys[] = { "hostport", "type", "key", NULL };
	if (rp_fields(p, o, keys) < 0 ||
	    rp_text(p, o, "hostport", 0, ok_hostport, "NAME/NODE@ADDRESS:PORT", &pin->hostport) <
		    0 ||
	    rp_text(p, o, "type", 0, ok_key_type, "an SSH key type", &pin->type) < 0 ||
	    rp_text(p, o, "key", 0, ok_key, "a key in base64", &pin->key) < 0)
		return -1;
	if (!rp_pin_node(rec, pin->hostport))
		return rp_fail(p, "hostport",
			       "not NAME/NODE@ADDRESS:SSH_PORT of a node of the record");
	if (json_object_get(seen, pin->hostport))
		return rp_fail(p, "hostport", "a second pin of that name");
	json_object_set_new(seen, pin->hostport, json_true());
	return 0;
}

static int rp_pins(struct rp *p, json_t *a, struct pbx_cluster_record *rec)
{
	json_t *seen = json_object(), *o;
	size_t i;
	int rc = 0;
	snprintf(p->path, sizeof(p->path), "pins");
	if (!json_is_array(a) || json_array_size(a) > 2 * rec->nnodes)
		rc = rp_fail(p, NULL, "not an array of at most 2 pins a node");
	if (rc == 0)
		rec->pins = xcalloc(json_array_size(a) + 1, sizeof(*rec->pins));
	json_array_foreach(a, i, o)
	{
		if (rc < 0)
			break;
		snprintf(p->path, sizeof(p->path), "pins[%zu]", i);
		rec->npins = i + 1;
		rc = rp_pin(p, o, rec, &rec->pins[i], seen);
	}
	json_decref(seen);
	return rc;
}

/* ------------------------------------------------------------ record */

static int rp_record(struct rp *p, json_t *root, struct pbx_cluster_record *rec)
{
	static const char *const keys[] = { "version", "cluster", "nodes", "pins", NULL };
	json_t *groups = NULL;
	json_int_t version;
	int rc;
	if (rp_fields(p, root, keys) < 0)
		return -1;
	if (rp_int(p, root, "version", PBX_CLUSTER_RECORD_VERSION, PBX_CLUSTER_RECORD_VERSION,
		   &version) < 0)
		return -1;
	rc = rp_cluster(p, json_object_get(root, "cluster"), &rec->row, &groups);
	if (rc == 0)
		rc = rp_nodes(p, json_object_get(root, "nodes"), rec, groups);
	if (rc == 0)
		rc = rp_pins(p, json_object_get(root, "pins"), rec);
	json_decref(groups);
	return rc;
}

int pbx_cluster_record_parse(const char *text, size_t len, const char *what,
			     struct pbx_cluster_record *rec, struct pbx_err *err)
{
	struct rp p = { .what = what, .err = err };
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	int rc;
	memset(rec, 0, sizeof(*rec));
	if (!root)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "%s: not a JSON document (line %d, column %d)", what, jerr.line,
				    jerr.column);
	rc = rp_record(&p, root, rec);
	json_decref(root);
	if (rc < 0)
		pbx_cluster_record_release(rec);
	return rc;
}

void pbx_cluster_record_release(struct pbx_cluster_record *rec)
{
	size_t i;
	pbx_cluster_row_free(&rec->row);
	pbx_node_rows_free(rec->nodes, rec->nnodes);
	for (i = 0; i < rec->npins; i++) {
		free(rec->pins[i].hostport);
		free(rec->pins[i].type);
		free(rec->pins[i].key);
	}
	free(rec->pins);
	memset(rec, 0, sizeof(*rec));
}
