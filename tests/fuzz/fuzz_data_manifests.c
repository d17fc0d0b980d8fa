/*
 * fuzz_data_manifests.c - libFuzzer target for the cluster's reply to
 * staging's manifest read (src/jobs/data.c, pbx_data_manifests_parse:
 * "PBX-DATA ID" headers, manifest lines of JSON, "PBX-DATA-NONE", "P NAME"
 * lines of names a cut staging placed; bytes from the cluster, untrusted):
 * any bytes parse; every entry names one of the two sources, is a safe
 * relative path, comes by name order within its source, and a placed name
 * (version "") is never also a manifest's entry.
 */
#include "jobs/data.h"
#include "objstore/objstore.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	size_t n[2];
	char *last[2];
};

static void entry(void *ctx, size_t i, const char *name, uint64_t sz, const char *version)
{
	struct seen *s = ctx;
	(void)sz;
	if (i >= 2 || !version || !pbx_objstore_name_safe(name))
		abort();
	if (s->last[i] && strcmp(s->last[i], name) >= 0)
		abort(); /* by name order, each name once */
	free(s->last[i]);
	s->last[i] = strdup(name);
	s->n[i]++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_data_result res[2];
	struct seen s;
	memset(res, 0, sizeof(res));
	memset(&s, 0, sizeof(s));
	memcpy(res[0].id, "0123456789abcdef", 17);
	memcpy(res[1].id, "fedcba9876543210", 17);
	res[0].staged_before = res[1].staged_before = -1;
	pbx_data_manifests_parse((const char *)data, size, res, 2, entry, &s);
	if (res[0].staged_before < -1 || res[0].staged_before > 1 || res[1].staged_before < -1 ||
	    res[1].staged_before > 1)
		abort();
	free(s.last[0]);
	free(s.last[1]);
	return 0;
}
