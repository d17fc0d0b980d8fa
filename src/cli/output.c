/*
 * output.c - errors, JSON, tables and progress (see output.h).
 */
#include "cli/output.h"
#include "util/visible.h"
#include "util/xalloc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool out_quiet, out_color, err_tty, out_tty;

void pbx_output_init(bool quiet)
{
	const char *nc = getenv("NO_COLOR");
	out_quiet = quiet;
	err_tty = isatty(STDERR_FILENO);
	out_tty = isatty(STDOUT_FILENO);
	out_color = err_tty && !(nc && *nc) && getenv("TERM") && strcmp(getenv("TERM"), "dumb");
}

bool pbx_output_color(void)
{
	return out_color;
}

/* The transfer being shown: its name and when its line started. */
static struct {
	char what[256];
	struct timespec t0;
	int open; /* a line is on the terminal, not ended */
} transfer;

/* A transfer's line left open (a failure before its end) ended, so that
 * a message does not run on from it. */
static void transfer_line_end(void)
{
	if (transfer.open)
		fputc('\n', stderr);
	transfer.open = 0;
}

/* A message, which may quote remote text (a node's stderr, a file name),
 * written to stderr made visible (pbx_visible, \n and \t kept). */
static void put_message(const char *fmt, va_list ap)
{
	struct pbx_visible v = PBX_VISIBLE_INIT;
	struct pbx_buf shown = PBX_BUF_INIT;
	va_list copy;
	int n;
	va_copy(copy, ap);
	n = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (n > 0) {
		char *text = xmalloc((size_t)n + 1);
		vsnprintf(text, (size_t)n + 1, fmt, ap);
		pbx_visible_feed(&v, &shown, text, (size_t)n, PBX_VISIBLE_LAYOUT);
		pbx_visible_end(&v, &shown);
		free(text);
	}
	fputs(shown.buf, stderr);
	fputc('\n', stderr);
	pbx_buf_release(&shown);
}

static void vmsg(const char *label, const char *colour, const char *fmt, va_list ap)
{
	fflush(stdout);
	transfer_line_end();
	if (out_color)
		fprintf(stderr, "pbx: %s%s\033[0m: ", colour, label);
	else
		fprintf(stderr, "pbx: %s: ", label);
	put_message(fmt, ap);
}

void pbx_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("error", "\033[1;31m", fmt, ap);
	va_end(ap);
}

void pbx_warning(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("warning", "\033[1;33m", fmt, ap);
	va_end(ap);
}

void pbx_info(const char *fmt, ...)
{
	va_list ap;
	if (out_quiet)
		return;
	transfer_line_end();
	va_start(ap, fmt);
	put_message(fmt, ap);
	va_end(ap);
}

int pbx_report(const struct pbx_err *err)
{
	pbx_error("%s", err->msg[0] ? err->msg : "failed");
	return err->code ? err->code : PBX_EXIT_FAIL;
}

/* Stream state of what pbx_cli_passthrough shows on a terminal. */
static struct pbx_visible pass_state[2] = { PBX_VISIBLE_INIT, PBX_VISIBLE_INIT };

void pbx_cli_passthrough(void *ctx, int stream, const char *data, size_t len)
{
	FILE *f = stream == 2 ? stderr : stdout;
	(void)ctx;
	if (stream == 2 ? err_tty : out_tty) {
		pbx_visible_write(f, &pass_state[stream == 2], data, len);
	} else {
		fwrite(data, 1, len, f);
		fflush(f);
	}
}

void pbx_cli_passthrough_end(void)
{
	int i;
	for (i = 0; i < 2; i++) {
		struct pbx_buf rest = PBX_BUF_INIT;
		pbx_visible_end(&pass_state[i], &rest);
		fputs(rest.buf, i ? stderr : stdout);
		pbx_buf_release(&rest);
	}
}

void pbx_print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (s) {
		fputs(s, stdout);
		fputc('\n', stdout);
		free(s);
	}
	json_decref(j);
}

/* ---------------------------------------------------------------- progress */

struct pbx_progress {
	pthread_mutex_t lock;
	char *title;
	size_t n;
	char **names;
	char **states;
	int name_width;
	bool drawn; /* live table already on screen */
	struct timespec start;
};

static double progress_elapsed(const struct pbx_progress *p)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - p->start.tv_sec) + (now.tv_nsec - p->start.tv_nsec) / 1e9;
}

struct pbx_progress *pbx_progress_new(const char *title, size_t n, const char *const *names)
{
	struct pbx_progress *p = xcalloc(1, sizeof(*p));
	size_t i;
	pthread_mutex_init(&p->lock, NULL);
	p->title = xstrdup(title);
	p->n = n;
	p->names = xcalloc(n ? n : 1, sizeof(char *));
	p->states = xcalloc(n ? n : 1, sizeof(char *));
	for (i = 0; i < n; i++) {
		p->names[i] = pbx_visible(names[i], PBX_VISIBLE_LINE); /* node names */
		p->states[i] = xstrdup("waiting");
		if ((int)strlen(p->names[i]) > p->name_width)
			p->name_width = (int)strlen(p->names[i]);
	}
	clock_gettime(CLOCK_MONOTONIC, &p->start);
	if (!out_quiet && !err_tty)
		fprintf(stderr, "%s\n", title);
	return p;
}

static void progress_draw(struct pbx_progress *p)
{
	size_t i;
	if (p->drawn)
		fprintf(stderr, "\033[%zuA", p->n + 1);
	fprintf(stderr, "\033[2K%s (%.1fs)\n", p->title, progress_elapsed(p));
	for (i = 0; i < p->n; i++)
		fprintf(stderr, "\033[2K  %-*s  %s\n", p->name_width, p->names[i], p->states[i]);
	fflush(stderr);
	p->drawn = true;
}

void pbx_progress_set(struct pbx_progress *p, size_t i, const char *state)
{
	if (!p || i >= p->n)
		return;
	char *shown = pbx_visible(state, PBX_VISIBLE_LINE); /* may quote a node */
	pthread_mutex_lock(&p->lock);
	if (strcmp(p->states[i], shown) != 0) {
		free(p->states[i]);
		p->states[i] = shown;
		shown = NULL;
		if (!out_quiet && err_tty)
			progress_draw(p);
		else if (!out_quiet)
			fprintf(stderr, "  %-*s  %s (%.1fs)\n", p->name_width, p->names[i],
				p->states[i], progress_elapsed(p));
	}
	pthread_mutex_unlock(&p->lock);
	free(shown);
}

void pbx_progress_free(struct pbx_progress *p)
{
	size_t i;
	if (!p)
		return;
	if (!out_quiet && err_tty)
		progress_draw(p);
	for (i = 0; i < p->n; i++) {
		free(p->names[i]);
		free(p->states[i]);
	}
	free(p->names);
	free(p->states);
	free(p->title);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* ------------------------------------------------------------------- table */

struct pbx_table {
	size_t ncols, nrows, cap;
	char **cells; /* row-major, (nrows + 1) * ncols, row 0 = headers */
};

struct pbx_table *pbx_table_new(size_t ncols, const char *const *headers)
{
	struct pbx_table *t = xcalloc(1, sizeof(*t));
	t->ncols = ncols;
	pbx_table_add(t, headers);
	return t;
}

void pbx_table_add(struct pbx_table *t, const char *const *cells)
{
	size_t c;
	if (t->nrows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 8;
		t->cells = xreallocarray(t->cells, t->cap * t->ncols, sizeof(char *));
	}
	for (c = 0; c < t->ncols; c++) /* cells may hold a task's or node's text */
		t->cells[t->nrows * t->ncols + c] =
			pbx_visible(cells[c] ? cells[c] : "-", PBX_VISIBLE_LINE);
	t->nrows++;
}

void pbx_table_print(struct pbx_table *t)
{
	size_t r, c, *w = xcalloc(t->ncols, sizeof(size_t));
	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++) {
			size_t l = strlen(t->cells[r * t->ncols + c]);
			if (l > w[c])
				w[c] = l;
		}
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c];
			if (c + 1 == t->ncols)
				printf("%s", cell);
			else
				printf("%-*s  ", (int)w[c], cell);
			free((char *)cell);
		}
		putchar('\n');
	}
	free(t->cells);
	free(w);
	free(t);
}

/* ------------------------------------------------------------ transfers */

void pbx_transfer_progress(const char *what, size_t done, size_t total, uint64_t bytes)
{
	pbx_transfer_progress_note(what, done, total, bytes, NULL);
}

void pbx_transfer_progress_note(const char *what, size_t done, size_t total, uint64_t bytes,
				const char *note)
{
	struct timespec now;
	char *shown;
	double s;
	if (out_quiet || !err_tty || !total)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!transfer.open || strncmp(transfer.what, what, sizeof(transfer.what) - 1)) {
		snprintf(transfer.what, sizeof(transfer.what), "%s", what);
		transfer.t0 = now;
		transfer.open = 1;
	}
	s = (double)(now.tv_sec - transfer.t0.tv_sec) +
	    (double)(now.tv_nsec - transfer.t0.tv_nsec) / 1e9;
	shown = pbx_visible(what, PBX_VISIBLE_LINE);
	fprintf(stderr, "\r%s: %zu/%zu objects, %.1f MB", shown, done, total, (double)bytes / 1e6);
	free(shown);
	if (s >= 0.5)
		fprintf(stderr, ", %.1f MB/s", (double)bytes / 1e6 / s);
	if (note)
		fprintf(stderr, ", %s", note);
	fputs("\033[K", stderr); /* the end of a longer earlier line */
	if (done == total) {
		fputc('\n', stderr);
		transfer.open = 0;
	}
	fflush(stderr);
}

void pbx_format_time(int64_t t, char *out, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;
	localtime_r(&tt, &tm);
	strftime(out, len, "%Y-%m-%d %H:%M", &tm);
}

void pbx_format_bytes(unsigned long long n, char *out, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, len, "%llu B", n);
	else
		snprintf(out, len, "%.1f %s", v, unit[u]);
}
