/*
 * bootstrap.c - running templates/bootstrap.sh on one node over SSH (see
 * cluster_internal.h).  The script is the same on node bodies ("direct"
 * mode, under a root prefix) and cloud VMs ("systemd" mode); this file only
 * stages it with its parts and inputs, passes the environment, and turns its
 * output into progress.  The contract between the two (every PBX_* input,
 * the stage's files, stdout, exit status) is templates/README.md's.
 */
#include "cluster/bootstrap_render.h"
#include "cluster/cluster_internal.h"
#include "slurm/conf.h"
#include "tmpl/tmpl.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/quote.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BOOTSTRAP_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct bootstrap_out {
	const struct pbx_cluster_events *ev;
	size_t node;
	struct pbx_buf line;  /* partial stdout line */
	struct pbx_buf error; /* PBX-ERROR text */
	struct pbx_buf stderr_tail;
};

static void bootstrap_line(struct bootstrap_out *o, const char *line)
{
	if (!strncmp(line, "PBX-STAGE ", 10))
		pbx_events_stage(o->ev, o->node, line + 10);
	else if (!strncmp(line, "PBX-ERROR ", 10))
		pbx_buf_addf(&o->error, "%s%s", o->error.len ? "; " : "", line + 10);
}

static void bootstrap_output(void *ctx, int stream, const char *data, size_t len)
{
	struct bootstrap_out *o = ctx;
	size_t i;
	if (stream == 2) {
		pbx_buf_add(&o->stderr_tail, data, len);
		if (o->stderr_tail.len > 4096) {
			size_t drop = o->stderr_tail.len - 2048;
			memmove(o->stderr_tail.buf, o->stderr_tail.buf + drop,
				o->stderr_tail.len - drop + 1);
			o->stderr_tail.len -= drop;
		}
		return;
	}
	for (i = 0; i < len; i++) {
		if (data[i] == '\n') {
			bootstrap_line(o, o->line.buf);
			pbx_buf_reset(&o->line);
		} else {
			pbx_buf_addc(&o->line, data[i]);
		}
	}
}

static void bootstrap_env(struct pbx_buf *cmd, const char *key, const char *value)
{
	struct pbx_buf kv = PBX_BUF_INIT;
	pbx_buf_addf(&kv, "%s=%s", key, value);
	pbx_buf_addc(cmd, ' ');
	pbx_shell_quote(cmd, kv.buf);
	pbx_buf_release(&kv);
}

/* A compute node of a spot group on a cloud watches for its preemption
 * notice (templates/preempt.sh, docs/spot.md): PBX_SPOT names the cloud. */
static void bootstrap_spot(struct pbx_buf *cmd, const struct pbx_cluster_template *t,
			   const struct pbx_node_group *grp, const char *role)
{
	const char *poll = getenv("PBX_PREEMPT_POLL"); /* tests: seconds between IMDS looks */
	if (!grp || !grp->spot || strcmp(role, "compute") ||
	    (strcmp(t->cloud, "gce") && strcmp(t->cloud, "aws")))
		return;
	bootstrap_env(cmd, "PBX_SPOT", t->cloud);
	if (poll && *poll && strspn(poll, "0123456789") == strlen(poll))
		bootstrap_env(cmd, "PBX_PREEMPT_POLL", poll);
}

/* A cluster whose head runs pbx (headdelete.c): every node authorizes the
 * head's own key (PBX_HEAD_PBX); the head gets the cluster's id, its cloud
 * and its own instance (deleted last), on a node body this pbx, which the
 * body runs where it is, and with autostop_action: delete, that. */
static void bootstrap_head_pbx(struct pbx_buf *cmd, const struct pbx_cluster *c,
			       const struct pbx_slurm_layout *l, const char *role)
{
	bootstrap_env(cmd, "PBX_HEAD_PBX", "1");
	if (strcmp(role, "head") != 0)
		return;
	if (pbx_head_deletes(c))
		bootstrap_env(cmd, "PBX_AUTOSTOP_ACTION", "delete");
	bootstrap_env(cmd, "PBX_CLUSTER_ID", c->row.uid);
	bootstrap_env(cmd, "PBX_CLOUD", c->row.cloud);
	bootstrap_env(cmd, "PBX_HEAD_INSTANCE",
		      c->nodes[0].instance_id ? c->nodes[0].instance_id : "");
	if (!strcmp(l->bootstrap_mode, "direct")) {
		char *self = pbx_self_path();
		bootstrap_env(cmd, "PBX_SELF_BIN", self ? self : "");
		free(self);
	}
}

/* The user's public key (c->user_key: the cluster's record carried it,
 * on the head's store only) as "TYPE BASE64", without its comment: the
 * bootstrap authorizes it for the login user (PBX_USER_KEY), so the
 * user's pbx reaches the nodes the head's pbx makes whatever key the
 * cloud gave them (EC2: the head's key pair only). */
static void bootstrap_user_key(struct pbx_buf *cmd, const struct pbx_cluster *c)
{
	const char *k = c->user_key;
	size_t type, blob;
	char *line;
	if (!k || !pbx_pubkey_line_ok(k))
		return;
	type = strcspn(k, " ");
	blob = strcspn(k + type + 1, " ");
	line = xasprintf("%.*s", (int)(type + 1 + blob), k);
	bootstrap_env(cmd, "PBX_USER_KEY", line);
	free(line);
}

/* The command that runs the bootstrap on node i: its inputs as the
 * environment (each PBX_* is templates/README.md's, "Inputs"), after the
 * stage's unpacking when `unpack`. */
static char *bootstrap_command(struct pbx_cluster *c, size_t i, const struct pbx_slurm_layout *l,
			       const char *remote_stage, const char *action, int unpack)
{
	const struct pbx_node_row *n = &c->nodes[i];
	struct pbx_buf cmd = PBX_BUF_INIT;
	const struct pbx_node_group *grp =
		c->spec.t ? pbx_cloud_group_of(c->spec.t, n->name) : NULL;
	char gpus[16], *script = xasprintf("%s/bootstrap.sh", remote_stage);
	snprintf(gpus, sizeof(gpus), "%d", n->gpus);
	if (unpack) {
		/* The stage arrives as a tar stream on stdin: one exec per node.
		 * Its members carry their directories, so tar makes them. */
		pbx_buf_adds(&cmd, "umask 077 && tar -C ");
		pbx_shell_quote(&cmd, *n->root ? n->root : "/");
		pbx_buf_adds(&cmd, " -xf - && ");
	}
	/* Environment by export, not `env`: one exec fewer per node. */
	pbx_buf_adds(&cmd, "export");
	bootstrap_env(&cmd, "PATH", BOOTSTRAP_PATH);
	bootstrap_env(&cmd, "PBX_MODE", l->bootstrap_mode);
	bootstrap_env(&cmd, "PBX_ROOT", n->root);
	bootstrap_env(&cmd, "PBX_ROLE", n->role);
	bootstrap_env(&cmd, "PBX_NODE", n->name);
	bootstrap_env(&cmd, "PBX_CLUSTER", c->row.name);
	bootstrap_env(&cmd, "PBX_STAGE", remote_stage);
	bootstrap_env(&cmd, "PBX_GPUS", gpus);
	bootstrap_env(&cmd, "PBX_HEAD_ADDR", c->nodes[0].address);
	bootstrap_env(&cmd, "PBX_SHARED", l->shared_dir);
	bootstrap_env(&cmd, "PBX_SLURM_USER", l->slurm_user);
	bootstrap_env(&cmd, "PBX_CTLD_LOCK", l->ctld_lock);
	if (l->train_bin[0])
		bootstrap_env(&cmd, "PBX_TRAIN_BIN", l->train_bin);
	if (c->spec.t && !strcmp(action, "up")) {
		char secs[16];
		/* tests: seconds between looks; a VM's grace after boot */
		static const char *const knobs[] = { "PBX_AUTOSTOP_TICK",
						     "PBX_AUTOSTOP_BOOT_GRACE" };
		size_t k;
		snprintf(secs, sizeof(secs), "%d", c->spec.t->autostop);
		bootstrap_env(&cmd, "PBX_AUTOSTOP", secs);
		for (k = 0; k < sizeof(knobs) / sizeof(knobs[0]); k++) {
			const char *v = getenv(knobs[k]);
			if (v && *v && strspn(v, "0123456789") == strlen(v))
				bootstrap_env(&cmd, knobs[k], v);
		}
		if (pbx_head_runs_pbx(c))
			bootstrap_head_pbx(&cmd, c, l, n->role);
		if (c->budget_until > 0 && !strcmp(n->role, "head")) {
			char until[24]; /* the head powers the cluster off then */
			snprintf(until, sizeof(until), "%lld", (long long)c->budget_until);
			bootstrap_env(&cmd, "PBX_BUDGET_UNTIL", until);
		}
		bootstrap_spot(&cmd, c->spec.t, grp, n->role);
		bootstrap_user_key(&cmd, c);
	}
	pbx_buf_adds(&cmd, " && exec sh ");
	pbx_shell_quote(&cmd, script);
	pbx_buf_addc(&cmd, ' ');
	pbx_shell_quote(&cmd, action);
	free(script);
	return pbx_buf_detach(&cmd, NULL);
}

/* `plain` run as root, knowing the login user and its HOME (sudo resets
 * HOME): the bootstrap authorizes the head's key for that user. */
static char *bootstrap_as_root(const struct pbx_cluster *c, const char *plain)
{
	struct pbx_buf b = PBX_BUF_INIT;
	if (!c->user || !strcmp(c->user, "root"))
		return xstrdup(plain);
	pbx_buf_adds(&b,
		     "sudo -n env \"PBX_LOGIN_USER=$(id -un)\" \"PBX_LOGIN_HOME=$HOME\" sh -c ");
	pbx_shell_quote(&b, plain);
	return pbx_buf_detach(&b, NULL);
}

int pbx_bootstrap_node(struct pbx_cluster *c, size_t i, const struct pbx_slurm_layout *l,
		       const struct pbx_buf *stage_tar, const char *action,
		       const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	struct bootstrap_out o = { ev, i, PBX_BUF_INIT, PBX_BUF_INIT, PBX_BUF_INIT };
	char *remote_stage = xasprintf("%s/" PBX_STAGE_DIR, c->nodes[i].root);
	char *cmd = NULL;
	struct pbx_ssh *s;
	int status = 0, rc;

	/* connected first: its errors name the node (on this machine: none) */
	rc = c->here == (int)i ? 0 : pbx_cluster_connect(c, i, &s, err);
	if (rc == 0) {
		pbx_events_stage(ev, i, stage_tar ? "uploading" : action);
		char *plain = bootstrap_command(c, i, l, remote_stage, action, stage_tar != NULL);
		cmd = bootstrap_as_root(c, plain);
		free(plain);
		rc = pbx_cluster_node_exec(c, i, cmd, stage_tar ? stage_tar->buf : NULL,
					   stage_tar ? stage_tar->len : 0, bootstrap_output, &o,
					   &status, err);
		if (rc < 0)
			pbx_err_prefix(err, "node %s", c->nodes[i].name);
	}
	if (rc == 0 && status != 0) {
		pbx_buf_rtrim(&o.stderr_tail);
		rc = pbx_err_set(err, "node %s: bootstrap %s failed (status %d): %s",
				 c->nodes[i].name, action, status,
				 o.error.len ? o.error.buf : o.stderr_tail.buf);
	}
	pbx_buf_release(&o.line);
	pbx_buf_release(&o.error);
	pbx_buf_release(&o.stderr_tail);
	free(remote_stage);
	free(cmd);
	return rc;
}

int pbx_stage_binary(struct pbx_buf *tar, const char *path, const char *name, time_t now,
		     struct pbx_err *err)
{
	struct pbx_buf bin = PBX_BUF_INIT;
	char *member = xasprintf(PBX_STAGE_DIR "/%s", name), *target = pbx_host_target();
	char *tmember = xasprintf("%s.target", member);
	int rc = pbx_read_file(path, &bin, err);
	if (rc == 0)
		rc = pbx_ustar_file(tar, member, 0755, now, bin.buf, bin.len, err);
	if (rc == 0)
		rc = pbx_ustar_file(tar, tmember, 0644, now, target, strlen(target), err);
	pbx_buf_release(&bin);
	free(member);
	free(tmember);
	free(target);
	return rc;
}

/* Template `name` as the stage's member PBX_STAGE_DIR/NAME, mode `mode`. */
static int stage_template(struct pbx_buf *tar, const char *name, int mode, time_t now,
			  struct pbx_err *err)
{
	struct pbx_buf text = PBX_BUF_INIT;
	char *member = xasprintf(PBX_STAGE_DIR "/%s", name);
	int rc = pbx_tmpl_get(name, &text, err);
	if (rc == 0)
		rc = pbx_ustar_file(tar, member, mode, now, text.buf, text.len, err);
	pbx_buf_release(&text);
	free(member);
	return rc;
}

int pbx_bootstrap_stage_begin(struct pbx_buf *tar, time_t now, struct pbx_err *err)
{
	static const char *const scripts[] = { "bootstrap.sh", "autostop.sh", "preempt.sh" };
	size_t i;
	int rc = pbx_ustar_dir(tar, PBX_NODE_DIR, 0700, now, err);
	if (rc == 0)
		rc = pbx_ustar_dir(tar, PBX_STAGE_DIR, 0700, now, err);
	for (i = 0; rc == 0 && i < sizeof(scripts) / sizeof(scripts[0]); i++)
		rc = stage_template(tar, scripts[i], 0700, now, err);
	if (rc == 0)
		rc = pbx_ustar_dir(tar, PBX_STAGE_DIR "/bootstrap", 0700, now, err);
	/* the driver's parts: every template under bootstrap/ */
	for (i = 0; rc == 0 && pbx_tmpl_files[i].name; i++)
		if (!strncmp(pbx_tmpl_files[i].name, "bootstrap/", 10))
			rc = stage_template(tar, pbx_tmpl_files[i].name, 0600, now, err);
	return rc;
}

/* Node n's root prefix without the '/'s it ends in, as the bootstrap
 * trims PBX_ROOT (caller frees). */
static char *stage_root(const struct pbx_node_row *n)
{
	size_t len = strlen(n->root);
	while (len > 0 && n->root[len - 1] == '/')
		len--;
	return xasprintf("%.*s", (int)len, n->root);
}

/* Member PBX_STAGE_DIR/NAME, 0644, holding `text`; frees `name`. */
static int stage_text(struct pbx_buf *tar, char *name, const struct pbx_buf *text, time_t now,
		      struct pbx_err *err)
{
	char *member = xasprintf(PBX_STAGE_DIR "/%s", name);
	int rc = pbx_ustar_file(tar, member, 0644, now, text->len ? text->buf : "", text->len, err);
	free(member);
	free(name);
	return rc;
}

/* gres-NODE.conf for node n: its GPUs under its root (direct) or /dev. */
static int stage_gres(const struct pbx_cluster *c, const struct pbx_node_row *n, int direct,
		      const char *root, struct pbx_buf *tar, time_t now, struct pbx_err *err)
{
	const struct pbx_node_group *grp =
		c->spec.t ? pbx_cloud_group_of(c->spec.t, n->name) : NULL;
	struct pbx_buf gres = PBX_BUF_INIT;
	char type[32], *base = xasprintf("%s/dev/nvidia", direct ? root : "");
	int rc;
	pbx_slurm_gpu_type(grp ? grp->gpu_type : NULL, type, sizeof(type));
	pbx_bootstrap_gres_conf(&gres, n->name, n->gpus, type, base);
	rc = stage_text(tar, xasprintf("gres-%s.conf", n->name), &gres, now, err);
	pbx_buf_release(&gres);
	free(base);
	return rc;
}

/* A VM's units of pbx's watchers: WATCHER-NODE.service. */
static int stage_units(const struct pbx_node_row *n, const char *root, struct pbx_buf *tar,
		       time_t now, struct pbx_err *err)
{
	static const char *const watchers[] = { "pbx-preempt", "pbx-autostop" };
	const char *daemon = strcmp(n->role, "head") ? "slurmd" : "slurmctld";
	size_t w;
	int rc = 0;
	for (w = 0; rc == 0 && w < sizeof(watchers) / sizeof(watchers[0]); w++) {
		struct pbx_buf unit = PBX_BUF_INIT;
		pbx_bootstrap_watcher_unit(&unit, watchers[w], root, daemon);
		rc = stage_text(tar, xasprintf("%s-%s.service", watchers[w], n->name), &unit, now,
				err);
		pbx_buf_release(&unit);
	}
	return rc;
}

/* The template's proxy and no_proxy into e (none without a template). */
static void env_proxy_of(const struct pbx_cluster *c, struct pbx_bootstrap_env *e)
{
	const struct pbx_cluster_template *t = c->spec.t;
	if (!t || !t->proxy)
		return;
	e->proxy = t->proxy;
	e->no_proxy = (const char *const *)t->no_proxy;
	e->nno_proxy = t->nno_proxy;
}

int pbx_bootstrap_stage_apt_proxy(const struct pbx_cluster *c, struct pbx_buf *tar, time_t now,
				  struct pbx_err *err)
{
	struct pbx_bootstrap_env e = { 0 };
	struct pbx_buf conf = PBX_BUF_INIT;
	int rc = 0;
	env_proxy_of(c, &e);
	if (e.proxy) {
		pbx_bootstrap_apt_proxy(&conf, &e);
		rc = stage_text(tar, xstrdup("apt-proxy.conf"), &conf, now, err);
	}
	pbx_buf_release(&conf);
	return rc;
}

/* env-NODE.sh: node n's etc/pbx/env.sh, all but the task user's line. */
static int stage_env(const struct pbx_cluster *c, const struct pbx_slurm_layout *l,
		     const struct pbx_node_row *n, int direct, const char *root,
		     struct pbx_buf *tar, time_t now, struct pbx_err *err)
{
	struct pbx_bootstrap_env e = {
		.root = root,
		.node = n->name,
		.cluster = c->row.name,
		.shared = l->shared_dir,
		.direct = direct,
		.train_on_path = direct && l->train_bin[0],
	};
	struct pbx_buf env = PBX_BUF_INIT;
	int rc;
	env_proxy_of(c, &e);
	pbx_bootstrap_env_sh(&env, &e);
	rc = stage_text(tar, xasprintf("env-%s.sh", n->name), &env, now, err);
	pbx_buf_release(&env);
	return rc;
}

int pbx_bootstrap_stage_nodes(const struct pbx_cluster *c, const struct pbx_slurm_layout *l,
			      struct pbx_buf *tar, time_t now, struct pbx_err *err)
{
	int direct = !strcmp(l->bootstrap_mode, "direct");
	struct pbx_buf task_user = PBX_BUF_INIT;
	size_t i;
	int rc;
	pbx_bootstrap_env_task_user(&task_user);
	rc = stage_text(tar, xstrdup("task-user.env.sh"), &task_user, now, err);
	pbx_buf_release(&task_user);
	if (rc == 0)
		rc = pbx_bootstrap_stage_apt_proxy(c, tar, now, err);
	for (i = 0; rc == 0 && i < c->nnodes; i++) {
		char *root = stage_root(&c->nodes[i]);
		rc = stage_gres(c, &c->nodes[i], direct, root, tar, now, err);
		if (rc == 0)
			rc = stage_env(c, l, &c->nodes[i], direct, root, tar, now, err);
		if (rc == 0 && !direct)
			rc = stage_units(&c->nodes[i], root, tar, now, err);
		free(root);
	}
	return rc;
}
