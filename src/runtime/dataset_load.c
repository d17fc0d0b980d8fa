/*
 * dataset_load.c - reading data sets from disk: IDX (MNIST, Fashion-MNIST),
 * CIFAR-10 binary batches, and the by-name front end (see dataset.h).
 *
 * All files go through zlib's gzopen/gzread, which reads gzip'd and plain
 * files alike.  Data is read in chunks into a buffer that grows as bytes
 * arrive, so a header that lies about its size costs an error, not a huge
 * allocation.
 */
#include "runtime/dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "util/xalloc.h"

#define IDX_MAGIC_IMAGES 0x00000803u /* ubyte, 3 dims */
#define IDX_MAGIC_LABELS 0x00000801u /* ubyte, 1 dim */
#define IDX_MAX_SIDE     4096
#define CIFAR_SIDE       32
#define CIFAR_PIXELS     (3 * CIFAR_SIDE * CIFAR_SIDE) /* 3072 */
#define CIFAR_RECORD     (1 + CIFAR_PIXELS)            /* 3073 */
#define READ_CHUNK       ((size_t)1 << 20)

/* ---------------------------------------------------------------------- */
/* zlib reading */

static gzFile gz_open(const char *path, struct pbx_err *err)
{
	gzFile g;
	errno = 0;
	g = gzopen(path, "rb");
	if (!g)
		pbx_err_set(err, "cannot open %s: %s", path,
			    errno ? strerror(errno) : "out of memory");
	return g;
}

/* Reads up to `want` bytes into a fresh buffer (*out, caller frees), stopping
 * early at end of file; *got is the number read.  -1 on a read/gzip error. */
static int gz_read_upto(gzFile g, const char *path, size_t want, unsigned char **out, size_t *got,
			struct pbx_err *err)
{
	size_t alloc = want < READ_CHUNK ? want : READ_CHUNK;
	unsigned char *buf = xmalloc(alloc ? alloc : 1);
	size_t n = 0;
	while (n < want) {
		unsigned ask = (unsigned)(want - n < READ_CHUNK ? want - n : READ_CHUNK);
		int r;
		if (n + ask > alloc) {
			alloc = alloc * 2 < want ? alloc * 2 : want;
			if (alloc < n + ask)
				alloc = n + ask;
			buf = xrealloc(buf, alloc);
		}
		r = gzread(g, buf + n, ask);
		if (r < 0) {
			int zerr;
			const char *msg = gzerror(g, &zerr);
			free(buf);
			return pbx_err_set(err, "cannot read %s: %s", path,
					   zerr == Z_ERRNO ? strerror(errno) : msg);
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*got = n;
	return 0;
}

/* Reads exactly len bytes into buf; `what` names the field for errors. */
static int gz_read_exact(gzFile g, const char *path, const char *what, size_t len,
			 unsigned char **buf, struct pbx_err *err)
{
	size_t got;
	if (gz_read_upto(g, path, len, buf, &got, err) < 0)
		return -1;
	if (got < len) {
		free(*buf);
		*buf = NULL;
		return pbx_err_set(err, "%s: truncated %s: %zu of %zu bytes", path, what, got, len);
	}
	return 0;
}

/* -1 (with err) if the file has bytes left after what was read. */
static int gz_expect_eof(gzFile g, const char *path, const char *after, struct pbx_err *err)
{
	unsigned char extra;
	int r = gzread(g, &extra, 1);
	if (r < 0)
		return pbx_err_set(err, "cannot read %s: %s", path, gzerror(g, &r));
	if (r > 0)
		return pbx_err_set(err, "%s: unexpected data after %s", path, after);
	return 0;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void bytes_to_unit(const unsigned char *src, float *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = (float)src[i] / 255.0f;
}

/* ---------------------------------------------------------------------- */
/* IDX */

/* Reads an IDX header: magic, then ndims big-endian u32 dims.  The magic is
 * checked first so that a wrong kind of file says so even if it is short. */
static int idx_header(gzFile g, const char *path, uint32_t magic, uint32_t *dims, int ndims,
		      struct pbx_err *err)
{
	unsigned char *h;
	size_t len = 4 + 4 * (size_t)ndims, got;
	uint32_t m;
	if (gz_read_upto(g, path, len, &h, &got, err) < 0)
		return -1;
	m = got >= 4 ? be32(h) : 0;
	for (int i = 0; i < ndims && got == len; i++)
		dims[i] = be32(h + 4 + 4 * i);
	free(h);
	if (got >= 4 && m != magic)
		return pbx_err_set(err, "%s: bad magic 0x%08x (want 0x%08x, IDX ubyte %s)", path, m,
				   magic, magic == IDX_MAGIC_IMAGES ? "images" : "labels");
	if (got < len)
		return pbx_err_set(err, "%s: truncated header: %zu of %zu bytes", path, got, len);
	if (dims[0] < 1 || dims[0] > INT_MAX)
		return pbx_err_set(err, "%s: bad count %u", path, dims[0]);
	for (int i = 1; i < ndims; i++)
		if (dims[i] < 1 || dims[i] > IDX_MAX_SIDE)
			return pbx_err_set(err, "%s: bad %s %u (want 1..%d)", path,
					   i == 1 ? "rows" : "cols", dims[i], IDX_MAX_SIDE);
	return 0;
}

/* Images file -> out->{n,h,w,x}. */
static int idx_images(const char *path, struct pbx_dataset *out, struct pbx_err *err)
{
	uint32_t dims[3];
	unsigned char *pix = NULL;
	size_t total;
	int rc = -1;
	gzFile g = gz_open(path, err);
	if (!g)
		return -1;
	if (idx_header(g, path, IDX_MAGIC_IMAGES, dims, 3, err) < 0)
		goto out;
	total = (size_t)dims[0] * dims[1] * dims[2];
	if (gz_read_exact(g, path, "pixel data", total, &pix, err) < 0 ||
	    gz_expect_eof(g, path, "the pixel data", err) < 0)
		goto out;
	out->n = (int)dims[0];
	out->c = 1;
	out->h = (int)dims[1];
	out->w = (int)dims[2];
	out->x = xmalloc(total * sizeof(float));
	bytes_to_unit(pix, out->x, total);
	rc = 0;
out:
	free(pix);
	gzclose(g);
	return rc;
}

/* Labels file -> *labels (caller frees), *n. */
static int idx_labels(const char *path, int32_t **labels, int *n, struct pbx_err *err)
{
	uint32_t dims[1] = { 0 };
	unsigned char *lab = NULL;
	int rc = -1;
	gzFile g = gz_open(path, err);
	if (!g)
		return -1;
	if (idx_header(g, path, IDX_MAGIC_LABELS, dims, 1, err) < 0 ||
	    gz_read_exact(g, path, "label data", dims[0], &lab, err) < 0 ||
	    gz_expect_eof(g, path, "the label data", err) < 0)
		goto out;
	*n = (int)dims[0];
	*labels = xmalloc((size_t)dims[0] * sizeof(int32_t));
	for (uint32_t i = 0; i < dims[0]; i++)
		(*labels)[i] = lab[i]; /* a ubyte: always < 256 */
	rc = 0;
out:
	free(lab);
	gzclose(g);
	return rc;
}

static int max_label(const int32_t *y, int n)
{
	int m = 0;
	for (int i = 0; i < n; i++)
		if (y[i] > m)
			m = y[i];
	return m;
}

int pbx_dataset_load_idx(const char *images_path, const char *labels_path, struct pbx_dataset *out,
			 struct pbx_err *err)
{
	int nlabels = 0;
	memset(out, 0, sizeof(*out));
	if (idx_labels(labels_path, &out->y, &nlabels, err) < 0 ||
	    idx_images(images_path, out, err) < 0)
		goto fail;
	if (nlabels != out->n) {
		pbx_err_set(err, "count mismatch: %s has %d images but %s has %d labels",
			    images_path, out->n, labels_path, nlabels);
		goto fail;
	}
	out->nclasses = max_label(out->y, out->n) + 1;
	out->name = xstrdup(images_path);
	return 0;
fail:
	pbx_dataset_free(out);
	return -1;
}

/* ---------------------------------------------------------------------- */
/* CIFAR-10 */

/* Appends one batch file's whole records to *raw (grown; *nbytes long). */
static int cifar_file(const char *path, unsigned char **raw, size_t *nbytes, struct pbx_err *err)
{
	unsigned char *data;
	size_t got, cap = (size_t)INT_MAX * CIFAR_RECORD;
	gzFile g = gz_open(path, err);
	int rc;
	if (!g)
		return -1;
	rc = gz_read_upto(g, path, cap, &data, &got, err);
	gzclose(g);
	if (rc < 0)
		return -1;
	if (got == 0 || got % CIFAR_RECORD != 0) {
		free(data);
		return pbx_err_set(err,
				   "%s: truncated record: size %zu is not a positive "
				   "multiple of %d",
				   path, got, CIFAR_RECORD);
	}
	*raw = xrealloc(*raw, *nbytes + got);
	memcpy(*raw + *nbytes, data, got);
	*nbytes += got;
	free(data);
	return 0;
}

/* Splits nrec checked records into out->x / out->y. */
static void cifar_unpack(const unsigned char *raw, size_t nrec, struct pbx_dataset *out)
{
	out->n = (int)nrec;
	out->c = 3;
	out->h = out->w = CIFAR_SIDE;
	out->nclasses = 10;
	out->x = xmalloc(nrec * CIFAR_PIXELS * sizeof(float));
	out->y = xmalloc(nrec * sizeof(int32_t));
	for (size_t i = 0; i < nrec; i++) {
		const unsigned char *rec = raw + i * CIFAR_RECORD;
		out->y[i] = rec[0];
		bytes_to_unit(rec + 1, out->x + i * CIFAR_PIXELS, CIFAR_PIXELS);
	}
}

/* -1 (naming file and record) if a label in raw[from..to) is not 0..9. */
static int cifar_check_labels(const unsigned char *raw, size_t from, size_t to, const char *path,
			      struct pbx_err *err)
{
	for (size_t r = from; r < to; r += CIFAR_RECORD)
		if (raw[r] > 9)
			return pbx_err_set(err, "%s: record %zu: label %d out of range 0..9", path,
					   (r - from) / CIFAR_RECORD, raw[r]);
	return 0;
}

int pbx_dataset_load_cifar10(const char *const *batch_files, int nfiles, struct pbx_dataset *out,
			     struct pbx_err *err)
{
	unsigned char *raw = NULL;
	size_t nbytes = 0;
	int rc = -1;
	memset(out, 0, sizeof(*out));
	if (nfiles < 1)
		return pbx_err_set(err, "cifar10: no batch files given");
	for (int i = 0; i < nfiles; i++) {
		size_t before = nbytes;
		if (cifar_file(batch_files[i], &raw, &nbytes, err) < 0 ||
		    cifar_check_labels(raw, before, nbytes, batch_files[i], err) < 0)
			goto out;
	}
	if (nbytes / CIFAR_RECORD > INT_MAX) {
		pbx_err_set(err, "cifar10: too many records (%zu)", nbytes / CIFAR_RECORD);
		goto out;
	}
	cifar_unpack(raw, nbytes / CIFAR_RECORD, out);
	out->name = xstrdup("cifar10");
	rc = 0;
out:
	free(raw);
	if (rc < 0)
		pbx_dataset_free(out);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* by name */

/* DIR/base.gz if it exists, else DIR/base if it exists; caller frees. */
static char *find_file(const char *dir, const char *base, struct pbx_err *err)
{
	char *gz = xasprintf("%s/%s.gz", dir, base);
	char *plain;
	if (access(gz, R_OK) == 0)
		return gz;
	free(gz);
	plain = xasprintf("%s/%s", dir, base);
	if (access(plain, R_OK) == 0)
		return plain;
	pbx_err_set(err, "cannot find %s[.gz]: %s", plain, strerror(errno));
	free(plain);
	return NULL;
}

static int load_idx_named(const char *name, const char *dir, int train, struct pbx_dataset *out,
			  struct pbx_err *err)
{
	const char *split = train ? "train" : "t10k";
	char *ibase = xasprintf("%s-images-idx3-ubyte", split);
	char *lbase = xasprintf("%s-labels-idx1-ubyte", split);
	char *ipath = find_file(dir, ibase, err);
	char *lpath = ipath ? find_file(dir, lbase, err) : NULL;
	int rc = -1;
	if (lpath && (rc = pbx_dataset_load_idx(ipath, lpath, out, err)) == 0) {
		free(out->name);
		out->name = xstrdup(name);
	}
	free(ibase);
	free(lbase);
	free(ipath);
	free(lpath);
	return rc;
}

/* The directory holding test_batch.bin: DIR or DIR/cifar-10-batches-bin. */
static char *cifar_dir(const char *dir)
{
	char *sub = xasprintf("%s/cifar-10-batches-bin", dir);
	char *probe = xasprintf("%s/test_batch.bin", sub);
	int found = access(probe, R_OK) == 0;
	free(probe);
	if (found)
		return sub;
	free(sub);
	return xstrdup(dir);
}

static int load_cifar_named(const char *dir, int train, struct pbx_dataset *out,
			    struct pbx_err *err)
{
	char *d = cifar_dir(dir);
	char *files[5];
	int nfiles = train ? 5 : 1, rc;
	for (int i = 0; i < nfiles; i++)
		files[i] = train ? xasprintf("%s/data_batch_%d.bin", d, i + 1)
				 : xasprintf("%s/test_batch.bin", d);
	rc = pbx_dataset_load_cifar10((const char *const *)files, nfiles, out, err);
	for (int i = 0; i < nfiles; i++)
		free(files[i]);
	free(d);
	return rc;
}

int pbx_dataset_load_named(const char *name, const char *dir, int train, struct pbx_dataset *out,
			   struct pbx_err *err)
{
	int have_dir = dir && dir[0];
	memset(out, 0, sizeof(*out));
	if (strcmp(name, "fashion-mnist") == 0)
		return load_idx_named(name, have_dir ? dir : PBX_DATASET_DIR_FASHION, train, out,
				      err);
	if (strcmp(name, "mnist") == 0)
		return load_idx_named(name, have_dir ? dir : PBX_DATASET_DIR_MNIST, train, out,
				      err);
	if (strcmp(name, "cifar10") == 0)
		return load_cifar_named(have_dir ? dir : PBX_DATASET_DIR_CIFAR10, train, out, err);
	return pbx_err_setc(err, PBX_EXIT_USAGE,
			    "unknown dataset '%s' (known: fashion-mnist, mnist, cifar10)", name);
}
