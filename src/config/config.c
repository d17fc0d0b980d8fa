/*
 * config.c - loading config.yaml (permission and size checks, the built-in
 * default when it is missing), freeing, lookups, one-line template
 * summaries and the key-file check of `pbx config check`.  The schema
 * itself is in config_parse.c.
 */
#include "config/config_internal.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void template_free(struct pbx_cluster_template *t)
{
	size_t i;
	for (i = 0; i < t->ngroups; i++) {
		free(t->groups[i].name);
		free(t->groups[i].machine_type);
		free(t->groups[i].gpu_type);
	}
	free(t->groups);
	free(t->name);
	free(t->cloud);
	free(t->login_user);
	free(t->ssh_key);
	free(t->image);
	free(t->subnet);
	free(t->head_machine_type);
	free(t->head_service_account);
	free(t->head_instance_profile);
	free(t->host);
	free(t->work_dir);
	free(t->setup);
	for (size_t k = 0; k < t->nssh_from; k++)
		free(t->ssh_from[k]);
	free(t->ssh_from);
	free(t->proxy);
	for (size_t k = 0; k < t->nno_proxy; k++)
		free(t->no_proxy[k]);
	free(t->no_proxy);
}

static void overrides_free(struct pbx_price_override *v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

void pbx_config_free(struct pbx_config *cfg)
{
	size_t i;
	if (!cfg)
		return;
	for (i = 0; i < cfg->ntemplates; i++)
		template_free(&cfg->templates[i]);
	free(cfg->templates);
	free(cfg->path);
	free(cfg->gce.project);
	free(cfg->gce.zone);
	free(cfg->gce.credentials);
	free(cfg->gce.endpoint);
	for (size_t z = 0; z < cfg->gce.nzones; z++)
		free(cfg->gce.zones[z]);
	free(cfg->gce.zones);
	free(cfg->aws.region);
	free(cfg->aws.profile);
	free(cfg->aws.endpoint);
	free(cfg->aws.subnet);
	for (size_t z = 0; z < cfg->aws.nsubnets; z++)
		free(cfg->aws.subnets[z]);
	free(cfg->aws.subnets);
	free(cfg->local.address_base);
	free(cfg->gce.billing_endpoint);
	free(cfg->gce.storage_endpoint);
	free(cfg->publisher);
	free(cfg->aws.pricing_endpoint);
	free(cfg->aws.s3_endpoint);
	free(cfg->prices.currency);
	overrides_free(cfg->prices.hourly, cfg->prices.nhourly);
	overrides_free(cfg->prices.spot_hourly, cfg->prices.nspot_hourly);
	overrides_free(cfg->prices.gpu_hourly, cfg->prices.ngpu_hourly);
	free(cfg);
}

struct pbx_config *pbx_config_default(void)
{
	struct pbx_config *cfg = xcalloc(1, sizeof(*cfg));
	struct pbx_cluster_template *t;
	cfg->path = xstrdup("(built-in)");
	cfg->templates = t = xcalloc(1, sizeof(*t));
	cfg->ntemplates = 1;
	t->name = xstrdup("local");
	t->cloud = xstrdup("local");
	t->login_user = xstrdup("root");
	t->image = xstrdup("host");
	t->groups = xcalloc(1, sizeof(*t->groups));
	t->ngroups = 1;
	t->groups[0].name = xstrdup("node");
	t->groups[0].count = 2;
	t->groups[0].min = -1;
	t->groups[0].gpus = 2;
	cfg->local.address_base = xstrdup(PBX_LOCAL_ADDRESS_BASE);
	cfg->local.ssh_port = PBX_LOCAL_SSH_PORT;
	cfg->local.slurm_port_base = PBX_LOCAL_SLURM_PORT_BASE;
	return cfg;
}

int pbx_config_parse(const char *name, const char *text, size_t len, struct pbx_config **out,
		     struct pbx_err *err)
{
	struct pbx_ydoc *doc;
	struct pbx_config *cfg;
	int rc;
	*out = NULL;
	if (len > PBX_CONFIG_MAX_SIZE)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: larger than %d bytes", name,
				    PBX_CONFIG_MAX_SIZE);
	if (pbx_ydoc_parse(name, text, len, &doc, err) < 0)
		return -1;
	cfg = xcalloc(1, sizeof(*cfg));
	cfg->path = xstrdup(name);
	rc = pbx_config_from_doc(doc, cfg, err);
	pbx_ydoc_free(doc);
	if (rc < 0) {
		pbx_config_free(cfg);
		return -1;
	}
	*out = cfg;
	return 0;
}

int pbx_config_load(const char *path, int missing_ok, struct pbx_config **out, struct pbx_err *err)
{
	struct pbx_buf text = PBX_BUF_INIT;
	int missing, rc;
	*out = NULL;
	if (pbx_read_regular(path, PBX_CONFIG_MAX_SIZE, &text, &missing, err) < 0) {
		if (missing && !missing_ok)
			return pbx_err_setc(err, PBX_EXIT_USAGE,
					    "cannot read configuration "
					    "%s: %s",
					    path, strerror(ENOENT));
		if (!missing)
			return -1;
		pbx_err_clear(err);
		*out = pbx_config_default();
		return 0;
	}
	rc = pbx_check_private(path, 0, err);
	if (rc == 0)
		rc = pbx_config_parse(path, text.buf, text.len, out, err);
	pbx_buf_release(&text);
	return rc;
}

const struct pbx_cluster_template *pbx_config_template(const struct pbx_config *cfg,
						       const char *name)
{
	size_t i;
	for (i = 0; cfg && name && i < cfg->ntemplates; i++)
		if (!strcmp(cfg->templates[i].name, name))
			return &cfg->templates[i];
	return NULL;
}

const char *pbx_config_none_hint(const struct pbx_config *cfg)
{
	return cfg && cfg->ntemplates == 0
		       ? " (it defines no cluster template: add one under clusters:)"
		       : "";
}

int pbx_template_node_count(const struct pbx_cluster_template *t)
{
	size_t i;
	int n = 0;
	for (i = 0; i < t->ngroups; i++)
		n += t->groups[i].count;
	return n;
}

static void group_describe(const struct pbx_node_group *g, struct pbx_buf *b)
{
	pbx_buf_addf(b, "%d x %s", g->count, g->name);
	if (g->machine_type)
		pbx_buf_addf(b, " %s", g->machine_type);
	if (g->gpus > 0)
		pbx_buf_addf(b, " (%d GPU%s%s%s)", g->gpus, g->gpu_type ? " " : "",
			     g->gpu_type ? g->gpu_type : "", g->spot ? ", spot" : "");
	else if (g->spot)
		pbx_buf_adds(b, " (spot)");
}

char *pbx_template_login(const struct pbx_cluster_template *t)
{
	if (!t->login_user) /* transport: openssh, the user from ssh_config */
		return xasprintf("%s (user and port from your ssh_config)", t->host);
	return xasprintf("%s@%s:%d", t->login_user, t->host, t->port);
}

char *pbx_template_describe(const struct pbx_cluster_template *t)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	pbx_buf_addf(&b, "%s: ", t->cloud);
	if (!strcmp(t->cloud, "ssh")) { /* an existing cluster: its login node */
		char *login = pbx_template_login(t);
		pbx_buf_addf(&b, "%s, work_dir %s", login, t->work_dir);
		free(login);
	}
	for (i = 0; i < t->ngroups; i++) {
		if (i)
			pbx_buf_adds(&b, ", ");
		group_describe(&t->groups[i], &b);
	}
	if (t->head_machine_type)
		pbx_buf_addf(&b, ", head %s", t->head_machine_type);
	return pbx_buf_detach(&b, NULL);
}

/* A secret file named at FILE:LINE under KEY must exist and be private. */
static int check_secret(const struct pbx_config *cfg, int line, const char *key, const char *file,
			struct pbx_err *err)
{
	struct stat st;
	if (stat(file, &st) < 0) {
		int e = errno;
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s:%d: %s: cannot use %s: %s", cfg->path,
				    line, key, file, strerror(e));
	}
	if (pbx_check_private(file, 1, err) < 0)
		return pbx_err_prefix(err, "%s:%d: %s", cfg->path, line, key);
	return 0;
}

int pbx_config_check_files(const struct pbx_config *cfg, struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < cfg->ntemplates; i++) {
		const struct pbx_cluster_template *t = &cfg->templates[i];
		char *key;
		int rc;
		if (!t->ssh_key)
			continue;
		key = xasprintf("clusters.%s.ssh_key", t->name);
		rc = check_secret(cfg, t->ssh_key_line, key, t->ssh_key, err);
		free(key);
		if (rc < 0)
			return -1;
	}
	if (cfg->gce.credentials)
		return check_secret(cfg, cfg->gce.credentials_line, "clouds.gce.credentials",
				    cfg->gce.credentials, err);
	return 0;
}
