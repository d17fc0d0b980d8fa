/*
 * fuzz_metrics.c - libFuzzer target for the metrics.jsonl parser
 * (src/results/metrics.c): any bytes must parse without crashing, every
 * point must have a non-empty name, a step >= 0 and the task index given,
 * and every warning line must start with the file label.
 */
#include "results/metrics.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_buf warnings = PBX_BUF_INIT;
	struct pbx_metric *pts;
	size_t n, i;
	const char *line;
	pbx_metrics_parse("f", (const char *)data, size, 3, &pts, &n, &warnings);
	for (i = 0; i < n; i++)
		if (!pts[i].name || !pts[i].name[0] || pts[i].step < 0 || pts[i].idx != 3 ||
		    strlen(pts[i].name) > PBX_METRICS_MAX_NAME)
			abort();
	for (line = warnings.buf; *line; line = strchr(line, '\n') + 1)
		if (strncmp(line, "f:", 2) || !strchr(line, '\n'))
			abort();
	pbx_metrics_free(pts, n);
	pbx_buf_release(&warnings);
	return 0;
}
