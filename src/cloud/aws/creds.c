/*
 * creds.c - AWS credentials and region as the AWS CLI finds them:
 * environment, the profile in the shared credentials and config files
 * (INI, read here: aws_ini_read, fuzzed by tests/fuzz/fuzz_aws_ini.c),
 * then IMDSv2 on an EC2 machine.  Secrets are wiped when freed and never
 * put in a message: messages say where credentials were looked for.
 */
#include "cloud/aws/aws.h"
#include "cloud/provider.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/fs.h"
#include "util/xalloc.h"

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void aws_creds_free(struct aws_creds *c)
{
	free(c->access_key);
	wipe_free(c->secret_key);
	wipe_free(c->token);
	memset(c, 0, sizeof(*c));
}

/* ----------------------------------------------------------------- INI */

static const char *trim(char *s, size_t *len)
{
	while (*len && (s[*len - 1] == ' ' || s[*len - 1] == '\t' || s[*len - 1] == '\r'))
		(*len)--;
	s[*len] = '\0';
	while (*s == ' ' || *s == '\t') {
		s++;
		(*len)--;
	}
	return s;
}

int aws_ini_read(const char *name, const char *text, size_t len, const char *want, aws_ini_fn fn,
		 void *ctx, struct pbx_err *err)
{
	size_t pos = 0;
	int line = 0, in = 0;
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t l = nl ? (size_t)(nl - (text + pos)) : len - pos;
		char *copy = xstrndup(text + pos, l);
		const char *s;
		size_t sl = strlen(copy);
		int indented = l && (text[pos] == ' ' || text[pos] == '\t');
		pos += l + (nl ? 1 : 0);
		line++;
		if (strlen(copy) != l) {
			free(copy);
			return pbx_err_setc(err, PBX_EXIT_USAGE, "%s:%d: a NUL byte", name, line);
		}
		s = trim(copy, &sl);
		if (!*s || *s == '#' || *s == ';' || indented) {
			/* blank, comment, or a nested value (s3 = ...) */
			free(copy);
			continue;
		}
		if (*s == '[') {
			const char *end = strchr(s, ']');
			if (!end) {
				free(copy);
				return pbx_err_setc(err, PBX_EXIT_USAGE,
						    "%s:%d: a section header "
						    "without ']'",
						    name, line);
			}
			{
				size_t n = (size_t)(end - s - 1);
				char *sec = xstrndup(s + 1, n);
				const char *t = trim(sec, &n);
				in = !strcmp(t, want);
				free(sec);
			}
		} else {
			const char *eq = strchr(s, '=');
			if (!eq) {
				free(copy);
				return pbx_err_setc(err, PBX_EXIT_USAGE,
						    "%s:%d: expected 'key = value'", name, line);
			}
			if (in) {
				size_t kl = (size_t)(eq - s), vl = strlen(eq + 1);
				char *k = xstrndup(s, kl), *v = xstrdup(eq + 1);
				fn(ctx, trim(k, &kl), trim(v, &vl));
				explicit_bzero(v, strlen(v));
				free(k);
				free(v);
			}
		}
		explicit_bzero(copy, strlen(copy));
		free(copy);
	}
	return 0;
}

/* ------------------------------------------------------------ profiles */

struct prof {
	char *access_key, *secret_key, *token, *region;
};

static void prof_set(void *ctx, const char *key, const char *value)
{
	struct prof *p = ctx;
	char **slot = !strcmp(key, "aws_access_key_id")       ? &p->access_key
		      : !strcmp(key, "aws_secret_access_key") ? &p->secret_key
		      : !strcmp(key, "aws_session_token")     ? &p->token
		      : !strcmp(key, "region")                ? &p->region
							      : NULL;
	if (!slot || !*value)
		return;
	wipe_free(*slot);
	*slot = xstrdup(value);
}

static void prof_free(struct prof *p)
{
	free(p->access_key);
	wipe_free(p->secret_key);
	wipe_free(p->token);
	free(p->region);
	memset(p, 0, sizeof(*p));
}

/* The file of env var `env`, else ~/.aws/NAME.  Caller frees. */
static char *aws_file(const char *env, const char *name)
{
	const char *e = getenv(env), *home = getenv("HOME");
	if (e && *e)
		return pbx_expand_tilde(e);
	return xasprintf("%s/.aws/%s", home && *home ? home : "/", name);
}

/* Reads section `section` of the file; a missing file is no error. */
static int read_section(const char *path, const char *section, struct prof *p, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	int missing = 0, rc;
	if (pbx_read_regular(path, 1 << 20, &b, &missing, err) < 0) {
		pbx_buf_release(&b);
		return missing ? (pbx_err_clear(err), 0) : -1;
	}
	rc = aws_ini_read(path, b.buf, b.len, section, prof_set, p, err);
	explicit_bzero(b.buf, b.len);
	pbx_buf_release(&b);
	return rc;
}

static const char *profile_name(const char *profile)
{
	const char *e = getenv("AWS_PROFILE");
	if (profile && *profile)
		return profile;
	if (e && *e)
		return e;
	e = getenv("AWS_DEFAULT_PROFILE");
	return e && *e ? e : "default";
}

/* The profile from the credentials file, then the config file. */
static int profile_read(const char *name, struct prof *p, char *where, size_t wsize,
			struct pbx_err *err)
{
	char *cred = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	char *conf = aws_file("AWS_CONFIG_FILE", "config");
	char *sect = !strcmp(name, "default") ? xstrdup("default") : xasprintf("profile %s", name);
	int rc = read_section(cred, name, p, err);
	snprintf(where, wsize, "profile %s in %s", name, cred);
	if (rc == 0 && !p->access_key) {
		rc = read_section(conf, sect, p, err);
		snprintf(where, wsize, "profile %s in %s", name, conf);
	} else if (rc == 0 && !p->region) {
		/* the region lives in the config file */
		struct prof c = { 0 };
		rc = read_section(conf, sect, &c, err);
		p->region = c.region;
		c.region = NULL;
		prof_free(&c);
	}
	free(cred);
	free(conf);
	free(sect);
	return rc;
}

char *aws_region_find(const char *profile)
{
	struct prof p = { 0 };
	struct pbx_err err = PBX_ERR_INIT;
	char where[300], *r;
	const char *e = getenv("AWS_REGION");
	if (!e || !*e)
		e = getenv("AWS_DEFAULT_REGION");
	if (e && *e)
		return xstrdup(e);
	if (profile_read(profile_name(profile), &p, where, sizeof(where), &err) < 0) {
		prof_free(&p);
		return NULL;
	}
	r = p.region;
	p.region = NULL;
	prof_free(&p);
	return r;
}

/* ---------------------------------------------------------------- IMDS */

static int imds_get(struct pbx_http *h, const char *method, const char *url, const char *hdr,
		    struct pbx_buf *out, struct pbx_err *err)
{
	const char *hdrs[2] = { hdr, NULL };
	struct pbx_http_req r = { .method = method,
				  .url = url,
				  .headers = hdrs,
				  .body = !strcmp(method, "PUT") ? "" : NULL };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	if (pbx_http_do(h, &r, &resp, err) < 0)
		return -1;
	if (resp.status != 200) {
		pbx_buf_release(&resp.body);
		return pbx_err_set(err, "instance metadata %s %s: HTTP %ld", method, url,
				   resp.status);
	}
	pbx_buf_release(out);
	*out = resp.body;
	return 0;
}

/* The IMDS base URL without a trailing '/': AWS_EC2_METADATA_SERVICE_ENDPOINT
 * when set (the tests point it at loopback), which must pass
 * pbx_http_url_allowed, else http://169.254.169.254.  Caller frees; NULL
 * with err when refused. */
static char *imds_base(struct pbx_err *err)
{
	const char *ep = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	char *base = xasprintf("%s", ep && *ep ? ep : "http://169.254.169.254"), why[256];
	size_t bl = strlen(base);
	if (!pbx_http_url_allowed(base, why, sizeof(why))) {
		free(base);
		pbx_err_setc(err, PBX_EXIT_USAGE, "AWS_EC2_METADATA_SERVICE_ENDPOINT: %s", why);
		return NULL;
	}
	if (bl && base[bl - 1] == '/')
		base[bl - 1] = '\0';
	return base;
}

/* IMDSv2 at `base`: a session token, the role's name, its credentials. */
static int imds_creds(struct pbx_http *h, const char *base, struct aws_creds *out,
		      struct pbx_err *err)
{
	struct pbx_buf tok = PBX_BUF_INIT, role = PBX_BUF_INIT, doc = PBX_BUF_INIT;
	char *url = NULL, *hdr = NULL;
	json_t *j = NULL;
	int rc;
	url = xasprintf("%s/latest/api/token", base);
	rc = imds_get(h, "PUT", url, "X-aws-ec2-metadata-token-ttl-seconds: 21600", &tok, err);
	if (rc == 0) {
		pbx_buf_rtrim(&tok);
		hdr = xasprintf("X-aws-ec2-metadata-token: %s", tok.buf);
		free(url);
		url = xasprintf("%s/latest/meta-data/iam/security-credentials/", base);
		rc = imds_get(h, "GET", url, hdr, &role, err);
	}
	if (rc == 0) {
		pbx_buf_rtrim(&role);
		if (!role.len || strchr(role.buf, '\n') || strchr(role.buf, '/'))
			rc = pbx_err_set(err, "instance metadata: no single IAM role attached");
	}
	if (rc == 0) {
		free(url);
		url = xasprintf("%s/latest/meta-data/iam/security-credentials/%s", base, role.buf);
		rc = imds_get(h, "GET", url, hdr, &doc, err);
	}
	if (rc == 0) {
		const char *ak = NULL, *sk = NULL, *st = NULL;
		j = json_loadb(doc.buf, doc.len, 0, NULL);
		if (json_unpack(j, "{s:s, s:s, s?s}", "AccessKeyId", &ak, "SecretAccessKey", &sk,
				"Token", &st) != 0 ||
		    !*ak || !*sk) {
			rc = pbx_err_set(err, "instance metadata: the role's credentials are not "
					      "{AccessKeyId, SecretAccessKey, Token}");
		} else {
			out->access_key = xstrdup(ak);
			out->secret_key = xstrdup(sk);
			out->token = st && *st ? xstrdup(st) : NULL;
			snprintf(out->source, sizeof(out->source), "instance metadata (role %s)",
				 role.buf);
		}
	}
	if (j) {
		json_t *v = json_object_get(j, "SecretAccessKey");
		if (json_is_string(v))
			explicit_bzero((char *)json_string_value(v), json_string_length(v));
		json_decref(j);
	}
	explicit_bzero(doc.buf, doc.len);
	explicit_bzero(tok.buf, tok.len);
	pbx_buf_release(&doc);
	pbx_buf_release(&tok);
	pbx_buf_release(&role);
	if (hdr)
		explicit_bzero(hdr, strlen(hdr));
	free(hdr);
	free(url);
	return rc;
}

/* ---------------------------------------------------------------- chain */

int aws_creds_find(const struct aws_creds_opts *o, struct aws_creds *out, struct pbx_err *err)
{
	const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
	const char *tok = getenv("AWS_SESSION_TOKEN"), *imds_off;
	int rc, asked;
	const char *name = profile_name(o->profile);
	int explicit =
		(o->profile && *o->profile) || (getenv("AWS_PROFILE") && *getenv("AWS_PROFILE"));
	struct prof p = { 0 };
	char where[300];
	memset(out, 0, sizeof(*out));
	if (!tok || !*tok)
		tok = getenv("AWS_SECURITY_TOKEN");
	if (!explicit && ak && *ak && sk && *sk) {
		out->access_key = xstrdup(ak);
		out->secret_key = xstrdup(sk);
		out->token = tok && *tok ? xstrdup(tok) : NULL;
		snprintf(out->source, sizeof(out->source), "environment (AWS_ACCESS_KEY_ID)");
		return 0;
	}
	if (profile_read(name, &p, where, sizeof(where), err) < 0) {
		prof_free(&p);
		return -1;
	}
	if (p.access_key && p.secret_key) {
		out->access_key = p.access_key;
		out->secret_key = p.secret_key;
		out->token = p.token;
		p.access_key = p.secret_key = p.token = NULL;
		snprintf(out->source, sizeof(out->source), "%s", where);
		prof_free(&p);
		return 0;
	}
	if (p.access_key || p.secret_key) {
		prof_free(&p);
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "%s: aws_access_key_id and "
				    "aws_secret_access_key must both be set",
				    where);
	}
	prof_free(&p);
	imds_off = getenv("AWS_EC2_METADATA_DISABLED");
	asked = o->http && !(imds_off && !strcasecmp(imds_off, "true")) &&
		pbx_may_ask_metadata("aws");
	if (asked) {
		char *base = imds_base(err);
		if (!base)
			return -1; /* a refused endpoint is said as such */
		rc = imds_creds(o->http, base, out, err);
		free(base);
		if (rc == 0)
			return 0;
	}
	pbx_err_setc(err, PBX_EXIT_USAGE,
		     "no AWS credentials found: not in the environment "
		     "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)%s, not in profile '%s' of the "
		     "shared credentials or config file, %s",
		     explicit ? " (skipped: a profile was named)" : "", name,
		     asked ? "not from instance metadata"
			   : "and this is no EC2 machine (instance metadata not asked)");
	return -1;
}
