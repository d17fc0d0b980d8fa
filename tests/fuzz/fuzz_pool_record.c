/*
 * fuzz_pool_record.c - libFuzzer target for what `pbx pull` reads from
 * someone else's bucket (src/pool): a task's record (pbx-task.json,
 * record.c) and a listed object's name (publisher.c).  Any bytes must
 * parse or be refused without crashing; an accepted record has a
 * publisher, a 64-hex package id, a state and metric points with names
 * and steps >= 0; an accepted name has a valid publisher and a 12-hex id.
 */
#include "config/config.h"
#include "pool/pool_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_record(const struct pool_record *r)
{
	size_t i;
	if (!r->publisher || !r->state || !r->params_json || strlen(r->package_id) != 64 ||
	    !r->experiment)
		abort();
	for (i = 0; i < r->nmetrics; i++)
		if (!r->metrics[i].name || !r->metrics[i].name[0] || r->metrics[i].step < 0)
			abort();
}

static void check_name(const uint8_t *data, size_t size)
{
	char *name = malloc(size + 1), publisher[65], short_id[13];
	int64_t idx;
	memcpy(name, data, size);
	name[size] = '\0';
	if (pool_object_parse("p/", name, publisher, short_id, &idx) == 0 &&
	    (!pbx_publisher_name_valid(publisher) || strlen(short_id) != 12 || idx < 0))
		abort();
	free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pool_record r;
	struct pbx_err err = PBX_ERR_INIT;
	if (pool_record_parse((const char *)data, size, &r, &err) == 0) {
		check_record(&r);
		pool_record_free(&r);
	} else if (!err.msg[0]) {
		abort();
	}
	check_name(data, size);
	return 0;
}
