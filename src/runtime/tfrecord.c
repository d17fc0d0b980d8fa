/*
 * tfrecord.c - reading TFRecord framing with CRC checks, and the
 * tf.train.Example codec for image records (see tfrecord.h).  The
 * protobuf work is protobuf-c's, on the code protoc-c generates from
 * proto/example.proto; this file only maps features to fields.
 */
#include "runtime/tfrecord.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/xalloc.h"
#include "example.pb-c.h"

#define EX_MAX_SIDE     4096
#define EX_MAX_CHANNELS 16
#define EX_MAX_LABEL    65535

/* ------------------------------------------------------------ framing */

struct pbx_tfrecord_reader {
	FILE *f;
	char *name;
	uint64_t pos;    /* offset of the next record */
	uint64_t offset; /* offset of the record last read */
	unsigned char *buf;
	size_t alloc;
};

static uint64_t tfr_le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

struct pbx_tfrecord_reader *pbx_tfrecord_reader_new(FILE *f, const char *name)
{
	struct pbx_tfrecord_reader *r = xcalloc(1, sizeof(*r));
	r->f = f;
	r->name = xstrdup(name);
	return r;
}

void pbx_tfrecord_reader_free(struct pbx_tfrecord_reader *r)
{
	if (!r)
		return;
	free(r->name);
	free(r->buf);
	free(r);
}

uint64_t pbx_tfrecord_offset(const struct pbx_tfrecord_reader *r)
{
	return r->offset;
}

/* fread of exactly n bytes; -1 with err on a read error or a short read. */
static int tfr_read(struct pbx_tfrecord_reader *r, void *dst, size_t n, const char *what,
		    struct pbx_err *err)
{
	size_t got = fread(dst, 1, n, r->f);
	if (got == n)
		return 0;
	if (ferror(r->f))
		return pbx_err_set(err, "%s: offset %llu: cannot read: %s", r->name,
				   (unsigned long long)r->offset, strerror(errno));
	return pbx_err_set(err, "%s: offset %llu: truncated record: %s has %zu of %zu bytes",
			   r->name, (unsigned long long)r->offset, what, got, n);
}

int pbx_tfrecord_next(struct pbx_tfrecord_reader *r, const unsigned char **data, size_t *len,
		      struct pbx_err *err)
{
	unsigned char head[12];
	size_t got;
	r->offset = r->pos;
	got = fread(head, 1, sizeof(head), r->f);
	if (got == 0 && !ferror(r->f))
		return 0; /* clean end between records */
	if (ferror(r->f))
		return pbx_err_set(err, "%s: offset %llu: cannot read: %s", r->name,
				   (unsigned long long)r->offset, strerror(errno));
	if (got < sizeof(head))
		return pbx_err_set(
			err, "%s: offset %llu: truncated record: the header has %zu of %zu bytes",
			r->name, (unsigned long long)r->offset, got, sizeof(head));
	uint64_t n = tfr_le(head, 8);
	uint32_t want = (uint32_t)tfr_le(head + 8, 4);
	if (pbx_crc32c_masked(head, 8) != want)
		return pbx_err_set(err, "%s: offset %llu: corrupt record: length CRC mismatch",
				   r->name, (unsigned long long)r->offset);
	if (n > PBX_TFRECORD_MAX_LEN)
		return pbx_err_set(
			err, "%s: offset %llu: record length %llu over the limit of %llu bytes",
			r->name, (unsigned long long)r->offset, (unsigned long long)n,
			(unsigned long long)PBX_TFRECORD_MAX_LEN);
	if (r->alloc < n + 4) {
		r->alloc = (size_t)n + 4;
		r->buf = xrealloc(r->buf, r->alloc);
	}
	if (tfr_read(r, r->buf, (size_t)n + 4, "the data and footer", err) < 0)
		return -1;
	want = (uint32_t)tfr_le(r->buf + n, 4);
	if (pbx_crc32c_masked(r->buf, (size_t)n) != want)
		return pbx_err_set(
			err, "%s: offset %llu: corrupt record: data CRC mismatch (%llu bytes)",
			r->name, (unsigned long long)r->offset, (unsigned long long)n);
	r->pos += sizeof(head) + n + 4;
	*data = r->buf;
	*len = (size_t)n;
	return 1;
}

/* ------------------------------------------------------------ Example */

static Tensorflow__Features__FeatureEntry *ex_entry(const char *key, Tensorflow__Feature *f)
{
	Tensorflow__Features__FeatureEntry *e = xmalloc(sizeof(*e));
	tensorflow__features__feature_entry__init(e);
	e->key = (char *)key;
	e->value = f;
	return e;
}

void pbx_example_encode(struct pbx_buf *out, const unsigned char *hwc, int h, int w, int c,
			int32_t label)
{
	Tensorflow__BytesList bl = TENSORFLOW__BYTES_LIST__INIT;
	ProtobufCBinaryData img = { (size_t)h * w * c, (uint8_t *)hwc };
	Tensorflow__Int64List il[4];
	int64_t v[4] = { label, h, w, c };
	Tensorflow__Feature f[5];
	static const char *const keys[5] = { "image", "label", "height", "width", "channels" };
	Tensorflow__Features__FeatureEntry *ents[5];
	Tensorflow__Features fs = TENSORFLOW__FEATURES__INIT;
	Tensorflow__Example ex = TENSORFLOW__EXAMPLE__INIT;

	bl.n_value = 1;
	bl.value = &img;
	for (int i = 0; i < 5; i++)
		tensorflow__feature__init(&f[i]);
	f[0].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
	f[0].bytes_list = &bl;
	for (int i = 0; i < 4; i++) {
		tensorflow__int64_list__init(&il[i]);
		il[i].n_value = 1;
		il[i].value = &v[i];
		f[i + 1].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
		f[i + 1].int64_list = &il[i];
	}
	for (int i = 0; i < 5; i++)
		ents[i] = ex_entry(keys[i], &f[i]);
	fs.n_feature = 5;
	fs.feature = ents;
	ex.features = &fs;

	size_t n = tensorflow__example__get_packed_size(&ex);
	unsigned char *tmp = xmalloc(n ? n : 1);
	tensorflow__example__pack(&ex, tmp);
	pbx_buf_add(out, tmp, n);
	free(tmp);
	for (int i = 0; i < 5; i++)
		free(ents[i]);
}

/* The one int64 value of feature `key` within [lo, hi]. */
static int ex_int(const Tensorflow__Features *fs, const char *key, int64_t lo, int64_t hi,
		  int64_t *out, struct pbx_err *err)
{
	const Tensorflow__Feature *f = NULL;
	for (size_t i = 0; i < fs->n_feature; i++)
		if (fs->feature[i]->key && strcmp(fs->feature[i]->key, key) == 0)
			f = fs->feature[i]->value; /* the last one wins, as in protobuf maps */
	if (!f)
		return pbx_err_set(err, "feature '%s' missing", key);
	if (f->kind_case != TENSORFLOW__FEATURE__KIND_INT64_LIST || f->int64_list->n_value != 1)
		return pbx_err_set(err, "feature '%s': expected one int64", key);
	*out = f->int64_list->value[0];
	if (*out < lo || *out > hi)
		return pbx_err_set(err, "feature '%s': %lld outside %lld..%lld", key,
				   (long long)*out, (long long)lo, (long long)hi);
	return 0;
}

static int ex_check(const Tensorflow__Example *m, struct pbx_example *ex, struct pbx_err *err)
{
	const Tensorflow__Features *fs = m->features;
	const Tensorflow__Feature *img = NULL;
	int64_t label, h, w, c;
	if (!fs)
		return pbx_err_set(err, "Example has no features");
	if (ex_int(fs, "label", 0, EX_MAX_LABEL, &label, err) < 0 ||
	    ex_int(fs, "height", 1, EX_MAX_SIDE, &h, err) < 0 ||
	    ex_int(fs, "width", 1, EX_MAX_SIDE, &w, err) < 0 ||
	    ex_int(fs, "channels", 1, EX_MAX_CHANNELS, &c, err) < 0)
		return -1;
	for (size_t i = 0; i < fs->n_feature; i++)
		if (fs->feature[i]->key && strcmp(fs->feature[i]->key, "image") == 0)
			img = fs->feature[i]->value;
	if (!img)
		return pbx_err_set(err, "feature 'image' missing");
	if (img->kind_case != TENSORFLOW__FEATURE__KIND_BYTES_LIST || img->bytes_list->n_value != 1)
		return pbx_err_set(err, "feature 'image': expected one bytes value");
	if (img->bytes_list->value[0].len != (size_t)(h * w * c))
		return pbx_err_set(err,
				   "feature 'image': %zu bytes, but height*width*channels = %lld",
				   img->bytes_list->value[0].len, (long long)(h * w * c));
	ex->h = (int)h;
	ex->w = (int)w;
	ex->c = (int)c;
	ex->label = (int32_t)label;
	ex->pixels = img->bytes_list->value[0].data;
	return 0;
}

int pbx_example_decode(const void *data, size_t len, struct pbx_example *ex, struct pbx_err *err)
{
	Tensorflow__Example *m;
	memset(ex, 0, sizeof(*ex));
	m = tensorflow__example__unpack(NULL, len, data);
	if (!m)
		return pbx_err_set(err, "not a valid tf.train.Example (%zu bytes)", len);
	if (ex_check(m, ex, err) < 0) {
		tensorflow__example__free_unpacked(m, NULL);
		memset(ex, 0, sizeof(*ex));
		return -1;
	}
	ex->msg = m;
	return 0;
}

void pbx_example_release(struct pbx_example *ex)
{
	if (ex->msg)
		tensorflow__example__free_unpacked(ex->msg, NULL);
	memset(ex, 0, sizeof(*ex));
}
