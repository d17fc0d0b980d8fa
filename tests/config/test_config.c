/*
 * test_config.c - unit tests of src/config: the bad-config corpus (each
 * bad/NAME.yaml must fail with exactly the message in bad/NAME.err), good
 * configs with their parsed fields, the shipped templates/config.yaml,
 * loading (permissions, missing file, key-file check), "loading writes
 * nothing", and the generic yamltree reader.  TAP output
 * (tests/common/tap.h).
 *
 * Usage: test_config TEST TESTS_CONFIG_DIR TEMPLATES_DIR
 */
#include "common/tap.h"
#include "common/tmpdir.h"
#include "config/config.h"
#include "config/yamltree.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || fchmod(fd, mode) < 0) {
		perror(path);
		exit(1);
	}
	close(fd);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in `dir` ending in `suffix`; caller frees each and the array. */
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

/* ---- bad corpus ------------------------------------------------------ */

static void bad_one(const char *name)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *rel = xasprintf("bad/%s", name);
	char *errpath = xasprintf("bad/%.*s.err", (int)(strlen(name) - 5), name);
	size_t len, elen;
	char *text = read_text(rel, &len), *want = read_text(errpath, &elen);
	while (elen && (want[elen - 1] == '\n'))
		want[--elen] = '\0';
	if (!CHECKF(pbx_config_parse(rel, text, len, &cfg, &err) != 0, "%s is refused", rel)) {
		tap_diag("%s loaded, but should have failed with: %s", rel, want);
		pbx_config_free(cfg);
	} else {
		CHECK(cfg == NULL);
		CHECK(err.code == PBX_EXIT_USAGE);
		if (!CHECK_STR(err.msg, want))
			tap_diag("%s: wrong message", rel);
	}
	free(text);
	free(want);
	free(rel);
	free(errpath);
}

static void test_bad(const char *dir)
{
	size_t i, n;
	char **names;
	if (chdir(dir) < 0) {
		perror(dir);
		exit(1);
	}
	names = list_dir("bad", ".yaml", &n);
	CHECK(n >= 16);
	for (i = 0; i < n; i++) {
		bad_one(names[i]);
		free(names[i]);
	}
	free(names);
	tap_diag("%zu bad configs checked", n);
}

/* ---- good configs ---------------------------------------------------- */

static struct pbx_config *parse_file(const char *path)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t len;
	char *text = read_text(path, &len);
	if (!CHECKF(pbx_config_parse(path, text, len, &cfg, &err) >= 0, "%s loads", path))
		tap_diag("%s: unexpected error: %s", path, err.msg);
	free(text);
	return cfg;
}

static void check_full(const struct pbx_config *cfg)
{
	const struct pbx_cluster_template *t = pbx_config_template(cfg, "train");
	CHECK(cfg->ntemplates == 3);
	CHECK(t && t == &cfg->templates[1]);
	if (!t)
		return;
	CHECK_STR(t->cloud, "gce");
	CHECK_STR(t->login_user, "pbx");
	CHECK_STR(t->image, "projects/debian-cloud/global/images/family/debian-12");
	CHECK_STR(t->head_machine_type, "e2-standard-4");
	CHECK(t->ngroups == 2 && t->line == 11);
	CHECK(t->autostop == 3600); /* gce's default */
	CHECK(cfg->templates[0].autostop == 0 && cfg->templates[2].autostop == 5400);
	CHECK(t->budget == 0 && cfg->templates[2].budget == 12500000000LL); /* none; 12.5 */
	CHECK_STR(t->groups[1].name, "gpu");
	CHECK(t->groups[1].count == 4 && t->groups[1].gpus == 2 && t->groups[1].spot);
	CHECK_STR(t->groups[1].gpu_type, "nvidia-tesla-t4");
	CHECK(t->groups[0].gpus == 0 && !t->groups[0].spot && !t->groups[0].gpu_type);
	CHECK(pbx_template_node_count(t) == 5);
	CHECK(t->ssh_key && t->ssh_key[0] != '~' && strstr(t->ssh_key, "/.pbx/id_ed25519"));
	CHECK(t->ssh_key_line == 14);
	CHECK_STR(cfg->gce.project, "my-project");
	CHECK_STR(cfg->gce.zone, "us-central1-a");
	CHECK(cfg->gce.credentials && cfg->gce.credentials_line > 0);
	CHECK_STR(cfg->aws.region, "eu-west-1");
	CHECK(cfg->aws.profile == NULL);
	CHECK_STR(cfg->aws.endpoint, "http://127.0.0.1:4566");
	CHECK_STR(cfg->aws.subnet, "subnet-0a");
	CHECK(cfg->aws.nsubnets == 2 && !strcmp(cfg->aws.subnets[1], "subnet-0b"));
	CHECK(cfg->aws.disk_gb == 100);
	t = pbx_config_template(cfg, "ec2");
	CHECK(t && t->subnet && !strcmp(t->subnet, "subnet-0c"));
	CHECK_STR(cfg->local.address_base, "127.0.2.0");
	CHECK(cfg->local.ssh_port == 2222 && cfg->local.slurm_port_base == 18000);
	CHECK(!strcmp(cfg->prices.currency, "EUR") && cfg->prices.max_age == 12 * 3600);
	CHECK(cfg->prices.nhourly == 2 && !strcmp(cfg->prices.hourly[1].name, "g4dn.xlarge") &&
	      cfg->prices.hourly[1].nanos == 526000000 && cfg->prices.hourly[0].nanos == 380000000);
	CHECK(cfg->prices.nspot_hourly == 1 && cfg->prices.spot_hourly[0].nanos == 80000000);
	CHECK(cfg->prices.ngpu_hourly == 1 && cfg->prices.gpu_hourly[0].nanos == 350000000);
	t = pbx_config_template(cfg, "local");
	CHECK(t && !t->ssh_key && t->ngroups == 1);
	if (t) {
		CHECK_STR(t->login_user, "root");
		CHECK_STR(t->image, "host");
	}
	CHECK(pbx_config_template(cfg, "nope") == NULL);
}

static void check_minimal(const struct pbx_config *cfg)
{
	const struct pbx_cluster_template *t = &cfg->templates[0];
	CHECK(cfg->ntemplates == 1);
	CHECK_STR(t->name, "dev");
	CHECK_STR(t->cloud, "local");
	CHECK_STR(t->login_user, "root");
	CHECK_STR(t->image, "host");
	CHECK(t->ssh_key == NULL && t->head_machine_type == NULL);
	CHECK(t->ngroups == 1 && t->groups[0].count == 3 && t->groups[0].gpus == 0);
	CHECK(t->groups[0].machine_type == NULL);
	CHECK_STR(cfg->local.address_base, "127.0.1.0");
	CHECK(cfg->local.ssh_port == 22022 && cfg->local.slurm_port_base == 17000);
	CHECK(cfg->gce.project == NULL && cfg->aws.region == NULL);
}

static void check_styles(const struct pbx_config *cfg)
{
	const struct pbx_cluster_template *t = pbx_config_template(cfg, "flow");
	CHECK(cfg->ntemplates == 2 && t);
	if (!t)
		return;
	CHECK_STR(t->cloud, "aws");
	CHECK_STR(t->login_user, "admin");
	CHECK(t->ngroups == 2 && t->groups[0].spot && !t->groups[1].spot);
	CHECK(t->ssh_key == NULL);
	CHECK_STR(t->groups[1].machine_type, "g5.xlarge");
	t = pbx_config_template(cfg, "nulls");
	CHECK(t && t->ssh_key == NULL && t->head_machine_type == NULL);
}

static void test_good(const char *dir)
{
	struct pbx_config *cfg;
	if (chdir(dir) < 0) {
		perror(dir);
		exit(1);
	}
	if ((cfg = parse_file("good/full.yaml")))
		check_full(cfg);
	pbx_config_free(cfg);
	if ((cfg = parse_file("good/minimal.yaml")))
		check_minimal(cfg);
	pbx_config_free(cfg);
	if ((cfg = parse_file("good/styles.yaml")))
		check_styles(cfg);
	pbx_config_free(cfg);
}

static void test_template(const char *templates)
{
	char *path = xasprintf("%s/config.yaml", templates);
	struct pbx_config *cfg = parse_file(path);
	const struct pbx_cluster_template *t;
	free(path);
	if (!cfg)
		return;
	CHECK(cfg->ntemplates >= 3);
	t = pbx_config_template(cfg, "local");
	CHECK(t && !strcmp(t->cloud, "local"));
	t = pbx_config_template(cfg, "gce-gpu");
	CHECK(t && !strcmp(t->cloud, "gce"));
	if (t) {
		size_t i;
		int gpus = 0;
		for (i = 0; i < t->ngroups; i++)
			gpus += t->groups[i].gpus;
		CHECK(gpus > 0);
	}
	t = pbx_config_template(cfg, "aws");
	CHECK(t && !strcmp(t->cloud, "aws"));
	pbx_config_free(cfg);
}

static void test_describe(void)
{
	struct pbx_config *cfg = pbx_config_default();
	struct pbx_node_group g[2] = {
		{ "cpu", 1, "e2-standard-4", 0, NULL, true, 0 },
		{ "gpu", 4, "n1-standard-8", 2, "nvidia-tesla-t4", true, 0 },
	};
	struct pbx_cluster_template t = { 0 };
	char *s = pbx_template_describe(&cfg->templates[0]);
	CHECK_STR(s, "local: 2 x node (2 GPU)");
	free(s);
	CHECK_STR(cfg->path, "(built-in)");
	CHECK(pbx_template_node_count(&cfg->templates[0]) == 2);
	CHECK(cfg->templates[0].ssh_key == NULL);
	pbx_config_free(cfg);
	t.cloud = "gce";
	t.groups = g;
	t.ngroups = 2;
	t.head_machine_type = "e2-standard-2";
	s = pbx_template_describe(&t);
	CHECK_STR(s, "gce: 1 x cpu e2-standard-4 (spot), 4 x gpu n1-standard-8 "
		     "(2 GPU nvidia-tesla-t4, spot), head e2-standard-2");
	free(s);
	CHECK(pbx_config_name_ok("a") && pbx_config_name_ok("gpu-2x"));
	CHECK(!pbx_config_name_ok("") && !pbx_config_name_ok("2a") && !pbx_config_name_ok("a-"));
	CHECK(!pbx_config_name_ok("abcdefghijklmnopqrstuvwxyz012345"));
	CHECK(pbx_config_name_ok("abcdefghijklmnopqrstuvwxyz01234"));
}

/* ---- loading from disk ----------------------------------------------- */

static const char good_yaml[] = "clusters:\n"
				"  dev:\n"
				"    cloud: local\n"
				"    ssh_key: KEY\n"
				"    node_groups: [{name: node, count: 1}]\n";

/* Writes DIR/NAME with "KEY" in `yaml` replaced by DIR/key; returns the
 * path (caller frees). */
static char *write_config(const char *dir, const char *name, const char *yaml, mode_t mode)
{
	char *path = xasprintf("%s/%s", dir, name), *key = xasprintf("%s/key", dir);
	struct pbx_buf b = PBX_BUF_INIT;
	const char *at = strstr(yaml, "KEY");
	if (at) {
		pbx_buf_add(&b, yaml, (size_t)(at - yaml));
		pbx_buf_addf(&b, "%s%s", key, at + 3);
	} else {
		pbx_buf_adds(&b, yaml);
	}
	write_text(path, b.buf, mode);
	pbx_buf_release(&b);
	free(key);
	return path;
}

static void test_load_perms(const char *dir)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *path = write_config(dir, "config.yaml", good_yaml, 0664);
	char want[1024];
	CHECK(pbx_config_load(path, 0, &cfg, &err) < 0 && cfg == NULL);
	CHECK(err.code == PBX_EXIT_SECURITY && strstr(err.msg, "chmod"));
	snprintf(want, sizeof(want),
		 "%s is writable by others (mode 664); refusing to use it: "
		 "run 'chmod go-w %s'",
		 path, path);
	CHECK_STR(err.msg, want);
	chmod(path, 0644);
	CHECK(pbx_config_load(path, 0, &cfg, &err) == 0 && cfg);
	if (cfg)
		CHECK_STR(cfg->path, path);
	pbx_config_free(cfg);
	free(path);
}

static void test_load_missing(const char *dir)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *path = xasprintf("%s/absent.yaml", dir), want[1024];
	CHECK(pbx_config_load(path, 1, &cfg, &err) == 0 && cfg);
	if (cfg) {
		CHECK(cfg->ntemplates == 1 && pbx_config_template(cfg, "local"));
		CHECK(pbx_config_check_files(cfg, &err) == 0);
	}
	pbx_config_free(cfg);
	CHECK(pbx_config_load(path, 0, &cfg, &err) < 0 && err.code == PBX_EXIT_USAGE);
	snprintf(want, sizeof(want), "cannot read configuration %s: No such file or directory",
		 path);
	CHECK_STR(err.msg, want);
	CHECK(pbx_config_load(dir, 1, &cfg, &err) < 0 && err.code == PBX_EXIT_USAGE);
	snprintf(want, sizeof(want), "%s: not a regular file", dir);
	CHECK_STR(err.msg, want);
	free(path);
}

static void test_check_files(const char *dir)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *path = write_config(dir, "config.yaml", good_yaml, 0600),
	     *key = xasprintf("%s/key", dir);
	char want[1024];
	CHECK(pbx_config_load(path, 0, &cfg, &err) == 0);
	if (!cfg)
		goto out;
	CHECK(pbx_config_check_files(cfg, &err) < 0 && err.code == PBX_EXIT_USAGE);
	snprintf(want, sizeof(want),
		 "%s:4: clusters.dev.ssh_key: cannot use %s: "
		 "No such file or directory",
		 path, key);
	CHECK_STR(err.msg, want);
	write_text(key, "not really a key\n", 0644);
	CHECK(pbx_config_check_files(cfg, &err) < 0 && err.code == PBX_EXIT_SECURITY);
	snprintf(want, sizeof(want),
		 "%s:4: clusters.dev.ssh_key: %s is accessible by others "
		 "(mode 644); refusing to use it: run 'chmod 600 %s'",
		 path, key, key);
	CHECK_STR(err.msg, want);
	chmod(key, 0600);
	CHECK(pbx_config_check_files(cfg, &err) == 0);
out:
	pbx_config_free(cfg);
	unlink(key);
	free(key);
	free(path);
}

static void test_load(void)
{
	char *dir = tmpdir_new("config-test");
	struct pbx_err err = PBX_ERR_INIT;
	test_load_perms(dir);
	test_load_missing(dir);
	test_check_files(dir);
	CHECK(pbx_rm_rf(dir, &err) == 0);
	free(dir);
}

/* ---- loading writes nothing ------------------------------------------ */

/* `text` as TAP diagnostics, one "#" line per line, under a label. */
static void diag_lines(const char *label, const char *text)
{
	tap_diag("%s", label);
	while (*text) {
		size_t n = strcspn(text, "\n");
		tap_diag("  %.*s", (int)n, text);
		text += n + (text[n] == '\n');
	}
}

/* Appends "name mode size mtime ctime sha256" for each entry of `dir`. */
static void snapshot(const char *dir, struct pbx_buf *out)
{
	size_t i, n;
	char **names = list_dir(dir, "", &n);
	for (i = 0; i < n; i++) {
		char *p = xasprintf("%s/%s", dir, names[i]), hex[65] = "-";
		struct pbx_err err = PBX_ERR_INIT;
		struct stat st;
		if (strcmp(names[i], "..") && lstat(p, &st) == 0) {
			if (S_ISREG(st.st_mode))
				pbx_sha256_file(p, hex, &err);
			pbx_buf_addf(out, "%s %o %lld %lld.%09ld %lld.%09ld %s\n", names[i],
				     (unsigned)st.st_mode, (long long)st.st_size,
				     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
				     (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec, hex);
			if (S_ISDIR(st.st_mode) && strcmp(names[i], ".") && strcmp(names[i], ".."))
				snapshot(p, out);
		}
		free(p);
		free(names[i]);
	}
	free(names);
}

static void try_loads(const char *dir)
{
	static const char *const files[] = { "bad.yaml", "open.yaml", "good.yaml", "absent.yaml" };
	size_t i;
	for (i = 0; i < 4; i++) {
		struct pbx_config *cfg = NULL;
		struct pbx_err err = PBX_ERR_INIT;
		char *p = xasprintf("%s/%s", dir, files[i]);
		if (pbx_config_load(p, i == 3, &cfg, &err) == 0) {
			CHECK(i >= 2);
			pbx_config_check_files(cfg, &err);
		}
		pbx_config_free(cfg);
		free(p);
	}
}

static void test_nowrite(void)
{
	struct pbx_buf before = PBX_BUF_INIT, after = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *dir = tmpdir_new("config-test");
	free(write_config(
		dir, "bad.yaml",
		"clusters:\n  x:\n    cloud: local\n    node_groups: [{name: n, count: two}]\n",
		0600));
	free(write_config(dir, "open.yaml", good_yaml, 0666));
	free(write_config(dir, "good.yaml", good_yaml, 0600));
	free(write_config(dir, "key", "key\n", 0644));
	snapshot(dir, &before);
	try_loads(dir);
	snapshot(dir, &after);
	CHECK(strstr(before.buf, "\nkey 100644 4 ") && strstr(before.buf, "\nopen.yaml 100666 "));
	if (!CHECKF(strcmp(before.buf, after.buf) == 0,
		    "loading changed nothing in the directory")) {
		diag_lines("--- before", before.buf);
		diag_lines("+++ after", after.buf);
	}
	pbx_buf_release(&before);
	pbx_buf_release(&after);
	CHECK(pbx_rm_rf(dir, &err) == 0);
	free(dir);
}

/* ---- the generic reader ----------------------------------------------- */

static const char tree_yaml[] = "name: exp\n"                  /* 1 */
				"steps:\n"                     /* 2 */
				"  - run: train\n"             /* 3 */
				"    args: [--lr, '0.1', 3]\n" /* 4 */
				"  - {run: eval, n: 12}\n"     /* 5 */
				"flag: yes\n"                  /* 6 */
				"empty:\n"                     /* 7 */
				"nul: \"a\\0b\"\n";            /* 8 */

static void test_tree_nodes(const struct pbx_ydoc *doc)
{
	const struct pbx_ynode *steps = pbx_ymap_get(doc->root, "steps"), *args, *n;
	char *path;
	CHECK(doc->root->type == PBX_YMAP && doc->root->npairs == 5);
	CHECK(steps && steps->type == PBX_YSEQ && steps->nitems == 2 && steps->line == 3);
	if (!steps || steps->nitems != 2)
		return;
	args = pbx_ymap_get(steps->items[0], "args");
	CHECK(args && args->nitems == 3 && args->line == 4 && args->column == 11);
	if (!args || args->nitems != 3)
		return;
	CHECK(args->items[1]->quoted && !args->items[2]->quoted);
	path = pbx_ynode_path(args->items[2]);
	CHECK_STR(path, "steps[0].args[2]");
	free(path);
	n = pbx_ymap_get(steps->items[1], "n");
	path = pbx_ynode_path(n);
	CHECK_STR(path, "steps[1].n");
	free(path);
	path = pbx_ynode_path(doc->root);
	CHECK_STR(path, "");
	free(path);
	CHECK(pbx_ynode_is_null(pbx_ymap_get(doc->root, "empty")));
	CHECK(pbx_ymap_get(doc->root, "nul")->len == 3);
	CHECK(pbx_ymap_get(NULL, "x") == NULL && pbx_ymap_get(args, "x") == NULL);
}

static void test_tree_getters(const struct pbx_ydoc *doc)
{
	static const char *const known[] = { "name", "steps", "flag", "empty", NULL };
	const struct pbx_ynode *root = doc->root;
	const struct pbx_ynode *steps = pbx_ymap_get(root, "steps");
	struct pbx_err err = PBX_ERR_INIT;
	long v = 0;
	bool b = false;
	char *s = NULL;
	CHECK(pbx_ynode_bool(pbx_ymap_get(root, "flag"), &b, &err) == 0 && b);
	CHECK(pbx_ynode_int(pbx_ymap_get(steps->items[1], "n"), 0, 100, &v, &err) == 0 && v == 12);
	CHECK(pbx_ynode_int(pbx_ymap_get(steps->items[1], "n"), 1, 10, &v, &err) < 0);
	CHECK_STR(err.msg, "exp.yaml:5: steps[1].n: must be at most 10, got '12'");
	CHECK(pbx_ynode_int(pbx_ymap_get(steps->items[1], "n"), -5, 5, &v, &err) < 0);
	CHECK_STR(err.msg, "exp.yaml:5: steps[1].n: must be an integer between -5 and 5, got '12'");
	CHECK(pbx_ynode_str(pbx_ymap_get(root, "nul"), 0, &s, &err) < 0 && !s);
	CHECK_STR(err.msg, "exp.yaml:8: nul: must not contain NUL bytes");
	CHECK(pbx_ynode_str(pbx_ymap_get(root, "empty"), PBX_YSTR_NULL_OK, &s, &err) == 0 && !s);
	CHECK(pbx_ynode_str(pbx_ymap_get(root, "empty"), 0, &s, &err) < 0);
	CHECK_STR(err.msg, "exp.yaml:7: empty: must be a non-empty string, got null");
	CHECK(pbx_ynode_str(steps, 0, &s, &err) < 0);
	CHECK_STR(err.msg, "exp.yaml:3: steps: must be a non-empty string, got a sequence");
	CHECK(pbx_ymap_check_keys(root, known, &err) < 0);
	CHECK_STR(err.msg,
		  "exp.yaml:8: nul: unknown key (expected one of name, steps, flag, empty)");
	CHECK(pbx_ymap_missing(steps->items[0], "image", NULL, &err) < 0);
	CHECK_STR(err.msg, "exp.yaml:3: steps[0].image: required key is missing");
	CHECK(pbx_ymap_missing(root, "image", "needed", &err) < 0);
	CHECK_STR(err.msg, "exp.yaml:1: image: needed");
	CHECK(pbx_ynode_expect_map(steps, &err) < 0);
	CHECK_STR(err.msg, "exp.yaml:3: steps: must be a mapping, got a sequence");
}

static void test_tree_errors(void)
{
	struct pbx_ydoc *doc = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	static const char dup[] = "a:\n  - {x: 1, y: 2}\n  - {y: 1, x: 2, y: 3, x: 4}\n";
	CHECK(pbx_ydoc_parse("d.yaml", dup, strlen(dup), &doc, &err) < 0 && !doc);
	CHECK_STR(err.msg, "d.yaml:3: a[1].y: duplicate key (first given at line 3)");
	CHECK(pbx_ydoc_parse("e.yaml", "", 0, &doc, &err) == 0 && doc && !doc->root);
	pbx_ydoc_free(doc);
	CHECK(pbx_edit_distance("cloud", "colud", 2) == 2);
	CHECK(pbx_edit_distance("gpus", "gpu", 2) == 1);
	CHECK(pbx_edit_distance("abc", "abc", 2) == 0);
	CHECK(pbx_edit_distance("a", "abcdefgh", 2) == 3);
	CHECK(pbx_edit_distance("kitten", "sitting", 5) == 3);
}

static void test_yamltree(void)
{
	struct pbx_ydoc *doc = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	if (!CHECKF(pbx_ydoc_parse("exp.yaml", tree_yaml, strlen(tree_yaml), &doc, &err) >= 0,
		    "exp.yaml parses")) {
		tap_diag("unexpected: %s", err.msg);
		return;
	}
	test_tree_nodes(doc);
	test_tree_getters(doc);
	pbx_ydoc_free(doc);
	test_tree_errors();
}

/* ---- endpoints: plain http only to loopback ---------------------------- */

/* clouds.CLOUD.endpoint = url must load (want_ok) or fail at line 4
 * naming the key, never quoting the URL (it may carry user:password). */
static void endpoint_one(const char *cloud, const char *url, int want_ok)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *text =
		xasprintf("clusters: {dev: {cloud: local, node_groups: [{name: n, count: 1}]}}\n"
			  "clouds:\n  %s:\n    endpoint: '%s'\n",
			  cloud, url);
	char *want = xasprintf("c.yaml:4: clouds.%s.endpoint: ", cloud);
	int rc = pbx_config_parse("c.yaml", text, strlen(text), &cfg, &err);
	if (want_ok) {
		if (!CHECKF(rc >= 0, "%s endpoint %s is accepted", cloud, url))
			tap_diag("unexpected error: %s", err.msg);
	} else if (CHECKF(rc != 0, "%s endpoint %s is refused", cloud, url)) {
		CHECK(err.code == PBX_EXIT_USAGE);
		CHECK(strncmp(err.msg, want, strlen(want)) == 0);
		CHECK(strstr(err.msg, "s3cret") == NULL);
	}
	pbx_config_free(cfg);
	free(want);
	free(text);
}

static void test_endpoints(void)
{
	static const struct {
		const char *url;
		int ok;
	} cases[] = {
		{ "https://compute.googleapis.com/compute/v1/", 1 },
		{ "https://ec2.eu-west-1.amazonaws.com", 1 },
		{ "http://127.0.0.1:4566", 1 },
		{ "http://127.9.8.7:80/x/", 1 },
		{ "http://localhost:8080", 1 },
		{ "http://LOCALHOST:8080", 1 },
		{ "http://[::1]:8080/", 1 },
		{ "http://169.254.169.254", 1 },
		{ "http://compute.googleapis.com/compute/v1/", 0 },
		{ "http://user:s3cret@ec2.eu-west-1.amazonaws.com", 0 },
		{ "http://10.0.0.1:4566", 0 },
		{ "http://127.0.0.1.evil.example/", 0 },
		{ "http://localhost.evil.example/", 0 },
		{ "http://[::2]/", 0 },
		{ "http://[::ffff:10.0.0.1]/", 0 },
		{ "http://128.0.0.1/", 0 },
		{ "ftp://127.0.0.1/", 0 },
		{ "file:///etc/passwd", 0 },
		{ "gopher://127.0.0.1/", 0 },
		{ "not a url", 0 },
	};
	size_t i;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		endpoint_one("gce", cases[i].url, cases[i].ok);
		endpoint_one("aws", cases[i].url, cases[i].ok);
	}
	tap_diag("%zu endpoints checked", i);
}

int main(int argc, char **argv)
{
	const char *test = argc > 1 ? argv[1] : "";
	const char *dir = argc > 2 ? argv[2] : ".";
	if (!strcmp(test, "bad"))
		test_bad(dir);
	else if (!strcmp(test, "good"))
		test_good(dir);
	else if (!strcmp(test, "template"))
		test_template(argc > 3 ? argv[3] : ".");
	else if (!strcmp(test, "describe"))
		test_describe();
	else if (!strcmp(test, "load"))
		test_load();
	else if (!strcmp(test, "nowrite"))
		test_nowrite();
	else if (!strcmp(test, "yamltree"))
		test_yamltree();
	else if (!strcmp(test, "endpoints"))
		test_endpoints();
	else {
		fprintf(stderr,
			"usage: test_config bad|good|template|describe|load|nowrite|yamltree|endpoints "
			"TESTS_CONFIG_DIR [TEMPLATES_DIR]\n");
		return 2;
	}
	return tap_done();
}
