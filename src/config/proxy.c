/*
 * proxy.c - a template's `proxy` and `no_proxy`: the HTTP proxy a cluster's
 * nodes go out through (a campus or company network that has no other way
 * out).  The bootstrap gives it to apt and every node's environment file
 * (src/cluster/bootstrap_render.c), so the environment build, the tasks and
 * the head's own storage reads use it (docs/configuration.md, "A cluster
 * behind a proxy").  The URL is parsed by libcurl, never by hand; what is
 * kept is rebuilt from its parts, so nothing but a scheme, a host and a
 * port reaches a node.
 */
#include "config/config_internal.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

#define NO_PROXY_MAX      64  /* entries of no_proxy */
#define NO_PROXY_NAME_MAX 253 /* bytes of one: a DNS name's most */

/* Part `part` of parsed URL u (CURLU_DEFAULT_PORT for the port); NULL when
 * it has none.  Caller frees with curl_free. */
static char *url_part(CURLU *u, CURLUPart part)
{
	char *v = NULL;
	if (curl_url_get(u, part, &v, part == CURLUPART_PORT ? CURLU_DEFAULT_PORT : 0) != CURLUE_OK)
		return NULL;
	return v;
}

/* Whether host (as libcurl gives it) is a DNS name, an IPv4 address or a
 * bracketed IPv6 one: checked here too, whatever libcurl's version lets
 * through, as it goes into env.sh and apt's configuration. */
static int host_ok(const char *h)
{
	size_t n = strlen(h);
	if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
		return strspn(h + 1, "0123456789abcdefABCDEF:.") == n - 2;
	return n > 0 && n <= 253 &&
	       strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") == n;
}

/* Why `url` cannot be a proxy's URL, or NULL with *out (caller frees) set
 * to "http://HOST:PORT" rebuilt from its parts. */
static const char *proxy_url_bad(const char *url, char **out)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *user = NULL,
	     *password = NULL, *query = NULL, *fragment = NULL;
	const char *why = NULL;
	if (!u)
		return "cannot be parsed (out of memory)";
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
		curl_url_cleanup(u);
		return "must be a URL like http://proxy.example.edu:3128";
	}
	scheme = url_part(u, CURLUPART_SCHEME);
	host = url_part(u, CURLUPART_HOST);
	port = url_part(u, CURLUPART_PORT);
	path = url_part(u, CURLUPART_PATH);
	user = url_part(u, CURLUPART_USER);
	password = url_part(u, CURLUPART_PASSWORD);
	query = url_part(u, CURLUPART_QUERY);
	fragment = url_part(u, CURLUPART_FRAGMENT);
	if (!scheme || strcmp(scheme, "http") != 0)
		why = "must be an http:// URL (apt, pip and uv reach https:// sites through an "
		      "http:// proxy with CONNECT)";
	else if (user || password)
		why = "must not carry a user or password: it would be written on every node";
	else if (!host || !host_ok(host) || !port)
		why = "must name a host, like http://proxy.example.edu:3128";
	else if ((path && strcmp(path, "/") != 0) || query || fragment)
		why = "must be http://HOST:PORT, with no path, query or fragment";
	else
		*out = xasprintf("http://%s:%s", host, port);
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(user);
	curl_free(password);
	curl_free(query);
	curl_free(fragment);
	curl_url_cleanup(u);
	return why;
}

/* Whether `s` can be a no_proxy entry: a host name, a domain (".edu"), an
 * IPv4 or IPv6 address or block; nothing a shell, apt's configuration or
 * a comma-separated list would read otherwise. */
static int no_proxy_entry_ok(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n <= NO_PROXY_NAME_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:/") == n;
}

static int parse_no_proxy(const struct pbx_ynode *l, struct pbx_cluster_template *t,
			  struct pbx_err *err)
{
	size_t i;
	if (pbx_ynode_expect_seq(l, err) < 0)
		return -1;
	if (l->nitems == 0 || l->nitems > NO_PROXY_MAX)
		return pbx_ynode_error(l, err, "must list 1 to %d hosts or domains", NO_PROXY_MAX);
	t->no_proxy = xcalloc(l->nitems, sizeof(*t->no_proxy));
	for (i = 0; i < l->nitems; i++) {
		if (pbx_ynode_str(l->items[i], PBX_YSTR_ONE_LINE, &t->no_proxy[i], err) < 0)
			return -1;
		t->nno_proxy++;
		if (!no_proxy_entry_ok(t->no_proxy[i]))
			return pbx_ynode_error(l->items[i], err,
					       "must be a host, a domain like .example.edu or an "
					       "address, got '%.40s'",
					       t->no_proxy[i]);
	}
	return 0;
}

int pbx_config_parse_proxy(const struct pbx_ynode *m, struct pbx_cluster_template *t,
			   struct pbx_err *err)
{
	const struct pbx_ynode *p = pbx_ymap_get(m, "proxy"), *l = pbx_ymap_get(m, "no_proxy");
	char *url = NULL;
	const char *why;
	if (p && !pbx_ynode_is_null(p)) {
		if (pbx_ynode_str(p, PBX_YSTR_ONE_LINE, &url, err) < 0)
			return -1;
		why = proxy_url_bad(url, &t->proxy);
		free(url); /* never in an error: it may hold a password */
		if (why)
			return pbx_ynode_error(p, err, "%s", why);
	}
	if (!l || pbx_ynode_is_null(l))
		return 0;
	if (!t->proxy)
		return pbx_ynode_error(l, err, "needs proxy: (the hosts reached without it)");
	return parse_no_proxy(l, t, err);
}
