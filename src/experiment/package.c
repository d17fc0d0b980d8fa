/*
 * package.c - building a package (collect the files, hash them into the
 * content id, record git/user/host/time) and writing it as one tar file
 * with the task records and the task wrapper (layout in package.h).
 */
#include "experiment/package_internal.h"
#include "tmpl/tmpl.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* The content id                                                      */

/* Hashes file f (under root) into both the package ctx and f->sha256. */
static int pkg_hash_file(const char *root, struct pbx_package_file *f, EVP_MD_CTX *all,
			 struct pbx_err *err)
{
	char *src = xasprintf("%s/%s", root, f->path), *chunk = xmalloc(1 << 16);
	EVP_MD_CTX *one = EVP_MD_CTX_new();
	unsigned long long done = 0;
	unsigned n = 0;
	ssize_t r = 0;
	int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), rc = 0;
	EVP_DigestInit_ex(one, EVP_sha256(), NULL);
	if (fd < 0)
		rc = pbx_err_set(err, "cannot open %s: %s", src, strerror(errno));
	while (rc == 0 && (r = read(fd, chunk, 1 << 16)) > 0) {
		EVP_DigestUpdate(one, chunk, (size_t)r);
		EVP_DigestUpdate(all, chunk, (size_t)r);
		done += (unsigned long long)r;
	}
	if (rc == 0 && r < 0)
		rc = pbx_err_set(err, "cannot read %s: %s", src, strerror(errno));
	else if (rc == 0 && done != f->size)
		rc = pbx_err_set(err, "%s changed while being packaged", src);
	EVP_DigestFinal_ex(one, f->sha256, &n);
	EVP_MD_CTX_free(one);
	if (fd >= 0)
		close(fd);
	free(chunk);
	free(src);
	return rc;
}

static int pkg_hash(const struct pbx_experiment *e, struct pbx_package *p, struct pbx_err *err)
{
	EVP_MD_CTX *all = EVP_MD_CTX_new();
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	char head[64];
	size_t i;
	int rc = 0;
	EVP_DigestInit_ex(all, EVP_sha256(), NULL);
	for (i = 0; rc == 0 && i < p->nfiles; i++) {
		struct pbx_package_file *f = &p->files[i];
		EVP_DigestUpdate(all, f->path, strlen(f->path) + 1);
		snprintf(head, sizeof(head), "%c %o %llu\n", f->type, f->mode, f->size);
		EVP_DigestUpdate(all, head, strlen(head));
		if (f->type == 'f')
			rc = pkg_hash_file(e->dir, f, all, err);
		else if (f->type == 'l')
			EVP_DigestUpdate(all, f->target, strlen(f->target));
	}
	snprintf(head, sizeof(head), "experiment %zu\n", e->text_len);
	EVP_DigestUpdate(all, head, strlen(head));
	EVP_DigestUpdate(all, e->text, e->text_len);
	EVP_DigestFinal_ex(all, md, &n);
	EVP_MD_CTX_free(all);
	pbx_hex(md, 32, p->id);
	memcpy(p->short_id, p->id, 12);
	p->short_id[12] = '\0';
	return rc;
}

/* ------------------------------------------------------------------ */
/* Provenance                                                          */

/* Output of git -C dir ARGS when it exits 0, else NULL; caller frees. */
static char *pkg_git(const char *dir, const char *a1, const char *a2, const char *a3,
		     const char *a4)
{
	const char *argv[] = { "git", "-C", dir, a1, a2, a3, a4, NULL };
	struct pbx_buf out = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_run(argv, &out, &err) != 0) {
		pbx_buf_release(&out);
		return NULL;
	}
	return pbx_buf_detach(&out, NULL);
}

static bool pkg_is_hex(const char *s)
{
	size_t n = strspn(s, "0123456789abcdef");
	return (n == 40 || n == 64) && s[n] == '\0';
}

static void pkg_provenance(const struct pbx_experiment *e, struct pbx_package *p)
{
	struct passwd *pw = getpwuid(getuid());
	char host[256];
	char *commit = pkg_git(e->dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}");
	if (commit) {
		commit[strcspn(commit, "\n")] = '\0';
		if (pkg_is_hex(commit))
			p->git_commit = xstrdup(commit);
		free(commit);
	}
	if (p->git_commit) {
		p->git_diff = pkg_git(e->dir, "diff", "--no-color", "--no-ext-diff", "HEAD");
		if (p->git_diff && !p->git_diff[0]) {
			free(p->git_diff);
			p->git_diff = NULL;
		}
	}
	p->user = pw ? xstrdup(pw->pw_name) : xasprintf("uid%ld", (long)getuid());
	if (gethostname(host, sizeof(host)) < 0)
		strcpy(host, "unknown");
	host[sizeof(host) - 1] = '\0';
	p->host = xstrdup(host);
	p->created = (long long)time(NULL);
}

/* ------------------------------------------------------------------ */
/* The environment (environment.c, templates/pbx-env.sh)               */

/* Whether `path`, named by environment.KEY on `line`, is shipped: a
 * directory when `dir`, else a file (or a link to one inside).  0, or -1
 * with err naming the file, line and key. */
static int pkg_env_shipped(const struct pbx_experiment *e, const struct pbx_package *p,
			   const char *key, int line, const char *path, bool dir,
			   struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < p->nfiles; i++)
		if (!strcmp(p->files[i].path, path))
			break;
	if (i < p->nfiles && (p->files[i].type == 'd') == dir)
		return 0;
	return pbx_err_setc(
		err, PBX_EXIT_USAGE, "%s:%d: environment.%s: %s is not a %s of the package%s",
		e->path, line, key, path, dir ? "directory" : "file",
		i < p->nfiles ? "" : " (it does not exist, or files: or .pbxignore leave it out)");
}

/* What `environment` names is shipped: the requirements file and the
 * image archive files, the wheels a directory. */
static int pkg_env_check(const struct pbx_experiment *e, const struct pbx_package *p,
			 struct pbx_err *err)
{
	if (e->env.python_file &&
	    pkg_env_shipped(e, p, "python", e->env.python_line, e->env.python_file, false, err) < 0)
		return -1;
	if (e->env.container && pkg_env_shipped(e, p, "container", e->env.container_line,
						e->env.container, false, err) < 0)
		return -1;
	if (e->env.wheels &&
	    pkg_env_shipped(e, p, "wheels", e->env.wheels_line, e->env.wheels, true, err) < 0)
		return -1;
	return 0;
}

/* env/NAME: a link to `path` in the package's code/ (none when NULL). */
static int pkg_tar_env_link(struct pbx_tar *t, const char *name, const char *path)
{
	char *entry, *target;
	int rc;
	if (!path)
		return 0;
	entry = xasprintf("env/%s", name);
	target = xasprintf("../code/%s", path);
	rc = pbx_tar_link(t, entry, target);
	free(entry);
	free(target);
	return rc;
}

/* env/: apt.txt (apt:, one package a line), requirements.txt (the inline
 * list, or a link to the shipped file), wheels (a link to the shipped
 * directory), installer (uv or pip, when the experiment chose one), image (a link to the shipped image archive) or image-ref
 * (the registry reference, one line), and pbx-env.sh (when there is
 * something to build). */
static int pkg_tar_env(struct pbx_tar *t, const struct pbx_experiment *e)
{
	struct pbx_buf script = PBX_BUF_INIT;
	int rc;
	if (!e->env.line)
		return 0;
	rc = pbx_tar_dir(t, "env", 0755);
	if (rc == 0 && e->env.napt) {
		struct pbx_buf apt = PBX_BUF_INIT;
		for (size_t i = 0; i < e->env.napt; i++)
			pbx_buf_addf(&apt, "%s\n", e->env.apt[i]);
		rc = pbx_tar_mem(t, "env/apt.txt", 0644, apt.buf, apt.len);
		pbx_buf_release(&apt);
	}
	if (!e->env.python_file && !e->env.python_text && !e->env.container &&
	    !e->env.container_ref)
		return rc; /* apt: alone: nothing to build */
	if (rc == 0 && e->env.python_text)
		rc = pbx_tar_mem(t, "env/requirements.txt", 0644, e->env.python_text,
				 strlen(e->env.python_text));
	if (rc == 0)
		rc = pkg_tar_env_link(t, "requirements.txt", e->env.python_file);
	if (rc == 0)
		rc = pkg_tar_env_link(t, "wheels", e->env.wheels);
	if (rc == 0 && e->env.installer && strcmp(e->env.installer, "auto") != 0) {
		char *line = xasprintf("%s\n", e->env.installer);
		rc = pbx_tar_mem(t, "env/installer", 0644, line, strlen(line));
		free(line);
	}
	if (rc == 0)
		rc = pkg_tar_env_link(t, "image", e->env.container);
	if (rc == 0 && e->env.container_ref) {
		char *line = xasprintf("%s\n", e->env.container_ref);
		rc = pbx_tar_mem(t, "env/image-ref", 0644, line, strlen(line));
		free(line);
	}
	if (rc == 0)
		rc = pbx_tmpl_get("pbx-env.sh", &script, t->err);
	if (rc == 0)
		rc = pbx_tar_mem(t, "pbx-env.sh", 0755, script.buf, script.len);
	pbx_buf_release(&script);
	return rc;
}

int pbx_package_build(const struct pbx_experiment *e, struct pbx_package **out, struct pbx_err *err)
{
	struct pbx_package *p = xcalloc(1, sizeof(*p));
	*out = NULL;
	if (pbx_collect(e, p, err) < 0 || pkg_env_check(e, p, err) < 0 || pkg_hash(e, p, err) < 0) {
		pbx_package_free(p);
		return -1;
	}
	pkg_provenance(e, p);
	*out = p;
	return 0;
}

void pbx_package_free(struct pbx_package *p)
{
	size_t i;
	if (!p)
		return;
	for (i = 0; i < p->nfiles; i++) {
		free(p->files[i].path);
		free(p->files[i].target);
	}
	free(p->files);
	free(p->git_commit);
	free(p->git_diff);
	free(p->user);
	free(p->host);
	free(p);
}

/* ------------------------------------------------------------------ */
/* The tar file                                                        */

static int pkg_tar_code(struct pbx_tar *t, const struct pbx_package *p,
			const struct pbx_experiment *e)
{
	size_t i;
	int rc = pbx_tar_dir(t, "code", 0755);
	for (i = 0; rc == 0 && i < p->nfiles; i++) {
		const struct pbx_package_file *f = &p->files[i];
		char *path = xasprintf("code/%s", f->path);
		if (f->type == 'd') {
			rc = pbx_tar_dir(t, path, f->mode);
		} else if (f->type == 'l') {
			rc = pbx_tar_link(t, path, f->target);
		} else {
			char *src = xasprintf("%s/%s", e->dir, f->path);
			rc = pbx_tar_file(t, path, f->mode, src, f->size, f->sha256);
			free(src);
		}
		free(path);
	}
	return rc;
}

static int pkg_tar_strfile(struct pbx_tar *t, const char *path, unsigned mode, char *s)
{
	int rc = pbx_tar_mem(t, path, mode, s, strlen(s));
	free(s);
	return rc;
}

static int pkg_tar_tasks(struct pbx_tar *t, const struct pbx_experiment *e, size_t first, size_t n)
{
	struct pbx_buf dat = PBX_BUF_INIT, idx = PBX_BUF_INIT;
	int rc = pbx_package_records(e, first, n, &dat, &idx, t->err);
	if (rc == 0)
		rc = pkg_tar_strfile(t, "tasks.range", 0644, xasprintf("%zu %zu\n", first, n));
	if (rc == 0)
		rc = pbx_tar_mem(t, "tasks.idx", 0644, idx.buf, idx.len);
	if (rc == 0)
		rc = pbx_tar_mem(t, "tasks.dat", 0644, dat.buf, dat.len);
	pbx_buf_release(&dat);
	pbx_buf_release(&idx);
	return rc;
}

/* notify: the webhook's URL (notify.url) and pbx-notify.sh, which the
 * submission runs after its arrays (src/jobs/arrays.c). */
static int pkg_tar_notify(struct pbx_tar *t, const struct pbx_experiment *e)
{
	struct pbx_buf script = PBX_BUF_INIT;
	int rc;
	if (!e->notify)
		return 0;
	rc = pkg_tar_strfile(t, "notify.url", 0644, xasprintf("%s\n", e->notify));
	if (rc == 0)
		rc = pbx_tmpl_get("pbx-notify.sh", &script, t->err);
	if (rc == 0)
		rc = pbx_tar_mem(t, "pbx-notify.sh", 0755, script.buf, script.len);
	pbx_buf_release(&script);
	return rc;
}

/* data: one line "ID TO" per source (data.links), which the task wrapper
 * links into each task directory; the data itself is staged apart
 * (src/jobs/data.c). */
static int pkg_tar_data(struct pbx_tar *t, const struct pbx_experiment *e)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	int rc = 0;
	for (i = 0; rc == 0 && i < e->ndata; i++) {
		char *key, id[17];
		rc = pbx_experiment_data_key(e, i, &key, id, t->err);
		if (rc == 0)
			pbx_buf_addf(&b, "%s %s\n", id, e->data[i].to);
		free(key);
	}
	if (rc == 0 && e->ndata)
		rc = pbx_tar_mem(t, "data.links", 0644, b.buf, b.len);
	pbx_buf_release(&b);
	return rc;
}

static int pkg_tar_all(struct pbx_tar *t, const struct pbx_package *p,
		       const struct pbx_experiment *e, size_t first, size_t n)
{
	struct pbx_buf wrapper = PBX_BUF_INIT;
	int rc = pbx_tmpl_get("pbx-task.sh", &wrapper, t->err);
	if (rc == 0)
		rc = pkg_tar_strfile(t, "package.json", 0644, pbx_package_json(p, e, first, n));
	if (rc == 0)
		rc = pbx_tar_mem(t, "experiment.yaml", 0644, e->text, e->text_len);
	if (rc == 0)
		rc = pbx_tar_mem(t, "pbx-task.sh", 0755, wrapper.buf, wrapper.len);
	if (rc == 0)
		rc = pkg_tar_strfile(t, "env.sh", 0644, pbx_package_env_sh(p, e));
	if (rc == 0)
		rc = pkg_tar_env(t, e);
	if (rc == 0)
		rc = pkg_tar_notify(t, e);
	if (rc == 0)
		rc = pkg_tar_data(t, e);
	if (rc == 0 && e->train_json)
		rc = pbx_tar_mem(t, "train.yaml", 0644, e->train_json, strlen(e->train_json));
	if (rc == 0 && p->git_diff)
		rc = pbx_tar_mem(t, "git.diff", 0644, p->git_diff, strlen(p->git_diff));
	if (rc == 0)
		rc = pkg_tar_tasks(t, e, first, n);
	if (rc == 0)
		rc = pkg_tar_code(t, p, e);
	if (rc == 0)
		rc = pbx_tar_end(t);
	pbx_buf_release(&wrapper);
	return rc;
}

/* fflush + fsync + fclose of the temporary file, then rename and fsync of
 * the directory. */
static int pkg_tar_commit(struct pbx_tar *t, const char *tmp, const char *tar_path)
{
	char *dcopy = xstrdup(tar_path);
	int fd, rc = 0;
	if (fflush(t->f) != 0 || fsync(fileno(t->f)) != 0)
		rc = pbx_err_set(t->err, "cannot write %s: %s", tar_path, strerror(errno));
	if (fclose(t->f) != 0 && rc == 0)
		rc = pbx_err_set(t->err, "cannot write %s: %s", tar_path, strerror(errno));
	t->f = NULL;
	if (rc == 0 && rename(tmp, tar_path) != 0)
		rc = pbx_err_set(t->err, "cannot rename %s to %s: %s", tmp, tar_path,
				 strerror(errno));
	if (rc == 0 && (fd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	free(dcopy);
	return rc;
}

int pbx_package_write_tar(const struct pbx_package *p, const struct pbx_experiment *e,
			  size_t first_task, size_t ntasks, const char *tar_path,
			  struct pbx_err *err)
{
	struct pbx_tar t = { NULL, p->created, tar_path, err };
	char *tmp = xasprintf("%s.tmp.XXXXXX", tar_path);
	int fd = mkstemp(tmp), rc;
	if (fd < 0 || !(t.f = fdopen(fd, "wb"))) {
		rc = pbx_err_set(err, "cannot create %s: %s", tmp, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		free(tmp);
		return rc;
	}
	setvbuf(t.f, NULL, _IOFBF, 1 << 20);
	rc = pkg_tar_all(&t, p, e, first_task, ntasks);
	if (rc == 0)
		rc = pkg_tar_commit(&t, tmp, tar_path);
	if (t.f)
		fclose(t.f);
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	return rc;
}
