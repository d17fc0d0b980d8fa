/*
 * fixture.h - the results tests' data: a store in DIR/pbx.db with one
 * package "sweep-demo" submitted as a 3 (lr) x 2 (width) x 2 (repeat)
 * sweep (12 tasks) and their metrics ingested from DIR/metrics/N.jsonl.
 */
#ifndef PBX_TESTS_RESULTS_FIXTURE_H
#define PBX_TESTS_RESULTS_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "util/buf.h"

#define FIX_NTASKS  12
#define FIX_PACKAGE "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct fixture {
	struct pbx_store *st;
	int64_t submission;
	size_t added[FIX_NTASKS]; /* points added by the first ingest */
	struct pbx_buf warnings;  /* of the first ingest */
	char dir[256];
};

/* Creates DIR/pbx.db (DIR must exist) and ingests every task's file once.
 * Returns 0, or -1 after printing why. */
int fixture_make(struct fixture *fx, const char *dir);
/* The text of task i's metrics.jsonl; caller frees. */
char *fixture_metrics_text(int i);
void fixture_free(struct fixture *fx);

#endif
