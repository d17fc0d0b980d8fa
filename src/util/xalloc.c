/*
 * xalloc.c - fatal-on-OOM allocation wrappers (see xalloc.h).
 */
#define _GNU_SOURCE
#include "util/xalloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void xalloc_die(size_t size)
{
	fprintf(stderr, "pbx: out of memory (allocating %zu bytes)\n", size);
	abort();
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);
	if (!p)
		xalloc_die(size);
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p;
	if (nmemb && SIZE_MAX / nmemb < size)
		xalloc_die(SIZE_MAX);
	p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (!p)
		xalloc_die(nmemb * size);
	return p;
}

void *xrealloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);
	if (!p)
		xalloc_die(size);
	return p;
}

void *xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	if (nmemb && SIZE_MAX / nmemb < size)
		xalloc_die(SIZE_MAX);
	return xrealloc(ptr, nmemb * size);
}

char *xstrdup(const char *s)
{
	return s ? xstrndup(s, strlen(s)) : NULL;
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		xalloc_die(0);
	va_end(ap);
	return s;
}
