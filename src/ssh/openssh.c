/*
 * openssh.c - the OpenSSH transport (a cloud: ssh cluster with
 * `transport: openssh`; docs/ssh-clusters.md): pbx logs in with the
 * user's own `ssh`, so ~/.ssh/config (HostName, User, Port, IdentityFile,
 * ProxyJump), the agent, known_hosts and keyboard-interactive prompts (a
 * password, a second factor) work as they do for the user, and it keeps
 * ONE authenticated connection per destination open for a while
 * (ControlMaster, ControlPersist): the user answers the prompts once, and
 * every later verb's commands ride on that connection without asking.
 *
 * The control sockets live in $PBX_HOME/ssh (mode 0700), named by ssh
 * (%C: a hash of the local host, the destination, its port and user); a
 * PBX_HOME too deep for a Unix socket's 108 bytes uses
 * /tmp/pbx-ssh-UID (0700, this user's) instead.  The connection is
 * started in the foreground (ssh -f: it goes to the background once
 * logged in), so its prompts reach the terminal, or SSH_ASKPASS.  Each
 * command then is `ssh -o ControlMaster=no -o BatchMode=yes ... DEST --
 * CMDLINE` (exec.c), which never prompts.
 */
#define _GNU_SOURCE /* mkostemp */
#include "ssh/ssh_internal.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define OPENSSH_PERSIST "4h" /* how long the control connection outlives its last use */
#define OPENSSH_SUN_MAX 100  /* bytes of a control socket's path we allow */
#define OPENSSH_HASH    40   /* %C: SHA-1 in hex */

/* The directory of the control sockets; caller frees; NULL (err set) when
 * none can be had. */
static char *openssh_dir(struct pbx_err *err)
{
	char *dir = pbx_home_path("ssh");
	struct stat st;
	if (strlen(dir) + 1 + OPENSSH_HASH > OPENSSH_SUN_MAX) {
		free(dir);
		dir = xasprintf("/tmp/pbx-ssh-%u", (unsigned)getuid());
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		pbx_err_set(err, "cannot make %s: %s", dir, strerror(errno));
		free(dir);
		return NULL;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
	    (st.st_mode & 077)) {
		pbx_err_setc(err, PBX_EXIT_SECURITY,
			     "%s must be a directory of yours that nobody else can use "
			     "(mode 0700): it holds the SSH control sockets",
			     dir);
		free(dir);
		return NULL;
	}
	return dir;
}

static void openssh_add(struct pbx_ssh *s, const char *word)
{
	s->argv_base = xreallocarray(s->argv_base, s->nargv_base + 2, sizeof(char *));
	s->argv_base[s->nargv_base++] = xstrdup(word);
	s->argv_base[s->nargv_base] = NULL;
}

/* ssh and the options every call shares: the control path, the user's
 * login name, port and key where pbx's configuration names them (else
 * ssh_config's). */
static void openssh_base(struct pbx_ssh *s, const struct pbx_ssh_target *t, const char *dir)
{
	char *opt = xasprintf("ControlPath=%s/%%C", dir), port[16];
	openssh_add(s, "ssh");
	openssh_add(s, "-o");
	openssh_add(s, opt);
	free(opt);
	openssh_add(s, "-o");
	openssh_add(s, "ServerAliveInterval=60");
	if (t->user && *t->user) {
		openssh_add(s, "-l");
		openssh_add(s, t->user);
	}
	if (t->port > 0 && t->port != 22) { /* 22: the default, ssh_config's Port may say more */
		snprintf(port, sizeof(port), "%d", t->port);
		openssh_add(s, "-p");
		openssh_add(s, port);
	}
	if (t->key_path && *t->key_path) {
		openssh_add(s, "-i");
		openssh_add(s, t->key_path);
		openssh_add(s, "-o");
		openssh_add(s, "IdentitiesOnly=yes");
	}
}

/* Runs argv (NULL-terminated) with stdin and stdout on /dev/null and
 * stderr into errtext (its first 4 KiB); returns the exit status, or -1. */
static int openssh_run(const char *const *argv, struct pbx_buf *errtext)
{
	char path[] = "/tmp/pbx-ssh-err.XXXXXX", chunk[4096];
	int efd = mkostemp(path, O_CLOEXEC), st = 0;
	ssize_t n;
	pid_t pid;
	if (efd < 0)
		return -1;
	unlink(path);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(efd, 2) < 0)
			_exit(127);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	n = pread(efd, chunk, sizeof(chunk) - 1, 0);
	if (n > 0)
		pbx_buf_add(errtext, chunk, (size_t)n);
	pbx_buf_rtrim(errtext);
	close(efd);
	if (pid < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* base + extra words + the destination, NULL-terminated; caller frees the
 * array alone. */
static const char **openssh_cmd(const struct pbx_ssh *s, const char *const *extra, const char *dest)
{
	size_t n = 0, i, k = 0;
	const char **v;
	while (extra[n])
		n++;
	v = xcalloc(s->nargv_base + n + 2, sizeof(*v));
	for (i = 0; i < s->nargv_base; i++)
		v[k++] = s->argv_base[i];
	for (i = 0; i < n; i++)
		v[k++] = extra[i];
	v[k++] = dest;
	return v;
}

/* Starts the control connection unless one runs: ssh -O check, else ssh -M
 * -f -N in the foreground (its prompts on the terminal or SSH_ASKPASS). */
static int openssh_master(struct pbx_ssh *s, const char *dest, struct pbx_err *err)
{
	static const char *const check[] = { "-O", "check", NULL };
	static const char *const start[] = { "-M",
					     "-f",
					     "-N",
					     "-o",
					     "ControlPersist=" OPENSSH_PERSIST,
					     "-o",
					     "ConnectTimeout=20",
					     NULL };
	struct pbx_buf errtext = PBX_BUF_INIT;
	const char **v = openssh_cmd(s, check, dest);
	int rc = openssh_run(v, &errtext);
	free(v);
	if (rc == 0) {
		pbx_buf_release(&errtext);
		return 0;
	}
	pbx_buf_reset(&errtext);
	v = openssh_cmd(s, start, dest);
	rc = openssh_run(v, &errtext);
	free(v);
	if (rc != 0) {
		const char *last = strrchr(errtext.buf, '\n');
		pbx_err_set(err,
			    "could not log in to %s with ssh (%s%s): the prompts of a password "
			    "or a second factor need a terminal, or SSH_ASKPASS",
			    dest,
			    rc < 0        ? "cannot run ssh"
			    : errtext.len ? ""
					  : "exit status",
			    rc < 0        ? ""
			    : errtext.len ? (last ? last + 1 : errtext.buf)
					  : "");
		if (rc > 0 && !errtext.len) {
			size_t len = strlen(err->msg);
			snprintf(err->msg + len, sizeof(err->msg) - len, " %d", rc);
		}
		pbx_buf_release(&errtext);
		return -1;
	}
	pbx_buf_release(&errtext);
	return 0;
}

int pbx_ssh_openssh_connect(const struct pbx_ssh_target *t, struct pbx_ssh **out,
			    struct pbx_err *err)
{
	struct pbx_ssh *s;
	char *dir;
	*out = NULL;
	if (!t->host || !*t->host || t->host[0] == '-')
		return pbx_err_setc(err, PBX_EXIT_USAGE, "ssh target needs a host");
	dir = openssh_dir(err);
	if (!dir)
		return -1;
	s = xcalloc(1, sizeof(*s));
	s->sock = -1;
	s->timeout_ms = t->timeout_ms > 0 ? t->timeout_ms : PBX_SSH_DEFAULT_TIMEOUT_MS;
	s->label = t->user && *t->user ? xasprintf("%s@%s", t->user, t->host) : xstrdup(t->host);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->req_lock, NULL);
	pthread_cond_init(&s->slot_cv, NULL);
	openssh_base(s, t, dir);
	free(dir);
	s->dest = xstrdup(t->host);
	if (openssh_master(s, s->dest, err) < 0) {
		pbx_ssh_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

int pbx_ssh_openssh_disconnect(const struct pbx_ssh_target *t, struct pbx_err *err)
{
	static const char *const check[] = { "-O", "check", NULL };
	static const char *const stop[] = { "-O", "exit", NULL };
	struct pbx_buf errtext = PBX_BUF_INIT;
	struct pbx_ssh s;
	const char **v;
	char *dir;
	int rc;
	if (!t->host || !*t->host || t->host[0] == '-')
		return pbx_err_setc(err, PBX_EXIT_USAGE, "ssh target needs a host");
	if (!(dir = openssh_dir(err)))
		return -1;
	memset(&s, 0, sizeof(s));
	openssh_base(&s, t, dir);
	free(dir);
	v = openssh_cmd(&s, check, t->host);
	rc = openssh_run(v, &errtext) == 0; /* 1: a connection is open */
	free(v);
	if (rc) {
		pbx_buf_reset(&errtext);
		v = openssh_cmd(&s, stop, t->host);
		if (openssh_run(v, &errtext) != 0)
			rc = pbx_err_set(err, "ssh -O exit on %s failed: %s", t->host,
					 errtext.len ? errtext.buf : "no reason given");
		free(v);
	}
	pbx_buf_release(&errtext);
	for (size_t i = 0; i < s.nargv_base; i++)
		free(s.argv_base[i]);
	free(s.argv_base);
	return rc;
}

const char **pbx_ssh_openssh_argv(const struct pbx_ssh *s, const char *cmdline)
{
	static const char *const extra[] = { "-o", "ControlMaster=no", "-o", "BatchMode=yes", "-T",
					     NULL };
	const char **v = openssh_cmd(s, extra, s->dest), **w;
	size_t n = 0;
	while (v[n])
		n++;
	w = xreallocarray(v, n + 2, sizeof(*v));
	w[n++] = cmdline; /* exec.c's marked command: never starts with '-' */
	w[n] = NULL;
	return w;
}

const char **pbx_ssh_interactive_argv(const struct pbx_ssh *s, const char *command)
{
	static const char *const extra[] = { "-o", "ControlMaster=no", NULL };
	const char **v, **w;
	size_t n = 0;
	if (!s || !s->argv_base)
		return NULL;
	v = openssh_cmd(s, extra, s->dest);
	while (v[n])
		n++;
	w = xreallocarray(v, n + 3, sizeof(*v));
	if (command) {
		w[n++] = "--";
		w[n++] = command;
	}
	w[n] = NULL;
	return w;
}

int pbx_ssh_is_openssh(const struct pbx_ssh *s)
{
	return s && s->argv_base;
}
