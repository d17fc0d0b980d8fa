/*
 * fuzz_squeue.c - libFuzzer target for the squeue and scontrol parsers
 * (src/slurm/squeue.c): any bytes must parse or fail cleanly.
 */
#include "slurm/squeue.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_squeue_job *jobs;
	struct pbx_slurm_limits lim;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n, i;
	if (pbx_squeue_parse((const char *)data, size, &jobs, &n, &err) == 0) {
		for (i = 0; i < n; i++)
			if (jobs[i].array_job < 0 || !jobs[i].state[0] ||
			    (jobs[i].range_lo >= 0 && jobs[i].range_hi < jobs[i].range_lo))
				abort();
		pbx_squeue_free(jobs, n);
	}
	if (pbx_scontrol_limits_parse((const char *)data, size, &lim, &err) == 0 &&
	    (lim.max_array_size <= 0 || lim.max_job_count <= 0))
		abort();
	return 0;
}
