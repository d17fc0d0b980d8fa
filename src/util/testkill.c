/*
 * testkill.c - PBX_TEST_KILL_AT kill points for the crash tests (see
 * testkill.h).
 */
#include "util/testkill.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

void pbx_test_kill_point(const char *phase, uint64_t reached)
{
	const char *at = getenv("PBX_TEST_KILL_AT");
	size_t l = strlen(phase);
	if (at && !strncmp(at, phase, l) && at[l] == ':' &&
	    reached >= strtoull(at + l + 1, NULL, 10))
		raise(SIGKILL);
}
