/*
 * test_tarcheck.c - unit tests of the streaming tar gatekeeper: honest
 * archives from GNU tar (gnu and pax formats, long names, links) pass
 * unchanged whatever the chunking; hand-made hostile ones are refused for
 * the right reason, before the offending header is passed on.
 */
#include "common/tap.h"
#include "ssh/tarcheck.h"
#include "tarmake.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Feeds `in` in chunks of `step` bytes; returns feed/finish's result. */
static int run(const struct pbx_buf *in, size_t step, struct pbx_buf *out, struct pbx_err *err)
{
	struct pbx_tarcheck *tc = pbx_tarcheck_new();
	size_t off = 0;
	int rc = 0;
	while (rc == 0 && off < in->len) {
		size_t n = in->len - off < step ? in->len - off : step;
		rc = pbx_tarcheck_feed(tc, in->buf + off, n, out, err);
		off += n;
	}
	if (rc == 0)
		rc = pbx_tarcheck_finish(tc, err);
	pbx_tarcheck_free(tc);
	return rc;
}

static void expect_refused(const struct pbx_buf *in, const char *why, const char *name)
{
	static const size_t steps[] = { 1, 511, 4096, 1 << 20 };
	size_t i;
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct pbx_buf out = PBX_BUF_INIT;
		struct pbx_err err = PBX_ERR_INIT;
		int rc = run(in, steps[i], &out, &err);
		if (!ok(rc < 0 && err.code == PBX_EXIT_SECURITY && strstr(err.msg, why),
			"%s refused (step %zu)", name, steps[i]))
			printf("#   rc %d code %d msg '%s'\n", rc, err.code, err.msg);
		pbx_buf_release(&out);
	}
}

/* Same bytes, except that the checker ends the stream right after the
 * end-of-archive marker (tar pads archives with more zeros). */
static int same_archive(const struct pbx_buf *in, const struct pbx_buf *out)
{
	size_t n = in->len < out->len ? in->len : out->len, i;
	const struct pbx_buf *longer = in->len > out->len ? in : out;
	if (memcmp(in->buf, out->buf, n) != 0)
		return 0;
	for (i = n; i < longer->len; i++)
		if (longer->buf[i])
			return 0;
	return 1;
}

static void expect_passed(const struct pbx_buf *in, const char *name)
{
	static const size_t steps[] = { 1, 700, 1 << 20 };
	size_t i;
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct pbx_buf out = PBX_BUF_INIT;
		struct pbx_err err = PBX_ERR_INIT;
		int rc = run(in, steps[i], &out, &err);
		if (!ok(rc == 0 && same_archive(in, &out),
			"%s passes unchanged (step %zu)", name, steps[i]))
			printf("#   rc %d msg '%s' in %zu out %zu\n", rc, err.msg, in->len, out.len);
		pbx_buf_release(&out);
	}
}

/* ------------------------------------------------------------ hostile */

static void hostile_cases(void)
{
	struct pbx_buf b = PBX_BUF_INIT;

#define CASE(why, name, body) do { pbx_buf_reset(&b); body; tm_end(&b); \
	expect_refused(&b, why, name); } while (0)
	CASE("absolute", "absolute name", tm_dir(&b, "./"); tm_file(&b, "/tmp/x", "x"));
	CASE("'..'", "../ entry", tm_dir(&b, "./"); tm_file(&b, "../escape", "x"));
	CASE("'..'", "a/../../b", tm_dir(&b, "a/"); tm_file(&b, "a/../../b", "x"));
	CASE("absolute", "symlink to /etc", tm_symlink(&b, "evil", "/etc"));
	CASE("outside", "relative symlink escape", tm_dir(&b, "d/"); tm_symlink(&b, "d/l", "../../x"));
	CASE("through a symlink", "symlink chain a->. b->a/..",
	     tm_symlink(&b, "a", "."); tm_symlink(&b, "b", "a/.."));
	CASE("another symlink's target", "chain in the other order",
	     tm_symlink(&b, "b", "a/.."); tm_symlink(&b, "a", "."));
	CASE("outside", "symlink above the root", tm_symlink(&b, "b", "x/../.."));
	CASE("no directory of the archive", "target through an unknown dir",
	     tm_symlink(&b, "b", "x/../y"));
	CASE("replaces a symlink", "file written through a symlink",
	     tm_symlink(&b, "evil", "sub"); tm_dir(&b, "evil/"); tm_file(&b, "evil/f", "x"));
	CASE("parent directory", "file under a symlink",
	     tm_dir(&b, "sub/"); tm_symlink(&b, "evil", "sub"); tm_file(&b, "evil/f", "x"));
	CASE("parent directory", "file with no parent member", tm_file(&b, "x/y", "x"));
	CASE("absolute path", "hard link to /etc/passwd", tm_hardlink(&b, "h", "/etc/passwd"));
	CASE("earlier file", "hard link to a later file", tm_hardlink(&b, "h", "f"); tm_file(&b, "f", "x"));
	CASE("unsupported member", "device node", tm_header(&b, "dev", '3', 0, NULL, 0600));
	CASE("unsupported member", "fifo", tm_header(&b, "fifo", '6', 0, NULL, 0600));
	CASE("'..'", "pax path override", tm_pax(&b, "path", "../paxescape"); tm_file(&b, "ok", "x"));
	CASE("symlink", "pax linkpath override",
	     tm_pax(&b, "linkpath", "/etc"); tm_symlink(&b, "l", "ok"));
	CASE("unsupported pax", "GNU sparse pax record",
	     tm_pax(&b, "GNU.sparse.map", "0,1"); tm_file(&b, "f", "x"));
	CASE("'..'", "GNU long name", tm_long(&b, 'L', "../longescape"); tm_file(&b, "short", "x"));
	CASE("absolute", "GNU long link", tm_long(&b, 'K', "/etc/shadow"); tm_symlink(&b, "l", "ok"));
	CASE("directory", "file replacing a directory", tm_dir(&b, "d/"); tm_file(&b, "d", "x"));
#undef CASE

	/* A corrupt checksum is refused too. */
	pbx_buf_reset(&b);
	tm_file(&b, "f", "x");
	b.buf[0] = 'g';
	tm_end(&b);
	expect_refused(&b, "corrupt", "bad checksum");
	pbx_buf_release(&b);
}

/* The offending header must not be passed on: output stops before it. */
static void refusal_holds_back(void)
{
	struct pbx_buf b = PBX_BUF_INIT, out = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	size_t good;
	tm_dir(&b, "./");
	tm_file(&b, "ok", "fine");
	good = b.len;
	tm_file(&b, "../bad", "x");
	tm_end(&b);
	ok(run(&b, 1, &out, &err) < 0 && out.len == good, "output stops before the refused header (%zu of %zu)",
	   out.len, good);
	pbx_buf_release(&b);
	pbx_buf_release(&out);
}

static void setuid_cleared(void)
{
	struct pbx_buf b = PBX_BUF_INIT, out = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	tm_header(&b, "suid", '0', 0, NULL, 04755);
	tm_end(&b);
	ok(run(&b, 512, &out, &err) == 0 && !memcmp(out.buf + 100, "0000755", 7),
	   "setuid bit cleared (mode field '%.7s')", out.buf + 100);
	pbx_buf_release(&b);
	pbx_buf_release(&out);
}

/* ------------------------------------------------------------ honest */

static void honest_handmade(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char longname[300];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	tm_dir(&b, "./");
	tm_symlink(&b, "./l", "sub/f");          /* link before its target, like GNU tar */
	tm_dir(&b, "./sub/");
	tm_file(&b, "./sub/f", "hello");
	tm_hardlink(&b, "./h", "./sub/f");
	tm_symlink(&b, "./sub/up", "../sub/./f");
	tm_pax(&b, "path", "sub/pax name\nwith newline");
	tm_file(&b, "ignored", "pax");
	tm_long(&b, 'L', longname);
	tm_file(&b, "short", "long");
	tm_end(&b);
	expect_passed(&b, "hand-made honest archive");
	pbx_buf_release(&b);
}

/* Archives written by GNU tar itself, in both formats. */
static void honest_gnu_tar(const char *dir)
{
	static const char *formats[] = { "gnu", "pax" };
	size_t i;
	for (i = 0; i < 2; i++) {
		char *cmd = xasprintf(
			"set -e; cd '%s'; rm -rf t a.tar; mkdir -p t/d/e; echo x > t/d/e/f; "
			"ln -s d/e t/l; ln t/d/e/f t/hard; printf y > \"t/$(printf 'n\\nl')\"; "
			"touch t/%0200d; tar -C t --format=%s -cf a.tar .", dir, 0, formats[i]);
		struct pbx_buf tar = PBX_BUF_INIT;
		struct pbx_err err = PBX_ERR_INIT;
		char *path = xasprintf("%s/a.tar", dir);
		int rc = system(cmd);
		ok(rc == 0 && pbx_read_file(path, &tar, &err) == 0, "gnu tar --format=%s wrote an archive",
		   formats[i]);
		expect_passed(&tar, formats[i]);
		pbx_buf_release(&tar);
		free(path);
		free(cmd);
	}
}

int main(void)
{
	char dir[] = "/tmp/pbx-tarcheck-XXXXXX";
	struct pbx_err err = PBX_ERR_INIT;
	if (!mkdtemp(dir))
		return 1;
	hostile_cases();
	refusal_holds_back();
	setuid_cleared();
	honest_handmade();
	honest_gnu_tar(dir);
	pbx_rm_rf(dir, &err);
	return tap_done();
}
