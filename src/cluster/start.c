/*
 * start.c - `pbx cluster start`: plan, create, bootstrap on every node at
 * once, then wait until SLURM shows every compute node idle.  Running it on
 * an existing cluster repairs whatever is down (every step is idempotent).
 *
 *   store row + nodes  ->  provider create (sshd answers)  ->  stage files
 *   (bootstrap.sh and its parts, slurm.conf, gres.conf, munge.key) pushed
 *   as one tar stream per node
 *   ->  bootstrap.sh up (head first, then all compute nodes in parallel)
 *   ->  poll sinfo until idle
 */
#include "cluster/bootstrap_render.h"
#include "cluster/cluster.h"
#include "cluster/cluster_internal.h"
#include "slurm/conf.h"
#include "cloud/local/slots.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/quote.h"
#include "util/testkill.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define START_CONCURRENCY     32
#define START_IDLE_TIMEOUT_MS 120000

/* Creates the store rows for a new cluster and reads them into tg; an
 * existing cluster's row was read already.  Records the template when it
 * is not the cluster's own name.  A new cluster's id is made and recorded
 * here, before anything is created in a cloud: every resource will carry
 * it. */
/* The lowest slot free in this store; on the local cloud also one no
 * other home's live cluster holds on this machine (slots.h), claimed for
 * `uid`.  0 or -1. */
static int start_slot(struct pbx_store *st, const struct pbx_config *cfg,
		      const struct pbx_cluster_template *t, const char *name, const char *uid,
		      int *slot, struct pbx_err *err)
{
	char *space, *dir;
	int from = 0, rc = 0;
	if (pbx_store_free_slot(st, t->cloud, 0, slot, err) < 0)
		return -1;
	if (strcmp(t->cloud, "local") != 0)
		return 0;
	space = pbx_local_slot_space(cfg);
	dir = xasprintf("%s/clusters/%s", pbx_home(), name);
	while (rc == 0) {
		rc = pbx_store_free_slot(st, t->cloud, from, slot, err);
		if (rc == 0)
			rc = pbx_local_slot_claim(space, *slot, uid, dir, err);
		if (rc == 0)
			from = *slot + 1; /* another home's: the next */
	}
	free(space);
	free(dir);
	return rc < 0 ? -1 : 0;
}

static int start_record(struct pbx_store *st, const struct pbx_config *cfg,
			struct pbx_cluster_target *tg, struct pbx_err *err)
{
	const struct pbx_cluster_template *t = tg->t;
	char *json, uid[PBX_CLUSTER_UID_LEN + 1];
	int64_t id;
	int slot, rc;
	if (tg->known)
		return 0;
	if (pbx_cluster_uid_new(uid, err) < 0)
		return -1;
	json = pbx_template_json(t);
	if (pbx_store_begin(st, err) < 0) {
		free(json);
		return -1;
	}
	rc = start_slot(st, cfg, t, tg->name, uid, &slot, err);
	if (rc == 0)
		rc = pbx_store_cluster_create(st, tg->name, uid, t->cloud, json, slot, &id, err);
	if (rc == 0 && strcmp(t->name, tg->name) != 0)
		rc = pbx_store_cluster_set_template(st, id, t->name, err);
	free(json);
	if (rc < 0) {
		pbx_store_rollback(st);
		return -1;
	}
	if (pbx_store_commit(st, err) < 0 || pbx_store_cluster_get(st, tg->name, &tg->row, err) < 0)
		return -1;
	tg->known = 1;
	return 0;
}

/* What the store knows of a node that a new plan does not (a cloud
 * instance made by an earlier, interrupted start) is kept. */
static void start_merge_known(struct pbx_node_row *planned, size_t n,
			      const struct pbx_node_row *known, size_t nknown)
{
	size_t i, k;
	for (i = 0; i < n; i++) {
		struct pbx_node_row *p = &planned[i];
		for (k = 0; k < nknown && strcmp(known[k].name, p->name) != 0; k++)
			;
		if (k == nknown)
			continue;
		if (!p->instance_id && known[k].instance_id) {
			p->instance_id = xstrdup(known[k].instance_id);
			/* the same instance's: awake.c keeps pins by it */
			if (!p->instance_uid && known[k].instance_uid)
				p->instance_uid = xstrdup(known[k].instance_uid);
		}
		if (!p->zone && known[k].zone)
			p->zone = xstrdup(known[k].zone);
		if (!p->operation && known[k].operation)
			p->operation = xstrdup(known[k].operation);
		if (!p->public_address && known[k].public_address)
			p->public_address = xstrdup(known[k].public_address);
		if ((!p->address || !*p->address) && known[k].address && *known[k].address) {
			free(p->address);
			p->address = xstrdup(known[k].address);
		}
		/* where discovery found the node's root, and how it was: a start
		 * that fails before it gets that far must not lose either */
		if ((!p->root || !*p->root) && known[k].root && *known[k].root) {
			free(p->root);
			p->root = xstrdup(known[k].root);
		}
		if (known[k].state && strcmp(known[k].state, PBX_NODE_NOT_CREATED) != 0) {
			free(p->state);
			p->state = xstrdup(known[k].state);
		}
	}
}

/* A node whose instance the cloud has just accepted (state "creating"
 * with an instance id: made anew, e.g. after a preemption deleted its Spot
 * instance) has a new host key, maybe on the old address: every pin of the
 * node is forgotten, so its key is pinned again on first contact, as for
 * any node pbx makes. */
static void start_forget_pins(struct pbx_cluster *c, const struct pbx_node_row *node)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *prefix;
	int removed = 0;
	if (!node->state || strcmp(node->state, "creating") != 0 || !node->instance_id ||
	    !*node->instance_id)
		return;
	prefix = xasprintf("%s/%s@", c->row.name, node->name);
	if (pbx_store_hostkey_forget_prefix(c->store, prefix, &removed, &err) < 0)
		pbx_store_event(c->store, c->row.id, "error",
				"cannot forget the host key of %s: %s", node->name, err.msg);
	else if (removed)
		pbx_store_event(c->store, c->row.id, "node.new-instance",
				"%s: a new instance; its host key is pinned again on first contact",
				node->name);
	free(prefix);
}

/* The record hook: a node row saved the moment something about it is
 * known (one autocommitted statement; the store is thread-safe). */
static void start_record_node(void *ctx, const struct pbx_node_row *node)
{
	struct pbx_cluster *c = ctx;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_store_node_put(c->store, node, &err) < 0)
		pbx_store_event(c->store, c->row.id, "error", "cannot record node %s: %s",
				node->name, err.msg);
	start_forget_pins(c, node);
}

/* Sets every node's state in memory and in the store. */
static void start_nodes_state(struct pbx_cluster *c, const char *state)
{
	size_t i;
	for (i = 0; i < c->nnodes; i++) {
		free(c->nodes[i].state);
		c->nodes[i].state = xstrdup(state);
		start_record_node(c, &c->nodes[i]);
	}
}

/* Puts the planned nodes into the store, in one transaction. */
static int start_save_nodes(struct pbx_store *st, struct pbx_node_row *nodes, size_t n,
			    struct pbx_err *err)
{
	size_t i;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (pbx_store_node_put(st, &nodes[i], err) < 0) {
			pbx_store_rollback(st);
			return -1;
		}
	}
	return pbx_store_commit(st, err);
}

/* The cluster's munge key: 1024 random bytes, made once per cluster and
 * kept in DIR/munge.key.  *key is the caller's (cleanse, then release). */
static int start_munge_key(const char *dir, struct pbx_buf *key, struct pbx_err *err)
{
	char *kept = xasprintf("%s/munge.key", dir);
	int rc = 0;
	if (pbx_read_file(kept, key, NULL) < 0 || key->len != 1024) {
		unsigned char bytes[1024];
		pbx_buf_reset(key);
		if (RAND_bytes(bytes, sizeof(bytes)) != 1)
			rc = pbx_err_set(err, "cannot generate a munge key: no randomness");
		else
			pbx_buf_add(key, bytes, sizeof(bytes));
		OPENSSL_cleanse(bytes, sizeof(bytes));
		if (rc == 0)
			rc = pbx_write_file_atomic(kept, key->buf, key->len, 0400, err);
	}
	free(kept);
	return rc;
}

/* Node `name`'s place among the template's compute nodes (0-based), so
 * that its slurmd port does not depend on which nodes are awake; `k` when
 * the template does not name it. */
static int start_node_ordinal(const struct pbx_cluster_template *t, const char *name, size_t k)
{
	const struct pbx_node_group *g = t ? pbx_cloud_group_of(t, name) : NULL;
	int base = 0;
	size_t i;
	for (i = 0; g && i < t->ngroups && &t->groups[i] != g; i++)
		base += t->groups[i].count;
	return g ? base + atoi(name + strlen(g->name)) - 1 : (int)k;
}

struct start_ordered {
	int ord;
	struct pbx_slurm_node node;
};

static int start_ordered_cmp(const void *a, const void *b)
{
	const struct start_ordered *x = a, *y = b;
	if (x->ord != y->ord)
		return (x->ord > y->ord) - (x->ord < y->ord);
	return strcmp(x->node.name, y->node.name);
}

/* Puts sn[0..n) in the template's order (ords[i] is sn[i]'s place): the
 * order of slurm.conf's node lines must not depend on which nodes are
 * awake, or each wake and sleep changes slurm.conf, and the head's
 * bootstrap restarts slurmctld (seen in t0464: spot2 woken while spot1
 * slept came before it). */
static void start_order_nodes(struct pbx_slurm_node *sn, const int *ords, size_t n)
{
	struct start_ordered *v = xcalloc(n ? n : 1, sizeof(*v));
	size_t i;
	for (i = 0; i < n; i++) {
		v[i].ord = ords[i];
		v[i].node = sn[i];
	}
	qsort(v, n, sizeof(*v), start_ordered_cmp);
	for (i = 0; i < n; i++)
		sn[i] = v[i].node;
	free(v);
}

/* The head's NFS export line (pbx_bootstrap_exports) into `exports`: to
 * every compute node's NodeAddr in slurm.conf. */
static void start_render_exports(const struct pbx_slurm_conf *sc, const char *shared,
				 struct pbx_buf *exports)
{
	const char **clients = xcalloc(sc->nnodes ? sc->nnodes : 1, sizeof(*clients));
	size_t i;
	for (i = 0; i < sc->nnodes; i++)
		clients[i] = sc->nodes[i].addr && *sc->nodes[i].addr ? sc->nodes[i].addr
								     : sc->nodes[i].name;
	pbx_bootstrap_exports(exports, shared, clients, sc->nnodes);
	free(clients);
}

/* slurm.conf (*conf, the caller frees it) and the head's export line
 * (appended to `exports`), from the same compute nodes. */
static int start_render_conf(struct pbx_cluster *c, const struct pbx_slurm_layout *l, char **conf,
			     struct pbx_buf *exports, struct pbx_err *err)
{
	size_t total = c->nnodes + c->nasleep;
	struct pbx_slurm_node *sn = xcalloc(total ? total : 1, sizeof(*sn));
	char(*types)[32] = xcalloc(total ? total : 1, sizeof(*types));
	char **dns = xcalloc(total ? total : 1, sizeof(*dns));
	int *ords = xcalloc(total ? total : 1, sizeof(*ords));
	struct pbx_slurm_conf sc = { 0 };
	char *power = NULL, *extra = NULL;
	size_t i, k = 0;
	int rc;
	for (i = 0; i < total; i++) {
		const struct pbx_node_row *n =
			i < c->nnodes ? &c->nodes[i] : &c->asleep[i - c->nnodes];
		const struct pbx_node_group *grp;
		int ord;
		if (strcmp(n->role, "compute") != 0)
			continue;
		ord = start_node_ordinal(c->spec.t, n->name, k);
		ords[k] = ord;
		sn[k].name = n->name;
		sn[k].hostname = l->same_host ? "localhost" : n->name;
		sn[k].addr = n->address;
		sn[k].port = l->node_port_base ? l->node_port_base + 1 + ord : 0;
		sn[k].cloud = pbx_power_may_sleep(c->spec.t, n->name);
		/* a node that sleeps on a cloud has an address only while it
		 * is awake, a new one each time (a Spot node made again after
		 * a preemption too): SLURM finds it by the name the cloud's DNS
		 * gives it, so slurm.conf never changes */
		if (pbx_power_remade(c->spec.t, n->name) && c->provider->dns_name)
			dns[k] = c->provider->dns_name(c->pctx, n->name);
		if (dns[k]) {
			sn[k].addr = dns[k];
			if (!l->same_host)
				sn[k].hostname = dns[k];
		}
		grp = c->spec.t ? pbx_cloud_group_of(c->spec.t, n->name) : NULL;
		/* a group's cpus, else the layout's; its GPU type, typed GRES */
		sn[k].cpus = grp && grp->cpus ? grp->cpus : l->node_cpus;
		sn[k].mem_mb = l->node_mem_mb;
		sn[k].gpus = n->gpus;
		pbx_slurm_gpu_type(grp ? grp->gpu_type : NULL, types[k], sizeof(types[k]));
		sn[k].gpu_type = types[k];
		k++;
	}
	start_order_nodes(sn, ords, k);
	sc.cluster = c->row.name;
	sc.ctld_host = l->ctld_host;
	sc.ctld_addr = c->nodes[0].address;
	sc.ctld_port = l->ctld_port;
	sc.srun_port_lo = l->srun_port_lo;
	sc.srun_port_hi = l->srun_port_hi;
	sc.slurm_user = l->slurm_user;
	sc.extra = l->extra;
	if (pbx_power_saving(c->spec.t)) {
		power = pbx_power_conf_lines(c);
		extra = xasprintf("%s%s", l->extra ? l->extra : "", power);
		sc.extra = extra;
	}
	sc.cred_expire = l->cred_expire;
	sc.max_array_size = c->spec.t ? c->spec.t->max_array_size : 0;
	sc.max_job_count = c->spec.t ? c->spec.t->max_job_count : 0;
	sc.nodes = sn;
	sc.nnodes = k;
	rc = pbx_slurm_render_conf(&sc, conf, err);
	if (rc == 0)
		start_render_exports(&sc, l->shared_dir, exports);
	for (i = 0; i < k; i++)
		free(dns[i]);
	free(dns);
	free(ords);
	free(sn);
	free(types);
	free(power);
	free(extra);
	return rc;
}

/* The CUDA backend module of the local pbx-train (src/train/cuda), as
 * PBX_STAGE_DIR/pbx-train-cuda.so, found where pbx-train finds it
 * (src/train/device.c): beside it (a build tree), else at ../lib/pbx (as
 * the bootstrap installs them: a head's pbx stages its own); nothing when
 * there is none. */
static int start_stage_train_cuda(struct pbx_buf *tar, const char *bin_path, time_t now,
				  struct pbx_err *err)
{
	struct pbx_buf mod = PBX_BUF_INIT;
	const char *slash = strrchr(bin_path, '/');
	int dir = (int)(slash ? slash - bin_path : 1);
	const char *base = slash ? bin_path : ".";
	char *path = xasprintf("%.*s/pbx-train-cuda.so", dir, base);
	int rc = 0;
	if (access(path, R_OK) != 0) {
		free(path);
		path = xasprintf("%.*s/../lib/pbx/pbx-train-cuda.so", dir, base);
	}
	if (access(path, R_OK) == 0) {
		rc = pbx_read_file(path, &mod, err);
		if (rc == 0)
			rc = pbx_ustar_file(tar, PBX_STAGE_DIR "/pbx-train-cuda.so", 0644, now,
					    mod.buf, mod.len, err);
	}
	pbx_buf_release(&mod);
	free(path);
	return rc;
}

/* VMs: the local build of pbx-train (and its CUDA module, if built) and
 * what it was built for ("ID VERSION_ID MACHINE"); the bootstrap installs
 * them where the node matches.  Nothing when there is no local build. */
static int start_stage_train(struct pbx_buf *tar, time_t now, struct pbx_err *err)
{
	char *path = pbx_find_pbx_train();
	int rc;
	if (!path)
		return 0;
	rc = pbx_stage_binary(tar, path, "pbx-train", now, err);
	if (rc == 0)
		rc = start_stage_train_cuda(tar, path, now, err);
	free(path);
	return rc;
}

/* The stage every node gets, as one tar made in memory: PBX_STAGE_DIR/
 * {bootstrap.sh, bootstrap/, slurm.conf, exports, task-user.env.sh, each
 * node's gres-NODE.conf and env-NODE.sh (and units), munge.key}, its
 * directories 0700 (templates/README.md, "The stage"). */
static int start_stage(struct pbx_cluster *c, const struct pbx_slurm_layout *l, struct pbx_buf *tar,
		       struct pbx_err *err)
{
	struct pbx_buf key = PBX_BUF_INIT, exports = PBX_BUF_INIT;
	char *conf = NULL;
	time_t now = time(NULL);
	int rc = start_render_conf(c, l, &conf, &exports, err);
	if (rc == 0)
		rc = start_munge_key(c->dir, &key, err);
	if (rc == 0)
		rc = pbx_bootstrap_stage_begin(tar, now, err);
	if (rc == 0)
		rc = pbx_ustar_file(tar, PBX_STAGE_DIR "/slurm.conf", 0644, now, conf, strlen(conf),
				    err);
	if (rc == 0)
		rc = pbx_ustar_file(tar, PBX_STAGE_DIR "/exports", 0644, now,
				    exports.len ? exports.buf : "", exports.len, err);
	if (rc == 0)
		rc = pbx_bootstrap_stage_nodes(c, l, tar, now, err);
	if (rc == 0)
		rc = pbx_ustar_file(tar, PBX_STAGE_DIR "/munge.key", 0400, now, key.buf, key.len,
				    err);
	if (rc == 0 && !strcmp(l->bootstrap_mode, "systemd"))
		rc = start_stage_train(tar, now, err);
	if (rc == 0 && pbx_power_saving(c->spec.t))
		rc = pbx_power_stage(c, tar, now, err);
	if (rc == 0 && pbx_head_runs_pbx(c))
		rc = pbx_head_stage(c, tar, now, !strcmp(l->bootstrap_mode, "systemd"), err);
	if (rc == 0)
		pbx_ustar_end(tar);
	OPENSSL_cleanse(key.buf, key.len);
	pbx_buf_release(&key);
	pbx_buf_release(&exports);
	free(conf);
	return rc;
}

/* ------------------------------------------------------------ bootstrap */

struct start_run {
	struct pbx_cluster *c;
	const struct pbx_slurm_layout *layout;
	struct pbx_buf stage_tar; /* the stage, see start_stage */
	const struct pbx_cluster_events *ev;
	int ctld_lock_fd; /* layout->ctld_lock, held; -1 = none */
};

/* Nodes on this host (layout->ctld_lock set): pbx holds the lock from
 * before any bootstrap until the head's is over, so compute nodes block on
 * it instead of polling slurmctld.  Before letting go it writes how the
 * head's bootstrap ended ("ok" or "failed"): after a failure compute nodes
 * do not wait for a slurmctld that is not coming.  Best effort: without
 * the lock they poll. */
static void start_ctld_lock(struct start_run *r)
{
	r->ctld_lock_fd = -1;
	if (!r->layout->ctld_lock[0])
		return;
	r->ctld_lock_fd = open(r->layout->ctld_lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (r->ctld_lock_fd >= 0 && flock(r->ctld_lock_fd, LOCK_EX | LOCK_NB) < 0) {
		close(r->ctld_lock_fd); /* another start holds it: leave it to that one */
		r->ctld_lock_fd = -1;
	}
	if (r->ctld_lock_fd >= 0 && ftruncate(r->ctld_lock_fd, 0) < 0) {
		close(r->ctld_lock_fd);
		r->ctld_lock_fd = -1;
	}
}

static void start_ctld_unlock(struct start_run *r, int head_ok)
{
	const char *how = head_ok ? "ok\n" : "failed\n";
	ssize_t n;
	if (r->ctld_lock_fd < 0)
		return;
	n = pwrite(r->ctld_lock_fd, how, strlen(how), 0);
	(void)n;                /* if it fails, compute nodes just wait for slurmctld */
	close(r->ctld_lock_fd); /* closing releases the flock */
	r->ctld_lock_fd = -1;
}

static int start_bootstrap_one(void *ctx, size_t i, struct pbx_err *err)
{
	struct start_run *r = ctx;
	int rc;
	pbx_events_stage(r->ev, i, "connecting");
	rc = pbx_bootstrap_node(r->c, i, r->layout, &r->stage_tar, "up", r->ev, err);
	if (i == 0)
		start_ctld_unlock(r, rc == 0); /* the head is done (node 0, see plan) */
	return rc;
}

/* Runs the bootstrap on every node at once; collects the failures into one
 * message. */
static int start_fanout(struct start_run *r, struct pbx_err *err)
{
	size_t count = r->c->nnodes, k;
	struct pbx_err *errs = xcalloc(count ? count : 1, sizeof(*errs));
	struct pbx_buf msg = PBX_BUF_INIT;
	int failed, refused = 0;
	start_ctld_lock(r);
	failed = pbx_fanout(count, START_CONCURRENCY, start_bootstrap_one, r, errs);
	start_ctld_unlock(r, 0); /* only if the head never ran */
	for (k = 0; k < count; k++) {
		if (!errs[k].msg[0])
			continue;
		pbx_events_stage(r->ev, k,
				 errs[k].code == PBX_EXIT_SECURITY ? "refused" : "failed");
		refused |= errs[k].code == PBX_EXIT_SECURITY;
		pbx_buf_addf(&msg, "%s%s", msg.len ? "\n  " : "", errs[k].msg);
	}
	/* a refusal (a changed host key) is what the exit code says, over a failure */
	if (failed)
		pbx_err_setc(err, refused ? PBX_EXIT_SECURITY : PBX_EXIT_FAIL,
			     "bootstrap failed on %d node%s:\n  %s", failed, failed == 1 ? "" : "s",
			     msg.buf);
	pbx_buf_release(&msg);
	free(errs);
	return failed ? -1 : 0;
}

/* ------------------------------------------------------------- waiting */

/* Resumes the compute nodes that came up down or drained (e.g. after a
 * slurmd restart): at once when slurmctld hears from them, after 3 s also
 * when it does not.  Each node once. */
static void start_resume(struct pbx_cluster *c, const struct pbx_sinfo_node *sn, size_t n,
			 int waited_ms, unsigned char *resumed)
{
	size_t i;
	for (i = 0; i < c->nnodes; i++) {
		const char *state = pbx_sinfo_state_of(sn, n, c->nodes[i].name);
		const char *argv[] = { "scontrol", "update", NULL, "state=resume", NULL };
		struct pbx_err err = PBX_ERR_INIT;
		int status;
		if (resumed[i] || !state || strcmp(c->nodes[i].role, "compute") != 0 ||
		    !pbx_sinfo_state_resumable(state) || (strchr(state, '*') && waited_ms < 3000))
			continue;
		argv[2] = xasprintf("nodename=%s", c->nodes[i].name);
		pbx_cluster_exec(c, 0, argv, NULL, NULL, &status, &err); /* best effort */
		pbx_store_event(c->store, c->row.id, "node.resume", "%s was %s", c->nodes[i].name,
				state);
		free((char *)argv[2]);
		resumed[i] = 1;
	}
}

/* Whether node n, in sinfo state `state`, is settled for the wait below:
 * usable, or, for the head's own pbx (a resume), a node power saving makes
 * that SLURM is putting to sleep beside the nodes this start wakes (idle~,
 * idle%, idle!: its pbx-suspend waits for this start's lock).  t0464 saw a
 * resume fail on a node suspended while it waited. */
static int start_settled(const struct pbx_cluster *c, const struct pbx_node_row *n,
			 const char *state)
{
	if (pbx_sinfo_state_usable(state))
		return 1;
	return c->here >= 0 && pbx_power_remade(c->spec.t, n->name) &&
	       (!strcmp(state, "idle~") || !strcmp(state, "idle%") || !strcmp(state, "idle!"));
}

/* Polls sinfo until every compute node is usable (start_settled): every 50
 * ms for the first 2 s (a fresh slurmd registers within them), then every
 * 250 ms. */
static int start_wait_idle(struct pbx_cluster *c, const struct pbx_cluster_events *ev,
			   struct pbx_err *err)
{
	unsigned char *resumed = xcalloc(c->nnodes ? c->nnodes : 1, 1);
	int waited = 0, rc = -1;
	for (;;) {
		struct pbx_sinfo_node *sn = NULL;
		size_t n = 0, i, ready = 0, compute = 0;
		struct pbx_buf bad = PBX_BUF_INIT;
		struct pbx_err serr = PBX_ERR_INIT;
		int step = waited < 2000 ? 50 : 250;
		struct timespec delay = { 0, step * 1000L * 1000L };
		int got = pbx_cluster_sinfo(c, &sn, &n, &serr);
		for (i = 0; i < c->nnodes; i++) {
			const char *state;
			if (strcmp(c->nodes[i].role, "compute") != 0)
				continue;
			compute++;
			state = got == 0 ? pbx_sinfo_state_of(sn, n, c->nodes[i].name) : NULL;
			pbx_events_stage(ev, i, state ? state : "waiting for slurmctld");
			if (state && start_settled(c, &c->nodes[i], state))
				ready++;
			else
				pbx_buf_addf(&bad, "%s%s=%s", bad.len ? ", " : "", c->nodes[i].name,
					     state ? state : "unknown");
		}
		if (got == 0)
			start_resume(c, sn, n, waited, resumed);
		pbx_sinfo_free(sn, n);
		if (ready == compute) {
			pbx_buf_release(&bad);
			rc = 0;
			break;
		}
		if (waited >= START_IDLE_TIMEOUT_MS) {
			pbx_err_set(err, "nodes not idle after %d s: %s%s%s", waited / 1000,
				    bad.buf, got < 0 ? "; last sinfo error: " : "",
				    got < 0 ? serr.msg : "");
			pbx_buf_release(&bad);
			break;
		}
		pbx_buf_release(&bad);
		nanosleep(&delay, NULL);
		waited += step;
	}
	free(resumed);
	return rc;
}

/* ----------------------------------------------------------------- start */

/* Begins creation, then polls it until every node can be reached. */
static int start_create(struct pbx_cluster *c, const struct pbx_cluster_events *ev,
			struct pbx_err *err)
{
	struct pbx_create_hooks h = { start_record_node, c, ev };
	struct timespec delay = { 0, 200 * 1000 * 1000 };
	int rc = c->provider->create_begin(c->pctx, c->nodes, c->nnodes, &h, err);
	if (rc == 0)
		pbx_test_kill_point("create", 1); /* asked for, not yet recorded */
	while (rc == 0) {
		rc = c->provider->create_poll(c->pctx, c->nodes, c->nnodes, &h, err);
		if (rc != 0)
			break;
		nanosleep(&delay, NULL);
	}
	return rc < 0 ? -1 : 0;
}

/* Node bodies on this host (the local cluster's, an emulator's) keep
 * their shared directory under c->dir: the task user passes through it and
 * through clusters/ above (o+x, no listing; each file keeps its mode;
 * docs/SECURITY.md), whatever the umask made them. */
static int start_dir_passable(const struct pbx_cluster *c, struct pbx_err *err)
{
	char *parent = xstrdup(c->dir), *slash = strrchr(parent, '/');
	const char *bad = NULL;
	int rc = 0;
	if (slash && slash != parent)
		*slash = '\0';
	if (chmod(parent, PBX_CLUSTER_DIR_MODE) < 0)
		bad = parent;
	else if (chmod(c->dir, PBX_CLUSTER_DIR_MODE) < 0)
		bad = c->dir;
	if (bad)
		rc = pbx_err_set(err, "cannot open %s to the task user: %s", bad, strerror(errno));
	free(parent);
	return rc;
}

/* Nodes the cloud did not make (min_nodes, see provider.h) leave the
 * cluster's node list: the rest is bootstrapped and SLURM knows only them.
 * Their rows stay, so the store says what is missing; the next start tries
 * again.  The progress display is told the new list. */
static void start_drop_unmade(struct pbx_cluster *c, const struct pbx_cluster_events *ev)
{
	const char **names = xcalloc(c->nnodes ? c->nnodes : 1, sizeof(*names));
	size_t i, k = 0, dropped = 0;
	for (i = 0; i < c->nnodes; i++) {
		if (c->nodes[i].state && !strcmp(c->nodes[i].state, PBX_NODE_NOT_CREATED)) {
			pbx_store_event(c->store, c->row.id, "node.not-created",
					"%s: the cloud made fewer nodes than asked (min_nodes)",
					c->nodes[i].name);
			pbx_node_row_release(&c->nodes[i]);
			dropped++;
			continue;
		}
		c->nodes[k++] = c->nodes[i];
	}
	c->nnodes = k;
	for (i = 0; i < k; i++)
		names[i] = c->nodes[i].name;
	if (dropped && ev && ev->nodes)
		ev->nodes(ev->ctx, k, names);
	free(names);
}

static int start_run_all(struct pbx_cluster *c, const struct pbx_cluster_events *ev,
			 struct pbx_err *err)
{
	struct pbx_slurm_layout layout;
	struct start_run r = { .stage_tar = PBX_BUF_INIT };
	int rc;
	rc = c->provider->layout(c->pctx, &layout, err);
	if (rc == 0)
		rc = start_save_nodes(c->store, c->nodes, c->nnodes, err);
	if (rc == 0)
		rc = start_create(c, ev, err);
	if (rc == 0) {
		pbx_test_kill_point("start", 1);
		start_drop_unmade(c, ev);
	}
	/* Node bodies already run in direct mode; a cloud's nodes may be VMs
	 * or (an emulator's) node bodies: ask them. */
	if (rc == 0 && strcmp(layout.bootstrap_mode, "direct") != 0)
		rc = pbx_cluster_discover(c, &layout, ev, err);
	if (rc == 0)
		rc = start_save_nodes(c->store, c->nodes, c->nnodes, err);
	if (rc == 0)
		rc = pbx_mkdir_p(c->dir, PBX_CLUSTER_DIR_MODE,
				 err); /* pbx's files for the cluster */
	if (rc == 0 && layout.same_host)
		rc = start_dir_passable(c, err);
	if (rc == 0)
		rc = start_stage(c, &layout, &r.stage_tar, err);
	r.c = c;
	r.layout = &layout;
	r.ev = ev;
	if (rc == 0) {
		start_nodes_state(c, "bootstrapping");
		rc = start_fanout(&r, err);
	}
	if (rc == 0) {
		pbx_test_kill_point("start", 2);
		rc = start_wait_idle(c, ev, err);
	}
	if (rc == 0)
		start_nodes_state(c, "up");
	OPENSSL_cleanse(r.stage_tar.buf, r.stage_tar.len); /* holds the munge key */
	pbx_buf_release(&r.stage_tar);
	return rc;
}

/* Records `start --autostop` with the cluster (template_json.c), in the
 * store and in the row read. */
static int start_record_autostop(struct pbx_store *st, struct pbx_cluster_row *row, int autostop,
				 struct pbx_err *err)
{
	char *json;
	int rc;
	if (autostop < 0)
		return 0;
	json = pbx_template_json_autostop(row->template_json, autostop);
	if (!json)
		return pbx_err_set(err, "cluster %s: its recorded template is not JSON", row->name);
	rc = pbx_store_cluster_set_template_json(st, row->id, json, err);
	free(row->template_json);
	row->template_json = json;
	return rc;
}

/* 1 when c is recorded up and sinfo (one round trip to the head, on the
 * connection the start goes on using) shows every compute node usable;
 * else 0.  -1 only for a refusal (a changed host key: PBX_EXIT_SECURITY). */
static int start_was_up(struct pbx_cluster *c, struct pbx_err *err)
{
	struct pbx_sinfo_node *sn = NULL;
	size_t n = 0, i;
	int up = 0;
	if (strcmp(c->row.state, "up") != 0)
		return 0;
	if (pbx_cluster_sinfo(c, &sn, &n, err) == 0) {
		up = 1;
		for (i = 0; i < c->nnodes; i++) {
			const char *state = pbx_sinfo_state_of(sn, n, c->nodes[i].name);
			if (!strcmp(c->nodes[i].role, "compute") &&
			    (!state || !pbx_sinfo_state_usable(state)))
				up = 0;
		}
	} else if (err->code == PBX_EXIT_SECURITY) {
		up = -1;
	} else {
		pbx_err_clear(err);
	}
	pbx_sinfo_free(sn, n);
	return up;
}

/* Plans the cluster's nodes (those SLURM wakes asleep), keeping what the
 * store knows of each, and tells the progress display their names. */
static int start_plan(struct pbx_cluster *c, const struct pbx_cluster_events *ev,
		      struct pbx_err *err)
{
	struct pbx_node_row *planned = NULL;
	size_t nplanned = 0, i;
	const char **names;
	int rc = c->provider->plan(c->pctx, &planned, &nplanned, err);
	if (rc < 0)
		return -1;
	pbx_power_plan(c, planned, nplanned); /* nodes SLURM wakes: asleep */
	start_merge_known(planned, nplanned, c->nodes, c->nnodes);
	pbx_node_rows_free(c->nodes, c->nnodes);
	c->nodes = planned;
	c->nnodes = nplanned;
	if (pbx_power_split(c, err) < 0)
		return -1;
	names = xcalloc(c->nnodes ? c->nnodes : 1, sizeof(*names));
	for (i = 0; i < c->nnodes; i++)
		names[i] = c->nodes[i].name;
	if (ev && ev->nodes)
		ev->nodes(ev->ctx, c->nnodes, names);
	free(names);
	pbx_store_event(c->store, c->row.id, "cluster.start", "%zu nodes", nplanned);
	return 0;
}

int pbx_cluster_start(struct pbx_store *st, const struct pbx_config *cfg,
		      struct pbx_cluster_target *tg, int autostop, int *was_up,
		      const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	struct pbx_cluster *c = NULL;
	int rc, up;
	if (was_up)
		*was_up = 0;
	if (pbx_cluster_target_template(tg, cfg, err) < 0)
		return -1;
	if (!pbx_provider_find(tg->t->cloud))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "cloud '%s' is not supported yet",
				    tg->t->cloud);
	if (start_record(st, cfg, tg, err) < 0 ||
	    start_record_autostop(st, &tg->row, autostop, err) < 0 ||
	    pbx_cluster_open_row(st, cfg, &tg->row, &c, err) < 0)
		return -1;
	tg->known = 0; /* the row is c's now */
	pbx_cluster_use_template(c, tg->t);
	/* the nodes the head woke or deleted (power saving): a node the store
	 * has up whose instance the head deleted is not made again here */
	if (pbx_cluster_learn_awake(c, NULL, err) < 0)
		pbx_err_clear(err);
	up = start_was_up(c, err);
	if (up < 0) {
		pbx_cluster_close(c);
		return -1;
	}
	if (was_up)
		*was_up = up;
	c->starting = 1;
	/* the user's pbx computes the budget's deadline with its prices; pbx
	 * on the cluster (the head's own starts: power saving) keeps the one
	 * the user's start sent with the record, having no prices itself */
	rc = 0;
	if (c->here >= 0)
		c->budget_until = pbx_template_budget_until(c->row.template_json);
	else /* -t's template */
		rc = pbx_cluster_budget_until(c, time(NULL), &c->budget_until, err);
	if (rc == 0)
		rc = pbx_cluster_budget_refuse(c, "start", err);
	if (rc == 0)
		rc = start_plan(c, ev, err);
	if (rc == 0)
		rc = start_run_all(c, ev, err);
	if (rc == 0) {
		pbx_cluster_mark(c, "up");
		free(c->row.state);
		c->row.state = xstrdup("up");
	}
	if (rc == 0 && pbx_head_runs_pbx(c) && c->here != 0)
		rc = pbx_head_adopt(c, err); /* the head's store learns the cluster, up */
	/* a refusal to talk to a node says nothing of its health: the state stays */
	if (rc < 0 && err->code != PBX_EXIT_SECURITY)
		pbx_cluster_mark(c, "degraded");
	pbx_cluster_close(c);
	return rc;
}

int pbx_cluster_start_name(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			   const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	struct pbx_cluster_target tg;
	int rc = pbx_cluster_target_resolve(st, cfg, name, NULL, &tg, err);
	if (rc == 0)
		rc = pbx_cluster_start(st, cfg, &tg, -1, NULL, ev, err);
	pbx_cluster_target_release(&tg);
	return rc;
}
