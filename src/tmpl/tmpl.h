/*
 * tmpl.h - the files of templates/ that pbx needs at run time (the node
 * bootstrap script, slurm.conf.in), compiled into the binary so pbx is one
 * self-contained program, and @NAME@ placeholder substitution.
 *
 * If $PBX_TEMPLATES names a directory, a file there wins over the embedded
 * copy (for developing templates without rebuilding).
 */
#ifndef PBX_TMPL_TMPL_H
#define PBX_TMPL_TMPL_H

#include <stddef.h>

#include "util/buf.h"
#include "util/err.h"

struct pbx_tmpl_file {
	const char *name;
	const char *data;
	size_t len;
};

/* Generated table, NULL-terminated by name (embedded.c). */
extern const struct pbx_tmpl_file pbx_tmpl_files[];

/* Appends template `name` to `out`. */
int pbx_tmpl_get(const char *name, struct pbx_buf *out, struct pbx_err *err);

/*
 * Replaces every @KEY@ in `text` by its value from `vars` (NULL-terminated
 * key, value pairs) and appends the result to `out`.  Placeholders listed
 * in `keep` (NULL-terminated, may be NULL) are copied unchanged; any other
 * unknown placeholder is an error naming it and the template.
 */
int pbx_tmpl_subst(const char *name, const char *text, const char *const *vars,
		   const char *const *keep, struct pbx_buf *out, struct pbx_err *err);

#endif
