/*
 * test_jobs.c - unit tests of src/jobs against hostile answers from the
 * head: sbatch output that is not a job id never becomes one (it would
 * reach scancel).
 */
#include "common/tap.h"
#include "jobs/jobs_internal.h"

#include <stdlib.h>
#include <string.h>

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
	   !strcmp(job, "1234") && !error, "a job id of digits is taken");
	free(job);
	for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		ok(jobs_answer_line(hostile[i], &row, &job, &error) == 1 && row == 7 && !job &&
		   error && strstr(error, "where a job id (digits) was expected"),
		   "refused: '%s' (%s)", hostile[i], error ? error : "no error");
		free(job);
		free(error);
	}
	ok(jobs_answer_line("PBX-ARRAY-FAILED 8 sbatch: error: QOS", &row, &job, &error) == 1 &&
	   row == 8 && !job && error && !strcmp(error, "sbatch: error: QOS"), "a failure is one");
	free(error);
	ok(jobs_answer_line("PBX-ARRAYX 7 12", &row, &job, &error) == 0 &&
	   jobs_answer_line("PBX-ARRAY x 12", &row, &job, &error) == 0 &&
	   jobs_answer_line("garbage", &row, &job, &error) == 0, "other lines are no answer");
	ok(pbx_slurm_job_id_ok("1") && pbx_slurm_job_id_ok("123456789012345678") &&
	   !pbx_slurm_job_id_ok("") && !pbx_slurm_job_id_ok(NULL) &&
	   !pbx_slurm_job_id_ok("1234567890123456789") && !pbx_slurm_job_id_ok("12\n") &&
	   !pbx_slurm_job_id_ok("12_3"), "pbx_slurm_job_id_ok: 1 to 18 digits only");
}

int main(void)
{
	test_answers();
	return tap_done();
}
