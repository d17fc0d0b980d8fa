/*
 * options.c - a verb's option table (options.h) turned into getopt_long's
 * arguments, and its display for help, man pages and completion.
 */
#include "cli/options.h"
#include "cli/cmd.h"
#include "util/buf.h"
#include "util/xalloc.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPT_LONG_ONLY 256 /* getopt's val of a long-only option: 256 + index */

void pbx_opt_list_free(struct pbx_opt_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

char *pbx_opt_display(const struct pbx_option *o, char *buf, size_t size)
{
	const char *dash = o->long_name ? "--" : ""; /* a DOC entry's too: "--KEY=VALUE" */
	const char *sep = o->short_name && o->long_name ? ", " : "";
	char sh[4] = "";
	if (o->short_name)
		snprintf(sh, sizeof(sh), "-%c", o->short_name);
	if (!o->metavar)
		snprintf(buf, size, "%s%s%s%s", sh, sep, dash, o->long_name ? o->long_name : "");
	else if (o->kind == PBX_OPT_KIND_OPTIONAL)
		snprintf(buf, size, "%s%s%s%s[=%s]", sh, sep, dash,
			 o->long_name ? o->long_name : "", o->metavar);
	else
		snprintf(buf, size, "%s%s%s%s %s", sh, sep, dash, o->long_name ? o->long_name : "",
			 o->metavar);
	return buf;
}

static int opt_has_arg(const struct pbx_option *o)
{
	if (o->kind == PBX_OPT_KIND_FLAG)
		return no_argument;
	return o->kind == PBX_OPT_KIND_OPTIONAL ? optional_argument : required_argument;
}

/* Stores the value of option o (arg: its value or NULL) into values. */
static void opt_store(const struct pbx_option *o, const char *arg, void *values)
{
	char *at = (char *)values + o->offset;
	struct pbx_opt_list *l;
	switch (o->kind) {
	case PBX_OPT_KIND_FLAG:
		*(int *)at = 1;
		break;
	case PBX_OPT_KIND_STRING:
		*(const char **)at = arg;
		break;
	case PBX_OPT_KIND_OPTIONAL:
		*(const char **)at = arg ? arg : "";
		break;
	case PBX_OPT_KIND_LIST:
		l = (struct pbx_opt_list *)at;
		l->v = xreallocarray(l->v, l->n + 1, sizeof(*l->v));
		l->v[l->n++] = arg;
		break;
	default:
		break;
	}
}

int pbx_opts_parse(const struct pbx_cmd *cmd, int argc, char **argv, void *values, int *first)
{
	const struct pbx_option *t = cmd->options;
	struct pbx_buf shortopts = PBX_BUF_INIT;
	struct option *longopts;
	size_t n = 0, k = 0, i;
	int opt, rc = 0;
	for (i = 0; t && t[i].kind; i++)
		n++;
	longopts = xcalloc(n + 1, sizeof(*longopts));
	for (i = 0; i < n; i++) {
		const struct pbx_option *o = &t[i];
		int has = opt_has_arg(o);
		if (o->kind == PBX_OPT_KIND_DOC)
			continue;
		if (o->short_name) {
			pbx_buf_addc(&shortopts, o->short_name);
			if (has == required_argument)
				pbx_buf_adds(&shortopts, ":");
			else if (has == optional_argument)
				pbx_buf_adds(&shortopts, "::");
		}
		if (o->long_name)
			longopts[k++] = (struct option){ o->long_name, has, NULL,
							 o->short_name ? o->short_name
								       : OPT_LONG_ONLY + (int)i };
	}
	optind = 0; /* 0, not 1: glibc then forgets a scan cut short (mid "-zj") too */
	while (rc == 0 && (opt = getopt_long(argc, argv, shortopts.buf ? shortopts.buf : "",
					     longopts, NULL)) != -1) {
		const struct pbx_option *hit = NULL;
		if (opt >= OPT_LONG_ONLY && (size_t)(opt - OPT_LONG_ONLY) < n)
			hit = &t[opt - OPT_LONG_ONLY];
		for (i = 0; !hit && i < n; i++)
			if (t[i].kind != PBX_OPT_KIND_DOC && t[i].short_name &&
			    t[i].short_name == opt)
				hit = &t[i];
		if (!hit)
			rc = pbx_usage_error(cmd, "invalid option");
		else
			opt_store(hit, optarg, values);
	}
	*first = optind;
	free(longopts);
	pbx_buf_release(&shortopts);
	return rc;
}

/* The FLAG entry of table t that argument a names whole, or NULL. */
static const struct pbx_option *opt_flag_named(const struct pbx_option *t, const char *a)
{
	for (; t && t->kind; t++)
		if (t->kind == PBX_OPT_KIND_FLAG &&
		    ((t->short_name && a[0] == '-' && a[1] == t->short_name && !a[2]) ||
		     (t->long_name && !strncmp(a, "--", 2) && !strcmp(a + 2, t->long_name))))
			return t;
	return NULL;
}

/* The STRING entry of table t whose long name argument a gives, as
 * "--NAME" or "--NAME=VALUE" (then *value points at VALUE), or NULL. */
static const struct pbx_option *opt_string_named(const struct pbx_option *t, const char *a,
						 const char **value)
{
	*value = NULL;
	if (strncmp(a, "--", 2) != 0)
		return NULL;
	for (; t && t->kind; t++) {
		size_t l = t->long_name ? strlen(t->long_name) : 0;
		if (t->kind != PBX_OPT_KIND_STRING || !l || strncmp(a + 2, t->long_name, l) != 0)
			continue;
		if (a[2 + l] == '=')
			*value = a + 3 + l;
		if (a[2 + l] == '=' || !a[2 + l])
			return t;
	}
	return NULL;
}

int pbx_opts_split(const struct pbx_cmd *cmd, int argc, char **argv, void *values, char **rest,
		   int *nrest)
{
	int i;
	*nrest = 0;
	for (i = 1; i < argc; i++) {
		const char *value;
		const struct pbx_option *o = opt_flag_named(cmd->options, argv[i]);
		if (o) {
			opt_store(o, NULL, values);
			continue;
		}
		o = opt_string_named(cmd->options, argv[i], &value);
		if (!o) {
			rest[(*nrest)++] = argv[i];
			continue;
		}
		if (!value && i + 1 < argc)
			value = argv[++i];
		if (!value)
			return pbx_usage_error(cmd, "option '--%s' needs a %s", o->long_name,
					       o->metavar ? o->metavar : "value");
		opt_store(o, value, values);
	}
	return 0;
}
