/*
 * tmpl.c - embedded templates and @KEY@ substitution (see tmpl.h).
 */
#include "tmpl/tmpl.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pbx_tmpl_get(const char *name, struct pbx_buf *out, struct pbx_err *err)
{
	const char *dir = getenv("PBX_TEMPLATES");
	size_t i;
	if (dir && *dir) {
		char *path = xasprintf("%s/%s", dir, name);
		int rc = access(path, R_OK) == 0 ? pbx_read_file(path, out, err) : 1;
		free(path);
		if (rc <= 0)
			return rc;
	}
	for (i = 0; pbx_tmpl_files[i].name; i++) {
		if (!strcmp(pbx_tmpl_files[i].name, name)) {
			pbx_buf_add(out, pbx_tmpl_files[i].data, pbx_tmpl_files[i].len);
			return 0;
		}
	}
	return pbx_err_set(err, "no template named %s", name);
}

static const char *tmpl_lookup(const char *const *list, const char *key, size_t klen, size_t step)
{
	size_t i;
	for (i = 0; list && list[i]; i += step)
		if (strlen(list[i]) == klen && !memcmp(list[i], key, klen))
			return step == 2 ? list[i + 1] : list[i];
	return NULL;
}

static int tmpl_is_key(const char *p, size_t len)
{
	size_t i;
	if (!len)
		return 0;
	for (i = 0; i < len; i++)
		if (!((p[i] >= 'A' && p[i] <= 'Z') || p[i] == '_' || (p[i] >= '0' && p[i] <= '9')))
			return 0;
	return 1;
}

int pbx_tmpl_subst(const char *name, const char *text, const char *const *vars,
		   const char *const *keep, struct pbx_buf *out, struct pbx_err *err)
{
	const char *p = text, *at, *end;
	while ((at = strchr(p, '@')) != NULL) {
		const char *val;
		size_t klen;
		pbx_buf_add(out, p, (size_t)(at - p));
		end = strchr(at + 1, '@');
		klen = end ? (size_t)(end - at - 1) : 0;
		if (!end || !tmpl_is_key(at + 1, klen)) {
			pbx_buf_addc(out, '@');
			p = at + 1;
			continue;
		}
		val = tmpl_lookup(vars, at + 1, klen, 2);
		if (val)
			pbx_buf_adds(out, val);
		else if (tmpl_lookup(keep, at + 1, klen, 1))
			pbx_buf_add(out, at, klen + 2);
		else
			return pbx_err_set(err, "template %s: unknown placeholder @%.*s@", name,
					   (int)klen, at + 1);
		p = end + 1;
	}
	pbx_buf_adds(out, p);
	return 0;
}
