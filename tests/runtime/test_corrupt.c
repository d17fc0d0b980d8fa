/*
 * test_corrupt.c - the data corruptions of src/runtime/dataset.h: names,
 * label noise (fixed per seed and example, about the expected fraction
 * changed), pixel permutations (same multiset of values; shuffled = one
 * permutation for all images; random = one per image), Gaussian images.
 */
#include "runtime/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"

#define N 2000
#define K 10
#define D (2 * 5 * 6) /* c = 2, h = 5, w = 6 */
#define P 30

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* Same multiset of values in each channel of example i? */
static int same_values(const float *a, const float *b)
{
	float sa[P], sb[P];
	for (int ch = 0; ch < 2; ch++) {
		memcpy(sa, a + ch * P, sizeof(sa));
		memcpy(sb, b + ch * P, sizeof(sb));
		qsort(sa, P, sizeof(float), cmp_float);
		qsort(sb, P, sizeof(float), cmp_float);
		if (memcmp(sa, sb, sizeof(sa)) != 0)
			return 0;
	}
	return 1;
}

/* Recovers the position map of example i: orig[src[j]] == cur[j].  The
 * synthetic pixels are distinct floats, so the map is unique.  Both checks
 * cover all P positions (counted, then one TAP line each). */
static void position_map(const float *orig, const float *cur, int *map)
{
	int unmatched = 0, apart = 0, first_unmatched = -1, first_apart = -1;
	for (int j = 0; j < P; j++) {
		map[j] = -1;
		for (int k = 0; k < P; k++)
			if (orig[k] == cur[j])
				map[j] = k;
		if (!(map[j] >= 0)) {
			if (!unmatched++)
				first_unmatched = j;
			continue;
		}
		if (!(orig[P + map[j]] == cur[P + j]) && !apart++) /* channels move together */
			first_apart = j;
	}
	if (!CHECKF(unmatched == 0, "map[j] >= 0 for all %d positions j", P))
		tap_diag("%d are not, the first j = %d", unmatched, first_unmatched);
	if (!CHECKF(apart == 0, "orig[P + map[j]] == cur[P + j] for all %d positions j", P))
		tap_diag("%d are not, the first j = %d", apart, first_apart);
}

static void test_parse(void)
{
	enum pbx_corruption k;
	const char *names[] = { "none",          "labels",  "random_labels", "shuffled_pixels",
				"random_pixels", "gaussian" };
	for (int i = 0; i < 6; i++) {
		CHECK(pbx_corruption_parse(names[i], &k) == 0 && (int)k == i);
		CHECK_STR(pbx_corruption_name(k), names[i]);
	}
	CHECK(pbx_corruption_parse("random-labels", &k) == 0 && k == PBX_CORRUPT_RANDOM_LABELS);
	CHECK(pbx_corruption_parse("labelz", &k) == -1);
	CHECK(pbx_corruption_parse("", &k) == -1);
}

static void test_labels(void)
{
	struct pbx_dataset orig, a, b, c, small;
	int changed = 0;
	pbx_dataset_synthetic(&orig, N, 2, 5, 6, K, 1);
	pbx_dataset_synthetic(&a, N, 2, 5, 6, K, 1);
	pbx_dataset_synthetic(&b, N, 2, 5, 6, K, 1);
	pbx_dataset_synthetic(&c, N, 2, 5, 6, K, 1);
	pbx_dataset_synthetic(&small, 100, 2, 5, 6, K, 1);
	pbx_dataset_corrupt(&a, PBX_CORRUPT_LABELS, 0.4f, 7);
	pbx_dataset_corrupt(&b, PBX_CORRUPT_LABELS, 0.4f, 7);
	pbx_dataset_corrupt(&c, PBX_CORRUPT_LABELS, 0.4f, 8);
	pbx_dataset_corrupt(&small, PBX_CORRUPT_LABELS, 0.4f, 7);
	/* fixed per (seed, example): same seed same labels, whatever N */
	CHECK(memcmp(a.y, b.y, N * sizeof(int32_t)) == 0);
	CHECK(memcmp(a.y, small.y, 100 * sizeof(int32_t)) == 0);
	CHECK(memcmp(a.y, c.y, N * sizeof(int32_t)) != 0);
	CHECK(memcmp(a.x, orig.x, N * D * sizeof(float)) == 0);
	{
		int out = 0, first = -1; /* N labels: counted, one TAP line */
		for (int i = 0; i < N; i++) {
			if (!(a.y[i] >= 0 && a.y[i] < K) && !out++)
				first = i;
			changed += a.y[i] != orig.y[i];
		}
		if (!CHECKF(out == 0, "a.y[i] >= 0 && a.y[i] < K for all %d examples i", N))
			tap_diag("%d are not, the first i = %d", out, first);
	}
	/* expected 0.4 * 9/10 = 0.36 of N = 720; sd ~ 21 */
	CHECK(changed > 620 && changed < 820);

	/* random_labels: p = 1, labels near uniform and independent of y */
	pbx_dataset_corrupt(&b, PBX_CORRUPT_RANDOM_LABELS, 0.0f, 9);
	changed = 0;
	for (int i = 0; i < N; i++)
		changed += b.y[i] != orig.y[i];
	CHECK(changed > 1700 && changed < 1900); /* expected 1800 */

	/* p = 0 and NONE change nothing */
	memcpy(c.y, orig.y, N * sizeof(int32_t));
	pbx_dataset_corrupt(&c, PBX_CORRUPT_LABELS, 0.0f, 7);
	pbx_dataset_corrupt(&c, PBX_CORRUPT_NONE, 1.0f, 7);
	CHECK(memcmp(c.y, orig.y, N * sizeof(int32_t)) == 0);
	pbx_dataset_free(&orig), pbx_dataset_free(&a), pbx_dataset_free(&b);
	pbx_dataset_free(&c), pbx_dataset_free(&small);
}

static void test_pixels(void)
{
	struct pbx_dataset orig, sh, rnd, again;
	int map0[P], map[P], differ = 0;
	pbx_dataset_synthetic(&orig, 50, 2, 5, 6, K, 3);
	pbx_dataset_synthetic(&sh, 50, 2, 5, 6, K, 3);
	pbx_dataset_synthetic(&rnd, 50, 2, 5, 6, K, 3);
	pbx_dataset_synthetic(&again, 50, 2, 5, 6, K, 3);
	pbx_dataset_corrupt(&sh, PBX_CORRUPT_SHUFFLED_PIXELS, 0, 5);
	pbx_dataset_corrupt(&rnd, PBX_CORRUPT_RANDOM_PIXELS, 0, 5);
	pbx_dataset_corrupt(&again, PBX_CORRUPT_RANDOM_PIXELS, 0, 5);
	CHECK(memcmp(rnd.x, again.x, 50 * D * sizeof(float)) == 0);
	CHECK(memcmp(sh.y, orig.y, 50 * sizeof(int32_t)) == 0);

	/* shuffled: one non-trivial permutation, the same for every image */
	position_map(orig.x, sh.x, map0);
	for (int j = 0; j < P; j++)
		differ += map0[j] != j;
	CHECK(differ > P / 2);
	for (int i = 0; i < 50; i++) {
		CHECK(same_values(orig.x + i * D, sh.x + i * D));
		position_map(orig.x + i * D, sh.x + i * D, map);
		CHECK(memcmp(map, map0, sizeof(map)) == 0);
	}
	/* random: a permutation per image, and they differ between images */
	differ = 0;
	position_map(orig.x, rnd.x, map0);
	for (int i = 0; i < 50; i++) {
		CHECK(same_values(orig.x + i * D, rnd.x + i * D));
		position_map(orig.x + i * D, rnd.x + i * D, map);
		differ += memcmp(map, map0, sizeof(map)) != 0;
	}
	CHECK(differ == 49);
	pbx_dataset_free(&orig), pbx_dataset_free(&sh), pbx_dataset_free(&rnd);
	pbx_dataset_free(&again);
}

static void test_gaussian(void)
{
	struct pbx_dataset ds, again;
	float m0[2], s0[2], m1[2], s1[2];
	pbx_dataset_synthetic(&ds, N, 2, 5, 6, K, 4);
	pbx_dataset_synthetic(&again, N, 2, 5, 6, K, 4);
	pbx_dataset_channel_stats(&ds, m0, s0);
	pbx_dataset_corrupt(&ds, PBX_CORRUPT_GAUSSIAN, 0, 11);
	pbx_dataset_corrupt(&again, PBX_CORRUPT_GAUSSIAN, 0, 11);
	CHECK(memcmp(ds.x, again.x, N * D * sizeof(float)) == 0);
	pbx_dataset_channel_stats(&ds, m1, s1);
	for (int ch = 0; ch < 2; ch++)
		CHECK(fabsf(m1[ch] - m0[ch]) < 0.02f && fabsf(s1[ch] / s0[ch] - 1) < 0.02f);
	pbx_dataset_free(&ds), pbx_dataset_free(&again);
}

int main(void)
{
	test_parse();
	test_labels();
	test_pixels();
	test_gaussian();
	return tap_done();
}
