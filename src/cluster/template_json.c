/*
 * template_json.c - a cluster template as JSON, kept in the store with the
 * cluster so `pbx cluster show` can say what it was built from.  Its group
 * counts are the cluster's size: `pbx cluster resize` changes them there,
 * and every verb sees the template with those counts (pbx_template_sized);
 * `pbx cluster start --autostop` records its value there likewise.
 */
#include "cluster/cluster_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static json_t *opt_string(const char *s)
{
	return s ? json_string(s) : json_null();
}

char *pbx_template_json(const struct pbx_cluster_template *t)
{
	json_t *o = json_object(), *groups = json_array();
	char *s;
	size_t i;
	json_object_set_new(o, "name", json_string(t->name));
	json_object_set_new(o, "cloud", json_string(t->cloud));
	json_object_set_new(o, "login_user", opt_string(t->login_user));
	json_object_set_new(o, "ssh_key", opt_string(t->ssh_key));
	json_object_set_new(o, "image", opt_string(t->image));
	json_object_set_new(o, "head_machine_type", opt_string(t->head_machine_type));
	if (t->head_service_account)
		json_object_set_new(o, "head_service_account",
				    json_string(t->head_service_account));
	if (t->head_instance_profile)
		json_object_set_new(o, "head_instance_profile",
				    json_string(t->head_instance_profile));
	for (i = 0; i < t->ngroups; i++) {
		const struct pbx_node_group *g = &t->groups[i];
		json_t *j = json_object();
		json_object_set_new(j, "name", json_string(g->name));
		json_object_set_new(j, "count", json_integer(g->count));
		json_object_set_new(j, "machine_type", opt_string(g->machine_type));
		json_object_set_new(j, "gpus", json_integer(g->gpus));
		json_object_set_new(j, "gpu_type", opt_string(g->gpu_type));
		json_object_set_new(j, "spot", json_boolean(g->spot));
		json_array_append_new(groups, j);
	}
	json_object_set_new(o, "node_groups", groups);
	if (t->min_nodes)
		json_object_set_new(o, "min_nodes", json_integer(t->min_nodes));
	if (t->nssh_from) {
		json_t *from = json_array();
		for (i = 0; i < t->nssh_from; i++)
			json_array_append_new(from, json_string(t->ssh_from[i]));
		json_object_set_new(o, "ssh_from", from);
	}
	if (t->proxy)
		json_object_set_new(o, "proxy", json_string(t->proxy));
	if (t->boot_timeout)
		json_object_set_new(o, "boot_timeout", json_integer(t->boot_timeout));
	if (t->compute_external_ips)
		json_object_set_new(o, "compute_external_ips", json_true());
	json_object_set_new(o, "autostop", json_integer(t->autostop));
	if (t->autostop_delete)
		json_object_set_new(o, "autostop_action", json_string("delete"));
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* "203.0.113.0/24, 198.51.100.7/32" from the record's ssh_from, or
 * "anywhere (0.0.0.0/0)" without one.  Caller frees. */
static char *exposure_blocks(json_t *rec)
{
	json_t *from = json_object_get(rec, "ssh_from"), *v;
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	json_array_foreach(from, i, v) if (json_is_string(v))
		pbx_buf_addf(&b, "%s%s", b.len ? ", " : "", json_string_value(v));
	if (!b.len)
		pbx_buf_adds(&b, "anywhere (0.0.0.0/0; the template's ssh_from narrows it)");
	return pbx_buf_detach(&b, NULL);
}

char *pbx_template_ssh_exposure(const char *json)
{
	json_t *rec = json ? json_loads(json, 0, NULL) : NULL;
	const char *cloud = json_string_value(json_object_get(rec, "cloud"));
	char *blocks = exposure_blocks(rec), *s;
	if (cloud && !strcmp(cloud, "local"))
		s = xstrdup(
			"SSH (port 22): the nodes listen on loopback addresses of this machine only");
	else if (cloud && !strcmp(cloud, "gce") &&
		 json_is_true(json_object_get(rec, "compute_external_ips")))
		s = xasprintf("SSH (port 22) reaches every node (compute_external_ips) from %s",
			      blocks);
	else if (cloud && !strcmp(cloud, "gce"))
		s = xasprintf(
			"SSH (port 22) reaches the head from %s; compute nodes have no external "
			"address (reached through the head; outbound through the region's Cloud NAT)",
			blocks);
	else if (cloud && !strcmp(cloud, "aws"))
		s = xasprintf(
			"SSH (port 22) reaches the nodes of the cluster's security group from %s (those "
			"with a public address: pbx reaches the others through the head); nothing "
			"else is admitted from outside the group",
			blocks);
	else
		s = xasprintf("SSH (port 22) from %s", blocks);
	free(blocks);
	json_decref(rec);
	return s;
}

/* The count the record gives group `name`, or -1. */
static int recorded_count(json_t *rec, const char *name)
{
	json_t *g;
	size_t i;
	json_array_foreach(json_object_get(rec, "node_groups"), i, g)
	{
		const char *n = json_string_value(json_object_get(g, "name"));
		json_t *c = json_object_get(g, "count");
		if (n && !strcmp(n, name) && json_is_integer(c) && json_integer_value(c) >= 0 &&
		    json_integer_value(c) <= 100000)
			return (int)json_integer_value(c);
	}
	return -1;
}

void pbx_template_sized(const struct pbx_cluster_template *t, const char *json,
			struct pbx_cluster_template *out, struct pbx_node_group **groups)
{
	json_t *rec = json ? json_loads(json, 0, NULL) : NULL, *over;
	size_t i;
	*out = *t;
	*groups = xcalloc(t->ngroups ? t->ngroups : 1, sizeof(**groups));
	for (i = 0; i < t->ngroups; i++) {
		int n = rec ? recorded_count(rec, t->groups[i].name) : -1;
		(*groups)[i] = t->groups[i];
		if (n >= 0)
			(*groups)[i].count = n;
	}
	out->groups = *groups;
	over = json_object_get(rec, "autostop_override");
	if (json_is_integer(over) && json_integer_value(over) >= 0 &&
	    json_integer_value(over) <= PBX_AUTOSTOP_MAX_S)
		out->autostop = (int)json_integer_value(over);
	json_decref(rec);
}

char *pbx_template_json_resized(const char *json, const char *group, int count)
{
	json_t *rec = json_loads(json, 0, NULL), *g;
	char *s = NULL;
	size_t i;
	if (!rec)
		return NULL;
	json_array_foreach(json_object_get(rec, "node_groups"), i, g)
	{
		const char *n = json_string_value(json_object_get(g, "name"));
		if (n && !strcmp(n, group))
			json_object_set_new(g, "count", json_integer(count));
	}
	s = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(rec);
	return s;
}

char *pbx_template_json_autostop(const char *json, int seconds)
{
	json_t *rec = json ? json_loads(json, 0, NULL) : NULL;
	char *s = NULL;
	if (json_is_object(rec)) {
		json_object_set_new(rec, "autostop_override", json_integer(seconds));
		s = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
	}
	json_decref(rec);
	return s;
}

int pbx_pubkey_line_ok(const char *s)
{
	size_t type, blob, len = s ? strlen(s) : 0, i;
	if (len == 0 || len > PBX_PUBKEY_LINE_MAX)
		return 0;
	type = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.@");
	if (type == 0 || s[type] != ' ')
		return 0;
	blob = strspn(s + type + 1,
		      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=");
	if (blob == 0 || (s[type + 1 + blob] && s[type + 1 + blob] != ' '))
		return 0;
	for (i = type + 1 + blob; i < len; i++) /* the comment: printable ASCII */
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	return 1;
}

/* `json` with `key` set to `v` (stolen; NULL: the key removed); caller
 * frees (NULL when json is not a JSON object). */
static char *template_json_with(const char *json, const char *key, json_t *v)
{
	json_t *rec = json ? json_loads(json, 0, NULL) : NULL;
	char *s = NULL;
	if (json_is_object(rec)) {
		if (v)
			json_object_set_new(rec, key, v);
		else
			json_object_del(rec, key);
		v = NULL;
		s = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
	}
	json_decref(v);
	json_decref(rec);
	return s;
}

char *pbx_template_json_user_key(const char *json, const char *key)
{
	return template_json_with(json, "user_key", key ? json_string(key) : NULL);
}

char *pbx_template_user_key(const char *json)
{
	json_t *rec = json ? json_loads(json, 0, NULL) : NULL;
	const char *key = json_string_value(json_object_get(rec, "user_key"));
	char *s = key && pbx_pubkey_line_ok(key) ? xstrdup(key) : NULL;
	json_decref(rec);
	return s;
}

char *pbx_template_json_budget_until(const char *json, int64_t until)
{
	return template_json_with(json, "budget_until", until > 0 ? json_integer(until) : NULL);
}

int64_t pbx_template_budget_until(const char *json)
{
	json_t *rec = json ? json_loads(json, 0, NULL) : NULL;
	json_t *v = json_object_get(rec, "budget_until");
	int64_t until = json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
	json_decref(rec);
	return until;
}
