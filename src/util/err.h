/*
 * err.h - error reports handed up from library code.
 *
 * Library code (store, ssh, config, cloud, slurm) never prints and never
 * exits: it fills a struct pbx_err and returns -1.  Only src/cli prints the
 * message and picks the exit code.  Messages follow git's style: lowercase,
 * no full stop, the error first, e.g. "cannot open store /x/pbx.db: ...".
 */
#ifndef PBX_UTIL_ERR_H
#define PBX_UTIL_ERR_H

/* Exit codes, documented in pbx(1). */
enum pbx_exit {
	PBX_EXIT_OK = 0,
	PBX_EXIT_FAIL = 1,     /* the operation failed (remote, cloud, SLURM, I/O) */
	PBX_EXIT_USAGE = 2,    /* bad command line or bad configuration */
	PBX_EXIT_NOTFOUND = 3, /* no such cluster / package / task */
	PBX_EXIT_SECURITY = 4, /* refused for safety: host key changed, unsafe permissions */
	PBX_EXIT_INTERRUPTED = 130,
};

struct pbx_err {
	int code;       /* an enum pbx_exit; PBX_EXIT_FAIL unless set otherwise */
	char msg[2048]; /* the message, NUL-terminated, may be empty */
};

#define PBX_ERR_INIT      \
	{                 \
		0,        \
		{         \
			0 \
		}         \
	}

/* Sets the message (printf-style) with code PBX_EXIT_FAIL; returns -1. */
int pbx_err_set(struct pbx_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets message and code; returns -1. */
int pbx_err_setc(struct pbx_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Puts "prefix: " in front of the existing message; returns -1. */
int pbx_err_prefix(struct pbx_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pbx_err_clear(struct pbx_err *err);

#endif
