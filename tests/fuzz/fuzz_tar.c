/*
 * fuzz_tar.c - libFuzzer target for the tar gatekeeper and the extractor
 * behind it (src/ssh/tarcheck.c, src/ssh/untar.c): any bytes are accepted
 * or refused cleanly, in one piece or in 1-byte pieces alike, and what is
 * extracted stays inside the destination: no symlink there points outside.
 */
#define _GNU_SOURCE
#include "ssh/tarcheck.h"
#include "ssh/untar.h"
#include "util/fs.h"

#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_root[64];
static size_t fuzz_root_len;

/* Feeds data in pieces of `step` into a checker, extracting into dir when
 * dir is not NULL; returns whether the stream was accepted. */
static int fuzz_run(const uint8_t *data, size_t size, size_t step, const char *dir)
{
	struct pbx_tarcheck *tc = pbx_tarcheck_new();
	struct pbx_untar *u = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t off = 0;
	int rc = 0;
	if (dir) {
		struct pbx_tar_events ev;
		u = pbx_untar_new(dir, &err);
		if (!u)
			abort();
		ev = pbx_untar_events(u);
		pbx_tarcheck_set_events(tc, &ev);
	}
	while (rc == 0 && off < size) {
		size_t n = size - off < step ? size - off : step;
		rc = pbx_tarcheck_feed(tc, data + off, n, NULL, &err);
		off += n;
	}
	if (rc == 0)
		rc = pbx_tarcheck_finish(tc, &err);
	if (u && pbx_untar_finish(u, rc == 0, NULL) < 0)
		rc = -1;
	pbx_tarcheck_free(tc);
	return rc == 0;
}

/* Every symlink under the destination resolves inside it. */
static int fuzz_check_link(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	char real[PATH_MAX];
	(void)sb;
	(void)ftw;
	if (flag == FTW_SL && realpath(path, real) &&
	    (strncmp(real, fuzz_root, fuzz_root_len) != 0 ||
	     (real[fuzz_root_len] && real[fuzz_root_len] != '/')))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[96];
	int whole, pieces;
	if (!fuzz_root[0]) {
		char tmpl[] = "/tmp/pbx-fuzz-tar-XXXXXX";
		if (!mkdtemp(tmpl) || !realpath(tmpl, fuzz_root))
			abort();
		fuzz_root_len = strlen(fuzz_root);
	}
	snprintf(out, sizeof(out), "%s/out", fuzz_root);
	pbx_rm_rf(out, NULL);
	if (mkdir(out, 0700) < 0)
		abort();
	whole = fuzz_run(data, size, size ? size : 1, out);
	pieces = fuzz_run(data, size, 1, NULL);
	if (whole != pieces)
		abort();
	nftw(out, fuzz_check_link, 16, FTW_PHYS);
	pbx_rm_rf(out, NULL);
	return 0;
}
