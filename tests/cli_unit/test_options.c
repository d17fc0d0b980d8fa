/*
 * test_options.c - unit tests of src/cli/options.c with a made-up verb and
 * option table: pbx_opts_parse stores FLAG, STRING (short and long, =VALUE,
 * attached, the last one given), OPTIONAL (=VALUE given and not), LIST
 * (repeated, in order), long-only and short-only options, combined short
 * flags (-aj, -ajt VALUE), unique long prefixes; "--" ends the options;
 * positional arguments come last in argv in their order; an unknown option,
 * an ambiguous prefix, a value given to a flag and a missing value are the
 * usage error (PBX_EXIT_USAGE, the usage line on stderr); a parse after a
 * failed one starts afresh.  pbx_opt_display's exact strings.
 */
#include "common/tap.h"
#include "cli/cmd.h"
#include "cli/options.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct demo_opts {
	int all, json, dry_run, verbose;
	const char *template, *autostop, *watch, *node;
	struct pbx_opt_list label, env;
};

static const struct pbx_option demo_options[] = {
	PBX_OPT_FLAG('a', "all", struct demo_opts, all, "every cluster"),
	PBX_OPT_FLAG('j', "json", struct demo_opts, json, "print JSON"),
	PBX_OPT_STRING('t', "template", "TEMPLATE", struct demo_opts, template, "the template"),
	PBX_OPT_STRING(0, "autostop", "DURATION", struct demo_opts, autostop, "stop when idle"),
	PBX_OPT_OPTIONAL('w', "watch", "SECONDS", struct demo_opts, watch, "again and again"),
	PBX_OPT_LIST('l', "label", "LABEL", struct demo_opts, label, "a label\n(repeatable)"),
	PBX_OPT_FLAG(0, "dry-run", struct demo_opts, dry_run, "only show"),
	PBX_OPT_LIST(0, "env", "VAR", struct demo_opts, env, "pass VAR"),
	PBX_OPT_FLAG('v', NULL, struct demo_opts, verbose, "short only"),
	PBX_OPT_STRING('n', NULL, "NODE", struct demo_opts, node, "short only, a value"),
	PBX_OPT_DOC("KEY=VALUE", "set a parameter (read by the verb itself)"),
	PBX_OPT_END,
};

static const struct pbx_cmd demo_cmd = {
	.name = "demo",
	.summary = "a verb made up for the tests",
	.usage = "pbx demo [options] NAME...",
	.description = "Nothing.",
	.options = demo_options,
};

#define MAXARGS 32

/* Parses a NULL-terminated list of words (argv[0] "demo" added) into *o,
 * zeroed first.  stderr goes to *err_text (malloc'd) when err_text is not
 * NULL.  Returns the code; *first as pbx_opts_parse sets it, and argv the
 * (permuted) copy. */
static int parse(struct demo_opts *o, int *first, char **argv, int *argc, char **err_text,
		 const char *const *words)
{
	int rc, saved = -1;
	FILE *tmp = NULL;
	*argc = 0;
	argv[(*argc)++] = "demo";
	for (; *words; words++) {
		if (*argc >= MAXARGS - 1)
			REQUIREF(0, "at most %d words", MAXARGS - 2);
		argv[(*argc)++] = (char *)*words;
	}
	argv[*argc] = NULL;
	memset(o, 0, sizeof(*o));
	*first = -1;
	fflush(stderr);
	tmp = tmpfile();
	saved = dup(2);
	if (!tmp || saved < 0) /* a check only when it fails: not one per parse */
		REQUIREF(0, "a temporary file for stderr (%p) and a copy of fd 2 (%d)", (void *)tmp,
			 saved);
	dup2(fileno(tmp), 2);
	rc = pbx_opts_parse(&demo_cmd, *argc, argv, o, first);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	if (err_text) {
		long len;
		fseek(tmp, 0, SEEK_END);
		len = ftell(tmp);
		rewind(tmp);
		*err_text = calloc(1, len > 0 ? (size_t)len + 1 : 1);
		if (!*err_text)
			abort();
		if (len > 0 && fread(*err_text, 1, (size_t)len, tmp) != (size_t)len)
			(*err_text)[0] = '\0';
	}
	fclose(tmp);
	return rc;
}

/* The positional arguments argv[first..argc) joined by '|'. */
static const char *positionals(char **argv, int argc, int first)
{
	static char out[1024];
	int i;
	out[0] = '\0';
	if (first < 1 || first > argc)
		return "(bad first)";
	for (i = first; i < argc; i++) {
		if (i > first)
			strncat(out, "|", sizeof(out) - strlen(out) - 1);
		strncat(out, argv[i], sizeof(out) - strlen(out) - 1);
	}
	return out;
}

static const char *list_join(const struct pbx_opt_list *l)
{
	static char out[1024];
	size_t i;
	out[0] = '\0';
	for (i = 0; i < l->n; i++) {
		if (i)
			strncat(out, "|", sizeof(out) - strlen(out) - 1);
		strncat(out, l->v[i], sizeof(out) - strlen(out) - 1);
	}
	return out;
}

static void release(struct demo_opts *o)
{
	pbx_opt_list_free(&o->label);
	pbx_opt_list_free(&o->env);
}

static void all_kinds(void)
{
	struct demo_opts o;
	char *argv[MAXARGS];
	int argc, first, rc;
	const char *const words[] = { "x1",         "-a",  "--template", "tmpl",        "x2",
				      "--watch",    "-l",  "one",        "--label=two", "-lthree",
				      "--autostop", "30m", "--dry-run",  "--env=A",     "--env",
				      "B",          "-v",  "-nnode1",    "x3",          NULL };
	rc = parse(&o, &first, argv, &argc, NULL, words);
	REQUIRE(rc == 0);
	CHECK(o.all == 1);
	CHECK(o.json == 0);
	CHECK_STR(o.template, "tmpl");
	CHECK_STR(o.autostop, "30m");
	CHECKF(o.watch && o.watch[0] == '\0', "--watch without a value gives \"\"");
	CHECK_STR(list_join(&o.label), "one|two|three");
	CHECK(o.label.n == 3);
	CHECK(o.dry_run == 1);
	CHECK_STR(list_join(&o.env), "A|B");
	CHECK(o.verbose == 1);
	CHECK_STR(o.node, "node1");
	CHECK_STR(positionals(argv, argc, first), "x1|x2|x3");
	CHECK(first == argc - 3);
	release(&o);
	CHECK(o.label.v == NULL && o.label.n == 0);
}

static void values(void)
{
	struct demo_opts o;
	char *argv[MAXARGS];
	int argc, first;

	{
		const char *const w[] = { "--watch=10",   "-t",          "a",
					  "--template=b", "--autostop=", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK_STR(o.watch, "10");
		CHECKF(o.template && !strcmp(o.template, "b"), "the last --template given wins");
		CHECKF(o.autostop && o.autostop[0] == '\0', "--autostop= gives \"\"");
		CHECK(first == argc);
	}
	{
		const char *const w[] = { "-w5", "NAME", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK_STR(o.watch, "5");
		CHECK_STR(positionals(argv, argc, first), "NAME");
	}
	{
		/* an optional value is never the next word */
		const char *const w[] = { "-w", "5", "--watch", "6", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK(o.watch && o.watch[0] == '\0');
		CHECK_STR(positionals(argv, argc, first), "5|6");
	}
	{
		const char *const w[] = { "-aj", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK(o.all == 1 && o.json == 1);
		CHECK(first == 2 && argc == 2);
	}
	{
		const char *const w[] = { "-jat", "tmpl", "N", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK(o.all == 1 && o.json == 1);
		CHECK_STR(o.template, "tmpl");
		CHECK_STR(positionals(argv, argc, first), "N");
	}
	{
		const char *const w[] = { "-vjttmpl", "-ajw7", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK(o.verbose == 1 && o.json == 1 && o.all == 1);
		CHECK_STR(o.template, "tmpl");
		CHECK_STR(o.watch, "7");
	}
	{
		/* getopt_long's rule: a unique prefix of a long name is that option */
		const char *const w[] = { "--temp", "t1", "--js", "--dry", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK_STR(o.template, "t1");
		CHECK(o.json == 1 && o.dry_run == 1);
	}
	{
		/* a value that looks like an option is still the value */
		const char *const w[] = { "-t", "--json", "--autostop", "-a", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK_STR(o.template, "--json");
		CHECK_STR(o.autostop, "-a");
		CHECK(o.json == 0 && o.all == 0);
	}
	{
		const char *const w[] = { NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK(first == 1 && argc == 1);
		CHECK(!o.all && !o.json && !o.template && !o.watch && o.label.n == 0);
	}
}

static void end_of_options(void)
{
	struct demo_opts o;
	char *argv[MAXARGS];
	int argc, first;
	{
		const char *const w[] = { "-a", "--", "-j", "--json", "-", "x", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK(o.all == 1 && o.json == 0);
		CHECK_STR(positionals(argv, argc, first), "-j|--json|-|x");
	}
	{
		const char *const w[] = { "p1", "-a", "p2", "--", "-j", "--", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK(o.all == 1 && o.json == 0);
		CHECK_STR(positionals(argv, argc, first), "p1|p2|-j|--");
	}
	{
		/* "-" alone is an argument */
		const char *const w[] = { "-", "-j", NULL };
		CHECK(parse(&o, &first, argv, &argc, NULL, w) == 0);
		CHECK(o.json == 1);
		CHECK_STR(positionals(argv, argc, first), "-");
	}
}

/* words give the usage error, with the usage line on stderr. */
static void usage_error(const char *why, const char *const *words)
{
	struct demo_opts o;
	char *argv[MAXARGS], *err = NULL;
	int argc, first;
	int rc = parse(&o, &first, argv, &argc, &err, words);
	CHECKF(rc == PBX_EXIT_USAGE, "%s: exit code %d (got %d)", why, PBX_EXIT_USAGE, rc);
	if (!CHECKF(err && strstr(err, "usage: pbx demo [options] NAME...\n"),
		    "%s: the usage line is on stderr", why))
		tap_diag_str_("stderr: ", err);
	free(err);
	release(&o);
}

static void errors(void)
{
	{
		const char *const w[] = { "--bogus", NULL };
		usage_error("an unknown long option", w);
	}
	{
		const char *const w[] = { "x", "-z", NULL };
		usage_error("an unknown short option", w);
	}
	{
		const char *const w[] = { "-ajz", NULL };
		usage_error("an unknown short option among combined flags", w);
	}
	{
		const char *const w[] = { "--KEY=VALUE", NULL };
		usage_error("a DOC entry is not an option", w);
	}
	{
		const char *const w[] = { "-t", NULL };
		usage_error("a missing value (short)", w);
	}
	{
		const char *const w[] = { "x", "--template", NULL };
		usage_error("a missing value (long)", w);
	}
	{
		const char *const w[] = { "--autostop", NULL };
		usage_error("a missing value (long-only)", w);
	}
	{
		const char *const w[] = { "-l", "a", "-l", NULL };
		usage_error("a missing value (list)", w);
	}
	{
		const char *const w[] = { "--json=1", NULL };
		usage_error("a value given to a flag", w);
	}
	{
		const char *const w[] = { "--a", NULL };
		usage_error("an ambiguous prefix (--all, --autostop)", w);
	}
}

/* A parse after one that stopped in the middle of "-zj" starts afresh:
 * nothing of the earlier argv is taken. */
static void afresh(void)
{
	struct demo_opts o;
	char *argv[MAXARGS];
	int argc, first, rc;
	const char *const bad[] = { "-zj", "x", NULL };
	const char *const good[] = { "y", NULL };
	usage_error("an unknown option before another flag in one word", bad);
	rc = parse(&o, &first, argv, &argc, NULL, good);
	CHECKF(rc == 0 && o.json == 0 && !strcmp(positionals(argv, argc, first), "y"),
	       "a parse after a failed one in the middle of -zj takes nothing from it "
	       "(rc %d, json %d)",
	       rc, o.json);
	release(&o);
}

static void display(void)
{
	char buf[128];
	const struct pbx_option *o = demo_options;
	CHECK_STR(pbx_opt_display(&o[0], buf, sizeof(buf)), "-a, --all");
	CHECK_STR(pbx_opt_display(&o[1], buf, sizeof(buf)), "-j, --json");
	CHECK_STR(pbx_opt_display(&o[2], buf, sizeof(buf)), "-t, --template TEMPLATE");
	CHECK_STR(pbx_opt_display(&o[3], buf, sizeof(buf)), "--autostop DURATION");
	CHECK_STR(pbx_opt_display(&o[4], buf, sizeof(buf)), "-w, --watch[=SECONDS]");
	CHECK_STR(pbx_opt_display(&o[5], buf, sizeof(buf)), "-l, --label LABEL");
	CHECK_STR(pbx_opt_display(&o[6], buf, sizeof(buf)), "--dry-run");
	CHECK_STR(pbx_opt_display(&o[7], buf, sizeof(buf)), "--env VAR");
	CHECK_STR(pbx_opt_display(&o[8], buf, sizeof(buf)), "-v");
	CHECK_STR(pbx_opt_display(&o[9], buf, sizeof(buf)), "-n NODE");
	CHECK_STR(pbx_opt_display(&o[10], buf, sizeof(buf)), "--KEY=VALUE");
	/* at most size bytes, NUL included; the buffer is returned */
	memset(buf, 'X', sizeof(buf));
	CHECK(pbx_opt_display(&o[2], buf, 8) == buf);
	CHECK_STR(buf, "-t, --t");
	CHECK(buf[8] == 'X');
}

/* pbx_opts_split (parrun): flags taken where they stand, given whole;
 * everything else, unknown options and their values included, passes
 * through in order. */
static void split(void)
{
	char *argv[] = {
		"demo",    "exp.yaml",    "--gres=gpu:1", "-j",       "local",         "--time",
		"1:00:00", "--all",       "-jv",          "--json=1", "--template=t1", "--autostop",
		"5m",      "--templates", "-t",           NULL
	};
	char *last[] = { "demo", "exp.yaml", "--autostop", NULL };
	char *rest[16];
	struct demo_opts o;
	int n, i;
	char joined[256] = "";
	memset(&o, 0, sizeof(o));
	CHECK(pbx_opts_split(&demo_cmd, 15, argv, &o, rest, &n) == 0);
	for (i = 0; i < n; i++) {
		strcat(joined, i ? " " : "");
		strcat(joined, rest[i]);
	}
	CHECK(o.json == 1 && o.all == 1 && o.verbose == 0);
	/* a value option by its long name, with = or as the next argument; a
	 * longer name or its short form passes through */
	CHECK_STR(o.template, "t1");
	CHECK_STR(o.autostop, "5m");
	CHECK_STR(joined, "exp.yaml --gres=gpu:1 local --time 1:00:00 -jv --json=1 --templates -t");
	memset(&o, 0, sizeof(o));
	CHECK(pbx_opts_split(&demo_cmd, 3, last, &o, rest, &n) == PBX_EXIT_USAGE);
}

int main(void)
{
	all_kinds();
	values();
	end_of_options();
	errors();
	afresh();
	display();
	split();
	return tap_done();
}
