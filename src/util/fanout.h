/*
 * fanout.h - bounded parallel calls: run fn(ctx, i, &errs[i]) for every
 * i in [0, n) on at most `concurrency` threads.  Used for the per-node work
 * of cluster start (local node bodies, SSH bootstrap) and anything else
 * that fans out over nodes or files.
 */
#ifndef PBX_UTIL_FANOUT_H
#define PBX_UTIL_FANOUT_H

#include <stddef.h>

#include "util/err.h"

/*
 * Calls fn(ctx, i, &errs[i]) for i in [0, n) with at most `concurrency`
 * calls running at once (threads).  Returns the number of calls that
 * returned non-zero; errs (n entries, may be NULL) holds each one's error
 * (cleared before each call).  Returns after every call has finished.
 */
int pbx_fanout(size_t n, int concurrency, int (*fn)(void *ctx, size_t i, struct pbx_err *err),
	       void *ctx, struct pbx_err *errs);

#endif
