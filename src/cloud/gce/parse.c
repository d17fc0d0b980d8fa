/*
 * parse.c - reading Compute Engine replies (jansson): Google's error
 * shape, Operation resources (status, error.errors[]), and instances.list
 * pages (name, id, zone, status, networkIP, natIP, lastStopTimestamp,
 * lastStartTimestamp, nextPageToken), and Image
 * resources (name, status, the pbx-image-id label, sizes).  Untrusted
 * input: every field is type-checked and length-bounded, addresses must be
 * IP addresses (they reach slurm.conf and ssh); fuzzed by
 * tests/fuzz/fuzz_gce_reply.c (Image: fuzz_gce_image.c).
 */
#include "cloud/gce/gce.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/addr.h"
#include "util/utctime.h"
#include "util/xalloc.h"

#define MAX_FIELD 1024

/* A string member, or NULL when absent, not a string, or too long. */
static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	return s && strlen(s) < MAX_FIELD ? s : NULL;
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/* The last path segment of a URL (zones/us-central1-a -> us-central1-a). */
static const char *last_segment(const char *url)
{
	const char *p = url ? strrchr(url, '/') : NULL;
	return p ? p + 1 : url;
}

int gce_error_text(const char *text, size_t len, char *out, size_t size)
{
	json_t *v = text && len ? json_loadb(text, len, 0, NULL) : NULL;
	json_t *e = json_object_get(v, "error"), *first;
	const char *msg, *reason;
	int rc = -1;
	out[0] = '\0';
	if (json_is_object(e)) {
		msg = str(e, "message");
		first = json_array_get(json_object_get(e, "errors"), 0);
		reason = str(first, "reason");
		if (!reason)
			reason = str(e, "status");
		snprintf(out, size, "%s%s%s%s", msg ? msg : "error", reason ? " (" : "",
			 reason ? reason : "", reason ? ")" : "");
		rc = 0;
	} else if (json_is_string(e)) { /* OAuth style */
		snprintf(out, size, "%.200s", json_string_value(e));
		rc = 0;
	}
	json_decref(v);
	return rc;
}

int gce_retryable(long status, const char *body, size_t len, void *ctx)
{
	json_t *v, *errors, *e;
	size_t i;
	int yes = 0;
	(void)ctx;
	if (pbx_http_retryable_default(status, body, len, NULL))
		return 1;
	if (status != 403)
		return 0;
	v = json_loadb(body, len, 0, NULL);
	errors = json_object_get(json_object_get(v, "error"), "errors");
	json_array_foreach(errors, i, e)
	{
		const char *r = str(e, "reason");
		if (r && (!strcmp(r, "rateLimitExceeded") || !strcmp(r, "userRateLimitExceeded")))
			yes = 1;
	}
	json_decref(v);
	return yes;
}

int gce_op_parse(json_t *v, struct gce_op *op, struct pbx_err *err)
{
	const char *name = str(v, "name"), *status = str(v, "status");
	json_t *errors, *e;
	size_t i, used = 0;
	memset(op, 0, sizeof(*op));
	if (!name || !status || !*name || !*status || strlen(name) >= sizeof(op->name) ||
	    strlen(status) >= sizeof(op->status))
		return pbx_err_set(err, "Compute Engine reply is not an operation");
	snprintf(op->name, sizeof(op->name), "%s", name);
	snprintf(op->status, sizeof(op->status), "%s", status);
	errors = json_object_get(json_object_get(v, "error"), "errors");
	json_array_foreach(errors, i, e)
	{
		const char *code = str(e, "code"), *msg = str(e, "message");
		int n;
		if (!op->error_code[0] && code)
			snprintf(op->error_code, sizeof(op->error_code), "%s", code);
		if (used >= sizeof(op->error) - 1)
			continue;
		n = snprintf(op->error + used, sizeof(op->error) - used, "%s%s: %s",
			     used ? "; " : "", code ? code : "ERROR", msg ? msg : "no message");
		used = n < 0 ? used : used + (size_t)n;
		if (used >= sizeof(op->error))
			used = sizeof(op->error) - 1;
	}
	if (json_array_size(errors) == 0 && json_object_get(v, "error")) {
		snprintf(op->error_code, sizeof(op->error_code), "ERROR");
		snprintf(op->error, sizeof(op->error), "operation failed without details");
	}
	return 0;
}

/* An address member of instance `name`: a copy when it is an IP address
 * (pbx_ip_literal_ok), NULL when absent; when it is anything else, NULL
 * and, for the first such, err naming the instance and the field (*bad). */
static char *address(json_t *o, const char *key, const char *name, int *bad, struct pbx_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return NULL;
	if (json_is_string(v) && pbx_ip_literal_ok(json_string_value(v)) &&
	    strlen(json_string_value(v)) == json_string_length(v))
		return xstrdup(json_string_value(v));
	if (!(*bad)++)
		pbx_err_set(err,
			    "Compute Engine list reply: instance %.80s has a %s that is not an "
			    "IP address",
			    name, key);
	return NULL;
}

/* The instance's numeric id (a uint64, which Compute Engine writes as a
 * decimal string and gives no other instance, unlike its name): a copy
 * when it is 1 to 20 digits without a leading zero that fit in 64 bits,
 * else NULL (absent, a number, anything else). */
static char *gce_uid(json_t *it)
{
	json_t *v = json_object_get(it, "id");
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	size_t len = s ? strlen(s) : 0, i;
	if (!len || len > 20 || len != json_string_length(v) || s[0] == '0')
		return NULL;
	for (i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return NULL;
	/* 20 digits fit only up to 18446744073709551615 */
	if (len == 20 && strcmp(s, "18446744073709551615") > 0)
		return NULL;
	return xstrdup(s);
}

/* When a RUNNING instance last started: lastStartTimestamp, else
 * creationTimestamp (an instance never stopped); 0 when neither reads. */
static int64_t gce_started_at(json_t *it)
{
	int64_t t = pbx_rfc3339_time(str(it, "lastStartTimestamp"));
	return t ? t : pbx_rfc3339_time(str(it, "creationTimestamp"));
}

/* Appends the instances of an array (a list's items, or one scope of an
 * aggregated list).  An instance with a bad address is still appended
 * (without it), so that it can be found and deleted, and the list fails. */
static int list_items(json_t *items, struct pbx_instance **out, size_t *n, struct pbx_err *err)
{
	json_t *it;
	size_t i;
	int bad = 0;
	if (items && !json_is_array(items))
		return pbx_err_set(err, "Compute Engine list reply: items is not an array");
	json_array_foreach(items, i, it)
	{
		json_t *nic = json_array_get(json_object_get(it, "networkInterfaces"), 0);
		json_t *ac = json_array_get(json_object_get(nic, "accessConfigs"), 0);
		struct pbx_instance *x;
		if (!str(it, "name") || !*str(it, "name") || !str(it, "status"))
			return pbx_err_set(
				err,
				"Compute Engine list reply: an instance has no name or status");
		*out = xreallocarray(*out, *n + 1, sizeof(**out));
		x = &(*out)[(*n)++];
		memset(x, 0, sizeof(*x)); /* what EC2 alone says: NULL */
		x->id = xstrdup(str(it, "name"));
		x->state = xstrdup(str(it, "status"));
		x->zone = dup_or_null(last_segment(str(it, "zone")));
		x->private_ip = address(nic, "networkIP", x->id, &bad, err);
		x->public_ip = address(ac, "natIP", x->id, &bad, err);
		x->cluster = dup_or_null(str(json_object_get(it, "labels"), PBX_LABEL_CLUSTER_ID));
		x->stopped_at = strcmp(x->state, "RUNNING") != 0
					? pbx_rfc3339_time(str(it, "lastStopTimestamp"))
					: 0;
		x->started_at = !strcmp(x->state, "RUNNING") ? gce_started_at(it) : 0;
		x->uid = gce_uid(it);
	}
	return bad ? -1 : 0;
}

int gce_list_parse(json_t *v, struct pbx_instance **out, size_t *n, char **next,
		   struct pbx_err *err)
{
	json_t *items, *scope;
	const char *key;
	*next = NULL;
	if (!json_is_object(v))
		return pbx_err_set(err, "Compute Engine list reply is not an object");
	items = json_object_get(v, "items");
	if (json_is_object(items)) {
		/* aggregatedList: {"zones/Z": {"instances": [...]} | {"warning"}} */
		json_object_foreach(items, key, scope)
		{
			size_t first = *n, k;
			if (!json_is_object(scope))
				return pbx_err_set(
					err,
					"Compute Engine aggregated list: scope %.60s is not an object",
					key);
			if (list_items(json_object_get(scope, "instances"), out, n, err) < 0)
				return -1;
			for (k = first; k < *n; k++)
				if (!(*out)[k].zone && !strncmp(key, "zones/", 6) &&
				    strlen(key) < MAX_FIELD)
					(*out)[k].zone = xstrdup(key + 6);
		}
	} else if (list_items(items, out, n, err) < 0) {
		return -1;
	}
	*next = dup_or_null(str(v, "nextPageToken"));
	if (*next && !**next) {
		free(*next);
		*next = NULL;
	}
	return 0;
}

/* A decimal int64 field, given as a JSON string (Compute Engine's form) or
 * number; 0 when absent or not one. */
static long long int64_field(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	char *end;
	long long n;
	if (json_is_integer(v))
		return json_integer_value(v) < 0 ? 0 : (long long)json_integer_value(v);
	if (!s || !*s || strlen(s) > 19)
		return 0;
	n = strtoll(s, &end, 10);
	return *end || n < 0 ? 0 : n;
}

/* Is `s` an RFC 1035 name of at most 63 characters? */
static int rfc1035(const char *s)
{
	size_t len = s ? strlen(s) : 0, i;
	if (len == 0 || len > 63 || s[0] < 'a' || s[0] > 'z' || s[len - 1] == '-')
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

int gce_image_parse(json_t *v, struct gce_image *img, struct pbx_err *err)
{
	const char *name = str(v, "name"), *status = str(v, "status");
	const char *owner = str(json_object_get(v, "labels"), PBX_LABEL_IMAGE_ID);
	memset(img, 0, sizeof(*img));
	if (!rfc1035(name) || !status || !*status || strlen(status) >= sizeof(img->status))
		return pbx_err_set(err, "Compute Engine reply is not an image");
	snprintf(img->name, sizeof(img->name), "%s", name);
	snprintf(img->status, sizeof(img->status), "%s", status);
	if (owner && strlen(owner) < sizeof(img->owner))
		snprintf(img->owner, sizeof(img->owner), "%s", owner);
	img->disk_gb = int64_field(v, "diskSizeGb");
	img->archive_bytes = int64_field(v, "archiveSizeBytes");
	return 0;
}
