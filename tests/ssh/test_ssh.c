/*
 * test_ssh.c - integration tests of src/ssh against real sshd instances on
 * loopback, started by sshd.sh (which passes PBX_TEST_DIR, the ports, and
 * the keys it made).  One program, one group per ctest test:
 *
 *   auth      key file, derived public key, ssh-agent, wrong key, timeouts
 *   hostkey   pin on first contact, refuse a changed key, forget-host
 *   exec      exit codes and signals, stdout/stderr apart and streamed, stdin
 *   quote     argv words arrive byte-exact through the remote shell
 *   transfer  200 MB up and down over SFTP, checksums, ".." refused
 *   tree      a tree with odd names round-trips as a tar stream
 *   hostile   hostile remote tar streams are refused, nothing lands outside
 *   fanout    100 execs, concurrency 16, fresh connections and the pool;
 *             100 execs running at the same time, each on its own connection
 *   jump      direct-tcpip through a jump host, several tunnels at once
 *   chatty    a server whose shell prints before every command
 */
#include "common/tap.h"
#include "ssh/ssh.h"
#include "store/store.h"
#include "tarmake.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *tdir;
static int port1, port2;
static char user[64];
static struct pbx_store *store;
static struct pbx_hostkeys hk;

/* ------------------------------------------------------------ fixtures */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* "$PBX_TEST_DIR/rel"; caller frees. */
static char *tpath(const char *rel)
{
	return xasprintf("%s/%s", tdir, rel);
}

/* Key files made by sshd.sh, by name ("id", "wrong", ...). */
static const char *const key_names[] = { "id", "nopub/id", "wrong", "hostile", "does-not-exist" };
static char *key_paths[5];

static const char *key(const char *name)
{
	size_t i;
	for (i = 0; i < 5; i++)
		if (!strcmp(key_names[i], name))
			return key_paths[i];
	return NULL;
}

/* key_name NULL = ssh-agent. */
static struct pbx_ssh_target target(const char *host, int port, const char *key_name)
{
	struct pbx_ssh_target t = { 0 };
	t.host = host;
	t.port = port;
	t.user = user;
	t.key_path = key_name ? key(key_name) : NULL;
	t.timeout_ms = 10000;
	return t;
}

static struct pbx_ssh *connect_ok(const struct pbx_ssh_target *t, const char *what)
{
	struct pbx_ssh *s = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	int rc = pbx_ssh_connect(t, &hk, &s, &err);
	if (!ok(rc == 0 && s, "connect: %s", what))
		printf("#   %s\n", err.msg);
	return s;
}

struct capture {
	struct pbx_buf out, err;
	double start, first_out; /* when the first stdout bytes arrived */
	int chunks;
};

static void capture_fn(void *ctx, int stream, const char *data, size_t len)
{
	struct capture *c = ctx;
	if (stream == 1 && !c->out.len)
		c->first_out = now_s() - c->start;
	pbx_buf_add(stream == 2 ? &c->err : &c->out, data, len);
	c->chunks++;
}

static void capture_init(struct capture *c)
{
	memset(c, 0, sizeof(*c));
	c->out = (struct pbx_buf)PBX_BUF_INIT;
	c->err = (struct pbx_buf)PBX_BUF_INIT;
	c->start = now_s();
}

static void capture_release(struct capture *c)
{
	pbx_buf_release(&c->out);
	pbx_buf_release(&c->err);
}

/* Runs cmd, returns the exit status (-1000 when exec itself failed). */
static int run_cmd(struct pbx_ssh *s, const char *cmd, struct capture *c)
{
	struct pbx_err err = PBX_ERR_INIT;
	int status = -1;
	capture_init(c);
	if (pbx_ssh_exec(s, cmd, NULL, 0, capture_fn, c, &status, &err) < 0) {
		printf("#   exec '%s': %s\n", cmd, err.msg);
		return -1000;
	}
	return status;
}

/*
 * Remote stderr is compared by its end: the remote shell's system-wide
 * startup files may print noise first (sshd.sh gives sessions an empty
 * HOME, so the tester's own ~/.bashrc does not run).
 */
static int ends_with(const struct pbx_buf *b, const char *tail, const char *name)
{
	size_t n = strlen(tail);
	int same = b->len >= n && !memcmp(b->buf + b->len - n, tail, n);
	if (!ok(same, "%s", name))
		printf("#   got:  '%s'\n#   want: '...%s'\n", b->buf, tail);
	return same;
}

/* NUL bytes in b (stderr payloads are zeros; see ends_with for why). */
static size_t zeros(const struct pbx_buf *b)
{
	size_t i, n = 0;
	for (i = 0; i < b->len; i++)
		n += b->buf[i] == 0;
	return n;
}

static int file_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* How many entries of directory tdir/REL have names starting with PREFIX
 * (temporary names carry a random part); -1 if it cannot be read. */
static int count_prefixed(const char *rel, const char *prefix)
{
	char *dir = tpath(rel);
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	free(dir);
	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

/* ------------------------------------------------------------ auth */

static void test_auth(void)
{
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	struct pbx_ssh *s = connect_ok(&t, "key file with .pub");
	struct pbx_err err = PBX_ERR_INIT;
	char *want;
	int lfd;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	double t0;
	int rc;

	pbx_ssh_close(s);
	t = target("127.0.0.1", port1, "nopub/id");
	pbx_ssh_close(connect_ok(&t, "key file without .pub (public key derived)"));
	t = target("127.0.0.1", port1, NULL);
	pbx_ssh_close(connect_ok(&t, "ssh-agent (key_path NULL)"));

	t = target("127.0.0.1", port1, "wrong");
	s = NULL;
	want = xasprintf("permission denied (publickey) for %s@127.0.0.1:%d", user, port1);
	ok(pbx_ssh_connect(&t, &hk, &s, &err) < 0 && !s, "wrong key refused");
	is_str(err.msg, want, "wrong key message");
	ok(err.code == PBX_EXIT_FAIL, "wrong key code is PBX_EXIT_FAIL (%d)", err.code);
	free(want);

	t = target("127.0.0.1", port1, "does-not-exist");
	ok(pbx_ssh_connect(&t, &hk, &s, &err) < 0 && strstr(err.msg, "cannot read key file"),
	   "missing key file named: %s", err.msg);

	/* A listener that never speaks SSH: the handshake must time out. */
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(lfd, (struct sockaddr *)&sa, sizeof(sa));
	listen(lfd, 4);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	t = target("127.0.0.1", ntohs(sa.sin_port), "id");
	t.timeout_ms = 700;
	t0 = now_s();
	rc = pbx_ssh_connect(&t, &hk, &s, &err);
	t0 = now_s() - t0;
	ok(rc < 0 && t0 < 5, "silent server times out (%.1f s): %s", t0, err.msg);
	close(lfd); /* now the port is closed */
	ok(pbx_ssh_connect(&t, &hk, &s, &err) < 0 && strstr(err.msg, "cannot connect"),
	   "closed port: %s", err.msg);
}

/* ------------------------------------------------------------ hostkey */

static int sshd_ctl(const char *args)
{
	char *cmd = xasprintf("'%s' %s >/dev/null", getenv("PBX_TEST_SSHD_SH"), args);
	int rc = system(cmd);
	free(cmd);
	return rc;
}

static void test_hostkey(void)
{
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	char *hostport = xasprintf("127.0.0.1:%d", port1), *type = NULL, *key = NULL;
	char *restart = xasprintf("start sshd1 127.0.0.1 '%s/host2' %d", tdir, port1);
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_ssh *s = NULL;
	int removed = 0;

	ok(pbx_store_hostkey_get(store, hostport, &type, &key, &err) == 0, "nothing pinned yet");
	pbx_ssh_close(connect_ok(&t, "first contact"));
	ok(pbx_store_hostkey_get(store, hostport, &type, &key, &err) == 1 && type &&
		   !strcmp(type, "ssh-ed25519") && key && strlen(key) > 60,
	   "ssh-ed25519 key pinned in the store");
	pbx_ssh_close(connect_ok(&t, "second contact, same key"));

	ok(sshd_ctl("stop sshd1") == 0 && sshd_ctl(restart) == 0,
	   "sshd restarted with a new host key");
	ok(pbx_ssh_connect(&t, &hk, &s, &err) < 0 && !s, "changed host key refused");
	ok(err.code == PBX_EXIT_SECURITY, "code is PBX_EXIT_SECURITY (%d)", err.code);
	ok(strstr(err.msg, "forget-host") && strstr(err.msg, hostport) &&
		   strstr(err.msg, "changed (pinned ssh-ed25519 SHA256:"),
	   "message: %s", err.msg);

	ok(pbx_store_hostkey_forget(store, hostport, &removed, &err) == 0 && removed == 1,
	   "forget-host removes the pin");
	pbx_ssh_close(connect_ok(&t, "after forget, the new key is pinned"));
	free(type);
	free(key);
	free(hostport);
	free(restart);
}

/* ------------------------------------------------------------ exec */

static void test_exit_codes(struct pbx_ssh *s)
{
	static const struct {
		const char *cmd;
		int want;
	} cases[] = {
		{ "exit 0", 0 },          { "exit 3", 3 },          { "exit 255", 255 },
		{ "kill -TERM $$", 143 }, { "kill -KILL $$", 137 }, { "no-such-cmd-pbx", 127 },
	};
	size_t i;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct capture c;
		int st = run_cmd(s, cases[i].cmd, &c);
		ok(st == cases[i].want, "'%s' -> %d (got %d)", cases[i].cmd, cases[i].want, st);
		capture_release(&c);
	}
}

static void test_streams(struct pbx_ssh *s)
{
	struct capture c;
	double took;
	int st = run_cmd(s, "printf out1; printf err1 >&2; printf out2; printf err2 >&2; exit 4",
			 &c);
	ok(st == 4, "status with both streams");
	is_str(c.out.buf, "out1out2", "stdout kept apart");
	ends_with(&c.err, "err1err2", "stderr kept apart");
	capture_release(&c);

	st = run_cmd(s, "printf first; sleep 1; printf second", &c);
	took = now_s() - c.start;
	/* Streaming: "first" arrives before the 1 s sleep ends, whatever the
	 * remote shell's own start-up costs on a loaded machine. */
	ok(st == 0 && c.first_out >= 0 && took - c.first_out >= 0.6 && took >= 1.0,
	   "output streamed: first bytes after %.2f s, done after %.2f s", c.first_out, took);
	capture_release(&c);

	/* Both streams at once, big: neither may block the other. */
	st = run_cmd(s, "(head -c 3000000 /dev/zero >&2 &); head -c 3000000 /dev/zero; wait", &c);
	ok(st == 0 && c.out.len == 3000000 && zeros(&c.err) == 3000000,
	   "3 MB on each stream at once (%zu / %zu)", c.out.len, c.err.len);
	capture_release(&c);
}

static void test_stdin(struct pbx_ssh *s)
{
	size_t n = 3 << 20, i;
	char *data = xmalloc(n);
	struct capture c;
	struct pbx_err err = PBX_ERR_INIT;
	int st = -1;
	for (i = 0; i < n; i++)
		data[i] = (char)(i * 2654435761u >> 13);
	capture_init(&c);
	ok(pbx_ssh_exec(s, "cat", data, n, capture_fn, &c, &st, &err) == 0 && st == 0 &&
		   c.out.len == n && !memcmp(c.out.buf, data, n),
	   "3 MB of stdin echoed back by cat");
	capture_release(&c);
	capture_init(&c);
	ok(pbx_ssh_exec(s, "head -c 10 >/dev/null; echo done", data, n, capture_fn, &c, &st,
			&err) == 0 &&
		   st == 0 && !strcmp(c.out.buf, "done\n"),
	   "command reading only part of stdin finishes (%s)", err.msg);
	capture_release(&c);
	free(data);
}

static void test_capture(struct pbx_ssh *s)
{
	struct pbx_buf out = PBX_BUF_INIT, eb = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	int st = -1;
	ok(pbx_ssh_capture(s, "echo hello; echo oops >&2; exit 2", &out, &eb, &st, &err) == 0 &&
		   st == 2,
	   "capture status");
	is_str(out.buf, "hello\n", "capture stdout");
	ends_with(&eb, "oops\n", "capture stderr");
	pbx_buf_release(&out);
	pbx_buf_release(&eb);
}

static void test_exec(void)
{
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	struct pbx_ssh *s = connect_ok(&t, "exec group");
	char *label = xasprintf("%s@127.0.0.1:%d", user, port1);
	double t0;
	if (!s)
		return;
	is_str(pbx_ssh_label(s), label, "label");
	t0 = now_s();
	test_exit_codes(s);
	printf("# exit codes: %.2f s\n", now_s() - t0);
	t0 = now_s();
	test_streams(s);
	printf("# streams: %.2f s\n", now_s() - t0);
	t0 = now_s();
	test_stdin(s);
	printf("# stdin: %.2f s\n", now_s() - t0);
	test_capture(s);
	pbx_ssh_close(s);
	free(label);
}

/* ------------------------------------------------------------ quote */

static void test_quote(void)
{
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	struct pbx_ssh *s = connect_ok(&t, "quote group");
	char *marker = xasprintf("/tmp/pbx-quote-%ld", (long)getpid());
	char *sub = xasprintf("$(touch %s)", marker), *tick = xasprintf("`touch %s`", marker);
	char *semi = xasprintf("x; touch %s", marker);
	const char *words[] = { sub,          tick, semi,      "it's", "\"dq\" 'sq'", "new\nline",
				"  spaced  ", "",   "*",       "~",    "\\back\\",    "ünïcødé ✓",
				"$HOME",      "-n", "a|b&c>d", NULL };
	const char *argv[20] = { "printf", "%s\\0" };
	struct pbx_buf want = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	struct capture c;
	int st = -1;
	size_t i;
	if (!s)
		return;
	for (i = 0; words[i]; i++) {
		argv[i + 2] = words[i];
		pbx_buf_add(&want, words[i], strlen(words[i]) + 1);
	}
	argv[i + 2] = NULL;
	capture_init(&c);
	ok(pbx_ssh_exec_argv(s, argv, NULL, 0, capture_fn, &c, &st, &err) == 0 && st == 0,
	   "printf ran (%s)", err.msg);
	ok(c.out.len == want.len && !memcmp(c.out.buf, want.buf, want.len),
	   "all %zu words arrive byte-exact (%zu bytes)", i, c.out.len);
	ok(!file_exists(marker), "no word was run by the remote shell");
	unlink(marker);
	capture_release(&c);
	pbx_buf_release(&want);
	pbx_ssh_close(s);
	free(marker);
	free(sub);
	free(tick);
	free(semi);
}

/* ------------------------------------------------------------ transfer */

static int make_random_file(const char *path, size_t mb)
{
	int in = open("/dev/urandom", O_RDONLY),
	    out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char *chunk = xmalloc(1 << 20);
	size_t i;
	int rc = in < 0 || out < 0 ? -1 : 0;
	for (i = 0; rc == 0 && i < mb; i++)
		if (read(in, chunk, 1 << 20) != 1 << 20 || write(out, chunk, 1 << 20) != 1 << 20)
			rc = -1;
	free(chunk);
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rc;
}

static void test_big_file(struct pbx_ssh *s)
{
	char *big = tpath("big.bin"), *remote = tpath("remote/big.bin"), *back = tpath("back.bin");
	char h1[65] = "", h2[65] = "", h3[65] = "";
	struct pbx_err err = PBX_ERR_INIT;
	struct stat st;
	double t0 = now_s();
	int rc = make_random_file(big, 200);
	t0 = now_s() - t0;
	ok(rc == 0, "200 MB from /dev/urandom (%.1f s)", t0);
	t0 = now_s();
	rc = pbx_ssh_put_file(s, big, remote, 0640, &err);
	t0 = now_s() - t0;
	ok(rc == 0, "upload 200 MB (%.1f s) %s", t0, err.msg);
	pbx_sha256_file(big, h1, &err);
	unlink(big); /* keep the peak disk use at two copies */
	t0 = now_s();
	rc = pbx_ssh_get_file(s, remote, back, &err);
	t0 = now_s() - t0;
	ok(rc == 0, "download 200 MB (%.1f s) %s", t0, err.msg);
	pbx_sha256_file(remote, h2, &err);
	pbx_sha256_file(back, h3, &err);
	ok(h1[0] && !strcmp(h1, h2) && !strcmp(h1, h3), "SHA-256 equal on all three copies");
	rc = stat(remote, &st);
	ok(rc == 0 && (st.st_mode & 07777) == 0640, "remote mode 0640 (%o)",
	   (unsigned)(st.st_mode & 07777));
	ok(count_prefixed("remote", "big.bin.pbx-tmp") == 0, "no temporary file left behind");
	unlink(remote);
	unlink(back);
	free(big);
	free(remote);
	free(back);
}

/* A link planted on the node at an upload's old, predictable temporary
 * name (REMOTE.pbx-tmp) is neither written through nor moved into place. */
static void test_planted_upload_link(struct pbx_ssh *s)
{
	char *victim = tpath("victim.txt"), *remote = tpath("remote/planted.txt");
	char *planted = tpath("remote/planted.txt.pbx-tmp");
	struct pbx_buf got = PBX_BUF_INIT, v = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	struct stat st;
	ok(pbx_write_file_atomic(victim, "victim\n", 7, 0600, &err) == 0 &&
		   symlink(victim, planted) == 0,
	   "a link planted at REMOTE.pbx-tmp, to another file");
	ok(pbx_ssh_put_data(s, "new\n", 4, remote, 0600, &err) == 0, "upload beside it: %s",
	   err.msg);
	ok(pbx_read_file(victim, &v, &err) == 0 && !strcmp(v.buf, "victim\n"),
	   "the link's target is untouched (%s)", v.buf ? v.buf : "?");
	ok(lstat(remote, &st) == 0 && S_ISREG(st.st_mode) &&
		   pbx_read_file(remote, &got, &err) == 0 && !strcmp(got.buf, "new\n"),
	   "the upload is a regular file with the new bytes");
	ok(lstat(planted, &st) == 0 && S_ISLNK(st.st_mode) &&
		   count_prefixed("remote", "planted.txt.pbx-tmp") == 1,
	   "no temporary file of pbx's is left");
	unlink(planted);
	unlink(remote);
	unlink(victim);
	pbx_buf_release(&got);
	pbx_buf_release(&v);
	free(victim);
	free(remote);
	free(planted);
}

static void test_small_and_refused(struct pbx_ssh *s)
{
	char *remote = tpath("remote/small.txt"), *back = tpath("small.back");
	char *dotdot = tpath("remote/../escape.txt"), *missing = tpath("remote/missing");
	char *back_tmp = tpath("missing.back.pbx-tmp"), *back2 = tpath("missing.back");
	struct pbx_buf got = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	ok(pbx_ssh_put_data(s, "hello\n", 6, remote, 0600, &err) == 0, "put_data");
	ok(pbx_ssh_get_file(s, remote, back, &err) == 0 && pbx_read_file(back, &got, &err) == 0 &&
		   !strcmp(got.buf, "hello\n"),
	   "get_file of put_data's file");
	ok(pbx_ssh_put_data(s, "x", 1, dotdot, 0600, &err) < 0 && err.code == PBX_EXIT_SECURITY,
	   "upload to a '..' path refused: %s", err.msg);
	ok(pbx_ssh_get_file(s, "a/../b", back, &err) < 0 && err.code == PBX_EXIT_SECURITY,
	   "download from a '..' path refused");
	ok(pbx_ssh_get_file(s, missing, back2, &err) < 0 && strstr(err.msg, "no such file") &&
		   !file_exists(back_tmp) && !file_exists(back2),
	   "missing remote file: %s", err.msg);
	test_planted_upload_link(s);
	pbx_buf_release(&got);
	free(remote);
	free(back);
	free(dotdot);
	free(missing);
	free(back_tmp);
	free(back2);
}

static void test_transfer(void)
{
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	struct pbx_ssh *s = connect_ok(&t, "transfer group");
	char *rdir = tpath("remote");
	struct pbx_err err = PBX_ERR_INIT;
	if (!s)
		return;
	pbx_mkdir_p(rdir, 0755, &err);
	test_small_and_refused(s);
	test_big_file(s);
	pbx_ssh_close(s);
	free(rdir);
}

/* ------------------------------------------------------------ tree */

static void put(const char *dir, const char *rel, const char *text, mode_t mode)
{
	char *p = xasprintf("%s/%s", dir, rel);
	struct pbx_err err = PBX_ERR_INIT;
	pbx_write_file_atomic(p, text, strlen(text), mode, &err);
	free(p);
}

static void make_odd_tree(const char *dir)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *p;
	p = xasprintf("%s/a/b c/d'e/\"f\"/ünï\ncødé", dir);
	pbx_mkdir_p(p, 0755, &err);
	free(p);
	put(dir, "top.txt", "top\n", 0644);
	put(dir, "with space", "space\n", 0600);
	put(dir, "quote'single", "sq\n", 0644);
	put(dir, "dq\"x", "dq\n", 0644);
	put(dir, "new\nline", "nl\n", 0644);
	put(dir, "-dash", "dash\n", 0755);
	put(dir, "empty", "", 0644);
	put(dir, "a/b c/d'e/\"f\"/ünï\ncødé/deep file", "deep\n", 0644);
	p = xasprintf("%s/link", dir);
	symlink("a/b c", p);
	free(p);
}

static void test_tree(void)
{
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	struct pbx_ssh *s = connect_ok(&t, "tree group");
	char *src = tpath("tree-src"), *rdir = tpath("tree-remote/x y"), *back = tpath("tree-back");
	char *diff = xasprintf(
		"diff -r --no-dereference '%s' '%s' && diff -r --no-dereference '%s' '%s'", src,
		rdir, src, back);
	char *nothere = tpath("no-such-dir");
	struct pbx_err err = PBX_ERR_INIT;
	double t0;
	int rc;
	if (!s)
		return;
	make_odd_tree(src);
	t0 = now_s();
	rc = pbx_ssh_put_tree(s, src, rdir, &err);
	t0 = now_s() - t0;
	ok(rc == 0, "put_tree (%.2f s) %s", t0, err.msg);
	t0 = now_s();
	rc = pbx_ssh_get_tree(s, rdir, back, &err);
	t0 = now_s() - t0;
	ok(rc == 0, "get_tree (%.2f s) %s", t0, err.msg);
	ok(system(diff) == 0, "odd names, nesting, symlink and contents round-trip");
	ok(pbx_ssh_put_tree(s, nothere, rdir, &err) < 0, "put_tree of a missing dir fails: %s",
	   err.msg);
	ok(pbx_ssh_get_tree(s, nothere, back, &err) < 0 && strstr(err.msg, "remote tar"),
	   "get_tree of a missing remote dir fails: %s", err.msg);
	pbx_ssh_close(s);
	free(src);
	free(rdir);
	free(back);
	free(diff);
	free(nothere);
}

/* ------------------------------------------------------------ chatty */

/* A server whose shell greets before every command (sshd.sh's ForceCommand
 * prints a line, a stderr line and text without a newline, then runs the
 * command): OpenSSH's client shows the greeting; pbx's output and tar
 * streams come through without it.  (SFTP is not tried: the ForceCommand
 * takes over subsystems too, which a chatty ~/.bashrc does not.) */
static void test_chatty(void)
{
	struct pbx_ssh_target t = target("127.0.0.3", port2, "id");
	struct pbx_ssh *s = connect_ok(&t, "chatty server");
	char *raw = xasprintf(
		"ssh -q -p %d -i '%s' -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
		"-o BatchMode=yes %s@127.0.0.3 'echo real' 2>/dev/null | grep -q 'welcome to the cluster'",
		port2, key("id"), user);
	char *src = tpath("chatty-src"), *back = tpath("chatty-back");
	char *diff = xasprintf("diff -r --no-dereference '%s' '%s'", src, back);
	struct pbx_err err = PBX_ERR_INIT;
	struct capture c;
	size_t n = 300000, i;
	char *in = xmalloc(n);
	int st;
	ok(system(raw) == 0, "the server greets before a command (OpenSSH's client shows it)");
	if (!s)
		goto out;
	st = run_cmd(s, "echo real; echo err >&2; exit 4", &c);
	ok(st == 4 && !strcmp(c.out.buf, "real\n"),
	   "stdout is the command's only, exit status kept");
	if (st != 4 || strcmp(c.out.buf, "real\n"))
		printf("#   status %d, stdout '%s'\n", st, c.out.buf);
	ends_with(&c.err, "err\n", "stderr keeps the greeting and ends with the command's");
	capture_release(&c);
	for (i = 0; i < n; i++)
		in[i] = (char)('a' + i % 23);
	capture_init(&c);
	ok(pbx_ssh_exec(s, "cat", in, n, capture_fn, &c, &st, &err) == 0 && st == 0 &&
		   c.out.len == n && !memcmp(c.out.buf, in, n),
	   "300 kB through cat, byte-exact");
	capture_release(&c);
	capture_init(&c);
	ok(pbx_ssh_exec(s, "true", NULL, 0, capture_fn, &c, &st, &err) == 0 && c.out.len == 0,
	   "a silent command gives empty stdout");
	capture_release(&c);
	make_odd_tree(src);
	ok(pbx_ssh_get_tree(s, src, back, &err) == 0 && system(diff) == 0,
	   "get_tree's tar stream arrives whole %s", err.msg);
out:
	pbx_ssh_close(s);
	free(in);
	free(raw);
	free(src);
	free(back);
	free(diff);
}

/* ------------------------------------------------------------ hostile */

struct hostile_case {
	const char *name;
	const char *why; /* expected in the refusal message */
	void (*build)(struct pbx_buf *b, const char *outside, const char *etc_name);
};

static void h_abs(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	char *p = xasprintf("%s/abs", outside);
	(void)etc_name;
	tm_dir(b, "./");
	tm_file(b, p, "abs");
	free(p);
}

static void h_dotdot(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	(void)outside;
	(void)etc_name;
	tm_dir(b, "./");
	tm_file(b, "./ok", "fine");
	tm_file(b, "../escape", "escape");
}

static void h_etc(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	char *p = xasprintf("evil/%s", etc_name);
	(void)outside;
	tm_dir(b, "./");
	tm_symlink(b, "evil", "/etc");
	tm_file(b, p, "through the symlink");
	free(p);
}

static void h_etc_dir(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	char *p = xasprintf("evil/%s", etc_name);
	(void)outside;
	tm_dir(b, "./");
	tm_symlink(b, "evil", "../../../../../../../../etc");
	tm_dir(b, "evil/");
	tm_file(b, p, "through the symlink");
	free(p);
}

static void h_outside_link(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	(void)etc_name;
	tm_dir(b, "./");
	tm_symlink(b, "out", outside);
	tm_file(b, "out/planted", "x");
}

static void h_parentless(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	(void)outside;
	(void)etc_name;
	tm_dir(b, "./");
	tm_file(b, "pre/planted", "x"); /* dest/pre is a symlink to outside already */
}

static void h_hardlink(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	(void)outside;
	(void)etc_name;
	tm_dir(b, "./");
	tm_hardlink(b, "pw", "/etc/passwd");
}

static void h_pax(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	(void)outside;
	(void)etc_name;
	tm_dir(b, "./");
	tm_pax(b, "path", "../paxescape");
	tm_file(b, "innocent", "x");
}

static void h_longname(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	(void)outside;
	(void)etc_name;
	tm_dir(b, "./");
	tm_long(b, 'L', "../longescape");
	tm_file(b, "innocent", "x");
}

static void h_chain(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	(void)outside;
	(void)etc_name;
	tm_dir(b, "./");
	tm_symlink(b, "a", ".");
	tm_symlink(b, "b", "a/..");
	tm_file(b, "b/chainescape", "x");
}

/* 200 kB of text: a forced command sends no output mark, so exec.c holds
 * the first 64 KiB of stdout and must then pass all of it on (see exec.c). */
static char *benign_big(void)
{
	static char *big;
	size_t i, n = 200000;
	if (!big) {
		big = xmalloc(n + 1);
		for (i = 0; i < n; i++)
			big[i] = (char)('a' + (i * 7) % 26);
		big[n] = '\0';
	}
	return big;
}

static void h_benign(struct pbx_buf *b, const char *outside, const char *etc_name)
{
	(void)outside;
	(void)etc_name;
	tm_dir(b, "./");
	tm_dir(b, "./sub/");
	tm_file(b, "./sub/f", "benign");
	tm_file(b, "./sub/big", benign_big());
	tm_symlink(b, "./l", "sub/f");
}

static const struct hostile_case hostile_cases[] = {
	{ "absolute path", "absolute name", h_abs },
	{ "../ entry", "'..'", h_dotdot },
	{ "symlink to /etc + file through it", "absolute", h_etc },
	{ "relative symlink to /etc + dir + file", "outside the tree", h_etc_dir },
	{ "symlink to an outside dir", "absolute", h_outside_link },
	{ "file under a pre-existing symlink", "parent directory", h_parentless },
	{ "hard link to /etc/passwd", "hard link", h_hardlink },
	{ "pax path with ..", "'..'", h_pax },
	{ "GNU long name with ..", "'..'", h_longname },
	{ "symlink chain a->., b->a/..", "through a symlink", h_chain },
};

static int write_hostile(const struct hostile_case *hc, const char *outside, const char *etc_name)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *path = tpath("hostile.tar");
	int rc;
	hc->build(&b, outside, etc_name);
	tm_end(&b);
	rc = pbx_write_file_atomic(path, b.buf, b.len, 0644, &err);
	pbx_buf_release(&b);
	free(path);
	return rc;
}

static int dir_is_empty(const char *path)
{
	char *cmd = xasprintf("[ -z \"$(ls -A '%s')\" ]", path);
	int rc = system(cmd);
	free(cmd);
	return rc == 0;
}

static void hostile_one(struct pbx_ssh *s, const struct hostile_case *hc, size_t i,
			const char *outside, const char *etc_name)
{
	char *dest = xasprintf("%s/dest%zu", tdir, i), *pre = xasprintf("%s/dest%zu/pre", tdir, i);
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_err mk = PBX_ERR_INIT;
	pbx_mkdir_p(dest, 0755, &mk);
	symlink(outside, pre);
	write_hostile(hc, outside, etc_name);
	if (!ok(pbx_ssh_get_tree(s, "ignored", dest, &err) < 0 && err.code == PBX_EXIT_SECURITY &&
			strstr(err.msg, hc->why),
		"hostile: %s refused", hc->name))
		printf("#   code %d: %s\n", err.code, err.msg);
	free(dest);
	free(pre);
}

static void test_hostile(void)
{
	struct pbx_ssh_target t = target("127.0.0.1", port1, "hostile");
	struct pbx_ssh *s = connect_ok(&t, "with the forced-command (hostile) key");
	char *outside = tpath("outside"), *etc_name = xasprintf("pbx-hostile-%ld", (long)getpid());
	char *etc_path = xasprintf("/etc/%s", etc_name), *benign = tpath("benign");
	char *benign_f = tpath("benign/sub/f"), *benign_big_f = tpath("benign/sub/big"), *escape[4];
	struct pbx_buf big = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	size_t i;
	if (!s)
		return;
	pbx_mkdir_p(outside, 0755, &err);
	for (i = 0; i < sizeof(hostile_cases) / sizeof(hostile_cases[0]); i++)
		hostile_one(s, &hostile_cases[i], i, outside, etc_name);
	ok(!file_exists(etc_path), "nothing written to /etc");
	unlink(etc_path);
	ok(dir_is_empty(outside), "nothing written to the outside dir");
	escape[0] = tpath("escape");
	escape[1] = tpath("paxescape");
	escape[2] = tpath("longescape");
	escape[3] = tpath("chainescape");
	for (i = 0; i < 4; i++) {
		ok(!file_exists(escape[i]), "no %s next to the destinations",
		   escape[i] + strlen(tdir) + 1);
		free(escape[i]);
	}
	/* The same path works for an honest stream (so the refusals above are
	 * about content, not about a broken test archive). */
	write_hostile(&(struct hostile_case){ "benign", "", h_benign }, outside, etc_name);
	ok(pbx_ssh_get_tree(s, "ignored", benign, &err) == 0 && file_exists(benign_f),
	   "a benign hand-made archive is accepted: %s", err.msg);
	ok(pbx_read_file(benign_big_f, &big, &err) == 0 && big.len == strlen(benign_big()) &&
		   !memcmp(big.buf, benign_big(), big.len),
	   "its 200 kB member arrives whole (a forced command's stdout is passed on as is)");
	pbx_buf_release(&big);
	free(benign_big_f);
	pbx_ssh_close(s);
	free(outside);
	free(etc_name);
	free(etc_path);
	free(benign);
	free(benign_f);
}

/* A real remote tree with a symlink to /etc (no forced command). */
static void test_hostile_real(void)
{
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	struct pbx_ssh *s = connect_ok(&t, "normal key for a real hostile tree");
	char *rdir = tpath("rhostile"), *link = tpath("rhostile/etc"),
	     *dest = tpath("rhostile-back");
	char *through = tpath("rhostile-back/etc");
	struct pbx_err err = PBX_ERR_INIT;
	if (!s)
		return;
	pbx_mkdir_p(rdir, 0755, &err);
	put(rdir, "a.txt", "a\n", 0644);
	symlink("/etc", link);
	ok(pbx_ssh_get_tree(s, rdir, dest, &err) < 0 && err.code == PBX_EXIT_SECURITY,
	   "remote tree with a symlink to /etc refused: %s", err.msg);
	ok(!file_exists(through), "the symlink was not created locally");
	pbx_ssh_close(s);
	free(rdir);
	free(link);
	free(dest);
	free(through);
}

/* ------------------------------------------------------------ fanout */

struct fan {
	struct pbx_ssh_pool *pool; /* NULL: a fresh connection per call */
	const char *script;        /* sh -c SCRIPT DIR INDEX; must print "job INDEX" */
	const char *dir;           /* $0 of the script */
	struct pbx_ssh *seen[128]; /* connection used by each call */
	atomic_int running, max_running, good;
};

static int fan_job(void *ctx, size_t i, struct pbx_err *err)
{
	struct fan *f = ctx;
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	struct pbx_ssh *s = NULL;
	char num[32], *expect;
	const char *argv[] = {
		"sh", "-c", f->script ? f->script : "echo \"job $1\"", f->dir ? f->dir : "sh",
		num,  NULL
	};
	struct pbx_buf out = PBX_BUF_INIT;
	int st = -1, rc, cur = atomic_fetch_add(&f->running, 1) + 1, max;
	while ((max = atomic_load(&f->max_running)) < cur &&
	       !atomic_compare_exchange_weak(&f->max_running, &max, cur))
		;
	rc = f->pool ? pbx_ssh_pool_get(f->pool, &t, &s, err) : pbx_ssh_connect(&t, &hk, &s, err);
	snprintf(num, sizeof(num), "%zu", i);
	if (rc == 0) {
		struct capture c;
		capture_init(&c);
		rc = pbx_ssh_exec_argv(s, argv, NULL, 0, capture_fn, &c, &st, err);
		pbx_buf_add(&out, c.out.buf, c.out.len);
		capture_release(&c);
	}
	expect = xasprintf("job %zu\n", i);
	if (rc == 0 && (st != 0 || strcmp(out.buf, expect) != 0))
		rc = pbx_err_set(err, "job %zu: status %d output '%s'", i, st, out.buf);
	if (rc == 0)
		atomic_fetch_add(&f->good, 1);
	f->seen[i] = s;
	if (!f->pool)
		pbx_ssh_close(s);
	free(expect);
	pbx_buf_release(&out);
	atomic_fetch_sub(&f->running, 1);
	return rc;
}

/* 100 calls of fan_job ran with at most `limit` at once: all good, and
 * more than one but no more than `limit` were running together. */
static void fan_report(struct fan *f, struct pbx_err *errs, int failed, const char *what, double t,
		       int limit)
{
	size_t i;
	ok(failed == 0 && atomic_load(&f->good) == 100, "%s: 100 execs, %d failed (%.1f s)", what,
	   failed, t);
	ok(atomic_load(&f->max_running) <= limit && atomic_load(&f->max_running) > 1,
	   "%s: at most %d at once (max %d)", what, limit, atomic_load(&f->max_running));
	for (i = 0; i < 100 && failed; i++)
		if (errs[i].msg[0]) {
			printf("#   first error: %s\n", errs[i].msg);
			break;
		}
}

static int fan_fail_odd(void *ctx, size_t i, struct pbx_err *err)
{
	(void)ctx;
	return i % 2 ? pbx_err_set(err, "odd %zu", i) : 0;
}

/* The server side of a pooled connection dies: the exec fails, and the
 * pool hands out a fresh connection next time. */
static void test_pool_broken(struct pbx_ssh_pool *pool, const struct pbx_ssh_target *t,
			     struct pbx_ssh *old)
{
	struct pbx_ssh *fresh = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	struct capture c;
	int st = run_cmd(old, "kill -9 $PPID; sleep 3", &c);
	ok(st == -1000, "exec on a connection whose sshd died fails");
	capture_release(&c);
	ok(pbx_ssh_pool_get(pool, t, &fresh, &err) == 0 && fresh && fresh != old,
	   "pool replaces the broken connection");
	ok(fresh && run_cmd(fresh, "true", &c) == 0, "the new connection works");
	capture_release(&c);
}

/* The gate of test_fanout_at_once: holds an exclusive flock on DIR/lock
 * until `want` remote commands have said they run (DIR/INDEX.ready), or
 * until the deadline; `seen` is how many had when it let them go. */
struct gate {
	char *dir;
	int lock_fd, want, seen;
	pthread_t thread;
};

static int gate_count_ready(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		if (strstr(e->d_name, ".ready"))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void *gate_main(void *arg)
{
	struct gate *g = arg;
	double deadline = now_s() + 60;
	while ((g->seen = gate_count_ready(g->dir)) < g->want && now_s() < deadline)
		usleep(20000);
	flock(g->lock_fd, LOCK_UN);
	return NULL;
}

/* 100 execs in flight at the same time, each over its own connection: every
 * remote command marks itself ready and then waits for a shared lock that
 * the test holds until all 100 are ready. */
static void test_fanout_at_once(void)
{
	struct pbx_err *errs = xcalloc(100, sizeof(*errs));
	struct fan *f = xcalloc(1, sizeof(*f));
	struct gate g = { .dir = tpath("gate"), .lock_fd = -1, .want = 100 };
	char *lock = tpath("gate/lock");
	double t0 = now_s();
	int failed;
	ok(mkdir(g.dir, 0700) == 0 &&
		   (g.lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) >= 0 &&
		   flock(g.lock_fd, LOCK_EX) == 0,
	   "gate locked");
	pthread_create(&g.thread, NULL, gate_main, &g);
	f->dir = g.dir;
	f->script = ": >\"$0/$1.ready\" && flock -s \"$0/lock\" true && echo \"job $1\"";
	failed = pbx_fanout(100, 100, fan_job, f, errs);
	pthread_join(g.thread, NULL);
	ok(g.seen == 100, "100 remote commands were running at once (%d seen)", g.seen);
	fan_report(f, errs, failed, "100 at once, fresh connections", now_s() - t0, 100);
	close(g.lock_fd);
	free(lock);
	free(g.dir);
	free(f);
	free(errs);
}

static void test_fanout(void)
{
	struct pbx_err *errs = xcalloc(100, sizeof(*errs));
	struct fan *f = xcalloc(1, sizeof(*f));
	struct pbx_ssh_target t = target("127.0.0.1", port1, "id");
	struct pbx_ssh *a = NULL, *b = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	double t0 = now_s();
	int failed, same = 1;
	size_t i;

	ok(pbx_fanout(10, 3, fan_fail_odd, NULL, errs) == 5 && !strcmp(errs[3].msg, "odd 3") &&
		   !errs[2].msg[0],
	   "fanout counts failures and keeps each error");

	failed = pbx_fanout(100, 16, fan_job, f, errs);
	fan_report(f, errs, failed, "fresh connections", now_s() - t0, 16);

	memset(f, 0, sizeof(*f));
	memset(errs, 0, 100 * sizeof(*errs));
	f->pool = pbx_ssh_pool_new(&hk);
	ok(pbx_ssh_pool_get(f->pool, &t, &a, &err) == 0 &&
		   pbx_ssh_pool_get(f->pool, &t, &b, &err) == 0 && a && a == b,
	   "pool returns the same connection twice");
	t0 = now_s();
	failed = pbx_fanout(100, 16, fan_job, f, errs);
	fan_report(f, errs, failed, "pooled connection", now_s() - t0, 16);
	for (i = 0; i < 100; i++)
		same &= f->seen[i] == a;
	ok(same, "all 100 pooled execs shared one connection");
	test_pool_broken(f->pool, &t, a);
	pbx_ssh_pool_free(f->pool);
	free(f);
	free(errs);
	test_fanout_at_once();
}

/* ------------------------------------------------------------ jump */

struct tunnel_job {
	struct pbx_ssh *conns[4]; /* 3 inner connections and the jump host itself */
	atomic_int good;
};

static int tunnel_job(void *ctx, size_t i, struct pbx_err *err)
{
	struct tunnel_job *tj = ctx;
	struct pbx_ssh *s = tj->conns[i % 4];
	size_t n = 200000 + i * 1000, k;
	char *in = xmalloc(n);
	struct capture c;
	int st = -1, rc;
	for (k = 0; k < n; k++)
		in[k] = (char)('a' + (k * 7 + i) % 26);
	capture_init(&c);
	rc = pbx_ssh_exec(s, "cat; head -c 100000 /dev/zero >&2", in, n, capture_fn, &c, &st, err);
	if (rc == 0 &&
	    (st != 0 || c.out.len != n || memcmp(c.out.buf, in, n) || zeros(&c.err) != 100000)) {
		for (k = 0; k < n && k < c.out.len && c.out.buf[k] == in[k]; k++)
			;
		struct pbx_buf text = PBX_BUF_INIT;
		for (size_t z = 0; z < c.err.len && text.len < 300; z++)
			if (c.err.buf[z])
				pbx_buf_addc(&text, c.err.buf[z]);
		rc = pbx_err_set(err,
				 "job %zu: status %d, stdout %zu/%zu bytes (same up to %zu), "
				 "stderr %zu: %s",
				 i, st, c.out.len, n, k, c.err.len, text.buf);
		pbx_buf_release(&text);
	}
	if (rc == 0)
		atomic_fetch_add(&tj->good, 1);
	capture_release(&c);
	free(in);
	return rc;
}

static void test_jump(void)
{
	struct pbx_ssh_target jt = target("127.0.0.1", port1, "id");
	struct pbx_ssh_target it = target("127.0.0.2", port2, "id");
	struct pbx_ssh *jump = connect_ok(&jt, "jump host"), *inner;
	struct tunnel_job *tj = xcalloc(1, sizeof(*tj));
	struct pbx_err errs[24];
	struct pbx_err err = PBX_ERR_INIT;
	char *hostport = xasprintf("127.0.0.2:%d", port2), *type = NULL, *key = NULL;
	char *rfile = tpath("via-jump.txt"), *lfile = tpath("via-jump.back");
	struct capture c;
	double t0;
	int i, failed;
	if (!jump)
		return;
	it.via = jump;
	inner = connect_ok(&it, "inner host through the jump host (direct-tcpip)");
	if (!inner)
		return;
	i = run_cmd(inner, "echo \"hi from $SSH_CONNECTION\"", &c);
	ok(i == 0 && strstr(c.out.buf, "hi from") && strstr(c.out.buf, "127.0.0.2"),
	   "command runs on the inner host: %s", c.out.buf);
	capture_release(&c);
	ok(pbx_store_hostkey_get(store, hostport, &type, &key, &err) == 1,
	   "inner host key pinned as %s", hostport);
	ok(pbx_ssh_put_data(inner, "via\n", 4, rfile, 0644, &err) == 0 &&
		   pbx_ssh_get_file(inner, rfile, lfile, &err) == 0,
	   "sftp through the tunnel %s", err.msg);

	tj->conns[0] = inner;
	tj->conns[3] = jump;
	for (i = 1; i < 3; i++)
		tj->conns[i] = connect_ok(&it, "another tunnel on the same jump host");
	if (tj->conns[1] && tj->conns[2]) {
		t0 = now_s();
		failed = pbx_fanout(24, 8, tunnel_job, tj, errs);
		t0 = now_s() - t0;
		if (!ok(failed == 0 && atomic_load(&tj->good) == 24,
			"24 concurrent execs over 3 tunnels + the jump host (%.1f s)", t0))
			for (i = 0; i < 24; i++)
				if (errs[i].msg[0])
					printf("#   %s\n", errs[i].msg);
	}
	for (i = 0; i < 3; i++)
		pbx_ssh_close(tj->conns[i]);
	pbx_ssh_close(jump);
	free(tj);
	free(hostport);
	free(type);
	free(key);
	free(rfile);
	free(lfile);
}

/* ------------------------------------------------------------ main */

static int setup(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct passwd *pw = getpwuid(getuid());
	char *db;
	tdir = getenv("PBX_TEST_DIR");
	if (!tdir || !getenv("PBX_TEST_PORT1") || !pw) {
		printf("# run me through sshd.sh\n");
		return -1;
	}
	port1 = atoi(getenv("PBX_TEST_PORT1"));
	port2 = getenv("PBX_TEST_PORT2") ? atoi(getenv("PBX_TEST_PORT2")) : 0;
	snprintf(user, sizeof(user), "%s", pw->pw_name);
	for (size_t i = 0; i < 5; i++)
		key_paths[i] = tpath(key_names[i]);
	db = tpath("pbx.db");
	if (pbx_ssh_global_init(&err) < 0 || pbx_store_open(db, &store, &err) < 0) {
		printf("# setup: %s\n", err.msg);
		free(db);
		return -1;
	}
	free(db);
	pbx_hostkeys_from_store(&hk, store);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} groups[] = {
		{ "auth", test_auth },         { "hostkey", test_hostkey },
		{ "exec", test_exec },         { "quote", test_quote },
		{ "transfer", test_transfer }, { "tree", test_tree },
		{ "hostile", test_hostile },   { "hostile", test_hostile_real },
		{ "fanout", test_fanout },     { "jump", test_jump },
		{ "chatty", test_chatty },
	};
	double t0 = now_s();
	size_t i;
	int ran = 0;
	if (argc != 2 || setup() < 0)
		return 2;
	for (i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		if (!strcmp(argv[1], groups[i].name)) {
			groups[i].fn();
			ran = 1;
		}
	if (!ran)
		ok(0, "unknown group %s", argv[1]);
	printf("# group %s took %.1f s\n", argv[1], now_s() - t0);
	pbx_store_close(store);
	for (i = 0; i < 5; i++)
		free(key_paths[i]);
	return tap_done();
}
