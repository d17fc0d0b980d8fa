/*
 * untar.h - writes the members of a checked tar stream into a directory,
 * in this process, as they arrive (no archive file, no `tar -x` process:
 * every byte is written once).
 *
 * It is the consumer of pbx_tarcheck's member events (tarcheck.h): the
 * checker has already refused absolute names, "..", members under a
 * symlink, links out of the tree and parents that did not come first, so
 * every path is relative to the destination and every parent is a
 * directory this stream created (or found as a real directory).  Files are
 * opened with O_NOFOLLOW; an existing symlink or file where a directory,
 * file or link is to go is replaced, never followed.  Modes are the
 * member's permission bits under the umask (like `tar
 * --no-same-permissions`), owners are this process's, mtimes are kept.
 *
 * A member's name only ever holds the whole member: files are written
 * under PBX_UNTAR_PARTIAL at the destination's top and renamed when
 * complete.  A stream cut short leaves no partial file:
 * pbx_untar_finish(.., 0) removes the member being written; after a kill,
 * only PBX_UNTAR_PARTIAL can hold a partial file.
 */
#ifndef PBX_SSH_UNTAR_H
#define PBX_SSH_UNTAR_H

#include "ssh/tarcheck.h"
#include "util/err.h"

/* The reserved name partial files are written under (never a member's). */
#define PBX_UNTAR_PARTIAL ".pbx-untar-partial"

struct pbx_untar;

/* Opens `dir` (which must exist) as the destination; returns NULL with err
 * set when it cannot.  Free with pbx_untar_finish(). */
struct pbx_untar *pbx_untar_new(const char *dir, struct pbx_err *err);
/* The events to hand to pbx_tarcheck_set_events(). */
struct pbx_tar_events pbx_untar_events(struct pbx_untar *u);
/* Ends the extraction and frees u.  complete = 0 (the stream failed or
 * was cut): the member being written, if any, is removed.  Sets the
 * directories' mtimes.  Returns 0, or -1 with err set when a last write
 * failed. */
int pbx_untar_finish(struct pbx_untar *u, int complete, struct pbx_err *err);

#endif
