/*
 * fuzz_experiment.c - libFuzzer target for experiment files: any bytes go
 * through pbx_experiment_parse (yamltree, sweep expansion, random draws,
 * resources, placeholders); a file that loads has the commands, point JSON
 * and task records of its first and last points built and checked (no
 * command past PBX_EXPERIMENT_MAX_COMMAND), a resource override tried, and
 * its files/outputs patterns run through the matcher (pattern.c) against a
 * few paths and themselves.  Nothing touches the file system.
 */
#include "experiment/experiment.h"
#include "experiment/package.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_point(const struct pbx_experiment *e, size_t i)
{
	struct pbx_buf dat = PBX_BUF_INIT, idx = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *cmd = pbx_experiment_task_command(e, i);
	char *json = pbx_experiment_point_json(e, i);
	const char *rec;
	size_t len;
	if (!cmd || !json || json[0] != '{' || strlen(cmd) > PBX_EXPERIMENT_MAX_COMMAND)
		abort();
	if (pbx_package_records(e, i, 1, &dat, &idx, &err) == 0 &&
	    (pbx_package_record(dat.buf, dat.len, idx.buf, idx.len, 0, &rec, &len) < 0 ||
	     strncmp(rec, "pbx_rec_index=", 14)))
		abort();
	pbx_buf_release(&dat);
	pbx_buf_release(&idx);
	free(cmd);
	free(json);
}

static void fuzz_patterns(char **pats, const int *lines, size_t n)
{
	static const char *const paths[] = { "", "a", "a/b", ".x", "d/x.bin", NULL };
	size_t k, j;
	for (k = 0; k < n; k++) {
		if (lines[k] < 1)
			abort();
		for (j = 0; paths[j]; j++) {
			pbx_pattern_match(pats[k], paths[j], j % 2);
			pbx_pattern_may_enter(pats[k], paths[j]);
		}
		pbx_pattern_match(pats[k], pats[k], false);
		pbx_pattern_may_enter(pats[k], pats[k]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_experiment *e = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char **args;
	size_t i, n;
	if (pbx_experiment_parse("fuzz.yaml", (const char *)data, size, "/nonexistent", &e, &err) <
	    0) {
		if (e || err.code != PBX_EXIT_USAGE || !err.msg[0])
			abort();
		return 0;
	}
	if (!e->npoints || !e->name || (!e->command == !e->train_json))
		abort();
	fuzz_point(e, 0);
	fuzz_point(e, e->npoints - 1);
	fuzz_patterns(e->files, e->files_lines, e->nfiles);
	fuzz_patterns(e->outputs, e->outputs_lines, e->noutputs);
	pbx_experiment_override_resource(e, "gres", "gpu:1", &err);
	args = pbx_experiment_sbatch_args(e, &n);
	for (i = 0; i < n; i++) {
		if (strncmp(args[i], "--", 2))
			abort();
		free(args[i]);
	}
	free(args);
	pbx_experiment_free(e);
	return 0;
}
