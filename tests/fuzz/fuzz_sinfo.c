/*
 * fuzz_sinfo.c - libFuzzer target for the sinfo output parser
 * (src/slurm/sinfo.c): any bytes must parse or fail cleanly, and every
 * parsed node must have a non-empty name and state.
 */
#include "slurm/sinfo.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_sinfo_node *nodes;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n, i;
	if (pbx_sinfo_parse((const char *)data, size, &nodes, &n, &err) == 0) {
		for (i = 0; i < n; i++)
			if (!nodes[i].name[0] || !nodes[i].state[0] ||
			    !pbx_sinfo_state_of(nodes, n, nodes[i].name))
				abort();
		pbx_sinfo_free(nodes, n);
	}
	return 0;
}
