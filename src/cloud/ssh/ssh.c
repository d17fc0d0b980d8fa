/*
 * ssh.c - the "ssh" provider: an existing SLURM cluster that pbx uses as
 * it is, through its login node, as an ordinary user (docs/ssh-clusters.md).
 * pbx creates, stops and resizes nothing there: its one node is the login
 * node (role head), and the remote commands run in the user's own login
 * session (src/cluster/cluster.c: no env.sh, no sudo).
 */
#include "cloud/provider.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

struct ssh_ctx {
	const struct pbx_cluster_spec *s;
};

static int ssh_open(const struct pbx_cluster_spec *s, void **ctx, struct pbx_err *err)
{
	struct ssh_ctx *x;
	(void)err;
	x = xcalloc(1, sizeof(*x));
	x->s = s;
	*ctx = x;
	return 0;
}

static void ssh_close(void *ctx)
{
	free(ctx);
}

static int ssh_not_managed(void *ctx, struct pbx_err *err)
{
	struct ssh_ctx *x = ctx;
	return pbx_err_setc(err, PBX_EXIT_USAGE,
			    "cluster %s is not pbx's to start, stop or resize (cloud ssh: pbx "
			    "uses it as it is, through its login node)",
			    x->s->name);
}

/* The one node: the login node, as the template names it. */
static int ssh_plan(void *ctx, struct pbx_node_row **nodes, size_t *n, struct pbx_err *err)
{
	struct ssh_ctx *x = ctx;
	struct pbx_node_row *r;
	if (!x->s->t)
		return ssh_not_managed(ctx, err);
	r = xcalloc(1, sizeof(*r));
	r->cluster_id = x->s->id;
	r->name = xstrdup("login");
	r->role = xstrdup("head");
	r->address = xstrdup(x->s->t->host);
	r->ssh_port = x->s->t->port;
	r->state = xstrdup("up");
	*nodes = r;
	*n = 1;
	return 0;
}

static int ssh_create(void *ctx, struct pbx_node_row *nodes, size_t n,
		      const struct pbx_create_hooks *h, struct pbx_err *err)
{
	(void)nodes, (void)n, (void)h;
	return ssh_not_managed(ctx, err);
}

/* Nothing of pbx's lives there as a cloud resource. */
static int ssh_list(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	(void)ctx, (void)err;
	*v = NULL;
	*n = 0;
	return 0;
}

static int ssh_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	(void)v, (void)n;
	return ssh_not_managed(ctx, err);
}

static int ssh_remove_nodes(void *ctx, const struct pbx_node_row *nodes, size_t n,
			    struct pbx_err *err)
{
	(void)nodes, (void)n;
	return ssh_not_managed(ctx, err);
}

/* The user's own login there: login_user, ssh_key (NULL: the agent). */
static int ssh_login(void *ctx, char **user, char **key_path, struct pbx_err *err)
{
	struct ssh_ctx *x = ctx;
	if (!x->s->t)
		return ssh_not_managed(ctx, err);
	*user = x->s->t->login_user ? xstrdup(x->s->t->login_user) : NULL; /* NULL: ssh_config's */
	*key_path = x->s->t->ssh_key ? xstrdup(x->s->t->ssh_key) : NULL;
	return 0;
}

static int ssh_layout(void *ctx, struct pbx_slurm_layout *l, struct pbx_err *err)
{
	(void)l;
	return ssh_not_managed(ctx, err);
}

const struct pbx_provider pbx_provider_ssh = {
	.name = "ssh",
	.open = ssh_open,
	.close = ssh_close,
	.plan = ssh_plan,
	.create_begin = ssh_create,
	.create_poll = ssh_create,
	.list = ssh_list,
	.destroy = ssh_destroy,
	.remove_nodes = ssh_remove_nodes,
	.login = ssh_login,
	.layout = ssh_layout,
};
