/*
 * local.c - the `local` provider: node bodies on this machine.
 *
 * A node body is an sshd listening on its own loopback address with its own
 * root prefix ($PBX_HOME/clusters/NAME/nodes/NODE).  The same bootstrap
 * script then runs on it over SSH as on a cloud VM, in "direct" mode
 * (daemons started directly, paths under the prefix).  So the local
 * cluster is a real multi-node SLURM cluster on one machine.
 *
 * Addresses and ports come from the cluster's slot (allocated in the
 * store): node i of slot s is address_base + 32*s + 1 + i (the head is
 * i = 0), and SLURM uses ports slurm_port_base + 64*s + [0, 64).
 *
 * Nothing of a local cluster can be taken for another pbx home's: its
 * directory is under this $PBX_HOME, or (root's, in a home the task user
 * cannot pass through: place.h) named by a link there and by its cluster
 * id (and it holds its cluster id, in
 * DIR/cluster-id, which `stop --id` matches), its processes are found by
 * that directory (procs.c matches it as a whole path), and its nodes admit
 * only this cluster's own login key.  Two homes with the same addresses
 * and ports configured take different slots: a start claims its slot in
 * the machine's registry (slots.c), skipping those another home's live
 * cluster holds, and a stop gives it back.
 */
#include "cloud/local/body.h"
#include "cloud/local/place.h"
#include "cloud/local/procs.h"
#include "cloud/local/slots.h"
#include "cloud/provider.h"
#include "util/fanout.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCAL_NODES_PER_SLOT 32
#define LOCAL_PORTS_PER_SLOT 64
#define LOCAL_MAX_SLOTS      7
#define LOCAL_ID_FILE        "cluster-id" /* in the cluster's directory: its id */

/* The provider's context: the cluster, its slot (the spec's), its handle
 * $PBX_HOME/clusters/NAME (the local provider's "label") and its directory,
 * the handle or where the handle links to (place.h). */
struct local_ctx {
	const struct pbx_cluster_spec *s;
	int slot;
	char *home;
	char *dir;
};

static int local_open(const struct pbx_cluster_spec *s, void **out, struct pbx_err *err)
{
	struct local_ctx *x = xcalloc(1, sizeof(*x));
	(void)err;
	x->s = s;
	x->slot = s->slot;
	x->home = xasprintf("%s/clusters/%s", pbx_home(), s->name);
	x->dir = pbx_local_place_real(x->home, s->uid);
	*out = x;
	return 0;
}

static void local_close(void *ctx)
{
	struct local_ctx *x = ctx;
	if (!x)
		return;
	free(x->home);
	free(x->dir);
	free(x);
}

/* ------------------------------------------------------------------ plan */

static int local_address(const struct local_ctx *x, int index, char out[INET_ADDRSTRLEN],
			 struct pbx_err *err)
{
	const struct pbx_cluster_spec *s = x->s;
	struct in_addr base;
	const char *b = s->cfg->local.address_base ? s->cfg->local.address_base : "127.0.1.0";
	uint32_t host;
	if (inet_pton(AF_INET, b, &base) != 1 || (ntohl(base.s_addr) >> 24) != 127)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "clouds.local.address_base '%s' is not a loopback address", b);
	host = ntohl(base.s_addr) + (uint32_t)(x->slot * LOCAL_NODES_PER_SLOT + 1 + index);
	base.s_addr = htonl(host);
	inet_ntop(AF_INET, &base, out, INET_ADDRSTRLEN);
	return 0;
}

static void local_node_fill(const struct local_ctx *x, struct pbx_node_row *r, const char *name,
			    const char *role, int gpus, const char *addr)
{
	const struct pbx_cluster_spec *s = x->s;
	memset(r, 0, sizeof(*r));
	r->cluster_id = s->id;
	r->name = xstrdup(name);
	r->role = xstrdup(role);
	r->address = xstrdup(addr);
	r->ssh_port = s->cfg->local.ssh_port ? s->cfg->local.ssh_port : 22022;
	r->gpus = gpus;
	r->root = xasprintf("%s/nodes/%s", x->dir, name);
	r->state = xstrdup("creating");
}

/* slurmd's step sockets are ROOT/var/spool/slurmd/NODE/NODE_JOB.STEP
 * (templates/slurm.conf.in's SlurmdSpoolDir): with SLURM's largest job id
 * (8 digits) and the batch step's id (10), the longest a node's may be.
 * A Unix socket's path has at most 107 bytes (108 with its NUL): past it
 * slurmd cannot start the job, which SLURM holds as "launch failed
 * requeued held", so a plan that would pass it is refused up front. */
#define LOCAL_SOCKET_MAX 107
static size_t local_socket_len(const char *root, const char *node)
{
	return strlen(root) + strlen("/var/spool/slurmd/") + strlen(node) + 1 + strlen(node) +
	       strlen("_12345678.4294967291");
}

static int local_socket_check(const struct local_ctx *x, const struct pbx_node_row *r,
			      struct pbx_err *err)
{
	size_t len = local_socket_len(r->root, r->name);
	if (len <= LOCAL_SOCKET_MAX)
		return 0;
	return pbx_err_setc(err, PBX_EXIT_USAGE,
			    "cluster %s: node %s's SLURM sockets would be %zu bytes long under %s, "
			    "more than a Unix socket's %d: use a shorter node group name, cluster "
			    "name or PBX_HOME (as root, clusters go under PBX_LOCAL_BODIES_DIR, "
			    "/var/lib/pbx/nodes)",
			    x->s->name, r->name, len, r->root, LOCAL_SOCKET_MAX);
}

static int local_plan(void *ctx, struct pbx_node_row **nodes, size_t *n, struct pbx_err *err)
{
	const struct local_ctx *x = ctx;
	const struct pbx_cluster_spec *s = x->s;
	int total = 1 + pbx_template_node_count(s->t), idx = 0;
	char addr[INET_ADDRSTRLEN];
	size_t g;
	if (x->slot >= LOCAL_MAX_SLOTS)
		return pbx_err_set(err, "too many local clusters (at most %d at once)",
				   LOCAL_MAX_SLOTS);
	if (total > LOCAL_NODES_PER_SLOT || total > LOCAL_PORTS_PER_SLOT / 2)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "a local cluster has at most %d compute nodes",
				    LOCAL_NODES_PER_SLOT - 1);
	*nodes = xcalloc((size_t)total, sizeof(**nodes));
	*n = (size_t)total;
	if (local_address(x, idx, addr, err) < 0)
		goto fail;
	local_node_fill(x, &(*nodes)[idx++], "head", "head", 0, addr);
	for (g = 0; g < s->t->ngroups; g++) {
		const struct pbx_node_group *grp = &s->t->groups[g];
		int k;
		for (k = 1; k <= grp->count; k++) {
			char name[128];
			snprintf(name, sizeof(name), "%s%d", grp->name, k);
			if (local_address(x, idx, addr, err) < 0)
				goto fail;
			local_node_fill(x, &(*nodes)[idx], name, "compute", grp->gpus, addr);
			if (local_socket_check(x, &(*nodes)[idx++], err) < 0)
				goto fail;
		}
	}
	return 0;
fail:
	pbx_node_rows_free(*nodes, (size_t)idx);
	*nodes = NULL;
	*n = 0;
	return -1;
}

/* ---------------------------------------------------------------- create */

static char *local_key_path(const struct local_ctx *x)
{
	return xasprintf("%s/id_ed25519", x->dir);
}

/* The cluster's login key pair (PATH, PATH.pub), made once per cluster. */
static int local_keygen(const char *path, const char *comment, struct pbx_err *err)
{
	const char *argv[] = { "ssh-keygen", "-q",    "-t", "ed25519", "-N", "",
			       "-C",         comment, "-f", path,      NULL };
	if (access(path, F_OK) == 0)
		return 0;
	return pbx_run_ok(argv, err);
}

/* A node body (body.c) at the node's address, HOME its ROOT/root. */
static int local_prepare_node(const struct pbx_node_row *node, const char *authorized,
			      struct pbx_err *err)
{
	const char *addresses[] = { node->address, NULL };
	char *home = xasprintf("%s/root", node->root);
	struct pbx_body body = { node->root, addresses, node->ssh_port, authorized, home };
	int rc = pbx_body_start(&body, err);
	free(home);
	return rc;
}

struct local_create_run {
	struct pbx_node_row *nodes;
	const char *authorized;
	const struct pbx_cluster_events *ev;
};

/* One node body: its directories, host key and sshd, listening. */
static int local_create_one(void *ctx, size_t i, struct pbx_err *err)
{
	struct local_create_run *r = ctx;
	struct pbx_node_row *node = &r->nodes[i];
	pbx_events_stage(r->ev, i, "starting sshd");
	if (local_prepare_node(node, r->authorized, err) < 0)
		return pbx_err_prefix(err, "node %s", node->name);
	return 0;
}

/* Node bodies start at once: creation is over when this returns. */
/* The cluster's directory (place.h: in PBX_HOME, or behind a link there),
 * its nodes/ and the clusters/ above the handle: made passable
 * (PBX_CLUSTER_DIR_MODE) whatever the umask, so the task user reaches the
 * node bodies' files (docs/SECURITY.md). */
static int local_dirs(const struct local_ctx *x, struct pbx_err *err)
{
	char *nodes = xasprintf("%s/nodes", x->dir), *parent = xstrdup(x->home);
	char *slash = strrchr(parent, '/');
	const char *dirs[3] = { parent, x->dir, nodes };
	size_t i;
	int rc;
	if (slash && slash != parent)
		*slash = '\0';
	rc = pbx_mkdir_p(parent, PBX_CLUSTER_DIR_MODE, err);
	if (rc == 0)
		rc = pbx_local_place_make(x->home, x->dir, err);
	if (rc == 0)
		rc = pbx_mkdir_p(nodes, PBX_CLUSTER_DIR_MODE, err);
	for (i = 0; rc == 0 && i < 3; i++)
		if (chmod(dirs[i], PBX_CLUSTER_DIR_MODE) < 0)
			rc = pbx_err_set(err, "cannot chmod %s: %s", dirs[i], strerror(errno));
	free(nodes);
	free(parent);
	return rc;
}

/* The cluster's slot is its own in the machine's registry (slots.h): the
 * start that made the cluster claimed it, but a start killed before the
 * cluster's id was written here left a claim another home could take
 * over, so each create claims it again, and refuses a slot held now by
 * another home's live cluster. */
static int local_slot_held(const struct local_ctx *x, struct pbx_err *err)
{
	char *space = pbx_local_slot_space(x->s->cfg);
	int rc = pbx_local_slot_claim(space, x->slot, x->s->uid, x->home, err);
	if (rc == 0)
		pbx_err_set(err,
			    "slot %d of %s (this cluster's addresses and ports) is held by "
			    "another home's cluster on this machine; 'pbx cluster stop %s' and "
			    "start it again for another slot",
			    x->slot, space, x->s->name);
	free(space);
	return rc == 1 ? 0 : -1;
}

static int local_create(void *ctx, struct pbx_node_row *nodes, size_t n,
			const struct pbx_create_hooks *h, struct pbx_err *err)
{
	const struct local_ctx *x = ctx;
	const struct pbx_cluster_spec *s = x->s;
	const struct pbx_cluster_events *ev = h ? h->ev : NULL;
	char *key = local_key_path(x), *pub = xasprintf("%s.pub", key);
	char *authorized = xasprintf("%s/authorized_keys", x->dir);
	struct pbx_buf pubkey = PBX_BUF_INIT;
	struct local_create_run run = { nodes, authorized, ev };
	struct pbx_err *errs = xcalloc(n ? n : 1, sizeof(*errs));
	size_t i;
	char *idfile = xasprintf("%s/" LOCAL_ID_FILE, x->dir);
	int rc = local_dirs(x, err);
	if (rc == 0)
		rc = local_slot_held(x, err);
	if (rc == 0)
		rc = pbx_write_file_atomic(idfile, s->uid, strlen(s->uid), 0600, err);
	if (rc == 0)
		rc = local_keygen(key, s->name, err);
	if (rc == 0)
		rc = pbx_read_file(pub, &pubkey, err);
	if (rc == 0)
		rc = pbx_write_file_atomic(authorized, pubkey.buf, pubkey.len, 0600, err);
	if (rc == 0 && mkdir("/run/sshd", 0755) < 0 && errno != EEXIST)
		rc = pbx_err_set(err, "cannot create /run/sshd: %s", strerror(errno));
	if (rc == 0 && pbx_fanout(n, 16, local_create_one, &run, errs) > 0) {
		for (i = 0; i < n; i++)
			if (errs[i].msg[0]) {
				*err = errs[i];
				break;
			}
		rc = -1;
	}
	free(errs);
	pbx_buf_release(&pubkey);
	free(key);
	free(pub);
	free(authorized);
	free(idfile);
	return rc;
}

static int local_create_poll(void *ctx, struct pbx_node_row *nodes, size_t n,
			     const struct pbx_create_hooks *h, struct pbx_err *err)
{
	(void)ctx;
	(void)nodes;
	(void)n;
	(void)h;
	(void)err;
	return 1;
}

/* --------------------------------------------------------------- destroy */

/* The cluster directory is the one "resource" carrying the label, and
 * its id file the id (none: an older pbx's directory, which matches a
 * legacy id).  With an id, a directory holding another id is not listed. */
static int local_list(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	const struct local_ctx *x = ctx;
	const char *want = x->s->uid;
	char *path = xasprintf("%s/" LOCAL_ID_FILE, x->dir);
	struct pbx_buf id = PBX_BUF_INIT;
	struct stat sb;
	int has_id = pbx_read_file(path, &id, NULL) == 0 && id.len > 0;
	(void)err;
	*v = NULL;
	*n = 0;
	free(path);
	if (has_id)
		pbx_buf_rtrim(&id);
	if (stat(x->dir, &sb) == 0 &&
	    (!want || (has_id ? !strcmp(id.buf, want) : pbx_cluster_uid_legacy(want)))) {
		*v = xcalloc(1, sizeof(**v));
		(*v)[0].id = xstrdup(x->dir);
		(*v)[0].cluster = has_id ? xstrdup(id.buf) : NULL;
		*n = 1;
	}
	pbx_buf_release(&id);
	return 0;
}

static int local_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	const struct local_ctx *x = ctx;
	char *needle = xasprintf("%s/", x->dir);
	(void)v;
	(void)n;
	char *space = pbx_local_slot_space(x->s->cfg);
	int rc;
	pbx_local_procs_kill(needle, 5000);
	free(needle);
	rc = pbx_rm_rf(x->dir, err);
	if (rc == 0)
		pbx_local_place_unlink(x->home);
	if (rc == 0) /* this machine's other homes may have the slot now */
		pbx_local_slot_release(space, x->slot, x->s->uid);
	free(space);
	return rc;
}

/* A resize's removal: every process of each node body (its prefix on the
 * command line or in the environment), then its directory. */
static int local_remove_nodes(void *ctx, const struct pbx_node_row *nodes, size_t n,
			      struct pbx_err *err)
{
	const struct local_ctx *x = ctx;
	size_t i;
	for (i = 0; i < n; i++) {
		char *root = xasprintf("%s/nodes/%s", x->dir, nodes[i].name);
		char *needle = xasprintf("%s/", root);
		int rc;
		pbx_local_procs_kill(needle, 5000);
		rc = pbx_rm_rf(root, err);
		free(needle);
		free(root);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- layout */

static int local_login(void *ctx, char **user, char **key_path, struct pbx_err *err)
{
	(void)err;
	*user = xstrdup("root");
	*key_path = local_key_path(ctx);
	return 0;
}

static int local_layout(void *ctx, struct pbx_slurm_layout *l, struct pbx_err *err)
{
	const struct local_ctx *x = ctx;
	const struct pbx_cluster_spec *s = x->s;
	int base = (s->cfg->local.slurm_port_base ? s->cfg->local.slurm_port_base : 17000) +
		   x->slot * LOCAL_PORTS_PER_SLOT;
	return pbx_body_layout(base, LOCAL_PORTS_PER_SLOT, s->t ? pbx_template_node_count(s->t) : 0,
			       x->dir, l, err);
}

const struct pbx_provider pbx_provider_local = {
	.name = "local",
	.open = local_open,
	.close = local_close,
	.plan = local_plan,
	.create_begin = local_create,
	.create_poll = local_create_poll,
	.list = local_list,
	.destroy = local_destroy,
	.remove_nodes = local_remove_nodes,
	.login = local_login,
	.layout = local_layout,
};
