/*
 * slots.c - the machine's registry of local clusters' slots (slots.h): one
 * file per claimed slot, SLOTS_DIR/SPACE-SLOT, holding "UID DIR" of the
 * cluster that holds it, made with O_EXCL so two starts cannot both take
 * it.  SLOTS_DIR is PBX_LOCAL_SLOTS_DIR (tests) or /var/lib/pbx/local-slots.
 */
#include "cloud/local/slots.h"
#include "config/config.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *slots_dir(void)
{
	const char *d = getenv("PBX_LOCAL_SLOTS_DIR");
	return d && *d ? d : "/var/lib/pbx/local-slots";
}

static char *slot_path(const char *space, int slot)
{
	return xasprintf("%s/%s-%d", slots_dir(), space, slot);
}

/* The claim in `path` ("UID DIR"), or 0 when there is none or it is not
 * one; uid and dir are caller-freed. */
static int slot_read(const char *path, char **uid, char **dir)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *sp;
	*uid = *dir = NULL;
	if (pbx_read_file(path, &b, &err) < 0 || !b.buf) {
		pbx_buf_release(&b);
		return 0;
	}
	pbx_buf_rtrim(&b);
	sp = strchr(b.buf, ' ');
	if (sp && sp != b.buf && sp[1] == '/') {
		*uid = xstrndup(b.buf, (size_t)(sp - b.buf));
		*dir = xstrdup(sp + 1);
	}
	pbx_buf_release(&b);
	return *uid != NULL;
}

/* Whether the cluster `uid` still lives in `dir` (its cluster-id file). */
static int slot_live(const char *uid, const char *dir)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *idfile = xasprintf("%s/cluster-id", dir);
	int live = 0;
	if (pbx_read_file(idfile, &b, &err) == 0 && b.buf) {
		pbx_buf_rtrim(&b);
		live = !strcmp(b.buf, uid);
	}
	pbx_buf_release(&b);
	free(idfile);
	return live;
}

/* Writes the claim "UID DIR" to `path`: exclusively (0 when it exists),
 * or over a stale one (replace). */
static int slot_write(const char *path, const char *uid, const char *dir, int replace,
		      struct pbx_err *err)
{
	char *text = xasprintf("%s %s\n", uid, dir);
	int fd, rc = 1;
	if (replace) {
		rc = pbx_write_file_atomic(path, text, strlen(text), 0644, err) < 0 ? -1 : 1;
	} else if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644)) < 0) {
		rc = errno == EEXIST
			     ? 0
			     : pbx_err_set(err, "cannot claim %s: %s", path, strerror(errno));
	} else {
		if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
			rc = pbx_err_set(err, "cannot write %s: %s", path, strerror(errno));
		close(fd);
	}
	free(text);
	return rc;
}

int pbx_local_slot_claim(const char *space, int slot, const char *uid, const char *dir,
			 struct pbx_err *err)
{
	char *path, *held_uid, *held_dir;
	int rc, tries;
	if (pbx_mkdir_p(slots_dir(), 0755, NULL) < 0 || access(slots_dir(), W_OK) < 0)
		return 1; /* no registry here: one home per machine */
	path = slot_path(space, slot);
	for (tries = 0, rc = 0; tries < 3 && rc == 0; tries++) {
		rc = slot_write(path, uid, dir, 0, err);
		if (rc != 0)
			break;
		if (!slot_read(path, &held_uid, &held_dir))
			rc = slot_write(path, uid, dir, 1, err); /* not a claim: ours now */
		else if (!strcmp(held_uid, uid))
			rc = 1;
		else if (!slot_live(held_uid, held_dir))
			rc = slot_write(path, uid, dir, 1, err); /* stale: taken over */
		else
			tries = 3; /* another home's live cluster */
		free(held_uid);
		free(held_dir);
	}
	free(path);
	return rc;
}

void pbx_local_slot_release(const char *space, int slot, const char *uid)
{
	char *path = slot_path(space, slot), *held_uid, *held_dir;
	if (slot_read(path, &held_uid, &held_dir)) {
		if (!strcmp(held_uid, uid))
			unlink(path);
		free(held_uid);
		free(held_dir);
	}
	free(path);
}

char *pbx_local_slot_space(const struct pbx_config *cfg)
{
	return xasprintf("%s-%d", cfg->local.address_base ? cfg->local.address_base : "127.0.1.0",
			 cfg->local.slurm_port_base ? cfg->local.slurm_port_base : 17000);
}
