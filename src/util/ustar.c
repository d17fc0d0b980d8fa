/*
 * ustar.c - writing a small ustar archive into memory (see ustar.h): one
 * 512-byte header per member (octal fields, checksum over the header with
 * the checksum field as spaces), the data padded to 512 bytes, and two
 * zero blocks at the end.
 */
#include "util/ustar.h"

#include <stdio.h>
#include <string.h>

/* Writes VALUE as WIDTH-1 octal digits and a NUL (callers keep VALUE within
 * them: modes, times, sizes of what pbx holds in memory). */
static void ustar_octal(char *field, size_t width, unsigned long long value)
{
	size_t i = width - 1;
	field[i] = '\0';
	while (i-- > 0) {
		field[i] = (char)('0' + (value & 7));
		value >>= 3;
	}
}

static void ustar_copy(unsigned char *field, const char *s, size_t width)
{
	size_t n = strlen(s);
	memcpy(field, s, n < width ? n : width);
}

void pbx_ustar_fill(unsigned char h[PBX_USTAR_BLOCK], char type, unsigned mode, time_t mtime,
		    unsigned long long size, const char *link)
{
	unsigned sum = 0;
	size_t i;
	ustar_octal((char *)h + 100, 8, mode & 07777);
	ustar_octal((char *)h + 108, 8, 0); /* uid */
	ustar_octal((char *)h + 116, 8, 0); /* gid */
	ustar_octal((char *)h + 124, 12, size);
	ustar_octal((char *)h + 136, 12, mtime > 0 ? (unsigned long long)mtime : 0);
	h[156] = (unsigned char)type;
	if (link)
		ustar_copy(h + 157, link, 100);
	memcpy(h + 257,
	       "ustar\0"
	       "00",
	       8);                  /* magic and version */
	memcpy(h + 265, "root", 4); /* uname */
	memcpy(h + 297, "root", 4); /* gname */
	memset(h + 148, ' ', 8);    /* chksum, while summing */
	for (i = 0; i < PBX_USTAR_BLOCK; i++)
		sum += h[i];
	ustar_octal((char *)h + 148, 7, sum); /* six digits, NUL, space */
	h[155] = ' ';
}

void pbx_ustar_header(struct pbx_buf *tar, const char *name, char type, unsigned mode, time_t mtime,
		      size_t size, const char *link)
{
	unsigned char h[PBX_USTAR_BLOCK];
	memset(h, 0, sizeof(h));
	ustar_copy(h, name, 100);
	pbx_ustar_fill(h, type, mode, mtime, size, link);
	pbx_buf_add(tar, h, sizeof(h));
}

void pbx_ustar_data(struct pbx_buf *tar, const void *data, size_t len)
{
	static const unsigned char zeros[PBX_USTAR_BLOCK];
	pbx_buf_add(tar, data, len);
	if (len % PBX_USTAR_BLOCK)
		pbx_buf_add(tar, zeros, PBX_USTAR_BLOCK - len % PBX_USTAR_BLOCK);
}

static int ustar_name_ok(const char *name, struct pbx_err *err)
{
	if (!*name || name[0] == '/' || strlen(name) >= 100)
		return pbx_err_set(err, "cannot archive '%s': name empty, absolute or too long",
				   name);
	return 0;
}

int pbx_ustar_dir(struct pbx_buf *tar, const char *name, int mode, time_t mtime,
		  struct pbx_err *err)
{
	char dir[101];
	int n = snprintf(dir, sizeof(dir), "%s%s", name,
			 *name && name[strlen(name) - 1] == '/' ? "" : "/");
	if (n < 0 || (size_t)n >= sizeof(dir))
		return pbx_err_set(err, "cannot archive '%s': name too long", name);
	if (ustar_name_ok(dir, err) < 0)
		return -1;
	pbx_ustar_header(tar, dir, '5', (unsigned)mode, mtime, 0, NULL);
	return 0;
}

int pbx_ustar_file(struct pbx_buf *tar, const char *name, int mode, time_t mtime, const void *data,
		   size_t len, struct pbx_err *err)
{
	if (ustar_name_ok(name, err) < 0)
		return -1;
	pbx_ustar_header(tar, name, '0', (unsigned)mode, mtime, len, NULL);
	pbx_ustar_data(tar, data, len);
	return 0;
}

void pbx_ustar_end(struct pbx_buf *tar)
{
	static const unsigned char zeros[2 * PBX_USTAR_BLOCK];
	pbx_buf_add(tar, zeros, sizeof(zeros));
}
