/*
 * test_config_write.c - unit tests of src/config/config_write.c, the
 * template written back in config syntax (what pbx on a cluster's head is
 * given, docs/head-identity.md):
 *
 *   roundtrip  every template of write/templates.yaml (and good/),
 *              written and parsed again, equals the one parsed first,
 *              field by field; every member config.h declares in struct
 *              pbx_cluster_template and struct pbx_node_group must be
 *              compared here and have a value other than its default in
 *              some template, so a field added to the structs without the
 *              writer and this test fails
 *   head       the head's form (its own key, ~/.ssh/id_ed25519) loads from
 *              a private file and passes `pbx config check`'s file checks,
 *              and names no file of the user's
 *   sized      a cluster's template after `pbx cluster resize` (a group of
 *              0 nodes, min: and min_nodes above the counts) is written as
 *              config syntax can say it
 *
 * TAP output (tests/common/tap.h).
 * Usage: test_config_write TEST TESTS_CONFIG_DIR CONFIG_H
 */
#include "common/tap.h"
#include "common/tmpdir.h"
#include "config/config.h"
#include "config/config_write.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FIELDS 64

/* The members of one struct the comparison walked, and whether some
 * template gave each a value other than its default. */
struct fields {
	const char *name[MAX_FIELDS];
	int set[MAX_FIELDS];
	size_t n;
};

static struct fields tmpl_fields, group_fields;

/* One comparison: where (for messages), which registry, differences. */
struct cmp {
	const char *where;
	struct fields *f;
	int diffs;
};

static void seen(struct fields *f, const char *name, int set)
{
	size_t i;
	for (i = 0; i < f->n && strcmp(f->name[i], name); i++)
		;
	if (i == f->n) {
		if (f->n == MAX_FIELDS)
			REQUIREF(0, "at most %d members", MAX_FIELDS);
		f->name[f->n++] = name;
	}
	f->set[i] |= set;
}

static void same_str(struct cmp *c, const char *name, const char *a, const char *b)
{
	seen(c->f, name, a != NULL);
	if (a == b || (a && b && !strcmp(a, b)))
		return;
	c->diffs++;
	tap_diag("%s.%s: '%s' read back as '%s'", c->where, name, a ? a : "(null)",
		 b ? b : "(null)");
}

static void same_num(struct cmp *c, const char *name, long long a, long long b, long long dflt)
{
	seen(c->f, name, a != dflt);
	if (a == b)
		return;
	c->diffs++;
	tap_diag("%s.%s: %lld read back as %lld", c->where, name, a, b);
}

#define STR(c, x, y, m)         same_str(c, #m, (x)->m, (y)->m)
#define NUM(c, x, y, m)         same_num(c, #m, (long long)(x)->m, (long long)(y)->m, 0)
#define NUM_DFLT(c, x, y, m, d) same_num(c, #m, (long long)(x)->m, (long long)(y)->m, d)

/* Every member of struct pbx_node_group (`line`, a position in the file,
 * is not compared). */
static void cmp_group(struct cmp *c, const struct pbx_node_group *a, const struct pbx_node_group *b)
{
	STR(c, a, b, name);
	NUM(c, a, b, count);
	STR(c, a, b, machine_type);
	NUM(c, a, b, gpus);
	STR(c, a, b, gpu_type);
	NUM(c, a, b, spot);
	NUM_DFLT(c, a, b, min, -1);
	NUM(c, a, b, cpus);
	seen(c->f, "line", 1);
}

static void cmp_groups(struct cmp *c, const struct pbx_cluster_template *a,
		       const struct pbx_cluster_template *b)
{
	struct cmp g = { c->where, &group_fields, 0 };
	size_t i;
	NUM(c, a, b, ngroups);
	seen(c->f, "groups", a->ngroups > 0);
	for (i = 0; i < a->ngroups && i < b->ngroups; i++)
		cmp_group(&g, &a->groups[i], &b->groups[i]);
	c->diffs += g.diffs;
}

/* A list member m (char **) with its count nm, item by item. */
#define LIST(c, x, y, m, nm) cmp_list(c, #m, (x)->m, (x)->nm, (y)->m, (y)->nm, #nm)
static void cmp_list(struct cmp *c, const char *name, char *const *a, size_t na, char *const *b,
		     size_t nb, const char *count)
{
	size_t i;
	same_num(c, count, (long long)na, (long long)nb, 0);
	seen(c->f, name, na > 0);
	for (i = 0; i < na && i < nb; i++)
		same_str(c, name, a[i], b[i]);
}

/* Every member of struct pbx_cluster_template; returns the differences.
 * `line` is a position in the file and not compared; ssh_key_line only
 * says whether ssh_key was given. */
static int cmp_template(const char *where, struct fields *f, const struct pbx_cluster_template *a,
			const struct pbx_cluster_template *b)
{
	struct cmp c = { where, f, 0 };
	STR(&c, a, b, name);
	STR(&c, a, b, cloud);
	STR(&c, a, b, login_user);
	STR(&c, a, b, ssh_key);
	STR(&c, a, b, image);
	STR(&c, a, b, subnet);
	STR(&c, a, b, head_machine_type);
	STR(&c, a, b, head_service_account);
	STR(&c, a, b, head_instance_profile);
	cmp_groups(&c, a, b);
	NUM(&c, a, b, max_array_size);
	NUM(&c, a, b, max_job_count);
	NUM(&c, a, b, suspend_time);
	NUM(&c, a, b, resume_timeout);
	NUM(&c, a, b, min_nodes);
	NUM(&c, a, b, boot_timeout);
	NUM(&c, a, b, autostop);
	NUM(&c, a, b, autostop_delete);
	NUM(&c, a, b, budget);
	LIST(&c, a, b, ssh_from, nssh_from);
	NUM(&c, a, b, compute_external_ips);
	STR(&c, a, b, proxy);
	LIST(&c, a, b, no_proxy, nno_proxy);
	STR(&c, a, b, host);
	NUM(&c, a, b, port);
	STR(&c, a, b, work_dir);
	STR(&c, a, b, setup);
	NUM(&c, a, b, openssh);
	seen(f, "line", 1);
	same_num(&c, "ssh_key_line", a->ssh_key_line != 0, b->ssh_key_line != 0, 0);
	return c.diffs;
}

static char *read_text(const char *path)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_read_file(path, &b, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	return pbx_buf_detach(&b, NULL);
}

static void write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t len = strlen(text);
	REQUIREF(fd >= 0 && write(fd, text, len) == (ssize_t)len, "write %s", path);
	close(fd);
}

static struct pbx_config *parse_file(const char *path)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_config *cfg = NULL;
	char *text = read_text(path);
	if (!ok(pbx_config_parse(path, text, strlen(text), &cfg, &err) == 0, "%s parses", path))
		tap_diag("%s", err.msg);
	free(text);
	return cfg;
}

/* A configuration of template `t` alone, written with key `ssh_key`, as
 * text (caller frees). */
static char *written_config(const struct pbx_cluster_template *t, const char *ssh_key)
{
	json_t *root = json_object(), *clusters = json_object();
	char *s;
	json_object_set_new(clusters, t->name, pbx_config_template_write(t, ssh_key));
	json_object_set_new(root, "clusters", clusters);
	s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	return s;
}

/* `t` written (with its own key) and parsed again; NULL on a parse error. */
static struct pbx_config *reparse(const struct pbx_cluster_template *t)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_config *cfg = NULL;
	char *text = written_config(t, t->ssh_key);
	if (!ok(pbx_config_parse("written.yaml", text, strlen(text), &cfg, &err) == 0,
		"%s: the written template parses", t->name))
		tap_diag("%s\n%s", err.msg, text);
	free(text);
	return cfg;
}

/* ---- the member names config.h declares ------------------------------ */

/* `text` with every comment blanked out, in place. */
static void strip_comments(char *text)
{
	char *p = text, *end;
	while ((p = strstr(p, "/*"))) {
		end = strstr(p + 2, "*/");
		end = end ? end + 2 : p + strlen(p);
		memset(p, ' ', (size_t)(end - p));
		p = end;
	}
}

/* The identifier that ends declarator `d` ("char *name", "*zone"). */
static void last_ident(const char *d, const char *stop, char *out, size_t size)
{
	const char *e = stop, *b;
	size_t n;
	while (e > d && !(isalnum((unsigned char)e[-1]) || e[-1] == '_'))
		e--;
	for (b = e; b > d && (isalnum((unsigned char)b[-1]) || b[-1] == '_'); b--)
		;
	n = (size_t)(e - b) < size - 1 ? (size_t)(e - b) : size - 1;
	memcpy(out, b, n);
	out[n] = '\0';
}

/* Members of `struct NAME { ... };` in `text` (comments stripped) into
 * names[] (caller frees each); returns how many, -1 when it is not there. */
static int struct_members(const char *text, const char *name, char **names, int max)
{
	char *head = xasprintf("struct %s {", name), ident[64];
	const char *p = strstr(text, head), *end, *decl, *semi, *comma;
	int n = 0;
	free(head);
	if (!p || !(end = strstr(p, "};")))
		return -1;
	for (decl = strchr(p, '{') + 1; (semi = strchr(decl, ';')) && semi < end; decl = semi + 1)
		for (const char *d = decl; d < semi && n < max; d = comma + 1) {
			comma = memchr(d, ',', (size_t)(semi - d));
			if (!comma)
				comma = semi;
			last_ident(d, comma, ident, sizeof(ident));
			if (ident[0])
				names[n++] = xstrdup(ident);
		}
	return n;
}

/* Index of `name` in names[0..n), or n. */
static size_t find_name(const char *const *names, size_t n, const char *name)
{
	size_t i;
	for (i = 0; i < n && strcmp(names[i], name); i++)
		;
	return i;
}

/* Every member of `sname` is in `f` and set in some template, and `f`
 * has no member that config.h lacks. */
static void check_members(const char *text, const char *sname, const struct fields *f)
{
	char *names[MAX_FIELDS];
	int n = struct_members(text, sname, names, MAX_FIELDS), i, uncompared = 0, unset = 0;
	int unknown = 0;
	size_t k;
	REQUIREF(n > 0, "config.h declares struct %s", sname);
	for (i = 0; i < n; i++) {
		k = find_name(f->name, f->n, names[i]);
		if (k == f->n)
			tap_diag("struct %s.%s: not compared (nor written?)", sname, names[i]);
		else if (!f->set[k])
			tap_diag("struct %s.%s: no template of write/templates.yaml sets it", sname,
				 names[i]);
		uncompared += k == f->n;
		unset += k < f->n && !f->set[k];
	}
	for (k = 0; k < f->n; k++)
		if (find_name((const char *const *)names, (size_t)n, f->name[k]) == (size_t)n) {
			tap_diag("compared member %s is not in struct %s", f->name[k], sname);
			unknown++;
		}
	CHECKF(!uncompared,
	       "every member of struct %s (%d) is compared: write it in "
	       "config_write.c, compare it in test_config_write.c",
	       sname, n);
	CHECKF(!unset, "every member of struct %s has a value in write/templates.yaml", sname);
	CHECKF(!unknown, "every member compared is one of struct %s", sname);
	for (i = 0; i < n; i++)
		free(names[i]);
}

/* ---- tests ------------------------------------------------------------ */

/* Every template of `path` written, parsed again and compared. */
static void roundtrip_file(const char *path)
{
	struct pbx_config *cfg = parse_file(path), *back;
	size_t i;
	for (i = 0; cfg && i < cfg->ntemplates; i++) {
		const struct pbx_cluster_template *t = &cfg->templates[i];
		if (!(back = reparse(t)))
			continue;
		if (CHECKF(back->ntemplates == 1, "%s: one template written", t->name))
			CHECKF(cmp_template(t->name, &tmpl_fields, t, &back->templates[0]) == 0,
			       "%s (%s): every field read back equal", t->name, path);
		pbx_config_free(back);
	}
	pbx_config_free(cfg);
}

static void test_roundtrip(const char *config_h)
{
	static const char *const files[] = { "write/templates.yaml", "good/full.yaml",
					     "good/styles.yaml", "good/minimal.yaml" };
	char *header = read_text(config_h);
	size_t i;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		roundtrip_file(files[i]);
	strip_comments(header);
	check_members(header, "pbx_cluster_template", &tmpl_fields);
	check_members(header, "pbx_node_group", &group_fields);
	free(header);
}

/* The head's form of `t` in DIR/head-config.yaml (HOME is DIR): loads,
 * passes the file checks, names the head's key and equals `t` otherwise. */
static void head_one(const char *dir, const struct pbx_cluster_template *t)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_config *cfg = NULL;
	struct pbx_cluster_template want = *t;
	struct fields scratch = { 0 };
	char *path = xasprintf("%s/head-config.yaml", dir),
	     *key = xasprintf("%s/.ssh/id_ed25519", dir);
	char *text = written_config(t, "~/.ssh/id_ed25519");
	write_text(path, text);
	CHECKF(!t->ssh_key || !strstr(text, t->ssh_key), "%s: the user's key is not named",
	       t->name);
	CHECKF(!strstr(text, "gce.json") && !strstr(text, "credentials"), "%s: no credentials file",
	       t->name);
	if (!ok(pbx_config_load(path, 0, &cfg, &err) == 0 && pbx_config_check_files(cfg, &err) == 0,
		"%s: the head's configuration loads and passes pbx config check", t->name))
		tap_diag("%s", err.msg);
	want.ssh_key = key;
	want.ssh_key_line = 1;
	if (cfg)
		CHECKF(cmp_template(t->name, &scratch, &want, &cfg->templates[0]) == 0,
		       "%s: the head's template is the user's, with the head's key", t->name);
	pbx_config_free(cfg);
	free(text);
	free(key);
	free(path);
}

static void test_head(void)
{
	struct pbx_config *cfg = parse_file("write/templates.yaml");
	char *dir = tmpdir_new("cfgwrite"), *ssh = xasprintf("%s/.ssh", dir);
	char *key = xasprintf("%s/id_ed25519", ssh), *conf = xasprintf("%s/head-config.yaml", dir);
	json_t *o;
	size_t i;
	REQUIRE(cfg && mkdir(ssh, 0700) == 0);
	write_text(key, "not a real key\n");
	setenv("HOME", dir, 1); /* pbx-head's HOME */
	for (i = 0; i < cfg->ntemplates; i++)
		head_one(dir, &cfg->templates[i]);
	o = pbx_config_template_write(&cfg->templates[0], NULL);
	CHECK(cfg->templates[0].ssh_key && !json_object_get(o, "ssh_key")); /* none: the agent */
	json_decref(o);
	unlink(conf);
	unlink(key);
	rmdir(ssh);
	CHECK(rmdir(dir) == 0);
	free(conf);
	free(key);
	free(ssh);
	free(dir);
	pbx_config_free(cfg);
}

/* `t` with its groups resized to counts[]; *groups is the copy (caller
 * frees). */
static struct pbx_cluster_template resized(const struct pbx_cluster_template *t, const int *counts,
					   struct pbx_node_group **groups)
{
	struct pbx_cluster_template s = *t;
	size_t i;
	*groups = xcalloc(t->ngroups, sizeof(**groups));
	for (i = 0; i < t->ngroups; i++) {
		(*groups)[i] = t->groups[i];
		(*groups)[i].count = counts[i];
	}
	s.groups = *groups;
	return s;
}

static void test_sized(void)
{
	struct pbx_config *cfg = parse_file("write/templates.yaml"), *back;
	const int gce_counts[] = { 0, 1 }, power_counts[] = { 1, 4, 3, 1 };
	struct pbx_node_group *groups;
	struct pbx_cluster_template s;
	REQUIRE(cfg);
	/* gce-gpu: cpu resized to 0, gpu to 1: min_nodes 4 is all (1) now */
	s = resized(pbx_config_template(cfg, "gce-gpu"), gce_counts, &groups);
	if ((back = reparse(&s))) {
		const struct pbx_cluster_template *b = &back->templates[0];
		CHECK(b->ngroups == 1 && !strcmp(b->groups[0].name, "gpu"));
		CHECK(b->groups[0].count == 1 && b->min_nodes == 1);
		CHECK(b->groups[0].gpus == 2 && b->groups[0].spot && b->autostop_delete);
	}
	pbx_config_free(back);
	free(groups);
	/* power: fixed (min 2 = max 2) resized to 1: min 1, max 1 */
	s = resized(pbx_config_template(cfg, "power"), power_counts, &groups);
	if ((back = reparse(&s))) {
		const struct pbx_cluster_template *b = &back->templates[0];
		CHECK(b->ngroups == 4 && b->groups[3].count == 1 && b->groups[3].min == 1);
		CHECK(b->groups[1].count == 4 && b->groups[1].min == 1);
		CHECK(b->groups[2].count == 3 && b->groups[2].min == 0);
	}
	pbx_config_free(back);
	free(groups);
	pbx_config_free(cfg);
}

int main(int argc, char **argv)
{
	const char *test = argc > 1 ? argv[1] : "";
	if (argc < 4 || chdir(argv[2]) < 0) {
		fprintf(stderr, "usage: test_config_write roundtrip|head|sized TESTS_CONFIG_DIR "
				"CONFIG_H\n");
		return 2;
	}
	if (!strcmp(test, "roundtrip"))
		test_roundtrip(argv[3]);
	else if (!strcmp(test, "head"))
		test_head();
	else if (!strcmp(test, "sized"))
		test_sized();
	else {
		fprintf(stderr, "test_config_write: unknown test '%s'\n", test);
		return 2;
	}
	return tap_done();
}
