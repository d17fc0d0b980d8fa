/*
 * fuzz_sbatch.c - libFuzzer target for the stored sbatch options' reader
 * (src/slurm/sbatch.c, pbx_sbatch_opts_from_json): any bytes must read or
 * fail cleanly, and what reads must survive a round trip through its JSON
 * writer unchanged, with every argv entry one "--key[=value]" word.
 */
#include "slurm/sbatch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_sbatch_opts o, back;
	struct pbx_err err = PBX_ERR_INIT;
	char *text = malloc(size + 1), *json, *json2, **argv;
	size_t n, i;
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (pbx_sbatch_opts_from_json(text, &o, &err) == 0) {
		json = pbx_sbatch_opts_json(&o);
		if (pbx_sbatch_opts_from_json(json, &back, &err) < 0)
			abort();
		json2 = pbx_sbatch_opts_json(&back);
		if (strcmp(json, json2) != 0)
			abort();
		argv = pbx_sbatch_opts_argv(&back, &n);
		for (i = 0; i < n; i++)
			if (strncmp(argv[i], "--", 2) != 0 || strchr(argv[i], '\n'))
				abort();
		pbx_sbatch_argv_free(argv, n);
		free(json);
		free(json2);
		pbx_sbatch_opts_free(&back);
		pbx_sbatch_opts_free(&o);
	}
	free(text);
	return 0;
}
