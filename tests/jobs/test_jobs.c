/*
 * test_jobs.c - unit tests of src/jobs against hostile answers from the
 * head: sbatch output that is not a job id never becomes one (it would
 * reach scancel), and an squeue array range as large as squeue can print
 * is clamped to the experiment's tasks instead of being walked.
 */
#include "common/tap.h"
#include "jobs/jobs_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_answers(void)
{
	static const char *const hostile[] = {
		"PBX-ARRAY 7 1234; rm -rf ~",
		"PBX-ARRAY 7 1234 $(touch /tmp/pwned)",
		"PBX-ARRAY 7 `id`",
		"PBX-ARRAY 7 1234_[0-3]",
		"PBX-ARRAY 7 -1",
		"PBX-ARRAY 7 +12",
		"PBX-ARRAY 7 12 ",
		"PBX-ARRAY 7 ",
		"PBX-ARRAY 7 1234567890123456789",
		"PBX-ARRAY 7 \x1b]0;pwned\x07",
		"PBX-ARRAY 7 sbatch: error: Batch job submission failed",
	};
	int64_t row = 0;
	char *job = NULL, *error = NULL;
	size_t i;
	ok(jobs_answer_line("PBX-ARRAY 7 1234", &row, &job, &error) == 1 && row == 7 && job &&
		   !strcmp(job, "1234") && !error,
	   "a job id of digits is taken");
	free(job);
	for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		int rc = jobs_answer_line(hostile[i], &row, &job, &error);
		ok(rc == 1 && row == 7 && !job && error &&
			   strstr(error, "where a job id (digits) was expected"),
		   "refused: '%s' (%s)", hostile[i], error ? error : "no error");
		free(job);
		free(error);
	}
	ok(strstr(jobs_limit_hint("array 0-999: sbatch: error: QOSMaxSubmitJobPerUserLimit"),
		  "MaxSubmitJobs") &&
		   strstr(jobs_limit_hint(
				  "sbatch: error: Batch job submission failed: Job violates "
				  "accounting/QOS policy (job submit limit, user's size and/or "
				  "time limits)"),
			  "'pbx parrun' again") &&
		   !*jobs_limit_hint("sbatch: error: invalid partition specified: gpu") &&
		   !*jobs_limit_hint(NULL),
	   "a job count limit in sbatch's errors gets a hint; other errors none");
	ok(jobs_answer_line("PBX-ARRAY-FAILED 8 sbatch: error: QOS", &row, &job, &error) == 1 &&
		   row == 8 && !job && error && !strcmp(error, "sbatch: error: QOS"),
	   "a failure is one");
	free(error);
	ok(jobs_answer_line("PBX-ARRAYX 7 12", &row, &job, &error) == 0 &&
		   jobs_answer_line("PBX-ARRAY x 12", &row, &job, &error) == 0 &&
		   jobs_answer_line("garbage", &row, &job, &error) == 0,
	   "other lines are no answer");
	ok(pbx_slurm_job_id_ok("1") && pbx_slurm_job_id_ok("123456789012345678") &&
		   !pbx_slurm_job_id_ok("") && !pbx_slurm_job_id_ok(NULL) &&
		   !pbx_slurm_job_id_ok("1234567890123456789") && !pbx_slurm_job_id_ok("12\n") &&
		   !pbx_slurm_job_id_ok("12_3"),
	   "pbx_slurm_job_id_ok: 1 to 18 digits only");
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void test_squeue_range(void)
{
	const char *text = "1234_[0-999999999999] PENDING\n1234_2 RUNNING\n"
			   "77_[5-999999999999%4] PENDING\n";
	struct pbx_squeue_job *jobs = NULL;
	struct pbx_array_row arrays[2];
	struct pbx_err err = PBX_ERR_INIT;
	const char *live[10] = { NULL };
	size_t nj = 0, i;
	double t0;
	int right = 1;
	memset(arrays, 0, sizeof(arrays));
	arrays[0].job_id = "1234";
	arrays[0].first_task = 0;
	arrays[1].job_id = "77";
	arrays[1].first_task = 8; /* tasks 8 and 9: index 5 and up is past the end */
	ok(pbx_squeue_parse(text, strlen(text), &jobs, &nj, &err) == 0 && nj == 3,
	   "squeue lines with huge ranges parse: %s", err.msg);
	t0 = now();
	jobs_apply_squeue(jobs, nj, arrays, 2, live, 10);
	ok(now() - t0 < 1.0, "applied in %.3f s (clamped to the 10 tasks)", now() - t0);
	for (i = 0; i < 10; i++)
		right &= i == 2 ? !strcmp(live[i], "RUNNING") : !strcmp(live[i], "PENDING");
	ok(right, "tasks 0-9 pending, task 2 running, nothing past the end");
	pbx_squeue_free(jobs, nj);
}

/* A task's own word for how it ended, against `pbx cancel`'s time. */
static void test_ended_after_cancel(void)
{
	is_str(jobs_ended_state("COMPLETED", 1000, 0), "COMPLETED", "never cancelled: COMPLETED");
	is_str(jobs_ended_state("COMPLETED", 1000, 990), "CANCELLED",
	       "ended 10 s after the cancel: CANCELLED, whatever its exit");
	is_str(jobs_ended_state("FAILED", 1000, 1003), "CANCELLED",
	       "ended 3 s before the cancel by the node's clock: within the slack");
	is_str(jobs_ended_state("COMPLETED", 1000, 1000 + JOBS_CLOCK_SLACK_S + 1), "COMPLETED",
	       "ended well before the cancel: it had completed");
	is_str(jobs_ended_state("TIMEOUT", 1000, 990), "TIMEOUT", "a state SLURM gave stays");
	is_str(jobs_ended_state("COMPLETED", 1000, 1), "CANCELLED",
	       "a store from before the cancel time was kept (1): cancelled, as it read then");
}

/* The user's job submit limit (sacctmgr) caps the tasks of one array and
 * says how many more may go in now. */
static void test_submit_limit(void)
{
	struct jobs_probe pr = { 0 };
	pr.limits.max_array_size = 1001;
	pr.limits.max_job_count = 10000;
	pr.submit.kind = PBX_SUBMIT_LIMIT_UNKNOWN;
	ok(jobs_probe_chunk(&pr) == 1001 && jobs_probe_room(&pr) == -1,
	   "no accounting database: arrays of MaxArraySize, no room counted");
	pr.submit.kind = PBX_SUBMIT_LIMIT_SET;
	pr.submit.max = 500;
	pr.queued = 120;
	ok(jobs_probe_chunk(&pr) == 500 && jobs_probe_room(&pr) == 380,
	   "MaxSubmitJobs 500 with 120 queued: arrays of 500 at most, 380 more now");
	pr.queued = 900;
	ok(jobs_probe_room(&pr) == 0, "more queued than the limit: no room, never negative");
	pr.submit.max = 5000;
	ok(jobs_probe_chunk(&pr) == 1001, "a limit above MaxArraySize changes no array");
	pr.submit.kind = PBX_SUBMIT_LIMIT_NONE;
	ok(jobs_probe_room(&pr) == -1 && jobs_probe_chunk(&pr) == 1001, "no limit set: no cap");
}

int main(void)
{
	test_submit_limit();
	test_ended_after_cancel();
	test_answers();
	test_squeue_range();
	return tap_done();
}
