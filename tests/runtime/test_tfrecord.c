/*
 * test_tfrecord.c - TFRecord shards (runtime/tfrecord.h): the Example
 * codec round trip and its checks, the reader's CRC and truncation errors
 * (naming file and offset), pack -> load equals the data set (synthetic,
 * and Fashion-MNIST's IDX test split when installed), and the file- and
 * record-level shares of ranks covering every record exactly once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tap.h"
#include "common/tmpdir.h"
#include "runtime/tfevents.h"
#include "runtime/tfrecord.h"
#include "util/xalloc.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	REQUIRE(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = xmalloc(*len + 1);
	CHECK(fread(b, 1, *len, f) == *len);
	fclose(f);
	return b;
}

static void spill(const char *path, const void *b, size_t len)
{
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(b, 1, len, f) == len && fclose(f) == 0);
}

static void test_codec(void)
{
	unsigned char px[2 * 3 * 3];
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_example ex;
	struct pbx_err err = PBX_ERR_INIT;
	for (int i = 0; i < (int)sizeof(px); i++)
		px[i] = (unsigned char)(i * 13);
	pbx_example_encode(&b, px, 2, 3, 3, 7);
	/* the memcmp below reads the decoded pixels */
	REQUIRE(pbx_example_decode(b.buf, b.len, &ex, &err) == 0);
	REQUIRE(ex.h == 2 && ex.w == 3 && ex.c == 3 && ex.label == 7);
	CHECK(memcmp(ex.pixels, px, sizeof(px)) == 0);
	pbx_example_release(&ex);
	/* a record that is not an Example, and one without the image */
	CHECK(pbx_example_decode("\xff\xff\xff", 3, &ex, &err) < 0);
	CHECK(strstr(err.msg, "not a valid tf.train.Example"));
	CHECK(pbx_example_decode("", 0, &ex, &err) < 0);
	CHECK_STR(err.msg, "Example has no features");
	pbx_buf_release(&b);
	/* height*width*channels must match the bytes */
	pbx_example_encode(&b, px, 2, 3, 2, 1); /* 12 of the 18 bytes */
	CHECK(pbx_example_decode(b.buf, b.len, &ex, &err) == 0);
	pbx_example_release(&ex);
	b.buf[b.len - 1] = 9; /* channels 2 -> 9 (the last varint byte) */
	CHECK(pbx_example_decode(b.buf, b.len, &ex, &err) < 0);
	CHECK(strstr(err.msg, "feature 'image': 12 bytes, but height*width*channels = 54"));
	pbx_buf_release(&b);
}

/* Three records written by tfevents' framing; reads them back, then
 * flips a byte of each part in turn. */
static void test_reader(const char *dir)
{
	char *path = xasprintf("%s/r.tfrecord", dir);
	const unsigned char *d;
	size_t len, flen;
	struct pbx_err err = PBX_ERR_INIT;
	FILE *f = fopen(path, "wb");
	REQUIRE(f);
	CHECK(pbx_tfrecord_write(f, "alpha", 5) == 0);
	CHECK(pbx_tfrecord_write(f, "", 0) == 0);
	CHECK(pbx_tfrecord_write(f, "gamma!", 6) == 0);
	CHECK(fclose(f) == 0);
	char *orig = slurp(path, &flen);
	REQUIRE(flen == 3 * 16 + 11); /* the cases below flip bytes up to 56 */

	f = fopen(path, "rb");
	struct pbx_tfrecord_reader *r = pbx_tfrecord_reader_new(f, path);
	CHECK(pbx_tfrecord_next(r, &d, &len, &err) == 1 && len == 5 && !memcmp(d, "alpha", 5));
	CHECK(pbx_tfrecord_next(r, &d, &len, &err) == 1 && len == 0);
	CHECK(pbx_tfrecord_next(r, &d, &len, &err) == 1 && len == 6 && !memcmp(d, "gamma!", 6));
	CHECK(pbx_tfrecord_offset(r) == 37);
	CHECK(pbx_tfrecord_next(r, &d, &len, &err) == 0);
	pbx_tfrecord_reader_free(r);
	fclose(f);

	/* byte k flipped -> the expected error for the record at 37 */
	static const struct {
		int k;
		const char *want;
	} cases[] = {
		{ 37 + 0, "offset 37: corrupt record: length CRC mismatch" },
		{ 37 + 9, "offset 37: corrupt record: length CRC mismatch" },
		{ 37 + 12, "offset 37: corrupt record: data CRC mismatch (6 bytes)" },
		{ 37 + 19, "offset 37: corrupt record: data CRC mismatch (6 bytes)" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *bad = xmalloc(flen);
		memcpy(bad, orig, flen);
		bad[cases[i].k] ^= 0x10;
		spill(path, bad, flen);
		f = fopen(path, "rb");
		r = pbx_tfrecord_reader_new(f, path);
		int rc;
		while ((rc = pbx_tfrecord_next(r, &d, &len, &err)) == 1)
			;
		CHECK(rc == -1);
		char *want = xasprintf("%s: %s", path, cases[i].want);
		CHECK_STR(err.msg, want);
		free(want);
		pbx_tfrecord_reader_free(r);
		fclose(f);
		free(bad);
	}
	/* truncated inside the last record's data, and inside its header */
	spill(path, orig, flen - 3);
	f = fopen(path, "rb");
	r = pbx_tfrecord_reader_new(f, path);
	while (pbx_tfrecord_next(r, &d, &len, &err) == 1)
		;
	char *want = xasprintf(
		"%s: offset 37: truncated record: the data and footer has 7 of 10 bytes", path);
	CHECK_STR(err.msg, want);
	free(want);
	pbx_tfrecord_reader_free(r);
	fclose(f);
	spill(path, orig, 37 + 5);
	f = fopen(path, "rb");
	r = pbx_tfrecord_reader_new(f, path);
	while (pbx_tfrecord_next(r, &d, &len, &err) == 1)
		;
	CHECK(strstr(err.msg, "offset 37: truncated record: the header has 5 of 12 bytes"));
	pbx_tfrecord_reader_free(r);
	fclose(f);
	unlink(path);
	free(orig);
	free(path);
}

static int same_data(const struct pbx_dataset *a, const struct pbx_dataset *b)
{
	size_t img = (size_t)a->c * a->h * a->w;
	return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w &&
	       a->nclasses == b->nclasses &&
	       memcmp(a->x, b->x, (size_t)a->n * img * sizeof(float)) == 0 &&
	       memcmp(a->y, b->y, (size_t)a->n * sizeof(int32_t)) == 0;
}

/* A data set whose pixels are exact multiples of 1/255 (as loaded). */
static void bytes_set(struct pbx_dataset *ds, int n, int c, int h, int w)
{
	memset(ds, 0, sizeof(*ds));
	ds->n = n;
	ds->c = c;
	ds->h = h;
	ds->w = w;
	ds->nclasses = 10;
	ds->x = xmalloc((size_t)n * c * h * w * sizeof(float));
	ds->y = xmalloc((size_t)n * sizeof(int32_t));
	for (size_t i = 0; i < (size_t)n * c * h * w; i++)
		ds->x[i] = (float)((i * 2654435761u >> 7) % 256) / 255.0f;
	for (int i = 0; i < n; i++)
		ds->y[i] = (i * 7) % 10;
	ds->name = xstrdup("bytes");
}

/* Ranks' shares: every record once, and the world-1 load is the original. */
static void test_pack_shares(const char *dir)
{
	struct pbx_dataset ds, back;
	struct pbx_err err = PBX_ERR_INIT;
	bytes_set(&ds, 101, 3, 5, 4); /* c = 3: HWC in the file, CHW in memory */
	CHECK(pbx_tfrecord_pack(&ds, dir, "s-train", 4, &err) == 0);
	char *pat = xasprintf("%s/s-train-*-of-00004.tfrecord", dir);
	REQUIRE(pbx_dataset_load_tfrecord(pat, 0, 1, 3, &back, &err) == 0);
	CHECK(same_data(&ds, &back));
	pbx_dataset_free(&back);
	/* 2 ranks: file level (2 files each); 8 ranks: record level */
	int worlds[2] = { 2, 8 };
	for (int wi = 0; wi < 2; wi++) {
		int total = 0, labels[10] = { 0 }, want[10] = { 0 };
		for (int rk = 0; rk < worlds[wi]; rk++) {
			/* its labels index the counts below */
			REQUIRE(pbx_dataset_load_tfrecord(pat, rk, worlds[wi], 2, &back, &err) ==
				0);
			total += back.n;
			for (int i = 0; i < back.n; i++)
				labels[back.y[i]]++;
			pbx_dataset_free(&back);
		}
		for (int i = 0; i < ds.n; i++)
			want[ds.y[i]]++;
		CHECK(total == ds.n);
		CHECK(memcmp(labels, want, sizeof(want)) == 0);
	}
	/* file level for 2 ranks: rank 1 has shards 1 and 3 */
	REQUIRE(pbx_dataset_load_tfrecord(pat, 1, 2, 1, &back, &err) == 0);
	REQUIRE(back.n == (50 - 25) + (101 - 75)); /* back.y[0] below */
	CHECK(back.y[0] == ds.y[25]);
	pbx_dataset_free(&back);
	/* no match */
	char *none = xasprintf("%s/nothing-*.tfrecord", dir);
	CHECK(pbx_dataset_load_tfrecord(none, 0, 1, 1, &back, &err) < 0);
	char *want = xasprintf("no file matches the pattern %s", none);
	CHECK_STR(err.msg, want);
	free(want);
	free(none);
	/* a flipped byte inside shard 2's second record: file and offset */
	char *s2 = xasprintf("%s/s-train-00002-of-00004.tfrecord", dir);
	size_t len;
	char *b = slurp(s2, &len);
	size_t rec = len / 25; /* 25 equal records */
	b[rec + 40] ^= 1;
	spill(s2, b, len);
	CHECK(pbx_dataset_load_tfrecord(pat, 0, 1, 2, &back, &err) < 0);
	want = xasprintf("%s: offset %zu: corrupt record: data CRC mismatch", s2, rec);
	CHECK(strncmp(err.msg, want, strlen(want)) == 0);
	CHECK(back.x == NULL && back.n == 0);
	free(want);
	free(b);
	free(s2);
	free(pat);
	pbx_dataset_free(&ds);
}

/* A link planted at the shard's old predictable temporary name
 * (SHARD.tmp.PID) does not redirect pbx-train pack's write. */
static void test_pack_planted_link(const char *dir)
{
	struct pbx_dataset ds;
	struct pbx_err err = PBX_ERR_INIT;
	char *victim = xasprintf("%s/victim", dir);
	char *shard = xasprintf("%s/planted-00000-of-00001.tfrecord", dir);
	char *old = xasprintf("%s.tmp.%ld", shard, (long)getpid());
	struct stat st;
	size_t len;
	char *b;
	spill(victim, "victim", 6);
	chmod(victim, 0600);
	CHECK(symlink(victim, old) == 0);
	bytes_set(&ds, 3, 1, 2, 2);
	CHECK(pbx_tfrecord_pack(&ds, dir, "planted", 1, &err) == 0);
	b = slurp(victim, &len);
	CHECK(len == 6 && !memcmp(b, "victim", 6));
	CHECK(lstat(victim, &st) == 0 && (st.st_mode & 07777) == 0600);
	CHECK(lstat(shard, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0);
	free(b);
	pbx_dataset_free(&ds);
	free(victim);
	free(shard);
	free(old);
}

/* pack -> load equals the IDX loader's data, byte for byte. */
static void test_idx(const char *dir)
{
	struct pbx_dataset idx, back;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_dataset_load_named("fashion-mnist", NULL, 0, &idx, &err) < 0) {
		tap_skip("test_idx: Fashion-MNIST not installed (%s)", err.msg);
		return;
	}
	CHECK(pbx_tfrecord_pack(&idx, dir, "fashion-mnist-test", 3, &err) == 0);
	char *pat = xasprintf("%s/fashion-mnist-test-*.tfrecord", dir);
	REQUIRE(pbx_dataset_load_tfrecord(pat, 0, 1, 2, &back, &err) == 0);
	CHECK(back.n == 10000 && back.h == 28 && back.c == 1);
	CHECK(same_data(&idx, &back));
	pbx_dataset_free(&back);
	pbx_dataset_free(&idx);
	free(pat);
}

int main(void)
{
	char *dir = tmpdir_new("tfrecord");
	test_codec();
	test_reader(dir);
	test_pack_shares(dir);
	test_pack_planted_link(dir);
	test_idx(dir);
	char *cmd = xasprintf("rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
	free(cmd);
	free(dir);
	return tap_done();
}
