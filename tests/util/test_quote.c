/*
 * test_quote.c - unit tests of src/util/quote.c, the quoting of words for a
 * remote POSIX shell: for hostile words (spaces, both quotes, $(...),
 * backticks, ; & |, newlines, tabs, globs, ~, a leading '-', the empty word,
 * bytes >= 0x80, words of only single quotes, a long word) a real /bin/sh
 * running `printf %s QUOTED` prints exactly the original bytes, and a line
 * made by pbx_shell_join gives the shell exactly the original words; also
 * the exact text of pbx_shell_quote, pbx_shell_quoted and pbx_shell_join
 * (appending to what a buffer holds, the empty argv).
 */
#include "common/tap.h"
#include "util/buf.h"
#include "util/quote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const hostile[] = {
	"plain",
	"two words",
	"  leading and trailing  ",
	"it's",
	"'",
	"''",
	"'''''",
	"'\\''",
	"\"double\" quotes",
	"mixed ' and \" quotes",
	"$(echo pwned; exit 3)",
	"`id`",
	"$HOME ${HOME} $1 $@ $* $$ $? $! $#",
	"${x:-default}",
	"a;b",
	"a && b || c",
	"a & b",
	"a | b",
	"line1\nline2\n",
	"\n",
	"tab\there",
	"\t",
	"*",
	"?",
	"[a-z]*.c",
	"~",
	"~root/x",
	"-n",
	"-e \\n",
	"--help",
	"",
	"\xc3\xa9t\xc3\xa9 \xe2\x82\xac",
	"\xff\xfe\x80\x81",
	"back\\slash\\",
	"%s %d %%",
	"a#b #comment",
	"!history",
	"(sub) {grp} <in >out 2>&1",
	"\x01\x02\x1b[31mred\x7f",
	"=x",
	"a=b",
};

/* Runs `shell -c script` and returns what it printed on stdout (malloc'd,
 * *len bytes) and its wait status in *status, or NULL. */
static char *run_shell(const char *shell, const char *script, size_t *len, int *status)
{
	int fd[2];
	pid_t pid;
	struct pbx_buf out = PBX_BUF_INIT;
	char chunk[4096];
	ssize_t n;
	if (pipe(fd) < 0)
		return NULL;
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return NULL;
	}
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		execl(shell, shell, "-c", script, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	while ((n = read(fd[0], chunk, sizeof(chunk))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		pbx_buf_add(&out, chunk, (size_t)n);
	}
	close(fd[0]);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return pbx_buf_detach(&out, len);
}

/* printf %s QUOTED under `shell` prints exactly `word`. */
static int prints_back(const char *shell, const char *word)
{
	struct pbx_buf script = PBX_BUF_INIT;
	size_t len = 0;
	int status = -1, same;
	char *got;
	pbx_buf_adds(&script, "printf %s ");
	pbx_shell_quote(&script, word);
	got = run_shell(shell, script.buf, &len, &status);
	same = got && WIFEXITED(status) && WEXITSTATUS(status) == 0 && len == strlen(word) &&
	       memcmp(got, word, len) == 0;
	if (!same) {
		tap_diag_str_("script: ", script.buf);
		tap_diag_str_("printed: ", got);
		tap_diag_str_("want:    ", word);
		tap_diag("exit status %d, %zu bytes printed", status, len);
	}
	free(got);
	pbx_buf_release(&script);
	return same;
}

static void property(const char *shell)
{
	size_t i, n = sizeof(hostile) / sizeof(hostile[0]);
	struct pbx_buf script = PBX_BUF_INIT, want = PBX_BUF_INIT;
	size_t len = 0;
	int status = -1;
	char *got;

	for (i = 0; i < n; i++) {
		struct pbx_buf shown = PBX_BUF_INIT;
		const unsigned char *p;
		for (p = (const unsigned char *)hostile[i]; *p; p++)
			if (*p < 0x20 || *p >= 0x7f)
				pbx_buf_addf(&shown, "\\x%02x", *p);
			else
				pbx_buf_addc(&shown, (char)*p);
		ok(prints_back(shell, hostile[i]), "%s: printf %%s <quoted \"%s\"> prints it back",
		   shell, shown.buf);
		pbx_buf_release(&shown);
	}

	/* A long word with a quote every few bytes. */
	{
		struct pbx_buf big = PBX_BUF_INIT;
		for (i = 0; i < 20000; i++)
			pbx_buf_addc(&big, i % 7 == 0 ? '\'' : (char)('a' + i % 26));
		ok(prints_back(shell, big.buf),
		   "%s: a 20000-byte word with 2858 quotes prints back", shell);
		pbx_buf_release(&big);
	}

	/* pbx_shell_join: the shell gets exactly the words, one argument each
	 * (the empty word included), shown as [word] by printf's reused format. */
	for (i = 0; i < n; i++)
		pbx_buf_addf(&want, "[%s]", hostile[i]);
	/* hostile has no NULL at its end: join a NULL-terminated copy */
	{
		const char **argv = calloc(n + 1, sizeof(*argv));
		REQUIRE(argv != NULL);
		memcpy(argv, hostile, n * sizeof(*argv));
		pbx_buf_adds(&script, "printf '[%s]' ");
		pbx_shell_join(&script, argv);
		free(argv);
	}
	got = run_shell(shell, script.buf, &len, &status);
	if (!CHECKF(got && WIFEXITED(status) && WEXITSTATUS(status) == 0 && len == want.len &&
			    memcmp(got, want.buf, len) == 0,
		    "%s: a line joined from all %zu hostile words gives the shell exactly those words",
		    shell, n)) {
		tap_diag_str_("printed: ", got);
		tap_diag_str_("want:    ", want.buf);
	}
	free(got);
	pbx_buf_release(&script);
	pbx_buf_release(&want);
}

static void exact(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char *q;

	q = pbx_shell_quoted("abc");
	CHECK_STR(q, "'abc'");
	free(q);
	q = pbx_shell_quoted("");
	CHECK_STR(q, "''");
	free(q);
	q = pbx_shell_quoted("it's");
	CHECK_STR(q, "'it'\\''s'");
	free(q);
	q = pbx_shell_quoted("'");
	CHECK_STR(q, "''\\'''");
	free(q);
	q = pbx_shell_quoted("''");
	CHECK_STR(q, "''\\'''\\'''");
	free(q);
	q = pbx_shell_quoted("$(x) `y` \"z\"\n");
	CHECK_STR(q, "'$(x) `y` \"z\"\n'");
	free(q);

	/* pbx_shell_quote appends to what the buffer holds. */
	pbx_buf_adds(&b, "cd ");
	pbx_shell_quote(&b, "/a b");
	pbx_buf_adds(&b, " && ");
	pbx_shell_quote(&b, "x'y");
	CHECK_STR(b.buf, "cd '/a b' && 'x'\\''y'");
	CHECK(b.len == strlen("cd '/a b' && 'x'\\''y'"));
	pbx_buf_release(&b);

	{
		const char *argv[] = { "sbatch", "--job-name=a b", "", "it's", NULL };
		pbx_buf_adds(&b, "exec ");
		pbx_shell_join(&b, argv);
		CHECK_STR(b.buf, "exec 'sbatch' '--job-name=a b' '' 'it'\\''s'");
		pbx_buf_release(&b);
	}
	{
		const char *argv[] = { "one", NULL };
		pbx_shell_join(&b, argv);
		CHECK_STR(b.buf, "'one'");
		pbx_buf_release(&b);
	}
	{
		const char *argv[] = { NULL };
		pbx_buf_adds(&b, "x");
		pbx_shell_join(&b, argv);
		CHECK_STR(b.buf, "x");
		CHECKF(b.len == 1, "joining an empty argv appends nothing (len %zu)", b.len);
		pbx_buf_release(&b);
	}
}

int main(void)
{
	exact();
	property("/bin/sh");
	if (access("/bin/bash", X_OK) == 0)
		property("/bin/bash");
	else
		tap_skip("/bin/bash is not installed");
	return tap_done();
}
