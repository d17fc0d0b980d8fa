/*
 * cluster.c - opening a live cluster and running commands on its nodes
 * (see cluster_session.h): the session layer of src/cluster.
 */
#include "cluster/cluster.h"
#include "cluster/cluster_internal.h"
#include "config/yamltree.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *pbx_cluster_dir(const char *name)
{
	return xasprintf("%s/clusters/%s", pbx_home(), name);
}

void pbx_cluster_use_template(struct pbx_cluster *c, const struct pbx_cluster_template *t)
{
	free(c->sized_groups);
	c->sized_groups = NULL;
	c->spec.t = NULL;
	if (!t)
		return;
	pbx_template_sized(t, c->row.template_json, &c->sized, &c->sized_groups);
	c->spec.t = &c->sized;
}

/* Leaves out of c->nodes the nodes in `state` (their rows stay). */
static void cluster_drop_state(struct pbx_cluster *c, const char *state)
{
	size_t i, k = 0;
	for (i = 0; i < c->nnodes; i++) {
		if (c->nodes[i].state && !strcmp(c->nodes[i].state, state))
			pbx_node_row_release(&c->nodes[i]);
		else
			c->nodes[k++] = c->nodes[i];
	}
	c->nnodes = k;
}

static void (*cluster_open_hook)(struct pbx_cluster *c);

void pbx_cluster_set_open_hook(void (*fn)(struct pbx_cluster *c))
{
	cluster_open_hook = fn;
}

/* What the feature layer does on close and on a failed connect (see
 * pbx_cluster_set_hooks); all NULL until it registers. */
static struct pbx_cluster_hooks cluster_hooks;

void pbx_cluster_set_hooks(const struct pbx_cluster_hooks *h)
{
	memset(&cluster_hooks, 0, sizeof(cluster_hooks));
	if (h)
		cluster_hooks = *h;
}

void pbx_cluster_mark(struct pbx_cluster *c, const char *state)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_store_cluster_set_state(c->store, c->row.id, state, &err) < 0)
		pbx_store_event(c->store, c->row.id, "error", "%s", err.msg);
}

/* Whether cluster `name` is one of cloud ssh (its template says so). */
static int cluster_is_ssh(const struct pbx_config *cfg, const char *name)
{
	const struct pbx_cluster_template *t = pbx_config_template(cfg, name);
	return t && !strcmp(t->cloud, "ssh");
}

/* A cluster of cloud ssh gets its store row and its one node (the login
 * node) the first time a verb names it: there is nothing to start
 * (docs/ssh-clusters.md). */
static int cluster_attach(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			  struct pbx_err *err)
{
	const struct pbx_cluster_template *t = pbx_config_template(cfg, name);
	char uid[PBX_CLUSTER_UID_LEN + 1], *json;
	struct pbx_node_row node;
	int64_t id;
	int rc;
	if (pbx_cluster_uid_new(uid, err) < 0 || pbx_store_begin(st, err) < 0)
		return -1;
	json = pbx_template_json(t);
	rc = pbx_store_cluster_create(st, name, uid, "ssh", json, 0, &id, err);
	free(json);
	if (rc == 0)
		rc = pbx_store_cluster_set_state(st, id, "up", err);
	memset(&node, 0, sizeof(node));
	node.cluster_id = id;
	node.name = "login";
	node.role = "head";
	node.address = t->host;
	node.ssh_port = t->port;
	node.state = "up";
	if (rc == 0)
		rc = pbx_store_node_put(st, &node, err);
	if (rc < 0) {
		pbx_store_rollback(st);
		return -1;
	}
	return pbx_store_commit(st, err);
}

/* After "no cluster named NAME": that a template of that name is not
 * started, or the running cluster or template whose name is close. */
static void cluster_not_found_hint(struct pbx_store *st, const struct pbx_config *cfg,
				   const char *name, struct pbx_err *err)
{
	struct pbx_err e2 = PBX_ERR_INIT;
	struct pbx_cluster_row *rows = NULL;
	size_t n = 0, i, k = 0;
	const char **names, *hint;
	size_t len = strlen(err->msg);
	if (cfg && pbx_config_template(cfg, name)) {
		snprintf(err->msg + len, sizeof(err->msg) - len,
			 " running: start it with 'pbx cluster start %s'", name);
		return;
	}
	if (pbx_store_cluster_list(st, 0, &rows, &n, &e2) < 0)
		n = 0;
	names = xcalloc(n + (cfg ? cfg->ntemplates : 0) + 1, sizeof(*names));
	for (i = 0; i < n; i++)
		names[k++] = rows[i].name;
	for (i = 0; cfg && i < cfg->ntemplates; i++)
		names[k++] = cfg->templates[i].name;
	hint = pbx_did_you_mean(name, names);
	if (hint)
		snprintf(err->msg + len, sizeof(err->msg) - len, " (did you mean '%s'?)", hint);
	else if (k)
		snprintf(err->msg + len, sizeof(err->msg) - len, " (pbx cluster list)");
	free(names);
	pbx_cluster_rows_free(rows, n);
}

int pbx_cluster_open(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		     struct pbx_cluster **out, struct pbx_err *err)
{
	struct pbx_cluster_row row;
	*out = NULL;
	if (pbx_store_cluster_get(st, name, &row, err) < 0) {
		if (err->code == PBX_EXIT_NOTFOUND && !cluster_is_ssh(cfg, name))
			cluster_not_found_hint(st, cfg, name, err);
		if (err->code != PBX_EXIT_NOTFOUND || !cluster_is_ssh(cfg, name))
			return -1;
		pbx_err_clear(err);
		/* another verb may attach it at the same time: its row will do */
		if (cluster_attach(st, cfg, name, err) < 0)
			pbx_err_clear(err);
		if (pbx_store_cluster_get(st, name, &row, err) < 0)
			return -1;
	}
	return pbx_cluster_open_row(st, cfg, &row, out, err);
}

/* The node PBX_THIS_NODE names (pbx-head sets it on the head), or -1.  A
 * cluster on the local cloud has none: its nodes are all "here".  The
 * node's disk must be this machine's (it holds pbx-head): a stray
 * PBX_THIS_NODE on the user's machine never runs the head's commands
 * there. */
static int cluster_here(const struct pbx_cluster *c)
{
	const char *name = getenv("PBX_THIS_NODE");
	char *mark;
	int i, mine;
	if (!name || !*name || !strcmp(c->row.cloud, "local"))
		return -1;
	i = pbx_cluster_node_index(c, name);
	if (i < 0)
		return -1;
	mark = xasprintf("%s/usr/local/sbin/pbx-head", c->nodes[i].root ? c->nodes[i].root : "");
	mine = access(mark, X_OK) == 0;
	free(mark);
	return mine ? i : -1;
}

int pbx_cluster_head_sees_here(const struct pbx_cluster *c)
{
	return c->here == 0 || !strcmp(c->row.cloud, "local");
}

int pbx_cluster_open_row(struct pbx_store *st, const struct pbx_config *cfg,
			 struct pbx_cluster_row *row, struct pbx_cluster **out, struct pbx_err *err)
{
	struct pbx_cluster *c = xcalloc(1, sizeof(*c));
	const char *name;
	*out = NULL;
	c->store = st;
	c->cfg = cfg;
	c->row = *row;
	memset(row, 0, sizeof(*row));
	name = c->row.name;
	c->provider = pbx_provider_find(c->row.cloud);
	if (!c->provider) {
		pbx_err_set(err, "cluster %s uses cloud '%s', which this pbx does not support",
			    name, c->row.cloud);
		goto fail;
	}
	if (pbx_store_node_list(st, c->row.id, &c->nodes, &c->nnodes, err) < 0)
		goto fail;
	cluster_drop_state(c, PBX_NODE_NOT_CREATED);
	c->dir = pbx_cluster_dir(name);
	c->spec.cfg = cfg;
	pbx_cluster_use_template(
		c, pbx_config_template(cfg, pbx_cluster_template_for(&c->row, name, NULL)));
	c->spec.name = c->row.name;
	c->spec.id = c->row.id;
	c->spec.slot = c->row.slot;
	c->spec.uid = c->row.uid;
	c->spec.store = st;
	c->user_key = pbx_template_user_key(c->row.template_json);
	c->spec.user_key = c->user_key;
	if (pbx_cluster_is_users(c) && c->spec.t && c->nnodes == 1) {
		/* its login node, as the template names it now */
		free(c->nodes[0].address);
		c->nodes[0].address = xstrdup(c->spec.t->host);
		c->nodes[0].ssh_port = c->spec.t->port;
	}
	if (c->provider->open(&c->spec, &c->pctx, err) < 0)
		goto fail;
	if (c->provider->login(c->pctx, &c->user, &c->key_path, err) < 0)
		goto fail;
	pbx_hostkeys_from_store(&c->hostkeys, st);
	c->pool = pbx_ssh_pool_new(&c->hostkeys);
	c->opened_at = time(NULL);
	c->here = cluster_here(c);
	if (cluster_open_hook)
		cluster_open_hook(c);
	*out = c;
	return 0;
fail:
	pbx_cluster_close(c);
	return -1;
}

void pbx_cluster_release(struct pbx_cluster *c)
{
	if (c->pool)
		pbx_ssh_pool_free(c->pool);
	c->pool = NULL;
	if (c->pctx)
		c->provider->close(c->pctx);
	c->pctx = NULL;
	pbx_cluster_row_free(&c->row);
	pbx_node_rows_free(c->nodes, c->nnodes);
	free(c->dir);
	free(c->user);
	free(c->key_path);
	free(c->sized_groups);
	free(c->stops);
	free(c->still_running);
	free(c->starts);
	pbx_node_rows_free(c->asleep, c->nasleep);
	free(c->user_key);
	c->user_key = NULL;
	c->spec.user_key = NULL;
}

void pbx_cluster_close(struct pbx_cluster *c)
{
	if (!c)
		return;
	if (cluster_hooks.closing) /* spend: what this verb started or stopped */
		cluster_hooks.closing(c, time(NULL));
	pbx_cluster_release(c);
	free(c);
}

int pbx_cluster_node_index(const struct pbx_cluster *c, const char *name)
{
	size_t i;
	for (i = 0; i < c->nnodes; i++)
		if (!strcmp(c->nodes[i].name, name))
			return (int)i;
	return -1;
}

const char *pbx_cluster_ssh_addr(const struct pbx_cluster *c, size_t i)
{
	const char *pub = c->nodes[i].public_address;
	/* pbx on the head is inside the cluster's network: a node it made
	 * (power saving) has a public address too, which need not let it in */
	return pub && *pub && c->here < 0 ? pub : c->nodes[i].address;
}

int pbx_cluster_via_head(const struct pbx_cluster *c, size_t i)
{
	const char *mine = c->nodes[i].public_address, *head = c->nodes[0].public_address;
	return i > 0 && c->here != 0 && (!mine || !*mine) && head && *head;
}

char *pbx_cluster_pin_name(const struct pbx_cluster *c, size_t i)
{
	return xasprintf("%s/%s@%s:%d", c->row.name, c->nodes[i].name, pbx_cluster_ssh_addr(c, i),
			 c->nodes[i].ssh_port);
}

/* A head that does not answer because the cluster is powered off: err
 * says so and how to start it again, in place of the connection's error. */
static void cluster_say_stopped(struct pbx_cluster *c, struct pbx_err *err)
{
	char *why = cluster_hooks.stopped_why ? cluster_hooks.stopped_why(c) : NULL;
	if (!why)
		return;
	pbx_err_clear(err);
	pbx_err_setc(err, PBX_EXIT_FAIL,
		     "cluster %s is stopped: %s; start it again with "
		     "'pbx cluster start %s'",
		     c->row.name, why, c->row.name);
	free(why);
}

int pbx_cluster_connect(struct pbx_cluster *c, size_t i, struct pbx_ssh **out, struct pbx_err *err)
{
	struct pbx_ssh_target t = { 0 };
	char *pin;
	int rc;
	if (i >= c->nnodes)
		return pbx_err_set(err, "cluster %s has no node %zu", c->row.name, i);
	if (pbx_cluster_via_head(c, i) && pbx_cluster_connect(c, 0, &t.via, err) < 0)
		return pbx_err_prefix(err, "node %s (through the head)", c->nodes[i].name);
	pin = pbx_cluster_pin_name(c, i);
	t.host = pbx_cluster_ssh_addr(c, i);
	t.port = c->nodes[i].ssh_port;
	t.user = c->user;
	t.key_path = c->key_path;
	t.name = pin;
	t.openssh = pbx_cluster_is_users(c) && c->spec.t && c->spec.t->openssh;
	rc = pbx_ssh_pool_get(c->pool, &t, out, err);
	if (rc == 0 && c->user && strcmp(c->user, "root") != 0 && !pbx_cluster_is_users(c))
		pbx_ssh_set_as_root(*out, 1);
	free(pin);
	if (rc < 0)
		pbx_err_prefix(err, "node %s", c->nodes[i].name);
	if (rc < 0 && i == 0 && !c->starting && err->code != PBX_EXIT_SECURITY)
		cluster_say_stopped(c, err);
	return rc;
}

int pbx_cluster_disconnect(struct pbx_cluster *c, struct pbx_err *err)
{
	struct pbx_ssh_target t = { 0 };
	int rc;
	if (!pbx_cluster_is_users(c) || !c->spec.t || !c->spec.t->openssh || !c->nnodes)
		return 0; /* pbx's own client keeps no connection between verbs */
	t.host = pbx_cluster_ssh_addr(c, 0);
	t.port = c->nodes[0].ssh_port;
	t.user = c->user;
	t.key_path = c->key_path;
	t.openssh = 1;
	rc = pbx_ssh_openssh_disconnect(&t, err);
	return rc < 0 ? -1 : rc;
}

int pbx_cluster_is_users(const struct pbx_cluster *c)
{
	return !strcmp(c->row.cloud, "ssh");
}

/* On a cluster of cloud ssh, the user's login session: setup, then pbx's
 * variables, a private umask and the work directory (made 0700 the first
 * time), relative to the home unless absolute or $VAR/... */
static void cluster_user_prefix(const struct pbx_cluster *c, struct pbx_buf *b)
{
	const struct pbx_cluster_template *t = c->spec.t;
	const char *wd = t && t->work_dir ? t->work_dir : "pbx";
	if (t && t->setup && *t->setup)
		pbx_buf_addf(b, "{\n%s\n} && ", t->setup);
	pbx_buf_adds(b, "umask 077 && export PBX_CLUSTER=");
	pbx_shell_quote(b, c->row.name);
	/* work_dir holds [A-Za-z0-9._/-] after an optional $NAME (config) */
	pbx_buf_addf(b,
		     " PBX_SHARED=\"%s%s\" && { [ -d \"$PBX_SHARED\" ] || mkdir -p -m 700 "
		     "\"$PBX_SHARED\"; } && cd \"$PBX_SHARED\" && ",
		     wd[0] == '/' || wd[0] == '$' ? "" : "$HOME/", wd);
}

/* Sources the node's env.sh.  A node body's is under its root prefix,
 * which its own sshd names (PBX_BODY_ROOT; cluster_exec_line carries it
 * through sudo): the store's may be an instance's before the head made the
 * node anew (power saving), when the user's pbx has not learnt the new one
 * yet; on a VM the root is "". */
static void cluster_env_prefix(const struct pbx_cluster *c, size_t node, struct pbx_buf *b)
{
	const char *root = c->nodes[node].root ? c->nodes[node].root : "";
	if (pbx_cluster_is_users(c)) {
		cluster_user_prefix(c, b);
		return;
	}
	if (*root) {
		pbx_buf_adds(b, "pbx_root=${PBX_BODY_ROOT:-}; [ -n \"$pbx_root\" ] || pbx_root=");
		pbx_shell_quote(b, root);
		pbx_buf_adds(b, "; . \"$pbx_root/etc/pbx/env.sh\"");
	} else {
		pbx_buf_adds(b, ". /etc/pbx/env.sh");
	}
	pbx_buf_adds(b, " && cd \"${PBX_SHARED:-.}\" && ");
}

char *pbx_cluster_as_root(const struct pbx_cluster *c, const char *cmdline)
{
	struct pbx_buf b = PBX_BUF_INIT;
	if (!c->user || !strcmp(c->user, "root"))
		return xstrdup(cmdline);
	pbx_buf_adds(&b, "sudo -n sh -c ");
	pbx_shell_quote(&b, cmdline);
	return pbx_buf_detach(&b, NULL);
}

/* CMDLINE as node `node`'s root: through `sudo -n` for a login that is
 * not root, which keeps a node body's PBX_BODY_ROOT (sudo resets the
 * environment); caller frees. */
static char *cluster_exec_line(const struct pbx_cluster *c, size_t node, const char *cmdline)
{
	struct pbx_buf b = PBX_BUF_INIT;
	if (pbx_cluster_is_users(c)) /* the user's own cluster: as the user */
		return xstrdup(cmdline);
	if (!c->user || !strcmp(c->user, "root") || !c->nodes[node].root || !*c->nodes[node].root)
		return pbx_cluster_as_root(c, cmdline);
	pbx_buf_adds(&b, "sudo -n env PBX_BODY_ROOT=\"${PBX_BODY_ROOT:-}\" sh -c ");
	pbx_shell_quote(&b, cmdline);
	return pbx_buf_detach(&b, NULL);
}

int pbx_cluster_node_exec(struct pbx_cluster *c, size_t i, const char *cmdline, const void *in,
			  size_t inlen, pbx_ssh_output_fn out, void *ctx, int *status,
			  struct pbx_err *err)
{
	struct pbx_ssh *s;
	if (i < c->nnodes && c->here == (int)i) {
		if (pbx_run_sh(cmdline, in, inlen, out, ctx, status, err) == 0)
			return 0;
		return pbx_err_prefix(err, "node %s (this machine)", c->nodes[i].name);
	}
	if (pbx_cluster_connect(c, i, &s, err) < 0)
		return -1;
	return pbx_ssh_exec(s, cmdline, in, inlen, out, ctx, status, err);
}

/* Node i runs cmdline with stdin from in_fd (>= 0) until its end, as it
 * arrives: over SSH, or on this machine (the head's pbx) straight from
 * in_fd (a staging's stream is never held whole in memory). */
static int cluster_node_exec_fd(struct pbx_cluster *c, size_t i, const char *cmdline, int in_fd,
				pbx_ssh_output_fn out, void *ctx, int *status, struct pbx_err *err)
{
	struct pbx_ssh *s;
	if (!(i < c->nnodes && c->here == (int)i)) {
		if (pbx_cluster_connect(c, i, &s, err) < 0)
			return -1;
		return pbx_ssh_exec_fd(s, cmdline, in_fd, out, ctx, status, err);
	}
	if (pbx_run_sh_fd(cmdline, in_fd, out, ctx, status, err) == 0)
		return 0;
	return pbx_err_prefix(err, "node %s (this machine)", c->nodes[i].name);
}

/* The one path of every remote command: env.sh, the shared directory,
 * then `cmdline` with `in` (may be NULL) on stdin, or, in_fd >= 0, what
 * that fd gives. */
static int cluster_exec_in(struct pbx_cluster *c, size_t node, const char *cmdline,
			   const struct pbx_buf *in, int in_fd, pbx_ssh_output_fn out, void *ctx,
			   int *status, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char *line;
	int rc;
	if (node >= c->nnodes)
		return pbx_err_set(err, "cluster %s has no node %zu", c->row.name, node);
	cluster_env_prefix(c, node, &b);
	pbx_buf_adds(&b, cmdline);
	line = cluster_exec_line(c, node, b.buf);
	if (in_fd >= 0)
		rc = cluster_node_exec_fd(c, node, line, in_fd, out, ctx, status, err);
	else
		rc = pbx_cluster_node_exec(c, node, line, in ? in->buf : NULL, in ? in->len : 0,
					   out, ctx, status, err);
	free(line);
	pbx_buf_release(&b);
	return rc;
}

int pbx_cluster_exec_sh(struct pbx_cluster *c, size_t node, const char *cmdline,
			pbx_ssh_output_fn out, void *ctx, int *status, struct pbx_err *err)
{
	return cluster_exec_in(c, node, cmdline, NULL, -1, out, ctx, status, err);
}

static void cluster_run_collect(void *ctx, int stream, const char *data, size_t len)
{
	struct pbx_cluster_output *o = ctx;
	pbx_buf_add(stream == 2 ? &o->err : &o->out, data, len);
}

/* pbx_cluster_run's body: stdin from in (in_fd < 0) or from in_fd. */
static int cluster_run_in(struct pbx_cluster *c, size_t node, const char *script,
			  const struct pbx_buf *in, int in_fd, struct pbx_cluster_output *o,
			  struct pbx_err *err)
{
	struct pbx_buf cmd = PBX_BUF_INIT;
	int status = 0, rc;
	pbx_buf_init(&o->out, 0);
	pbx_buf_init(&o->err, 0);
	/* The script travels as an argument of sh -c; stdin stays free for data. */
	pbx_buf_adds(&cmd, "exec /bin/sh -c ");
	pbx_shell_quote(&cmd, script);
	rc = cluster_exec_in(c, node, cmd.buf, in, in_fd, cluster_run_collect, o, &status, err);
	pbx_buf_release(&cmd);
	o->status = status;
	if (rc == 0 && status != 0) {
		pbx_buf_rtrim(&o->err);
		rc = pbx_err_set(err, "remote command on %s failed (status %d): %s", c->row.name,
				 status, o->err.buf ? o->err.buf : "");
	}
	if (rc < 0)
		pbx_cluster_output_release(o);
	return rc;
}

int pbx_cluster_run(struct pbx_cluster *c, size_t node, const char *script,
		    const struct pbx_buf *in, struct pbx_cluster_output *o, struct pbx_err *err)
{
	return cluster_run_in(c, node, script, in, -1, o, err);
}

int pbx_cluster_run_fd(struct pbx_cluster *c, size_t node, const char *script, int in_fd,
		       struct pbx_cluster_output *o, struct pbx_err *err)
{
	return cluster_run_in(c, node, script, NULL, in_fd, o, err);
}

void pbx_cluster_output_release(struct pbx_cluster_output *o)
{
	pbx_buf_release(&o->out);
	pbx_buf_release(&o->err);
}

int pbx_cluster_exec(struct pbx_cluster *c, size_t node, const char *const *argv,
		     pbx_ssh_output_fn out, void *ctx, int *status, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	int rc;
	pbx_buf_adds(&b, "exec ");
	pbx_shell_join(&b, argv);
	rc = pbx_cluster_exec_sh(c, node, b.buf, out, ctx, status, err);
	pbx_buf_release(&b);
	return rc;
}

static void cluster_collect(void *ctx, int stream, const char *data, size_t len)
{
	struct pbx_buf *bufs = ctx;
	pbx_buf_add(&bufs[stream == 2], data, len);
}

int pbx_cluster_sinfo(struct pbx_cluster *c, struct pbx_sinfo_node **nodes, size_t *n,
		      struct pbx_err *err)
{
	struct pbx_buf bufs[2] = { PBX_BUF_INIT, PBX_BUF_INIT };
	int status = 0, rc;
	*nodes = NULL;
	*n = 0;
	rc = pbx_cluster_exec_sh(c, 0, PBX_SINFO_CMD, cluster_collect, bufs, &status, err);
	if (rc == 0 && status != 0) {
		pbx_buf_rtrim(&bufs[1]);
		rc = pbx_err_set(err, "sinfo on %s failed (status %d): %s", c->row.name, status,
				 bufs[1].buf);
	}
	if (rc == 0)
		rc = pbx_sinfo_parse(bufs[0].buf, bufs[0].len, nodes, n, err);
	pbx_buf_release(&bufs[0]);
	pbx_buf_release(&bufs[1]);
	return rc;
}
