/*
 * test_tfevents.c - the TensorBoard writer (src/runtime/tfevents.h) and the
 * metrics log (src/runtime/metrics.h), read back by a small independent
 * TFRecord + protobuf reader written here, and by jansson for the JSONL.
 */
#include "runtime/metrics.h"
#include "runtime/tfevents.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tap.h"
#include "common/tmpdir.h"
#include "util/crc32c.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* ---------------------------------------------------------------------- */
/* a minimal reader */

struct rec {
	unsigned char *data;
	size_t len;
};

static uint64_t le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Reads all records of a TFRecord file, checking both CRCs; returns count. */
static int read_records(const char *path, struct rec *recs, int max)
{
	FILE *f = fopen(path, "rb");
	unsigned char hdr[12], foot[4];
	int n = 0;
	REQUIRE(f);
	while (fread(hdr, 1, 12, f) == 12) {
		uint64_t len = le(hdr, 8);
		REQUIRE(n < max);
		/* a bad length CRC: len cannot be trusted to allocate */
		REQUIRE(le(hdr + 8, 4) == pbx_crc32c_mask(pbx_crc32c(0, hdr, 8)));
		recs[n].data = xmalloc(len ? len : 1);
		recs[n].len = len;
		CHECK(fread(recs[n].data, 1, len, f) == len);
		CHECK(fread(foot, 1, 4, f) == 4);
		CHECK(pbx_crc32c_unmask((uint32_t)le(foot, 4)) == pbx_crc32c(0, recs[n].data, len));
		n++;
	}
	CHECK(feof(f));
	fclose(f);
	return n;
}

struct event {
	double wall_time;
	int64_t step;
	char version[64];
	char tag[64];
	float value;
	int has_value;
};

static uint64_t varint(const unsigned char **p, const unsigned char *end)
{
	uint64_t v = 0;
	for (int shift = 0; *p < end; shift += 7) {
		unsigned char b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	REQUIRE(!"varint runs past the end");
	return 0;
}

/* Walks fields of one message, calling back for each (number, bytes). */
static void parse(const unsigned char *p, size_t len, struct event *ev, int level)
{
	const unsigned char *end = p + len;
	while (p < end) {
		uint64_t key = varint(&p, end), num = key >> 3, wt = key & 7, l;
		if (wt == 0) {
			uint64_t v = varint(&p, end);
			CHECK(level == 0 && num == 2);
			ev->step = (int64_t)v;
		} else if (wt == 1) {
			uint64_t bits = le(p, 8);
			CHECK(level == 0 && num == 1);
			memcpy(&ev->wall_time, &bits, 8);
			p += 8;
		} else if (wt == 5) {
			uint32_t bits = (uint32_t)le(p, 4);
			CHECK(level == 2 && num == 2);
			memcpy(&ev->value, &bits, 4);
			ev->has_value = 1;
			p += 4;
		} else {
			CHECK(wt == 2);
			l = varint(&p, end);
			/* these guard the memcpy and parse below */
			REQUIRE(p + l <= end);
			if (level == 0 && num == 3) {
				REQUIRE(l < sizeof(ev->version));
				memcpy(ev->version, p, l);
			} else if (level == 2 && num == 1) {
				REQUIRE(l < sizeof(ev->tag));
				memcpy(ev->tag, p, l);
			} else {
				CHECK((level == 0 && num == 5) || (level == 1 && num == 1));
				parse(p, l, ev, level + 1);
			}
			p += l;
		}
	}
	CHECK(p == end);
}

static struct event decode(const struct rec *r)
{
	struct event ev;
	memset(&ev, 0, sizeof(ev));
	parse(r->data, r->len, &ev, 0);
	return ev;
}

static void free_records(struct rec *recs, int n)
{
	for (int i = 0; i < n; i++)
		free(recs[i].data);
}

/* ---------------------------------------------------------------------- */

static void test_tfevents(const char *dir)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *path = pbx_tfevents_filename(dir);
	struct pbx_tfevents *w = pbx_tfevents_open(path, &err);
	struct rec recs[8];
	struct event ev;
	int n;
	const char *base = strrchr(path, '/') + 1;

	CHECK(strncmp(base, "events.out.tfevents.", 20) == 0);
	CHECK(strlen(base) > 20 + 10 && base[30] == '.');
	REQUIRE(w);
	CHECK(pbx_tfevents_scalar(w, 7, "loss", 0.25f, &err) == 0);
	CHECK(pbx_tfevents_scalar(w, 300, "acc", -1.5f, &err) == 0);
	CHECK(pbx_tfevents_scalar(w, 1LL << 40, "big/step", 3.0f, &err) == 0);
	CHECK(pbx_tfevents_close(w, &err) == 0);

	/* a second open of the same name refuses to clobber it */
	CHECK(pbx_tfevents_open(path, &err) == NULL);
	CHECK(strstr(err.msg, "cannot create") && strstr(err.msg, path));

	n = read_records(path, recs, 8);
	REQUIRE(n == 4); /* decoded below */
	ev = decode(&recs[0]);
	CHECK_STR(ev.version, "brain.Event:2");
	CHECK(ev.wall_time > 1.6e9 && !ev.has_value);
	ev = decode(&recs[1]);
	CHECK(ev.step == 7 && ev.value == 0.25f && ev.has_value);
	CHECK_STR(ev.tag, "loss");
	ev = decode(&recs[2]);
	CHECK(ev.step == 300 && ev.value == -1.5f);
	CHECK_STR(ev.tag, "acc");
	ev = decode(&recs[3]);
	CHECK(ev.step == 1LL << 40 && ev.value == 3.0f);
	CHECK_STR(ev.tag, "big/step");
	free_records(recs, n);
	free(path);
}

/* ---------------------------------------------------------------------- */
/* metrics */

static json_t *jsonl_line(const char *path, int want)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	const char *p;
	json_t *o;
	REQUIRE(pbx_read_file(path, &b, &err) == 0);
	p = b.buf;
	for (int i = 0; i < want; i++) {
		p = strchr(p, '\n');
		REQUIRE(p);
		p++;
	}
	REQUIRE(strchr(p, '\n'));
	o = json_loadb(p, (size_t)(strchr(p, '\n') - p), 0, NULL);
	CHECK(o);
	pbx_buf_release(&b);
	return o;
}

static int count_lines(const char *path)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	int n = 0;
	CHECK(pbx_read_file(path, &b, &err) == 0);
	for (size_t i = 0; i < b.len; i++)
		n += b.buf[i] == '\n';
	CHECK(b.len == 0 || b.buf[b.len - 1] == '\n');
	pbx_buf_release(&b);
	return n;
}

static void test_metrics(const char *top)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *dir = xasprintf("%s/run/a", top); /* created by open */
	char *jsonl = xasprintf("%s/metrics.jsonl", dir);
	char *summary = xasprintf("%s/summary.json", dir);
	const char *names[] = { "epoch", "loss", "lr" };
	const char *bad[] = { "step" };
	double v1[] = { 1, 0.43, 0.01 }, v2[] = { 2, NAN, 0.001 };
	struct pbx_metrics *m = pbx_metrics_open(dir, 0, &err);
	struct rec recs[16];
	json_t *o;
	char line[256];
	FILE *f;

	REQUIRE(m);
	CHECK(pbx_metrics_log(m, 100, 3, names, v1) == 0);
	CHECK(pbx_metrics_log(m, 200, 3, names, v2) == 0);
	CHECK(pbx_metrics_log(m, 300, 1, bad, v1) == -1);
	CHECK_STR(pbx_metrics_error(m),
		  "bad metric name 'step' (must be non-empty and not 'step')");

	/* the JSON lines: step first, integers stay integers, NaN is null */
	f = fopen(jsonl, "r");
	REQUIRE(f && fgets(line, sizeof(line), f));
	CHECK_STR(line, "{\"step\":100,\"epoch\":1,\"loss\":0.43,\"lr\":0.01}\n");
	CHECK(fgets(line, sizeof(line), f));
	CHECK_STR(line, "{\"step\":200,\"epoch\":2,\"loss\":null,\"lr\":0.001}\n");
	CHECK(!fgets(line, sizeof(line), f));
	fclose(f);

	/* one Event per value after the version record */
	REQUIRE(read_records(pbx_metrics_event_path(m), recs, 16) == 7); /* decoded below */
	CHECK_STR(decode(&recs[2]).tag, "loss");
	CHECK(decode(&recs[2]).value == 0.43f && decode(&recs[2]).step == 100);
	CHECK(isnan(decode(&recs[5]).value));
	free_records(recs, 7);

	/* summary.json: valid JSON only, written whole */
	CHECK(pbx_metrics_summary(m, "{\"final_acc\": 0.9") == -1);
	CHECK(strncmp(pbx_metrics_error(m), "summary is not valid JSON: ", 27) == 0);
	CHECK(access(summary, F_OK) < 0);
	CHECK(pbx_metrics_summary(m, "{\"final_acc\": 0.9}\n") == 0);
	o = json_load_file(summary, 0, NULL);
	CHECK(o && json_real_value(json_object_get(o, "final_acc")) == 0.9);
	json_decref(o);
	pbx_metrics_close(m);

	/* resume: a crash left a partial line; append cuts it and continues */
	f = fopen(jsonl, "a");
	fputs("{\"step\":300,\"lo", f);
	fclose(f);
	m = pbx_metrics_open(dir, 1, &err);
	REQUIRE(m);
	CHECK(pbx_metrics_log(m, 300, 1, names, v1) == 0);
	pbx_metrics_close(m);
	CHECK(count_lines(jsonl) == 3);
	o = jsonl_line(jsonl, 2);
	CHECK(json_integer_value(json_object_get(o, "step")) == 300);
	json_decref(o);

	/* resume from the checkpoint at step 100 drops later lines */
	CHECK(pbx_metrics_truncate_after(dir, 100, &err) == 0);
	CHECK(count_lines(jsonl) == 1);
	o = jsonl_line(jsonl, 0);
	CHECK(json_integer_value(json_object_get(o, "step")) == 100);
	json_decref(o);

	/* a fresh (non-append) open truncates */
	m = pbx_metrics_open(dir, 0, &err);
	REQUIRE(m);
	pbx_metrics_close(m);
	CHECK(count_lines(jsonl) == 0);

	/* an impossible directory fails with the path */
	CHECK(pbx_metrics_open("/proc/self/nonexistent/x", 0, &err) == NULL);
	CHECK(strstr(err.msg, "/proc/self/nonexistent"));
	free(dir);
	free(jsonl);
	free(summary);
}

int main(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *dir = tmpdir_new("tfevents");
	test_tfevents(dir);
	test_metrics(dir);
	CHECK(pbx_rm_rf(dir, &err) == 0);
	free(dir);
	return tap_done();
}
