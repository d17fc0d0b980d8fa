/*
 * tarmake.h - writes small ustar archives by hand, member by member, so the
 * tests can build hostile archives no real tar would produce (absolute
 * names, "..", links out of the tree, pax and GNU long-name overrides).
 */
#ifndef PBX_TESTS_SSH_TARMAKE_H
#define PBX_TESTS_SSH_TARMAKE_H

#include <stdio.h>
#include <string.h>

#include "util/buf.h"

static void tm_header(struct pbx_buf *b, const char *name, char type, size_t size,
		      const char *link, unsigned mode)
{
	unsigned char h[512];
	unsigned sum = 0;
	size_t i;
	memset(h, 0, sizeof(h));
	strncpy((char *)h, name, 100);
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 0u);
	snprintf((char *)h + 116, 8, "%07o", 0u);
	snprintf((char *)h + 124, 12, "%011lo", (unsigned long)size & 077777777777ul);
	snprintf((char *)h + 136, 12, "%011lo", 1700000000ul & 077777777777ul);
	h[156] = (unsigned char)type;
	if (link)
		strncpy((char *)h + 157, link, 100);
	memcpy(h + 257, "ustar\0" "00", 8);
	memcpy(h + 265, "root", 4);
	memcpy(h + 297, "root", 4);
	memset(h + 148, ' ', 8);
	for (i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	pbx_buf_add(b, h, sizeof(h));
}

static void tm_data(struct pbx_buf *b, const void *data, size_t len)
{
	static const char zeros[512];
	pbx_buf_add(b, data, len);
	if (len % 512)
		pbx_buf_add(b, zeros, 512 - len % 512);
}

static void tm_file(struct pbx_buf *b, const char *name, const char *text)
{
	tm_header(b, name, '0', strlen(text), NULL, 0644);
	tm_data(b, text, strlen(text));
}

static void tm_dir(struct pbx_buf *b, const char *name)
{
	tm_header(b, name, '5', 0, NULL, 0755);
}

static void tm_symlink(struct pbx_buf *b, const char *name, const char *target)
{
	tm_header(b, name, '2', 0, target, 0777);
}

static void tm_hardlink(struct pbx_buf *b, const char *name, const char *target)
{
	tm_header(b, name, '1', 0, target, 0644);
}

/* A pax 'x' header carrying one "key=value" record for the next member. */
static void tm_pax(struct pbx_buf *b, const char *key, const char *value)
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
static void tm_long(struct pbx_buf *b, char type, const char *name)
{
	tm_header(b, "././@LongLink", type, strlen(name) + 1, NULL, 0644);
	tm_data(b, name, strlen(name) + 1);
}

static void tm_end(struct pbx_buf *b)
{
	static const char zeros[1024];
	pbx_buf_add(b, zeros, sizeof(zeros));
}

#endif
