/*
 * tb_write.c - writes known scalars with src/runtime/metrics.h into DIR
 * (removed first), for the runtime_tensorboard test, which then checks them
 * with scripts/check_tensorboard.py (TensorBoard's own reader).
 *
 * Two sessions, like a resumed run: steps 0, 10, 20, then (append) 30 in a
 * second event file.  Values: loss = 2.5 / 2^k, acc = 0.1, 0.5, 0.875, lr =
 * 0.1 (not exact in float32), and one NaN.
 */
#include "runtime/metrics.h"

#include <math.h>
#include <stdio.h>

#include "util/fs.h"

int main(int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *names[] = { "loss", "acc", "lr" };
	double acc[] = { 0.1, 0.5, 0.875 };
	struct pbx_metrics *m;
	if (argc != 2) {
		fprintf(stderr, "usage: tb_write DIR\n");
		return 2;
	}
	if (pbx_rm_rf(argv[1], &err) < 0 || !(m = pbx_metrics_open(argv[1], 0, &err))) {
		fprintf(stderr, "tb_write: %s\n", err.msg);
		return 1;
	}
	for (int k = 0; k < 3; k++) {
		double v[] = { 2.5 / (1 << k), acc[k], 0.1 };
		if (pbx_metrics_log(m, 10 * k, 3, names, v) < 0) {
			fprintf(stderr, "tb_write: %s\n", pbx_metrics_error(m));
			return 1;
		}
	}
	pbx_metrics_close(m);
	if (!(m = pbx_metrics_open(argv[1], 1, &err))) {
		fprintf(stderr, "tb_write: %s\n", err.msg);
		return 1;
	}
	{
		double v[] = { NAN, 0.9, 0.01 };
		if (pbx_metrics_log(m, 30, 3, names, v) < 0) {
			fprintf(stderr, "tb_write: %s\n", pbx_metrics_error(m));
			return 1;
		}
	}
	pbx_metrics_close(m);
	return 0;
}
