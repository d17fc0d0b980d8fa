/*
 * records.c - the package's small text files, built in memory: the
 * per-task records (tasks.dat, addressed by the fixed-width tasks.idx so a
 * shell finds record j in O(1) with dd), package.json and env.sh.  The
 * formats are documented in package.h.
 */
#include "experiment/package.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* tasks.dat / tasks.idx                                               */

/* "export PBX_PARAM_NAME='value'\n" */
static void rec_param(struct pbx_buf *b, const struct pbx_param *p)
{
	const char *c;
	pbx_buf_adds(b, "export PBX_PARAM_");
	for (c = p->name; *c; c++)
		pbx_buf_addc(b, *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A') : *c);
	pbx_buf_addc(b, '=');
	pbx_shell_quote(b, p->value);
	pbx_buf_addc(b, '\n');
}

/* Appends the record of point i (global index) to b. */
static int rec_one(const struct pbx_experiment *e, size_t i, struct pbx_buf *b, struct pbx_err *err)
{
	char *cmd = pbx_experiment_task_command(e, i), *json;
	size_t k;
	if (strlen(cmd) > PBX_PACKAGE_MAX_COMMAND) {
		free(cmd);
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "%s: the command of task %zu is "
				    "longer than %d bytes",
				    e->path, i, PBX_PACKAGE_MAX_COMMAND);
	}
	json = pbx_experiment_point_json(e, i);
	pbx_buf_addf(b, "pbx_rec_index=%zu\nexport PBX_REPEAT='%zu'\n", i,
		     pbx_experiment_repeat(e, i));
	for (k = 0; k < e->points[i].nparams; k++)
		rec_param(b, &e->points[i].params[k]);
	pbx_buf_adds(b, "pbx_rec_json=");
	pbx_shell_quote(b, json);
	pbx_buf_adds(b, "\npbx_rec_cmd=");
	pbx_shell_quote(b, cmd);
	pbx_buf_adds(b, "\npbx_rec_end=1\n");
	free(json);
	free(cmd);
	return 0;
}

int pbx_package_records(const struct pbx_experiment *e, size_t first, size_t n, struct pbx_buf *dat,
			struct pbx_buf *idx, struct pbx_err *err)
{
	size_t i;
	if (first > e->npoints || n > e->npoints - first)
		return pbx_err_set(err, "tasks %zu-%zu: the experiment has %zu tasks", first,
				   first + n, e->npoints);
	for (i = first; i < first + n; i++) {
		size_t off = dat->len;
		if (rec_one(e, i, dat, err) < 0)
			return -1;
		pbx_buf_addf(idx, "%15zu %15zu\n", off, dat->len - off);
		while (dat->len % PBX_PACKAGE_REC_ALIGN)
			pbx_buf_addc(dat, '\n');
	}
	return 0;
}

/* A space-padded decimal field of tasks.idx. */
static int rec_field(const char *s, size_t width, size_t *out)
{
	size_t i = 0, v = 0;
	while (i < width && s[i] == ' ')
		i++;
	if (i == width)
		return -1;
	for (; i < width; i++) {
		if (s[i] < '0' || s[i] > '9' || v > ((size_t)-1 - 9) / 10)
			return -1;
		v = v * 10 + (size_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

int pbx_package_record(const char *dat, size_t datlen, const char *idx, size_t idxlen, size_t j,
		       const char **rec, size_t *len)
{
	const char *line;
	size_t off, n;
	if (j >= idxlen / PBX_PACKAGE_IDX_LINE)
		return -1;
	line = idx + j * PBX_PACKAGE_IDX_LINE;
	if (line[15] != ' ' || line[31] != '\n' || rec_field(line, 15, &off) < 0 ||
	    rec_field(line + 16, 15, &n) < 0)
		return -1;
	if (off % PBX_PACKAGE_REC_ALIGN || off > datlen || n > datlen - off)
		return -1;
	*rec = dat + off;
	*len = n;
	return 0;
}

/* ------------------------------------------------------------------ */
/* package.json and env.sh                                             */

static json_t *rec_strv(char **v, size_t n)
{
	json_t *a = json_array();
	size_t i;
	for (i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *rec_resources(const struct pbx_experiment *e)
{
	json_t *o = json_object();
	size_t i;
	for (i = 0; i < e->res.n; i++)
		json_object_set_new(o, e->res.keys[i], json_string(e->res.values[i]));
	return o;
}

static json_t *rec_nullable(const char *s)
{
	json_t *j = s ? json_string(s) : NULL;
	return j ? j : json_null();
}

char *pbx_package_json(const struct pbx_package *p, const struct pbx_experiment *e, size_t first,
		       size_t n)
{
	json_t *o = json_object();
	char *s, *out;
	json_object_set_new(o, "id", json_string(p->id));
	json_object_set_new(o, "short_id", json_string(p->short_id));
	json_object_set_new(o, "name", json_string(e->name));
	json_object_set_new(o, "kind", json_string(e->command ? "command" : "train"));
	json_object_set_new(o, "git_commit", rec_nullable(p->git_commit));
	json_object_set_new(o, "git_dirty", json_boolean(p->git_diff != NULL));
	json_object_set_new(o, "user", rec_nullable(p->user));
	json_object_set_new(o, "host", rec_nullable(p->host));
	json_object_set_new(o, "created", json_integer(p->created));
	json_object_set_new(o, "tasks", json_integer((json_int_t)e->npoints));
	json_object_set_new(o, "repeats", json_integer((json_int_t)e->repeats));
	json_object_set_new(o, "first_task", json_integer((json_int_t)first));
	json_object_set_new(o, "ntasks", json_integer((json_int_t)n));
	json_object_set_new(o, "files", json_integer((json_int_t)p->nfiles));
	json_object_set_new(o, "bytes", json_integer((json_int_t)p->bytes));
	json_object_set_new(o, "outputs", rec_strv(e->outputs, e->noutputs));
	json_object_set_new(o, "resources", rec_resources(e));
	json_object_set_new(o, "throttle", json_integer(e->res.throttle));
	json_object_set_new(o, "launcher", json_string(pbx_launcher_name(e->res.launcher)));
	s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	out = xasprintf("%s\n", s ? s : "{}");
	free(s);
	return out;
}

static void rec_export(struct pbx_buf *b, const char *name, const char *value)
{
	pbx_buf_addf(b, "export %s=", name);
	pbx_shell_quote(b, value);
	pbx_buf_addc(b, '\n');
}

char *pbx_package_env_sh(const struct pbx_package *p, const struct pbx_experiment *e)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	pbx_buf_adds(&b, "# env.sh - written by pbx, sourced by pbx-task.sh\n");
	rec_export(&b, "PBX_EXPERIMENT", e->name);
	rec_export(&b, "PBX_PKG_ID", p->id);
	for (i = 0; i < e->nenv; i++)
		rec_export(&b, e->env_names[i], e->env_values[i]);
	return pbx_buf_detach(&b, NULL);
}
