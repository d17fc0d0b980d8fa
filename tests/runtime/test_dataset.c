/*
 * test_dataset.c - data set loading and in-memory operations
 * (src/runtime/dataset.h): IDX files (raw and gzip'd, and malformed ones
 * with their exact messages) written here, the real Fashion-MNIST if
 * installed, CIFAR-10 batches, load-by-name, synthetic data, subset,
 * channel stats and normalisation.
 */
#include "runtime/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/tap.h"
#include "common/tmpdir.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char *tdir; /* the test's scratch directory */

static char *tpath(const char *name)
{
	return xasprintf("%s/%s", tdir, name);
}

static void write_bytes(const char *path, int gz, const void *data, size_t len)
{
	if (gz) {
		gzFile g = gzopen(path, "wb");
		CHECK(g && gzwrite(g, data, (unsigned)len) == (int)len);
		CHECK(gzclose(g) == Z_OK);
	} else {
		FILE *f = fopen(path, "wb");
		REQUIRE(f && fwrite(data, 1, len, f) == len);
		fclose(f);
	}
}

/* An IDX file: magic, dims (big-endian), then data; returns its path. */
static char *write_idx(const char *name, int gz, uint32_t magic, const uint32_t *dims, int ndims,
		       const unsigned char *data, size_t len)
{
	unsigned char *buf = xmalloc(4 + 4 * (size_t)ndims + len);
	char *path = tpath(name);
	size_t off = 0;
	for (int i = -1; i < ndims; i++) {
		uint32_t v = i < 0 ? magic : dims[i];
		for (int k = 3; k >= 0; k--)
			buf[off++] = (unsigned char)(v >> (8 * k));
	}
	if (len)
		memcpy(buf + off, data, len);
	write_bytes(path, gz, buf, off + len);
	free(buf);
	return path;
}

/* ---------------------------------------------------------------------- */
/* IDX */

#define NI   5
#define ROWS 3
#define COLS 4
static unsigned char pix[NI * ROWS * COLS], lab[NI] = { 3, 0, 4, 1, 2 };

static void check_small(const struct pbx_dataset *ds)
{
	/* the loops below index by the expected sizes */
	REQUIRE(ds->n == NI && ds->c == 1 && ds->h == ROWS && ds->w == COLS);
	CHECK(ds->nclasses == 5);
	for (int i = 0; i < NI * ROWS * COLS; i++)
		CHECK(ds->x[i] == (float)pix[i] / 255.0f);
	for (int i = 0; i < NI; i++)
		CHECK(ds->y[i] == lab[i]);
}

static void test_idx_good(void)
{
	uint32_t idims[3] = { NI, ROWS, COLS }, ldims[1] = { NI };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_dataset ds;
	char *img, *lbl, *imggz, *lblgz;
	for (int i = 0; i < NI * ROWS * COLS; i++)
		pix[i] = (unsigned char)(i * 37 % 256);
	pix[0] = 255;
	img = write_idx("img", 0, 0x803, idims, 3, pix, sizeof(pix));
	lbl = write_idx("lbl", 0, 0x801, ldims, 1, lab, sizeof(lab));
	imggz = write_idx("img.gz", 1, 0x803, idims, 3, pix, sizeof(pix));
	lblgz = write_idx("lbl.gz", 1, 0x801, ldims, 1, lab, sizeof(lab));

	REQUIRE(pbx_dataset_load_idx(img, lbl, &ds, &err) == 0);
	check_small(&ds);
	CHECK(ds.x[0] == 1.0f);
	CHECK_STR(ds.name, img);
	pbx_dataset_free(&ds);
	REQUIRE(pbx_dataset_load_idx(imggz, lblgz, &ds, &err) == 0);
	check_small(&ds);
	pbx_dataset_free(&ds);
	REQUIRE(pbx_dataset_load_idx(imggz, lbl, &ds, &err) == 0);
	check_small(&ds);
	pbx_dataset_free(&ds);
	free(img), free(lbl), free(imggz), free(lblgz);
}

/* Loads (images, labels) expecting failure with exactly `want`. */
static void expect_fail(const char *img, const char *lbl, const char *want)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_dataset ds;
	CHECK(pbx_dataset_load_idx(img, lbl, &ds, &err) == -1);
	CHECK_STR(err.msg, want);
	CHECK(ds.x == NULL && ds.y == NULL && ds.n == 0);
}

static void test_idx_bad(void)
{
	uint32_t idims[3] = { NI, ROWS, COLS }, ldims[1] = { NI }, l4[1] = { NI - 1 };
	uint32_t rows0[3] = { NI, 0, COLS };
	unsigned char junk[64];
	char *img = write_idx("good-img.gz", 1, 0x803, idims, 3, pix, sizeof(pix));
	char *lbl = write_idx("good-lbl", 0, 0x801, ldims, 1, lab, sizeof(lab));
	char *p, *want;

	/* bad magic: a labels file given as images, and vice versa */
	want = xasprintf("%s: bad magic 0x00000801 (want 0x00000803, IDX ubyte images)", lbl);
	expect_fail(lbl, lbl, want);
	free(want);
	want = xasprintf("%s: bad magic 0x00000803 (want 0x00000801, IDX ubyte labels)", img);
	expect_fail(img, img, want);
	free(want);

	/* truncated pixel data (gzip'd) and truncated header */
	p = write_idx("short-img.gz", 1, 0x803, idims, 3, pix, sizeof(pix) - ROWS * COLS);
	want = xasprintf("%s: truncated pixel data: 48 of 60 bytes", p);
	expect_fail(p, lbl, want);
	free(p), free(want);
	p = tpath("hdr");
	write_bytes(p, 0, "\0\0\x08\x03\0\0", 6);
	want = xasprintf("%s: truncated header: 6 of 16 bytes", p);
	expect_fail(p, lbl, want);
	free(p), free(want);

	/* count mismatch */
	p = write_idx("lbl4", 0, 0x801, l4, 1, lab, NI - 1);
	want = xasprintf("count mismatch: %s has 5 images but %s has 4 labels", img, p);
	expect_fail(img, p, want);
	free(p), free(want);

	/* extra bytes, bad dimension, missing file, corrupt gzip stream */
	p = write_idx("long-lbl", 0, 0x801, ldims, 1, pix, NI + 1);
	want = xasprintf("%s: unexpected data after the label data", p);
	expect_fail(img, p, want);
	free(p), free(want);
	p = write_idx("rows0", 0, 0x803, rows0, 3, pix, 0);
	want = xasprintf("%s: bad rows 0 (want 1..4096)", p);
	expect_fail(p, lbl, want);
	free(p), free(want);
	p = tpath("missing");
	want = xasprintf("cannot open %s: No such file or directory", p);
	expect_fail(p, lbl, want);
	free(p), free(want);
	{
		struct pbx_err err = PBX_ERR_INIT;
		struct pbx_dataset ds;
		memset(junk, 0xA5, sizeof(junk));
		junk[0] = 0x1f, junk[1] = 0x8b, junk[2] = 8, junk[3] = 0; /* gzip magic */
		p = tpath("junk.gz");
		write_bytes(p, 0, junk, sizeof(junk));
		want = xasprintf("cannot read %s: ", p);
		CHECK(pbx_dataset_load_idx(p, lbl, &ds, &err) == -1);
		CHECK(strncmp(err.msg, want, strlen(want)) == 0);
		free(p), free(want);
	}
	free(img), free(lbl);
}

/* The real Fashion-MNIST, when this machine has it. */
static void test_fashion_real(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_dataset tr, te;
	int seen[10] = { 0 }, out = 0, first = -1;
	size_t outx = 0, firstx = 0;
	if (access(PBX_DATASET_DIR_FASHION "/train-labels-idx1-ubyte.gz", R_OK) < 0 &&
	    access(PBX_DATASET_DIR_FASHION "/train-labels-idx1-ubyte", R_OK) < 0) {
		tap_skip("real-data checks: %s not installed", PBX_DATASET_DIR_FASHION);
		return;
	}
	REQUIRE(pbx_dataset_load_named("fashion-mnist", NULL, 1, &tr, &err) == 0);
	CHECK(tr.n == 60000 && tr.c == 1 && tr.h == 28 && tr.w == 28 && tr.nclasses == 10);
	/* 60000 labels and 7.84 million pixels: counted, one TAP line each */
	for (int i = 0; i < tr.n; i++) {
		if (!(tr.y[i] >= 0 && tr.y[i] < 10)) {
			if (!out++)
				first = i;
			continue;
		}
		seen[tr.y[i]]++;
	}
	if (!CHECKF(out == 0, "tr.y[i] >= 0 && tr.y[i] < 10 for all %d examples i", tr.n))
		tap_diag("%d are not, the first i = %d", out, first);
	for (int k = 0; k < 10; k++)
		CHECK(seen[k] == 6000); /* Fashion-MNIST is balanced */
	CHECK_STR(tr.name, "fashion-mnist");
	pbx_dataset_free(&tr);
	REQUIRE(pbx_dataset_load_named("fashion-mnist", "", 0, &te, &err) == 0);
	/* the loop below indexes n * 28 * 28 */
	REQUIRE(te.n == 10000 && te.h == 28 && te.w == 28 && te.nclasses == 10);
	for (size_t i = 0; i < (size_t)te.n * 784; i++)
		if (!(te.x[i] >= 0.0f && te.x[i] <= 1.0f) && !outx++)
			firstx = i;
	if (!CHECKF(outx == 0, "te.x[i] >= 0.0f && te.x[i] <= 1.0f for all %zu pixels i",
		    (size_t)te.n * 784))
		tap_diag("%zu are not, the first i = %zu", outx, firstx);
	pbx_dataset_free(&te);
}

/* ---------------------------------------------------------------------- */
/* CIFAR-10 */

#define CREC 3073

/* n records; label of record r is labels[r], pixel j is (r*7 + j) % 251. */
static char *write_cifar(const char *name, int gz, const unsigned char *labels, int n, size_t cut)
{
	unsigned char *buf = xmalloc((size_t)n * CREC);
	char *path = tpath(name);
	for (int r = 0; r < n; r++) {
		buf[(size_t)r * CREC] = labels[r];
		for (int j = 0; j < 3072; j++)
			buf[(size_t)r * CREC + 1 + j] = (unsigned char)((r * 7 + j) % 251);
	}
	write_bytes(path, gz, buf, (size_t)n * CREC - cut);
	free(buf);
	return path;
}

static void test_cifar(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_dataset ds;
	unsigned char l1[3] = { 9, 0, 5 }, l2[2] = { 1, 10 };
	char *a = write_cifar("a.bin", 0, l1, 3, 0), *b = write_cifar("b.bin.gz", 1, l1, 2, 0);
	const char *files[2] = { a, b };
	char *p, *want;

	/* the checks below index the examples */
	REQUIRE(pbx_dataset_load_cifar10(files, 2, &ds, &err) == 0);
	REQUIRE(ds.n == 5 && ds.c == 3 && ds.h == 32 && ds.w == 32 && ds.nclasses == 10);
	CHECK(ds.y[0] == 9 && ds.y[2] == 5 && ds.y[3] == 9 && ds.y[4] == 0);
	/* example 2, channel G (1), row 5, col 6 = byte 1024 + 5*32 + 6 */
	CHECK(ds.x[2 * 3072 + 1024 + 5 * 32 + 6] == (float)((2 * 7 + 1190) % 251) / 255.0f);
	CHECK(ds.x[4 * 3072 + 3071] == (float)((1 * 7 + 3071) % 251) / 255.0f);
	CHECK_STR(ds.name, "cifar10");
	pbx_dataset_free(&ds);

	p = write_cifar("bad-label.bin", 0, l2, 2, 0);
	files[1] = p;
	want = xasprintf("%s: record 1: label 10 out of range 0..9", p);
	CHECK(pbx_dataset_load_cifar10(files, 2, &ds, &err) == -1);
	CHECK_STR(err.msg, want);
	free(p), free(want);

	p = write_cifar("short.bin", 0, l1, 2, 100);
	files[1] = p;
	want = xasprintf("%s: truncated record: size 6046 is not a positive multiple of 3073", p);
	CHECK(pbx_dataset_load_cifar10(files, 2, &ds, &err) == -1);
	CHECK_STR(err.msg, want);
	CHECK(ds.x == NULL && ds.n == 0);
	free(p), free(want);
	free(a), free(b);
}

/* ---------------------------------------------------------------------- */
/* by name */

static void test_named(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_dataset ds;
	unsigned char l[2] = { 3, 4 };
	uint32_t idims[3] = { NI, ROWS, COLS }, ldims[1] = { NI };
	char *sub = tpath("cifar"), *deep = xasprintf("%s/cifar-10-batches-bin", sub);
	char *fm = tpath("fm"), *p, *want;

	/* cifar10 in DIR/cifar-10-batches-bin */
	CHECK(pbx_mkdir_p(deep, 0755, &err) == 0);
	for (int i = 1; i <= 5; i++) {
		char *name = xasprintf("cifar/cifar-10-batches-bin/data_batch_%d.bin", i);
		free(write_cifar(name, 0, l, i == 5 ? 2 : 1, 0));
		free(name);
	}
	free(write_cifar("cifar/cifar-10-batches-bin/test_batch.bin", 0, l + 1, 1, 0));
	REQUIRE(pbx_dataset_load_named("cifar10", sub, 1, &ds, &err) == 0);
	CHECK(ds.n == 6 && ds.y[0] == 3 && ds.y[5] == 4);
	pbx_dataset_free(&ds);
	REQUIRE(pbx_dataset_load_named("cifar10", sub, 0, &ds, &err) == 0);
	CHECK(ds.n == 1 && ds.y[0] == 4);
	pbx_dataset_free(&ds);

	/* mnist layout: raw labels, gzip'd images */
	CHECK(pbx_mkdir_p(fm, 0755, &err) == 0);
	free(write_idx("fm/t10k-images-idx3-ubyte.gz", 1, 0x803, idims, 3, pix, sizeof(pix)));
	free(write_idx("fm/t10k-labels-idx1-ubyte", 0, 0x801, ldims, 1, lab, sizeof(lab)));
	REQUIRE(pbx_dataset_load_named("mnist", fm, 0, &ds, &err) == 0);
	check_small(&ds);
	CHECK_STR(ds.name, "mnist");
	pbx_dataset_free(&ds);
	want = xasprintf("cannot find %s/train-images-idx3-ubyte[.gz]: No such file or directory",
			 fm);
	CHECK(pbx_dataset_load_named("mnist", fm, 1, &ds, &err) == -1);
	CHECK_STR(err.msg, want);
	free(want);

	CHECK(pbx_dataset_load_named("imagenet", NULL, 1, &ds, &err) == -1);
	CHECK_STR(err.msg, "unknown dataset 'imagenet' (known: fashion-mnist, mnist, cifar10)");
	CHECK(err.code == PBX_EXIT_USAGE);
	p = tpath("nothing");
	CHECK(pbx_dataset_load_named("cifar10", p, 0, &ds, &err) == -1);
	want = xasprintf("cannot open %s/test_batch.bin: No such file or directory", p);
	CHECK_STR(err.msg, want);
	free(p), free(want);
	free(sub), free(deep), free(fm);
}

/* ---------------------------------------------------------------------- */
/* synthetic, subset, stats, normalisation */

/* Accuracy of nearest class mean (means from `tr`) on `te`. */
static double nearest_mean_acc(const struct pbx_dataset *tr, const struct pbx_dataset *te)
{
	size_t d = (size_t)tr->c * tr->h * tr->w;
	double *mu = xcalloc((size_t)tr->nclasses * d, sizeof(double));
	int *cnt = xcalloc((size_t)tr->nclasses, sizeof(int)), right = 0;
	for (int i = 0; i < tr->n; i++, cnt[tr->y[i - 1]]++)
		for (size_t j = 0; j < d; j++)
			mu[tr->y[i] * d + j] += tr->x[i * d + j];
	for (int i = 0; i < te->n; i++) {
		int best = -1;
		double bestd = INFINITY;
		for (int k = 0; k < tr->nclasses; k++) {
			double dist = 0;
			for (size_t j = 0; j < d && cnt[k]; j++) {
				double e = te->x[i * d + j] - mu[k * d + j] / cnt[k];
				dist += e * e;
			}
			if (cnt[k] && dist < bestd)
				bestd = dist, best = k;
		}
		right += best == te->y[i];
	}
	free(mu), free(cnt);
	return (double)right / te->n;
}

static void test_synthetic(void)
{
	struct pbx_dataset a, b, c, te;
	size_t d = 3 * 8 * 8;
	float mean[3], std[3], m2[3] = { 0.5f, 0.25f, 0 }, s2[3] = { 2, 4, 0 };
	pbx_dataset_synthetic(&a, 200, 3, 8, 8, 10, 42);
	pbx_dataset_synthetic(&b, 200, 3, 8, 8, 10, 42);
	pbx_dataset_synthetic_at(&c, 50, 100, 3, 8, 8, 10, 42);
	/* the memcmps below assume these sizes */
	REQUIRE(a.n == 200 && a.c == 3 && a.h == 8 && a.w == 8 && a.nclasses == 10);
	CHECK_STR(a.name, "synthetic");
	CHECK(memcmp(a.x, b.x, 200 * d * sizeof(float)) == 0);
	CHECK(memcmp(a.y, b.y, 200 * sizeof(int32_t)) == 0);
	CHECK(memcmp(a.x + 50 * d, c.x, 100 * d * sizeof(float)) == 0);
	CHECK(memcmp(a.y + 50, c.y, 100 * sizeof(int32_t)) == 0);
	for (int i = 0; i < a.n; i++)
		CHECK(a.y[i] >= 0 && a.y[i] < 10);
	pbx_dataset_free(&b);
	pbx_dataset_synthetic(&b, 200, 3, 8, 8, 10, 43);
	CHECK(memcmp(a.x, b.x, 200 * d * sizeof(float)) != 0);

	/* learnable: a held-out range is classified well by class means */
	pbx_dataset_synthetic_at(&te, 1000000, 300, 3, 8, 8, 10, 42);
	CHECK(nearest_mean_acc(&a, &te) > 0.95);

	/* subset keeps the first n */
	pbx_dataset_subset(&c, 10);
	CHECK(c.n == 10 && memcmp(a.x + 50 * d, c.x, 10 * d * sizeof(float)) == 0);
	pbx_dataset_subset(&c, 20);
	CHECK(c.n == 10);

	/* normalize with own stats gives mean 0, std 1 per channel */
	pbx_dataset_normalize(&a, NULL, NULL);
	pbx_dataset_channel_stats(&a, mean, std);
	for (int ch = 0; ch < 3; ch++)
		CHECK(fabsf(mean[ch]) < 1e-4f && fabsf(std[ch] - 1) < 1e-4f);
	/* given stats: (x - m) / s, with s = 0 treated as 1 */
	memcpy(b.x, c.x, d * sizeof(float));
	pbx_dataset_normalize(&c, m2, s2);
	for (int ch = 0; ch < 3; ch++)
		CHECK(c.x[ch * 64 + 5] == (b.x[ch * 64 + 5] - m2[ch]) / (s2[ch] ? s2[ch] : 1));

	/* degenerate sizes give an empty set */
	pbx_dataset_free(&b);
	pbx_dataset_synthetic(&b, 0, 3, 8, 8, 10, 1);
	CHECK(b.n == 0 && b.x == NULL);
	pbx_dataset_free(&a), pbx_dataset_free(&b), pbx_dataset_free(&c), pbx_dataset_free(&te);
	pbx_dataset_free(NULL);
}

int main(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	tdir = tmpdir_new("dataset");
	test_idx_good();
	test_idx_bad();
	test_cifar();
	test_named();
	test_synthetic();
	test_fashion_real();
	CHECK(pbx_rm_rf(tdir, &err) == 0);
	free(tdir);
	return tap_done();
}
