/*
 * err.c - filling struct pbx_err (see err.h).
 */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void __attribute__((format(printf, 3, 0)))
pbx_err_vset(struct pbx_err *err, int code, const char *fmt, va_list ap)
{
	if (!err)
		return;
	err->code = code;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
}

int pbx_err_set(struct pbx_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pbx_err_vset(err, PBX_EXIT_FAIL, fmt, ap);
	va_end(ap);
	return -1;
}

int pbx_err_setc(struct pbx_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pbx_err_vset(err, code, fmt, ap);
	va_end(ap);
	return -1;
}

int pbx_err_prefix(struct pbx_err *err, const char *fmt, ...)
{
	char prefix[512], old[sizeof(err->msg)];
	va_list ap;
	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	{
		size_t plen = strlen(prefix);
		if (plen > sizeof(err->msg) - 3)
			plen = sizeof(err->msg) - 3;
		memcpy(err->msg, prefix, plen);
		memcpy(err->msg + plen, ": ", 2);
		size_t rest = sizeof(err->msg) - plen - 3;
		size_t olen = strnlen(old, rest);
		memcpy(err->msg + plen + 2, old, olen);
		err->msg[plen + 2 + olen] = '\0';
	}
	if (!err->code)
		err->code = PBX_EXIT_FAIL;
	return -1;
}

void pbx_err_clear(struct pbx_err *err)
{
	err->code = 0;
	err->msg[0] = '\0';
}
