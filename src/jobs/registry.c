/*
 * registry.c - `pbx cluster registry-login|registry-logout`
 * (docs/environments.md, "Credentials"): the credentials a cluster's head
 * pulls private registry images with (templates/pbx-env.sh pull).  One
 * round trip to the head: as root, the directory of the task user's auth
 * file on the head's own disk (PBX_ROOT/var/lib/pbx-registry/USER, 0700,
 * the user's), then `pbx-env.sh login|logout` as that user, which runs
 * `skopeo login|logout --authfile`.  Both travel on the remote command's
 * stdin: pbx-env.sh's text first (too long for an SSH exec request), then
 * the password, never on a command line (ps on the head would show it),
 * in the store, a log or a message.
 */
#define _GNU_SOURCE /* memmem, explicit_bzero */
#include "jobs/jobs_internal.h"
#include "tmpl/tmpl.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* After N= (the length of pbx-env.sh's text, which stdin begins with) and
 * `set -- ACTION ARGS`: that text read off stdin, exactly (dd: what
 * follows is the password's), the directory as root, the action as the
 * task user (root where tasks run as root), and its last line of output as
 * PBX-REGISTRY-OK|FAILED TEXT. */
static const char registry_script[] =
	"ENV=$(dd bs=\"$N\" count=1 iflag=fullblock 2>/dev/null)\n"
	"NL='\n'\n"
	"registry() {\n"
	"  [ \"$(id -u)\" = 0 ] || { echo 'pbx is not root on the head'; return 1; }\n"
	"  U=${PBX_TASK_USER:-root} D=${PBX_ROOT:-}/var/lib/pbx-registry\n"
	/* a node body's var/lib is the bootstrap's (umask 077): passable */
	"  (umask 022 && mkdir -p \"$D\") && chmod 755 \"$D\" &&"
	" { [ -z \"${PBX_ROOT:-}\" ] || chmod o+x \"$PBX_ROOT/var\" \"$PBX_ROOT/var/lib\"; } &&"
	" { { [ -d \"$D/$U\" ] && [ ! -L \"$D/$U\" ]; } || mkdir -m 700 \"$D/$U\"; } &&"
	" chown -h \"$U:\" \"$D/$U\" && chmod 700 \"$D/$U\" || return 1\n"
	"  runuser -u \"$U\" -- sh -c \"$ENV\" pbx-env.sh \"$@\"\n"
	"}\n"
	"if msg=$(registry \"$@\" 2>&1); then r=OK; else r=FAILED; fi\n"
	"msg=${msg##*\"$NL\"}\n"
	"printf 'PBX-REGISTRY-%s %s\\n' \"$r\" \"${msg#pbx-env: }\"\n";

/* Every occurrence of secret (len bytes, 4 or more) in msg becomes '*':
 * skopeo never echoes a password, and pbx makes sure. */
static void scrub(char *msg, const char *secret, size_t len)
{
	char *p = msg;
	if (len < 4)
		return;
	while ((p = memmem(p, strlen(p), secret, len)) != NULL)
		memset(p, '*', len);
}

/* Runs `pbx-env.sh ARGS` (args: quoted words) on c's head with `secret`
 * (len bytes, may be NULL) on its stdin; *said: the head's answer (its
 * text after PBX-REGISTRY-OK), caller frees; -1 with err for
 * PBX-REGISTRY-FAILED or no answer. */
static int registry_run(struct pbx_cluster *c, const char *args, const char *secret, size_t len,
			char **said, struct pbx_err *err)
{
	struct pbx_buf in = PBX_BUF_INIT, s = PBX_BUF_INIT;
	struct pbx_cluster_output o;
	size_t n;
	int rc;
	*said = NULL;
	rc = pbx_tmpl_get("pbx-env.sh", &in, err);
	if (rc == 0) {
		n = in.len;
		pbx_buf_add(&in, secret ? secret : "", secret ? len : 0);
		pbx_buf_addf(&s, "N=%zu\nset -- %s\n%s", n, args, registry_script);
		rc = pbx_cluster_run(c, 0, s.buf, &in, &o, err);
	}
	explicit_bzero(in.buf, in.len);
	pbx_buf_release(&in);
	pbx_buf_release(&s);
	if (rc < 0)
		return -1;
	rc = pbx_jobs_registry_answer(o.out.buf ? o.out.buf : "", o.out.len, c->row.name, said,
				      err);
	pbx_cluster_output_release(&o);
	return rc;
}

int pbx_jobs_registry_answer(const char *out, size_t len, const char *cluster, char **said,
			     struct pbx_err *err)
{
	const char *end = out + len, *last;
	size_t n;
	*said = NULL;
	while (end > out && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		end--;
	last = memrchr(out, '\n', (size_t)(end - out));
	last = last ? last + 1 : out;
	n = (size_t)(end - last);
	if (n >= 16 && !memcmp(last, "PBX-REGISTRY-OK ", 16)) {
		*said = xstrndup(last + 16, n - 16);
		return 0;
	}
	if (n >= 20 && !memcmp(last, "PBX-REGISTRY-FAILED ", 20))
		return pbx_err_set(err, "%.*s", (int)(n - 20), last + 20);
	return pbx_err_set(err, "the head of %s gave no answer: %.*s", cluster, (int)n, last);
}

int pbx_jobs_registry_login(struct pbx_cluster *c, const char *registry, const char *user,
			    const char *password, size_t len, char **authfile, struct pbx_err *err)
{
	struct pbx_buf args = PBX_BUF_INIT;
	int rc;
	pbx_buf_adds(&args, "login ");
	pbx_shell_quote(&args, registry);
	pbx_buf_addc(&args, ' ');
	pbx_shell_quote(&args, user);
	rc = registry_run(c, args.buf, password, len, authfile, err);
	pbx_buf_release(&args);
	if (rc < 0)
		scrub(err->msg, password, len);
	return rc;
}

int pbx_jobs_registry_logout(struct pbx_cluster *c, const char *registry, struct pbx_err *err)
{
	struct pbx_buf args = PBX_BUF_INIT;
	char *said;
	int rc;
	pbx_buf_adds(&args, "logout ");
	pbx_shell_quote(&args, registry);
	rc = registry_run(c, args.buf, NULL, 0, &said, err);
	pbx_buf_release(&args);
	if (rc < 0)
		return -1;
	rc = !strncmp(said, "gone", 4);
	free(said);
	return rc;
}
