/*
 * xalloc.h - allocation helpers that never return NULL.
 *
 * Every x* function aborts the program with a message on out-of-memory, so
 * callers never check for NULL.  Sizes are overflow-checked.  Memory from
 * these functions is released with free(3).
 */
#ifndef PBX_UTIL_XALLOC_H
#define PBX_UTIL_XALLOC_H

#include <stddef.h>

/* Returned memory is owned by the caller; free with free(3). */
void *xmalloc(size_t size);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *ptr, size_t size);
void *xreallocarray(void *ptr, size_t nmemb, size_t size);
char *xstrdup(const char *s); /* xstrdup(NULL) returns NULL */
char *xstrndup(const char *s, size_t n);
/* printf into a fresh string; caller frees. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
