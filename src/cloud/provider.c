/*
 * provider.c - the table of providers and what they share: the cluster's
 * labels (made here only), the list of resources found by them, the node
 * plan of a cloud cluster and its login, what creation records of a node
 * as it goes and how removal waits (the same on every cloud), and the
 * loopback guard for an API on loopback (an emulator).
 */
#include "cloud/provider.h"
#include "http/http.h"

#include "util/fs.h"
#include "util/xalloc.h"

#include <openssl/rand.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const struct pbx_provider pbx_provider_local;
extern const struct pbx_provider pbx_provider_gce;
extern const struct pbx_provider pbx_provider_aws;
extern const struct pbx_provider pbx_provider_ssh;

const struct pbx_provider *const pbx_providers[] = {
	&pbx_provider_local, &pbx_provider_gce, &pbx_provider_aws, &pbx_provider_ssh, NULL,
};

const struct pbx_provider *pbx_provider_find(const char *cloud)
{
	size_t i;
	for (i = 0; pbx_providers[i]; i++)
		if (!strcmp(pbx_providers[i]->name, cloud))
			return pbx_providers[i];
	return NULL;
}

void pbx_events_stage(const struct pbx_cluster_events *ev, size_t node, const char *stage)
{
	if (ev && ev->stage)
		ev->stage(ev->ctx, node, stage);
}

void pbx_cluster_labels(const struct pbx_cluster_spec *s, struct pbx_labels *l)
{
	memset(l, 0, sizeof(*l));
	l->keys[0] = PBX_LABEL_CLUSTER;
	snprintf(l->values[0], sizeof(l->values[0]), "%s", s->name);
	l->n = 1;
	if (s->uid) {
		l->keys[1] = PBX_LABEL_CLUSTER_ID;
		snprintf(l->values[1], sizeof(l->values[1]), "%s", s->uid);
		l->n = 2;
	}
	if (s->image) {
		l->keys[l->n] = PBX_LABEL_IMAGE;
		snprintf(l->values[l->n], sizeof(l->values[l->n]), "%s", s->image);
		l->n++;
	}
}

int pbx_cluster_uid_new(char out[PBX_CLUSTER_UID_LEN + 1], struct pbx_err *err)
{
	unsigned char b[PBX_CLUSTER_UID_LEN / 2];
	if (RAND_bytes(b, sizeof(b)) != 1)
		return pbx_err_set(err, "cannot make a cluster id: no randomness");
	pbx_hex(b, sizeof(b), out);
	return 0;
}

int pbx_cluster_uid_legacy(const char *uid)
{
	size_t len = strlen(uid);
	return len >= 1 && len <= 18 && uid[0] != '0' && strspn(uid, "0123456789") == len;
}

int pbx_cluster_uid_valid(const char *text)
{
	return (strlen(text) == PBX_CLUSTER_UID_LEN &&
		strspn(text, "0123456789abcdef") == PBX_CLUSTER_UID_LEN) ||
	       pbx_cluster_uid_legacy(text);
}

int pbx_instance_is_machine(const struct pbx_instance *x)
{
	static const char *const markers[] = { "FIREWALL", "ROUTER", "SECURITY_GROUP", "KEY_PAIR" };
	size_t i;
	for (i = 0; x->state && i < sizeof(markers) / sizeof(markers[0]); i++)
		if (!strcmp(x->state, markers[i]))
			return 0;
	return 1;
}

void pbx_instances_free(struct pbx_instance *v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].zone);
		free(v[i].state);
		free(v[i].cluster);
		free(v[i].private_ip);
		free(v[i].public_ip);
		free(v[i].node);
		free(v[i].uid);
		free(v[i].subnet);
		free(v[i].reason);
		free(v[i].type);
	}
	free(v);
}

void pbx_instances_split_self(const struct pbx_instance *v, size_t n, const char *self,
			      struct pbx_instance **rest, size_t *nrest, struct pbx_instance **me,
			      size_t *nme)
{
	size_t i;
	*rest = xcalloc(n ? n : 1, sizeof(**rest));
	*me = xcalloc(n ? n : 1, sizeof(**me));
	*nrest = *nme = 0;
	for (i = 0; i < n; i++) {
		if (self && *self && v[i].id && !strcmp(v[i].id, self))
			(*me)[(*nme)++] = v[i];
		else
			(*rest)[(*nrest)++] = v[i];
	}
}

void pbx_instances_add(struct pbx_instance **v, size_t *n, const char *id, const char *zone,
		       const char *state, const char *cluster, int64_t stopped_at)
{
	struct pbx_instance *x;
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	x = &(*v)[(*n)++];
	memset(x, 0, sizeof(*x)); /* the fields not set here: NULL */
	x->id = xstrdup(id);
	x->zone = zone ? xstrdup(zone) : NULL;
	x->state = state ? xstrdup(state) : NULL;
	x->cluster = cluster ? xstrdup(cluster) : NULL;
	x->stopped_at = stopped_at;
}

void pbx_instances_append(struct pbx_instance **v, size_t *nv, struct pbx_instance *w, size_t n)
{
	if (n) {
		*v = xreallocarray(*v, *nv + n, sizeof(**v));
		memcpy(*v + *nv, w, n * sizeof(*w));
		*nv += n;
	}
	free(w);
}

void pbx_instances_set_addresses(struct pbx_instance *x, const char *base, const char *private_ip,
				 const char *public_ip)
{
	char *priv = private_ip ? xstrdup(private_ip) : NULL;
	char *pub = public_ip ? xstrdup(public_ip) : NULL;
	free(x->private_ip);
	free(x->public_ip);
	x->private_ip = priv;
	x->public_ip = pub;
	pbx_instance_check_addresses(x, base);
}

void pbx_instance_check_addresses(struct pbx_instance *x, const char *base)
{
	struct pbx_err e = PBX_ERR_INIT;
	x->private_direct =
		x->private_ip && pbx_cloud_address_allowed(base, x->id, x->private_ip, &e) == 0;
	pbx_err_clear(&e);
	if (x->public_ip && pbx_cloud_address_allowed(base, x->id, x->public_ip, &e) < 0) {
		free(x->public_ip);
		x->public_ip = NULL;
	}
	pbx_err_clear(&e);
}

int pbx_instance_private_usable(const struct pbx_instance *x, const struct pbx_node_row *head)
{
	int via_head = !x->public_ip && head && head->public_address && head->public_address[0];
	return x->private_ip && (x->private_direct || via_head);
}

int pbx_power_saving(const struct pbx_cluster_template *t)
{
	size_t i;
	for (i = 0; t && i < t->ngroups; i++)
		if (t->groups[i].min >= 0 && t->groups[i].min < t->groups[i].count)
			return 1;
	return 0;
}

int pbx_cloud_address_allowed(const char *base, const char *instance, const char *ip,
			      struct pbx_err *err)
{
	if (!ip || !pbx_http_url_loopback(base) || pbx_http_host_loopback(ip))
		return 0;
	return pbx_err_set(
		err,
		"instance %s has the address %s outside 127.0.0.0/8, from the API"
		" on loopback at %s (an emulator): pbx connects only to loopback addresses"
		" then",
		instance, ip, base);
}

int pbx_cloud_dial_allowed(const char *base, const struct pbx_node_row *nodes, size_t i,
			   const char *instance, const char *private_ip, const char *public_ip,
			   struct pbx_err *err)
{
	if (public_ip)
		return pbx_cloud_address_allowed(base, instance, public_ip, err);
	if (i > 0 && strcmp(nodes[0].state, "running") != 0)
		return 1;
	if (i > 0 && nodes[0].public_address && nodes[0].public_address[0])
		return 0; /* through the head */
	return pbx_cloud_address_allowed(base, instance, private_ip, err);
}

int pbx_cloud_wait_gone(pbx_cloud_left_fn left, void *ctx, int limit_s, long delay_ms,
			struct pbx_err *err)
{
	struct timespec delay = { delay_ms / 1000, (delay_ms % 1000) * 1000 * 1000 };
	time_t until = time(NULL) + limit_s;
	for (;;) {
		size_t n = 0;
		const char *one = NULL;
		if (left(ctx, &n, &one, err) < 0)
			return -1;
		if (n && time(NULL) >= until)
			return pbx_err_set(err, "%zu instance%s still there after %d s (e.g. %s)",
					   n, n == 1 ? "" : "s", limit_s, one);
		if (!n)
			return 0;
		nanosleep(&delay, NULL);
	}
}

static void set_str(char **field, const char *value)
{
	free(*field);
	*field = value ? xstrdup(value) : NULL;
}

void pbx_cloud_node_state(struct pbx_node_row *nodes, size_t i, const char *state,
			  const char *stage, const struct pbx_create_hooks *h)
{
	set_str(&nodes[i].state, state);
	if (h && h->record)
		h->record(h->ctx, &nodes[i]);
	pbx_events_stage(h ? h->ev : NULL, i, stage);
}

void pbx_cloud_node_created(struct pbx_node_row *nodes, size_t i, const char *instance,
			    const char *operation, const char *zone,
			    const struct pbx_create_hooks *h)
{
	set_str(&nodes[i].instance_id, instance);
	set_str(&nodes[i].instance_uid, NULL);
	set_str(&nodes[i].operation, operation);
	set_str(&nodes[i].zone, zone);
	pbx_cloud_node_state(nodes, i, "creating", "created", h);
}

int pbx_cloud_node_running(const char *base, struct pbx_node_row *nodes, size_t i,
			   const char *instance, const char *uid, const char *private_ip,
			   const char *public_ip, const char *zone,
			   const struct pbx_create_hooks *h, struct pbx_err *err)
{
	int rc = pbx_cloud_dial_allowed(base, nodes, i, instance, private_ip, public_ip, err);
	if (rc != 0)
		return rc; /* -1, or 1: once the head runs */
	if (strcmp(nodes[i].state, "running") != 0) {
		set_str(&nodes[i].address, private_ip);
		set_str(&nodes[i].instance_uid, uid);
		if (zone)
			set_str(&nodes[i].zone, zone);
		/* as the node has it: SSH goes through the head to a node
		 * without one (pbx_cluster_connect) */
		set_str(&nodes[i].public_address, public_ip);
		pbx_cloud_node_state(nodes, i, "running", "running", h);
	}
	return 0;
}

/* One planned node of a cloud cluster. */
static void cloud_node(const struct pbx_cluster_spec *s, struct pbx_node_row *r, const char *name,
		       const char *role, int gpus, const char *zone)
{
	memset(r, 0, sizeof(*r));
	r->cluster_id = s->id;
	r->name = xstrdup(name);
	r->role = xstrdup(role);
	r->address = xstrdup("");
	r->ssh_port = 22;
	r->gpus = gpus;
	r->root = xstrdup("");
	r->state = xstrdup("planned");
	r->zone = xstrdup(zone ? zone : "");
}

void pbx_cloud_plan(const struct pbx_cluster_spec *s, const char *zone, struct pbx_node_row **nodes,
		    size_t *n)
{
	const struct pbx_cluster_template *t = s->t;
	size_t total = 1 + (size_t)pbx_template_node_count(t), idx = 0, k;
	*nodes = xcalloc(total, sizeof(**nodes));
	*n = total;
	cloud_node(s, &(*nodes)[idx++], "head", "head", 0, zone);
	for (k = 0; k < t->ngroups; k++) {
		int j;
		for (j = 1; j <= t->groups[k].count; j++) {
			char name[64];
			snprintf(name, sizeof(name), "%s%d", t->groups[k].name, j);
			cloud_node(s, &(*nodes)[idx++], name, "compute", t->groups[k].gpus, zone);
		}
	}
}

const struct pbx_node_group *pbx_cloud_group_of(const struct pbx_cluster_template *t,
						const char *node)
{
	size_t k;
	for (k = 0; k < t->ngroups; k++) {
		size_t l = strlen(t->groups[k].name);
		if (!strncmp(node, t->groups[k].name, l) && node[l] >= '1' && node[l] <= '9' &&
		    strspn(node + l, "0123456789") == strlen(node + l))
			return &t->groups[k];
	}
	return NULL;
}

int pbx_cloud_node_of(const struct pbx_cluster_template *t, const struct pbx_node_row *node,
		      const struct pbx_node_group *grp)
{
	return grp ? !strcmp(node->role, "compute") && pbx_cloud_group_of(t, node->name) == grp
		   : !strcmp(node->role, "head");
}

void pbx_cloud_vm_layout(const char *head_host, struct pbx_slurm_layout *l)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->ctld_host, sizeof(l->ctld_host), "%s", head_host);
	l->ctld_port = 6817;
	l->srun_port_lo = 60001;
	l->srun_port_hi = 63000;
	l->slurm_user = "slurm";
	l->bootstrap_mode = "systemd";
	l->extra = "";
	snprintf(l->shared_dir, sizeof(l->shared_dir), "/shared");
}

size_t pbx_cloud_slack(const struct pbx_cluster_template *t)
{
	int total = pbx_template_node_count(t);
	return t->min_nodes > 0 && t->min_nodes < total ? (size_t)(total - t->min_nodes) : 0;
}

size_t pbx_cloud_min_count(const struct pbx_cluster_template *t, const struct pbx_node_group *grp,
			   size_t k)
{
	size_t slack = grp ? pbx_cloud_slack(t) : 0;
	return k > slack ? k - slack : 1;
}

int pbx_cloud_login_read(const struct pbx_cluster_spec *s, const char *default_user,
			 const char *why, char **user, char **key_path, char **pubkey,
			 struct pbx_err *err)
{
	const struct pbx_cluster_template *t = s->t;
	struct pbx_buf pub = PBX_BUF_INIT;
	char *path;
	if (!t)
		return 0;
	*user = xstrdup(t->login_user ? t->login_user : default_user);
	if (!t->ssh_key)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "%s:%d: clusters.%s.ssh_key: required for %s", s->cfg->path,
				    t->line, t->name, why);
	*key_path = xstrdup(t->ssh_key);
	path = xasprintf("%s.pub", t->ssh_key);
	if (pbx_read_file(path, &pub, err) < 0) {
		free(path);
		return pbx_err_prefix(err, "the public half of clusters.%s.ssh_key", t->name);
	}
	free(path);
	pbx_buf_rtrim(&pub);
	if (!pub.len || strchr(pub.buf, '\n')) {
		pbx_buf_release(&pub);
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s.pub: not one public key line",
				    t->ssh_key);
	}
	*pubkey = pbx_buf_detach(&pub, NULL);
	return 0;
}

void pbx_cloud_http_log(void *store, int64_t cluster_id, const char *line)
{
	pbx_store_event(store, cluster_id, "http", "%s", line);
}
