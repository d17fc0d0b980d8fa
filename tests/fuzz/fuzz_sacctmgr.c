/*
 * fuzz_sacctmgr.c - libFuzzer target for the sacctmgr -nP parsers and the
 * submit limit (src/slurm/sacctmgr.c): any bytes must parse or fail
 * cleanly, and a limit read is either unknown, none, or a count >= 0.
 */
#include "slurm/sacctmgr.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_slurm_assoc *a;
	struct pbx_slurm_qos *q;
	struct pbx_submit_limit lim;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n, i;
	if (pbx_sacctmgr_assoc_parse((const char *)data, size, &a, &n, &err) == 0) {
		for (i = 0; i < n; i++)
			if (!a[i].account[0] || a[i].max_submit < -1)
				abort();
		pbx_sacctmgr_assoc_free(a, n);
	}
	if (pbx_sacctmgr_qos_parse((const char *)data, size, &q, &n, &err) == 0) {
		for (i = 0; i < n; i++)
			if (!q[i].name[0] || q[i].max_submit_pu < -1)
				abort();
		pbx_sacctmgr_qos_free(q, n);
	}
	if (pbx_sacctmgr_limit_parse((const char *)data, size, "physics", NULL, &lim, &err) == 0 &&
	    (lim.kind == PBX_SUBMIT_LIMIT_SET ? lim.max < 0 : lim.max != -1))
		abort();
	return 0;
}
