/*
 * tfrecord_data.c - data sets as TFRecord shards (see tfrecord.h): loading
 * a rank's share of the files matching a glob pattern, decoded by a few
 * threads (one file at a time each), and packing a data set into shards.
 *
 * Pixels are stored as bytes, HWC, and loaded as CHW floats b/255, the
 * same floats the IDX and CIFAR-10 loaders produce, so a packed data set
 * trains exactly like the original.
 */
#include "runtime/tfrecord.h"

#include <errno.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/tfevents.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* ---------------------------------------------------------------- load */

/* One file's share, decoded. */
struct tfd_part {
	const char *path;
	int h, w, c; /* of the first record; 0 while none */
	int n, alloc;
	float *x; /* (n, c, h, w) */
	int32_t *y;
	int failed;
	struct pbx_err err;
};

struct tfd_job {
	struct tfd_part *parts;
	int nparts;
	int rec_stride, rec_first; /* record level: records j % stride == first */
	atomic_int next;
};

/* HWC bytes -> CHW floats b/255. */
static void tfd_hwc_to_chw(const unsigned char *src, float *dst, int h, int w, int c)
{
	for (int ch = 0; ch < c; ch++)
		for (int i = 0; i < h * w; i++)
			dst[(size_t)ch * h * w + i] = (float)src[(size_t)i * c + ch] / 255.0f;
}

/* Appends one decoded example to p (its dims must match the file's). */
static int tfd_append(struct tfd_part *p, const struct pbx_example *ex, uint64_t off)
{
	size_t img = (size_t)ex->h * ex->w * ex->c;
	if (p->n == 0 && p->h == 0) {
		p->h = ex->h;
		p->w = ex->w;
		p->c = ex->c;
	} else if (ex->h != p->h || ex->w != p->w || ex->c != p->c) {
		return pbx_err_set(
			&p->err, "%s: offset %llu: image is %dx%dx%d, earlier records %dx%dx%d",
			p->path, (unsigned long long)off, ex->h, ex->w, ex->c, p->h, p->w, p->c);
	}
	if (p->n == p->alloc) {
		p->alloc = p->alloc ? 2 * p->alloc : 1024;
		p->x = xrealloc(p->x, (size_t)p->alloc * img * sizeof(float));
		p->y = xrealloc(p->y, (size_t)p->alloc * sizeof(int32_t));
	}
	tfd_hwc_to_chw(ex->pixels, p->x + (size_t)p->n * img, ex->h, ex->w, ex->c);
	p->y[p->n++] = ex->label;
	return 0;
}

static int tfd_read_file(struct tfd_part *p, int stride, int first)
{
	FILE *f = fopen(p->path, "rb");
	struct pbx_tfrecord_reader *r;
	const unsigned char *data;
	size_t len;
	int rc, j = 0;
	if (!f)
		return pbx_err_set(&p->err, "cannot open %s: %s", p->path, strerror(errno));
	r = pbx_tfrecord_reader_new(f, p->path);
	while ((rc = pbx_tfrecord_next(r, &data, &len, &p->err)) == 1) {
		struct pbx_example ex;
		if (j++ % stride != first)
			continue;
		if (pbx_example_decode(data, len, &ex, &p->err) < 0) {
			rc = pbx_err_prefix(&p->err, "%s: offset %llu", p->path,
					    (unsigned long long)pbx_tfrecord_offset(r));
			break;
		}
		rc = tfd_append(p, &ex, pbx_tfrecord_offset(r));
		pbx_example_release(&ex);
		if (rc < 0)
			break;
	}
	pbx_tfrecord_reader_free(r);
	fclose(f);
	return rc < 0 ? -1 : 0;
}

static void *tfd_worker(void *arg)
{
	struct tfd_job *job = arg;
	int k;
	while ((k = atomic_fetch_add(&job->next, 1)) < job->nparts)
		if (tfd_read_file(&job->parts[k], job->rec_stride, job->rec_first) < 0)
			job->parts[k].failed = 1;
	return NULL;
}

/* Runs the job on nthreads threads (the caller's thread among them). */
static void tfd_run(struct tfd_job *job, int nthreads)
{
	pthread_t th[64];
	int started = 0;
	if (nthreads > job->nparts)
		nthreads = job->nparts;
	for (int i = 1; i < nthreads && i < 64; i++)
		if (pthread_create(&th[started], NULL, tfd_worker, job) == 0)
			started++;
	tfd_worker(job);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

/* Concatenates the parts in file order into out. */
static int tfd_gather(struct tfd_part *parts, int nparts, const char *pattern,
		      struct pbx_dataset *out, struct pbx_err *err)
{
	const struct tfd_part *ref = NULL;
	int64_t total = 0;
	for (int k = 0; k < nparts; k++) {
		if (parts[k].failed) {
			*err = parts[k].err;
			return -1;
		}
		if (parts[k].n == 0)
			continue;
		if (ref && (parts[k].h != ref->h || parts[k].w != ref->w || parts[k].c != ref->c))
			return pbx_err_set(err, "%s: images are %dx%dx%d, but %s has %dx%dx%d",
					   parts[k].path, parts[k].h, parts[k].w, parts[k].c,
					   ref->path, ref->h, ref->w, ref->c);
		if (!ref)
			ref = &parts[k];
		total += parts[k].n;
	}
	if (total == 0 || total > 0x7fffffff)
		return pbx_err_set(err, "%s: %lld records for this rank (want 1..2^31-1)", pattern,
				   (long long)total);
	size_t img = (size_t)ref->h * ref->w * ref->c;
	out->n = (int)total;
	out->h = ref->h;
	out->w = ref->w;
	out->c = ref->c;
	out->x = xmalloc((size_t)total * img * sizeof(float));
	out->y = xmalloc((size_t)total * sizeof(int32_t));
	int64_t at = 0;
	for (int k = 0; k < nparts; k++) {
		memcpy(out->x + at * img, parts[k].x, (size_t)parts[k].n * img * sizeof(float));
		memcpy(out->y + at, parts[k].y, (size_t)parts[k].n * sizeof(int32_t));
		at += parts[k].n;
	}
	for (int i = 0; i < out->n; i++)
		if (out->y[i] + 1 > out->nclasses)
			out->nclasses = out->y[i] + 1;
	out->name = xstrdup(pattern);
	return 0;
}

int pbx_dataset_load_tfrecord(const char *pattern, int rank, int world, int nthreads,
			      struct pbx_dataset *out, struct pbx_err *err)
{
	glob_t g;
	struct tfd_job job;
	int rc = -1, grc;
	memset(out, 0, sizeof(*out));
	if (world < 1 || rank < 0 || rank >= world)
		return pbx_err_set(err, "tfrecord: rank %d outside 0..%d", rank, world - 1);
	grc = glob(pattern, GLOB_ERR, NULL, &g);
	if (grc == GLOB_NOMATCH)
		return pbx_err_set(err, "no file matches the pattern %s", pattern);
	if (grc != 0) {
		globfree(&g);
		return pbx_err_set(err, "cannot list the files of %s: %s", pattern,
				   grc == GLOB_NOSPACE ? "out of memory" : strerror(errno));
	}
	memset(&job, 0, sizeof(job));
	job.parts = xcalloc(g.gl_pathc, sizeof(*job.parts));
	int file_level = (int)g.gl_pathc >= world;
	for (size_t k = 0; k < g.gl_pathc; k++)
		if (!file_level || (int)(k % (size_t)world) == rank)
			job.parts[job.nparts++].path = g.gl_pathv[k];
	job.rec_stride = file_level ? 1 : world;
	job.rec_first = file_level ? 0 : rank;
	atomic_init(&job.next, 0);
	tfd_run(&job, nthreads < 1 ? 1 : nthreads);
	rc = tfd_gather(job.parts, job.nparts, pattern, out, err);
	for (int k = 0; k < job.nparts; k++) {
		free(job.parts[k].x);
		free(job.parts[k].y);
	}
	free(job.parts);
	globfree(&g);
	if (rc < 0)
		pbx_dataset_free(out);
	return rc;
}

/* ---------------------------------------------------------------- pack */

/* Example i of ds as HWC bytes into hwc. */
static void tfd_to_bytes(const struct pbx_dataset *ds, int i, unsigned char *hwc)
{
	size_t hw = (size_t)ds->h * ds->w;
	const float *x = ds->x + (size_t)i * ds->c * hw;
	for (int ch = 0; ch < ds->c; ch++)
		for (size_t p = 0; p < hw; p++) {
			long v = lrintf(x[ch * hw + p] * 255.0f);
			hwc[p * ds->c + ch] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
}

static int tfd_write_shard(const struct pbx_dataset *ds, const char *path, int from, int to,
			   struct pbx_err *err)
{
	char *tmp;
	int fd = pbx_tmpfile_beside(path, &tmp, err), rc = -1;
	unsigned char *hwc = xmalloc((size_t)ds->c * ds->h * ds->w);
	struct pbx_buf rec = PBX_BUF_INIT;
	FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
	if (fd < 0)
		goto out;
	if (!f || fchmod(fd, 0644) < 0) { /* a dataset shard others may read */
		pbx_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
		if (f)
			fclose(f);
		else
			close(fd);
		unlink(tmp);
		goto out;
	}
	for (int i = from; i < to; i++) {
		tfd_to_bytes(ds, i, hwc);
		pbx_buf_reset(&rec);
		pbx_example_encode(&rec, hwc, ds->h, ds->w, ds->c, ds->y[i]);
		if (pbx_tfrecord_write(f, rec.buf, rec.len) < 0)
			break;
	}
	int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
	if (fclose(f) != 0 || bad) {
		pbx_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) < 0) {
		pbx_err_set(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	pbx_buf_release(&rec);
	free(hwc);
	free(tmp);
	return rc;
}

int pbx_tfrecord_pack(const struct pbx_dataset *ds, const char *out_dir, const char *prefix,
		      int nshards, struct pbx_err *err)
{
	if (nshards < 1 || nshards > 99999)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--shards: %d outside 1..99999", nshards);
	if (nshards > ds->n)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--shards: %d shards for %d examples",
				    nshards, ds->n);
	for (int s = 0; s < nshards; s++) {
		int from = (int)((int64_t)s * ds->n / nshards);
		int to = (int)((int64_t)(s + 1) * ds->n / nshards);
		char *path = xasprintf("%s/%s-%05d-of-%05d.tfrecord", out_dir, prefix, s, nshards);
		int rc = tfd_write_shard(ds, path, from, to, err);
		free(path);
		if (rc < 0)
			return -1;
	}
	return 0;
}
