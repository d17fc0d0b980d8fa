/*
 * config_write.c - a cluster template written back in config syntax (see
 * config_write.h), the inverse of config_parse.c's template schema: what
 * it reads, with its defaults, parses back into an equal template
 * (tests/config/test_config_write.c compares every field).
 *
 * Rules: ssh_key is the caller's (never t->ssh_key, a local path); a value
 * equal to the parser's default (0, NULL, false) is left out, except
 * autostop, whose default differs by cloud and is always written.  A
 * cluster's sized template (pbx_template_sized) can hold what config syntax
 * cannot say, after `pbx cluster resize`: a group of 0 nodes is left out
 * (it has no node to make; count is 1 or more), min: above the group's
 * count is written as the count and min_nodes above the template's node
 * count as that count (both mean "all of them").
 */
#include "config/config_write.h"
#include "util/duration.h"
#include "util/money.h"

#include <stdint.h>
#include <string.h>

/*
 * Every field of struct pbx_cluster_template and struct pbx_node_group is
 * written below and compared by tests/config/test_config_write.c, which
 * reads config.h and fails on a member it does not compare or that no
 * template there sets.  Whoever adds a field: write it here, compare it
 * there and give it a value in tests/config/write/templates.yaml, then
 * update these sizes (LP64; a field that fits in padding leaves them as
 * they are, the test still sees it).
 */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct pbx_cluster_template) == 232,
	       "struct pbx_cluster_template changed: update config_write.c and its test");
_Static_assert(sizeof(struct pbx_node_group) == 56,
	       "struct pbx_node_group changed: update config_write.c and its test");
#endif

/* "KEY": s when s is set. */
static void put_str(json_t *o, const char *key, const char *s)
{
	if (s)
		json_object_set_new(o, key, json_string(s));
}

/* "KEY": n when n > 0. */
static void put_int(json_t *o, const char *key, long n)
{
	if (n > 0)
		json_object_set_new(o, key, json_integer(n));
}

/* "KEY": "1h30m" when seconds > 0 (or always, "off" for 0). */
static void put_duration(json_t *o, const char *key, long seconds, int always)
{
	char text[32];
	if (seconds <= 0 && !always)
		return;
	pbx_duration_format(seconds, text, sizeof(text));
	json_object_set_new(o, key, json_string(text));
}

/* An object put under `key` when it has a member, else dropped. */
static void put_obj(json_t *o, const char *key, json_t *v)
{
	if (json_object_size(v))
		json_object_set_new(o, key, v);
	else
		json_decref(v);
}

static json_t *write_group(const struct pbx_node_group *g)
{
	json_t *o = json_object();
	put_str(o, "name", g->name);
	json_object_set_new(o, "count", json_integer(g->count));
	put_str(o, "machine_type", g->machine_type);
	json_object_set_new(o, "gpus", json_integer(g->gpus));
	put_str(o, "gpu_type", g->gpu_type);
	json_object_set_new(o, "spot", json_boolean(g->spot));
	put_int(o, "cpus", g->cpus);
	if (g->min >= 0) { /* power saving: max is the count */
		json_object_set_new(o, "min", json_integer(g->min < g->count ? g->min : g->count));
		json_object_set_new(o, "max", json_integer(g->count));
	}
	return o;
}

static json_t *write_groups(const struct pbx_cluster_template *t)
{
	json_t *a = json_array();
	size_t i;
	for (i = 0; i < t->ngroups; i++)
		if (t->groups[i].count >= 1)
			json_array_append_new(a, write_group(&t->groups[i]));
	return a;
}

static json_t *write_head(const struct pbx_cluster_template *t)
{
	json_t *o = json_object();
	put_str(o, "machine_type", t->head_machine_type);
	put_str(o, "service_account", t->head_service_account);
	put_str(o, "instance_profile", t->head_instance_profile);
	return o;
}

static json_t *write_slurm(const struct pbx_cluster_template *t)
{
	json_t *o = json_object();
	put_int(o, "max_array_size", t->max_array_size);
	put_int(o, "max_job_count", t->max_job_count);
	put_duration(o, "suspend_time", t->suspend_time, 0);
	put_duration(o, "resume_timeout", t->resume_timeout, 0);
	return o;
}

static void put_list(json_t *o, const char *key, char *const *v, size_t n)
{
	json_t *a;
	size_t i;
	if (!n)
		return;
	a = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	json_object_set_new(o, key, a);
}

/* budget: a plain decimal, its trailing zeros dropped ("12.5", "250"). */
static void put_budget(json_t *o, int64_t nanos)
{
	char text[64];
	size_t len;
	if (nanos <= 0)
		return;
	pbx_money_format(nanos, 9, text, sizeof(text));
	len = strlen(text);
	while (len && text[len - 1] == '0')
		text[--len] = '\0';
	if (len && text[len - 1] == '.')
		text[--len] = '\0';
	json_object_set_new(o, "budget", json_string(text));
}

/* min_nodes, at most the nodes the written groups have. */
static void put_min_nodes(json_t *o, const struct pbx_cluster_template *t)
{
	int total = pbx_template_node_count(t);
	put_int(o, "min_nodes", t->min_nodes < total ? t->min_nodes : total);
}

/* A template of cloud ssh: its login node, work_dir and setup (port and
 * work_dir when not the defaults, 22 and "pbx"). */
static json_t *write_ssh(json_t *o, const struct pbx_cluster_template *t)
{
	put_str(o, "host", t->host);
	if (t->port != 22)
		put_int(o, "port", t->port);
	if (t->work_dir && strcmp(t->work_dir, "pbx") != 0)
		put_str(o, "work_dir", t->work_dir);
	put_str(o, "setup", t->setup);
	if (t->openssh)
		put_str(o, "transport", "openssh");
	return o;
}

json_t *pbx_config_template_write(const struct pbx_cluster_template *t, const char *ssh_key)
{
	json_t *o = json_object();
	put_str(o, "cloud", t->cloud);
	put_str(o, "login_user", t->login_user);
	put_str(o, "ssh_key", ssh_key);
	if (!strcmp(t->cloud, "ssh"))
		return write_ssh(o, t);
	put_str(o, "image", t->image);
	put_str(o, "subnet", t->subnet);
	put_obj(o, "head", write_head(t));
	json_object_set_new(o, "node_groups", write_groups(t));
	put_obj(o, "slurm", write_slurm(t));
	if (t->min_nodes > 0)
		put_min_nodes(o, t);
	put_list(o, "ssh_from", t->ssh_from, t->nssh_from);
	put_str(o, "proxy", t->proxy);
	put_list(o, "no_proxy", t->no_proxy, t->nno_proxy);
	if (t->compute_external_ips)
		json_object_set_new(o, "compute_external_ips", json_true());
	put_int(o, "boot_timeout", t->boot_timeout);
	put_duration(o, "autostop", t->autostop, 1);
	if (t->autostop_delete)
		json_object_set_new(o, "autostop_action", json_string("delete"));
	put_budget(o, t->budget);
	return o;
}

/* A cloud's places (config.h: struct pbx_gce_config / aws); never a
 * credential, a profile or a local path. */
json_t *pbx_config_cloud_write(const struct pbx_config *cfg, const char *cloud)
{
	json_t *o = json_object();
	if (!strcmp(cloud, "gce")) {
		put_str(o, "project", cfg->gce.project);
		put_str(o, "zone", cfg->gce.zone);
		put_list(o, "zones", cfg->gce.zones, cfg->gce.nzones);
		put_str(o, "endpoint", cfg->gce.endpoint);
		put_str(o, "storage_endpoint", cfg->gce.storage_endpoint);
	} else if (!strcmp(cloud, "aws")) {
		put_str(o, "region", cfg->aws.region);
		put_str(o, "endpoint", cfg->aws.endpoint);
		put_str(o, "s3_endpoint", cfg->aws.s3_endpoint);
		put_str(o, "subnet", cfg->aws.subnet);
		put_list(o, "subnets", cfg->aws.subnets, cfg->aws.nsubnets);
		put_int(o, "disk_gb", cfg->aws.disk_gb); /* the root volume of the nodes made */
	}
	return o;
}
