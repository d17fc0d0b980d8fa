/*
 * sftp.c - single-file transfer over SFTP, whole or not at all.
 *
 * Upload: write REMOTE.pbx-tmp.RANDOM (created exclusively: a link or file
 * planted at a temporary name is never written through), compare its
 * remote `sha256sum` with the local SHA-256, then chmod and rename it into
 * place with one remote command.  Download: write a temporary file made by
 * pbx_tmpfile_beside (mkostemp) next to LOCAL, fsync, compare with the
 * remote `sha256sum`, rename.  A mismatch removes the temporary file.  Each
 * transfer opens its own SFTP channel, so transfers on a shared connection
 * do not share SFTP state.
 */
#include "ssh/ssh_internal.h"
#include "util/quote.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <libssh2_sftp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SFTP_CHUNK      (1u << 20)
#define SFTP_TMP_SUFFIX ".pbx-tmp"

/* ------------------------------------------------------------ paths */

int pbx_ssh_check_remote_path(const char *path, struct pbx_err *err)
{
	const char *p = path;
	if (!path || !*path)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "empty remote path");
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return pbx_err_setc(err, PBX_EXIT_SECURITY,
					    "refusing remote path with a '..' component: %s", path);
		p += n;
		p += *p == '/';
	}
	return 0;
}

/* ------------------------------------------------------------ SFTP plumbing */

static const char *sftp_strerror(unsigned long code)
{
	switch (code) {
	case LIBSSH2_FX_NO_SUCH_FILE:
	case LIBSSH2_FX_NO_SUCH_PATH:
		return "no such file or directory";
	case LIBSSH2_FX_PERMISSION_DENIED:
		return "permission denied";
	case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
		return "no space left on device";
	case LIBSSH2_FX_QUOTA_EXCEEDED:
		return "quota exceeded";
	case LIBSSH2_FX_NOT_A_DIRECTORY:
		return "not a directory";
	case LIBSSH2_FX_WRITE_PROTECT:
		return "read-only file system";
	default:
		return "sftp failure";
	}
}

/* Reports a failed SFTP call: the SFTP status when there is one. */
static int sftp_fail(struct pbx_ssh *s, LIBSSH2_SFTP *sftp, struct pbx_err *err, const char *what,
		     const char *path)
{
	unsigned long code;
	int sess_err;
	pbx_ssh_lock(s);
	sess_err = libssh2_session_last_errno(s->sess);
	code = sftp ? libssh2_sftp_last_error(sftp) : 0;
	pbx_ssh_unlock(s);
	if (sess_err == LIBSSH2_ERROR_SFTP_PROTOCOL)
		return pbx_err_set(err, "%s %s on %s: %s", what, path, s->label,
				   sftp_strerror(code));
	return pbx_ssh_fail_rc(s, err, what, sess_err);
}

static int sftp_wait(struct pbx_ssh *s, struct pbx_err *err)
{
	if (pbx_ssh_wait(s, -1, 0, 1000) < 0)
		return pbx_err_set(err, "connection to %s lost", s->label);
	return 0;
}

static int sftp_begin(struct pbx_ssh *s, LIBSSH2_SFTP **out, struct pbx_err *err)
{
	int64_t deadline = pbx_ssh_now_ms() + s->timeout_ms;
	int eagain;
	pbx_ssh_enter(s);
	pbx_ssh_slot_take(s);
	pbx_ssh_req_begin(s);
	for (;;) {
		PBX_SSH_CALLP(s, *out, eagain, libssh2_sftp_init(s->sess));
		if (*out || !eagain)
			break;
		if (pbx_ssh_wait_until(s, deadline, "cannot start sftp", err) < 0)
			break;
	}
	pbx_ssh_req_end(s);
	if (*out)
		return 0;
	if (!eagain) /* else it timed out and err is set */
		pbx_ssh_fail(s, err, "cannot start sftp");
	pbx_ssh_slot_give(s);
	pbx_ssh_leave(s);
	return -1;
}

static void sftp_end(struct pbx_ssh *s, LIBSSH2_SFTP *sftp, LIBSSH2_SFTP_HANDLE *h)
{
	int64_t deadline = pbx_ssh_now_ms() + s->timeout_ms;
	int rc;
	while (h) {
		PBX_SSH_CALL(s, rc, libssh2_sftp_close_handle(h));
		if (rc != LIBSSH2_ERROR_EAGAIN || pbx_ssh_now_ms() > deadline ||
		    pbx_ssh_wait(s, -1, 0, 100) < 0)
			break;
	}
	for (;;) {
		PBX_SSH_CALL(s, rc, libssh2_sftp_shutdown(sftp));
		if (rc != LIBSSH2_ERROR_EAGAIN || pbx_ssh_now_ms() > deadline ||
		    pbx_ssh_wait(s, -1, 0, 100) < 0)
			break;
	}
	pbx_ssh_slot_give(s);
	pbx_ssh_leave(s);
}

static int sftp_open(struct pbx_ssh *s, LIBSSH2_SFTP *sftp, const char *path, unsigned long flags,
		     long mode, LIBSSH2_SFTP_HANDLE **out, struct pbx_err *err)
{
	int64_t deadline = pbx_ssh_now_ms() + s->timeout_ms;
	int eagain;
	for (;;) {
		PBX_SSH_CALLP(s, *out, eagain,
			      libssh2_sftp_open_ex(sftp, path, (unsigned)strlen(path), flags, mode,
						   LIBSSH2_SFTP_OPENFILE));
		if (*out)
			return 0;
		if (!eagain)
			return sftp_fail(s, sftp, err, "cannot open", path);
		if (pbx_ssh_wait_until(s, deadline, "sftp open", err) < 0)
			return -1;
	}
}

static int sftp_write_all(struct pbx_ssh *s, LIBSSH2_SFTP *sftp, LIBSSH2_SFTP_HANDLE *h,
			  const char *data, size_t len, const char *path, struct pbx_err *err)
{
	ssize_t n;
	while (len) {
		PBX_SSH_CALL(s, n, libssh2_sftp_write(h, data, len));
		if (n == LIBSSH2_ERROR_EAGAIN) {
			if (sftp_wait(s, err) < 0)
				return -1;
			continue;
		}
		if (n < 0)
			return sftp_fail(s, sftp, err, "cannot write", path);
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ------------------------------------------------------------ verification */

/* Remote SHA-256 of `path` via sha256sum into hex[65]. */
static int remote_sha256(struct pbx_ssh *s, const char *path, char hex[65], struct pbx_err *err)
{
	const char *argv[] = { "sha256sum", "--", path, NULL };
	struct pbx_buf out = PBX_BUF_INIT;
	int rc = pbx_ssh_run_ok(s, argv, &out, "sha256sum", err);
	if (rc == 0 && (out.len < 64 || strspn(out.buf, "0123456789abcdef") < 64))
		rc = pbx_err_set(err, "unexpected sha256sum output from %s", s->label);
	if (rc == 0) {
		memcpy(hex, out.buf, 64);
		hex[64] = '\0';
	}
	pbx_buf_release(&out);
	return rc;
}

static void remote_rm(struct pbx_ssh *s, const char *path)
{
	const char *argv[] = { "rm", "-f", "--", path, NULL };
	struct pbx_err ignored = PBX_ERR_INIT;
	pbx_ssh_run_ok(s, argv, NULL, "rm", &ignored);
}

/* Checks tmp against `want`, then chmods it and renames it to `remote`. */
static int remote_commit(struct pbx_ssh *s, const char *tmp, const char *remote, int mode,
			 const char *want, struct pbx_err *err)
{
	char got[65], modestr[16];
	const char *argv[] = { "sh",   "-c",    "chmod -- \"$1\" \"$2\" && mv -f -- \"$2\" \"$3\"",
			       "sh",   modestr, tmp,
			       remote, NULL };
	if (remote_sha256(s, tmp, got, err) < 0) {
		remote_rm(s, tmp);
		return -1;
	}
	if (strcmp(got, want) != 0) {
		remote_rm(s, tmp);
		return pbx_err_set(
			err, "checksum mismatch uploading %s to %s (local %.12s, remote %.12s)",
			remote, s->label, want, got);
	}
	snprintf(modestr, sizeof(modestr), "%o", mode > 0 ? (unsigned)(mode & 07777) : 0644u);
	if (pbx_ssh_run_ok(s, argv, NULL, "install uploaded file", err) < 0) {
		remote_rm(s, tmp);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ upload */

/* Upload source: a local fd or memory. */
struct sftp_src {
	int fd; /* or -1 */
	const char *mem;
	size_t memlen;
};

static int upload_body(struct pbx_ssh *s, LIBSSH2_SFTP *sftp, LIBSSH2_SFTP_HANDLE *h,
		       struct sftp_src *src, const char *tmp, struct pbx_err *err)
{
	char *chunk;
	ssize_t n;
	int rc = 0;
	if (src->fd < 0)
		return sftp_write_all(s, sftp, h, src->mem, src->memlen, tmp, err);
	chunk = xmalloc(SFTP_CHUNK);
	while (rc == 0 && (n = read(src->fd, chunk, SFTP_CHUNK)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = pbx_err_set(err, "cannot read upload source: %s", strerror(errno));
		else
			rc = sftp_write_all(s, sftp, h, chunk, (size_t)n, tmp, err);
	}
	free(chunk);
	return rc;
}

/* REMOTE.pbx-tmp.<16 random hex digits>: a name nobody on the node can
 * plant a link at in advance (the open is exclusive besides).  Caller
 * frees; NULL when no random bytes could be had. */
static char *upload_tmp_name(const char *remote, struct pbx_err *err)
{
	unsigned char r[8];
	char hex[17];
	size_t i;
	if (RAND_bytes(r, sizeof(r)) != 1) {
		pbx_err_set(err, "no random bytes for a temporary name");
		return NULL;
	}
	for (i = 0; i < sizeof(r); i++)
		snprintf(hex + 2 * i, 3, "%02x", r[i]);
	return xasprintf("%s" SFTP_TMP_SUFFIX ".%s", remote, hex);
}

/* ------------------------------------------------------------ OpenSSH */

/* transport: openssh (openssh.c) has no SFTP session: the file's bytes go
 * through `cat` on one exec each way, created exclusively (set -C) with
 * umask 077; the checksums and the rename are the SFTP path's. */
static int exec_upload(struct pbx_ssh *s, struct sftp_src *src, const char *tmp,
		       struct pbx_err *err)
{
	struct pbx_ssh_io io = { 0 };
	struct pbx_buf cmd = PBX_BUF_INIT;
	int st = -1, rc;
	pbx_buf_adds(&cmd, "umask 077 && set -C && cat > ");
	pbx_shell_quote(&cmd, tmp);
	io.in = src->fd < 0 ? src->mem : NULL;
	io.inlen = src->fd < 0 ? src->memlen : 0;
	io.in_fd = src->fd;
	rc = pbx_ssh_exec_io(s, cmd.buf, &io, &st, err);
	if (rc == 0 && st != 0)
		rc = pbx_err_set(err, "cannot write %s on %s (exit status %d)", tmp, s->label, st);
	pbx_buf_release(&cmd);
	return rc;
}

struct exec_sink_fd {
	int fd;
	const char *path;
};

static int exec_to_fd(void *ctx, int stream, const char *data, size_t len, struct pbx_err *err)
{
	struct exec_sink_fd *f = ctx;
	if (stream != 1)
		return 0;
	if (pbx_write_all(f->fd, data, len) < 0)
		return pbx_err_set(err, "cannot write %s: %s", f->path, strerror(errno));
	return 0;
}

static int exec_download(struct pbx_ssh *s, const char *remote, const char *tmp, int fd,
			 struct pbx_err *err)
{
	const char *mode_argv[] = {
		"sh", "-c",   "[ -f \"$1\" ] && [ ! -L \"$1\" ] && stat -c %a -- \"$1\"",
		"sh", remote, NULL
	};
	const char *cat_argv[] = { "cat", "--", remote, NULL };
	struct pbx_buf out = PBX_BUF_INIT, cmd = PBX_BUF_INIT;
	struct exec_sink_fd f = { fd, tmp };
	struct pbx_ssh_io io = { 0 };
	unsigned long mode;
	int st = -1, rc = pbx_ssh_run_ok(s, mode_argv, &out, "stat", err), i;
	if (rc < 0)
		return pbx_err_prefix(err, "%s on %s is not a regular file", remote, s->label);
	mode = strtoul(out.buf, NULL, 8) & 0777;
	pbx_buf_release(&out);
	for (i = 0; cat_argv[i]; i++) {
		if (i)
			pbx_buf_addc(&cmd, ' ');
		pbx_shell_quote(&cmd, cat_argv[i]);
	}
	io.in_fd = -1;
	io.sink = exec_to_fd;
	io.sink_ctx = &f;
	rc = pbx_ssh_exec_io(s, cmd.buf, &io, &st, err);
	pbx_buf_release(&cmd);
	if (rc == 0 && st != 0)
		rc = pbx_err_set(err, "cannot read %s on %s (exit status %d)", remote, s->label,
				 st);
	if (rc == 0 && (fsync(fd) < 0 || fchmod(fd, (mode_t)mode) < 0))
		rc = pbx_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
	return rc;
}

static int upload(struct pbx_ssh *s, struct sftp_src *src, const char *remote, int mode,
		  const char *local_hex, struct pbx_err *err)
{
	char *tmp;
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	int rc;
	if (pbx_ssh_check_remote_path(remote, err) < 0)
		return -1;
	tmp = upload_tmp_name(remote, err);
	if (!tmp)
		return -1;
	if (s->argv_base) {
		rc = exec_upload(s, src, tmp, err);
		if (rc == 0)
			rc = remote_commit(s, tmp, remote, mode, local_hex, err);
		else
			remote_rm(s, tmp);
		free(tmp);
		return rc;
	}
	if (sftp_begin(s, &sftp, err) < 0) {
		free(tmp);
		return -1;
	}
	rc = sftp_open(s, sftp, tmp, LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_EXCL, 0600,
		       &h, err);
	if (rc == 0)
		rc = upload_body(s, sftp, h, src, tmp, err);
	sftp_end(s, sftp, h);
	if (rc == 0)
		rc = remote_commit(s, tmp, remote, mode, local_hex, err);
	else if (h)
		remote_rm(s, tmp);
	free(tmp);
	return rc;
}

int pbx_ssh_put_file(struct pbx_ssh *s, const char *local, const char *remote, int mode,
		     struct pbx_err *err)
{
	struct sftp_src src = { -1, NULL, 0 };
	char hex[65];
	int rc;
	if (pbx_sha256_file(local, hex, err) < 0)
		return -1;
	src.fd = open(local, O_RDONLY | O_CLOEXEC);
	if (src.fd < 0)
		return pbx_err_set(err, "cannot open %s: %s", local, strerror(errno));
	rc = upload(s, &src, remote, mode, hex, err);
	close(src.fd);
	return rc;
}

int pbx_ssh_put_data(struct pbx_ssh *s, const void *data, size_t len, const char *remote, int mode,
		     struct pbx_err *err)
{
	struct sftp_src src = { -1, data, len };
	char hex[65];
	pbx_sha256_hex(data, len, hex);
	return upload(s, &src, remote, mode, hex, err);
}

/* ------------------------------------------------------------ download */

/* Remote permissions of an open handle; refuses anything but a regular file. */
static int download_mode(struct pbx_ssh *s, LIBSSH2_SFTP *sftp, LIBSSH2_SFTP_HANDLE *h,
			 const char *remote, mode_t *mode, struct pbx_err *err)
{
	LIBSSH2_SFTP_ATTRIBUTES a;
	int rc;
	for (;;) {
		PBX_SSH_CALL(s, rc, libssh2_sftp_fstat_ex(h, &a, 0));
		if (rc != LIBSSH2_ERROR_EAGAIN)
			break;
		if (sftp_wait(s, err) < 0)
			return -1;
	}
	if (rc < 0)
		return sftp_fail(s, sftp, err, "cannot stat", remote);
	*mode = 0644;
	if (!(a.flags & LIBSSH2_SFTP_ATTR_PERMISSIONS))
		return 0;
	if (!LIBSSH2_SFTP_S_ISREG(a.permissions))
		return pbx_err_set(err, "%s on %s is not a regular file", remote, s->label);
	*mode = (mode_t)(a.permissions & 0777);
	return 0;
}

static int download_body(struct pbx_ssh *s, LIBSSH2_SFTP *sftp, LIBSSH2_SFTP_HANDLE *h, int fd,
			 const char *remote, const char *tmp, struct pbx_err *err)
{
	char *chunk = xmalloc(SFTP_CHUNK);
	ssize_t n;
	int rc = 0;
	for (;;) {
		PBX_SSH_CALL(s, n, libssh2_sftp_read(h, chunk, SFTP_CHUNK));
		if (n == 0)
			break;
		if (n == LIBSSH2_ERROR_EAGAIN) {
			if ((rc = sftp_wait(s, err)) < 0)
				break;
			continue;
		}
		if (n < 0) {
			rc = sftp_fail(s, sftp, err, "cannot read", remote);
			break;
		}
		if (pbx_write_all(fd, chunk, (size_t)n) < 0) {
			rc = pbx_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
			break;
		}
	}
	free(chunk);
	return rc;
}

static int download(struct pbx_ssh *s, const char *remote, const char *tmp, int fd,
		    struct pbx_err *err)
{
	LIBSSH2_SFTP *sftp;
	LIBSSH2_SFTP_HANDLE *h = NULL;
	mode_t mode = 0644;
	int rc;
	if (sftp_begin(s, &sftp, err) < 0)
		return -1;
	rc = sftp_open(s, sftp, remote, LIBSSH2_FXF_READ, 0, &h, err);
	if (rc == 0)
		rc = download_mode(s, sftp, h, remote, &mode, err);
	if (rc == 0)
		rc = download_body(s, sftp, h, fd, remote, tmp, err);
	sftp_end(s, sftp, h);
	if (rc == 0 && (fsync(fd) < 0 || fchmod(fd, mode) < 0))
		rc = pbx_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
	return rc;
}

static int download_verify(struct pbx_ssh *s, const char *remote, const char *tmp,
			   struct pbx_err *err)
{
	char local_hex[65], remote_hex[65];
	if (pbx_sha256_file(tmp, local_hex, err) < 0 ||
	    remote_sha256(s, remote, remote_hex, err) < 0)
		return -1;
	if (strcmp(local_hex, remote_hex) != 0)
		return pbx_err_set(
			err, "checksum mismatch downloading %s from %s (local %.12s, remote %.12s)",
			remote, s->label, local_hex, remote_hex);
	return 0;
}

int pbx_ssh_get_file(struct pbx_ssh *s, const char *remote, const char *local, struct pbx_err *err)
{
	char *tmp;
	int fd, rc;
	if (pbx_ssh_check_remote_path(remote, err) < 0)
		return -1;
	fd = pbx_tmpfile_beside(local, &tmp, err);
	if (fd < 0)
		return -1;
	rc = s->argv_base ? exec_download(s, remote, tmp, fd, err)
			  : download(s, remote, tmp, fd, err);
	if (close(fd) < 0 && rc == 0)
		rc = pbx_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
	if (rc == 0)
		rc = download_verify(s, remote, tmp, err);
	if (rc == 0 && rename(tmp, local) < 0)
		rc = pbx_err_set(err, "cannot rename %s to %s: %s", tmp, local, strerror(errno));
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	return rc;
}
