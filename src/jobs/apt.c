/*
 * apt.c - the experiment's environment.apt (FORMAT.md, "Environment";
 * docs/environments.md): the Debian packages every node needs, installed
 * by `pbx parrun` as root, before anything is recorded or submitted, on
 * each compute node that is up, all at once: one round trip each, which
 * asks dpkg first and runs apt-get only for what is missing (or at
 * another version), refreshing the package lists once when apt-get cannot
 * find a package.  The names were checked when the experiment was read
 * (pbx_exp_apt_name_ok) and are quoted again here.  A cluster pbx did not
 * build (cloud ssh) is refused: pbx has no root there.  A node made later
 * (power saving, resize) installs them at its bootstrap from the list
 * parrun keeps in SHARED/.pbx-apt (templates/bootstrap/50-shared.sh); the task
 * wrapper refuses to run a task on a node that lacks one (pbx-task.sh).
 */
#include "jobs/jobs_internal.h"
#include "experiment/experiment.h"
#include "util/fanout.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* The script: WANT holds the packages, shell-quoted as one word. */
static const char apt_script[] =
	"set -u\n"
	"missing=\n"
	"for p in $WANT; do\n"
	"  s=$(dpkg-query -W -f='${Status} ${Version}' \"${p%%=*}\" 2>/dev/null) || s=\n"
	"  case $s in \"install ok installed \"*)\n"
	"    case $p in *=*) [ \"${s##* }\" = \"${p#*=}\" ] && continue ;; *) continue ;; esac ;;\n"
	"  esac\n"
	"  missing=\"$missing $p\"\n"
	"done\n"
	"[ -n \"$missing\" ] || exit 0\n"
	"export DEBIAN_FRONTEND=noninteractive\n"
	"log=$(mktemp) || exit 1\n"
	"get() { apt-get -o DPkg::Lock::Timeout=300 -q \"$@\" >>\"$log\" 2>&1; }\n"
	"if get install -y --no-install-recommends $missing ||\n"
	"   { get update && get install -y --no-install-recommends $missing; }; then\n"
	"  rm -f \"$log\"; echo \"installed:$missing\"; exit 0\n"
	"fi\n"
	"{ grep '^E: ' \"$log\" || tail -n 4 \"$log\"; } | tail -n 3 >&2\n"
	"rm -f \"$log\"\n"
	"exit 1\n";

/* On the head, as root: adds WANT to SHARED/.pbx-apt (one package a line,
 * a later NAME=VERSION replacing an earlier entry of that NAME), which a
 * compute node's bootstrap installs (templates/bootstrap/50-shared.sh), so that a
 * node made after this parrun has them too. */
static const char apt_list_script[] =
	"set -u\n"
	"f=$PBX_SHARED/.pbx-apt\n"
	"[ ! -L \"$f\" ] || rm -f \"$f\"\n"
	"{ [ -f \"$f\" ] && cat \"$f\"; printf '%s\\n' $WANT; } |\n"
	"  awk '{ n = $0; sub(/=.*/, \"\", n); if (!(n in v)) o[++k] = n; v[n] = $0 }"
	" END { for (i = 1; i <= k; i++) print v[o[i]] }' >\"$f.tmp.$$\" &&\n"
	"  chmod 644 \"$f.tmp.$$\" && mv -f \"$f.tmp.$$\" \"$f\"\n";

struct apt_run {
	struct pbx_cluster *c;
	size_t *nodes; /* indexes into c->nodes */
	char *script;
};

static int apt_one(void *ctx, size_t i, struct pbx_err *err)
{
	struct apt_run *r = ctx;
	struct pbx_cluster_output o;
	if (pbx_cluster_run(r->c, r->nodes[i], r->script, NULL, &o, err) < 0)
		return pbx_err_prefix(err, "apt: on node %s", r->c->nodes[r->nodes[i]].name);
	pbx_cluster_output_release(&o);
	return 0;
}

int jobs_apt(struct pbx_cluster *c, const struct pbx_experiment *e, struct pbx_err *err)
{
	struct pbx_buf want = PBX_BUF_INIT, script = PBX_BUF_INIT;
	struct apt_run r = { c, NULL, NULL };
	struct pbx_err *errs;
	size_t i, n = 0;
	int failed, k;
	if (!e->env.napt)
		return 0;
	if (pbx_cluster_is_users(c))
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"%s: environment.apt: cluster %s is not one pbx built: pbx has "
			"no root on its nodes to install Debian packages; ask its admins, "
			"or bring the packages in a container: image",
			e->path, c->row.name);
	for (i = 0; i < e->env.napt; i++) {
		if (!pbx_exp_apt_name_ok(e->env.apt[i]))
			return pbx_err_setc(err, PBX_EXIT_USAGE, "apt: '%s' is not a package name",
					    e->env.apt[i]);
		pbx_buf_addf(&want, "%s%s", i ? " " : "", e->env.apt[i]);
	}
	r.nodes = xcalloc(c->nnodes + 1, sizeof(*r.nodes));
	for (i = 1; i < c->nnodes; i++) /* compute nodes: the head runs no task */
		if (!strcmp(c->nodes[i].state, "up"))
			r.nodes[n++] = i;
	pbx_buf_adds(&script, "WANT=");
	pbx_shell_quote(&script, want.buf);
	pbx_buf_addf(&script, "\n%s", apt_script);
	r.script = script.buf;
	errs = xcalloc(n + 1, sizeof(*errs));
	failed = n ? pbx_fanout(n, 16, apt_one, &r, errs) : 0;
	if (!failed) { /* for the nodes made later */
		struct pbx_cluster_output o;
		pbx_buf_reset(&script);
		pbx_buf_adds(&script, "WANT=");
		pbx_shell_quote(&script, want.buf);
		pbx_buf_addf(&script, "\n%s", apt_list_script);
		if (pbx_cluster_run(c, 0, script.buf, NULL, &o, &errs[0]) < 0) {
			*err = errs[0];
			pbx_err_prefix(err,
				       "apt: listing the packages for later nodes on the head");
			failed = 1;
		} else {
			pbx_cluster_output_release(&o);
		}
	}
	for (k = 0; failed && k < (int)n; k++)
		if (errs[k].msg[0]) {
			*err = errs[k];
			break;
		}
	free(errs);
	free(r.nodes);
	pbx_buf_release(&script);
	pbx_buf_release(&want);
	return failed ? -1 : 0;
}
