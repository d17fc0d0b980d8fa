/*
 * environment.c - the experiment's `environment:` key (FORMAT.md,
 * "Environment"; docs/environments.md): the Python packages its tasks
 * import, as a requirements file shipped with the code or an inline list,
 * and optionally a directory of wheels to install from with no index; or
 * the container image its tasks run in, an archive of a root file system
 * shipped with the code or a registry reference (docker://REF, pulled once
 * per cluster on its head); and the Debian packages every node needs
 * (apt:).  Here the key is read and checked; the package (package.c)
 * carries it as env/requirements.txt, env/wheels, env/image,
 * env/image-ref and env/apt.txt, templates/pbx-env.sh builds the first
 * four on the cluster, and parrun installs the last on its nodes
 * (src/jobs/apt.c).
 */
#include "experiment/experiment_internal.h"
#include "util/buf.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

#define ENV_MAX_REQUIREMENTS 1000 /* lines of an inline list */
#define ENV_MAX_LINE         1024 /* bytes of one inline requirement */

#define ENV_MAX_APT          200 /* Debian packages in apt: */

static const char *const env_keys[] = { "python", "wheels", "installer", "container", "apt", NULL };

/* A path relative to the experiment's directory that stays inside it:
 * not absolute, no empty, "." or ".." component, at most 1024 bytes. */
static int env_path(const struct pbx_ynode *n, char **out, struct pbx_err *err)
{
	const char *p, *slash;
	if (pbx_ynode_str(n, PBX_YSTR_ONE_LINE, out, err) < 0)
		return -1;
	if (!(*out)[0] || (*out)[0] == '/' || strlen(*out) > 1024)
		return pbx_ynode_error(n, err,
				       "want a path relative to the experiment's directory");
	for (p = *out; *p; p = slash ? slash + 1 : p + strlen(p)) {
		size_t l;
		slash = strchr(p, '/');
		l = slash ? (size_t)(slash - p) : strlen(p);
		if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && !strncmp(p, "..", 2)))
			return pbx_ynode_error(
				n, err,
				"'%s': want a path inside the experiment's directory "
				"(no '..', '.' or empty components)",
				*out);
		if (!slash)
			break;
	}
	return 0;
}

/* One line of an inline list: a requirement (pip's syntax, checked by pip
 * on the cluster), never an option: options go in a requirements file. */
static int env_requirement(const struct pbx_ynode *n, struct pbx_buf *text, struct pbx_err *err)
{
	char *s;
	size_t l;
	if (pbx_ynode_str(n, PBX_YSTR_ONE_LINE, &s, err) < 0)
		return -1;
	l = strlen(s);
	if (l == 0 || l > ENV_MAX_LINE || s[0] == '-' || s[0] == ' ') {
		free(s);
		return pbx_ynode_error(
			n, err,
			"want a requirement such as 'numpy==1.26.4' or 'scikit-learn>=1.3' "
			"(at most %d bytes; pip options go in a requirements file)",
			ENV_MAX_LINE);
	}
	pbx_buf_adds(text, s);
	pbx_buf_adds(text, "\n");
	free(s);
	return 0;
}

static int env_python(struct pbx_experiment *e, const struct pbx_ynode *py, struct pbx_err *err)
{
	struct pbx_buf text = PBX_BUF_INIT;
	size_t i;
	e->env.python_line = py->line;
	if (py->type == PBX_YSCALAR)
		return env_path(py, &e->env.python_file, err);
	if (py->type != PBX_YSEQ || py->nitems == 0 || py->nitems > ENV_MAX_REQUIREMENTS)
		return pbx_ynode_error(
			py, err,
			"want a requirements file (a path) or a non-empty list of at "
			"most %d requirements",
			ENV_MAX_REQUIREMENTS);
	for (i = 0; i < py->nitems; i++)
		if (env_requirement(py->items[i], &text, err) < 0) {
			pbx_buf_release(&text);
			return -1;
		}
	e->env.python_text = pbx_buf_detach(&text, NULL);
	return 0;
}

#define LOWER_DIGITS "abcdefghijklmnopqrstuvwxyz0123456789"
#define UPPER        "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

/* A repository path component: [a-z0-9] first and last, [a-z0-9._-] in
 * between (the distribution spec's grammar, its separators loosened). */
static int ref_component_ok(const char *s, size_t n)
{
	return n > 0 && strspn(s, LOWER_DIGITS "._-") >= n && strchr(LOWER_DIGITS, s[0]) &&
	       strchr(LOWER_DIGITS, s[n - 1]);
}

/* A registry host: letters, digits, '.' and '-' (not first), optionally
 * :PORT (1-5 digits). */
static int ref_host_ok(const char *s, size_t n)
{
	size_t h = strspn(s, LOWER_DIGITS UPPER ".-");
	if (h == 0 || h > n || s[0] == '.' || s[0] == '-')
		return 0;
	if (h == n)
		return 1;
	return s[h] == ':' && n - h - 1 >= 1 && n - h - 1 <= 5 &&
	       strspn(s + h + 1, "0123456789") >= n - h - 1;
}

/* NAME: [HOST[:PORT]/]COMPONENT[/COMPONENT...]; the first of several
 * components is a host when it has a '.' or a ':' or is localhost. */
static int ref_name_ok(const char *s, size_t n)
{
	const char *end = s + n, *p = s;
	int first = 1;
	while (p <= end) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		size_t l = slash ? (size_t)(slash - p) : (size_t)(end - p);
		int host = first && slash &&
			   (memchr(p, '.', l) || memchr(p, ':', l) ||
			    (l == 9 && !strncmp(p, "localhost", 9)));
		if (host ? !ref_host_ok(p, l) : !ref_component_ok(p, l))
			return 0;
		if (!slash)
			return 1;
		p = slash + 1;
		first = 0;
	}
	return 0;
}

int pbx_exp_image_ref_ok(const char *ref)
{
	const char *s, *at, *last, *colon;
	size_t n;
	if (strncmp(ref, "docker://", 9) != 0 || strlen(ref) > 512)
		return 0;
	s = ref + 9;
	at = strchr(s, '@');
	if (at && (strncmp(at + 1, "sha256:", 7) != 0 || strlen(at + 8) != 64 ||
		   strspn(at + 8, "0123456789abcdef") != 64))
		return 0;
	n = at ? (size_t)(at - s) : strlen(s);
	last = s;
	for (const char *p = s; p < s + n; p++)
		if (*p == '/')
			last = p + 1;
	colon = memchr(last, ':', (size_t)(s + n - last));
	if (colon) { /* :TAG, [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} */
		size_t t = (size_t)(s + n - colon - 1);
		if (t < 1 || t > 128 || colon[1] == '.' || colon[1] == '-' ||
		    strspn(colon + 1, LOWER_DIGITS UPPER "_.-") < t)
			return 0;
		n = (size_t)(colon - s);
	}
	return ref_name_ok(s, n);
}

int pbx_exp_registry_ok(const char *s)
{
	size_t n = strlen(s);
	return n <= 255 && ref_host_ok(s, n);
}

/* environment.container: an image archive shipped with the code, or a
 * registry reference (docker://, checked here: it reaches the head's
 * shell and skopeo). */
static int env_container(struct pbx_experiment *e, const struct pbx_ynode *c, struct pbx_err *err)
{
	char *s;
	e->env.container_line = c->line;
	if (pbx_ynode_str(c, PBX_YSTR_ONE_LINE, &s, err) < 0)
		return -1;
	if (strstr(s, "://")) {
		if (pbx_exp_image_ref_ok(s)) {
			e->env.container_ref = s;
			return 0;
		}
		pbx_ynode_error(
			c, err,
			"'%s': want docker://[HOST[:PORT]/]NAME[:TAG][@sha256:DIGEST] "
			"(NAME of lower-case letters, digits, '.', '_', '-' and '/'; "
			"TAG of letters, digits, '_', '.', '-'; DIGEST 64 lower-case hex "
			"digits), or an archive of a root file system shipped with the code",
			s);
		free(s);
		return -1;
	}
	free(s);
	return env_path(c, &e->env.container, err);
}

int pbx_exp_apt_name_ok(const char *s)
{
	const char *eq = strchr(s, '=');
	size_t n = eq ? (size_t)(eq - s) : strlen(s);
	/* Debian policy 5.6.1: [a-z0-9][a-z0-9+.-]+; a version's characters
	 * (5.6.12): [A-Za-z0-9.+~:-] */
	if (n < 2 || n > 100 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')) ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789+.-") != n)
		return 0;
	return !eq || (eq[1] && strlen(eq + 1) <= 100 &&
		       strspn(eq + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				      "0123456789.+~:-") == strlen(eq + 1));
}

/* environment.apt: a non-empty list of Debian package names (NAME or
 * NAME=VERSION), checked here: they reach a root shell on the nodes. */
static int env_apt(struct pbx_experiment *e, const struct pbx_ynode *apt, struct pbx_err *err)
{
	size_t i;
	e->env.apt_line = apt->line;
	if (apt->type != PBX_YSEQ || apt->nitems == 0 || apt->nitems > ENV_MAX_APT)
		return pbx_ynode_error(apt, err,
				       "want a non-empty list of at most %d Debian packages, "
				       "e.g. [libsndfile1, ffmpeg]",
				       ENV_MAX_APT);
	e->env.apt = xcalloc(apt->nitems, sizeof(char *));
	for (i = 0; i < apt->nitems; i++) {
		char *s;
		if (pbx_ynode_str(apt->items[i], PBX_YSTR_ONE_LINE, &s, err) < 0)
			return -1;
		e->env.apt[e->env.napt++] = s;
		if (!pbx_exp_apt_name_ok(s))
			return pbx_ynode_error(apt->items[i], err,
					       "'%s': want a Debian package name (lower-case "
					       "letters, digits, '+', '-', '.'), optionally "
					       "=VERSION",
					       s);
	}
	return 0;
}

/* environment.installer: auto (default), uv or pip. */
static int env_installer(struct pbx_experiment *e, const struct pbx_ynode *n, struct pbx_err *err)
{
	char *v = NULL;
	if (pbx_ynode_str(n, 0, &v, err) < 0)
		return -1;
	if (strcmp(v, "auto") != 0 && strcmp(v, "uv") != 0 && strcmp(v, "pip") != 0) {
		free(v);
		return pbx_ynode_error(n, err,
				       "must be auto, uv or pip (auto: uv when the cluster can "
				       "have it, else pip)");
	}
	e->env.installer = v;
	return 0;
}

int pbx_exp_environment(struct pbx_experiment *e, const struct pbx_ynode *env, struct pbx_err *err)
{
	const struct pbx_ynode *py, *wheels, *container, *apt, *installer;
	if (!env)
		return 0;
	if (pbx_ynode_expect_map(env, err) < 0 || pbx_ymap_check_keys(env, env_keys, err) < 0)
		return -1;
	py = pbx_ymap_get(env, "python");
	wheels = pbx_ymap_get(env, "wheels");
	container = pbx_ymap_get(env, "container");
	apt = pbx_ymap_get(env, "apt");
	installer = pbx_ymap_get(env, "installer");
	e->env.line = env->line ? env->line : 1;
	if (apt && env_apt(e, apt, err) < 0)
		return -1;
	if (!py && !container && !apt)
		return pbx_ymap_missing(env, "python",
					"required key is missing (a requirements file, or a list "
					"of requirements; or container: an image archive; or apt: "
					"Debian packages)",
					err);
	if (apt && container)
		return pbx_ynode_error(
			apt, err,
			"apt: and container: together are not supported: install the "
			"Debian packages in the image");
	if (py && container && installer) {
		char *which = NULL;
		int uv = pbx_ynode_str(installer, PBX_YSTR_ONE_LINE, &which, err) == 0 &&
			 !strcmp(which, "uv");
		free(which);
		if (uv)
			return pbx_ynode_error(installer, err,
					       "installer: uv does not go with container: (the "
					       "image's own python and pip install its packages)");
	}
	if (wheels && !py)
		return pbx_ynode_error(wheels, err,
				       "wheels: go with python: (the wheels its requirements "
				       "install from)");
	if (installer && !py)
		return pbx_ynode_error(installer, err,
				       "installer: goes with python: (what installs its "
				       "requirements)");
	if (installer && env_installer(e, installer, err) < 0)
		return -1;
	if (container && env_container(e, container, err) < 0)
		return -1;
	if (!py)
		return 0; /* apt: or container: alone */
	if (env_python(e, py, err) < 0)
		return -1;
	if (wheels) {
		e->env.wheels_line = wheels->line;
		if (env_path(wheels, &e->env.wheels, err) < 0)
			return -1;
	}
	return 0;
}

void pbx_exp_environment_free(struct pbx_exp_environment *env)
{
	free(env->python_file);
	free(env->python_text);
	free(env->wheels);
	free(env->installer);
	free(env->container);
	free(env->container_ref);
	for (size_t i = 0; i < env->napt; i++)
		free(env->apt[i]);
	free(env->apt);
	memset(env, 0, sizeof(*env));
}
