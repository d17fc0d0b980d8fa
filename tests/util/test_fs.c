/*
 * test_fs.c - unit tests of src/util/fs.c's atomic writes: a link planted
 * at the temporary name pbx used to use (PATH.tmp.PID), at names one might
 * guess, or at PATH itself never redirects the write; the other file keeps
 * its bytes and its mode, PATH ends a regular file with the new bytes and
 * the wanted mode, and no temporary file is left behind; and mkdir -p.
 */
#include "common/tap.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/pbx-test-fs.XXXXXX";

static void put(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    fchmod(fd, mode) < 0)
		perror(path);
	if (fd >= 0)
		close(fd);
}

/* The file's bytes (caller frees), or NULL. */
static char *get(const char *path)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_read_file(path, &b, &err) < 0)
		return NULL;
	pbx_buf_add(&b, "", 1);
	return b.buf;
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 ? st.st_mode : 0;
}

/* Entries of dir whose name starts with prefix. */
static int count_prefix(const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	if (d)
		closedir(d);
	return n;
}

static void test_planted_links(void)
{
	static const char *const guesses[] = { "000000", "AAAAAA", "XXXXXX", "aaaaaa" };
	char *victim = xasprintf("%s/victim", dir), *target = xasprintf("%s/report.html", dir);
	char *old = xasprintf("%s.tmp.%ld", target, (long)getpid()), *text;
	struct pbx_err err = PBX_ERR_INIT;
	size_t i;
	put(victim, "victim bytes\n", 0600);
	ok(symlink(victim, old) == 0, "link planted at the old predictable name %s", old);
	for (i = 0; i < sizeof(guesses) / sizeof(guesses[0]); i++) {
		char *g = xasprintf("%s.tmp.%s", target, guesses[i]);
		ok(symlink(victim, g) == 0, "link planted at a guessed name %s", g);
		free(g);
	}
	ok(pbx_write_file_atomic(target, "new report\n", 11, 0644, &err) == 0,
	   "the write succeeds: %s", err.msg);
	text = get(victim);
	is_str(text, "victim bytes\n", "the other file keeps its bytes");
	free(text);
	ok((mode_of(victim) & 07777) == 0600, "and its mode (0%o)", mode_of(victim) & 07777);
	text = get(target);
	is_str(text, "new report\n", "the target has the new bytes");
	free(text);
	ok(S_ISREG(mode_of(target)) && (mode_of(target) & 07777) == 0644,
	   "the target is a regular file with the wanted mode (0%o)", mode_of(target) & 07777);
	ok(count_prefix("report.html.tmp.") == 5,
	   "no temporary file left (only the 5 planted links)");

	/* a link at the target itself is replaced, not followed */
	unlink(target);
	ok(symlink(victim, target) == 0, "link planted at the target");
	ok(pbx_write_file_atomic(target, "again\n", 6, 0640, &err) == 0, "written over the link");
	text = get(victim);
	is_str(text, "victim bytes\n", "the link's target is untouched");
	free(text);
	ok(S_ISREG(mode_of(target)) && (mode_of(target) & 07777) == 0640 &&
		   (mode_of(victim) & 07777) == 0600,
	   "the target is a regular file, 0640; the other 0600");
	free(victim);
	free(target);
	free(old);
}

static void test_tmpfile_beside(void)
{
	char *target = xasprintf("%s/x", dir), *a = NULL, *b = NULL, *missing;
	struct pbx_err err = PBX_ERR_INIT;
	int fa = pbx_tmpfile_beside(target, &a, &err), fb = pbx_tmpfile_beside(target, &b, &err);
	ok(fa >= 0 && fb >= 0 && a && b && strcmp(a, b) != 0 && !strncmp(a, target, strlen(target)),
	   "two temporary files beside %s: %s, %s", target, a, b);
	ok((mode_of(a) & 07777) == 0600 && (fcntl(fa, F_GETFD) & FD_CLOEXEC),
	   "private (0600) and close-on-exec");
	close(fa);
	close(fb);
	unlink(a);
	unlink(b);
	free(a);
	free(b);
	missing = xasprintf("%s/no/such/dir/x", dir);
	ok(pbx_tmpfile_beside(missing, &a, &err) < 0 && !a && strstr(err.msg, missing),
	   "a missing directory is an error naming the path: %s", err.msg);
	free(missing);
	free(target);
}

/* A read that fails after open (a directory: EISDIR) leaves the buffer as
 * it was: released when it was empty (nothing for a caller to leak). */
static void test_read_error(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	ok(pbx_read_file(dir, &b, &err) < 0 && b.len == 0 && b.alloc == 0 && strstr(err.msg, dir),
	   "a failed read of an empty buffer leaves it released: %s", err.msg);
	pbx_err_clear(&err);
	pbx_buf_adds(&b, "kept");
	ok(pbx_read_file(dir, &b, &err) < 0 && !strcmp(b.buf, "kept") && b.len == 4,
	   "a failed read leaves what the buffer held");
	pbx_err_clear(&err);
	pbx_buf_release(&b);
}

/* pbx_mkdir_p: nested directories made with the mode, an existing one
 * and a trailing slash are fine, a file in the way is an error naming the
 * directory that could not be made. */
static void test_mkdir_p(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct stat st;
	char *deep = xasprintf("%s/m/a/b/c", dir), *mid = xasprintf("%s/m/a", dir);
	char *file = xasprintf("%s/m/f", dir), *under = xasprintf("%s/m/f/x/y", dir);
	ok(pbx_mkdir_p(deep, 0750, &err) == 0 && stat(deep, &st) == 0 && S_ISDIR(st.st_mode),
	   "mkdir -p makes every missing directory: %s", err.msg);
	ok(stat(mid, &st) == 0 && (st.st_mode & 07777) == (0750 & ~umask(umask(0))),
	   "with the mode asked for (%o)", (unsigned)(st.st_mode & 07777));
	ok(pbx_mkdir_p(deep, 0700, &err) == 0, "a directory that exists is fine: %s", err.msg);
	ok(pbx_mkdir_p(mid, 0700, &err) == 0 && stat(deep, &st) == 0, "and its parent too");
	free(mid);
	mid = xasprintf("%s/m/a/b/", dir);
	ok(pbx_mkdir_p(mid, 0700, &err) == 0, "a trailing slash is fine: %s", err.msg);
	put(file, "x", 0600);
	ok(pbx_mkdir_p(under, 0700, &err) < 0 && strstr(err.msg, "/m/f/x") &&
		   strstr(err.msg, "Not a directory"),
	   "a file in the way: an error naming the directory: %s", err.msg);
	free(deep);
	free(mid);
	free(file);
	free(under);
}

int main(void)
{
	char cmd[128];
	if (!mkdtemp(dir))
		return 1;
	test_planted_links();
	test_tmpfile_beside();
	test_read_error();
	test_mkdir_p();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	return tap_done();
}
