/*
 * notify.c - the experiment's `notify:` key (FORMAT.md, "Notify";
 * docs/notify.md): a webhook URL (Slack's incoming webhooks, or any
 * endpoint that takes a JSON POST) told when the last task of a
 * submission ends.  Here the URL is read and checked; the package
 * (package.c) carries it as notify.url with templates/pbx-notify.sh, and
 * the submission (src/jobs/arrays.c) runs that script in one small SLURM
 * job after the arrays.  The URL often holds a secret (Slack's does): no
 * message here or anywhere in pbx shows it.
 */
#include "experiment/experiment_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

#define NOTIFY_MAX_URL 2048

/* The characters of a URL (RFC 3986's unreserved and reserved, and '%'),
 * less the quote and backslash that would end the string of curl's
 * configuration that pbx-notify.sh hands it. */
static int notify_url_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("-._~:/?#[]@!$&'()*+,;=%", ch));
}

int pbx_exp_notify(struct pbx_experiment *e, const struct pbx_ynode *n, struct pbx_err *err)
{
	char *url = NULL;
	const char *host, *p;
	if (!n)
		return 0;
	if (pbx_ynode_str(n, PBX_YSTR_ONE_LINE, &url, err) < 0)
		return -1;
	if (!strncmp(url, "https://", 8))
		host = url + 8;
	else if (!strncmp(url, "http://", 7))
		host = url + 7;
	else {
		free(url);
		return pbx_ynode_error(n, err, "want an http:// or https:// URL (a webhook)");
	}
	for (p = url; *p && notify_url_char(*p); p++)
		;
	if (*p || strlen(url) > NOTIFY_MAX_URL || !*host || *host == '/') {
		free(url);
		return pbx_ynode_error(n, err,
				       "not a URL pbx can use: want a host after the scheme, "
				       "at most %d bytes, no spaces, quotes or backslashes",
				       NOTIFY_MAX_URL);
	}
	e->notify = url;
	e->notify_line = n->line;
	return 0;
}

char *pbx_experiment_notify_host(const struct pbx_experiment *e)
{
	const char *h, *at;
	size_t n;
	if (!e->notify)
		return NULL;
	h = strstr(e->notify, "://") + 3;
	n = strcspn(h, "/?#");
	for (at = h; (at = memchr(at, '@', n - (size_t)(at - h))); h = ++at) /* no user:password */
		;
	return xstrndup(h, strcspn(h, "/?#"));
}
