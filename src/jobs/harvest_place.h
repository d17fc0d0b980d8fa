/*
 * harvest_place.h - the local side of `pbx harvest`'s trust boundary: which
 * links a task may leave, which tar members a harvest stream may carry,
 * and placing files under $PBX_HOME/results/PKG without ever following a
 * symlink.
 *
 * Nothing a node sends is trusted to be what it was last time: a name that
 * was a link in an earlier harvest can be a directory now, and the other
 * way round.  So every path below results/PKG is walked one component at a
 * time with openat(O_NOFOLLOW | O_DIRECTORY) from a directory descriptor; a
 * component that is a symlink, or not a directory, stops the walk and
 * nothing is placed through it.  Paths given here are relative paths of
 * plain components (no "", "." or ".."; harvest.c checks the names first).
 */
#ifndef PBX_JOBS_HARVEST_PLACE_H
#define PBX_JOBS_HARVEST_PLACE_H

#include <stddef.h>
#include <sys/stat.h>

#include "ssh/tarcheck.h"
#include "util/buf.h"
#include "util/err.h"

/* Whether a link with this target is harvested (as a link): the target is
 * relative, non-empty and has no ".." component, so the link resolves at
 * or below its own directory whatever other links exist or come later. */
int place_link_ok(const char *target);

/* Appends "task IDX 'REL'" for a harvest member path "IDX/REL" ("task IDX"
 * for the task directory itself). */
void place_describe(struct pbx_buf *out, const char *member_path);

/* ------------------------------------------------------------ walking */

/* A walker below one directory descriptor; it keeps the directory it
 * opened last (files come grouped by directory: one walk per directory). */
struct place_walk {
	int root;  /* where every path starts (not owned) */
	int fd;    /* the directory `dir` names, or -1 */
	char *dir; /* that directory, relative to root ("" = root) */
};

void place_walk_init(struct place_walk *w, int root);
void place_walk_release(struct place_walk *w);

/* Why a walk stopped: set by place_parent, place_lstat and place_move. */
struct place_stop {
	size_t at;  /* length of the prefix of the path that is in the way */
	int err;    /* errno: ELOOP (a symlink), ENOTDIR (not a directory),
			    ENOENT (missing), or what the system call said */
	int source; /* place_move: in the tree moved from, not the one moved to */
};

/* Opens the directory that holds `rel`, creating the missing ones (mode
 * 0755) when `create`.  Returns its descriptor (owned by w, valid until the
 * next call on w) and sets *leaf to rel's last component; -1 with *stop
 * filled when a component is a symlink, not a directory, or missing. */
int place_parent(struct place_walk *w, const char *rel, int create, const char **leaf,
		 struct place_stop *stop);

/* lstat(2) of `rel` below w->root without following a link on the way;
 * 0, or -1 with *stop filled (stop may be NULL). */
int place_lstat(struct place_walk *w, const char *rel, struct stat *sb, struct place_stop *stop);

/* Moves `rel` from below `from` to the same name below `to` (creating its
 * directories there), following no link in either tree.  Returns 0, or -1
 * with *stop filled (stop->at = strlen(rel) when the name itself could not
 * be replaced, e.g. a directory is in the way). */
int place_move(struct place_walk *from, struct place_walk *to, const char *rel,
	       struct place_stop *stop);

/* Moves the top-level entry `name` from below `from` to below `to` only when
 * `to` has nothing of that name (never replacing, never following); 0 or
 * -1 with errno set. */
int place_move_new(int from, int to, const char *name);

/* Appends what stopped a walk or move of `rel` below the directory `base`
 * names, for a message: "'BASE/out/x' is a symbolic link", "... is not a
 * directory", "'BASE/REL' is a directory" (renaming onto it failed)... */
void place_explain(struct pbx_buf *out, const char *base, const char *rel,
		   const struct place_stop *stop);

/* ------------------------------------------------------------ the stream */

/* The members a harvest stream was asked for (paths "IDX/REL"). */
struct place_expect;

/* Returns an empty set; free with place_expect_free(). */
struct place_expect *place_expect_new(void);
void place_expect_free(struct place_expect *x);
/* Adds a member: type 'd' (directory), 'f' (regular file) or 'l' (symlink
 * with `target`; NULL otherwise).  Strings are copied. */
void place_expect_add(struct place_expect *x, const char *path, char type, const char *target);
/* Checks one member of the stream: -1 with err (PBX_EXIT_SECURITY) naming
 * the task and path when it was not asked for, comes a second time, is of
 * another type, or is a link to another target.  A hard link may stand for
 * a regular file (tar sends a file's second name so). */
int place_expect_member(struct place_expect *x, const struct pbx_tar_member *m,
			struct pbx_err *err);

#endif
