/*
 * crc32c.h - CRC-32C (Castagnoli): the checksum of TFRecord framing and
 * the one Cloud Storage and S3 keep for every object.
 *
 * Used by runtime/tfevents.c to frame TensorBoard event records (see
 * docs/formats.md, "CRC-32C" and "The mask").  Reflected polynomial
 * 0x82F63B78, initial value and final XOR 0xFFFFFFFF, so the calling
 * convention is zlib's crc32(): start with crc = 0 and chain calls to
 * checksum data in pieces:
 *   pbx_crc32c(pbx_crc32c(0, a, na), b, nb) == crc of a||b.
 * Check value: pbx_crc32c(0, "123456789", 9) == 0xE3069283.
 * Thread-safe (the table is built once under pthread_once).
 */
#ifndef PBX_UTIL_CRC32C_H
#define PBX_UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t pbx_crc32c(uint32_t crc, const void *data, size_t len);

/* The CRC of A||B from crc_a = pbx_crc32c(0, A, len_a), crc_b =
 * pbx_crc32c(0, B, len_b) and len_b alone: pieces of one object read at
 * once (ranges) checked as a whole without a second pass.  O(log len_b). */
uint32_t pbx_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* TFRecord stores CRCs "masked": rotate right by 15 and add a constant,
 * because checksumming data that embeds its own CRC is weak. */
uint32_t pbx_crc32c_mask(uint32_t crc);
uint32_t pbx_crc32c_unmask(uint32_t masked);
/* pbx_crc32c_mask(pbx_crc32c(0, data, len)). */
uint32_t pbx_crc32c_masked(const void *data, size_t len);

#endif
