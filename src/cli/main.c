/*
 * main.c - pbx's entry point: makes the process safe to run (fds 0-2 open,
 * SIGPIPE ignored), reads the global options, dispatches to a verb and
 * checks that stdout was written completely.
 */
#include "cli/cmd.h"
#include "cli/complete.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "config/config.h"
#include "http/http.h"
#include "ssh/ssh.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Makes sure descriptors 0-2 are open, so no socket or file we open later
 * ends up receiving our output by accident. */
static void main_checkfds(void)
{
	int fd;
	do {
		fd = open("/dev/null", O_RDWR);
	} while (fd >= 0 && fd <= 2);
	if (fd > 2)
		close(fd);
}

static char *main_default_config(const char *opt)
{
	const char *env = getenv("PBX_CONFIG");
	char *home;
	if (opt)
		return xstrdup(opt);
	if (env && *env)
		return xstrdup(env);
	home = getenv("PBX_HOME") && *getenv("PBX_HOME")
		       ? xstrdup(getenv("PBX_HOME"))
		       : xasprintf("%s/.pbx", getenv("HOME") ? getenv("HOME") : "");
	{
		char *path = xasprintf("%s/config.yaml", home);
		free(home);
		return path;
	}
}

/* Parses options before the verb; returns the index of the verb. */
static int main_global_opts(int argc, char **argv, bool *quiet, const char **config, int *done)
{
	int i;
	*done = -1;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
			*quiet = true;
		} else if ((!strcmp(argv[i], "-C") || !strcmp(argv[i], "--config")) &&
			   i + 1 < argc) {
			*config = argv[++i];
		} else if (!strcmp(argv[i], "--version")) {
			printf("pbx %s\n", PBX_VERSION);
			*done = 0;
			return i;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			pbx_help_overview();
			*done = 0;
			return i;
		} else {
			fprintf(stderr, "pbx: error: unknown option %s\n", argv[i]);
			*done = PBX_EXIT_USAGE;
			return i;
		}
	}
	return i;
}

/* Every verb that opens a cluster warns once when it has spent 80% of
 * its budget or more (docs/cost.md). */
static void main_budget_warning(struct pbx_cluster *c)
{
	static int warned;
	char *w;
	if (warned)
		return;
	w = pbx_cluster_budget_warning(c);
	if (w) {
		pbx_warning("%s", w);
		warned = 1;
	}
	free(w);
}

int main(int argc, char **argv)
{
	struct pbx_ctx ctx = { 0 };
	struct pbx_err err = PBX_ERR_INIT;
	const struct pbx_cmd *cmd;
	const char *config_opt = NULL;
	char *config_path;
	bool quiet = false;
	int first, done, rc;

	main_checkfds();
	signal(SIGPIPE, SIG_IGN);
	umask(077);
	if (argc > 1 && !strcmp(argv[1], "__complete")) { /* for completion/ */
		config_path = main_default_config(NULL);
		pbx_complete(config_path, argc - 2, argv + 2);
		free(config_path);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "__check")) { /* for docs.commands */
		ctx.check_only = true;
		argv[1] = argv[0];
		argc--;
		argv++;
	}
	first = main_global_opts(argc, argv, &quiet, &config_opt, &done);
	if (done >= 0)
		return done;
	if (first >= argc) {
		pbx_help_overview();
		return PBX_EXIT_USAGE;
	}
	pbx_output_init(quiet);
	pbx_cluster_set_open_hook(main_budget_warning);
	pbx_cluster_hooks_install();
	ctx.quiet = quiet;
	ctx.stdout_tty = isatty(STDOUT_FILENO);
	ctx.stderr_tty = isatty(STDERR_FILENO);
	ctx.color = pbx_output_color();
	config_path = main_default_config(config_opt);
	ctx.config_path = config_path;
	cmd = pbx_cmd_find(pbx_commands, argv[first], "command");
	if (!cmd) {
		free(config_path);
		return PBX_EXIT_USAGE;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (pbx_ssh_global_init(&err) < 0) {
		rc = pbx_report(&err);
		goto out;
	}
	rc = cmd->subcmds ? pbx_cmd_invoke_sub(&ctx, cmd, argc - first, argv + first)
			  : pbx_cmd_invoke(&ctx, cmd, argc - first, argv + first);
out:
	if (getenv("PBX_STATS") && *getenv("PBX_STATS")) {
		struct pbx_http_stats hs;
		pbx_http_stats(&hs);
		fprintf(stderr,
			"pbx: stats: %lu ssh round trips, %lu http calls (%lu retries, %lu failed), "
			"%lu cluster row reads\n",
			pbx_ssh_exec_count(), hs.calls, hs.retries, hs.failed,
			pbx_store_cluster_reads());
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "pbx: error: write failure on standard output\n");
		if (!rc)
			rc = PBX_EXIT_FAIL;
	}
	pbx_store_close(ctx.store);
	if (ctx.cfg)
		pbx_config_free(ctx.cfg);
	free(config_path);
	curl_global_cleanup();
	return rc;
}
