/*
 * ckpt_cmp.c - compares the parameters of two pbx-train checkpoints (the
 * data-parallel tests): prints the largest absolute difference and the
 * largest difference relative to the parameters' RMS, and exits 0 when the
 * latter is at most TOL, 1 when larger, 2 when the files cannot be compared.
 * Reads the documented layout (checkpoint.h): magic, 24 64-bit words (word
 * 3 = parameter count), the CRC word, then the parameters.
 *   usage: train_ckpt_cmp A.pbxt B.pbxt TOL
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"

#define HDR (8 + 8 * 24 + 8)

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int load(const char *path, struct pbx_buf *b, uint64_t *np)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_read_file(path, b, &err) < 0) {
		fprintf(stderr, "ckpt_cmp: %s\n", err.msg);
		return -1;
	}
	if (b->len < HDR || memcmp(b->buf, "PBXTCKPT", 8) != 0) {
		fprintf(stderr, "ckpt_cmp: %s: not a checkpoint\n", path);
		return -1;
	}
	*np = get64((const unsigned char *)b->buf + 8 + 8 * 3);
	if (b->len < HDR + 4 * *np) {
		fprintf(stderr, "ckpt_cmp: %s: truncated\n", path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct pbx_buf a = PBX_BUF_INIT, b = PBX_BUF_INIT;
	uint64_t na, nb;
	if (argc != 4) {
		fprintf(stderr, "usage: train_ckpt_cmp A.pbxt B.pbxt TOL\n");
		return 2;
	}
	if (load(argv[1], &a, &na) < 0 || load(argv[2], &b, &nb) < 0)
		return 2;
	if (na != nb) {
		fprintf(stderr, "ckpt_cmp: %llu against %llu parameters\n", (unsigned long long)na,
			(unsigned long long)nb);
		return 2;
	}
	double maxabs = 0.0, ss = 0.0;
	for (uint64_t i = 0; i < na; i++) {
		float x, y;
		memcpy(&x, a.buf + HDR + 4 * i, 4);
		memcpy(&y, b.buf + HDR + 4 * i, 4);
		double d = fabs((double)x - (double)y);
		if (!(d <= maxabs)) /* NaN counts as the largest */
			maxabs = isnan(d) ? INFINITY : d;
		ss += (double)x * x;
	}
	double rms = sqrt(ss / (double)(na ? na : 1)), rel = maxabs / (rms > 0 ? rms : 1);
	double tol = atof(argv[3]);
	printf("params %llu  max |a-b| %.3g  rms %.3g  max |a-b|/rms %.3g  tolerance %g\n",
	       (unsigned long long)na, maxabs, rms, rel, tol);
	return rel <= tol ? 0 : 1;
}
