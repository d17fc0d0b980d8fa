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
	char *end;
	unsigned long long n;
	if (!at || strncmp(at, phase, l) != 0 || at[l] != ':' || at[l + 1] < '0' || at[l + 1] > '9')
		return; /* unset, another phase, or no number: never */
	n = strtoull(at + l + 1, &end, 10);
	if (reached < n)
		return;
	if (!*end)
		raise(SIGKILL);
	else if (!strcmp(end, ":INT")) /* as Ctrl-C would */
		raise(SIGINT);
}
