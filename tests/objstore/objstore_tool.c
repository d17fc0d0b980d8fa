/*
 * objstore_tool.c - a command-line driver of src/objstore for the tests
 * (built only for them): the integration test drives the stores through
 * it.
 *
 *   objstore_tool CONFIG ls URL [PREFIX]      name size version crc32c|-, one a line
 *   objstore_tool CONFIG get URL NAME [OUT]   the bytes to OUT (default stdout)
 *   objstore_tool CONFIG getl URL NAME [OUT]  as get, but NAME listed first and
 *                                             read by pbx_objstore_get_listed
 *                                             (in ranges when large); with
 *                                             OBJSTORE_TOOL_PAUSE=FILE it waits
 *                                             after the listing until FILE exists
 *   objstore_tool CONFIG getf URL NAME OUT    as getl, into file OUT by
 *                                             pbx_objstore_get_listed_fd
 *                                             (through OUT.part, removed
 *                                             on failure)
 *   objstore_tool CONFIG range URL NAME VERSION OFF LEN [OUT]
 *                                             bytes [OFF, OFF+LEN) of that version
 *   objstore_tool CONFIG put URL NAME FILE    create-only: "created" or "exists"
 *   objstore_tool CONFIG putmany URL PREFIX N N small objects PREFIXi (i < N)
 *
 * CONFIG is a pbx config.yaml ("-": none, the defaults).  NAME and PREFIX
 * are whole object names.  Exit: 0, 5 for "exists", else the pbx_err code
 * with its message on stderr; "requests: N" goes to stderr at the end.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "objstore/objstore.h"
#include "util/fs.h"

static int cmd_ls(struct pbx_objstore *s, const char *prefix, struct pbx_err *err)
{
	struct pbx_object *v = NULL;
	size_t n = 0, i;
	if (pbx_objstore_list(s, prefix, &v, &n, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (v[i].has_crc32c)
			printf("%s %llu %s %08x\n", v[i].name, (unsigned long long)v[i].size,
			       v[i].version ? v[i].version : "-", v[i].crc32c);
		else
			printf("%s %llu %s -\n", v[i].name, (unsigned long long)v[i].size,
			       v[i].version ? v[i].version : "-");
	}
	pbx_objects_free(v, n);
	return 0;
}

static int cmd_get(struct pbx_objstore *s, const char *name, const char *out, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_object m = { 0 };
	FILE *f;
	if (pbx_objstore_get(s, name, 0, &b, &m, err) < 0)
		return -1;
	f = out ? fopen(out, "wb") : stdout;
	if (!f || fwrite(b.buf, 1, b.len, f) != b.len || (out && fclose(f) != 0))
		pbx_err_set(err, "cannot write %s", out ? out : "stdout");
	fprintf(stderr, "crc32c: %s\n", m.has_crc32c ? "checked" : "none given");
	pbx_object_release(&m);
	pbx_buf_release(&b);
	return err->msg[0] ? -1 : 0;
}

/* Writes b to out (NULL: stdout). */
static int write_out(const struct pbx_buf *b, const char *out, struct pbx_err *err)
{
	FILE *f = out ? fopen(out, "wb") : stdout;
	if (!f || fwrite(b->buf, 1, b->len, f) != b->len || (out && fclose(f) != 0))
		return pbx_err_set(err, "cannot write %s", out ? out : "stdout");
	return 0;
}

/* Waits until the file OBJSTORE_TOOL_PAUSE names exists (when set). */
static void pause_point(void)
{
	const char *p = getenv("OBJSTORE_TOOL_PAUSE");
	struct timespec ts = { 0, 20000000L };
	if (!p)
		return;
	fprintf(stderr, "listed\n");
	while (access(p, F_OK) != 0)
		nanosleep(&ts, NULL);
}

static int cmd_getl(struct pbx_objstore *s, const char *name, const char *out, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_object *v = NULL, m = { 0 };
	size_t n = 0, i;
	int rc = pbx_objstore_list(s, name, &v, &n, err);
	for (i = 0; rc == 0 && i < n && strcmp(v[i].name, name); i++)
		;
	if (rc == 0 && i == n)
		rc = pbx_err_set(err, "%s: not listed", name);
	pause_point();
	if (rc == 0)
		rc = pbx_objstore_get_listed(s, &v[i], 0, &b, &m, err);
	if (rc == 0)
		rc = write_out(&b, out, err);
	if (rc == 0)
		fprintf(stderr, "crc32c: %s\nversion: %s\n",
			m.has_crc32c ? "checked" : "none given", m.version ? m.version : "-");
	pbx_object_release(&m);
	pbx_objects_free(v, n);
	pbx_buf_release(&b);
	return rc;
}

/* The listed object NAME (as cmd_getl) into file OUT by
 * pbx_objstore_get_listed_fd: written to OUT.part, renamed to OUT when
 * whole and checked, removed otherwise (what staging does). */
static int cmd_getf(struct pbx_objstore *s, const char *name, const char *out, struct pbx_err *err)
{
	struct pbx_object *v = NULL, m = { 0 };
	size_t n = 0, i;
	char *part = NULL;
	int fd = -1, rc = pbx_objstore_list(s, name, &v, &n, err);
	for (i = 0; rc == 0 && i < n && strcmp(v[i].name, name); i++)
		;
	if (rc == 0 && i == n)
		rc = pbx_err_set(err, "%s: not listed", name);
	if (rc == 0) {
		part = malloc(strlen(out) + 6);
		sprintf(part, "%s.part", out);
		fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			rc = pbx_err_set(err, "cannot write %s", part);
	}
	if (rc == 0)
		rc = pbx_objstore_get_listed_fd(s, &v[i], fd, &m, err);
	if (fd >= 0 && close(fd) != 0 && rc == 0)
		rc = pbx_err_set(err, "cannot write %s", part);
	if (rc == 0 && rename(part, out) != 0)
		rc = pbx_err_set(err, "cannot rename %s", part);
	if (rc < 0 && part)
		unlink(part);
	if (rc == 0)
		fprintf(stderr, "crc32c: %s\nversion: %s\n",
			m.has_crc32c ? "checked" : "none given", m.version ? m.version : "-");
	pbx_object_release(&m);
	pbx_objects_free(v, n);
	free(part);
	return rc;
}

static int cmd_range(struct pbx_objstore *s, char **a, const char *out, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char *dst = NULL;
	unsigned long long off = strtoull(a[2], NULL, 10), len = strtoull(a[3], NULL, 10);
	int rc = pbx_buf_extend(&b, (size_t)len, &dst);
	if (rc == 0)
		rc = pbx_objstore_read_range(s, a[0], a[1], off, len, dst, err);
	if (rc == 0)
		rc = write_out(&b, out, err);
	pbx_buf_release(&b);
	return rc;
}

static int cmd_put(struct pbx_objstore *s, const char *name, const char *file, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	int rc;
	if (pbx_read_file(file, &b, err) < 0)
		return -1;
	rc = pbx_objstore_put_new(s, name, b.buf, b.len, NULL, err);
	pbx_buf_release(&b);
	if (rc >= 0)
		printf("%s\n", rc == PBX_OBJSTORE_EXISTS ? "exists" : "created");
	return rc;
}

static int cmd_putmany(struct pbx_objstore *s, const char *prefix, long n, struct pbx_err *err)
{
	char name[512], data[64];
	long i;
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%05ld", prefix, i);
		snprintf(data, sizeof(data), "object %ld\n", i);
		if (pbx_objstore_put_new(s, name, data, strlen(data), "text/plain", err) < 0)
			return -1;
	}
	return 0;
}

static int run(struct pbx_objstore *s, int argc, char **argv, struct pbx_err *err)
{
	const char *verb = argv[2];
	if (!strcmp(verb, "ls"))
		return cmd_ls(s, argc > 4 ? argv[4] : "", err);
	if (!strcmp(verb, "get") && argc >= 5)
		return cmd_get(s, argv[4], argc > 5 ? argv[5] : NULL, err);
	if (!strcmp(verb, "getl") && argc >= 5)
		return cmd_getl(s, argv[4], argc > 5 ? argv[5] : NULL, err);
	if (!strcmp(verb, "getf") && argc == 6)
		return cmd_getf(s, argv[4], argv[5], err);
	if (!strcmp(verb, "range") && argc >= 8)
		return cmd_range(s, argv + 4, argc > 8 ? argv[8] : NULL, err);
	if (!strcmp(verb, "put") && argc == 6)
		return cmd_put(s, argv[4], argv[5], err);
	if (!strcmp(verb, "putmany") && argc == 6)
		return cmd_putmany(s, argv[4], atol(argv[5]), err);
	return pbx_err_setc(
		err, PBX_EXIT_USAGE,
		"usage: objstore_tool CONFIG ls|get|getl|getf|range|put|putmany URL ...");
}

int main(int argc, char **argv)
{
	struct pbx_config *cfg = NULL;
	struct pbx_objstore *s = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	int rc = -1;
	if (argc < 4) {
		fprintf(stderr,
			"usage: objstore_tool CONFIG ls|get|getl|getf|range|put|putmany URL ...\n");
		return 2;
	}
	if ((strcmp(argv[1], "-") == 0 || pbx_config_load(argv[1], 0, &cfg, &err) == 0) &&
	    pbx_objstore_open(argv[3], cfg, &s, &err) == 0) {
		fprintf(stderr, "identity: %s\n", pbx_objstore_identity(s));
		rc = run(s, argc, argv, &err);
		fprintf(stderr, "requests: %lu\n", pbx_objstore_requests(s));
	}
	pbx_objstore_close(s);
	pbx_config_free(cfg);
	if (rc < 0) {
		fprintf(stderr, "objstore_tool: %s\n", err.msg);
		return err.code ? err.code : 1;
	}
	return rc == PBX_OBJSTORE_EXISTS ? 5 : 0;
}
