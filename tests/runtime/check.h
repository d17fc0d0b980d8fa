/*
 * check.h - the tiny assertion kit of the runtime tests (tests/runtime).
 *
 * CHECK* print file:line and what failed, then exit(1), so ctest shows the
 * first failure.  tmpdir_new() makes a fresh directory under $TMPDIR.
 */
#ifndef PBX_TESTS_RUNTIME_CHECK_H
#define PBX_TESTS_RUNTIME_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			exit(1);                                                 \
		}                                                                \
	} while (0)

#define CHECK_STR(got, want)                                                     \
	do {                                                                     \
		const char *g_ = (got), *w_ = (want);                            \
		if (strcmp(g_, w_) != 0) {                                       \
			fprintf(stderr, "%s:%d: got  \"%s\"\n%*swant \"%s\"\n",  \
				__FILE__, __LINE__, g_, (int)strlen(__FILE__) + 6, \
				"", w_);                                         \
			exit(1);                                                 \
		}                                                                \
	} while (0)

/* A fresh directory; caller frees the string (and removes the directory). */
static inline char *tmpdir_new(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path = xasprintf("%s/pbx-%s-XXXXXX", base && base[0] ? base : "/tmp", tag);
	CHECK(mkdtemp(path) != NULL);
	return path;
}

#endif
