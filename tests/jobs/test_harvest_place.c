/*
 * test_harvest_place.c - unit tests of src/jobs/harvest_place.c: the link
 * rule (relative, no ".."; 'd -> .' cannot make 'x -> d/d/..' pass), the
 * walker that never follows a link (a link or file where a directory must
 * be stops it, names the component and creates nothing through it),
 * moves between two trees (a directory in the way, the whole-task move
 * that never replaces), and the check of a crafted tar stream against the
 * members asked for (another link target, a member not asked for, another
 * type, a member twice; a hard link standing for a file passes).
 */
#include "common/tap.h"
#include "jobs/harvest_place.h"
#include "ssh/tarmake.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[64];

/* top/REL; caller frees. */
static char *at(const char *rel)
{
	return xasprintf("%s/%s", top, rel);
}

static void mkdirs(const char *rel)
{
	char *p = at(rel);
	pbx_mkdir_p(p, 0755, NULL);
	free(p);
}

static void put(const char *rel, const char *text)
{
	char *p = at(rel);
	FILE *f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	free(p);
}

static void link_to(const char *rel, const char *target)
{
	char *p = at(rel);
	if (symlink(target, p) < 0)
		perror(p);
	free(p);
}

static int exists(const char *rel)
{
	struct stat sb;
	char *p = at(rel);
	int rc = lstat(p, &sb) == 0;
	free(p);
	return rc;
}

static int open_dir(const char *rel)
{
	char *p = at(rel);
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(p);
	return fd;
}

/* ------------------------------------------------------------ link rule */

static void test_link_rule(void)
{
	static const char *const good[] = { "a", "a/b", ".", "./a", "a/..b", "...", "d/d/d", NULL };
	static const char *const bad[] = {
		"",     "/etc", "..", "../x", "d/d/..", "a/../b", "d/d/d/d/../../../../userhome",
		"x/..", NULL
	};
	size_t i;
	for (i = 0; good[i]; i++)
		ok(place_link_ok(good[i]), "link to '%s' is harvested", good[i]);
	for (i = 0; bad[i]; i++)
		ok(!place_link_ok(bad[i]), "link to '%s' is not", bad[i]);
}

/* ------------------------------------------------------------ walking */

static void test_walk(void)
{
	struct place_walk w;
	struct place_stop stop;
	struct pbx_buf why = PBX_BUF_INIT;
	struct stat sb;
	const char *leaf;
	int root;
	mkdirs("res/0/sub");
	mkdirs("outside");
	link_to("res/0/lnk", "../../outside");
	link_to("res/0/down", "sub");
	put("res/0/file", "f");
	root = open_dir("res");
	place_walk_init(&w, root);

	ok(place_parent(&w, "0/a/b/c/x", 1, &leaf, &stop) >= 0 && !strcmp(leaf, "x") &&
		   exists("res/0/a/b/c"),
	   "missing directories are created");
	ok(place_parent(&w, "0/a/b/c/d/e/y", 1, &leaf, &stop) >= 0 && exists("res/0/a/b/c/d/e"),
	   "deeper from the directory open now");
	ok(place_parent(&w, "0/lnk/x/y", 1, &leaf, &stop) < 0 && stop.err == ELOOP &&
		   stop.at == strlen("0/lnk"),
	   "a link in the way stops the walk at it");
	ok(!exists("outside/x"), "nothing is created through it");
	place_explain(&why, "/R", "0/lnk/x/y", &stop);
	is_str(why.buf, "'/R/0/lnk' is a symbolic link", "the link is named");
	ok(place_parent(&w, "0/down/y", 0, &leaf, &stop) < 0 && stop.err == ELOOP,
	   "a link inside the tree stops it too");
	ok(place_parent(&w, "0/file/y", 1, &leaf, &stop) < 0 && stop.err == ENOTDIR &&
		   stop.at == strlen("0/file"),
	   "a file in the way stops the walk at it");
	pbx_buf_reset(&why);
	place_explain(&why, "/R", "0/file/y", &stop);
	is_str(why.buf, "'/R/0/file' is not a directory", "the file is named");
	ok(place_lstat(&w, "0/lnk", &sb, NULL) == 0 && S_ISLNK(sb.st_mode),
	   "lstat sees the link itself");
	ok(place_lstat(&w, "0/lnk/anything", &sb, NULL) < 0, "lstat does not go through it");
	ok(place_lstat(&w, "0/file", &sb, NULL) == 0 && S_ISREG(sb.st_mode), "lstat of a file");
	place_walk_release(&w);
	close(root);
	pbx_buf_release(&why);
}

/* ------------------------------------------------------------ moves */

static void test_move(void)
{
	struct place_walk from, to;
	struct place_stop stop;
	struct pbx_buf why = PBX_BUF_INIT;
	int in, res;
	mkdirs("mv/in/0/d");
	mkdirs("mv/in/0/e");
	mkdirs("mv/res/0/e/dir");
	mkdirs("mv/away");
	put("mv/in/0/d/f", "f");
	put("mv/in/0/e/g", "g");
	link_to("mv/in/0/e/dir", "g");
	link_to("mv/res/0/d", "../../away");
	put("mv/res/0/e/dir/kept", "k");
	in = open_dir("mv/in");
	res = open_dir("mv/res");
	place_walk_init(&from, in);
	place_walk_init(&to, res);
	ok(place_move(&from, &to, "0/d/f", &stop) < 0 && stop.err == ELOOP && !stop.source,
	   "a file whose directory is a link locally is not moved");
	ok(!exists("mv/away/f") && exists("mv/in/0/d/f"), "nothing lands through the link");
	ok(place_move(&from, &to, "0/e/g", &stop) == 0 && exists("mv/res/0/e/g") &&
		   !exists("mv/in/0/e/g"),
	   "a file with real directories is moved");
	ok(place_move(&from, &to, "0/e/dir", &stop) < 0 && stop.at == strlen("0/e/dir"),
	   "a link does not replace a directory");
	place_explain(&why, "/R", "0/e/dir", &stop);
	is_str(why.buf, "'/R/0/e/dir' is a directory", "the directory is named");
	ok(exists("mv/res/0/e/dir/kept"), "the directory is left whole");
	ok(place_move(&from, &to, "0/nothere", &stop) < 0 && stop.source,
	   "a missing source is told apart");
	place_walk_release(&from);
	place_walk_release(&to);

	mkdirs("mv/in/1/x");
	ok(place_move_new(in, res, "1") == 0 && exists("mv/res/1/x") && !exists("mv/in/1"),
	   "a new task moves with one rename");
	ok(place_move_new(in, res, "0") < 0 && errno == EEXIST && exists("mv/in/0/d/f"),
	   "a task already home is never replaced");
	close(in);
	close(res);
	pbx_buf_release(&why);
}

/* ------------------------------------------------------------ the stream */

struct run {
	struct place_expect *x;
	char refused[256];
};

static int run_member(void *ctx, const struct pbx_tar_member *m, struct pbx_err *err)
{
	return place_expect_member(((struct run *)ctx)->x, m, err);
}

static int run_data(void *ctx, const void *p, size_t len, struct pbx_err *err)
{
	(void)ctx;
	(void)p;
	(void)len;
	(void)err;
	return 0;
}

static void run_refused(void *ctx, const char *name, const char *why)
{
	struct run *r = ctx;
	snprintf(r->refused, sizeof(r->refused), "%s: %s", name, why);
}

/* Feeds the archive through the gatekeeper and the expected-members
 * check; returns the result, with the error in *err. */
static int feed(struct place_expect *x, const struct pbx_buf *tar, struct pbx_err *err)
{
	struct run r = { x, "" };
	struct pbx_tar_events ev = { run_member, run_data, run_refused, &r };
	struct pbx_tarcheck *tc = pbx_tarcheck_new();
	int rc;
	pbx_tarcheck_set_events(tc, &ev);
	rc = pbx_tarcheck_feed(tc, tar->buf, tar->len, NULL, err);
	if (rc == 0)
		rc = pbx_tarcheck_finish(tc, err);
	pbx_tarcheck_free(tc);
	return rc;
}

/* The members a harvest asks for: task 0's out/, out/a.txt, out/l -> a.txt. */
static struct place_expect *asked(void)
{
	struct place_expect *x = place_expect_new();
	place_expect_add(x, "0", 'd', NULL);
	place_expect_add(x, "0/out", 'd', NULL);
	place_expect_add(x, "0/out/a.txt", 'f', NULL);
	place_expect_add(x, "0/out/b.txt", 'f', NULL);
	place_expect_add(x, "0/out/l", 'l', "a.txt");
	return x;
}

static void check_stream(const char *what, void (*build)(struct pbx_buf *), const char *want)
{
	struct place_expect *x = asked();
	struct pbx_buf tar = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	int rc;
	tm_dir(&tar, "0");
	tm_dir(&tar, "0/out");
	build(&tar);
	tm_end(&tar);
	rc = feed(x, &tar, &err);
	if (!want)
		ok(rc == 0, "%s: accepted %s", what, err.msg);
	else if (!ok(rc < 0 && err.code == PBX_EXIT_SECURITY && !strcmp(err.msg, want),
		     "%s: refused", what))
		printf("#   got:  '%s'\n#   want: '%s'\n", err.msg, want);
	place_expect_free(x);
	pbx_buf_release(&tar);
}

static void honest(struct pbx_buf *b)
{
	tm_file(b, "0/out/a.txt", "a");
	tm_hardlink(b, "0/out/b.txt", "0/out/a.txt");
	tm_symlink(b, "0/out/l", "a.txt");
}

static void other_target(struct pbx_buf *b)
{
	tm_file(b, "0/out/a.txt", "a");
	tm_symlink(b, "0/out/l", "b.txt");
}

static void not_asked(struct pbx_buf *b)
{
	tm_file(b, "0/out/a.txt", "a");
	tm_file(b, "0/out/extra", "x");
}

static void file_for_link(struct pbx_buf *b)
{
	tm_file(b, "0/out/l", "not a link");
}

static void dir_for_file(struct pbx_buf *b)
{
	tm_dir(b, "0/out/a.txt");
}

static void twice(struct pbx_buf *b)
{
	tm_file(b, "0/out/a.txt", "a");
	tm_file(b, "0/out/a.txt", "again");
}

static void other_task(struct pbx_buf *b)
{
	tm_dir(b, "1");
}

static void test_stream(void)
{
	check_stream("the members asked for, a hard link for a file", honest, NULL);
	check_stream("another link target", other_target,
		     "task 0 'out/l': the stream does not match the manifest: the manifest lists a "
		     "link to 'a.txt', the stream carries a link to 'b.txt'");
	check_stream(
		"a member not asked for", not_asked,
		"task 0 'out/extra': the stream does not match the manifest: it was not asked for");
	check_stream("a file where a link was listed", file_for_link,
		     "task 0 'out/l': the stream does not match the manifest: the manifest lists a "
		     "symlink, the stream carries a regular file");
	check_stream(
		"a directory where a file was listed", dir_for_file,
		"task 0 'out/a.txt': the stream does not match the manifest: the manifest lists "
		"a regular file, the stream carries a directory");
	check_stream("a member twice", twice,
		     "task 0 'out/a.txt': the stream does not match the manifest: it comes twice");
	check_stream("a task not asked for", other_task,
		     "task 1: the stream does not match the manifest: it was not asked for");
}

int main(void)
{
	snprintf(top, sizeof(top), "/tmp/pbx-place.XXXXXX");
	if (!mkdtemp(top))
		return 1;
	test_link_rule();
	test_walk();
	test_move();
	test_stream();
	pbx_rm_rf(top, NULL);
	return tap_done();
}
