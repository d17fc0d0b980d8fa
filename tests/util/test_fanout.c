/*
 * test_fanout.c - unit tests of src/util/fanout.c, pbx_fanout: N jobs on at
 * most C threads.  Every job runs exactly once; the count returned and the
 * errors collected are those of the failing jobs (each error cleared before
 * its job, a stale one included); the number of jobs running at once,
 * measured with an atomic counter in the job, never exceeds C and does
 * reach C (the first C jobs wait for each other); also C larger than N,
 * C of 1, 0 and below, N of 0, and errs NULL.
 */
#include "common/tap.h"
#include "util/err.h"
#include "util/fanout.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct job_ctx {
	size_t n;
	int target;   /* the first `target` jobs wait until that many run at once */
	int fail_mod; /* job i fails when i % fail_mod == fail_mod - 1; 0: none */
	atomic_int running, peak, dirty_err;
	atomic_int *runs; /* n entries */
};

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int fails(const struct job_ctx *c, size_t i)
{
	return c->fail_mod && i % (size_t)c->fail_mod == (size_t)c->fail_mod - 1;
}

static int job(void *ctx, size_t i, struct pbx_err *err)
{
	struct job_ctx *c = ctx;
	int now = atomic_fetch_add(&c->running, 1) + 1, peak = atomic_load(&c->peak);
	while (now > peak && !atomic_compare_exchange_weak(&c->peak, &peak, now))
		;
	if (err->code != 0 || err->msg[0] != '\0')
		atomic_fetch_add(&c->dirty_err, 1);
	if (i < (size_t)c->target) {
		/* wait (5 s at most) until the first `target` jobs all run */
		int waited;
		for (waited = 0; waited < 5000 && atomic_load(&c->peak) < c->target; waited++)
			sleep_ms(1);
	} else {
		sleep_ms((long)(i % 3));
	}
	if (i < c->n)
		atomic_fetch_add(&c->runs[i], 1);
	atomic_fetch_sub(&c->running, 1);
	if (fails(c, i))
		return pbx_err_setc(err, 3 + (int)(i % 2), "job %zu failed", i);
	return 0;
}

/* Runs n jobs on `concurrency` threads and checks what came of them. */
static void run(size_t n, int concurrency, int fail_mod, int with_errs)
{
	struct job_ctx c;
	struct pbx_err *errs = NULL;
	size_t i, want_failed = 0, not_once = 0, wrong_err = 0;
	int failed, limit = concurrency > 0 ? concurrency : 1;
	char what[96];

	snprintf(what, sizeof(what), "n %zu, concurrency %d, %s, errs %s", n, concurrency,
		 fail_mod ? "some fail" : "none fails", with_errs ? "given" : "NULL");
	memset(&c, 0, sizeof(c));
	c.n = n;
	c.target = (size_t)limit < n ? limit : (int)n;
	c.fail_mod = fail_mod;
	atomic_init(&c.running, 0);
	atomic_init(&c.peak, 0);
	atomic_init(&c.dirty_err, 0);
	c.runs = calloc(n ? n : 1, sizeof(*c.runs));
	if (!c.runs)
		abort();
	for (i = 0; i < n; i++)
		atomic_init(&c.runs[i], 0);
	if (with_errs) {
		errs = calloc(n ? n : 1, sizeof(*errs));
		if (!errs)
			abort();
		for (i = 0; i < n; i++) /* stale errors: each must be cleared */
			pbx_err_setc(&errs[i], 4, "stale error %zu", i);
	}

	failed = pbx_fanout(n, concurrency, job, &c, errs);

	for (i = 0; i < n; i++) {
		if (fails(&c, i))
			want_failed++;
		if (atomic_load(&c.runs[i]) != 1 && not_once++ == 0)
			tap_diag("job %zu ran %d times", i, atomic_load(&c.runs[i]));
		if (errs) {
			char want[64] = "";
			int code = 0;
			if (fails(&c, i)) {
				snprintf(want, sizeof(want), "job %zu failed", i);
				code = 3 + (int)(i % 2);
			}
			if ((errs[i].code != code || strcmp(errs[i].msg, want) != 0) &&
			    wrong_err++ == 0)
				tap_diag("errs[%zu]: code %d '%s', want %d '%s'", i, errs[i].code,
					 errs[i].msg, code, want);
		}
	}
	CHECKF(!not_once, "%s: every job ran exactly once (%zu did not)", what, not_once);
	CHECKF(failed == (int)want_failed, "%s: %d failures counted, %zu jobs failed", what, failed,
	       want_failed);
	if (errs)
		CHECKF(!wrong_err && !atomic_load(&c.dirty_err),
		       "%s: errs holds exactly the failing jobs' errors, each cleared before its job "
		       "(%zu wrong, %d not cleared)",
		       what, wrong_err, atomic_load(&c.dirty_err));
	CHECKF(atomic_load(&c.peak) <= limit, "%s: at most %d jobs at once (peak %d)", what, limit,
	       atomic_load(&c.peak));
	CHECKF(atomic_load(&c.peak) == c.target, "%s: %d jobs did run at once (peak %d)", what,
	       c.target, atomic_load(&c.peak));
	CHECKF(atomic_load(&c.running) == 0, "%s: nothing runs after pbx_fanout returned", what);
	free(c.runs);
	free(errs);
}

int main(void)
{
	int round;
	run(50, 4, 3, 1);
	run(50, 4, 0, 1);
	run(50, 4, 1, 1); /* all fail */
	run(64, 8, 2, 0);
	run(7, 16, 3, 1); /* more threads asked for than jobs */
	run(20, 1, 3, 1); /* one at a time */
	run(5, 0, 2, 1);  /* 0 and below run one at a time */
	run(5, -3, 2, 1);
	run(1, 4, 0, 1);
	run(0, 4, 3, 1); /* nothing to do */
	run(0, 4, 3, 0);
	for (round = 0; round < 20; round++)
		run(40, 5, 4, 1);
	return tap_done();
}
