/*
 * tap.h - a tiny TAP producer for the C test programs.
 *
 *   ok(cond, "what it checks %d", n);   is_str(got, want, "name");
 *   return tap_done();                  (exit status 1 if any check failed)
 */
#ifndef PBX_TESTS_TAP_H
#define PBX_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

static inline int __attribute__((format(printf, 2, 3))) ok(int cond, const char *fmt, ...)
{
	va_list ap;
	printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

static inline int is_str(const char *got, const char *want, const char *name)
{
	int same = got && want && strcmp(got, want) == 0;
	if (!ok(same, "%s", name))
		printf("#   got:  '%s'\n#   want: '%s'\n", got ? got : "(null)", want ? want : "(null)");
	return same;
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	if (tap_failed)
		printf("# %d of %d checks failed\n", tap_failed, tap_n);
	return tap_failed ? 1 : 0;
}

#endif
