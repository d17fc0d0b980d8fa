/*
 * crc32c.c - table-driven CRC-32C (see crc32c.h).
 *
 * One 256-entry table, one byte per step: event records are tens of bytes,
 * so speed does not matter here.
 */
#include "util/crc32c.h"

#include <pthread.h>

#define CRC32C_POLY       0x82F63B78u /* reflected Castagnoli polynomial */
#define CRC32C_MASK_DELTA 0xa282ead8u

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t pbx_crc32c(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;
	pthread_once(&crc_once, crc_table_init);
	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

uint32_t pbx_crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + CRC32C_MASK_DELTA;
}

uint32_t pbx_crc32c_unmask(uint32_t masked)
{
	uint32_t r = masked - CRC32C_MASK_DELTA;
	return (r >> 17) | (r << 15);
}

uint32_t pbx_crc32c_masked(const void *data, size_t len)
{
	return pbx_crc32c_mask(pbx_crc32c(0, data, len));
}
