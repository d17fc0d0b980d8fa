/*
 * tree.c - copying whole directory trees as one tar stream over one exec.
 *
 * put_tree: local `tar -C DIR -cf - .` (spawned from argv) -> tarcheck ->
 * remote `mkdir -p DIR && tar -C DIR -xf -`.
 * get_tree / get_files: remote `tar -C DIR -cf - .` (or a listed subset)
 * -> tarcheck -> untar.c, which writes each checked member straight into
 * local_dir (every byte written once: no archive file, no local tar).  The
 * checker sits in the middle both ways, so a hostile remote tree (absolute
 * names, "..", links out of the tree, files written through a symlink) is
 * refused before anything of the offending member is written; members
 * before it may already be there, always inside local_dir.
 */
#include "ssh/proc.h"
#include "ssh/ssh_internal.h"
#include "ssh/tarcheck.h"
#include "ssh/untar.h"
#include "util/fs.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#define TREE_ERRTEXT_MAX 4096

struct tree_ctx {
	const struct pbx_ssh_get_hooks *hooks; /* get: the caller's, or NULL */
	struct pbx_tarcheck *tc;
	struct pbx_proc *proc;          /* put_tree: the local archiver */
	struct pbx_untar *untar;        /* get: writes the checked members */
	struct pbx_tar_events untar_ev; /* get: untar's events */
	struct pbx_buf remote_err;      /* remote stderr, capped */
};

/* ------------------------------------------------------------ callbacks */

static void tree_keep_err(struct tree_ctx *c, const char *data, size_t len)
{
	size_t room = TREE_ERRTEXT_MAX - c->remote_err.len;
	if (c->remote_err.len < TREE_ERRTEXT_MAX)
		pbx_buf_add(&c->remote_err, data, len < room ? len : room);
}

/* put_tree: local tar output -> checked bytes for the remote stdin. */
static int tree_filter(void *ctx, const char *data, size_t len, struct pbx_buf *out,
		       struct pbx_err *err)
{
	struct tree_ctx *c = ctx;
	if (len == 0)
		return pbx_tarcheck_finish(c->tc, err);
	return pbx_tarcheck_feed(c->tc, data, len, out, err);
}

/* put_tree: the remote side only talks on stderr. */
static int tree_put_sink(void *ctx, int stream, const char *data, size_t len, struct pbx_err *err)
{
	(void)stream;
	(void)err;
	tree_keep_err(ctx, data, len);
	return 0;
}

/* get: remote tar output -> checker -> in-process extraction (untar.c). */
static int tree_get_sink(void *ctx, int stream, const char *data, size_t len, struct pbx_err *err)
{
	struct tree_ctx *c = ctx;
	if (stream == 2) {
		tree_keep_err(c, data, len);
		return 0;
	}
	if (c->hooks && c->hooks->progress)
		c->hooks->progress(c->hooks->ctx, len);
	return pbx_tarcheck_feed(c->tc, data, len, NULL, err);
}

/* get: a checked member goes to the caller's hook, then to untar. */
static int tree_member(void *ctx, const struct pbx_tar_member *m, struct pbx_err *err)
{
	struct tree_ctx *c = ctx;
	if (c->hooks && c->hooks->member && c->hooks->member(c->hooks->ctx, m, err) < 0)
		return -1;
	return c->untar_ev.member(c->untar_ev.ctx, m, err);
}

static int tree_data(void *ctx, const void *p, size_t len, struct pbx_err *err)
{
	struct tree_ctx *c = ctx;
	return c->untar_ev.data(c->untar_ev.ctx, p, len, err);
}

static void tree_refused(void *ctx, const char *name, const char *why)
{
	struct tree_ctx *c = ctx;
	if (c->hooks && c->hooks->refused)
		c->hooks->refused(c->hooks->ctx, name, why);
}

/* ------------------------------------------------------------ helpers */

static void tree_ctx_init(struct tree_ctx *c, struct pbx_proc *proc)
{
	c->hooks = NULL;
	c->tc = pbx_tarcheck_new();
	c->proc = proc;
	c->untar = NULL;
	c->remote_err = (struct pbx_buf)PBX_BUF_INIT;
}

static void tree_ctx_release(struct tree_ctx *c)
{
	pbx_tarcheck_free(c->tc);
	pbx_buf_release(&c->remote_err);
}

/* Turns the exit codes of both tars into the result. */
static int tree_verdict(struct pbx_ssh *s, struct tree_ctx *c, struct pbx_proc *p,
			int remote_status, int local_status, const char *what, struct pbx_err *err)
{
	if (remote_status != 0) {
		pbx_buf_rtrim(&c->remote_err);
		return pbx_err_set(err, "%s: remote tar on %s failed (exit %d)%s%s", what, s->label,
				   remote_status, c->remote_err.len ? ": " : "", c->remote_err.buf);
	}
	if (local_status != 0)
		return pbx_err_set(err, "%s: local tar failed (exit %d)%s%s", what, local_status,
				   p->errtext.len ? ": " : "", p->errtext.buf);
	return 0;
}

void pbx_ssh_set_as_root(struct pbx_ssh *s, int on)
{
	__atomic_store_n(&s->as_root, on, __ATOMIC_RELAXED);
}

/* The command as sent: through `sudo -n sh -c` when the connection asks. */
static void tree_as_root(struct pbx_ssh *s, struct pbx_buf *cmd)
{
	struct pbx_buf w = PBX_BUF_INIT;
	if (!__atomic_load_n(&s->as_root, __ATOMIC_RELAXED))
		return;
	pbx_buf_adds(&w, "sudo -n sh -c ");
	pbx_shell_quote(&w, cmd->buf);
	pbx_buf_release(cmd);
	*cmd = w;
}

/* "mkdir -p -- 'DIR' && tar -C 'DIR' -xf - --no-same-owner" */
static void tree_remote_cmd(struct pbx_buf *cmd, const char *dir, int put)
{
	if (put) {
		pbx_buf_adds(cmd, "mkdir -p -- ");
		pbx_shell_quote(cmd, dir);
		pbx_buf_adds(cmd, " && tar -C ");
		pbx_shell_quote(cmd, dir);
		pbx_buf_adds(cmd, " -xf - --no-same-owner");
	}
}

/* ------------------------------------------------------------ put */

int pbx_ssh_put_tree(struct pbx_ssh *s, const char *local_dir, const char *remote_dir,
		     struct pbx_err *err)
{
	const char *argv[] = { "tar", "-C", local_dir, "-cf", "-", ".", NULL };
	struct pbx_buf cmd = PBX_BUF_INIT;
	struct pbx_proc p;
	struct tree_ctx c;
	struct pbx_ssh_io io = { NULL, 0, -1, tree_filter, &c, tree_put_sink, &c };
	struct stat st;
	int rc, status = -1, lstatus = -1;
	if (pbx_ssh_check_remote_path(remote_dir, err) < 0)
		return -1;
	if (stat(local_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return pbx_err_set(err, "%s is not a directory", local_dir);
	if (pbx_proc_start(argv, 0, 1, &p, err) < 0)
		return -1;
	tree_ctx_init(&c, &p);
	io.in_fd = p.out_fd;
	tree_remote_cmd(&cmd, remote_dir, 1);
	tree_as_root(s, &cmd);
	rc = pbx_ssh_exec_io(s, cmd.buf, &io, &status, err);
	if (pbx_proc_finish(&p, rc < 0, &lstatus, rc < 0 ? NULL : err) < 0)
		rc = -1;
	if (rc == 0)
		rc = tree_verdict(s, &c, &p, status, lstatus, "put_tree", err);
	if (rc < 0 && err)
		pbx_err_prefix(err, "cannot copy %s to %s:%s", local_dir, s->label, remote_dir);
	pbx_buf_release(&p.errtext);
	pbx_buf_release(&cmd);
	tree_ctx_release(&c);
	return rc;
}

/* ------------------------------------------------------------ get */

/* The remote command of get_files: the whole tree, or the NUL-separated
 * list on stdin without recursion (directories listed explicitly). */
static void tree_get_cmd(struct pbx_buf *cmd, const char *dir, int listed)
{
	pbx_buf_adds(cmd, "tar -C ");
	pbx_shell_quote(cmd, dir);
	pbx_buf_adds(cmd, listed ? " --null --no-recursion -T - -cf -" : " -cf - .");
}

/* GNU tar exits 1 when a file changed while it was read (a task still
 * writing, under harvest --running); the stream is whole nonetheless, and
 * the changed file's new size and mtime make the next harvest fetch it
 * again.  True when that is all stderr says. */
static int tree_only_changed(const struct pbx_buf *errtext)
{
	static const char what[] = ": file changed as we read it";
	const char *p = errtext->buf, *end = errtext->buf + errtext->len;
	int any = 0;
	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (l) {
			if (l < sizeof(what) - 1 ||
			    memcmp(p + l - (sizeof(what) - 1), what, sizeof(what) - 1) != 0)
				return 0;
			any = 1;
		}
		p = nl ? nl + 1 : NULL;
	}
	return any;
}

int pbx_ssh_get_files(struct pbx_ssh *s, const char *remote_dir, const struct pbx_buf *list,
		      const char *local_dir, const struct pbx_ssh_get_hooks *hooks,
		      struct pbx_err *err)
{
	struct pbx_buf cmd = PBX_BUF_INIT;
	struct tree_ctx c;
	struct pbx_ssh_io io = {
		list ? list->buf : NULL, list ? list->len : 0, -1, NULL, NULL, tree_get_sink, &c
	};
	struct pbx_tar_events ev = { tree_member, tree_data, tree_refused, &c };
	int rc, status = -1;
	if (pbx_ssh_check_remote_path(remote_dir, err) < 0 || pbx_mkdir_p(local_dir, 0755, err) < 0)
		return -1;
	tree_ctx_init(&c, NULL);
	c.untar = pbx_untar_new(local_dir, err);
	if (!c.untar) {
		tree_ctx_release(&c);
		return -1;
	}
	c.untar_ev = pbx_untar_events(c.untar);
	c.hooks = hooks;
	pbx_tarcheck_set_events(c.tc, &ev);
	tree_get_cmd(&cmd, remote_dir, list != NULL);
	tree_as_root(s, &cmd);
	rc = pbx_ssh_exec_io(s, cmd.buf, &io, &status, err);
	if (rc == 0 && status == 1 && tree_only_changed(&c.remote_err))
		status = 0;
	if (rc == 0 && status == 0)
		rc = pbx_tarcheck_finish(c.tc, err);
	/* Members that arrived whole stay (callers keep what they can use); a
	 * member cut short is removed. */
	if (pbx_untar_finish(c.untar, rc == 0 && status == 0, rc < 0 ? NULL : err) < 0)
		rc = -1;
	if (rc == 0 && status != 0) {
		pbx_buf_rtrim(&c.remote_err);
		rc = pbx_err_set(err, "get: remote tar on %s failed (exit %d)%s%s", s->label,
				 status, c.remote_err.len ? ": " : "", c.remote_err.buf);
	}
	if (rc < 0 && err)
		pbx_err_prefix(err, "cannot copy %s:%s to %s", s->label, remote_dir, local_dir);
	pbx_buf_release(&cmd);
	tree_ctx_release(&c);
	return rc;
}

int pbx_ssh_get_tree(struct pbx_ssh *s, const char *remote_dir, const char *local_dir,
		     struct pbx_err *err)
{
	return pbx_ssh_get_files(s, remote_dir, NULL, local_dir, NULL, err);
}
