/*
 * envgc.c - `pbx cluster gc` (docs/environments.md, "Removing old
 * environments"): what no package on a cluster refers to any more goes.
 * On the head, as root, the run directories (SHARED/pbx/PKG) of packages
 * this store has forgotten (`pbx forget`) on a cluster pbx built (on a
 * university cluster the work_dir may be another machine's too: left),
 * and the staged datasets no run directory names;
 * then, as the user tasks run as, the environments (SHARED/pbx/envs) that
 * no run's env/status names READY (read as root: the task user may not
 * list the runs); then on each node that is up
 * the unpacked copies of the environments no longer kept
 * (templates/pbx-env-gc.sh does the last two; a build or unpack under way
 * holds its lock and is left).  One round trip to the head, one per node.
 */
#include "jobs/jobs_internal.h"
#include "tmpl/tmpl.h"
#include "util/fanout.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* On the head as root: each run directory of a package that is not KNOWN
 * (and has not changed in the last hour: a parrun that has recorded its
 * package since the store was read may be pushing it) goes, renamed to
 * .gc.ID first so that a gc killed half way leaves no directory that looks
 * like a package (one without its pkg/ would never be collected). */
static const char forgotten_script[] =
	"P=$PBX_SHARED/pbx\n"
	/* a directory goes whole or not at all: renamed out of the way first,
	 * and what a gc cut short (kill -9) left renamed goes now */
	"[ \"$DRY\" = 1 ] || rm -rf \"$P\"/.gc.*\n"
	"for d in \"$P\"/*; do\n"
	"  n=${d##*/}\n"
	"  case $n in *[!0-9a-f]* | '') continue ;; esac\n"
	"  [ ${#n} -eq 12 ] && [ -d \"$d/pkg\" ] && [ ! -L \"$d\" ] || continue\n"
	"  case \" $KNOWN \" in *\" $n \"*) continue ;; esac\n"
	"  [ -z \"$(find \"$d\" -maxdepth 0 -mmin -60)\" ] || { echo \"young $n\"; continue; }\n"
	"  size=$(du -sb \"$d\" | cut -f1)\n"
	"  [ \"$DRY\" = 1 ] || { mv \"$d\" \"$P/.gc.$n\" && rm -rf \"$P/.gc.$n\"; } || exit 1\n"
	"  echo \"gone package $n $size\"\n"
	"  GONE=\"$GONE $n\"\n"
	"done\n";

/* On the head as pbx's login user (root on a cloud; the data's owner on a
 * university cluster): each staged dataset (SHARED/pbx/data/ID,
 * docs/data.md) that no run directory left (GONE aside) names in its
 * pkg/data.links goes - unless it was staged or named by a parrun in the
 * last hour (its directory's time: read_manifests in src/jobs/data.c
 * touches it, so a package being pushed keeps it) or a staging holds its
 * lock - renamed to .gc.ID first, as a run directory is, its list of
 * names a cut staging placed (.ID.placing) with it.  The lock file
 * stays: a staging already waiting on it, and one that made a new one,
 * would not exclude each other.  With it goes the head's own download
 * cache of the source (HC/ID: a head staging its cloud's buckets itself,
 * src/jobs/datacache.h), whose files are the dataset's (hard links: the
 * disk is freed only when both go), unless a staging holds its lock. */
static const char data_script[] =
	"DD=$P/data\n"
	"[ \"$DRY\" = 1 ] || rm -rf \"$DD\"/.gc.* \"$HC\"/.rm-*\n"
	"NAMED=$(for l in \"$P\"/*/pkg/data.links; do\n"
	"  r=${l%/pkg/data.links}\n"
	"  case \" $GONE \" in *\" ${r##*/} \"*) continue ;; esac\n"
	"  [ -f \"$l\" ] && [ ! -L \"$l\" ] && cut -d' ' -f1 \"$l\"\n"
	"done | sort -u | tr '\\n' ' ')\n"
	"for d in \"$DD\"/*; do\n"
	"  n=${d##*/}\n"
	"  case $n in *[!0-9a-f]* | '') continue ;; esac\n"
	"  [ ${#n} -eq 16 ] && [ -d \"$d\" ] && [ ! -L \"$d\" ] || continue\n"
	"  case \" $NAMED \" in *\" $n \"*) continue ;; esac\n"
	"  [ -z \"$(find \"$d\" -maxdepth 0 -mmin -60)\" ] || { echo \"young-data $n\"; continue; }\n"
	"  c=\n"
	"  [ -d \"$HC/$n\" ] && [ ! -L \"$HC/$n\" ] && c=$HC/$n\n"
	"  if command -v flock >/dev/null 2>&1; then\n"
	"    exec 8>\"$DD/.$n.lock\" && flock -n 8 || { echo \"busy-data $n\"; continue; }\n"
	"    [ -z \"$c\" ] || { exec 7>>\"$c.lock\" && flock -n 7; } || { echo \"busy-data $n\"; continue; }\n"
	"  fi\n"
	"  size=$(du -sbc \"$d\" ${c:+\"$c\"} | tail -n 1 | cut -f1)\n"
	"  if [ \"$DRY\" != 1 ]; then\n"
	"    mv \"$d\" \"$DD/.gc.$n\" && find \"$DD/.gc.$n\" -type d -exec chmod u+w {} + &&\n"
	"      rm -rf \"$DD/.gc.$n\" && rm -f \"$DD/.$n.placing\" || exit 1\n"
	"    if [ -n \"$c\" ]; then\n"
	"      rm -rf \"$HC/.rm-$n\" && mv \"$c\" \"$HC/.rm-$n\" && rm -rf \"$HC/.rm-$n\" && rm -f \"$c.lock\" || exit 1\n"
	"    fi\n"
	"  fi\n"
	"  exec 8>&- 7>&-\n"
	"  echo \"gone data $n $size\"\n"
	"done\n";

/* On the head (as root where pbx is root: the task user may not list
 * SHARED/pbx): KEEP, each key a run's env/status (or env/py/status, an
 * image's Python environment) names READY, read as a
 * file the task user writes (no link followed, no FIFO waited on); a
 * run whose directory goes (GONE) keeps nothing. */
static const char keep_script[] =
	"KEEP=$(for s in \"$PBX_SHARED\"/pbx/*/env/status \"$PBX_SHARED\"/pbx/*/env/py/status; do\n"
	"  r=${s%/env/status}; r=${r%/env/py/status}\n"
	"  case \" $GONE \" in *\" ${r##*/} \"*) continue ;; esac\n"
	"  [ -f \"$s\" ] && [ ! -L \"$s\" ] || continue\n"
	"  dd if=\"$s\" iflag=nofollow,nonblock bs=256 count=1 2>/dev/null | head -n 1 |\n"
	"    sed -n 's/^READY \\([0-9a-f]\\{64\\}\\)$/\\1/p'\n"
	"done | sort -u)\n";

/* Runs GC (the collector's text) with its arguments as the task user. */
static const char as_task_user[] =
	"if [ \"$(id -u)\" = 0 ] && [ -n \"${PBX_TASK_USER:-}\" ]; then\n"
	"  runuser -u \"$PBX_TASK_USER\" -- sh -c \"$GC\" pbx-env-gc \"$@\"\n"
	"else\n"
	"  sh -c \"$GC\" pbx-env-gc \"$@\"\n"
	"fi\n";

void pbx_env_gc_free(struct pbx_env_gc *g)
{
	size_t i;
	for (i = 0; i < g->ngone; i++) {
		free(g->gone[i].kind);
		free(g->gone[i].node);
		free(g->gone[i].id);
		free(g->gone[i].where);
	}
	free(g->gone);
	for (i = 0; i < g->nkept; i++)
		free(g->kept[i]);
	free(g->kept);
	memset(g, 0, sizeof(*g));
}

/* Whether g has an item of `kind` and `id` on the disk `where` already
 * (node bodies on one machine share their environments' directory). */
static int gc_seen(const struct pbx_env_gc *g, const char *kind, const char *id, const char *where)
{
	size_t i;
	for (i = 0; *where && i < g->ngone; i++)
		if (!strcmp(g->gone[i].kind, kind) && !strcmp(g->gone[i].id, id) &&
		    g->gone[i].where && !strcmp(g->gone[i].where, where))
			return 1;
	return 0;
}

/* One line of the collector's output, from node `node`, into g. */
static void gc_line(struct pbx_env_gc *g, const char *node, char *line)
{
	char kind[16], id[65], where[128] = "";
	long long bytes = 0;
	if (sscanf(line, "keep %64[0-9a-f]", id) == 1) {
		g->kept = xreallocarray(g->kept, g->nkept + 1, sizeof(*g->kept));
		g->kept[g->nkept++] = xstrdup(id);
	} else if (sscanf(line, "busy %64[0-9a-f]", id) == 1) {
		g->busy++;
	} else if (sscanf(line, "young %12[0-9a-f]", id) == 1) {
		g->young++;
	} else if (sscanf(line, "young-data %16[0-9a-f]", id) == 1) {
		g->young_data++;
	} else if (sscanf(line, "busy-data %16[0-9a-f]", id) == 1) {
		g->busy_data++;
	} else if (sscanf(line, "gone %15[a-z] %64[0-9a-f] %lld %127s", kind, id, &bytes, where) >=
			   3 &&
		   bytes >= 0 && !gc_seen(g, kind, id, where)) {
		struct pbx_env_gc_item *it;
		g->gone = xreallocarray(g->gone, g->ngone + 1, sizeof(*g->gone));
		it = &g->gone[g->ngone++];
		it->kind = xstrdup(kind);
		it->node = xstrdup(node);
		it->id = xstrdup(id);
		it->where = where[0] ? xstrdup(where) : NULL;
		it->bytes = bytes;
		g->freed = g->freed > LLONG_MAX - bytes ? LLONG_MAX : g->freed + bytes;
	}
}

void pbx_env_gc_parse(struct pbx_env_gc *g, const char *node, struct pbx_buf *out)
{
	char *p = out->buf, *nl;
	for (; p && *p; p = nl + 1) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		gc_line(g, node, p);
		if (!nl)
			break;
	}
}

/* The collector's invocation: GC=TEXT, then as_task_user with `args`. */
static void gc_invocation(struct pbx_buf *s, const char *gc, const char *args)
{
	pbx_buf_adds(s, "GC=");
	pbx_shell_quote(s, gc);
	pbx_buf_addf(s, "\nset -- %s\n%s", args, as_task_user);
}

/* On the head: forgotten packages (clusters pbx built), then the shared
 * environments. */
static int gc_head(struct pbx_store *st, struct pbx_cluster *c, const char *gc, int dry,
		   struct pbx_env_gc *g, struct pbx_err *err)
{
	struct pbx_buf s = PBX_BUF_INIT, args = PBX_BUF_INIT;
	struct pbx_cluster_output o;
	char **known = NULL;
	/* where pbx-head keeps its home (templates/bootstrap/55-head-key.sh) */
	char *head_cache =
		xasprintf("%s/var/lib/pbx/home/data", c->nodes[0].root ? c->nodes[0].root : "");
	size_t nknown = 0, i;
	int rc = 0;
	pbx_buf_addf(&s, "set -u\nDRY=%d\nGONE=\n", dry);
	if (!pbx_cluster_is_users(c)) {
		rc = pbx_store_cluster_package_ids(st, c->row.id, &known, &nknown, err);
		pbx_buf_adds(&s, "KNOWN='");
		for (i = 0; i < nknown; i++)
			pbx_buf_addf(&s, "%s%s", i ? " " : "", known[i]);
		pbx_buf_addf(&s, "'\n%s", forgotten_script);
	}
	pbx_buf_adds(&s, "HC=");
	pbx_shell_quote(&s, head_cache);
	pbx_buf_addf(&s, "\nP=$PBX_SHARED/pbx\n%s%s", data_script, keep_script);
	pbx_buf_addf(&args, "shared %d $KEEP", dry);
	gc_invocation(&s, gc, args.buf);
	if (rc == 0)
		rc = pbx_cluster_run(c, 0, s.buf, NULL, &o, err);
	if (rc == 0) {
		pbx_env_gc_parse(g, c->nodes[0].name, &o.out);
		pbx_cluster_output_release(&o);
	}
	for (i = 0; i < nknown; i++)
		free(known[i]);
	free(known);
	free(head_cache);
	pbx_buf_release(&s);
	pbx_buf_release(&args);
	return rc;
}

struct gc_nodes {
	struct pbx_cluster *c;
	size_t *nodes;
	const char *script;
	struct pbx_cluster_output *outs;
};

static int gc_node(void *ctx, size_t i, struct pbx_err *err)
{
	struct gc_nodes *r = ctx;
	if (pbx_cluster_run(r->c, r->nodes[i], r->script, NULL, &r->outs[i], err) < 0)
		return pbx_err_prefix(err, "gc: on node %s", r->c->nodes[r->nodes[i]].name);
	return 0;
}

/* On every node that is up: the copies of environments not kept (the head
 * runs no task on a cloud; on the local cluster every node body unpacks
 * into the head's var/tmp). */
static int gc_compute_nodes(struct pbx_cluster *c, const char *gc, int dry, struct pbx_env_gc *g,
			    struct pbx_err *err)
{
	struct pbx_buf s = PBX_BUF_INIT, args = PBX_BUF_INIT;
	struct gc_nodes r = { c, NULL, NULL, NULL };
	struct pbx_err *errs;
	size_t i, n = 0;
	int failed;
	r.nodes = xcalloc(c->nnodes + 1, sizeof(*r.nodes));
	for (i = 0; i < c->nnodes; i++)
		if (!strcmp(c->nodes[i].state, "up"))
			r.nodes[n++] = i;
	pbx_buf_addf(&args, "local %d", dry);
	for (i = 0; i < g->nkept; i++)
		pbx_buf_addf(&args, " %s", g->kept[i]);
	gc_invocation(&s, gc, args.buf);
	r.script = s.buf;
	r.outs = xcalloc(n + 1, sizeof(*r.outs));
	errs = xcalloc(n + 1, sizeof(*errs));
	failed = n ? pbx_fanout(n, 16, gc_node, &r, errs) : 0;
	for (i = 0; i < n; i++) {
		if (errs[i].msg[0]) {
			if (failed > 0) {
				*err = errs[i];
				failed = -1;
			}
			continue;
		}
		pbx_env_gc_parse(g, c->nodes[r.nodes[i]].name, &r.outs[i].out);
		pbx_cluster_output_release(&r.outs[i]);
	}
	free(errs);
	free(r.outs);
	free(r.nodes);
	pbx_buf_release(&s);
	pbx_buf_release(&args);
	return failed ? -1 : 0;
}

int pbx_jobs_env_gc(struct pbx_store *st, struct pbx_cluster *c, int dry, struct pbx_env_gc *g,
		    struct pbx_err *err)
{
	struct pbx_buf gc = PBX_BUF_INIT;
	int rc;
	memset(g, 0, sizeof(*g));
	g->dry = dry;
	rc = pbx_tmpl_get("pbx-env-gc.sh", &gc, err);
	if (rc == 0)
		rc = gc_head(st, c, gc.buf, dry, g, err);
	/* a university cluster's compute nodes are not reached: their copies
	 * live in /var/tmp, which its nodes clean */
	if (rc == 0 && !pbx_cluster_is_users(c))
		rc = gc_compute_nodes(c, gc.buf, dry, g, err);
	pbx_buf_release(&gc);
	return rc;
}
