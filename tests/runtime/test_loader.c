/*
 * test_loader.c - the batch loader (src/runtime/loader.h): every example
 * exactly once per epoch across world = 3 ranks, drop_last, bit-identical
 * batches whatever nthreads is, exact resume from a saved state,
 * augmentation that only crops and flips, and clean shutdown mid-epoch.
 *
 * The data set here has y[i] = i and pixels that encode (i, position), so a
 * batch says which examples it holds.
 */
#include "runtime/loader.h"

#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "util/xalloc.h"

#define C 2
#define H 5
#define W 6
#define D (C * H * W)

/* n examples; x[i] pixel j = i + j/1000 (distinct, positive), y[i] = i. */
static void make_indexed(struct pbx_dataset *ds, int n)
{
	memset(ds, 0, sizeof(*ds));
	ds->n = n, ds->c = C, ds->h = H, ds->w = W, ds->nclasses = n;
	ds->x = xmalloc((size_t)n * D * sizeof(float));
	ds->y = xmalloc((size_t)n * sizeof(int32_t));
	for (int i = 0; i < n; i++) {
		ds->y[i] = i;
		for (int j = 0; j < D; j++)
			ds->x[i * D + j] = (float)i + (float)(j + 1) / 1000.0f;
	}
}

/* Runs one epoch of a loader: appends labels to seen (counted), returns the
 * number of batches and checks sizes. */
static int run_epoch(struct pbx_loader *l, int batch, int *seen, int *nex)
{
	float *x = xmalloc((size_t)batch * D * sizeof(float));
	int32_t *y = xmalloc((size_t)batch * sizeof(int32_t));
	int nb = 0, n;
	*nex = 0;
	while ((n = pbx_loader_next(l, x, y)) > 0) {
		REQUIRE(n <= batch);
		for (int k = 0; k < n; k++) {
			/* x and y agree (and so y[k] is an index into seen) */
			REQUIRE(x[k * D] == (float)y[k] + 0.001f);
			seen[y[k]]++;
		}
		*nex += n;
		nb++;
	}
	free(x), free(y);
	return nb;
}

static void test_coverage(void)
{
	struct pbx_dataset ds;
	int seen[103], nex[3], nb[3];
	int64_t bpe[3];
	make_indexed(&ds, 103);
	for (int drop = 0; drop <= 1; drop++) {
		struct pbx_loader *l[3];
		for (int r = 0; r < 3; r++) {
			l[r] = pbx_loader_new(&ds, 4, 1, NULL, 99, r, 3, r, drop);
			REQUIRE(l[r]);
			bpe[r] = pbx_loader_batches_per_epoch(l[r]);
		}
		for (int epoch = 0; epoch < 2; epoch++) {
			struct pbx_loader_state st;
			int total = 0;
			memset(seen, 0, sizeof(seen));
			for (int r = 0; r < 3; r++) {
				nb[r] = run_epoch(l[r], 4, seen, &nex[r]);
				CHECK(nb[r] == bpe[r]);
				total += nex[r];
				pbx_loader_get_state(l[r], &st);
				CHECK(st.epoch == epoch + 1 && st.cursor == 0 && st.seed == 99);
			}
			for (int i = 0; i < 103; i++)
				CHECK(seen[i] <= 1);
			if (!drop) {
				/* 103 = 8 steps of 12 + tail 7 split 2/2/3 */
				CHECK(total == 103 && nex[0] == 34 && nex[1] == 34 && nex[2] == 35);
				for (int i = 0; i < 103; i++)
					CHECK(seen[i] == 1);
			} else {
				CHECK(total == 96 && nb[0] == 8 && nb[1] == 8 && nb[2] == 8);
			}
		}
		for (int r = 0; r < 3; r++)
			pbx_loader_free(l[r]);
	}
	pbx_dataset_free(&ds);
}

/* Two epochs of all batches of a loader, concatenated (x then y). */
static size_t collect(struct pbx_loader *l, int batch, float *xs, int32_t *ys)
{
	size_t off = 0;
	for (int e = 0; e < 2; e++) {
		int n;
		while ((n = pbx_loader_next(l, xs + off * D, ys + off)) > 0)
			off += (size_t)n;
		(void)batch;
	}
	return off;
}

static void test_threads_identical(void)
{
	struct pbx_dataset ds;
	struct pbx_augment aug = { 2, 1 };
	float *xs[3];
	int32_t *ys[3];
	size_t n[3];
	make_indexed(&ds, 57);
	for (int t = 0; t < 3; t++) {
		int nth = t == 2 ? 3 : t;
		struct pbx_loader *l = pbx_loader_new(&ds, 5, 1, &aug, 7, 1, 2, nth, 0);
		REQUIRE(l);
		xs[t] = xmalloc(2 * 57 * D * sizeof(float));
		ys[t] = xmalloc(2 * 57 * sizeof(int32_t));
		n[t] = collect(l, 5, xs[t], ys[t]);
		pbx_loader_free(l);
	}
	/* G = 10: 5 full steps + rank 1 share 4 of the tail of 7 = 29 per epoch */
	CHECK(n[0] == 2 * 29 && n[1] == n[0] && n[2] == n[0]);
	for (int t = 1; t < 3; t++) {
		CHECK(memcmp(xs[0], xs[t], n[0] * D * sizeof(float)) == 0);
		CHECK(memcmp(ys[0], ys[t], n[0] * sizeof(int32_t)) == 0);
	}
	/* epochs use different orders */
	CHECK(memcmp(ys[0], ys[0] + 29, 29 * sizeof(int32_t)) != 0);
	for (int t = 0; t < 3; t++)
		free(xs[t]), free(ys[t]);
	pbx_dataset_free(&ds);
}

/* 1 + flip if out is src cropped by some (dy, dx) with zero padding and
 * flipped (flip = 1) or not (0); 0 if it is not. */
static int is_augmented(const float *src, const float *out, int pad)
{
	for (int flip = 0; flip < 2; flip++)
		for (int dy = -pad; dy <= pad; dy++)
			for (int dx = -pad; dx <= pad; dx++) {
				int ok = 1;
				for (int j = 0; j < D && ok; j++) {
					int ch = j / (H * W), yy = j / W % H, xx = j % W;
					int sy = yy + dy, sx = (flip ? W - 1 - xx : xx) + dx;
					float want = sy >= 0 && sy < H && sx >= 0 && sx < W
							     ? src[ch * H * W + sy * W + sx]
							     : 0.0f;
					ok = out[j] == want;
				}
				if (ok)
					return 1 + flip;
			}
	return 0;
}

static void test_augment(void)
{
	struct pbx_dataset ds;
	struct pbx_augment aug = { 1, 1 };
	float x[8 * D];
	int32_t y[8];
	int n, flips = 0, same = 0, total = 0;
	struct pbx_loader *l;
	make_indexed(&ds, 40);
	l = pbx_loader_new(&ds, 8, 0, &aug, 3, 0, 1, 2, 0);
	for (int e = 0; e < 3; e++)
		while ((n = pbx_loader_next(l, x, y)) > 0)
			for (int k = 0; k < n; k++) {
				const float *src = ds.x + y[k] * D;
				int how = is_augmented(src, x + k * D, 1);
				CHECK(how > 0);
				same += memcmp(src, x + k * D, D * sizeof(float)) == 0;
				flips += how == 2;
				total++;
			}
	CHECK(total == 120);
	CHECK(same > 0 && same < 30);    /* ~1/18 untouched */
	CHECK(flips > 40 && flips < 80); /* ~half flipped */
	pbx_loader_free(l);

	/* no shuffle, no augmentation: the identity order, exact copies */
	l = pbx_loader_new(&ds, 8, 0, NULL, 3, 0, 1, 0, 1);
	CHECK(pbx_loader_next(l, x, y) == 8);
	for (int k = 0; k < 8; k++)
		CHECK(y[k] == k && memcmp(x + k * D, ds.x + k * D, D * sizeof(float)) == 0);
	pbx_loader_free(l);
	pbx_dataset_free(&ds);
}

/* After `skip` batches of a reference run, a fresh loader set to the saved
 * state must produce the same next `cmp` batches. */
static void check_resume(const struct pbx_dataset *ds, int skip, int cmp, int nth_a, int nth_b)
{
	struct pbx_augment aug = { 2, 1 };
	struct pbx_loader *a = pbx_loader_new(ds, 6, 1, &aug, 5, 0, 2, nth_a, 1);
	struct pbx_loader *b = pbx_loader_new(ds, 6, 1, &aug, 1234, 0, 2, nth_b, 1);
	struct pbx_loader_state st, st2;
	float xa[6 * D], xb[6 * D];
	int32_t ya[6], yb[6];
	for (int i = 0; i < skip; i++)
		pbx_loader_next(a, xa, ya);
	pbx_loader_get_state(a, &st);
	pbx_loader_next(b, xb, yb); /* b is somewhere else entirely */
	CHECK(pbx_loader_set_state(b, &st) == 0);
	pbx_loader_get_state(b, &st2);
	CHECK(memcmp(&st, &st2, sizeof(st)) == 0);
	for (int i = 0; i < cmp; i++) {
		int na = pbx_loader_next(a, xa, ya), nb = pbx_loader_next(b, xb, yb);
		CHECK(na == nb);
		CHECK(memcmp(xa, xb, (size_t)na * D * sizeof(float)) == 0);
		CHECK(memcmp(ya, yb, (size_t)na * sizeof(int32_t)) == 0);
	}
	pbx_loader_free(a);
	pbx_loader_free(b);
}

static void test_resume(void)
{
	struct pbx_dataset ds;
	struct pbx_loader *l;
	struct pbx_loader_state st = { 1, 0, 0 };
	make_indexed(&ds, 50); /* world 2, batch 6, drop_last: 4 batches/epoch */
	check_resume(&ds, 1, 10, 0, 0);
	check_resume(&ds, 3, 10, 2, 0);
	check_resume(&ds, 4, 10, 0, 3); /* at the end, before the 0 */
	check_resume(&ds, 5, 10, 1, 1); /* just after the 0 */
	check_resume(&ds, 11, 6, 3, 2); /* mid second epoch */

	l = pbx_loader_new(&ds, 6, 1, NULL, 5, 1, 2, 1, 1);
	CHECK(pbx_loader_batches_per_epoch(l) == 4);
	st.cursor = 51;
	CHECK(pbx_loader_set_state(l, &st) == -1);
	st.cursor = 0, st.epoch = -1;
	CHECK(pbx_loader_set_state(l, &st) == -1);
	pbx_loader_free(l);
	pbx_dataset_free(&ds);
}

static void test_lifecycle(void)
{
	struct pbx_dataset ds, empty = { 0 };
	struct pbx_augment bad = { -1, 0 };
	float x[16 * D];
	int32_t y[16];
	struct pbx_loader *l;
	make_indexed(&ds, 500);
	/* free right away, and mid-epoch, with threads busy */
	pbx_loader_free(pbx_loader_new(&ds, 16, 1, NULL, 1, 0, 1, 3, 0));
	l = pbx_loader_new(&ds, 16, 1, NULL, 1, 0, 1, 4, 0);
	CHECK(pbx_loader_next(l, x, y) == 16);
	pbx_loader_free(l);
	pbx_loader_free(NULL);
	/* bad arguments */
	CHECK(!pbx_loader_new(&empty, 4, 1, NULL, 1, 0, 1, 0, 0));
	CHECK(!pbx_loader_new(&ds, 0, 1, NULL, 1, 0, 1, 0, 0));
	CHECK(!pbx_loader_new(&ds, 4, 1, NULL, 1, 3, 3, 0, 0));
	CHECK(!pbx_loader_new(&ds, 4, 1, NULL, 1, 0, 0, 0, 0));
	CHECK(!pbx_loader_new(&ds, 4, 1, NULL, 1, 0, 1, -1, 0));
	CHECK(!pbx_loader_new(&ds, 4, 1, &bad, 1, 0, 1, 0, 0));
	/* more ranks than examples in the tail: a rank may get one batch fewer */
	l = pbx_loader_new(&ds, 100, 0, NULL, 1, 0, 7, 0, 0);
	CHECK(pbx_loader_batches_per_epoch(l) == 1); /* 500 < 700: share 71 */
	pbx_loader_free(l);
	pbx_dataset_free(&ds);
	make_indexed(&ds, 5);
	l = pbx_loader_new(&ds, 4, 0, NULL, 1, 0, 7, 0, 0);
	CHECK(pbx_loader_batches_per_epoch(l) == 0); /* share of 5 over 7 is 0 */
	CHECK(pbx_loader_next(l, x, y) == 0);
	pbx_loader_free(l);
	pbx_dataset_free(&ds);
}

int main(void)
{
	test_coverage();
	test_threads_identical();
	test_augment();
	test_resume();
	test_lifecycle();
	return tap_done();
}
