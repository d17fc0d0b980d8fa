/*
 * test_tarcheck.c - unit tests of the streaming tar gatekeeper and of the
 * in-process extractor behind it: honest archives from GNU tar (gnu and
 * pax formats, long names, links) pass unchanged whatever the chunking and
 * extract to the same tree as GNU tar's; hand-made hostile ones are
 * refused for the right reason, before the offending header is passed on;
 * a stream cut short leaves no partial file; existing symlinks and hard
 * links in the destination are replaced, never written through.  And
 * util/ustar.h's archives are ones GNU tar extracts faithfully.
 */
#include "common/tap.h"
#include "ssh/tarcheck.h"
#include "ssh/untar.h"
#include "tarmake.h"
#include "util/fs.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
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
		if (!ok(rc == 0 && same_archive(in, &out), "%s passes unchanged (step %zu)", name,
			steps[i]))
			printf("#   rc %d msg '%s' in %zu out %zu\n", rc, err.msg, in->len,
			       out.len);
		pbx_buf_release(&out);
	}
}

/* ------------------------------------------------------------ hostile */

static void hostile_cases(void)
{
	struct pbx_buf b = PBX_BUF_INIT;

#define CASE(why, name, body)                  \
	do {                                   \
		pbx_buf_reset(&b);             \
		body;                          \
		tm_end(&b);                    \
		expect_refused(&b, why, name); \
	} while (0)
	CASE("absolute", "absolute name", tm_dir(&b, "./"); tm_file(&b, "/tmp/x", "x"));
	CASE("'..'", "../ entry", tm_dir(&b, "./"); tm_file(&b, "../escape", "x"));
	CASE("'..'", "a/../../b", tm_dir(&b, "a/"); tm_file(&b, "a/../../b", "x"));
	CASE("absolute", "symlink to /etc", tm_symlink(&b, "evil", "/etc"));
	CASE("outside", "relative symlink escape", tm_dir(&b, "d/");
	     tm_symlink(&b, "d/l", "../../x"));
	CASE("through a symlink", "symlink chain a->. b->a/..", tm_symlink(&b, "a", ".");
	     tm_symlink(&b, "b", "a/.."));
	CASE("another symlink's target", "chain in the other order", tm_symlink(&b, "b", "a/..");
	     tm_symlink(&b, "a", "."));
	CASE("outside", "symlink above the root", tm_symlink(&b, "b", "x/../.."));
	CASE("no directory of the archive", "target through an unknown dir",
	     tm_symlink(&b, "b", "x/../y"));
	CASE("replaces a symlink", "file written through a symlink", tm_symlink(&b, "evil", "sub");
	     tm_dir(&b, "evil/"); tm_file(&b, "evil/f", "x"));
	CASE("parent directory", "file under a symlink", tm_dir(&b, "sub/");
	     tm_symlink(&b, "evil", "sub"); tm_file(&b, "evil/f", "x"));
	CASE("parent directory", "file with no parent member", tm_file(&b, "x/y", "x"));
	CASE("absolute path", "hard link to /etc/passwd", tm_hardlink(&b, "h", "/etc/passwd"));
	CASE("earlier file", "hard link to a later file", tm_hardlink(&b, "h", "f");
	     tm_file(&b, "f", "x"));
	CASE("unsupported member", "device node", tm_header(&b, "dev", '3', 0, NULL, 0600));
	CASE("unsupported member", "fifo", tm_header(&b, "fifo", '6', 0, NULL, 0600));
	CASE("'..'", "pax path override", tm_pax(&b, "path", "../paxescape");
	     tm_file(&b, "ok", "x"));
	CASE("symlink", "pax linkpath override", tm_pax(&b, "linkpath", "/etc");
	     tm_symlink(&b, "l", "ok"));
	CASE("unsupported pax", "GNU sparse pax record", tm_pax(&b, "GNU.sparse.map", "0,1");
	     tm_file(&b, "f", "x"));
	CASE("'..'", "GNU long name", tm_long(&b, 'L', "../longescape"); tm_file(&b, "short", "x"));
	CASE("absolute", "GNU long link", tm_long(&b, 'K', "/etc/shadow");
	     tm_symlink(&b, "l", "ok"));
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
	ok(run(&b, 1, &out, &err) < 0 && out.len == good,
	   "output stops before the refused header (%zu of %zu)", out.len, good);
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
	tm_symlink(&b, "./l", "sub/f"); /* link before its target, like GNU tar */
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
			"touch t/%0200d; tar -C t --format=%s -cf a.tar .",
			dir, 0, formats[i]);
		struct pbx_buf tar = PBX_BUF_INIT;
		struct pbx_err err = PBX_ERR_INIT;
		char *path = xasprintf("%s/a.tar", dir);
		int rc = system(cmd);
		ok(rc == 0 && pbx_read_file(path, &tar, &err) == 0,
		   "gnu tar --format=%s wrote an archive", formats[i]);
		expect_passed(&tar, formats[i]);
		pbx_buf_release(&tar);
		free(path);
		free(cmd);
	}
}

/* ------------------------------------------------------------ extraction */

/* Checks and extracts in->buf[0..len) into dir in chunks of `step`;
 * complete = whether the stream is to be treated as whole. */
static int extract(const struct pbx_buf *in, size_t len, size_t step, const char *dir, int complete,
		   struct pbx_err *err)
{
	struct pbx_tarcheck *tc = pbx_tarcheck_new();
	struct pbx_untar *u;
	struct pbx_tar_events ev;
	size_t off = 0;
	int rc = pbx_mkdir_p(dir, 0755, err);
	u = rc == 0 ? pbx_untar_new(dir, err) : NULL;
	if (!u) {
		pbx_tarcheck_free(tc);
		return -1;
	}
	ev = pbx_untar_events(u);
	pbx_tarcheck_set_events(tc, &ev);
	while (rc == 0 && off < len) {
		size_t n = len - off < step ? len - off : step;
		rc = pbx_tarcheck_feed(tc, in->buf + off, n, NULL, err);
		off += n;
	}
	if (rc == 0 && complete)
		rc = pbx_tarcheck_finish(tc, err);
	if (pbx_untar_finish(u, rc == 0 && complete, rc < 0 ? NULL : err) < 0)
		rc = -1;
	pbx_tarcheck_free(tc);
	return rc;
}

/* Same tree under a and b: contents, and every name's type, size, mode
 * and link target. */
static int same_tree(const char *a, const char *b)
{
	char *cmd =
		xasprintf("diff -r --no-dereference '%s' '%s' >/dev/null && "
			  "[ \"$(cd '%s' && find . -printf '%%p %%y %%s %%m %%l\\n' | sort)\" = "
			  "\"$(cd '%s' && find . -printf '%%p %%y %%s %%m %%l\\n' | sort)\" ]",
			  a, b, a, b);
	int rc = system(cmd);
	free(cmd);
	return rc == 0;
}

/* GNU tar's archives extract to what GNU tar extracts, whatever the chunking. */
static void extract_like_gnu_tar(const char *dir)
{
	static const char *formats[] = { "gnu", "pax" };
	static const size_t steps[] = { 1, 700, 1 << 20 };
	size_t i, k;
	for (i = 0; i < 2; i++) {
		char *mk = xasprintf(
			"set -e; cd '%s'; rm -rf t ref a.tar; mkdir -p t/d/e ref; echo x > t/d/e/f; "
			"ln -s d/e t/l; ln t/d/e/f t/hard; printf y > \"t/$(printf 'n\\nl')\"; "
			"head -c 300000 /dev/urandom > t/big; chmod 0750 t/big; touch -d @1600000000 t/big; "
			"touch t/%0200d; tar -C t --format=%s -cf a.tar .; tar -C ref -xf a.tar",
			dir, 0, formats[i]);
		char *path = xasprintf("%s/a.tar", dir), *ref = xasprintf("%s/ref", dir);
		struct pbx_buf tar = PBX_BUF_INIT;
		struct pbx_err err = PBX_ERR_INIT;
		ok(system(mk) == 0 && pbx_read_file(path, &tar, &err) == 0,
		   "%s archive for extraction", formats[i]);
		for (k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
			char *out = xasprintf("%s/out-%s-%zu", dir, formats[i], steps[k]);
			struct stat sb;
			char *big = xasprintf("%s/big", out);
			int rc = extract(&tar, tar.len, steps[k], out, 1, &err);
			ok(rc == 0 && same_tree(ref, out),
			   "%s step %zu: same tree, names, types, sizes, modes and links as tar -x: %s",
			   formats[i], steps[k], err.msg);
			ok(stat(big, &sb) == 0 && sb.st_mtime == 1600000000,
			   "%s step %zu: mtime kept", formats[i], steps[k]);
			free(big);
			free(out);
		}
		pbx_buf_release(&tar);
		free(path);
		free(ref);
		free(mk);
	}
}

/* A stream cut in the middle of a file: earlier files whole, no partial one. */
static void extract_cut_short(const char *dir)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *out = xasprintf("%s/cut", dir), *first = xasprintf("%s/cut/first", dir);
	char *second = xasprintf("%s/cut/second", dir), big[5000];
	struct stat sb;
	size_t cut;
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tm_dir(&b, "./");
	tm_file(&b, "first", "whole");
	cut = b.len + 512 + 2048; /* inside second's data */
	tm_file(&b, "second", big);
	tm_end(&b);
	extract(&b, cut, 700, out, 0, &err);
	ok(stat(first, &sb) == 0 && sb.st_size == 5, "the file before the cut is whole");
	ok(lstat(second, &sb) < 0, "the file cut short is not there");
	pbx_buf_release(&b);
	free(out);
	free(first);
	free(second);
}

/* Killed mid-file (no pbx_untar_finish at all): a member's name never
 * holds part of it, only PBX_UNTAR_PARTIAL does, and an old whole copy at
 * that name is still the old whole copy.  A member may not take the name. */
static void extract_killed(const char *dir)
{
	struct pbx_buf b = PBX_BUF_INIT, got = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *out = xasprintf("%s/killed", dir), *second = xasprintf("%s/killed/second", dir);
	char *partial = xasprintf("%s/killed/%s", dir, PBX_UNTAR_PARTIAL), big[5000];
	struct pbx_tarcheck *tc = pbx_tarcheck_new();
	struct pbx_untar *u;
	struct pbx_tar_events ev;
	struct stat sb;
	size_t cut;
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tm_dir(&b, "./");
	tm_file(&b, "first", "whole");
	cut = b.len + 512 + 2048; /* inside second's data */
	tm_file(&b, "second", big);
	tm_end(&b);
	pbx_mkdir_p(out, 0755, &err);
	pbx_write_file_atomic(second, "old", 3, 0644, &err);
	u = pbx_untar_new(out, &err);
	ev = pbx_untar_events(u);
	pbx_tarcheck_set_events(tc, &ev);
	ok(pbx_tarcheck_feed(tc, b.buf, cut, NULL, &err) == 0, "fed up to the middle of a file");
	ok(pbx_read_file(second, &got, &err) == 0 && got.len == 3 && !memcmp(got.buf, "old", 3),
	   "mid-file, the member's name still holds its old whole copy");
	ok(lstat(partial, &sb) == 0 && S_ISREG(sb.st_mode), "the file being written is %s",
	   PBX_UNTAR_PARTIAL);
	pbx_untar_finish(u, 0, NULL);
	pbx_tarcheck_free(tc);
	pbx_buf_reset(&b);
	tm_dir(&b, "./");
	tm_file(&b, PBX_UNTAR_PARTIAL, "x");
	tm_end(&b);
	ok(extract(&b, b.len, 512, out, 1, &err) < 0 && strstr(err.msg, "reserved"),
	   "a member named %s is refused: %s", PBX_UNTAR_PARTIAL, err.msg);
	pbx_buf_release(&b);
	pbx_buf_release(&got);
	free(out);
	free(second);
	free(partial);
}

/* What is already in the destination is replaced, never written through. */
static void extract_replaces(const char *dir)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *out = xasprintf("%s/repl", dir), *outside = xasprintf("%s/outside", dir);
	char *setup = xasprintf("set -e; mkdir -p '%s/d' '%s'; echo keep > '%s/victim'; "
				"ln -s '%s' '%s/d/sub'; ln -s '%s/victim' '%s/f'; "
				"echo other > '%s/other'; ln '%s/other' '%s/hl'",
				out, outside, outside, outside, out, outside, out, out, out, out);
	char *check = xasprintf(
		"[ \"$(cat '%s/victim')\" = keep ] && [ -z \"$(ls '%s' | grep -v victim)\" ] && "
		"[ -d '%s/d/sub' ] && [ ! -L '%s/d/sub' ] && [ \"$(cat '%s/d/sub/x')\" = x ] && "
		"[ ! -L '%s/f' ] && [ \"$(cat '%s/f')\" = new ] && "
		"[ \"$(cat '%s/other')\" = other ] && [ \"$(cat '%s/hl')\" = hl ]",
		outside, outside, out, out, out, out, out, out, out);
	ok(system(setup) == 0, "destination with symlinks out and a hard link");
	tm_dir(&b, "./");
	tm_dir(&b, "d/");
	tm_dir(&b, "d/sub/");
	tm_file(&b, "d/sub/x", "x");
	tm_file(&b, "f", "new");
	tm_file(&b, "hl", "hl");
	tm_end(&b);
	ok(extract(&b, b.len, 512, out, 1, &err) == 0, "extracted over them: %s", err.msg);
	ok(system(check) == 0,
	   "symlinks replaced, hard-linked name replaced, nothing written outside");
	pbx_buf_release(&b);
	free(out);
	free(outside);
	free(setup);
	free(check);
}

/* util/ustar.h's archives: GNU tar lists and extracts them with the right
 * bytes, modes and times; tarcheck passes them; bad names are refused. */
static void ustar_written_by_pbx(const char *dir)
{
	struct pbx_buf tar = PBX_BUF_INIT, got = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	unsigned char key[1000];
	const char *script = "#!/bin/sh\necho hi\n";
	char *path = xasprintf("%s/u.tar", dir), *cmd, *f, longname[101];
	struct stat sb;
	size_t i;
	for (i = 0; i < sizeof(key); i++)
		key[i] = (unsigned char)(i * 7); /* NULs and high bytes, not a block multiple */
	ok(pbx_ustar_dir(&tar, "s", 0700, 1600000000, &err) == 0 &&
		   pbx_ustar_dir(&tar, "s/t/", 0750, 1600000000, &err) == 0 &&
		   pbx_ustar_file(&tar, "s/t/run.sh", 0755, 1600000001, script, strlen(script),
				  &err) == 0 &&
		   pbx_ustar_file(&tar, "s/t/key", 0400, 1600000002, key, sizeof(key), &err) == 0,
	   "ustar: members written: %s", err.msg);
	pbx_ustar_end(&tar);
	ok(tar.len % 512 == 0 && tar.len == 512 * (4 + 1 + 2) + 1024, "ustar: blocks (%zu bytes)",
	   tar.len);
	expect_passed(&tar, "pbx ustar");
	ok(pbx_write_file_atomic(path, tar.buf, tar.len, 0600, &err) == 0, "ustar: saved");
	cmd = xasprintf("cd '%s' && rm -rf ux && mkdir ux && tar -tf u.tar >/dev/null && "
			"tar -C ux -xf u.tar",
			dir);
	ok(system(cmd) == 0, "ustar: GNU tar lists and extracts it");
	free(cmd);
	f = xasprintf("%s/ux/s/t/key", dir);
	ok(pbx_read_file(f, &got, &err) == 0 && got.len == sizeof(key) &&
		   !memcmp(got.buf, key, sizeof(key)),
	   "ustar: binary member extracted byte for byte");
	ok(stat(f, &sb) == 0 && (sb.st_mode & 07777) == 0400 && sb.st_mtime == 1600000002,
	   "ustar: member mode 0400 and mtime kept");
	free(f);
	f = xasprintf("%s/ux/s/t/run.sh", dir);
	ok(stat(f, &sb) == 0 && (sb.st_mode & 07777) == 0755 && sb.st_size == (off_t)strlen(script),
	   "ustar: script mode 0755 and size");
	free(f);
	f = xasprintf("%s/ux/s/t", dir);
	ok(stat(f, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 07777) == 0750,
	   "ustar: directory member mode 0750");
	free(f);
	pbx_buf_reset(&tar);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ok(pbx_ustar_file(&tar, "/etc/x", 0644, 0, "", 0, &err) < 0 &&
		   pbx_ustar_file(&tar, "", 0644, 0, "", 0, &err) < 0 &&
		   pbx_ustar_dir(&tar, longname + 1, 0755, 0, &err) < 0 &&
		   pbx_ustar_file(&tar, longname, 0644, 0, "", 0, &err) < 0 && tar.len == 0,
	   "ustar: absolute, empty and too long names refused, nothing written");
	pbx_buf_release(&tar);
	pbx_buf_release(&got);
	free(path);
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
	extract_like_gnu_tar(dir);
	extract_cut_short(dir);
	extract_killed(dir);
	extract_replaces(dir);
	ustar_written_by_pbx(dir);
	pbx_rm_rf(dir, &err);
	return tap_done();
}
