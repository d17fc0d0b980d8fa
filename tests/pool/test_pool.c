/*
 * test_pool.c - what `pbx publish` and `pbx pull` rely on without a
 * bucket (src/pool): a record made from the store's rows reads back the
 * same; object names split only when they are a task's; a task's object
 * unpacks to what went in; hostile archives (a link, "..", not gzip) are
 * refused and leave nothing; pooled rows round-trip through the store;
 * the pooled report's disagreement rule.
 */
#include "common/tap.h"
#include "common/tmpdir.h"
#include "experiment/tar.h"
#include "pool/pool_internal.h"
#include "store/pool.h"
#include "util/fs.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define PKG_ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_record(void)
{
	struct pbx_package_row pkg = { 0 };
	struct pbx_submission_row sub = { 0 };
	struct pbx_task_row task = { 0 };
	struct pbx_metric pts[2] = { { 3, 10, "loss", 0.25, 0 }, { 3, 20, "loss", 0, 1 } };
	struct pool_record_in in = { 0 };
	struct pool_record r;
	struct pbx_err err = PBX_ERR_INIT;
	char *text;
	pkg.id = PKG_ID;
	pkg.short_id = "0123456789ab";
	pkg.name = "sweep";
	pkg.experiment_text = "name: sweep\n";
	pkg.git_diff = "diff --git a b\n";
	sub.cluster_name = "c1";
	task.idx = 3;
	task.params_json = "{\"lr\": \"0.1\", \"repeat\": \"1\"}"; /* as the store holds them */
	task.state = "COMPLETED";
	task.exit_code = 0;
	task.start_time = 100;
	task.end_time = 160;
	in.publisher = "alice";
	in.pkg = &pkg;
	in.sub = &sub;
	in.task = &task;
	in.pts = pts;
	in.npts = 2;
	in.now = 200;
	text = pool_record_make(&in);
	REQUIRE(text != NULL);
	ok(strstr(text, "\"git_diff_sha256\"") && !strstr(text, "diff --git"),
	   "the record holds a hash of the uncommitted diff, not the diff");
	REQUIRE(pool_record_parse(text, strlen(text), &r, &err) == 0);
	CHECK_STR(r.publisher, "alice");
	CHECK_STR(r.package_id, PKG_ID);
	CHECK_STR(r.experiment, "sweep");
	CHECK_STR(r.state, "COMPLETED");
	CHECK_STR(r.params_json, "{\"lr\":\"0.1\",\"repeat\":\"1\"}");
	ok(r.idx == 3 && r.start_time == 100 && r.end_time == 160,
	   "task index and times read back");
	ok(r.nmetrics == 2 && !strcmp(r.metrics[0].name, "loss") && r.metrics[0].step == 10 &&
		   r.metrics[0].value == 0.25 && !r.metrics[0].is_null && r.metrics[1].is_null,
	   "metric points read back, a null one as null");
	pool_record_free(&r);
	free(text);
}

/* parse must refuse `text`, with a message holding `why` */
static void refused(const char *text, const char *why)
{
	struct pool_record r;
	struct pbx_err err = PBX_ERR_INIT;
	int rc = pool_record_parse(text, strlen(text), &r, &err);
	ok(rc < 0 && strstr(err.msg, why), "refused: %s (%s)", why, err.msg);
}

static void test_record_refusals(void)
{
	refused("[1,", "pbx-task.json: line");
	refused("{\"format\":\"pbx-task/2\"}", "'format'");
	refused("{\"format\":\"pbx-task/1\",\"publisher\":\"a\\u0001b\"}", "control character");
	refused("{\"format\":\"pbx-task/1\",\"publisher\":\"a\",\"package\":{\"id\":\"xyz\","
		"\"experiment\":\"e\"}}",
		"64 hex");
	refused("{\"format\":\"pbx-task/1\",\"publisher\":\"a\",\"package\":{\"id\":\"" PKG_ID
		"\",\"experiment\":\"e\"},\"task\":{\"idx\":-1,\"state\":\"X\",\"params\":{}},"
		"\"metrics\":[]}",
		"'idx'");
	refused("{\"format\":\"pbx-task/1\",\"publisher\":\"a\",\"package\":{\"id\":\"" PKG_ID
		"\",\"experiment\":\"e\"},\"task\":{\"idx\":1,\"state\":\"X\",\"params\":{}},"
		"\"metrics\":[[\"loss\",-5,1]]}",
		"metrics point");
	refused("{\"format\":\"pbx-task/1\",\"format\":\"pbx-task/1\"}", "duplicate");
}

static void test_names(void)
{
	char pub[65], id[13];
	int64_t idx = -1;
	char *name = pool_object_name("hw3/", "alice", "0123456789ab", 12);
	CHECK_STR(name, "hw3/alice/0123456789ab/12.tar.gz");
	ok(pool_object_parse("hw3/", name, pub, id, &idx) == 0 && !strcmp(pub, "alice") &&
		   !strcmp(id, "0123456789ab") && idx == 12,
	   "a task object's name splits into publisher, package and task");
	free(name);
	ok(pool_object_parse("hw3/", "hw3/alice/publisher.json", pub, id, &idx) < 0,
	   "a publisher claim is not a task object");
	ok(pool_object_parse("hw3/", "hw3/../0123456789ab/1.tar.gz", pub, id, &idx) < 0,
	   "'..' as a publisher is refused");
	ok(pool_object_parse("hw3/", "hw3/alice/0123456789AB/1.tar.gz", pub, id, &idx) < 0,
	   "an id in upper case is refused");
	ok(pool_object_parse("hw3/", "hw3/alice/0123456789ab/01.tar.gz", pub, id, &idx) < 0,
	   "a task number with a leading zero is refused (one object per task)");
	ok(pool_object_parse("hw3/", "hw3/alice/0123456789ab/x/1.tar.gz", pub, id, &idx) < 0,
	   "a deeper name is refused");
	ok(pool_object_parse("hw3/", "other/alice/0123456789ab/1.tar.gz", pub, id, &idx) < 0,
	   "a name outside the prefix is refused");
}

/* gzip of a tar built by hand (tests of hostile archives) */
static void gz(const struct pbx_buf *tar, struct pbx_buf *out)
{
	uLongf n = compressBound(tar->len) + 64;
	z_stream z;
	memset(&z, 0, sizeof(z));
	pbx_buf_release(out);
	REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) == Z_OK);
	{
		unsigned char *o = xmalloc(n);
		z.next_in = (unsigned char *)tar->buf;
		z.avail_in = (uInt)tar->len;
		z.next_out = o;
		z.avail_out = (uInt)n;
		REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
		pbx_buf_add(out, o, n - z.avail_out);
		free(o);
	}
	deflateEnd(&z);
}

static int count_entries(const char *dir)
{
	char cmd[600];
	FILE *p;
	int n = -1;
	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 | wc -l", dir);
	p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

static void test_archive(const char *tmp)
{
	char *task = xasprintf("%s/task", tmp), *out = xasprintf("%s/out", tmp), *got;
	struct pbx_harvested files[2] = { { 1, "metrics.jsonl", 0, 0 },
					  { 1, "sub/model.txt", 0, 0 } };
	struct pbx_buf obj = PBX_BUF_INIT, b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	size_t missing = 9;
	REQUIRE(pbx_mkdir_p(task, 0755, &err) == 0);
	got = xasprintf("%s/sub", task);
	REQUIRE(pbx_mkdir_p(got, 0755, &err) == 0);
	free(got);
	got = xasprintf("%s/metrics.jsonl", task);
	REQUIRE(pbx_write_file_atomic(got, "{\"step\":1,\"loss\":2}\n", 20, 0644, &err) == 0);
	free(got);
	got = xasprintf("%s/sub/model.txt", task);
	REQUIRE(pbx_write_file_atomic(got, "weights", 7, 0644, &err) == 0);
	free(got);
	ok(pool_archive_make("{\"r\":1}", task, files, 2, 1000, &obj, &missing, &err) == 0 &&
		   missing == 0,
	   "a task's object is made: %s", err.msg);
	REQUIRE(pbx_mkdir_p(out, 0755, &err) == 0);
	ok(pool_archive_extract(obj.buf, obj.len, out, &err) == 0, "and unpacks: %s", err.msg);
	got = xasprintf("%s/results/sub/model.txt", out);
	ok(pbx_read_file(got, &b, &err) == 0 && !strcmp(b.buf, "weights"),
	   "a nested result file comes back whole");
	free(got);
	got = xasprintf("%s/pbx-task.json", out);
	pbx_buf_reset(&b);
	ok(pbx_read_file(got, &b, &err) == 0 && !strcmp(b.buf, "{\"r\":1}"),
	   "the record comes back");
	free(got);
	pbx_buf_release(&obj);
	pbx_buf_release(&b);
	free(task);
	free(out);
}

/* An archive with one hostile member must be refused and leave nothing. */
static void hostile(const char *tmp, const char *what, char type, const char *name,
		    const char *link)
{
	char *out = xasprintf("%s/h-%c-%zu", tmp, type, strlen(name));
	struct pbx_buf tar = PBX_BUF_INIT, obj = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	pbx_ustar_file(&tar, "pbx-task.json", 0644, 0, "{}", 2, &err);
	pbx_ustar_header(&tar, name, type, 0644, 0, type == '0' ? 3 : 0, link);
	if (type == '0')
		pbx_ustar_data(&tar, "bad", 3);
	pbx_ustar_end(&tar);
	gz(&tar, &obj);
	REQUIRE(pbx_mkdir_p(out, 0755, &err) == 0);
	ok(pool_archive_extract(obj.buf, obj.len, out, &err) < 0 && err.code == PBX_EXIT_SECURITY,
	   "%s is refused: %s", what, err.msg);
	ok(count_entries(out) == 1, "and nothing of it is written (the record before it may be)");
	pbx_buf_release(&tar);
	pbx_buf_release(&obj);
	free(out);
}

static void test_hostile(const char *tmp)
{
	char *out = xasprintf("%s/notgz", tmp);
	struct pbx_err err = PBX_ERR_INIT;
	struct stat sb;
	char *outside = xasprintf("%s/evil", tmp);
	hostile(tmp, "a symlink", '2', "link", "/etc/passwd");
	hostile(tmp, "a hard link", '1', "hard", "pbx-task.json");
	hostile(tmp, "a '..' member", '0', "../evil", NULL);
	hostile(tmp, "an absolute member", '0', "/tmp/evil-pbx-test", NULL);
	ok(lstat(outside, &sb) < 0, "nothing was written outside the directory");
	REQUIRE(pbx_mkdir_p(out, 0755, &err) == 0);
	ok(pool_archive_extract("not gzip at all", 15, out, &err) < 0,
	   "bytes that are not gzip are "
	   "refused: %s",
	   err.msg);
	free(out);
	free(outside);
}

static void test_store(const char *tmp)
{
	char *db = xasprintf("%s/pbx.db", tmp);
	struct pbx_store *st = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_pool_task t = { 0 }, *v = NULL;
	struct pbx_pool_metric m[2] = { { "o1", "loss", 1, 0.5, 0 }, { "o1", "loss", 2, 0, 1 } };
	struct pbx_pool_metric *mv = NULL;
	size_t n = 0, nm = 0;
	REQUIRE(pbx_store_open(db, &st, &err) == 0);
	t.pool = "gs://b/p/";
	t.object = "o1";
	t.version = "7";
	t.publisher = "alice";
	t.package_id = PKG_ID;
	t.experiment = "sweep";
	t.idx = 2;
	t.params_json = "{}";
	t.state = "COMPLETED";
	t.record_json = "{}";
	t.pulled = 5;
	ok(pbx_store_begin(st, &err) == 0 && pbx_store_pool_put(st, &t, m, 2, &err) == 0 &&
		   pbx_store_pool_put(st, &t, m, 1, &err) == 0 && pbx_store_commit(st, &err) == 0,
	   "a pulled task is recorded, then again (a new version): %s", err.msg);
	ok(pbx_store_pool_tasks(st, "gs://b/p/", &v, &n, &err) == 0 && n == 1 &&
		   !strcmp(v[0].publisher, "alice") && v[0].idx == 2 && v[0].start_time == 0,
	   "it is listed once");
	ok(pbx_store_pool_metrics(st, "gs://b/p/", &mv, &nm, &err) == 0 && nm == 1 &&
		   mv[0].value == 0.5,
	   "its points are those of the last pull");
	pbx_pool_tasks_free(v, n);
	pbx_pool_metrics_free(mv, nm);
	ok(pbx_store_pool_tasks(st, "gs://other/", &v, &n, &err) == 0 && n == 0,
	   "another pool holds nothing");
	pbx_pool_tasks_free(v, n);
	pbx_store_close(st);
	free(db);
}

/* The disagreement rule (src/pool/disagree.c): 3 standard errors of the
 * pooled within-publisher spread; no spread known, no flag. */
static void test_disagree(void)
{
	/* alice 1.0 +- 0.1 (n 3), bob 1.1 (n 3): within 3 standard errors */
	struct pool_side close[] = { { "alice", 3, 1.0, 0.02 }, { "bob", 3, 1.1, 0.02 } };
	/* carol 2.0: 1.0 away, the pooled sd 0.1, 3 * 0.1 * sqrt(2/3) = 0.245 */
	struct pool_side far[] = { { "alice", 3, 1.0, 0.02 }, { "carol", 3, 2.0, 0.02 } };
	/* single values: the spread is unknown */
	struct pool_side single[] = { { "alice", 1, 1.0, 0 }, { "dave", 1, 5.0, 0 } };
	/* identical repeats (sd 0): any real difference counts, rounding not */
	struct pool_side flat[] = { { "alice", 2, 1.0, 0 }, { "erin", 1, 1.0 + 1e-12, 0 } };
	struct pool_side flat2[] = { { "alice", 2, 1.0, 0 }, { "erin", 1, 1.001, 0 } };
	ok(!pool_sides_disagree(close, 2), "publishers within their spread agree");
	ok(pool_sides_disagree(far, 2), "publishers 10 sd apart disagree");
	ok(!pool_sides_disagree(single, 2), "single values: no spread known, no flag");
	ok(!pool_sides_disagree(flat, 2) && pool_sides_disagree(flat2, 2),
	   "with no spread, a real difference counts and rounding does not");
	ok(!pool_sides_disagree(far, 1), "one publisher never disagrees");
}

int main(void)
{
	char *tmp = tmpdir_new("pool"), *cmd;
	test_record();
	test_record_refusals();
	test_names();
	test_archive(tmp);
	test_hostile(tmp);
	test_store(tmp);
	test_disagree();
	cmd = xasprintf("rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", tmp);
	free(cmd);
	free(tmp);
	return tap_done();
}
