/*
 * data_hashes.h - the sha256 of a local data source's files remembered
 * between stagings (docs/data.md, "A local directory"), so that a second
 * `pbx parrun` of a 50 GB directory reads no file that did not change:
 * $PBX_HOME/data/ID/.pbx-hashes, one JSON line a file, {"name", "size",
 * "mtime", "ctime" (nanoseconds), "ino", "dev", "sha256"}.  A file whose
 * size, modification and change times, inode and device are all the
 * remembered ones is not read again (as git's index and rsync's quick
 * check judge a file); any difference reads it.  A file changed within
 * the second before it was hashed is not remembered ("racily clean": a
 * later change in the same timestamp tick would not show), so it is read
 * next time.  Only the files of the last walk are kept.
 * Library code: never prints.
 */
#ifndef PBX_JOBS_DATA_HASHES_H
#define PBX_JOBS_DATA_HASHES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "util/err.h"

struct pbx_data_hashes;

/* The hashes remembered in file `path` (missing or unreadable: none; a
 * line that does not read is left out, its file read again).  Owned by
 * the caller (pbx_data_hashes_free). */
struct pbx_data_hashes *pbx_data_hashes_load(const char *path);
/* The same from text[0, len) (the fuzz target's entry); path may be NULL
 * (then save writes nothing). */
struct pbx_data_hashes *pbx_data_hashes_parse(const char *path, const char *text, size_t len);

/* The sha256 (hex) of file `full` whose stat is *st, named `rel` in the
 * source: the remembered one when the file is as it was, else read now
 * (pbx_sha256_file: -1 with err when it cannot be).  Either way it is
 * recorded for pbx_data_hashes_save.  Not thread-safe. */
int pbx_data_hashes_sha256(struct pbx_data_hashes *h, const char *rel, const char *full,
			   const struct stat *st, char hex[65], struct pbx_err *err);

/* Files read (hashed) by pbx_data_hashes_sha256 so far, and files whose
 * remembered hash was used. */
size_t pbx_data_hashes_read(const struct pbx_data_hashes *h);
size_t pbx_data_hashes_reused(const struct pbx_data_hashes *h);

/* Writes the files recorded since the load to the path it came from (a
 * temporary file renamed; its directory made, mode 0700), unless every
 * remembered file was found as it was and no other: best effort, 0 or
 * -1. */
int pbx_data_hashes_save(const struct pbx_data_hashes *h);
void pbx_data_hashes_free(struct pbx_data_hashes *h);

#endif
