/*
 * checkpoint.c - the checkpoint file (see checkpoint.h for the layout).
 * The header is serialised field by field as little-endian 64-bit words, so
 * struct padding never reaches the file; CRC-32 (zlib) guards the header
 * and the payload separately, so a truncated or damaged file is named as
 * such instead of producing a silently wrong model.
 */
#include "train/checkpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/buf.h"
#include "util/fs.h"

#define CKPT_MAGIC "PBXTCKPT"
#define CKPT_WORDS 24 /* 64-bit words after magic, before the CRCs */

static void ckpt_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t ckpt_get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint64_t ckpt_dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

static double ckpt_bitsd(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof(d));
	return d;
}

#define CKPT_HDR (8 + 8 * CKPT_WORDS + 8)

int pbx_checkpoint_save(const char *path, const struct pbx_model *m, const struct pbx_optim *o,
			const struct pbx_ckpt_state *st, struct pbx_err *err)
{
	uint64_t w[CKPT_WORDS] = {
		PBX_CKPT_VERSION,
		CKPT_HDR,
		m->arch_hash,
		m->nparams,
		m->nbuffers,
		o->nstate,
		(uint64_t)o->kind,
		(uint64_t)o->t,
		(uint64_t)st->epoch,
		(uint64_t)st->step,
		st->loader.seed,
		(uint64_t)st->loader.epoch,
		(uint64_t)st->loader.cursor,
		st->rng.s[0],
		st->rng.s[1],
		st->rng.s[2],
		st->rng.s[3],
		ckpt_dbits(st->epoch_loss_sum),
		(uint64_t)st->epoch_correct,
		(uint64_t)st->epoch_seen,
		ckpt_dbits(st->elapsed_s),
		(uint64_t)(st->world > 0 ? st->world : 1),
		0,
		0,
	};
	size_t np = sizeof(float) * m->nparams, nb = sizeof(float) * m->nbuffers;
	size_t no = sizeof(float) * o->nstate, len = CKPT_HDR + np + nb + no;
	unsigned char *buf = malloc(len), *p = buf;
	uLong crc;
	int rc;
	if (!buf)
		return pbx_err_set(err, "cannot write checkpoint %s: out of memory", path);
	memcpy(p, CKPT_MAGIC, 8);
	for (int i = 0; i < CKPT_WORDS; i++)
		ckpt_put64(p + 8 + 8 * i, w[i]);
	p += CKPT_HDR;
	memcpy(p, m->params, np);
	memcpy(p + np, m->buffers, nb);
	memcpy(p + np + nb, o->state, no);
	crc = crc32(0L, p, (uInt)(np + nb + no));
	ckpt_put64(buf + CKPT_HDR - 8, (uint64_t)crc);
	/* header CRC over magic + words + payload CRC, stored in the top half */
	crc = crc32(0L, buf, CKPT_HDR - 4);
	buf[CKPT_HDR - 4] = (unsigned char)crc;
	buf[CKPT_HDR - 3] = (unsigned char)(crc >> 8);
	buf[CKPT_HDR - 2] = (unsigned char)(crc >> 16);
	buf[CKPT_HDR - 1] = (unsigned char)(crc >> 24);
	rc = pbx_write_file_atomic(path, buf, len, 0644, err);
	free(buf);
	if (rc < 0)
		return pbx_err_prefix(err, "cannot write checkpoint");
	return 0;
}

int pbx_checkpoint_load(const char *path, struct pbx_model *m, struct pbx_optim *o,
			struct pbx_ckpt_state *st, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	const unsigned char *p;
	uint64_t w[CKPT_WORDS];
	uint32_t hcrc;
	int rc = -1;
	/* a regular file, whatever its size: not a FIFO to wait on forever */
	if (pbx_read_regular(path, SIZE_MAX, &b, NULL, err) < 0)
		return pbx_err_prefix(err, "cannot resume");
	p = (const unsigned char *)b.buf;
	if (b.len < CKPT_HDR || memcmp(p, CKPT_MAGIC, 8) != 0) {
		pbx_err_set(err, "%s is not a pbx-train checkpoint (bad magic or too short)", path);
		goto out;
	}
	for (int i = 0; i < CKPT_WORDS; i++)
		w[i] = ckpt_get64(p + 8 + 8 * i);
	if (w[0] != PBX_CKPT_VERSION) {
		pbx_err_set(err, "%s: checkpoint version %llu, this pbx-train reads version %d",
			    path, (unsigned long long)w[0], PBX_CKPT_VERSION);
		goto out;
	}
	hcrc = (uint32_t)p[CKPT_HDR - 4] | (uint32_t)p[CKPT_HDR - 3] << 8 |
	       (uint32_t)p[CKPT_HDR - 2] << 16 | (uint32_t)p[CKPT_HDR - 1] << 24;
	if (w[1] != CKPT_HDR || hcrc != (uint32_t)crc32(0L, p, CKPT_HDR - 4)) {
		pbx_err_set(err, "%s: checkpoint header is damaged (CRC mismatch)", path);
		goto out;
	}
	if (w[2] != m->arch_hash || w[3] != m->nparams || w[4] != m->nbuffers) {
		pbx_err_set(
			err,
			"%s was written for a different model (architecture hash %016llx, %llu parameters; this model: %016llx, %zu parameters); refusing to resume",
			path, (unsigned long long)w[2], (unsigned long long)w[3],
			(unsigned long long)m->arch_hash, m->nparams);
		goto out;
	}
	if (w[5] != o->nstate || w[6] != (uint64_t)o->kind) {
		pbx_err_set(
			err,
			"%s was written with a different optimizer (state of %llu values, this run: %zu); refusing to resume",
			path, (unsigned long long)w[5], o->nstate);
		goto out;
	}
	size_t np = sizeof(float) * m->nparams, nb = sizeof(float) * m->nbuffers;
	size_t no = sizeof(float) * o->nstate;
	if (b.len != CKPT_HDR + np + nb + no) {
		pbx_err_set(err, "%s: checkpoint has %zu bytes, expected %zu (truncated?)", path,
			    b.len, CKPT_HDR + np + nb + no);
		goto out;
	}
	if ((ckpt_get64(p + CKPT_HDR - 8) & 0xffffffffu) !=
	    (uint64_t)crc32(0L, p + CKPT_HDR, (uInt)(np + nb + no))) {
		pbx_err_set(err, "%s: checkpoint data is damaged (CRC mismatch)", path);
		goto out;
	}
	p += CKPT_HDR;
	memcpy(m->params, p, np);
	memcpy(m->buffers, p + np, nb);
	memcpy(o->state, p + np + nb, no);
	o->t = (int64_t)w[7];
	st->epoch = (int64_t)w[8];
	st->step = (int64_t)w[9];
	st->loader.seed = w[10];
	st->loader.epoch = (int64_t)w[11];
	st->loader.cursor = (int64_t)w[12];
	for (int i = 0; i < 4; i++)
		st->rng.s[i] = w[13 + i];
	st->epoch_loss_sum = ckpt_bitsd(w[17]);
	st->epoch_correct = (int64_t)w[18];
	st->epoch_seen = (int64_t)w[19];
	st->elapsed_s = ckpt_bitsd(w[20]);
	st->world = w[21] ? (int)w[21] : 1;
	rc = 0;
out:
	pbx_buf_release(&b);
	return rc;
}
