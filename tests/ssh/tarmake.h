/*
 * tarmake.h - writes small ustar archives member by member (with
 * util/ustar.h's unchecked pieces), so the tests can build hostile archives
 * no real tar would produce (absolute names, "..", links out of the tree,
 * pax and GNU long-name overrides).
 */
#ifndef PBX_TESTS_SSH_TARMAKE_H
#define PBX_TESTS_SSH_TARMAKE_H

#include <stdio.h>
#include <string.h>

#include "util/buf.h"
#include "util/ustar.h"

static inline void tm_header(struct pbx_buf *b, const char *name, char type, size_t size,
			     const char *link, unsigned mode)
{
	pbx_ustar_header(b, name, type, mode, 1700000000, size, link);
}

static inline void tm_data(struct pbx_buf *b, const void *data, size_t len)
{
	pbx_ustar_data(b, data, len);
}

static inline void tm_file(struct pbx_buf *b, const char *name, const char *text)
{
	tm_header(b, name, '0', strlen(text), NULL, 0644);
	tm_data(b, text, strlen(text));
}

static inline void tm_dir(struct pbx_buf *b, const char *name)
{
	tm_header(b, name, '5', 0, NULL, 0755);
}

static inline void tm_symlink(struct pbx_buf *b, const char *name, const char *target)
{
	tm_header(b, name, '2', 0, target, 0777);
}

static inline void tm_hardlink(struct pbx_buf *b, const char *name, const char *target)
{
	tm_header(b, name, '1', 0, target, 0644);
}

/* A pax 'x' header carrying one "key=value" record for the next member. */
static inline void tm_pax(struct pbx_buf *b, const char *key, const char *value)
{
	char rec[1024];
	size_t body = strlen(key) + strlen(value) + 3, len = body + 1;
	while (snprintf(NULL, 0, "%zu", len) + body != len)
		len++;
	snprintf(rec, sizeof(rec), "%zu %s=%s\n", len, key, value);
	tm_header(b, "././@PaxHeader", 'x', strlen(rec), NULL, 0644);
	tm_data(b, rec, strlen(rec));
}

/* A GNU long name ('L') or long link ('K') for the next member. */
static inline void tm_long(struct pbx_buf *b, char type, const char *name)
{
	tm_header(b, "././@LongLink", type, strlen(name) + 1, NULL, 0644);
	tm_data(b, name, strlen(name) + 1);
}

static inline void tm_end(struct pbx_buf *b)
{
	static const char zeros[1024];
	pbx_buf_add(b, zeros, sizeof(zeros));
}

#endif
