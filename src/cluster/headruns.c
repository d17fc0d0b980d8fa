/*
 * headruns.c - the head's node runs (docs/cost.md, "Spend"; cluster_steps.h,
 * "headruns.c").  On a cloud cluster that saves power the head's own pbx
 * makes and deletes the nodes that may sleep, while the user's pbx may be
 * off for days, and its store records their runs exactly as it resumes
 * and suspends them.  `pbx cluster runs NAME` prints them there
 * (pbx_head_runs_json).  `cluster show` and `state` on the user's side,
 * which reach the head anyway, ask for them in one more SSH exec
 * (pbx_cluster_head_runs), read them as hostile input (headruns_parse.c)
 * and make them the store's runs of those nodes (pbx_head_runs_merge),
 * priced from this machine's price cache: the user's own view of them
 * (awake.c) began and ended them late, or missed them.
 */
#include "cluster/cluster_internal.h"
#include "util/quote.h"
#include "util/visible.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_RUNS_STDERR_MAX 4096 /* bytes of the head's stderr kept */

/* ------------------------------------------------------- on the head */

static json_t *hr_run_json(const struct pbx_node_run *r)
{
	return json_pack("{s:s, s:I, s:o}", "node", r->node, "started", (json_int_t)r->started,
			 "ended", r->ended ? json_integer(r->ended) : json_null());
}

/* The reply of cluster `row`, sized template t; caller frees. */
static char *hr_reply(struct pbx_store *st, const struct pbx_cluster_row *row,
		      const struct pbx_cluster_template *t, struct pbx_err *err)
{
	struct pbx_node_run *v = NULL;
	size_t n = 0, i;
	json_t *runs, *root;
	char *s;
	if (pbx_store_runs_list(st, row->id, &v, &n, err) < 0)
		return NULL;
	runs = json_array();
	for (i = 0; i < n; i++)
		if (pbx_head_runs_node_ok(t, v[i].node))
			json_array_append_new(runs, hr_run_json(&v[i]));
	root = json_pack("{s:i, s:s, s:s, s:o}", "version", PBX_HEAD_RUNS_VERSION, "cluster",
			 row->name, "id", row->uid, "runs", runs);
	s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(root);
	pbx_node_runs_free(v, n);
	return s;
}

int pbx_head_runs_json(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       char **json, struct pbx_err *err)
{
	struct pbx_cluster_row row;
	struct pbx_cluster_template sized;
	struct pbx_node_group *groups = NULL;
	const struct pbx_cluster_template *t;
	*json = NULL;
	if (pbx_cluster_name_check(name, err) < 0 || pbx_store_cluster_get(st, name, &row, err) < 0)
		return -1;
	t = pbx_config_template(cfg, pbx_cluster_template_for(&row, name, NULL));
	if (t) {
		pbx_template_sized(t, row.template_json, &sized, &groups);
		*json = hr_reply(st, &row, &sized, err);
	} else {
		pbx_err_setc(err, PBX_EXIT_NOTFOUND,
			     "cluster %s: no template %s in the configuration", name,
			     pbx_cluster_template_for(&row, name, NULL));
	}
	free(groups);
	pbx_cluster_row_free(&row);
	return *json ? 0 : -1;
}

/* --------------------------------------------------------- the merge */

/* The first of v[0..n) (sorted by node, then start; disjoint) of `node`
 * that ends at `from` or later, or runs; else where `node`'s runs end. */
static size_t hr_first(const struct pbx_head_run *v, size_t n, const char *node, int64_t from)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(v[mid].node, node);
		if (c < 0 || (c == 0 && v[mid].ended && v[mid].ended < from))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* How long [as, ae] and [bs, be] share (an open end is `now`); < 0: none. */
static int64_t hr_overlap(int64_t as, int64_t ae, int64_t bs, int64_t be, int64_t now)
{
	int64_t s = as > bs ? as : bs;
	ae = ae ? ae : now;
	be = be ? be : now;
	return (ae < be ? ae : be) - s;
}

/* claim[j]: the laptop's run l[i] that head run v[j] replaces (keeping
 * its price), or nl.  Each of the laptop's runs of a node that may sleep
 * claims the unclaimed head run of its node it overlaps most. */
static size_t *hr_claim(const struct pbx_node_run *l, size_t nl, const struct pbx_head_run *v,
			size_t n, const struct pbx_cluster_template *t, int64_t now)
{
	size_t *claim = xcalloc(n ? n : 1, sizeof(*claim)), i, j;
	for (j = 0; j < n; j++)
		claim[j] = nl;
	for (i = 0; i < nl; i++) {
		int64_t best = -1, end = l[i].ended ? l[i].ended : now;
		size_t pick = n;
		if (!pbx_power_may_sleep(t, l[i].node))
			continue;
		for (j = hr_first(v, n, l[i].node, l[i].started);
		     j < n && !strcmp(v[j].node, l[i].node) && v[j].started <= end; j++) {
			int64_t o =
				hr_overlap(l[i].started, l[i].ended, v[j].started, v[j].ended, now);
			if (claim[j] == nl && o > best) {
				best = o;
				pick = j;
			}
		}
		if (pick < n)
			claim[pick] = i;
	}
	return claim;
}

struct hr_merge {
	struct pbx_store *st;
	int64_t id;
	const struct pbx_cluster_template *t;
	const struct pbx_price_quote *q; /* may be NULL */
	size_t changed;
	struct pbx_err *err;
};

/* Head run h becomes the store's: laptop run l (NULL: a new row, priced
 * from the quote now) takes its interval. */
static int hr_take(struct hr_merge *m, const struct pbx_head_run *h, const struct pbx_node_run *l)
{
	int64_t nanos;
	if (l && l->started == h->started && l->ended == h->ended)
		return 0;
	m->changed++;
	if (l)
		return pbx_store_run_set(m->st, l->id, h->started, h->ended, m->err);
	nanos = m->q ? pbx_spend_node_price(m->q, m->t, h->node, "compute") : -1;
	return pbx_store_run_add(m->st, m->id, h->node, h->started, h->ended, nanos,
				 m->q ? m->q->currency : "", m->err);
}

/* The merge's writes, in an order the store's rule of one open run a
 * node allows: the laptop's runs no head run replaces go, then the head's
 * runs that ended, then those that run. */
static int hr_write(struct hr_merge *m, const struct pbx_node_run *l, size_t nl,
		    const struct pbx_head_run *v, size_t n, const size_t *claim)
{
	char *kept = xcalloc(nl ? nl : 1, 1);
	size_t i, j;
	int pass, rc = 0;
	for (j = 0; j < n; j++)
		if (claim[j] < nl)
			kept[claim[j]] = 1;
	for (i = 0; i < nl && rc == 0; i++)
		if (!kept[i] && pbx_power_may_sleep(m->t, l[i].node)) {
			m->changed++;
			rc = pbx_store_run_delete(m->st, l[i].id, m->err);
		}
	for (pass = 0; pass < 2; pass++)
		for (j = 0; j < n && rc == 0; j++)
			if ((v[j].ended == 0) == pass)
				rc = hr_take(m, &v[j], claim[j] < nl ? &l[claim[j]] : NULL);
	free(kept);
	return rc;
}

int pbx_head_runs_merge(struct pbx_store *st, int64_t cluster_id,
			const struct pbx_cluster_template *t, const struct pbx_price_quote *q,
			const struct pbx_head_run *v, size_t n, int64_t now, size_t *changed,
			struct pbx_err *err)
{
	struct hr_merge m = { st, cluster_id, t, q, 0, err };
	struct pbx_node_run *l = NULL;
	size_t nl = 0, *claim = NULL;
	int rc;
	if (changed)
		*changed = 0;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	rc = pbx_store_runs_list(st, cluster_id, &l, &nl, err);
	if (rc == 0) {
		claim = hr_claim(l, nl, v, n, t, now);
		rc = hr_write(&m, l, nl, v, n, claim);
	}
	if (rc == 0)
		rc = pbx_store_commit(st, err);
	else
		pbx_store_rollback(st);
	if (rc == 0 && changed)
		*changed = m.changed;
	free(claim);
	pbx_node_runs_free(l, nl);
	return rc;
}

/* ------------------------------------------------------ on the laptop */

/* What the head's pbx says, kept within bounds: a head that says more is
 * refused, not read. */
struct hr_reply {
	struct pbx_buf out, err;
	int over;
};

static void hr_collect(void *ctx, int stream, const char *data, size_t len)
{
	struct hr_reply *r = ctx;
	struct pbx_buf *b = stream == 2 ? &r->err : &r->out;
	size_t max = stream == 2 ? HEAD_RUNS_STDERR_MAX : PBX_HEAD_RUNS_BYTES_MAX;
	if (b->len + len > max) {
		r->over |= stream != 2;
		len = b->len < max ? max - b->len : 0;
	}
	if (len)
		pbx_buf_add(b, data, len);
}

/* `pbx-head -q cluster runs NAME` on c's head, one SSH exec; its stdout
 * into r->out. */
static int hr_fetch(struct pbx_cluster *c, struct hr_reply *r, struct pbx_err *err)
{
	struct pbx_buf cmd = PBX_BUF_INIT;
	char *head =
		xasprintf("%s/usr/local/sbin/pbx-head", c->nodes[0].root ? c->nodes[0].root : "");
	int status = 0, rc;
	pbx_buf_adds(&cmd, "exec ");
	pbx_shell_quote(&cmd, head);
	pbx_buf_adds(&cmd, " -q cluster runs ");
	pbx_shell_quote(&cmd, c->row.name);
	rc = pbx_cluster_exec_sh(c, 0, cmd.buf, hr_collect, r, &status, err);
	if (rc == 0 && status != 0) {
		char *why;
		pbx_buf_rtrim(&r->err);
		why = pbx_visible(r->err.buf ? r->err.buf : "", PBX_VISIBLE_LINE);
		rc = pbx_err_set(err, "the head's pbx did not give its node runs (status %d): %s",
				 status, why);
		free(why);
	} else if (rc == 0 && r->over) {
		rc = pbx_err_set(err, "the head's node runs: more than %u bytes",
				 PBX_HEAD_RUNS_BYTES_MAX);
	}
	free(head);
	pbx_buf_release(&cmd);
	return rc;
}

/* Whether c's head makes the nodes that may sleep, and this pbx is not
 * that head. */
static int hr_wanted(const struct pbx_cluster *c)
{
	return c->store && c->row.id && c->row.uid && c->row.cloud &&
	       strcmp(c->row.cloud, "local") != 0 && c->here < 0 && c->nnodes && c->spec.t &&
	       pbx_power_saving(c->spec.t) && pbx_head_runs_pbx(c);
}

/* Cuts v to the times c's head ran as the store knows them (its runs):
 * a node the head made runs only while the head does (autostop powers the
 * nodes off first), and the head's store may have left one open across a
 * power-off (a node not powered down in time). */
static void hr_clip(struct pbx_cluster *c, struct pbx_head_run **v, size_t *n)
{
	struct pbx_node_run *runs = NULL;
	struct pbx_head_run *on = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t nr = 0, non = 0, i;
	if (pbx_store_runs_list(c->store, c->row.id, &runs, &nr, &err) < 0)
		return;
	on = xcalloc(nr ? nr : 1, sizeof(*on));
	for (i = 0; i < nr; i++)
		if (!strcmp(runs[i].node, c->nodes[0].name)) {
			on[non].started = runs[i].started;
			on[non++].ended = runs[i].ended;
		}
	pbx_head_runs_clip(v, n, on, non);
	free(on);
	pbx_node_runs_free(runs, nr);
}

/* Reply r read, fitted, clipped and merged into c's store. */
static int hr_take_reply(struct pbx_cluster *c, const struct hr_reply *r, size_t *n,
			 size_t *changed, struct pbx_err *err)
{
	struct pbx_head_run *v = NULL;
	struct pbx_price_quote q;
	struct pbx_err qerr = PBX_ERR_INIT;
	int64_t now = time(NULL);
	int rc, quoted;
	rc = pbx_head_runs_parse(r->out.buf ? r->out.buf : "", r->out.len, c->row.name, c->row.uid,
				 c->spec.t, &v, n, err);
	if (rc == 0)
		rc = pbx_head_runs_fit(v, *n, c->row.created, now, err);
	if (rc == 0)
		hr_clip(c, &v, n);
	memset(&q, 0, sizeof(q));
	if (rc == 0) {
		quoted = pbx_price_quote(c->store, c->cfg, c->spec.t, 1, &q, &qerr) == 0;
		rc = pbx_head_runs_merge(c->store, c->row.id, c->spec.t, quoted ? &q : NULL, v, *n,
					 now, changed, err);
	}
	pbx_price_quote_free(&q);
	free(v);
	return rc;
}

int pbx_cluster_head_runs(struct pbx_cluster *c, struct pbx_err *err)
{
	struct hr_reply r = { PBX_BUF_INIT, PBX_BUF_INIT, 0 };
	size_t n = 0, changed = 0;
	int rc;
	if (!hr_wanted(c))
		return 0;
	rc = hr_fetch(c, &r, err);
	if (rc == 0)
		rc = hr_take_reply(c, &r, &n, &changed, err);
	if (rc < 0)
		pbx_err_prefix(err, "cluster %s", c->row.name);
	if (rc == 0) {
		c->head_runs = 1;
		if (changed)
			pbx_store_event(c->store, c->row.id, "spend.head",
					"%zu runs from the head, %zu rows changed", n, changed);
	}
	pbx_buf_release(&r.out);
	pbx_buf_release(&r.err);
	return rc;
}
