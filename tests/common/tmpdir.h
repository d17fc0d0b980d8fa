/*
 * tmpdir.h - scratch directories for the C test programs: tmpdir_new(tag)
 * makes a fresh $TMPDIR/pbx-TAG-XXXXXX (/tmp without $TMPDIR) and returns
 * its path; the caller frees the string and removes the directory.  Not
 * being able to make one is a failed REQUIRE (see tap.h).
 */
#ifndef PBX_TESTS_TMPDIR_H
#define PBX_TESTS_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static inline char *tmpdir_new(const char *tag)
{
	const char *base = getenv("TMPDIR");
	size_t len;
	char *path;
	if (!base || !base[0])
		base = "/tmp";
	len = strlen(base) + strlen(tag) + sizeof("/pbx--XXXXXX");
	path = malloc(len);
	if (!path)
		abort();
	snprintf(path, len, "%s/pbx-%s-XXXXXX", base, tag);
	REQUIREF(mkdtemp(path) != NULL, "a scratch directory %s", path);
	return path;
}

#endif
