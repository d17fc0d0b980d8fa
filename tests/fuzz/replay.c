/*
 * replay.c - a plain main() for libFuzzer targets: feeds every file named
 * on the command line (directories: every regular file in them) to
 * LLVMFuzzerTestOneInput, so the corpus runs as a ctest test in every
 * build, gcc included.  Exits non-zero when an input cannot be read or a
 * directory holds no inputs; crashes and sanitizer reports fail the test.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t len = 0, cap = 0, n;
	if (!f) {
		perror(path);
		return -1;
	}
	do {
		if (len == cap) {
			uint8_t *bigger = realloc(data, cap = cap ? cap * 2 : 4096);
			if (!bigger) {
				free(data);
				fclose(f);
				return -1;
			}
			data = bigger;
		}
		n = fread(data + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	return 0;
}

static int replay_dir(const char *dir, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc = 0;
	if (!d) {
		perror(dir);
		return -1;
	}
	while ((de = readdir(d)) && rc == 0) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		rc = replay_file(path);
		(*count)++;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	size_t count = 0;
	int i;
	for (i = 1; i < argc; i++) {
		struct stat st;
		int rc;
		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = replay_dir(argv[i], &count);
		} else {
			rc = replay_file(argv[i]);
			count++;
		}
		if (rc < 0)
			return 1;
	}
	printf("replayed %zu inputs\n", count);
	return count ? 0 : 1;
}
