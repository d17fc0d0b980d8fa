/*
 * fuzz_data_hashes.c - libFuzzer target for a local data source's
 * remembered file hashes ($PBX_HOME/data/ID/.pbx-hashes, src/jobs/
 * data_hashes.c, read at every staging of a local directory): any bytes
 * load (a line that does not read is left out), and a file is taken as
 * unchanged only when a loaded line matches it in every field, its hash
 * then the line's (64 hex digits).
 */
#include "jobs/data_hashes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_data_hashes *h = pbx_data_hashes_parse(NULL, (const char *)data, size);
	struct pbx_err err = PBX_ERR_INIT;
	struct stat st;
	char hex[65];
	size_t i;
	memset(&st, 0, sizeof(st));
	st.st_size = 5;
	st.st_mtim.tv_sec = 1;
	st.st_ctim.tv_sec = 1;
	st.st_ino = 7;
	st.st_dev = 9;
	/* the file does not exist: a remembered hash or a read error */
	if (pbx_data_hashes_sha256(h, "a/b.txt", "/nonexistent/pbx-fuzz", &st, hex, &err) == 0) {
		if (pbx_data_hashes_reused(h) != 1 || strlen(hex) != 64)
			abort();
		for (i = 0; i < 64; i++)
			if (!strchr("0123456789abcdef", hex[i]))
				abort();
	} else if (pbx_data_hashes_reused(h) != 0 || !err.msg[0]) {
		abort();
	}
	if (pbx_data_hashes_save(h) != -1) /* no path: nothing written */
		abort();
	pbx_data_hashes_free(h);
	pbx_err_clear(&err);
	return 0;
}
