/*
 * cmd-cluster-registry.c - `pbx cluster registry-login|registry-logout`:
 * credentials for private registry images (environment: container:
 * docker://REGISTRY/NAME:TAG), given to the cluster's head for the task
 * user that pulls them (src/jobs/registry.c; docs/environments.md,
 * "Credentials").  The password comes from stdin (--password-stdin) or a
 * prompt that does not echo, and goes to the head on the SSH channel's
 * stdin: never on a command line, in the store, a log or a message.
 */
#define _GNU_SOURCE /* explicit_bzero */
#include "cli/cluster_cli.h"
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "store/store.h"
#include "util/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

/* The longest password taken (a service account's JSON key is 2-3 KiB). */
#define PASSWORD_MAX 65536

struct login_opts {
	const char *username;
	int password_stdin;
};

static const struct pbx_option login_opts[] = {
	PBX_OPT_STRING('u', "username", "USER", struct login_opts, username,
		       "the registry's user name (required)"),
	PBX_OPT_FLAG(0, "password-stdin", struct login_opts, password_stdin,
		     "read the password (or token) from stdin, to its end; one\n"
		     "trailing newline is dropped"),
	PBX_OPT_END,
};

static int cmd_registry_login_exec(struct pbx_ctx *ctx, int argc, char **argv);
static int cmd_registry_logout_exec(struct pbx_ctx *ctx, int argc, char **argv);

const struct pbx_cmd pbx_cmd_cluster_registry_login = {
	.name = "registry-login",
	.summary = "give the cluster credentials for a private container registry",
	.usage = "pbx cluster registry-login -u USER [--password-stdin] NAME REGISTRY",
	.description =
		"An experiment whose environment is a registry image (container:\n"
		"docker://REGISTRY/NAME:TAG) is pulled on the cluster's head by the user\n"
		"tasks run as.  This logs that user in to REGISTRY (HOST[:PORT], as the\n"
		"image's reference names it; docker.io for Docker Hub) with skopeo login\n"
		"on the head; the auth file is on the head's own disk (never the shared\n"
		"one), and only that user may read it.  The password is read from stdin\n"
		"with --password-stdin, else asked for on the terminal without echo; it\n"
		"goes to the head on the SSH channel's stdin, never on a command line, and\n"
		"pbx keeps it nowhere: not in its store, its logs or its messages.  A wrong\n"
		"password fails with the registry's answer.  Logging in again replaces\n"
		"the credentials (a token that expires: log in again before a parrun).\n"
		"Not on a cluster of cloud ssh: there pulls run as you, with skopeo's own\n"
		"auth file (skopeo login on the login node).",
	.examples = "pbx cluster registry-login -u alice mycluster ghcr.io\n"
		    "gcloud auth print-access-token | pbx cluster registry-login "
		    "-u oauth2accesstoken --password-stdin mycluster us-docker.pkg.dev\n"
		    "aws ecr get-login-password | pbx cluster registry-login -u AWS "
		    "--password-stdin mycluster 123456789012.dkr.ecr.us-east-1.amazonaws.com",
	.args = "CLUSTER REGISTRY",
	.options = login_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE | PBX_NEED_CLUSTER,
	.min_args = 2,
	.max_args = 2,
	.exec = cmd_registry_login_exec,
};

const struct pbx_cmd pbx_cmd_cluster_registry_logout = {
	.name = "registry-logout",
	.summary = "remove the cluster's credentials for a container registry",
	.usage = "pbx cluster registry-logout NAME REGISTRY",
	.description = "Removes what 'pbx cluster registry-login' gave the head for REGISTRY\n"
		       "(skopeo logout; the auth file goes with its last registry).  Images\n"
		       "pulled already stay; a pull from REGISTRY then fails, saying that it\n"
		       "wants credentials.  Not being logged in is not an error.",
	.examples = "pbx cluster registry-logout mycluster ghcr.io",
	.args = "CLUSTER REGISTRY",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE | PBX_NEED_CLUSTER,
	.min_args = 2,
	.max_args = 2,
	.exec = cmd_registry_logout_exec,
};

/* 0, or the usage error for a REGISTRY that is not HOST[:PORT] */
static int registry_arg(const struct pbx_cmd *cmd, const char *registry)
{
	if (pbx_exp_registry_ok(registry))
		return 0;
	return pbx_usage_error(cmd,
			       "REGISTRY '%s': want HOST[:PORT], as an image's reference names it "
			       "(docker.io, ghcr.io, us-docker.pkg.dev, ...)",
			       registry);
}

/* A user name HTTP Basic can carry: 1-256 bytes, printable, no ':'. */
static int username_ok(const char *u)
{
	size_t n = strlen(u), i;
	if (n == 0 || n > 256)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)u[i] < 0x21 || (unsigned char)u[i] == 0x7f || u[i] == ':')
			return 0;
	return 1;
}

/* Drops one line end (\n or \r\n) from the n bytes of pw; the new n. */
static size_t chomp(const char *pw, size_t n)
{
	if (n && pw[n - 1] == '\n')
		n--;
	if (n && pw[n - 1] == '\r')
		n--;
	return n;
}

/* Reads fd into pw (PASSWORD_MAX bytes) until its end, or until a newline
 * when line is set; the bytes read, or -1 with errno (E2BIG: too long). */
static ssize_t read_secret(int fd, char *pw, int line)
{
	size_t n = 0;
	ssize_t r;
	while (n < PASSWORD_MAX && (r = read(fd, pw + n, PASSWORD_MAX - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		n += (size_t)r;
		if (line && pw[n - 1] == '\n')
			return (ssize_t)n;
	}
	if (n == PASSWORD_MAX) {
		errno = E2BIG;
		return -1;
	}
	return (ssize_t)n;
}

/* The terminal's settings while the prompt has echo off, for a signal. */
static struct termios tty_saved;

static void tty_restore(int sig)
{
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Asks for the password on the terminal (stdin), not echoed; the bytes
 * read into pw, or -1 with errno. */
static ssize_t prompt_secret(const char *user, const char *registry, char *pw)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP };
	struct sigaction sa, old[sizeof(sigs) / sizeof(sigs[0])];
	struct termios t;
	ssize_t n;
	size_t i;
	int saved_errno;
	if (tcgetattr(STDIN_FILENO, &tty_saved) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = tty_restore;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, &old[i]);
	t = tty_saved;
	t.c_lflag &= ~(tcflag_t)ECHO;
	t.c_lflag |= ECHONL;
	n = -1;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0) { /* echo off, then the prompt */
		fprintf(stderr, "Password for %s at %s: ", user, registry);
		fflush(stderr);
		n = read_secret(STDIN_FILENO, pw, 1);
	}
	saved_errno = errno;
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &old[i], NULL);
	errno = saved_errno;
	return n;
}

/* The password, from stdin or the terminal, into pw: its length, or -1
 * after printing why there is none. */
static ssize_t login_password(const struct login_opts *o, const char *registry, char *pw)
{
	ssize_t n;
	if (!o->password_stdin && !isatty(STDIN_FILENO)) {
		pbx_error("no password: stdin is not a terminal; pipe it with --password-stdin");
		return -1;
	}
	n = o->password_stdin ? read_secret(STDIN_FILENO, pw, 0)
			      : prompt_secret(o->username, registry, pw);
	if (n < 0) {
		pbx_error("cannot read the password: %s",
			  errno == E2BIG ? "longer than 64 KiB" : strerror(errno));
		return -1;
	}
	n = (ssize_t)chomp(pw, (size_t)n);
	if (n == 0)
		pbx_error("the password is empty");
	return n ? n : -1;
}

static int cmd_registry_login_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct login_opts o = { 0 };
	const char *name, *registry;
	char *pw, *authfile = NULL;
	ssize_t n;
	int first, rc;
	if ((rc = pbx_opts_parse(&pbx_cmd_cluster_registry_login, argc, argv, &o, &first)))
		return rc;
	name = argv[first];
	registry = argv[first + 1];
	if ((rc = pbx_cli_cluster_not_users(ctx, name, "log in to a registry")))
		return rc;
	if ((rc = registry_arg(&pbx_cmd_cluster_registry_login, registry)))
		return rc;
	if (!o.username || !username_ok(o.username))
		return pbx_usage_error(&pbx_cmd_cluster_registry_login,
				       "-u USER is needed: 1-256 printable characters, no ':'");
	pw = xmalloc(PASSWORD_MAX);
	n = login_password(&o, registry, pw);
	rc = n < 0 ? -1
		   : pbx_jobs_registry_login(ctx->cluster, registry, o.username, pw, (size_t)n,
					     &authfile, &err);
	explicit_bzero(pw, PASSWORD_MAX);
	free(pw);
	if (n < 0)
		return PBX_EXIT_USAGE;
	if (rc < 0) {
		pbx_err_prefix(&err, "cluster %s: registry-login", name);
		return pbx_report(&err);
	}
	pbx_store_event(ctx->store, ctx->cluster->row.id, "registry.login", "%s as %s", registry,
			o.username);
	pbx_info("cluster %s: logged in to %s as %s (%s on the head, the task user's only)", name,
		 registry, o.username, authfile);
	free(authfile);
	return 0;
}

static int cmd_registry_logout_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *name = argv[1], *registry = argv[2];
	int rc;
	(void)argc;
	if ((rc = pbx_cli_cluster_not_users(ctx, name, "log out of a registry")))
		return rc;
	if ((rc = registry_arg(&pbx_cmd_cluster_registry_logout, registry)))
		return rc;
	rc = pbx_jobs_registry_logout(ctx->cluster, registry, &err);
	if (rc < 0) {
		pbx_err_prefix(&err, "cluster %s: registry-logout", name);
		return pbx_report(&err);
	}
	if (rc == 0) {
		pbx_info("cluster %s: not logged in to %s", name, registry);
		return 0;
	}
	pbx_store_event(ctx->store, ctx->cluster->row.id, "registry.logout", "%s", registry);
	pbx_info("cluster %s: logged out of %s", name, registry);
	return 0;
}
