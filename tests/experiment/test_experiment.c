/*
 * test_experiment.c - unit tests of src/experiment: the bad-file corpus
 * (bad/NAME.yaml must fail with exactly bad/NAME.err), sweep expansion
 * (grid x repeats order, zip, list, random), placeholder substitution and
 * the train: command, point JSON, resources and overrides, files/outputs/
 * env, .pbxignore rules, package ids, records and the tar file.
 *
 * Usage: test_experiment TEST TESTS_EXPERIMENT_DIR
 */
#define _GNU_SOURCE
#include "common/tap.h"
#include "experiment/experiment.h"
#include "experiment/package.h"
#include "experiment/package_internal.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------- */

static char *read_text(const char *path, size_t *len)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_read_file(path, &b, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	return pbx_buf_detach(&b, len);
}

static void write_text(const char *path, const char *text)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_write_file_atomic(path, text, strlen(text), 0644, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
}

/* Parses YAML text; NULL (and the message printed) on error. */
static struct pbx_experiment *parse(const char *text)
{
	struct pbx_experiment *e = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_experiment_parse("t.yaml", text, strlen(text), ".", &e, &err) < 0)
		printf("# unexpected error: %s\n", err.msg);
	return e;
}

/* The error message parsing `text` gives ("" when it parses). */
static const char *parse_error(const char *text)
{
	static struct pbx_err err;
	struct pbx_experiment *e = NULL;
	pbx_err_clear(&err);
	if (pbx_experiment_parse("t.yaml", text, strlen(text), ".", &e, &err) == 0) {
		pbx_experiment_free(e);
		return "";
	}
	return err.msg;
}

static const char *value(const struct pbx_experiment *e, size_t i, const char *name)
{
	const struct pbx_param *p = pbx_experiment_param(e, i, name);
	return p ? p->value : "(none)";
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **list_dir(const char *dir, const char *suffix, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t slen = strlen(suffix);
	*n = 0;
	if (!d) {
		perror(dir);
		exit(1);
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len <= slen || strcmp(de->d_name + len - slen, suffix))
			continue;
		names = xreallocarray(names, *n + 1, sizeof(*names));
		names[(*n)++] = xstrdup(de->d_name);
	}
	closedir(d);
	qsort(names, *n, sizeof(*names), cmp_names);
	return names;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A fresh temporary directory; caller frees. */
static char *tmpdir(void)
{
	char *t = xstrdup("/tmp/pbx-exp-test.XXXXXX");
	if (!mkdtemp(t)) {
		perror("mkdtemp");
		exit(1);
	}
	return t;
}

static void rm_rf(const char *dir)
{
	struct pbx_err err = PBX_ERR_INIT;
	pbx_rm_rf(dir, &err);
}

static int run(const char *const *argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_buf out = PBX_BUF_INIT;
	int rc = pbx_run(argv, &out, &err);
	if (rc != 0)
		printf("# %s: rc %d: %s%s\n", argv[0], rc, out.buf, err.msg);
	pbx_buf_release(&out);
	return rc;
}

/* ---- bad corpus ------------------------------------------------------ */

static void bad_one(const char *name)
{
	struct pbx_experiment *e = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *rel = xasprintf("bad/%s", name);
	char *errpath = xasprintf("bad/%.*s.err", (int)(strlen(name) - 5), name);
	size_t len, elen;
	char *text = read_text(rel, &len), *want = read_text(errpath, &elen);
	while (elen && want[elen - 1] == '\n')
		want[--elen] = '\0';
	if (pbx_experiment_parse(rel, text, len, ".", &e, &err) == 0) {
		ok(0, "%s fails", rel);
		pbx_experiment_free(e);
	} else {
		ok(e == NULL && err.code == PBX_EXIT_USAGE, "%s: usage error, no result", rel);
		is_str(err.msg, want, rel);
	}
	free(text);
	free(want);
	free(rel);
	free(errpath);
}

static void test_bad(void)
{
	size_t i, n;
	char **names = list_dir("bad", ".yaml", &n);
	ok(n >= 12, "%zu bad files", n);
	for (i = 0; i < n; i++) {
		bad_one(names[i]);
		free(names[i]);
	}
	free(names);
}

/* ---- sweeps ---------------------------------------------------------- */

static void test_grid(void)
{
	static const char *const a[] = { "0.10", "1e-3", "x y" };
	static const char *const b[] = { "1", "2", "03", "four" };
	struct pbx_experiment *e =
		parse("name: g\ncommand: echo {a} {b}\n"
		      "sweep:\n  grid:\n    a: [0.10, 1e-3, 'x y']\n    b: [1, 2, 03, four]\n"
		      "  repeats: 2\n");
	size_t i, bad = 0;
	if (!ok(e != NULL, "3x4 grid x 2 repeats parses"))
		return;
	ok(e->npoints == 24 && e->repeats == 2, "24 points (%zu)", e->npoints);
	for (i = 0; i < e->npoints; i++) {
		const struct pbx_point *pt = &e->points[i];
		char r[8];
		snprintf(r, sizeof(r), "%zu", i % 2);
		if (pt->nparams != 3 || strcmp(pt->params[0].name, "a") ||
		    strcmp(pt->params[1].name, "b") || strcmp(pt->params[2].name, "repeat") ||
		    strcmp(pt->params[0].value, a[i / 8]) ||
		    strcmp(pt->params[1].value, b[(i / 2) % 4]) || strcmp(pt->params[2].value, r) ||
		    pbx_experiment_repeat(e, i) != i % 2)
			bad++;
	}
	ok(bad == 0, "point i = ((a * 4) + b) * 2 + repeat, params a, b, repeat (%zu wrong)", bad);
	is_str(value(e, 0, "a"), "0.10", "0.10 keeps its text");
	ok(e->points[5].params[1].len == 2, "len of '03'");
	pbx_experiment_free(e);
}

static void test_zip_list(void)
{
	struct pbx_experiment *e =
		parse("name: z\ncommand: echo {opt} {lr} {wd} {depth} {act}\n"
		      "sweep:\n  grid:\n    opt: [sgd, adam]\n"
		      "  zip:\n    lr: [0.1, 0.2, 0.3]\n    wd: [0, 1e-4, 1e-3]\n"
		      "  list:\n    - {depth: 2, act: relu}\n    - {act: gelu, depth: 4}\n");
	if (!ok(e != NULL, "grid x zip x list parses"))
		return;
	ok(e->npoints == 12 && e->points[0].nparams == 5, "2 x 3 x 2 = 12 points of 5 params");
	is_str(e->points[0].params[3].name, "depth", "list params in first entry's order");
	is_str(value(e, 0, "opt"), "sgd", "p0 opt");
	is_str(value(e, 1, "act"), "gelu", "p1: list varies fastest");
	is_str(value(e, 1, "depth"), "4", "p1 depth from a reordered entry");
	is_str(value(e, 2, "lr"), "0.2", "p2 lr");
	is_str(value(e, 2, "wd"), "1e-4", "p2 wd zipped with lr");
	is_str(value(e, 6, "opt"), "adam", "p6: grid varies slowest");
	is_str(value(e, 11, "wd"), "1e-3", "p11 wd");
	ok(pbx_experiment_param(e, 0, "repeat") == NULL, "no repeat param when repeats is 1");
	pbx_experiment_free(e);
	e = parse("name: one\ncommand: echo hi\n");
	ok(e && e->npoints == 1 && e->points[0].nparams == 0, "no sweep: one empty point");
	pbx_experiment_free(e);
}

static const char random_yaml[] =
	"name: r\ncommand: echo {lr} {wd} {bs} {act} {a}\n"
	"sweep:\n  grid:\n    a: [x, y]\n"
	"  random:\n    samples: 200\n    seed: SEED\n    params:\n"
	"      lr: {loguniform: [1e-5, 0.1]}\n      wd: {uniform: [-1, 2.5]}\n"
	"      bs: {int: [16, 19]}\n      act: {choice: [relu, gelu, 'x y']}\n";

static struct pbx_experiment *parse_random(const char *seed)
{
	char *text = xstrdup(random_yaml), *at = strstr(text, "SEED");
	char *full = xasprintf("%.*s%s%s", (int)(at - text), text, seed, at + 4);
	struct pbx_experiment *e = parse(full);
	free(text);
	free(full);
	return e;
}

static void test_random(void)
{
	struct pbx_experiment *e = parse_random("7"), *same = parse_random("7"),
			      *other = parse_random("8");
	size_t i, out = 0, diff = 0, differ_seed = 0, seen[4] = { 0 };
	if (!ok(e && same && other, "random sweeps parse"))
		return;
	ok(e->npoints == 400, "2 grid values x 200 samples");
	for (i = 0; i < e->npoints; i++) {
		double lr = atof(value(e, i, "lr")), wd = atof(value(e, i, "wd"));
		long bs = atol(value(e, i, "bs"));
		const char *act = value(e, i, "act");
		out += lr < 1e-5 || lr > 0.1 || wd < -1 || wd > 2.5 || bs < 16 || bs > 19 ||
		       (strcmp(act, "relu") && strcmp(act, "gelu") && strcmp(act, "x y"));
		if (bs >= 16 && bs <= 19)
			seen[bs - 16]++;
		diff += strcmp(value(e, i, "lr"), value(same, i, "lr")) != 0;
		differ_seed += strcmp(value(e, i, "lr"), value(other, i, "lr")) != 0;
	}
	ok(out == 0, "every sample within its bounds (%zu outside)", out);
	ok(seen[0] && seen[1] && seen[2] && seen[3], "int covers 16..19 inclusive");
	ok(diff == 0, "same seed, same points");
	ok(differ_seed > 300, "another seed, other points (%zu differ)", differ_seed);
	is_str(value(e, 0, "lr"), value(e, 200, "lr"), "samples repeat across the grid");
	is_str(e->points[0].params[1].name, "lr", "random params after the grid's");
	pbx_experiment_free(e);
	pbx_experiment_free(same);
	pbx_experiment_free(other);
}

/* ---- commands -------------------------------------------------------- */

static void test_command(void)
{
	struct pbx_experiment *e =
		parse("name: c\n"
		      "command: \"python3 train.py --lr={lr} --name {name} {{lr}} ${HOME} "
		      "awk '{print $1}' {x-y} {repeat}}} lr=${lr} ${{lr}} $\"\n"
		      "sweep:\n  list:\n    - {lr: 0.1, name: \"it's $(id) `id`\"}\n"
		      "    - {lr: '', name: '{lr}'}\n");
	char *c0, *c1;
	if (!ok(e != NULL, "command with placeholders parses"))
		return;
	c0 = pbx_experiment_task_command(e, 0);
	c1 = pbx_experiment_task_command(e, 1);
	is_str(c0,
	       "python3 train.py --lr='0.1' --name 'it'\\''s $(id) `id`' {lr} ${HOME} "
	       "awk '{print $1}' {x-y} '0'} lr='0.1' ${lr} $",
	       "placeholders quoted, ${lr} the same as {lr}, {{ }} and other braces literal");
	is_str(c1,
	       "python3 train.py --lr='' --name '{lr}' {lr} ${HOME} awk '{print $1}' "
	       "{x-y} '0'} lr='' ${lr} $",
	       "empty value and a value that looks like a placeholder");
	free(c0);
	free(c1);
	c0 = pbx_experiment_point_json(e, 0);
	is_str(c0, "{\"lr\":\"0.1\",\"name\":\"it's $(id) `id`\"}", "point JSON");
	free(c0);
	pbx_experiment_free(e);
	is_str(parse_error("name: c\ncommand: echo {lr}\nsweep:\n  grid:\n    lr: [1]\n"
			   "    depth: [2]\n    width: [3]\n"),
	       "", "placeholders may be unused");
	is_str(parse_error("name: c\ncommand: echo {foo}\nsweep:\n  grid:\n    lr: [1]\n"
			   "    depth: [2]\n"),
	       "t.yaml:2: command: unknown placeholder {foo} (parameters: lr, depth)",
	       "unknown placeholder lists the parameters");
	is_str(parse_error("name: c\ncommand: echo ${foo}\nsweep:\n  grid:\n    lr: [1]\n"),
	       "t.yaml:2: command: unknown placeholder {foo} (parameters: lr); a shell "
	       "variable is $foo or ${{foo}}",
	       "${foo} naming no parameter: the same error, and how to write a shell variable");
}

static void test_train(void)
{
	struct pbx_experiment *e =
		parse("name: t\ntrain:\n  model: mlp\n  lr: 0.05\n  output_dir: ~\n"
		      "  augment: {hflip: true}\n  layers: [relu, {type: linear, out: 10}]\n"
		      "sweep:\n  grid:\n    lr: [0.1, \"0.2'\"]\n  repeats: 2\n");
	char *c;
	if (!ok(e != NULL, "train experiment parses"))
		return;
	ok(e->command == NULL && e->train_json != NULL, "train_json set, command NULL");
	is_str(e->train_json,
	       "{\n  \"model\": \"mlp\",\n  \"lr\": \"0.05\",\n"
	       "  \"output_dir\": null,\n  \"augment\": {\n    \"hflip\": \"true\"\n  },\n"
	       "  \"layers\": [\n    \"relu\",\n    {\n      \"type\": \"linear\",\n"
	       "      \"out\": \"10\"\n    }\n  ]\n}\n",
	       "train: as JSON");
	c = pbx_experiment_task_command(e, 3);
	is_str(c, "pbx-train train.yaml --set 'lr=0.2'\\''' --resume",
	       "--set per param, repeat left out, --resume for a requeued attempt");
	free(c);
	pbx_experiment_free(e);
}

/* ---- resources, files, outputs, env ---------------------------------- */

static void test_resources(void)
{
	struct pbx_experiment *e =
		parse("name: r\ncommand: echo hi\nresources:\n  gres: gpu:1\n  time: 00:10:00\n"
		      "  mem: 4G\n  cpus-per-task: 2\n  exclusive: true\n  hold: false\n"
		      "  throttle: 8\n");
	struct pbx_err err = PBX_ERR_INIT;
	char **args;
	size_t n, i;
	if (!ok(e != NULL, "resources parse"))
		return;
	ok(e->res.throttle == 8 && e->res.n == 5, "throttle apart, hold: false left out");
	ok(pbx_experiment_override_resource(e, "gres", "gpu:2", &err) == 0, "override gres");
	ok(pbx_experiment_override_resource(e, "partition", "debug", &err) == 0, "add partition");
	ok(pbx_experiment_override_resource(e, "throttle", "3", &err) == 0 && e->res.throttle == 3,
	   "override throttle");
	args = pbx_experiment_sbatch_args(e, &n);
	ok(n == 6, "6 sbatch args");
	if (n == 6) {
		is_str(args[0], "--time=00:10:00", "time");
		is_str(args[3], "--exclusive", "a bare flag");
		is_str(args[4], "--gres=gpu:2", "overridden gres moves last");
		is_str(args[5], "--partition=debug", "added partition");
	}
	for (i = 0; i < n; i++)
		free(args[i]);
	free(args);
	ok(pbx_experiment_override_resource(e, "gres", "gpu:1\n--wrap=id", &err) < 0,
	   "newline refused");
	is_str(err.msg, "--gres: must be one line without control characters", "newline message");
	ok(pbx_experiment_override_resource(e, "gres", "-x", &err) < 0, "leading dash refused");
	is_str(err.msg, "--gres: must not start with '-'", "dash message");
	ok(pbx_experiment_override_resource(e, "partitoin", "a", &err) < 0, "unknown refused");
	is_str(err.msg,
	       "--partitoin: not an sbatch option pbx passes on (did you mean "
	       "'partition'?)",
	       "unknown message");
	ok(pbx_experiment_override_resource(e, "array", "1-3", &err) < 0 &&
		   err.code == PBX_EXIT_USAGE,
	   "array refused");
	ok(pbx_experiment_override_resource(e, "throttle", "x", &err) < 0 && e->res.throttle == 3,
	   "bad throttle leaves it");
	ok(e->res.n == 6 && !strcmp(e->res.values[4], "gpu:2"), "failed overrides change nothing");
	pbx_experiment_free(e);
}

/* The typed options: launcher, and the JSON the store keeps for rerun. */
static void test_sbatch_opts(void)
{
	struct pbx_experiment *e =
		parse("name: r\ntrain: { model: mlp }\nresources:\n  nodes: 2\n  exclusive: true\n"
		      "  throttle: 3\n");
	struct pbx_sbatch_opts back;
	struct pbx_err err = PBX_ERR_INIT;
	char *json, **a1, **a2;
	size_t n1, n2, i;
	int same;
	if (!ok(e != NULL, "train experiment with nodes: 2 parses"))
		return;
	ok(pbx_sbatch_opts_launcher(&e->res, 1) == PBX_LAUNCHER_MPI,
	   "a train task on 2 nodes gets the mpi launcher");
	ok(pbx_sbatch_opts_launcher(&e->res, 0) == PBX_LAUNCHER_NONE,
	   "a command task keeps none unless it asks");
	{
		/* GPUs: a train task with more than one gets a rank per GPU */
		static const struct {
			const char *key, *value;
			int mpi;
		} g[] = {
			{ "gres", "gpu:2", 1 },   { "gres", "gpu:h100:4", 1 },
			{ "gres", "gpu:1", 0 },   { "gres", "gpu", 0 },
			{ "gres", "mps:100", 0 }, { "gres", "mps:100,gpu:a100:2", 1 },
			{ "gpus", "2", 1 },       { "gpus-per-node", "h100:8", 1 },
			{ "gpus", "1", 0 },
		};
		for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
			struct pbx_sbatch_opts o = { 0 };
			char why[256];
			int set = pbx_sbatch_opts_set(&o, g[k].key, g[k].value, why, sizeof(why)) ==
				  0;
			ok(set &&
				   pbx_sbatch_opts_launcher(&o, 1) ==
					   (g[k].mpi ? PBX_LAUNCHER_MPI : PBX_LAUNCHER_NONE) &&
				   pbx_sbatch_opts_launcher(&o, 0) == PBX_LAUNCHER_NONE,
			   "train task with --%s=%s: %s", g[k].key, g[k].value,
			   g[k].mpi ? "mpi (a rank per GPU)" : "none");
			pbx_sbatch_opts_free(&o);
		}
	}
	ok(pbx_experiment_override_resource(e, "launcher", "srun", &err) == 0 &&
		   pbx_sbatch_opts_launcher(&e->res, 0) == PBX_LAUNCHER_SRUN,
	   "launcher: srun");
	ok(pbx_experiment_override_resource(e, "launcher", "mpich", &err) < 0, "unknown launcher");
	is_str(err.msg, "--launcher: must be auto, none, srun or mpi", "launcher message");
	json = pbx_sbatch_opts_json(&e->res);
	is_str(json,
	       "{\"options\":[[\"nodes\",\"2\"],[\"exclusive\",\"\"]],\"throttle\":3,"
	       "\"launcher\":\"srun\"}",
	       "options as JSON");
	pbx_sbatch_opts_copy(&back, &e->res);
	{
		char *cj = pbx_sbatch_opts_json(&back);
		is_str(cj, json, "a copy serializes the same");
		free(cj);
	}
	pbx_sbatch_opts_free(&back);
	ok(pbx_sbatch_opts_from_json(json, &back, &err) == 0, "JSON read back");
	a1 = pbx_sbatch_opts_argv(&e->res, &n1);
	a2 = pbx_sbatch_opts_argv(&back, &n2);
	same = n1 == n2 && back.throttle == 3 && back.launcher == PBX_LAUNCHER_SRUN;
	for (i = 0; same && i < n1; i++)
		same = !strcmp(a1[i], a2[i]);
	ok(same, "read back: same argv, throttle and launcher");
	pbx_sbatch_argv_free(a1, n1);
	pbx_sbatch_argv_free(a2, n2);
	pbx_sbatch_opts_free(&back);
	free(json);
	ok(pbx_sbatch_opts_from_json("[\"--time=5\",\"--hold\"]", &back, &err) == 0 &&
		   back.n == 2 && back.throttle == 0,
	   "the older stored form (argv) reads");
	pbx_sbatch_opts_free(&back);
	ok(pbx_sbatch_opts_from_json("{\"options\":[[\"output\",\"x\"]],\"throttle\":0,"
				     "\"launcher\":\"none\"}",
				     &back, &err) < 0,
	   "a stored option pbx sets itself is refused");
	is_str(err.msg, "stored sbatch options: is set by pbx and cannot be given", "its message");
	pbx_experiment_free(e);
}

static void test_files_env(void)
{
	struct pbx_experiment *e =
		parse("name: f\ncommand: echo hi\nfiles: ['*.py', data/]\n"
		      "outputs: [metrics.jsonl, 'ckpt/*.bin', ./result.txt]\n"
		      "env:\n  OMP_NUM_THREADS: 4\n  _X: \"a b'c\"\n  EMPTY: ''\n");
	if (!ok(e != NULL, "files, outputs, env parse"))
		return;
	ok(e->nfiles == 2 && e->noutputs == 3 && e->nenv == 3, "counts");
	is_str(e->outputs[1], "ckpt/*.bin", "output glob kept");
	is_str(e->env_names[1], "_X", "env name");
	is_str(e->env_values[1], "a b'c", "env value");
	is_str(e->env_values[2], "", "empty env value");
	pbx_experiment_free(e);
}

/* environment.container: docker:// references that are pulled, and those
 * refused (they reach the head's shell and skopeo) */
static void test_image_ref(void)
{
	static const struct {
		const char *ref;
		int ok;
	} refs[] = {
		{ "docker://python:3.11-slim", 1 },
		{ "docker://busybox", 1 },
		{ "docker://127.0.0.1:30701/pbx/box:v1", 1 },
		{ "docker://localhost/a/b_c__d.e-f:V1.0_x", 1 },
		{ "docker://ghcr.io/o/r@sha256:"
		  "d86f1508716d5098fca35c304200df488627014884da301ee12242bbd3fad43f",
		  1 },
		{ "docker://r.example:5000/o/r:t@sha256:"
		  "d86f1508716d5098fca35c304200df488627014884da301ee12242bbd3fad43f",
		  1 },
		{ "docker://python@sha256:"
		  "D86F1508716D5098FCA35C304200DF488627014884DA301EE12242BBD3FAD43F",
		  0 },
		{ "docker://python@sha512:00", 0 },
		{ "docker://", 0 },
		{ "docker://:tag", 0 },
		{ "docker://a:", 0 },
		{ "docker://a:-x", 0 },
		{ "docker://a/../b", 0 },
		{ "docker://a//b", 0 },
		{ "docker://a/b/", 0 },
		{ "docker://-a", 0 },
		{ "docker://a$(id)", 0 },
		{ "docker://a:t;rm", 0 },
		{ "docker://a b", 0 },
		{ "docker://h:99999x/a", 0 },
		{ "docker://h:123456/a", 0 },
		{ "docker://a@b@sha256:x", 0 },
		{ "oci://a", 0 },
		{ "docker:/a", 0 },
	};
	size_t i;
	for (i = 0; i < sizeof(refs) / sizeof(refs[0]); i++)
		ok(pbx_exp_image_ref_ok(refs[i].ref) == refs[i].ok, "%s: %s", refs[i].ref,
		   refs[i].ok ? "pulled" : "refused");
	struct pbx_experiment *e = parse("name: f\ncommand: echo hi\nenvironment:\n"
					 "  container: docker://127.0.0.1:30701/pbx/box:v1\n");
	if (!ok(e != NULL, "a docker:// container parses"))
		return;
	is_str(e->env.container_ref, "docker://127.0.0.1:30701/pbx/box:v1", "kept as written");
	ok(e->env.container == NULL, "no archive");
	pbx_experiment_free(e);
	static const struct {
		const char *reg;
		int ok;
	} regs[] = {
		{ "docker.io", 1 },
		{ "ghcr.io", 1 },
		{ "us-docker.pkg.dev", 1 },
		{ "123456789012.dkr.ecr.us-east-1.amazonaws.com", 1 },
		{ "localhost:5000", 1 },
		{ "", 0 },
		{ "docker://ghcr.io", 0 },
		{ "ghcr.io/owner", 0 },
		{ "-x.io", 0 },
		{ "a.io:123456", 0 },
		{ "a.io:", 0 },
		{ "a.io;id", 0 },
		{ "a.io b", 0 },
	};
	for (i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		ok(pbx_exp_registry_ok(regs[i].reg) == regs[i].ok, "registry '%s': %s", regs[i].reg,
		   regs[i].ok ? "taken" : "refused");
}

/* ---- .pbxignore ------------------------------------------------------ */

static void test_ignore(void)
{
	static const char rules[] =
		"# comment\n\n*.pyc\n/build\ndata/\n!data/keep\nlogs/*.log\n**/cache/tmp\n"
		"!important.pyc\n\\#hash\ntrailing   \ntmp/**/*.t\n";
	struct pbx_ignore *ig = pbx_ignore_parse(rules, strlen(rules));
	ok(pbx_ignore_match(ig, "a.pyc", false), "*.pyc at the top");
	ok(pbx_ignore_match(ig, "src/deep/b.pyc", false), "*.pyc at any depth");
	ok(!pbx_ignore_match(ig, "important.pyc", false), "! re-includes");
	ok(pbx_ignore_match(ig, "build", true), "/build anchored");
	ok(!pbx_ignore_match(ig, "src/build", true), "/build not below the top");
	ok(pbx_ignore_match(ig, "data", true) && pbx_ignore_match(ig, "x/data", true),
	   "data/ matches directories at any depth");
	ok(!pbx_ignore_match(ig, "data", false), "data/ does not match a file");
	ok(pbx_ignore_match(ig, "logs/a.log", false) &&
		   !pbx_ignore_match(ig, "logs/x/a.log", false),
	   "logs/*.log: * does not cross /");
	ok(pbx_ignore_match(ig, "cache/tmp", true) && pbx_ignore_match(ig, "a/b/cache/tmp", false),
	   "**/cache/tmp at any depth");
	ok(pbx_ignore_match(ig, "#hash", false), "\\# is a literal #");
	ok(pbx_ignore_match(ig, "trailing", false), "trailing spaces dropped");
	ok(pbx_ignore_match(ig, "tmp/a/b/c.t", false) &&
		   !pbx_ignore_match(ig, "x/tmp/a/c.t", false),
	   "** in an anchored pattern crosses /");
	ok(!pbx_ignore_match(ig, "main.py", false), "others kept");
	pbx_ignore_free(ig);
}

/* ---- packages -------------------------------------------------------- */

static const char pkg_yaml[] = "name: pkg\ncommand: python3 train.py --lr {lr}\n"
			       "sweep:\n  grid:\n    lr: [0.1, 0.01]\n";

static void make_tree(const char *t)
{
	char *p;
#define W(rel, text) (p = xasprintf("%s/%s", t, rel), write_text(p, text), free(p))
#define D(rel)       (p = xasprintf("%s/%s", t, rel), mkdir(p, 0755), free(p))
	W("experiment.yaml", pkg_yaml);
	W("train.py", "print('hi')\n");
	D("lib");
	W("lib/util.py", "x = 1\n");
	W("lib/util.pyc", "junk");
	D("data");
	W("data/big.bin", "0123456789");
	W("data/keep.txt", "keep");
	D("build");
	W("build/out.o", "obj");
	D(".git");
	W(".git/HEAD", "ref");
	W(".pbxignore", "*.pyc\n/build/\ndata/*\n!data/keep.txt\n");
#undef W
#undef D
}

static struct pbx_package *build(const char *t, struct pbx_experiment **ep, struct pbx_err *err)
{
	char *path = xasprintf("%s/experiment.yaml", t);
	struct pbx_package *p = NULL;
	struct pbx_experiment *e = NULL;
	if (pbx_experiment_load(path, &e, err) == 0 && pbx_package_build(e, &p, err) < 0)
		p = NULL;
	free(path);
	if (ep)
		*ep = e;
	else
		pbx_experiment_free(e);
	return p;
}

static bool has_file(const struct pbx_package *p, const char *rel)
{
	size_t i;
	for (i = 0; p && i < p->nfiles; i++)
		if (!strcmp(p->files[i].path, rel))
			return true;
	return false;
}

static void test_package_id(void)
{
	char *t = tmpdir(), *path, id[65];
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package *p, *q;
	make_tree(t);
	p = build(t, NULL, &err);
	if (!ok(p != NULL, "package builds: %s", err.msg))
		return;
	ok(strlen(p->id) == 64 && strlen(p->short_id) == 12 && !strncmp(p->id, p->short_id, 12),
	   "64-hex id, 12-hex short id");
	ok(has_file(p, "train.py") && has_file(p, "lib/util.py") && has_file(p, "data") &&
		   has_file(p, "data/keep.txt") && has_file(p, ".pbxignore"),
	   "wanted files shipped");
	ok(!has_file(p, "lib/util.pyc") && !has_file(p, "data/big.bin") && !has_file(p, "build") &&
		   !has_file(p, ".git"),
	   ".pbxignore honoured, .git left out");
	ok(p->user && p->host && p->created > 0, "user, host, time recorded");
	memcpy(id, p->id, sizeof(id));
	q = build(t, NULL, &err);
	is_str(q ? q->id : "", id, "same tree, same id");
	pbx_package_free(q);
	path = xasprintf("%s/build/out.o", t);
	write_text(path, "changed, but ignored");
	free(path);
	q = build(t, NULL, &err);
	is_str(q ? q->id : "", id, "an ignored file does not change the id");
	pbx_package_free(q);
	path = xasprintf("%s/lib/util.py", t);
	chmod(path, 0755);
	q = build(t, NULL, &err);
	ok(q && strcmp(q->id, id), "mode change changes the id");
	pbx_package_free(q);
	chmod(path, 0644);
	write_text(path, "x = 2\n");
	q = build(t, NULL, &err);
	ok(q && strcmp(q->id, id), "a content change changes the id");
	pbx_package_free(q);
	free(path);
	pbx_package_free(p);
	rm_rf(t);
	free(t);
}

static void test_package_links_globs(void)
{
	char *t = tmpdir(), *a, *b;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package *p;
	make_tree(t);
	a = xasprintf("%s/lib/link", t);
	ok(symlink("../train.py", a) == 0, "make inside link");
	p = build(t, NULL, &err);
	ok(p && has_file(p, "lib/link"), "a link inside is kept: %s", err.msg);
	pbx_package_free(p);
	unlink(a);
	ok(symlink("../../etc", a) == 0, "make outside link");
	p = build(t, NULL, &err);
	ok(!p, "a link outside is refused");
	b = xasprintf("%s/lib/link: symlink points outside %s (../../etc); leave it out with the "
		      "line 'lib/' in %s/.pbxignore",
		      t, t, t);
	is_str(err.msg, b, "link message");
	free(b);
	unlink(a);
	free(a);
	a = xasprintf("%s/experiment.yaml", t);
	b = xasprintf("%sfiles: ['*.py', 'lib/', './data//big.bin']\n", pkg_yaml);
	write_text(a, b);
	free(b);
	p = build(t, NULL, &err);
	ok(p && p->nfiles == 6, "explicit globs: %zu entries %s", p ? p->nfiles : 0, err.msg);
	ok(has_file(p, "lib/util.pyc") && has_file(p, "data") && has_file(p, "data/big.bin") &&
		   !has_file(p, "data/keep.txt") && !has_file(p, "experiment.yaml"),
	   "globs pick exactly, .pbxignore not applied");
	pbx_package_free(p);
	b = xasprintf("%sfiles: ['*.c']\n", pkg_yaml);
	write_text(a, b);
	free(b);
	p = build(t, NULL, &err);
	b = xasprintf("%s/experiment.yaml:6: files[0]: '*.c' matches nothing in %s", t, t);
	ok(!p, "a glob matching nothing fails");
	is_str(err.msg, b, "glob message names the file and line");
	free(b);
	free(a);
	rm_rf(t);
	free(t);
}

/* files: and outputs: share one rule (pattern.c): components matched one
 * by one, `*` not matching '/' nor a leading '.', a directory meaning its
 * whole tree, a trailing '/' meaning a directory. */
static void test_patterns(void)
{
	static const struct {
		const char *pat, *rel;
		bool is_dir, want;
	} cases[] = {
		{ "*.bin", "x.bin", false, true },
		{ "*.bin", "sub/x.bin", false, false },
		{ "*/*.bin", "sub/x.bin", false, true },
		{ "d", "d/x", false, true },
		{ "d", "d/sub/deep/x", false, true },
		{ "d/", "d/x", false, true },
		{ "./d//", "d/sub/x", false, true },
		{ "d/", "d", false, false },
		{ "d/", "d", true, true },
		{ "d", "dx/y", false, false },
		{ "*", ".hidden", false, false },
		{ ".*", ".hidden", false, true },
		{ "*", "d/x", false, true },
		{ "logs/*.txt", "logs/a.txt", false, true },
		{ "logs/*.txt", "logs/sub/a.txt", false, false },
		{ "?.txt", "a.txt", false, true },
		{ "[ab]/x", "b/x", false, true },
		{ "d/x/y", "d/x", true, false },
	};
	size_t i, bad = 0;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (pbx_pattern_match(cases[i].pat, cases[i].rel, cases[i].is_dir) !=
		    cases[i].want) {
			printf("# '%s' vs '%s': want %d\n", cases[i].pat, cases[i].rel,
			       cases[i].want);
			bad++;
		}
	ok(bad == 0, "pattern matches (%zu wrong)", bad);
	ok(pbx_pattern_may_enter("d/x/*.bin", "d") && pbx_pattern_may_enter("d/x/*.bin", "d/x") &&
		   pbx_pattern_may_enter("*/x", "") && !pbx_pattern_may_enter("d/x/*.bin", "e") &&
		   !pbx_pattern_may_enter("*.bin", "d") && !pbx_pattern_may_enter("*/x", ".git"),
	   "a search enters only directories a pattern may match below");
}

static void test_package_patterns(void)
{
	char *t = tmpdir(), *a, *b, *l;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package *p;
	make_tree(t);
	a = xasprintf("%s/note.txt", t);
	write_text(a, "top");
	free(a);
	a = xasprintf("%s/experiment.yaml", t);
	b = xasprintf("%sfiles: [lib, '*.txt', 'data/*.bin']\n", pkg_yaml);
	write_text(a, b);
	free(b);
	p = build(t, NULL, &err);
	ok(p && has_file(p, "lib") && has_file(p, "lib/util.py") && has_file(p, "lib/util.pyc") &&
		   has_file(p, "note.txt") && has_file(p, "data/big.bin") &&
		   !has_file(p, "data/keep.txt") && p->nfiles == 6,
	   "a directory name ships its tree; '*.txt' does not reach data/keep.txt: %s", err.msg);
	pbx_package_free(p);
	b = xasprintf("%sfiles: [lib, lib/util.py, '*/util.pyc']\n", pkg_yaml);
	write_text(a, b);
	free(b);
	p = build(t, NULL, &err);
	ok(p && p->nfiles == 3, "patterns matching inside a directory shipped whole count too: %s",
	   err.msg);
	pbx_package_free(p);
	b = xasprintf("%sfiles: [lib, lib/none.py]\n", pkg_yaml);
	write_text(a, b);
	free(b);
	p = build(t, NULL, &err);
	ok(!p && strstr(err.msg, "experiment.yaml:6: files[1]: 'lib/none.py' matches nothing"),
	   "... and one matching nothing there is still an error: %s", err.msg);
	l = xasprintf("%s/lnk", t);
	ok(symlink("lib", l) == 0, "a symlink to a directory");
	b = xasprintf("%sfiles: [train.py,\n  'lnk/*.py']\n", pkg_yaml);
	write_text(a, b);
	free(b);
	p = build(t, NULL, &err);
	b = xasprintf("%s:7: files[1]: 'lnk/*.py' passes through %s, a symlink to a directory; "
		      "list files below real directories",
		      a, l);
	ok(!p, "a pattern through a symlinked directory is refused");
	is_str(err.msg, b, "... naming the file, line and link");
	free(b);
	free(l);
	free(a);
	rm_rf(t);
	free(t);
}

/* The limits FORMAT.md documents hold together: a list of 100000 points
 * of 4 parameters loads; what passes a limit names the file and line. */
static void test_limits(void)
{
	struct pbx_buf y = PBX_BUF_INIT;
	struct pbx_experiment *e;
	char *big = xmalloc(50001);
	size_t i;
	pbx_buf_adds(&y, "name: big\ncommand: echo {a}\nsweep:\n  list:\n");
	for (i = 0; i < PBX_EXPERIMENT_MAX_POINTS; i++)
		pbx_buf_addf(&y, "    - {a: %zu, b: 1, c: 2, d: 3}\n", i);
	e = parse(y.buf);
	ok(e && e->npoints == PBX_EXPERIMENT_MAX_POINTS,
	   "a list of 100000 points x 4 parameters loads");
	pbx_experiment_free(e);
	pbx_buf_reset(&y);
	pbx_buf_adds(&y, "name: big\ncommand: echo {a}\nsweep:\n  list:\n");
	for (i = 0; i < PBX_EXPERIMENT_MAX_POINTS; i++)
		pbx_buf_addf(&y, "    - {a: %zu, b: 1, c: 2, d: 3, e: 4}\n", i);
	is_str(parse_error(y.buf), "t.yaml:90913: more than 1000000 YAML nodes",
	       "past the YAML node limit: file and line");
	memset(big, 'x', 50000);
	big[50000] = '\0';
	pbx_buf_reset(&y);
	pbx_buf_addf(&y,
		     "name: long\ncommand: echo {v} {v} {v}\nsweep:\n  grid:\n"
		     "    v: [a, %s]\n",
		     big);
	is_str(parse_error(y.buf),
	       "t.yaml:2: command: the command of task 1 is 150013 bytes once "
	       "its parameters are substituted, more than 131000 (one argument of execve)",
	       "a command past the execve limit is refused at load time, with file and line");
	pbx_buf_reset(&y);
	pbx_buf_addf(&y,
		     "name: long\ntrain: {epochs: 1}\nsweep:\n  zip:\n    v: [a, %s]\n"
		     "    w: [b, %s]\n    u: [c, %s]\n",
		     big, big, big);
	ok(strstr(parse_error(y.buf), "t.yaml:2: train: the command of task 1 is ") != NULL,
	   "so is a train: command line");
	free(big);
	pbx_buf_release(&y);
}

static void test_package_git(void)
{
	char *t = tmpdir(), *path;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package *p;
	const char *init[] = { "git", "-C", t, "init", "-q", NULL };
	const char *add[] = { "git", "-C", t, "add", "-A", NULL };
	const char *commit[] = {
		"git",    "-C", t,    "-c",   "user.name=t", "-c", "user.email=t@t",
		"commit", "-q", "-m", "init", NULL
	};
	make_tree(t);
	path = xasprintf("%s/.git", t);
	rm_rf(path);
	free(path);
	p = build(t, NULL, &err);
	ok(p && !p->git_commit && !p->git_diff, "outside git: no commit, no diff");
	pbx_package_free(p);
	if (access("/usr/bin/git", X_OK) != 0) {
		ok(1, "# SKIP git not installed");
		rm_rf(t);
		free(t);
		return;
	}
	ok(run(init) == 0 && run(add) == 0 && run(commit) == 0, "git repo made");
	p = build(t, NULL, &err);
	ok(p && p->git_commit && strlen(p->git_commit) >= 40 && !p->git_diff,
	   "clean checkout: commit");
	pbx_package_free(p);
	path = xasprintf("%s/train.py", t);
	write_text(path, "print('changed')\n");
	free(path);
	p = build(t, NULL, &err);
	ok(p && p->git_commit && p->git_diff && strstr(p->git_diff, "+print('changed')"),
	   "dirty checkout: the diff is recorded");
	pbx_package_free(p);
	rm_rf(t);
	free(t);
}

/* ---- records and the tar file --------------------------------------- */

static void test_records(void)
{
	struct pbx_experiment *e = parse(
		"name: rec\ncommand: echo {v} {n}\nsweep:\n  grid:\n    v: [\"a'b\", \"x\\ny\", '']\n"
		"    n: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n  repeats: 3\n");
	struct pbx_buf dat = PBX_BUF_INIT, idx = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	size_t j, bad = 0, len;
	const char *rec;
	if (!ok(e && e->npoints == 99, "99 points"))
		return;
	ok(pbx_package_records(e, 10, 80, &dat, &idx, &err) == 0, "records for 10..89");
	ok(idx.len == 80 * PBX_PACKAGE_IDX_LINE && dat.len % PBX_PACKAGE_REC_ALIGN == 0,
	   "fixed-width index, aligned data");
	for (j = 0; j < 80; j++) {
		char *head = xasprintf("pbx_rec_index=%zu\nexport PBX_REPEAT='%zu'\n"
				       "export PBX_PARAM_V=",
				       10 + j, (10 + j) % 3);
		char *cmd = pbx_experiment_task_command(e, 10 + j);
		char *qcmd = xasprintf("pbx_rec_cmd=%s", cmd);
		if (pbx_package_record(dat.buf, dat.len, idx.buf, idx.len, j, &rec, &len) < 0 ||
		    strncmp(rec, head, strlen(head)) || rec[len - 1] != '\n' ||
		    !memmem(rec, len, "pbx_rec_end=1\n", 14) || (size_t)(rec - dat.buf) % 64)
			bad++;
		free(head);
		free(cmd);
		free(qcmd);
	}
	ok(bad == 0, "every record found at its index line (%zu bad)", bad);
	ok(pbx_package_record(dat.buf, dat.len, idx.buf, idx.len, 80, &rec, &len) < 0,
	   "past the end: not found");
	pbx_package_record(dat.buf, dat.len, idx.buf, idx.len, 1, &rec, &len);
	ok(memmem(rec, len, "export PBX_PARAM_V='a'\\''b'\n", 27) != NULL,
	   "quoted value in record");
	ok(pbx_package_records(e, 90, 10, &dat, &idx, &err) < 0, "range past the end refused");
	pbx_buf_release(&dat);
	pbx_buf_release(&idx);
	pbx_experiment_free(e);
}

static void write_long_names(const char *t)
{
	char *d = xasprintf("%s/%s", t,
			    "a-directory-with-a-rather-long-name-number-one-0123456789"),
	     *f;
	mkdir(d, 0755);
	f = xasprintf("%s/%s", d,
		      "another-directory-with-a-rather-long-name-number-two-0123456789");
	mkdir(f, 0755);
	free(d);
	d = xasprintf("%s/file-name-longer-than-one-hundred-bytes-"
		      "0123456789012345678901234567890123456789012345678901234567890.txt",
		      f);
	write_text(d, "deep\n");
	free(d);
	free(f);
}

static void test_tar(void)
{
	char *t = tmpdir(), *yaml, *tar, *out, *path, *got;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_experiment *e = NULL;
	struct pbx_package *p;
	struct pbx_buf dat = PBX_BUF_INIT, idx = PBX_BUF_INIT;
	double t0, dt;
	size_t len;
	make_tree(t);
	write_long_names(t);
	yaml = xasprintf("%s/experiment.yaml", t);
	write_text(yaml,
		   "name: big\ncommand: ./run.sh {a} {b} {c}\nsweep:\n  grid:\n"
		   "    a: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n    b: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
		   "    c: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n  repeats: 10\n"
		   "env:\n  X: \"it's\"\n");
	p = build(t, &e, &err);
	if (!ok(p && e && e->npoints == 10000, "10,000-task experiment: %s", err.msg))
		return;
	tar = xasprintf("%s.tar", t);
	t0 = now();
	ok(pbx_package_write_tar(p, e, 0, e->npoints, tar, &err) == 0, "tar written: %s", err.msg);
	dt = now() - t0;
	ok(dt < 1.0, "10,000 tasks written in %.3f s (< 1 s)", dt);
	out = xasprintf("%s.x", t);
	mkdir(out, 0755);
	{
		const char *x[] = { "tar", "-xf", tar, "-C", out, NULL };
		ok(run(x) == 0, "system tar extracts it");
	}
	pbx_package_records(e, 0, e->npoints, &dat, &idx, &err);
	path = xasprintf("%s/tasks.dat", out);
	got = read_text(path, &len);
	ok(len == dat.len && !memcmp(got, dat.buf, len), "tasks.dat round-trips");
	free(got);
	free(path);
	path = xasprintf("%s/code/a-directory-with-a-rather-long-name-number-one-0123456789/"
			 "another-directory-with-a-rather-long-name-number-two-0123456789/"
			 "file-name-longer-than-one-hundred-bytes-"
			 "0123456789012345678901234567890123456789012345678901234567890.txt",
			 out);
	got = read_text(path, &len);
	is_str(got, "deep\n", "a 250-byte path survives (pax)");
	free(got);
	free(path);
	path = xasprintf("%s/tasks.range", out);
	got = read_text(path, &len);
	is_str(got, "0 10000\n", "tasks.range");
	free(got);
	free(path);
	path = xasprintf("%s/env.sh", out);
	got = read_text(path, &len);
	ok(strstr(got, "export X='it'\\''s'\n") != NULL, "env.sh exports the env");
	free(got);
	free(path);
	path = xasprintf("%s/pbx-task.sh", out);
	ok(access(path, X_OK) == 0, "pbx-task.sh is executable");
	free(path);
	path = xasprintf("%s/lib/util.py", t);
	write_text(path, "x = 3\n");
	free(path);
	ok(pbx_package_write_tar(p, e, 0, 5, tar, &err) < 0 && strstr(err.msg, "changed while"),
	   "a file changed since build is refused: %s", err.msg);
	pbx_buf_release(&dat);
	pbx_buf_release(&idx);
	pbx_package_free(p);
	pbx_experiment_free(e);
	rm_rf(out);
	unlink(tar);
	rm_rf(t);
	free(out);
	free(tar);
	free(yaml);
	free(t);
}

/* ---- data: ---------------------------------------------------------- */

static void test_data(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_experiment *e =
		parse("name: d\ncommand: ls data\ndata:\n"
		      "  - { from: gs://my-bucket/fashion-mnist, to: data/fmnist }\n"
		      "  - { to: data/s3, from: \"s3://b-2/x/y/\" }\n"
		      "  - { from: ./local-data/, to: data/local }\n");
	char *key = NULL, id[17], hex[65];
	if (!ok(e != NULL, "three data: entries parse"))
		return;
	ok(e->ndata == 3 && e->data[0].is_url && e->data[1].is_url && !e->data[2].is_url,
	   "two URLs and a local directory");
	is_str(e->data[0].to, "data/fmnist", "to kept");
	ok(e->data[1].line == 5, "line of the entry (%d)", e->data[1].line);
	ok(pbx_experiment_data_key(e, 0, &key, id, &err) == 0, "the URL's key");
	is_str(key, "gs://my-bucket/fashion-mnist/", "normalised with a trailing /");
	pbx_sha256_hex(key, strlen(key), hex);
	hex[16] = '\0';
	is_str(id, hex, "id: the first 16 hex of its SHA-256");
	free(key);
	ok(pbx_experiment_data_key(e, 2, &key, id, &err) < 0, "a missing local directory");
	is_str(err.msg, "t.yaml:6: data[2].from: ././local-data/: No such file or directory",
	       "is an error naming file, line and key");
	ok(pbx_experiment_data_shadows(e, "local-data"), "the package leaves local-data out");
	ok(!pbx_experiment_data_shadows(e, "local"), "and nothing else");
	pbx_experiment_free(e);
	e = parse("name: d\ncommand: ls\ndata:\n  - { from: no-such-dir, to: x }\n");
	ok(e != NULL && pbx_experiment_data_key(e, 0, &key, id, &err) < 0,
	   "a local source that is not there fails at staging, not at parsing");
	pbx_experiment_free(e);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "bad", test_bad },
		{ "grid", test_grid },
		{ "zip_list", test_zip_list },
		{ "random", test_random },
		{ "command", test_command },
		{ "train", test_train },
		{ "resources", test_resources },
		{ "sbatch_opts", test_sbatch_opts },
		{ "files_env", test_files_env },
		{ "image_ref", test_image_ref },
		{ "ignore", test_ignore },
		{ "package_id", test_package_id },
		{ "package_links", test_package_links_globs },
		{ "package_git", test_package_git },
		{ "records", test_records },
		{ "tar", test_tar },
		{ "patterns", test_patterns },
		{ "package_patterns", test_package_patterns },
		{ "limits", test_limits },
		{ "data", test_data },
	};
	size_t i;
	if (argc != 3 || chdir(argv[2]) < 0) {
		fprintf(stderr, "usage: test_experiment TEST TESTS_EXPERIMENT_DIR\n");
		return 2;
	}
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!strcmp(argv[1], tests[i].name) || !strcmp(argv[1], "all"))
			tests[i].fn();
	return tap_done();
}
