/*
 * template_json.c - a cluster template as JSON, kept in the store with the
 * cluster so `pbx cluster show` can say what it was built from.
 */
#include "cluster/cluster_internal.h"

#include <jansson.h>
#include <stdlib.h>

static json_t *pbx_opt_string(const char *s)
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
	json_object_set_new(o, "login_user", pbx_opt_string(t->login_user));
	json_object_set_new(o, "ssh_key", pbx_opt_string(t->ssh_key));
	json_object_set_new(o, "image", pbx_opt_string(t->image));
	json_object_set_new(o, "head_machine_type", pbx_opt_string(t->head_machine_type));
	for (i = 0; i < t->ngroups; i++) {
		const struct pbx_node_group *g = &t->groups[i];
		json_t *j = json_object();
		json_object_set_new(j, "name", json_string(g->name));
		json_object_set_new(j, "count", json_integer(g->count));
		json_object_set_new(j, "machine_type", pbx_opt_string(g->machine_type));
		json_object_set_new(j, "gpus", json_integer(g->gpus));
		json_object_set_new(j, "gpu_type", pbx_opt_string(g->gpu_type));
		json_object_set_new(j, "spot", json_boolean(g->spot));
		json_array_append_new(groups, j);
	}
	json_object_set_new(o, "node_groups", groups);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}
