/*
 * tfevents.c - TFRecord framing and hand-encoded tensorboard.Event protos
 * (see tfevents.h).
 *
 * Protobuf wire format in brief: each field is a varint key
 * (field_number << 3 | wire_type) then the value; wire types used here are
 * 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.  All little-endian.
 *
 *   Event         { 1: double wall_time (0x09), 2: int64 step (0x10),
 *                   3: string file_version (0x1A), 5: Summary summary (0x2A) }
 *   Summary       { 1: repeated Value value (0x0A) }
 *   Summary.Value { 1: string tag (0x0A), 2: float simple_value (0x15) }
 */
#include "runtime/tfevents.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/crc32c.h"
#include "util/xalloc.h"

struct pbx_tfevents {
	FILE *f;
	char *path;
	struct pbx_buf rec; /* scratch: the serialized Event being written */
};

static atomic_uint tfevents_counter;

double pbx_wall_time(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------- */
/* little-endian and protobuf primitives */

static void put_le(unsigned char *p, uint64_t v, int nbytes)
{
	for (int i = 0; i < nbytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void pb_varint(struct pbx_buf *b, uint64_t v)
{
	unsigned char tmp[10];
	int n = 0;
	do {
		unsigned char byte = v & 0x7f;
		v >>= 7;
		tmp[n++] = byte | (v ? 0x80 : 0);
	} while (v);
	pbx_buf_add(b, tmp, (size_t)n);
}

static void pb_double(struct pbx_buf *b, unsigned key, double d)
{
	unsigned char tmp[8];
	uint64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	put_le(tmp, bits, 8);
	pbx_buf_addc(b, (char)key);
	pbx_buf_add(b, tmp, 8);
}

static void pb_float(struct pbx_buf *b, unsigned key, float f)
{
	unsigned char tmp[4];
	uint32_t bits;
	memcpy(&bits, &f, sizeof(bits));
	put_le(tmp, bits, 4);
	pbx_buf_addc(b, (char)key);
	pbx_buf_add(b, tmp, 4);
}

static void pb_bytes(struct pbx_buf *b, unsigned key, const void *data, size_t len)
{
	pbx_buf_addc(b, (char)key);
	pb_varint(b, len);
	pbx_buf_add(b, data, len);
}

/* ---------------------------------------------------------------------- */
/* Event encoding */

void pbx_tfevent_encode_version(struct pbx_buf *out, double wall_time, const char *version)
{
	pb_double(out, 0x09, wall_time);
	pb_bytes(out, 0x1A, version, strlen(version));
}

void pbx_tfevent_encode_scalar(struct pbx_buf *out, double wall_time, int64_t step, const char *tag,
			       float value)
{
	struct pbx_buf val = PBX_BUF_INIT, summary = PBX_BUF_INIT;
	pb_bytes(&val, 0x0A, tag, strlen(tag));     /* Value.tag */
	pb_float(&val, 0x15, value);                /* Value.simple_value */
	pb_bytes(&summary, 0x0A, val.buf, val.len); /* Summary.value */
	pb_double(out, 0x09, wall_time);            /* Event.wall_time */
	pbx_buf_addc(out, 0x10);                    /* Event.step */
	pb_varint(out, (uint64_t)step);
	pb_bytes(out, 0x2A, summary.buf, summary.len); /* Event.summary */
	pbx_buf_release(&val);
	pbx_buf_release(&summary);
}

int pbx_tfrecord_write(FILE *f, const void *data, size_t len)
{
	unsigned char header[12], footer[4];
	put_le(header, (uint64_t)len, 8);
	put_le(header + 8, pbx_crc32c_masked(header, 8), 4);
	put_le(footer, pbx_crc32c_masked(data, len), 4);
	if (fwrite(header, 1, sizeof(header), f) != sizeof(header) ||
	    fwrite(data, 1, len, f) != len ||
	    fwrite(footer, 1, sizeof(footer), f) != sizeof(footer))
		return -1;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* the writer */

char *pbx_tfevents_filename(const char *dir)
{
	char host[256] = "localhost";
	unsigned uid = atomic_fetch_add(&tfevents_counter, 1);
	if (gethostname(host, sizeof(host)) < 0)
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	return xasprintf("%s/events.out.tfevents.%010lld.%s.%ld.%u", dir, (long long)time(NULL),
			 host, (long)getpid(), uid);
}

/* Frames the Event in w->rec and flushes it to disk. */
static int tfevents_put(struct pbx_tfevents *w, struct pbx_err *err)
{
	if (pbx_tfrecord_write(w->f, w->rec.buf, w->rec.len) < 0 || fflush(w->f) != 0)
		return pbx_err_set(err, "cannot write %s: %s", w->path, strerror(errno));
	return 0;
}

struct pbx_tfevents *pbx_tfevents_open(const char *path, struct pbx_err *err)
{
	struct pbx_tfevents *w;
	FILE *f = fopen(path, "wbx");
	if (!f) {
		pbx_err_set(err, "cannot create %s: %s", path, strerror(errno));
		return NULL;
	}
	w = xcalloc(1, sizeof(*w));
	w->f = f;
	w->path = xstrdup(path);
	pbx_buf_init(&w->rec, 0);
	pbx_tfevent_encode_version(&w->rec, pbx_wall_time(), "brain.Event:2");
	if (tfevents_put(w, err) < 0) {
		pbx_tfevents_close(w, NULL);
		return NULL;
	}
	return w;
}

int pbx_tfevents_scalar_at(struct pbx_tfevents *w, double wall_time, int64_t step, const char *tag,
			   float value, struct pbx_err *err)
{
	pbx_buf_reset(&w->rec);
	pbx_tfevent_encode_scalar(&w->rec, wall_time, step, tag, value);
	return tfevents_put(w, err);
}

int pbx_tfevents_scalar(struct pbx_tfevents *w, int64_t step, const char *tag, float value,
			struct pbx_err *err)
{
	return pbx_tfevents_scalar_at(w, pbx_wall_time(), step, tag, value, err);
}

const char *pbx_tfevents_path(const struct pbx_tfevents *w)
{
	return w->path;
}

int pbx_tfevents_close(struct pbx_tfevents *w, struct pbx_err *err)
{
	int rc = 0;
	if (!w)
		return 0;
	if (fclose(w->f) != 0)
		rc = pbx_err_set(err, "cannot close %s: %s", w->path, strerror(errno));
	pbx_buf_release(&w->rec);
	free(w->path);
	free(w);
	return rc;
}
