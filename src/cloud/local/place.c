/*
 * place.c - where a local cluster's directory lives (place.h): in the
 * pbx home when the task user can pass through it, else under
 * PBX_LOCAL_BODIES_DIR behind a link in the home.
 */
#include "cloud/local/place.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where root's clusters of a private home go; NULL: in the home (the
 * variable set but empty, which the tests' own homes use). */
static const char *place_bodies_dir(void)
{
	const char *d = getenv("PBX_LOCAL_BODIES_DIR");
	if (!d)
		return "/var/lib/pbx/nodes";
	return *d ? d : NULL;
}

/* Whether others may pass through every directory above the handle's
 * clusters/ directory (which pbx makes passable itself): its home, and up
 * to /.  Modes only; a missing directory counts as passable (pbx makes it
 * with PBX_CLUSTER_DIR_MODE). */
static bool place_passable(const char *home_dir)
{
	char *p = xstrdup(home_dir), *slash;
	bool ok = true;
	int up;
	for (up = 0; ok && (slash = strrchr(p, '/')) != NULL; up++) {
		struct stat sb;
		if (slash == p) /* "/" itself */
			p[1] = '\0';
		else
			*slash = '\0';
		if (up >= 1 && stat(p, &sb) == 0 && !(sb.st_mode & S_IXOTH))
			ok = false;
		if (!strcmp(p, "/"))
			break;
	}
	free(p);
	return ok;
}

/* Whether `dir` is pbx's own to open: under /var/lib/pbx (made with
 * pbx's umask, 077), or the bodies directory or below it. */
static bool place_ours(const char *p, const char *base)
{
	size_t lb = base ? strlen(base) : 0;
	return !strncmp(p, "/var/lib/pbx", 12) ||
	       (base && !strncmp(p, base, lb) && (p[lb] == '\0' || p[lb] == '/'));
}

/* Gives others passage (o+x) through `dir` and every directory above it:
 * those that lack it must be pbx's own (place_ours); false when one is
 * not. */
static bool place_open_up(const char *dir)
{
	const char *base = place_bodies_dir();
	char *p = xstrdup(dir), *slash;
	bool ok = true;
	while (ok && p[0]) {
		struct stat sb;
		if (stat(p, &sb) < 0)
			ok = false;
		else if (!(sb.st_mode & S_IXOTH))
			ok = place_ours(p, base) && chmod(p, (sb.st_mode & 07777) | S_IXOTH) == 0;
		if (!strcmp(p, "/") || !(slash = strrchr(p, '/')))
			break;
		if (slash == p)
			p[1] = '\0';
		else
			*slash = '\0';
	}
	free(p);
	return ok;
}

char *pbx_local_place_real(const char *home_dir, const char *uid)
{
	const char *base = place_bodies_dir();
	char target[PATH_MAX];
	struct stat sb;
	ssize_t n;
	if (lstat(home_dir, &sb) == 0) {
		if (!S_ISLNK(sb.st_mode))
			return xstrdup(home_dir); /* in the home, or made before */
		n = readlink(home_dir, target, sizeof(target) - 1);
		if (n <= 0 || target[0] != '/')
			return xstrdup(home_dir); /* not ours: used as it is, and fails there */
		target[n] = '\0';
		return xstrdup(target);
	}
	if (!base || geteuid() != 0 || !uid || !*uid || place_passable(home_dir))
		return xstrdup(home_dir);
	/* 12 of its 32 hex digits: slurmd's sockets in the bodies' spool
	 * must stay within a Unix socket path's 108 bytes */
	return xasprintf("%s/%.12s", base, uid);
}

int pbx_local_place_make(const char *home_dir, const char *real, struct pbx_err *err)
{
	struct stat sb;
	if (!strcmp(home_dir, real))
		return pbx_mkdir_p(home_dir, PBX_CLUSTER_DIR_MODE, err);
	if (pbx_mkdir_p(real, PBX_CLUSTER_DIR_MODE, err) < 0)
		return -1;
	if (!place_open_up(real))
		return pbx_err_set(
			err,
			"cannot open %s to the task user (a directory above it is private "
			"and not pbx's); set PBX_LOCAL_BODIES_DIR to a directory others "
			"may pass through",
			real);
	if (lstat(home_dir, &sb) == 0)
		return 0; /* the link, made by an earlier create */
	if (symlink(real, home_dir) < 0)
		return pbx_err_set(err, "cannot link %s to %s: %s", home_dir, real,
				   strerror(errno));
	return 0;
}

void pbx_local_place_unlink(const char *home_dir)
{
	struct stat sb;
	if (lstat(home_dir, &sb) == 0 && S_ISLNK(sb.st_mode))
		unlink(home_dir);
}
