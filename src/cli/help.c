/*
 * help.c - `--help`, `pbx help VERB` and the man pages, all printed from
 * the same struct pbx_cmd strings (see cmd.h).  `pbx help --man VERB`
 * prints roff; man/pbx-VERB.1 are its committed output and a test checks
 * they match.
 */
#include "cli/cmd.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool pbx_wants_help(int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return true;
	}
	return false;
}

static void help_indent(const char *text, const char *indent)
{
	const char *p = text, *nl;
	while (*p) {
		nl = strchr(p, '\n');
		if (!nl)
			nl = p + strlen(p);
		if (nl > p)
			printf("%s%.*s\n", indent, (int)(nl - p), p);
		else
			putchar('\n');
		p = *nl ? nl + 1 : nl;
	}
}

/* The length of the command words that open a usage line: "pbx cluster
 * list" of "pbx cluster list [-a] ...", the words of a-z 0-9 and '-' that
 * do not start with '-'. */
static size_t usage_verb_len(const char *usage)
{
	const char *p = usage, *end = usage;
	while (*p) {
		size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-");
		if (!n || *p == '-' || (p[n] && p[n] != ' '))
			break;
		end = p + n;
		p += n;
		p += strspn(p, " ");
	}
	return (size_t)(end - usage);
}

int pbx_usage_error(const struct pbx_cmd *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "pbx: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s\n", cmd->usage);
	fprintf(stderr, "(see '%.*s --help')\n", (int)usage_verb_len(cmd->usage), cmd->usage);
	return PBX_EXIT_USAGE;
}

char *pbx_cmd_usage(const struct pbx_cmd *cmd)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	if (cmd->usage || !cmd->subcmds)
		return xstrdup(cmd->usage ? cmd->usage : "");
	for (i = 0; cmd->subcmds[i]; i++)
		if (!(cmd->subcmds[i]->flags & PBX_HIDE_USAGE))
			pbx_buf_addf(&b, "%s%s", b.len ? "\n" : "", cmd->subcmds[i]->usage);
	return pbx_buf_detach(&b, NULL);
}

static void help_options(const struct pbx_option *o)
{
	char shown[128];
	if (!o || !o->kind)
		return;
	printf("\noptions:\n");
	for (; o->kind; o++) {
		printf("  %s\n", pbx_opt_display(o, shown, sizeof(shown)));
		help_indent(o->help, "      ");
	}
}

void pbx_help_print(const struct pbx_cmd *cmd, const char *parent)
{
	char *usage = pbx_cmd_usage(cmd);
	const char *nl = strchr(usage, '\n');
	(void)parent;
	printf("usage: %.*s\n", nl ? (int)(nl - usage) : (int)strlen(usage), usage);
	if (nl)
		help_indent(nl + 1, "       ");
	free(usage);
	printf("\n%s\n", cmd->summary);
	if (cmd->description) {
		putchar('\n');
		help_indent(cmd->description, "");
	}
	if (cmd->subcmds) {
		size_t i;
		printf("\nsubcommands:\n");
		for (i = 0; cmd->subcmds[i]; i++)
			printf("  %-12s %s\n", cmd->subcmds[i]->name, cmd->subcmds[i]->summary);
		printf("\n'pbx %s SUBCOMMAND --help' describes each one.\n", cmd->name);
	}
	help_options(cmd->options);
	if (cmd->examples) {
		printf("\nexamples:\n");
		help_indent(cmd->examples, "  ");
	}
}

void pbx_help_overview(void)
{
	size_t i;
	printf("usage: pbx [-q] [-C CONFIG] VERB [ARGS...]\n"
	       "       pbx --version | --help | help VERB\n\n"
	       "push-button experiments: SLURM clusters on GCE, EC2 or this machine,\n"
	       "parameter sweeps as job arrays, results brought home.\n\nverbs:\n");
	for (i = 0; pbx_commands[i]; i++)
		printf("  %-10s %s\n", pbx_commands[i]->name, pbx_commands[i]->summary);
	printf("\nglobal options:\n"
	       "  -q, --quiet      no progress output\n"
	       "  -C, --config F   configuration file (default $PBX_HOME/config.yaml)\n"
	       "\nenvironment: PBX_HOME (default ~/.pbx), NO_COLOR.\n"
	       "exit status: 0 ok, 1 failure, 2 usage or configuration error, 3 not found,\n"
	       "4 refused for safety (host key changed, unsafe file permissions).\n");
}

/* ------------------------------------------------------------- man pages */

static void man_text(const char *text)
{
	const char *p = text;
	int bol = 1;
	for (; *p; p++) {
		if (bol && (*p == '.' || *p == '\''))
			fputs("\\&", stdout);
		bol = 0;
		if (*p == '\\')
			fputs("\\e", stdout);
		else if (*p == '-')
			fputs("\\-", stdout);
		else if (*p == '\n') {
			putchar('\n');
			bol = 1;
		} else
			putchar(*p);
	}
}

static void man_paragraphs(const char *text)
{
	const char *p = text, *nl;
	int para = 1;
	while (*p) {
		nl = strchr(p, '\n');
		if (!nl)
			nl = p + strlen(p);
		if (nl == p) {
			para = 1;
		} else {
			char line[1024];
			if (para)
				printf(".PP\n");
			para = 0;
			snprintf(line, sizeof(line), "%.*s", (int)(nl - p), p);
			if (line[0] == ' ')
				printf(".br\n");
			man_text(line);
			putchar('\n');
		}
		p = *nl ? nl + 1 : nl;
	}
}

static void man_synopsis(const char *usage)
{
	printf(".nf\n");
	man_text(usage);
	printf("\n.fi\n");
}

static void man_options(const struct pbx_option *o)
{
	char shown[128];
	for (; o && o->kind; o++) {
		printf(".TP\n.B ");
		man_text(pbx_opt_display(o, shown, sizeof(shown)));
		putchar('\n');
		man_text(o->help);
		putchar('\n');
	}
}

static void man_upper(const char *s)
{
	for (; *s; s++)
		putchar(*s >= 'a' && *s <= 'z' ? *s - 32 : *s);
}

static void man_common_tail(void)
{
	printf(".SH EXIT STATUS\n0 success; 1 the operation failed; 2 usage or configuration error;\n"
	       "3 no such cluster or object; 4 refused for safety (changed host key,\n"
	       "unsafe file permissions).\n");
	printf(".SH ENVIRONMENT\n.TP\n.B PBX_HOME\nwhere pbx keeps config.yaml, pbx.db and cluster files "
	       "(default ~/.pbx); refused (exit 4) when group or others can write it\n.TP\n.B PBX_CONFIG\nthe configuration file (default "
	       "$PBX_HOME/config.yaml)\n.TP\n.B NO_COLOR\nif set, no colour in output\n");
}

void pbx_man_overview(void)
{
	size_t i;
	printf(".\\\" Generated by 'pbx help --man' from src/cli/help.c; do not edit.\n");
	printf(".TH PBX 1 \"\" \"pbx %s\" \"pbx manual\"\n", PBX_VERSION);
	printf(".SH NAME\npbx \\- push\\-button experiments on SLURM clusters\n");
	printf(".SH SYNOPSIS\n.nf\npbx [\\-q] [\\-C CONFIG] VERB [ARGS...]\n"
	       "pbx \\-\\-version | \\-\\-help | help VERB\n.fi\n");
	printf(".SH DESCRIPTION\npbx builds GPU SLURM clusters on Compute Engine, EC2 or this machine,\n"
	       "submits parameter sweeps to them as job arrays, tracks every job in a local\n"
	       "SQLite store and brings the results home.  Every verb has \\-\\-help and a\n"
	       "page of its own.\n.SH COMMANDS\n");
	for (i = 0; pbx_commands[i]; i++) {
		printf(".TP\n.BR pbx\\-%s (1)\n", pbx_commands[i]->name);
		man_text(pbx_commands[i]->summary);
		putchar('\n');
	}
	printf(".SH GLOBAL OPTIONS\n.TP\n.B \\-q, \\-\\-quiet\nno progress output\n"
	       ".TP\n.B \\-C, \\-\\-config FILE\nthe configuration file\n"
	       ".TP\n.B \\-\\-version\nprint the version\n");
	printf(".SH OUTPUT\nResults go to standard output, progress and diagnostics to standard\n"
	       "error.  Progress is a live per\\-node display on a terminal, one plain line per\n"
	       "change otherwise, and nothing with \\-q.  Verbs that list or show things take\n"
	       "\\-\\-json.\n");
	man_common_tail();
	printf(".SH FILES\n.TP\n.B $PBX_HOME/config.yaml\ncluster templates and cloud settings\n"
	       ".TP\n.B $PBX_HOME/pbx.db\nthe SQLite store\n"
	       ".TP\n.B $PBX_HOME/clusters/NAME\nper\\-cluster files (keys, node bodies of local clusters)\n");
	printf(".SH SEE ALSO\n.BR pbx\\-config (5),\n.BR pbx\\-experiment (5)\n");
}

/* SEE ALSO: pbx(1) and the pages of the verbs a reader of cmd's page
 * goes to next (the experiment cycle's neighbours). */
static void man_see_also(const struct pbx_cmd *cmd)
{
	static const char *const related[][2] = {
		{ "cluster", "config image parrun" },
		{ "image", "cluster config" },
		{ "config", "cluster" },
		{ "parrun", "run state log cancel rerun harvest report" },
		{ "run", "parrun state log" },
		{ "state", "ls log rerun cancel harvest" },
		{ "ls", "state forget" },
		{ "log", "state rerun" },
		{ "cancel", "state rerun" },
		{ "rerun", "state parrun log" },
		{ "harvest", "report state forget publish" },
		{ "report", "harvest state pull" },
		{ "forget", "ls harvest" },
		{ "publish", "pull report harvest" },
		{ "pull", "publish report" },
	};
	size_t i;
	printf(".SH SEE ALSO\n.BR pbx (1)");
	for (i = 0; i < sizeof(related) / sizeof(related[0]); i++) {
		const char *p = related[i][1];
		if (strcmp(related[i][0], cmd->name) != 0)
			continue;
		while (*p) {
			size_t n = strcspn(p, " ");
			printf(",\n.BR pbx\\-%.*s (1)", (int)n, p);
			p += n + (p[n] == ' ');
		}
	}
	if (!strcmp(cmd->name, "parrun") || !strcmp(cmd->name, "run"))
		printf(",\n.BR pbx\\-experiment (5)");
	if (!strcmp(cmd->name, "cluster") || !strcmp(cmd->name, "config") ||
	    !strcmp(cmd->name, "image"))
		printf(",\n.BR pbx\\-config (5)");
	printf("\n");
}

void pbx_man_print(const struct pbx_cmd *cmd)
{
	char *usage;
	size_t i;
	printf(".\\\" Generated by 'pbx help --man %s' from src/cli/cmd-%s.c; do not edit.\n",
	       cmd->name, cmd->name);
	printf(".TH PBX\\-");
	man_upper(cmd->name);
	printf(" 1 \"\" \"pbx %s\" \"pbx manual\"\n", PBX_VERSION);
	printf(".SH NAME\npbx\\-%s \\- ", cmd->name);
	man_text(cmd->summary);
	printf("\n.SH SYNOPSIS\n");
	usage = pbx_cmd_usage(cmd);
	man_synopsis(usage);
	free(usage);
	if (cmd->description) {
		printf(".SH DESCRIPTION\n");
		man_paragraphs(cmd->description);
	}
	if (cmd->options && cmd->options->kind) {
		printf(".SH OPTIONS\n");
		man_options(cmd->options);
	}
	for (i = 0; cmd->subcmds && cmd->subcmds[i]; i++) {
		const struct pbx_cmd *s = cmd->subcmds[i];
		if (i == 0)
			printf(".SH SUBCOMMANDS\n");
		printf(".SS %s\n", s->name);
		man_synopsis(s->usage);
		man_paragraphs(s->summary);
		if (s->description)
			man_paragraphs(s->description);
		man_options(s->options);
	}
	if (cmd->examples) {
		printf(".SH EXAMPLES\n");
		man_synopsis(cmd->examples);
	}
	man_common_tail();
	man_see_also(cmd);
}
