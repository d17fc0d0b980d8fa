/*
 * sbatch.c - the typed options of a submission (see sbatch.h): checking
 * keys and values, the argv and JSON serializers and the JSON reader.
 * Values are one-line strings that do not start with '-', so each stays one
 * "--key=value" argument; a flag option (exclusive, hold, ...) takes true
 * (bare --key) or false (left out).
 */
#include "slurm/sbatch.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sbatch long options that take a value (SLURM 22.05+), sorted. */
static const char *const sb_options[] = {
	"account",
	"acctg-freq",
	"batch",
	"bb",
	"bbf",
	"begin",
	"cluster-constraint",
	"clusters",
	"comment",
	"constraint",
	"container",
	"core-spec",
	"cores-per-socket",
	"cpu-freq",
	"cpus-per-gpu",
	"cpus-per-task",
	"deadline",
	"delay-boot",
	"dependency",
	"distribution",
	"exclude",
	"extra-node-info",
	"gpu-bind",
	"gpu-freq",
	"gpus",
	"gpus-per-node",
	"gpus-per-socket",
	"gpus-per-task",
	"gres",
	"gres-flags",
	"hint",
	"licenses",
	"mail-type",
	"mail-user",
	"mcs-label",
	"mem",
	"mem-bind",
	"mem-per-cpu",
	"mem-per-gpu",
	"mincpus",
	"network",
	"nice",
	"nodelist",
	"nodes",
	"ntasks",
	"ntasks-per-core",
	"ntasks-per-gpu",
	"ntasks-per-node",
	"ntasks-per-socket",
	"partition",
	"power",
	"prefer",
	"priority",
	"profile",
	"propagate",
	"qos",
	"reservation",
	"signal",
	"sockets-per-node",
	"switches",
	"thread-spec",
	"threads-per-core",
	"time",
	"time-min",
	"tmp",
	"tres-per-task",
	"wckey",
	NULL,
};

/* sbatch options without a value (exclusive also takes one). */
static const char *const sb_flags[] = {
	"contiguous", "exclusive",  "hold",          "overcommit", "oversubscribe",
	"reboot",     "spread-job", "use-min-nodes", NULL,
};

/* Options pbx sets itself or that would break the task wrapper. */
static const char *const sb_reserved[] = {
	"array",        "chdir",     "error",  "export",   "export-file",
	"get-user-env", "gid",       "input",  "job-name", "kill-on-invalid-dep",
	"no-requeue",   "open-mode", "output", "parsable", "requeue",
	"test-only",    "uid",       "wait",   "wrap",     NULL,
};

static const char *const sb_launchers[] = { "auto", "none", "srun", "mpi", NULL };

const char *const *pbx_sbatch_known_keys(void)
{
	static const char *all[128];
	size_t n = 0, i;
	if (all[0])
		return all;
	for (i = 0; sb_options[i]; i++)
		all[n++] = sb_options[i];
	for (i = 0; sb_flags[i]; i++)
		all[n++] = sb_flags[i];
	all[n++] = "throttle";
	all[n++] = "launcher";
	all[n] = NULL;
	return all;
}

static int sb_in(const char *const *list, const char *key)
{
	size_t i;
	for (i = 0; list[i]; i++)
		if (!strcmp(list[i], key))
			return 1;
	return 0;
}

int pbx_sbatch_key_reserved(const char *key)
{
	return sb_in(sb_reserved, key);
}

const char *pbx_launcher_name(enum pbx_launcher l)
{
	return l >= PBX_LAUNCHER_AUTO && l <= PBX_LAUNCHER_MPI ? sb_launchers[l] : "auto";
}

/* Checks `value` for option `key`; *out gets what to store ("" for a bare
 * flag, NULL for a flag turned off).  0, or -1 with why[]. */
static int sb_value_problem(const char *key, const char *value, const char **out, char *why,
			    size_t size)
{
	size_t i, len = strlen(value);
	int flag = sb_in(sb_flags, key);
	*out = value;
	if (flag && (!strcmp(value, "true") || !*value))
		return *out = "", 0;
	if (flag && !strcmp(value, "false"))
		return *out = NULL, 0;
	if (flag && strcmp(key, "exclusive"))
		return snprintf(why, size, "is a flag: give true or false"), -1;
	if (!len)
		return snprintf(why, size, "must not be empty"), -1;
	if (len > PBX_SBATCH_MAX_VALUE)
		return snprintf(why, size, "longer than %d bytes", PBX_SBATCH_MAX_VALUE), -1;
	if (value[0] == '-')
		return snprintf(why, size, "must not start with '-'"), -1;
	for (i = 0; i < len; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			return snprintf(why, size, "must be one line without control characters"),
			       -1;
	return 0;
}

static int sb_throttle(const char *value, int *out, char *why, size_t size)
{
	long v = 0;
	size_t i;
	for (i = 0; value[i] >= '0' && value[i] <= '9' && v <= PBX_SBATCH_MAX_THROTTLE; i++)
		v = v * 10 + (value[i] - '0');
	if (!i || value[i] || v < 1 || v > PBX_SBATCH_MAX_THROTTLE)
		return snprintf(why, size, "must be an integer between 1 and %d",
				PBX_SBATCH_MAX_THROTTLE),
		       -1;
	*out = (int)v;
	return 0;
}

static int sb_launcher(const char *value, enum pbx_launcher *out, char *why, size_t size)
{
	int i;
	for (i = 0; sb_launchers[i]; i++)
		if (!strcmp(value, sb_launchers[i]))
			return *out = (enum pbx_launcher)i, 0;
	return snprintf(why, size, "must be auto, none, srun or mpi"), -1;
}

/* Stores key=value, replacing an earlier key (moved last); NULL removes. */
static void sb_store(struct pbx_sbatch_opts *o, const char *key, const char *value)
{
	size_t i;
	for (i = 0; i < o->n && strcmp(o->keys[i], key); i++)
		;
	if (i < o->n) {
		free(o->keys[i]);
		free(o->values[i]);
		memmove(o->keys + i, o->keys + i + 1, (o->n - i - 1) * sizeof(char *));
		memmove(o->values + i, o->values + i + 1, (o->n - i - 1) * sizeof(char *));
		o->n--;
	}
	if (!value)
		return;
	o->keys = xreallocarray(o->keys, o->n + 1, sizeof(char *));
	o->values = xreallocarray(o->values, o->n + 1, sizeof(char *));
	o->keys[o->n] = xstrdup(key);
	o->values[o->n++] = xstrdup(value);
}

int pbx_sbatch_opts_set(struct pbx_sbatch_opts *o, const char *key, const char *value, char *why,
			size_t size)
{
	const char *store;
	if (!strcmp(key, "throttle"))
		return sb_throttle(value, &o->throttle, why, size);
	if (!strcmp(key, "launcher"))
		return sb_launcher(value, &o->launcher, why, size);
	if (sb_in(sb_reserved, key))
		return snprintf(why, size, "is set by pbx and cannot be given"), -1;
	if (!sb_in(sb_options, key) && !sb_in(sb_flags, key))
		return snprintf(why, size, "not an sbatch option pbx passes on"), -1;
	if (sb_value_problem(key, value, &store, why, size) < 0)
		return -1;
	sb_store(o, key, store);
	return 0;
}

const char *pbx_sbatch_opts_get(const struct pbx_sbatch_opts *o, const char *key)
{
	size_t i;
	for (i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return o->values[i];
	return NULL;
}

/* A count option above 1 ("2", "2-4": the lower bound counts). */
static int sb_more_than_one(const struct pbx_sbatch_opts *o, const char *key)
{
	const char *v = pbx_sbatch_opts_get(o, key);
	return v && strtol(v, NULL, 10) > 1;
}

/* The most GPUs one entry asks for: --gres "gpu[:TYPE]:N[,...]", --gpus
 * and --gpus-per-node "[TYPE:]N" (a bare "gpu" is one). */
static long sb_gpus(const struct pbx_sbatch_opts *o)
{
	static const char *const keys[] = { "gres", "gpus", "gpus-per-node" };
	long most = 0;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const char *v = pbx_sbatch_opts_get(o, keys[k]);
		while (v && *v) {
			size_t len = strcspn(v, ",");
			const char *colon = NULL;
			for (size_t i = 0; i < len; i++)
				if (v[i] == ':')
					colon = v + i;
			long n = 1;
			if (k == 0 && strncmp(v, "gpu", 3) != 0)
				n = 0; /* another kind of gres */
			else if (colon && colon < v + len)
				n = strtol(colon + 1, NULL, 10);
			else if (k > 0)
				n = strtol(v, NULL, 10);
			if (n > most)
				most = n;
			v += len + (v[len] == ',');
		}
	}
	return most;
}

enum pbx_launcher pbx_sbatch_opts_launcher(const struct pbx_sbatch_opts *o, int train)
{
	if (o->launcher != PBX_LAUNCHER_AUTO)
		return o->launcher;
	if (train && (sb_more_than_one(o, "nodes") || sb_more_than_one(o, "ntasks") ||
		      sb_more_than_one(o, "ntasks-per-node") || sb_gpus(o) > 1))
		return PBX_LAUNCHER_MPI;
	return PBX_LAUNCHER_NONE;
}

char **pbx_sbatch_opts_argv(const struct pbx_sbatch_opts *o, size_t *n)
{
	char **argv = xcalloc(o->n + 1, sizeof(char *));
	size_t i;
	for (i = 0; i < o->n; i++)
		argv[i] = o->values[i][0] ? xasprintf("--%s=%s", o->keys[i], o->values[i])
					  : xasprintf("--%s", o->keys[i]);
	*n = o->n;
	return argv;
}

void pbx_sbatch_argv_free(char **argv, size_t n)
{
	size_t i;
	for (i = 0; argv && i < n; i++)
		free(argv[i]);
	free(argv);
}

char *pbx_sbatch_opts_json(const struct pbx_sbatch_opts *o)
{
	json_t *root = json_object(), *opts = json_array();
	char *s, *out;
	size_t i;
	for (i = 0; i < o->n; i++)
		json_array_append_new(opts, json_pack("[ss]", o->keys[i], o->values[i]));
	json_object_set_new(root, "options", opts);
	json_object_set_new(root, "throttle", json_integer(o->throttle));
	json_object_set_new(root, "launcher", json_string(pbx_launcher_name(o->launcher)));
	s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(root);
	out = xstrdup(s ? s : "{}");
	free(s);
	return out;
}

/* The older form: ["--key=value", "--flag", ...]. */
static int sb_from_legacy(json_t *a, struct pbx_sbatch_opts *o, char *why, size_t size)
{
	size_t i;
	for (i = 0; i < json_array_size(a); i++) {
		const char *s = json_string_value(json_array_get(a, i)), *eq;
		char *key;
		int rc;
		if (!s || strncmp(s, "--", 2) != 0)
			return snprintf(why, size, "entry %zu is not an --option", i), -1;
		eq = strchr(s, '=');
		key = eq ? xstrndup(s + 2, (size_t)(eq - s - 2)) : xstrdup(s + 2);
		rc = pbx_sbatch_opts_set(o, key, eq ? eq + 1 : "", why, size);
		free(key);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int sb_from_object(json_t *root, struct pbx_sbatch_opts *o, char *why, size_t size)
{
	json_t *opts = json_object_get(root, "options"), *thr = json_object_get(root, "throttle"),
	       *la = json_object_get(root, "launcher");
	size_t i;
	if (!json_is_array(opts) || !json_is_integer(thr) || !json_is_string(la))
		return snprintf(why, size, "needs options, throttle and launcher"), -1;
	for (i = 0; i < json_array_size(opts); i++) {
		const char *k = json_string_value(json_array_get(json_array_get(opts, i), 0));
		const char *v = json_string_value(json_array_get(json_array_get(opts, i), 1));
		if (!k || !v || !strcmp(k, "throttle") || !strcmp(k, "launcher"))
			return snprintf(why, size, "option %zu is not a [key, value] pair", i), -1;
		if (pbx_sbatch_opts_set(o, k, v, why, size) < 0)
			return -1;
	}
	if (json_integer_value(thr) < 0 || json_integer_value(thr) > PBX_SBATCH_MAX_THROTTLE)
		return snprintf(why, size, "bad throttle"), -1;
	o->throttle = (int)json_integer_value(thr);
	return sb_launcher(json_string_value(la), &o->launcher, why, size);
}

int pbx_sbatch_opts_from_json(const char *text, struct pbx_sbatch_opts *o, struct pbx_err *err)
{
	json_error_t jerr;
	json_t *root;
	char why[256] = "";
	int rc;
	memset(o, 0, sizeof(*o));
	root = json_loads(text ? text : "", 0, &jerr);
	if (!root)
		return pbx_err_set(err, "stored sbatch options: %s", jerr.text);
	rc = json_is_array(root)    ? sb_from_legacy(root, o, why, sizeof(why))
	     : json_is_object(root) ? sb_from_object(root, o, why, sizeof(why))
				    : (snprintf(why, sizeof(why), "not an object"), -1);
	json_decref(root);
	if (rc < 0) {
		pbx_sbatch_opts_free(o);
		return pbx_err_set(err, "stored sbatch options: %s", why);
	}
	return 0;
}

void pbx_sbatch_opts_copy(struct pbx_sbatch_opts *dst, const struct pbx_sbatch_opts *src)
{
	size_t i;
	memset(dst, 0, sizeof(*dst));
	dst->keys = xcalloc(src->n + 1, sizeof(char *));
	dst->values = xcalloc(src->n + 1, sizeof(char *));
	for (i = 0; i < src->n; i++) {
		dst->keys[i] = xstrdup(src->keys[i]);
		dst->values[i] = xstrdup(src->values[i]);
	}
	dst->n = src->n;
	dst->throttle = src->throttle;
	dst->launcher = src->launcher;
}

void pbx_sbatch_opts_free(struct pbx_sbatch_opts *o)
{
	pbx_sbatch_argv_free(o->keys, o->n);
	pbx_sbatch_argv_free(o->values, o->n);
	memset(o, 0, sizeof(*o));
}
