/*
 * tarcheck.h - a streaming gatekeeper for tar archives (ustar, GNU and pax
 * headers), placed between an untrusted tar stream and a `tar -x`.
 *
 * Bytes go in as they arrive; only whole, checked 512-byte blocks come out,
 * so a refused member's header never reaches the extractor.  Refused:
 * absolute names, ".." components, members written through a symlink of
 * the archive, symlinks whose target leaves the tree (checked lexically,
 * never through another symlink of the archive), hard links to anything but
 * an earlier regular file of the archive, members whose parent directory
 * did not come first as a directory member (so an existing symlink in the
 * destination is replaced, not followed), device nodes, FIFOs, sparse and
 * multi-volume members, and unknown pax keys that change the layout.
 * setuid/setgid/sticky bits are cleared.  Refusals carry PBX_EXIT_SECURITY.
 * Everything after the end-of-archive marker is dropped.
 */
#ifndef PBX_SSH_TARCHECK_H
#define PBX_SSH_TARCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

struct pbx_tarcheck;

/* A member that passed the checks, as handed to pbx_tar_events.member. */
struct pbx_tar_member {
	const char *path; /* normalised: no "." or empty components; "" = the root */
	char type;        /* '0' file, '5' directory, '1' hard link, '2' symlink */
	const char *link; /* hard link: normalised earlier file; symlink: target as stored */
	uint64_t size;    /* bytes of data that follow (files only) */
	unsigned mode;    /* permission bits (setuid/setgid/sticky already cleared) */
	int64_t mtime;    /* seconds since the epoch */
};

/* Optional consumer of the checked stream, member by member (instead of, or
 * besides, the checked blocks): `member` for each accepted member, then
 * `data` with exactly its `size` bytes of data (no padding), in pieces.
 * A -1 from either stops the stream with that error. */
struct pbx_tar_events {
	int (*member)(void *ctx, const struct pbx_tar_member *m, struct pbx_err *err);
	int (*data)(void *ctx, const void *p, size_t len, struct pbx_err *err);
	/* Told of the member the checker refuses (its name with unprintable
	 * bytes as '?', and why), before the refusal's error is returned; may
	 * be NULL. */
	void (*refused)(void *ctx, const char *name, const char *why);
	void *ctx;
};

/* Returns a new checker; free with pbx_tarcheck_free(). */
struct pbx_tarcheck *pbx_tarcheck_new(void);
void pbx_tarcheck_free(struct pbx_tarcheck *tc);
/* Sends every accepted member to `ev` (copied) from now on. */
void pbx_tarcheck_set_events(struct pbx_tarcheck *tc, const struct pbx_tar_events *ev);
/* Feeds `len` bytes; appends the bytes that may be passed on to `out`
 * (NULL: nothing is passed on, for a checker that only drives events).
 * After a -1 the checker refuses everything. */
int pbx_tarcheck_feed(struct pbx_tarcheck *tc, const void *data, size_t len, struct pbx_buf *out,
		      struct pbx_err *err);
/* Ends the stream: refuses a truncated archive (a member cut short), and
 * a symlink target that walked through a path which never became a
 * directory of the archive. */
int pbx_tarcheck_finish(struct pbx_tarcheck *tc, struct pbx_err *err);
/* Number of members accepted so far (directories included). */
size_t pbx_tarcheck_members(const struct pbx_tarcheck *tc);

#endif
