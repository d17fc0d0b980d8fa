/*
 * tap.h - the one assertion kit of the C test programs: each check prints
 * one TAP line on stdout ("ok N - ..." or "not ok N - ..."), details of a
 * failure follow as "# ..." lines, a failed check is counted and the
 * program goes on (except REQUIRE), and tap_done() prints the plan.
 *
 *   ok(cond, "what it checks %d", n);   a check named by a printf message
 *   is_str(got, want, "name");          strings equal (a NULL never is)
 *   CHECK(cond);                        named by file:line and the expression
 *   CHECKF(cond, "fmt %d", n);          named by file:line and a printf message
 *   CHECK_STR(got, want);               strings equal (a NULL never is); a
 *                                       failure shows both, escaped, and the
 *                                       first byte where they differ
 *   REQUIRE(cond);                      CHECK, but a failure ends the program:
 *   REQUIREF(cond, "fmt %d", n);        the plan, then exit(1).  For checks
 *                                       that guard what follows (a NULL
 *                                       pointer, a size used to index)
 *   tap_skip("why %s", s);              "ok N # skip why": a check not run here
 *   tap_diag("more about %s", s);       "#   more about ...": details of a check
 *   return tap_done();                  the plan "1..N"; 1 if any check failed
 *
 * ok, is_str, CHECK, CHECKF and CHECK_STR return whether the check passed
 * (`if (!CHECK(p)) return;`).  A check in a loop that runs thousands of
 * times is better counted in the loop and reported by one CHECKF after it
 * (with a tap_diag naming the first bad index when it fails), so that the
 * output stays readable.  Scratch directories: tmpdir.h.
 */
#ifndef PBX_TESTS_TAP_H
#define PBX_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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
		printf("#   got:  '%s'\n#   want: '%s'\n", got ? got : "(null)",
		       want ? want : "(null)");
	return same;
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	if (tap_failed)
		printf("# %d of %d checks failed\n", tap_failed, tap_n);
	return tap_failed ? 1 : 0;
}

/* ---- the location-reporting checks ------------------------------------ */

#define CHECK(cond)       tap_check_(!!(cond), __FILE__, __LINE__, "%s", #cond)
#define CHECKF(cond, ...) tap_check_(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_STR(got, want) \
	tap_check_str_((got), (want), __FILE__, __LINE__, #got " equals " #want)
#define REQUIRE(cond)                                                       \
	do {                                                                \
		if (!tap_check_(!!(cond), __FILE__, __LINE__, "%s", #cond)) \
			tap_stop_();                                        \
	} while (0)
#define REQUIREF(cond, ...)                                                 \
	do {                                                                \
		if (!tap_check_(!!(cond), __FILE__, __LINE__, __VA_ARGS__)) \
			tap_stop_();                                        \
	} while (0)

/* One TAP line "ok N - FILE:LINE: message" (FILE without its folders). */
static inline int __attribute__((format(printf, 4, 5)))
tap_check_(int pass, const char *file, int line, const char *fmt, ...)
{
	const char *base = strrchr(file, '/');
	va_list ap;
	printf("%s %d - %s:%d: ", pass ? "ok" : "not ok", ++tap_n, base ? base + 1 : file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!pass)
		tap_failed++;
	return pass;
}

/* "#   LABEL "text"" with control bytes and quotes escaped, so that a
 * string with newlines stays on one diagnostic line. */
static inline void tap_diag_str_(const char *label, const char *s)
{
	printf("#   %s", label);
	if (!s) {
		printf("(null)\n");
		return;
	}
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\n')
			printf("\\n");
		else if (*p == '\t')
			printf("\\t");
		else if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\x%02x", *p);
		else
			putchar(*p);
	}
	printf("\"\n");
}

static inline int tap_check_str_(const char *got, const char *want, const char *file, int line,
				 const char *what)
{
	int same = got && want && strcmp(got, want) == 0;
	if (!tap_check_(same, file, line, "%s", what)) {
		tap_diag_str_("got:  ", got);
		tap_diag_str_("want: ", want);
		if (got && want) {
			size_t i = 0;
			while (got[i] && got[i] == want[i])
				i++;
			printf("#   first difference at byte %zu\n", i);
		}
		fflush(stdout);
	}
	return same;
}

/* A failed REQUIRE: what follows would crash or mean nothing. */
static inline _Noreturn void tap_stop_(void)
{
	printf("# a REQUIRE failed: stopping here\n");
	tap_done();
	fflush(stdout);
	exit(1);
}

static inline void __attribute__((format(printf, 1, 2))) tap_diag(const char *fmt, ...)
{
	va_list ap;
	printf("#   ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static inline void __attribute__((format(printf, 1, 2))) tap_skip(const char *fmt, ...)
{
	va_list ap;
	printf("ok %d # skip ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

#endif
