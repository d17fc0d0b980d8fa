/*
 * fuzz_env_gc.c - libFuzzer target for what `pbx cluster gc` reads of its
 * collectors' output (src/jobs/envgc.c, pbx_env_gc_parse; their lines come
 * from scripts run as the task user, over files tasks may write): any
 * bytes parse without a crash; every item gone has a kind of 1-15 letters,
 * a hex id of 1-64 digits and a size of 0 or more, no two share kind, id
 * and place, the bytes freed are their sum (at most LLONG_MAX: a reply
 * of huge sizes does not overflow it); every key kept is 1-64 hex
 * digits; the counts are never negative.
 */
#include "jobs/jobs.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int hex_of(const char *s, size_t max)
{
	size_t n = strlen(s);
	return n >= 1 && n <= max && strspn(s, "0123456789abcdef") == n;
}

static void check(const struct pbx_env_gc *g)
{
	long long sum = 0;
	size_t i, j;
	for (i = 0; i < g->ngone; i++) {
		const struct pbx_env_gc_item *it = &g->gone[i];
		size_t k = strlen(it->kind);
		if (k < 1 || k > 15 || strspn(it->kind, "abcdefghijklmnopqrstuvwxyz") != k ||
		    !hex_of(it->id, 64) || it->bytes < 0 || strcmp(it->node, "n1"))
			abort();
		for (j = 0; it->where && j < i; j++)
			if (!strcmp(g->gone[j].kind, it->kind) && !strcmp(g->gone[j].id, it->id) &&
			    g->gone[j].where && !strcmp(g->gone[j].where, it->where))
				abort();
		sum = sum > LLONG_MAX - it->bytes ? LLONG_MAX : sum + it->bytes;
	}
	for (i = 0; i < g->nkept; i++)
		if (!hex_of(g->kept[i], 64))
			abort();
	if (sum != g->freed || g->busy < 0 || g->young < 0 || g->young_data < 0 || g->busy_data < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_env_gc g;
	struct pbx_buf out = PBX_BUF_INIT;
	if (size > 1 << 16)
		return 0;
	memset(&g, 0, sizeof(g));
	pbx_buf_add(&out, data, size);
	pbx_env_gc_parse(&g, "n1", &out);
	check(&g);
	pbx_env_gc_free(&g);
	pbx_buf_release(&out);
	return 0;
}
