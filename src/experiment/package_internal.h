/*
 * package_internal.h - what package.c, collect.c, ignore.c and tar.c share.
 */
#ifndef PBX_EXPERIMENT_PACKAGE_INTERNAL_H
#define PBX_EXPERIMENT_PACKAGE_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "experiment/package.h"
#include "experiment/tar.h"

/* collect.c: fills p->files (sorted by path, no duplicates) from e. */
int pbx_collect(const struct pbx_experiment *e, struct pbx_package *p, struct pbx_err *err);

/* ignore.c: .pbxignore rules (gitignore-like, see FORMAT.md). */
struct pbx_ignore;
/* Reads DIR/.pbxignore, a regular file of at most PBX_IGNORE_MAX_FILE
 * bytes (a missing file gives no rules); *out is freed with
 * pbx_ignore_free. */
#define PBX_IGNORE_MAX_FILE (1 << 20)
int pbx_ignore_load(const char *dir, struct pbx_ignore **out, struct pbx_err *err);
/* Parses rules from text (for tests); never fails. */
struct pbx_ignore *pbx_ignore_parse(const char *text, size_t len);
void pbx_ignore_free(struct pbx_ignore *ig);
/* True when relative path `rel` (a directory when is_dir) is ignored. */
bool pbx_ignore_match(const struct pbx_ignore *ig, const char *rel, bool is_dir);

#endif
