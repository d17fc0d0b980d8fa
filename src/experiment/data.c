/*
 * data.c - the experiment's `data:` key (FORMAT.md, "Data"; docs/data.md):
 * datasets the tasks read, from a bucket (gs://, s3://) or a local
 * directory, each staged once per cluster by `pbx parrun` (src/jobs/data.c)
 * and linked into every task directory at its `to:` path by the task
 * wrapper.  Here the list is read and checked, and each source gets its
 * normalised form and id (what names it on the cluster).
 */
#include "experiment/experiment_internal.h"
#include "objstore/objstore.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DATA_MAX_ENTRIES 32
#define DATA_MAX_TO      200
#define DATA_MAX_FROM    4096

static const char *const data_keys[] = { "from", "to", NULL };

/* Names the task wrapper writes in the task directory: `to:` may not
 * start with one of them. */
static const char *const data_reserved[] = {
	"status", "stdout", "stderr", "params.json", "environment.txt", "train.yaml", NULL,
};

/* A relative path of non-empty components other than "." and "..". */
static int data_to_ok(const char *s)
{
	const char *p = s, *slash;
	size_t l;
	if (!*s || *s == '/' || strlen(s) > DATA_MAX_TO)
		return 0;
	for (;; p = slash + 1) {
		slash = strchr(p, '/');
		l = slash ? (size_t)(slash - p) : strlen(p);
		if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && !strncmp(p, "..", 2)))
			return 0;
		if (!slash)
			return 1;
	}
}

static int data_to(const struct pbx_ynode *n, char **out, struct pbx_err *err)
{
	size_t i, first;
	if (pbx_ynode_str(n, PBX_YSTR_ONE_LINE, out, err) < 0)
		return -1;
	if (!data_to_ok(*out))
		return pbx_ynode_error(n, err,
				       "'%s': want a relative path in the task directory of at "
				       "most %d bytes (no '..', '.' or empty components)",
				       *out, DATA_MAX_TO);
	first = strcspn(*out, "/");
	for (i = 0; data_reserved[i]; i++)
		if (strlen(data_reserved[i]) == first && !strncmp(*out, data_reserved[i], first))
			return pbx_ynode_error(n, err, "'%s': %s is the task wrapper's", *out,
					       data_reserved[i]);
	if (!strncmp(*out, ".status.", 8))
		return pbx_ynode_error(n, err, "'%s': .status.* is the task wrapper's", *out);
	return 0;
}

static int data_from(const struct pbx_ynode *n, struct pbx_exp_data *d, struct pbx_err *err)
{
	struct pbx_objstore_url u;
	struct pbx_err uerr = PBX_ERR_INIT;
	if (pbx_ynode_str(n, PBX_YSTR_ONE_LINE, &d->from, err) < 0)
		return -1;
	if (strlen(d->from) > DATA_MAX_FROM)
		return pbx_ynode_error(n, err, "longer than %d bytes", DATA_MAX_FROM);
	if (!strstr(d->from, "://"))
		return 0;
	if (strncmp(d->from, "gs://", 5) && strncmp(d->from, "s3://", 5))
		return pbx_ynode_error(n, err,
				       "'%s': want gs://BUCKET/PREFIX, s3://BUCKET/PREFIX or a "
				       "local directory",
				       d->from);
	if (pbx_objstore_url_parse(d->from, &u, &uerr) < 0)
		return pbx_ynode_error(n, err, "%s", uerr.msg);
	pbx_objstore_url_free(&u);
	d->is_url = 1;
	return 0;
}

static int data_entry(const struct pbx_ynode *m, struct pbx_exp_data *d, struct pbx_err *err)
{
	const struct pbx_ynode *from, *to;
	if (pbx_ynode_expect_map(m, err) < 0 || pbx_ymap_check_keys(m, data_keys, err) < 0)
		return -1;
	from = pbx_ymap_get(m, "from");
	to = pbx_ymap_get(m, "to");
	if (!from)
		return pbx_ymap_missing(m, "from", NULL, err);
	if (!to)
		return pbx_ymap_missing(m, "to", NULL, err);
	d->line = m->line;
	if (data_from(from, d, err) < 0)
		return -1;
	return data_to(to, &d->to, err);
}

/* a and b are the same path, or one is inside the other. */
static int data_nested(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	const char *s = la < lb ? a : b, *l = la < lb ? b : a;
	size_t n = la < lb ? la : lb;
	return !strncmp(s, l, n) && (l[n] == '\0' || l[n] == '/');
}

int pbx_exp_data(struct pbx_experiment *e, const struct pbx_ynode *seq, struct pbx_err *err)
{
	size_t i, j;
	if (!seq)
		return 0;
	if (pbx_ynode_expect_seq(seq, err) < 0)
		return -1;
	if (seq->nitems == 0 || seq->nitems > DATA_MAX_ENTRIES)
		return pbx_ynode_error(seq, err, "want 1 to %d entries { from: SOURCE, to: PATH }",
				       DATA_MAX_ENTRIES);
	e->data = xcalloc(seq->nitems, sizeof(*e->data));
	for (i = 0; i < seq->nitems; i++) {
		e->ndata++;
		if (data_entry(seq->items[i], &e->data[i], err) < 0)
			return -1;
		for (j = 0; j < i; j++)
			if (data_nested(e->data[j].to, e->data[i].to))
				return pbx_ynode_error(
					pbx_ymap_get(seq->items[i], "to"), err,
					"'%s' and '%s' (line %d) overlap: give each source its "
					"own path",
					e->data[i].to, e->data[j].to, e->data[j].line);
	}
	return 0;
}

void pbx_exp_data_free(struct pbx_experiment *e)
{
	size_t i;
	for (i = 0; i < e->ndata; i++) {
		free(e->data[i].from);
		free(e->data[i].to);
	}
	free(e->data);
	e->data = NULL;
	e->ndata = 0;
}

/* "local:" + the real path of a local source, which must be a directory. */
static int data_local_key(const struct pbx_experiment *e, size_t i, char **key, struct pbx_err *err)
{
	const struct pbx_exp_data *d = &e->data[i];
	char *path = d->from[0] == '/' ? xstrdup(d->from) : xasprintf("%s/%s", e->dir, d->from);
	char *real = realpath(path, NULL);
	struct stat st;
	int rc = 0;
	if (!real || stat(real, &st) < 0)
		rc = pbx_err_setc(err, PBX_EXIT_USAGE, "%s:%d: data[%zu].from: %s: %s", e->path,
				  d->line, i, path, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		rc = pbx_err_setc(err, PBX_EXIT_USAGE, "%s:%d: data[%zu].from: %s: not a directory",
				  e->path, d->line, i, path);
	else
		*key = xasprintf("local:%s", real);
	free(real);
	free(path);
	return rc;
}

int pbx_experiment_data_key(const struct pbx_experiment *e, size_t i, char **key, char id[17],
			    struct pbx_err *err)
{
	const struct pbx_exp_data *d = &e->data[i];
	char hex[65];
	*key = NULL;
	if (d->is_url) {
		struct pbx_objstore_url u;
		if (pbx_objstore_url_parse(d->from, &u, err) < 0)
			return -1;
		*key = xasprintf("%s://%s/%s", u.scheme, u.bucket, u.prefix);
		pbx_objstore_url_free(&u);
	} else if (data_local_key(e, i, key, err) < 0) {
		return -1;
	}
	pbx_sha256_hex(*key, strlen(*key), hex);
	memcpy(id, hex, 16);
	id[16] = '\0';
	return 0;
}

bool pbx_experiment_data_shadows(const struct pbx_experiment *e, const char *rel)
{
	size_t i;
	for (i = 0; i < e->ndata; i++) {
		const char *f = e->data[i].from;
		size_t n;
		if (e->data[i].is_url || f[0] == '/')
			continue;
		while (!strncmp(f, "./", 2))
			f += 2;
		n = strlen(f);
		while (n > 1 && f[n - 1] == '/')
			n--;
		if (n && strlen(rel) == n && !strncmp(f, rel, n))
			return true;
	}
	return false;
}
