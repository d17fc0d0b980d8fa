/*
 * config_parse.c - the schema of config.yaml: walks a yamltree document and
 * fills struct pbx_config, checking keys, types, ranges, names and defaults
 * (rules listed in config.h).
 */
#include "config/config_internal.h"
#include "http/http.h"
#include "util/fs.h"
#include "util/duration.h"
#include "util/money.h"
#include "util/size.h"
#include "util/xalloc.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define PBX_STR_OPT (PBX_YSTR_NULL_OK | PBX_YSTR_ONE_LINE)

enum pbx_cloud_kind { PBX_CLOUD_LOCAL, PBX_CLOUD_GCE, PBX_CLOUD_AWS, PBX_CLOUD_SSH };

static const char *const top_keys[] = { "clusters",  "clouds",         "prices",
					"publisher", "data_cache_max", NULL };
static const char *const prices_keys[] = { "currency",    "max_age",    "hourly",
					   "spot_hourly", "gpu_hourly", NULL };
static const char *const cloud_names[] = { "local", "gce", "aws", "ssh", NULL };
static const char *const template_keys[] = { "cloud",
					     "login_user",
					     "ssh_key",
					     "image",
					     "head",
					     "node_groups",
					     "slurm",
					     "min_nodes",
					     "ssh_from",
					     "subnet",
					     "compute_external_ips",
					     "boot_timeout",
					     "autostop",
					     "autostop_action",
					     "budget",
					     "host",
					     "port",
					     "work_dir",
					     "setup",
					     "transport",
					     "proxy",
					     "no_proxy",
					     NULL };
/* what a template of cloud ssh may have (pbx builds nothing there) */
static const char *const ssh_template_keys[] = { "cloud", "login_user", "ssh_key",
						 "host",  "port",       "work_dir",
						 "setup", "transport",  NULL };
/* transport: how pbx logs in to a cloud ssh cluster (docs/ssh-clusters.md) */
static const char *const transport_names[] = { "pbx", "openssh", NULL };
static const char *const head_keys[] = { "machine_type", "service_account", "instance_profile",
					 NULL };
static const char *const slurm_keys[] = { "max_array_size", "max_job_count", "suspend_time",
					  "resume_timeout", NULL };
static const char *const group_keys[] = { "name", "count", "machine_type", "gpus", "gpu_type",
					  "spot", "cpus",  "min",          "max",  NULL };
static const char *const gce_keys[] = { "project",          "zone",     "zones",
					"credentials",      "endpoint", "billing_endpoint",
					"storage_endpoint", NULL };
static const char *const aws_keys[] = { "region",           "profile",     "endpoint",
					"pricing_endpoint", "s3_endpoint", "subnet",
					"subnets",          "disk_gb",     NULL };
static const char *const local_keys[] = { "address_base", "ssh_port", "slurm_port_base", NULL };

/* Optional one-line string under `key`; leaves *out alone when absent. */
static int opt_str(const struct pbx_ynode *map, const char *key, char **out, struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(map, key);
	char *s;
	if (!n)
		return 0;
	if (pbx_ynode_str(n, PBX_STR_OPT, &s, err) < 0)
		return -1;
	if (s) {
		free(*out);
		*out = s;
	}
	return 0;
}

/* Optional path under `key`, tilde-expanded; *line gets its line. */
static int opt_path(const struct pbx_ynode *map, const char *key, char **out, int *line,
		    struct pbx_err *err)
{
	char *raw = NULL;
	if (opt_str(map, key, &raw, err) < 0)
		return -1;
	if (raw) {
		*out = pbx_expand_tilde(raw);
		*line = pbx_ymap_get(map, key)->line;
		free(raw);
	}
	return 0;
}

static int opt_int(const struct pbx_ynode *map, const char *key, long min, long max, int *out,
		   struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(map, key);
	long v;
	if (!n)
		return 0;
	if (pbx_ynode_int(n, min, max, &v, err) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

static int opt_map(const struct pbx_ynode *n, const char *const *keys, struct pbx_err *err)
{
	if (!n)
		return 0;
	if (pbx_ynode_expect_map(n, err) < 0)
		return -1;
	return pbx_ymap_check_keys(n, keys, err);
}

bool pbx_config_name_ok(const char *name)
{
	size_t i, len = strlen(name);
	if (len < 1 || len > 31 || name[0] < 'a' || name[0] > 'z' || name[len - 1] == '-')
		return false;
	for (i = 1; i < len; i++)
		if (!(islower((unsigned char)name[i]) || isdigit((unsigned char)name[i]) ||
		      name[i] == '-'))
			return false;
	return true;
}

static int check_name(const struct pbx_ynode *n, const char *what, struct pbx_err *err)
{
	char shown[PBX_YSHOW_SIZE];
	if (strlen(n->value) == n->len && pbx_config_name_ok(n->value))
		return 0;
	pbx_ynode_show(n, shown);
	return pbx_ynode_error(n, err,
			       "invalid %s name '%s': must match "
			       "[a-z][a-z0-9-]{0,30} and not end in '-'",
			       what, shown);
}

/* A POSIX-ish user name: [A-Za-z0-9_][A-Za-z0-9_.-]{0,31}. */
static bool user_ok(const char *s)
{
	size_t i, len = strlen(s);
	if (len < 1 || len > 32 || s[0] == '-' || s[0] == '.')
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

static int parse_login(const struct pbx_ynode *m, int cloud, struct pbx_cluster_template *t,
		       struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(m, "login_user");
	if (!n) {
		if (cloud != PBX_CLOUD_LOCAL)
			return pbx_ymap_missing(m, "login_user",
						cloud == PBX_CLOUD_GCE ? "required for cloud gce"
								       : "required for cloud aws",
						err);
		t->login_user = xstrdup("root");
		return 0;
	}
	if (pbx_ynode_str(n, PBX_YSTR_ONE_LINE, &t->login_user, err) < 0)
		return -1;
	if (!user_ok(t->login_user))
		return pbx_ynode_error(n, err, "invalid user name '%.40s'", t->login_user);
	return 0;
}

static int parse_image(const struct pbx_ynode *m, int cloud, struct pbx_cluster_template *t,
		       struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(m, "image");
	if (n)
		return pbx_ynode_str(n, PBX_YSTR_ONE_LINE, &t->image, err);
	if (cloud != PBX_CLOUD_LOCAL)
		return pbx_ymap_missing(m, "image",
					cloud == PBX_CLOUD_GCE ? "required for cloud gce"
							       : "required for cloud aws",
					err);
	t->image = xstrdup("host");
	return 0;
}

/* A service account's e-mail as Compute Engine takes it: NAME@PROJECT
 * .iam.gserviceaccount.com (NAME 6-30 of a-z 0-9 -), or a project's
 * default NUMBER-compute@developer.gserviceaccount.com. */
static int service_account_ok(const char *s)
{
	static const char lower[] = "abcdefghijklmnopqrstuvwxyz0123456789-";
	static const char dev[] = "@developer.gserviceaccount.com",
			  iam[] = ".iam.gserviceaccount.com";
	const char *at = s ? strchr(s, '@') : NULL; /* NULL: `service_account:` with no value */
	size_t n = at ? (size_t)(at - s) : 0, p;
	if (!at || n < 6 || n > 30 || strspn(s, lower) != n)
		return 0;
	if (!strcmp(at, dev))
		return n > 8 && !strncmp(at - 8, "-compute", 8) && strspn(s, "0123456789") == n - 8;
	p = strlen(at + 1); /* PROJECT.iam.gserviceaccount.com */
	return p > sizeof(iam) - 1 && !strcmp(at + 1 + p - (sizeof(iam) - 1), iam) &&
	       strspn(at + 1, lower) == p - (sizeof(iam) - 1);
}

/* An IAM instance profile's name: 1-128 of A-Z a-z 0-9 + = , . @ _ -. */
static int instance_profile_ok(const char *s)
{
	size_t n;
	if (!s) /* `instance_profile:` with no value */
		return 0;
	n = strlen(s);
	return n >= 1 && n <= 128 &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789+=,.@_-") == n;
}

/* head: { machine_type, service_account (gce), instance_profile (aws) }:
 * the identity the head acts with on its cloud, never the user's own. */
static int parse_head(const struct pbx_ynode *m, int cloud, struct pbx_cluster_template *t,
		      struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(m, "head"), *v;
	if (!n || pbx_ynode_is_null(n))
		return 0;
	if (opt_map(n, head_keys, err) < 0 ||
	    opt_str(n, "machine_type", &t->head_machine_type, err) < 0 ||
	    opt_str(n, "service_account", &t->head_service_account, err) < 0 ||
	    opt_str(n, "instance_profile", &t->head_instance_profile, err) < 0)
		return -1;
	if ((v = pbx_ymap_get(n, "service_account")) && cloud != PBX_CLOUD_GCE)
		return pbx_ynode_error(v, err,
				       "service_account is for cloud gce (aws: instance_profile)");
	if (v && !service_account_ok(t->head_service_account))
		return pbx_ynode_error(v, err,
				       "not a service account e-mail "
				       "(NAME@PROJECT.iam.gserviceaccount.com)");
	if ((v = pbx_ymap_get(n, "instance_profile")) && cloud != PBX_CLOUD_AWS)
		return pbx_ynode_error(v, err,
				       "instance_profile is for cloud aws (gce: service_account)");
	if (v && !instance_profile_ok(t->head_instance_profile))
		return pbx_ynode_error(
			v, err, "not an instance profile name (1-128 of A-Z a-z 0-9 +=,.@_-)");
	return 0;
}

/* Optional slurm: { max_array_size, max_job_count } (0 = pbx's defaults). */
/* slurm.KEY, a duration of power saving (docs/power-saving.md): 10 s to a
 * day; absent leaves *out 0 (the default). */
static int slurm_duration(const struct pbx_ynode *n, const char *key, int *out, struct pbx_err *err)
{
	const struct pbx_ynode *v = pbx_ymap_get(n, key);
	char *text = NULL;
	long secs = 0;
	int rc = 0;
	if (!v)
		return 0;
	if (pbx_ynode_str(v, PBX_YSTR_ONE_LINE, &text, err) < 0)
		return -1;
	if (pbx_duration_parse(text, 86400, &secs) < 0 || secs < 10)
		rc = pbx_ynode_error(v, err,
				     "must be a duration from 10s to 1d (90s, 10m, 1h; a "
				     "bare number is minutes), got '%s'",
				     text);
	else
		*out = (int)secs;
	free(text);
	return rc;
}

static int parse_slurm(const struct pbx_ynode *m, struct pbx_cluster_template *t,
		       struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(m, "slurm"), *v;
	long x;
	if (!n || pbx_ynode_is_null(n))
		return 0;
	if (opt_map(n, slurm_keys, err) < 0)
		return -1;
	if ((v = pbx_ymap_get(n, "max_array_size")) != NULL) {
		if (pbx_ynode_int(v, 2, 4000001, &x, err) < 0)
			return -1;
		t->max_array_size = x;
	}
	if ((v = pbx_ymap_get(n, "max_job_count")) != NULL) {
		if (pbx_ynode_int(v, 1, 100000000, &x, err) < 0)
			return -1;
		t->max_job_count = x;
	}
	if (slurm_duration(n, "suspend_time", &t->suspend_time, err) < 0 ||
	    slurm_duration(n, "resume_timeout", &t->resume_timeout, err) < 0)
		return -1;
	return 0;
}

static int group_name(const struct pbx_ynode *m, const struct pbx_cluster_template *t, size_t idx,
		      struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(m, "name");
	size_t i, len;
	if (!n)
		return pbx_ymap_missing(m, "name", NULL, err);
	if (n->type != PBX_YSCALAR || pbx_ynode_is_null(n))
		return pbx_ynode_str(n, 0, &t->groups[idx].name, err);
	if (check_name(n, "node group", err) < 0)
		return -1;
	len = strlen(n->value);
	if (isdigit((unsigned char)n->value[len - 1]))
		return pbx_ynode_error(n, err,
				       "invalid node group name '%s': must not end "
				       "in a digit (nodes are named %s1, %s2, ...)",
				       n->value, n->value, n->value);
	for (i = 0; i < idx; i++)
		if (!strcmp(t->groups[i].name, n->value))
			return pbx_ynode_error(n, err,
					       "duplicate node group name '%s' "
					       "(first given at line %d)",
					       n->value, t->groups[i].line);
	t->groups[idx].name = xstrdup(n->value);
	return 0;
}

/* Optional min: and max: of a node group (SLURM power saving,
 * docs/power-saving.md): the group has max nodes (default count, which
 * must not exceed it), of which min always run and the rest are made when
 * jobs wait for them.  On a cloud the head makes and removes them as its
 * own identity, which the template must give it. */
static int parse_group_power(const struct pbx_ynode *m, int cloud,
			     const struct pbx_cluster_template *t, struct pbx_node_group *g,
			     struct pbx_err *err)
{
	const struct pbx_ynode *min = pbx_ymap_get(m, "min"), *max = pbx_ymap_get(m, "max");
	int lo = 0, hi = g->count;
	g->min = -1;
	if (!min && !max)
		return 0;
	if (opt_int(m, "max", 1, PBX_CONFIG_MAX_COUNT, &hi, err) < 0 ||
	    opt_int(m, "min", 0, PBX_CONFIG_MAX_COUNT, &lo, err) < 0)
		return -1;
	if (hi < g->count)
		return pbx_ynode_error(max, err, "must be at least count (%d), got %d", g->count,
				       hi);
	if (lo > hi)
		return pbx_ynode_error(min ? min : max, err, "min (%d) must not exceed max (%d)",
				       lo, hi);
	/* nodes that sleep: the head makes and removes them, as its own
	 * identity */
	if (min && lo < hi && cloud == PBX_CLOUD_GCE && !t->head_service_account)
		return pbx_ynode_error(min, err,
				       "power saving on cloud gce needs the head's own identity to "
				       "make nodes with: head.service_account "
				       "(docs/head-identity.md)");
	if (min && lo < hi && cloud == PBX_CLOUD_AWS && !t->head_instance_profile)
		return pbx_ynode_error(min, err,
				       "power saving on cloud aws needs the head's own identity to "
				       "make nodes with: head.instance_profile "
				       "(docs/head-identity.md)");
	g->count = hi;
	g->min = min ? lo : hi;
	return 0;
}

static int parse_group(const struct pbx_ynode *m, int cloud, struct pbx_cluster_template *t,
		       size_t idx, struct pbx_err *err)
{
	struct pbx_node_group *g = &t->groups[idx];
	const struct pbx_ynode *count;
	g->line = m->line;
	if (pbx_ynode_expect_map(m, err) < 0 || pbx_ymap_check_keys(m, group_keys, err) < 0 ||
	    group_name(m, t, idx, err) < 0)
		return -1;
	count = pbx_ymap_get(m, "count");
	if (!count)
		return pbx_ymap_missing(m, "count", NULL, err);
	if (opt_int(m, "count", 1, PBX_CONFIG_MAX_COUNT, &g->count, err) < 0 ||
	    opt_str(m, "machine_type", &g->machine_type, err) < 0 ||
	    opt_int(m, "gpus", 0, PBX_CONFIG_MAX_GPUS, &g->gpus, err) < 0 ||
	    opt_str(m, "gpu_type", &g->gpu_type, err) < 0 ||
	    opt_int(m, "cpus", 0, 4096, &g->cpus, err) < 0)
		return -1;
	if (pbx_ymap_get(m, "spot") && pbx_ynode_bool(pbx_ymap_get(m, "spot"), &g->spot, err) < 0)
		return -1;
	if (parse_group_power(m, cloud, t, g, err) < 0)
		return -1;
	if (!g->machine_type && cloud != PBX_CLOUD_LOCAL)
		return pbx_ymap_missing(m, "machine_type",
					cloud == PBX_CLOUD_GCE ? "required for cloud gce"
							       : "required for cloud aws",
					err);
	return 0;
}

static int parse_groups(const struct pbx_ynode *m, int cloud, struct pbx_cluster_template *t,
			struct pbx_err *err)
{
	static const char none[] = "a template needs at least one node group";
	const struct pbx_ynode *n = pbx_ymap_get(m, "node_groups");
	size_t i;
	if (!n)
		return pbx_ymap_missing(m, "node_groups", none, err);
	if (pbx_ynode_expect_seq(n, err) < 0)
		return -1;
	if (!n->nitems)
		return pbx_ynode_error(n, err, "%s", none);
	if (n->nitems > PBX_CONFIG_MAX_GROUPS)
		return pbx_ynode_error(n, err, "at most %d node groups are allowed",
				       PBX_CONFIG_MAX_GROUPS);
	t->groups = xcalloc(n->nitems, sizeof(*t->groups));
	t->ngroups = n->nitems;
	for (i = 0; i < n->nitems; i++)
		if (parse_group(n->items[i], cloud, t, i, err) < 0)
			return -1;
	return 0;
}

/* Optional min_nodes: the fewest compute nodes a start accepts when the
 * cloud makes fewer than asked (quota, capacity); absent = all of them. */
static int parse_min_nodes(const struct pbx_ynode *m, struct pbx_cluster_template *t,
			   struct pbx_err *err)
{
	const struct pbx_ynode *v = pbx_ymap_get(m, "min_nodes");
	long x;
	if (!v)
		return 0;
	if (pbx_ynode_int(v, 1, pbx_template_node_count(t), &x, err) < 0)
		return -1; /* "must be at most N" names the template's node count */
	t->min_nodes = (int)x;
	return 0;
}

/* Optional boot_timeout: seconds (30-3600) a fresh cloud node may take to
 * answer SSH with its login user (a slow image, a loaded host); absent =
 * 300. */
static int parse_boot_timeout(const struct pbx_ynode *m, struct pbx_cluster_template *t,
			      struct pbx_err *err)
{
	const struct pbx_ynode *v = pbx_ymap_get(m, "boot_timeout");
	long x;
	if (!v)
		return 0;
	if (pbx_ynode_int(v, 30, 3600, &x, err) < 0)
		return -1;
	t->boot_timeout = (int)x;
	return 0;
}

/* An IPv4 CIDR block, "a.b.c.d/n" (n 0-32) with no host bits set. */
static int cidr_ok(const char *s)
{
	char addr[32];
	const char *slash = strchr(s, '/');
	struct in_addr a;
	char *end;
	long bits;
	if (!slash || (size_t)(slash - s) >= sizeof(addr))
		return 0;
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = '\0';
	bits = strtol(slash + 1, &end, 10);
	if (inet_pton(AF_INET, addr, &a) != 1 || end == slash + 1 || *end || bits < 0 || bits > 32)
		return 0;
	return bits == 32 || (ntohl(a.s_addr) & (0xffffffffu >> bits)) == 0;
}

/* Optional list of 1 to max one-line strings under `key`: *out (owned by
 * the config) and *n set; *n stays 0 when the key is absent or null. */
static int opt_str_list(const struct pbx_ynode *m, const char *key, size_t max, const char *what,
			char ***out, size_t *n, struct pbx_err *err)
{
	const struct pbx_ynode *l = pbx_ymap_get(m, key);
	size_t i;
	if (!l || pbx_ynode_is_null(l))
		return 0;
	if (pbx_ynode_expect_seq(l, err) < 0)
		return -1;
	if (l->nitems == 0 || l->nitems > max)
		return pbx_ynode_error(l, err, "must list 1 to %zu %s", max, what);
	*out = xcalloc(l->nitems, sizeof(**out));
	for (i = 0; i < l->nitems; i++) {
		if (pbx_ynode_str(l->items[i], PBX_YSTR_ONE_LINE, &(*out)[i], err) < 0)
			return -1;
		(*n)++;
	}
	return 0;
}

/* Optional ssh_from: the address blocks that may reach the head's sshd
 * (default: anywhere, 0.0.0.0/0). */
static int parse_ssh_from(const struct pbx_ynode *m, struct pbx_cluster_template *t,
			  struct pbx_err *err)
{
	size_t i;
	if (opt_str_list(m, "ssh_from", 16, "address blocks", &t->ssh_from, &t->nssh_from, err) < 0)
		return -1;
	for (i = 0; i < t->nssh_from; i++)
		if (!cidr_ok(t->ssh_from[i]))
			return pbx_ynode_error(pbx_ymap_get(m, "ssh_from")->items[i], err,
					       "must be an IPv4 block like 203.0.113.0/24, got "
					       "'%.40s'",
					       t->ssh_from[i]);
	return 0;
}

/* Optional compute_external_ips (gce only): compute nodes get an external
 * address as the head does, and no Cloud NAT is made (default false). */
static int parse_external_ips(const struct pbx_ynode *m, int cloud, struct pbx_cluster_template *t,
			      struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(m, "compute_external_ips");
	if (!n)
		return 0;
	if (cloud != PBX_CLOUD_GCE)
		return pbx_ynode_error(n, err, "only for cloud gce");
	return pbx_ynode_bool(n, &t->compute_external_ips, err);
}

/* Optional autostop: how long the cluster may sit idle before it stops
 * itself (a duration: "90s", "30m", "2h", a bare number of minutes, or
 * "off"); at least 10 s, at most 30 days.  Absent: an hour on gce and aws,
 * off on local. */
static int parse_autostop(const struct pbx_ynode *m, int cloud, struct pbx_cluster_template *t,
			  struct pbx_err *err)
{
	const struct pbx_ynode *v = pbx_ymap_get(m, "autostop");
	char *text = NULL;
	long secs = 0;
	int rc = 0;
	t->autostop = cloud == PBX_CLOUD_LOCAL ? 0 : PBX_AUTOSTOP_DEFAULT_S;
	if (!v)
		return 0;
	if (pbx_ynode_str(v, PBX_YSTR_ONE_LINE, &text, err) < 0)
		return -1;
	if (pbx_autostop_parse(text, 10, PBX_AUTOSTOP_MAX_S, &secs) < 0)
		rc = pbx_ynode_error(v, err,
				     "must be a duration from 10s to 30d (90s, 30m, 2h, "
				     "1h30m; a bare number is minutes) or off, got '%s'",
				     text);
	else
		t->autostop = (int)secs;
	free(text);
	return rc;
}

/* Optional autostop_action: stop (the default: instances powered off,
 * disks kept) or delete (the head deletes the cluster as its own identity
 * once every result is harvested, docs/autostop.md): only on a cloud, and
 * only with that identity (head.service_account, head.instance_profile).
 * After parse_head. */
static int parse_autostop_action(const struct pbx_ynode *m, int cloud,
				 struct pbx_cluster_template *t, struct pbx_err *err)
{
	const struct pbx_ynode *v = pbx_ymap_get(m, "autostop_action");
	char *text = NULL;
	int rc = 0;
	t->autostop_delete = false;
	if (!v)
		return 0;
	if (pbx_ynode_str(v, PBX_YSTR_ONE_LINE, &text, err) < 0)
		return -1;
	if (strcmp(text, "stop") != 0 && strcmp(text, "delete") != 0)
		rc = pbx_ynode_error(v, err, "must be stop or delete, got '%s'", text);
	else if (!strcmp(text, "delete") && cloud == PBX_CLOUD_LOCAL)
		rc = pbx_ynode_error(v, err,
				     "delete is for cloud gce and aws (a local cluster "
				     "stops; pbx cluster stop removes it)");
	else if (!strcmp(text, "delete") && !t->head_service_account && !t->head_instance_profile)
		rc = pbx_ynode_error(v, err,
				     "delete needs the head's own identity to delete with: "
				     "head.%s (docs/head-identity.md)",
				     cloud == PBX_CLOUD_GCE ? "service_account"
							    : "instance_profile");
	else
		t->autostop_delete = !strcmp(text, "delete");
	free(text);
	return rc;
}

/* Optional budget: the most the cluster may spend, an amount in the price
 * currency (docs/cost.md); absent or "off": none (t->budget 0). */
static int parse_budget(const struct pbx_ynode *m, struct pbx_cluster_template *t,
			struct pbx_err *err)
{
	const struct pbx_ynode *v = pbx_ymap_get(m, "budget");
	char *text = NULL;
	int rc = 0;
	t->budget = 0;
	if (!v)
		return 0;
	if (pbx_ynode_str(v, PBX_YSTR_ONE_LINE, &text, err) < 0)
		return -1;
	if (strcmp(text, "off") != 0 && (pbx_money_parse(text, &t->budget) < 0 || t->budget == 0)) {
		t->budget = 0;
		rc = pbx_ynode_error(v, err,
				     "must be an amount of the price currency like 250 or "
				     "12.50 (a plain decimal above 0, at most 1000000000), "
				     "or off, got '%s'",
				     text);
	}
	free(text);
	return rc;
}

/* A work_dir: [$NAME/ or ${NAME}/]PATH or /PATH, PATH of [A-Za-z0-9._/-]
 * with no empty, "." or ".." component (it goes into shell commands). */
static bool work_dir_ok(const char *s)
{
	const char *p = s, *c;
	if (s[0] == '$') {
		int brace = s[1] == '{';
		p = s + 1 + brace;
		if (!isalpha((unsigned char)*p) && *p != '_')
			return false;
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		if (brace && *p++ != '}')
			return false;
		if (*p == '\0')
			return true;
		if (*p != '/')
			return false;
		p++;
	} else if (*p == '/') {
		p++;
	}
	if (!*p || strlen(s) > 200)
		return false;
	for (c = p; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("._/-", *c))
			return false;
	for (c = p; c;) {
		const char *slash = strchr(c, '/');
		size_t l = slash ? (size_t)(slash - c) : strlen(c);
		if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && !strncmp(c, "..", 2)))
			return false;
		c = slash ? slash + 1 : NULL;
	}
	return true;
}

/* A template of cloud ssh: an existing cluster's login node (host, port,
 * login_user, ssh_key), where pbx works (work_dir) and what runs first
 * (setup).  Keys of clusters pbx builds are refused by the key check. */
static int parse_ssh_template(const struct pbx_ynode *m, struct pbx_cluster_template *t,
			      struct pbx_err *err)
{
	const struct pbx_ynode *n;
	size_t i, k;
	for (i = 0; template_keys[i]; i++) {
		for (k = 0; ssh_template_keys[k] && strcmp(ssh_template_keys[k], template_keys[i]);
		     k++)
			;
		if (!ssh_template_keys[k] && (n = pbx_ymap_get(m, template_keys[i])))
			return pbx_ynode_error(
				n, err,
				"not for cloud ssh: pbx uses that cluster as it is (its keys: host, "
				"port, login_user, ssh_key, work_dir, setup, transport)%s",
				strstr(template_keys[i], "proxy")
					? "; its proxy goes in setup: (export https_proxy=...)"
					: "");
	}
	if (pbx_ymap_check_keys(m, ssh_template_keys, err) < 0)
		return -1;
	if (!pbx_ymap_get(m, "host"))
		return pbx_ymap_missing(m, "host", "required for cloud ssh (its login node)", err);
	n = pbx_ymap_get(m, "transport");
	if (n && pbx_ynode_choice(n, transport_names, &t->openssh, err) < 0)
		return -1;
	/* with openssh, ssh_config's User stands in for a missing login_user */
	if (!pbx_ymap_get(m, "login_user") && !t->openssh)
		return pbx_ymap_missing(m, "login_user",
					"required for cloud ssh (your user name there), unless "
					"transport: openssh takes it from your ssh_config",
					err);
	t->port = 22;
	if (opt_str(m, "host", &t->host, err) < 0 ||
	    opt_int(m, "port", 1, 65535, &t->port, err) < 0 ||
	    (pbx_ymap_get(m, "login_user") && parse_login(m, PBX_CLOUD_SSH, t, err) < 0) ||
	    opt_path(m, "ssh_key", &t->ssh_key, &t->ssh_key_line, err) < 0 ||
	    opt_str(m, "work_dir", &t->work_dir, err) < 0)
		return -1;
	if (!t->host || !*t->host || /* `host:` with no value is null: no string */
	    strspn(t->host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789.-:") != strlen(t->host) ||
	    t->host[0] == '-')
		return pbx_ynode_error(pbx_ymap_get(m, "host"), err,
				       "want a host name or address, got '%.60s'",
				       t->host ? t->host : "");
	if (!t->work_dir)
		t->work_dir = xstrdup("pbx");
	else if (!work_dir_ok(t->work_dir))
		return pbx_ynode_error(pbx_ymap_get(m, "work_dir"), err,
				       "want a plain path (absolute, or relative to your home), "
				       "optionally starting with $NAME/ (e.g. $SCRATCH/pbx): "
				       "letters, digits and ._/- only, no '..'");
	n = pbx_ymap_get(m, "setup");
	if (n && pbx_ynode_str(n, PBX_YSTR_NULL_OK, &t->setup, err) < 0)
		return -1;
	return 0;
}

static int parse_template(const struct pbx_ypair *p, struct pbx_cluster_template *t,
			  struct pbx_err *err)
{
	const struct pbx_ynode *m = p->value, *cloud_node;
	int cloud;
	if (check_name(p->key, "template", err) < 0)
		return -1;
	t->name = xstrdup(p->key->value);
	t->line = p->key->line;
	if (pbx_ynode_expect_map(m, err) < 0 || pbx_ymap_check_keys(m, template_keys, err) < 0)
		return -1;
	cloud_node = pbx_ymap_get(m, "cloud");
	if (!cloud_node)
		return pbx_ymap_missing(m, "cloud", NULL, err);
	if (pbx_ynode_choice(cloud_node, cloud_names, &cloud, err) < 0)
		return -1;
	t->cloud = xstrdup(cloud_names[cloud]);
	if (cloud == PBX_CLOUD_SSH)
		return parse_ssh_template(m, t, err);
	if (pbx_ymap_get(m, "host") || pbx_ymap_get(m, "port") || pbx_ymap_get(m, "work_dir") ||
	    pbx_ymap_get(m, "setup") || pbx_ymap_get(m, "transport")) {
		const char *k = pbx_ymap_get(m, "host")       ? "host"
				: pbx_ymap_get(m, "port")     ? "port"
				: pbx_ymap_get(m, "work_dir") ? "work_dir"
				: pbx_ymap_get(m, "setup")    ? "setup"
							      : "transport";
		return pbx_ynode_error(pbx_ymap_get(m, k), err,
				       "only for cloud ssh (a cluster pbx does not build)");
	}
	if (parse_login(m, cloud, t, err) < 0 ||
	    opt_path(m, "ssh_key", &t->ssh_key, &t->ssh_key_line, err) < 0 ||
	    parse_image(m, cloud, t, err) < 0 || parse_head(m, cloud, t, err) < 0 ||
	    parse_slurm(m, t, err) < 0 || opt_str(m, "subnet", &t->subnet, err) < 0)
		return -1;
	if (t->subnet && cloud != PBX_CLOUD_AWS)
		return pbx_ynode_error(pbx_ymap_get(m, "subnet"), err, "only for cloud aws");
	if (parse_groups(m, cloud, t, err) < 0 || parse_ssh_from(m, t, err) < 0 ||
	    parse_external_ips(m, cloud, t, err) < 0 || parse_boot_timeout(m, t, err) < 0 ||
	    parse_autostop(m, cloud, t, err) < 0 || parse_autostop_action(m, cloud, t, err) < 0 ||
	    parse_budget(m, t, err) < 0 || pbx_config_parse_proxy(m, t, err) < 0)
		return -1;
	return parse_min_nodes(m, t, err);
}

static int parse_clusters(const struct pbx_ynode *root, struct pbx_config *cfg, struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(root, "clusters");
	size_t i;
	if (!n || pbx_ynode_is_null(n))
		return 0; /* a configuration for publish, pull and report only */
	if (pbx_ynode_expect_map(n, err) < 0)
		return -1;
	cfg->templates = xcalloc(n->npairs, sizeof(*cfg->templates));
	cfg->ntemplates = n->npairs;
	for (i = 0; i < n->npairs; i++)
		if (parse_template(&n->pairs[i], &cfg->templates[i], err) < 0)
			return -1;
	return 0;
}

static int parse_local(const struct pbx_ynode *n, struct pbx_cloud_local *l, struct pbx_err *err)
{
	const struct pbx_ynode *addr;
	unsigned char ip[4];
	if (!n || pbx_ynode_is_null(n))
		return 0;
	if (opt_map(n, local_keys, err) < 0 ||
	    opt_str(n, "address_base", &l->address_base, err) < 0 ||
	    opt_int(n, "ssh_port", 1, 65535, &l->ssh_port, err) < 0 ||
	    opt_int(n, "slurm_port_base", 1, 65535, &l->slurm_port_base, err) < 0)
		return -1;
	addr = pbx_ymap_get(n, "address_base");
	if (addr && inet_pton(AF_INET, l->address_base, ip) != 1)
		return pbx_ynode_error(addr, err, "must be an IPv4 address, got '%.40s'",
				       l->address_base);
	return 0;
}

/* A cloud's `endpoint` (may be NULL): an https:// URL, or http:// only to
 * a loopback host (pbx_http_url_allowed: the API calls carry credentials).
 * The error names the file, line and key, not the URL (it may carry
 * user:password). */
static int check_url(const struct pbx_ynode *cloud, const char *key, const char *url,
		     struct pbx_err *err)
{
	char why[256];
	if (!url || pbx_http_url_allowed(url, why, sizeof(why)))
		return 0;
	return pbx_ynode_error(pbx_ymap_get(cloud, key), err, "%s", why);
}

static int check_endpoint(const struct pbx_ynode *cloud, const char *url, struct pbx_err *err)
{
	return check_url(cloud, "endpoint", url, err);
}

static int parse_aws(const struct pbx_ynode *aws, struct pbx_cloud_aws *a, struct pbx_err *err)
{
	if (!aws || pbx_ynode_is_null(aws))
		return 0;
	if (opt_map(aws, aws_keys, err) < 0 || opt_str(aws, "region", &a->region, err) < 0 ||
	    opt_str(aws, "profile", &a->profile, err) < 0 ||
	    opt_str(aws, "endpoint", &a->endpoint, err) < 0 ||
	    opt_str(aws, "pricing_endpoint", &a->pricing_endpoint, err) < 0 ||
	    opt_str(aws, "s3_endpoint", &a->s3_endpoint, err) < 0 ||
	    opt_str(aws, "subnet", &a->subnet, err) < 0 ||
	    opt_int(aws, "disk_gb", 8, 16384, &a->disk_gb, err) < 0 ||
	    opt_str_list(aws, "subnets", 32, "subnets", &a->subnets, &a->nsubnets, err) < 0)
		return -1;
	if (check_url(aws, "pricing_endpoint", a->pricing_endpoint, err) < 0 ||
	    check_url(aws, "s3_endpoint", a->s3_endpoint, err) < 0)
		return -1;
	return check_endpoint(aws, a->endpoint, err);
}

static int parse_clouds(const struct pbx_ynode *root, struct pbx_config *cfg, struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(root, "clouds"), *gce, *aws;
	if (!n || pbx_ynode_is_null(n))
		return 0;
	if (opt_map(n, cloud_names, err) < 0)
		return -1;
	gce = pbx_ymap_get(n, "gce");
	aws = pbx_ymap_get(n, "aws");
	if (gce && !pbx_ynode_is_null(gce) &&
	    (opt_map(gce, gce_keys, err) < 0 ||
	     opt_str(gce, "project", &cfg->gce.project, err) < 0 ||
	     opt_str(gce, "zone", &cfg->gce.zone, err) < 0 ||
	     opt_path(gce, "credentials", &cfg->gce.credentials, &cfg->gce.credentials_line, err) <
		     0 ||
	     opt_str(gce, "endpoint", &cfg->gce.endpoint, err) < 0 ||
	     opt_str(gce, "billing_endpoint", &cfg->gce.billing_endpoint, err) < 0 ||
	     opt_str(gce, "storage_endpoint", &cfg->gce.storage_endpoint, err) < 0))
		return -1;
	if (gce && !pbx_ynode_is_null(gce) &&
	    opt_str_list(gce, "zones", 32, "zones", &cfg->gce.zones, &cfg->gce.nzones, err) < 0)
		return -1;
	if (check_endpoint(gce, cfg->gce.endpoint, err) < 0 ||
	    check_url(gce, "billing_endpoint", cfg->gce.billing_endpoint, err) < 0 ||
	    check_url(gce, "storage_endpoint", cfg->gce.storage_endpoint, err) < 0)
		return -1;
	if (parse_aws(aws, &cfg->aws, err) < 0)
		return -1;
	return parse_local(pbx_ymap_get(n, "local"), &cfg->local, err);
}

/* One of prices.hourly, spot_hourly, gpu_hourly: NAME: AMOUNT pairs. */
static int parse_overrides(const struct pbx_ynode *m, const char *key,
			   struct pbx_price_override **out, size_t *n, struct pbx_err *err)
{
	const struct pbx_ynode *l = pbx_ymap_get(m, key);
	size_t i;
	if (!l || pbx_ynode_is_null(l))
		return 0;
	if (pbx_ynode_expect_map(l, err) < 0)
		return -1;
	*out = xcalloc(l->npairs ? l->npairs : 1, sizeof(**out));
	for (i = 0; i < l->npairs; i++) {
		const struct pbx_ynode *v = l->pairs[i].value;
		struct pbx_price_override *o = &(*out)[i];
		char *text = NULL;
		int bad;
		if (pbx_ynode_str(v, PBX_YSTR_ONE_LINE, &text, err) < 0)
			return -1;
		bad = pbx_price_parse(text, &o->nanos) < 0;
		free(text);
		if (bad)
			return pbx_ynode_error(
				v, err,
				"must be an amount per hour like 0.38 (a plain "
				"decimal, at most 9 decimal places, at most 1000000)");
		o->name = xstrdup(l->pairs[i].key->value);
		o->line = v->line;
		(*n)++;
	}
	return 0;
}

/* Optional prices: { currency, max_age, hourly, spot_hourly, gpu_hourly }
 * (docs/cost.md). */
static int parse_prices(const struct pbx_ynode *root, struct pbx_prices *p, struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(root, "prices"), *v;
	char *text = NULL;
	int rc = 0;
	if (!n || pbx_ynode_is_null(n))
		return 0;
	if (opt_map(n, prices_keys, err) < 0 || opt_str(n, "currency", &p->currency, err) < 0)
		return -1;
	if (p->currency && !pbx_currency_ok(p->currency))
		return pbx_ynode_error(pbx_ymap_get(n, "currency"), err,
				       "must be a currency code "
				       "like USD or EUR, got '%.20s'",
				       p->currency);
	if ((v = pbx_ymap_get(n, "max_age")) != NULL) {
		if (pbx_ynode_str(v, PBX_YSTR_ONE_LINE, &text, err) < 0)
			return -1;
		if (pbx_duration_parse(text, 365L * 86400, &p->max_age) < 0 || p->max_age < 60)
			rc = pbx_ynode_error(v, err,
					     "must be a duration from 1m to 365d (12h, 7d), "
					     "got '%.40s'",
					     text);
		free(text);
		if (rc < 0)
			return -1;
	}
	if (parse_overrides(n, "hourly", &p->hourly, &p->nhourly, err) < 0 ||
	    parse_overrides(n, "spot_hourly", &p->spot_hourly, &p->nspot_hourly, err) < 0)
		return -1;
	return parse_overrides(n, "gpu_hourly", &p->gpu_hourly, &p->ngpu_hourly, err);
}

int pbx_publisher_name_valid(const char *name)
{
	size_t n = strlen(name), i;
	if (n < 1 || n > 64 || name[0] == '.' || name[0] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return 0;
	return 1;
}

/* `publisher: NAME`, the name `pbx publish` publishes under. */
static int parse_publisher(const struct pbx_ynode *root, struct pbx_config *cfg,
			   struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(root, "publisher");
	if (opt_str(root, "publisher", &cfg->publisher, err) < 0)
		return -1;
	if (cfg->publisher && !pbx_publisher_name_valid(cfg->publisher))
		return pbx_ynode_error(
			n, err,
			"publisher: '%s' is not a name: use 1 to 64 letters, digits, "
			"'.', '_' or '-', not beginning with '.' or '-'",
			cfg->publisher);
	return 0;
}

/* `data_cache_max: SIZE`, the download cache's bound. */
static int parse_data_cache_max(const struct pbx_ynode *root, struct pbx_config *cfg,
				struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(root, "data_cache_max");
	char *text = NULL;
	int rc = opt_str(root, "data_cache_max", &text, err);
	if (rc == 0 && text && pbx_size_parse(text, &cfg->data_cache_max) < 0)
		rc = pbx_ynode_error(n, err,
				     "data_cache_max: '%s' is not a size (\"20GB\", \"500MiB\", "
				     "\"0\")",
				     text);
	else if (rc == 0 && text)
		cfg->data_cache_bounded = 1;
	free(text);
	return rc;
}

int pbx_config_from_doc(const struct pbx_ydoc *doc, struct pbx_config *cfg, struct pbx_err *err)
{
	const struct pbx_ynode *root = doc->root;
	cfg->local.address_base = xstrdup(PBX_LOCAL_ADDRESS_BASE);
	cfg->local.ssh_port = PBX_LOCAL_SSH_PORT;
	cfg->local.slurm_port_base = PBX_LOCAL_SLURM_PORT_BASE;
	if (!root || pbx_ynode_is_null(root))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s:%d: the configuration is empty",
				    doc->name, root ? root->line : 1);
	if (root->type != PBX_YMAP)
		return pbx_ynode_error(root, err, "the top level must be a mapping, got %s",
				       pbx_ynode_kind(root));
	if (pbx_ymap_check_keys(root, top_keys, err) < 0 || parse_clusters(root, cfg, err) < 0 ||
	    parse_clouds(root, cfg, err) < 0 || parse_publisher(root, cfg, err) < 0 ||
	    parse_data_cache_max(root, cfg, err) < 0)
		return -1;
	return parse_prices(root, &cfg->prices, err);
}
