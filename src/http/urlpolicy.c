/*
 * urlpolicy.c - which URLs pbx may send credentials to (see http.h,
 * pbx_http_url_allowed).
 *
 * Every request pbx makes carries a secret: a bearer token, a SigV4
 * signature with a session token, a refresh token or client secret, an
 * instance-metadata session token.  Over https:// they are safe from the
 * network; over plain http:// they are not, so plain http is allowed only
 * where there is no network in between that pbx does not trust:
 *   - loopback hosts (127.0.0.0/8, ::1, "localhost"): the emulators the
 *     tests and developers run;
 *   - the cloud metadata servers at their documented link-local addresses
 *     (169.254.169.254 and metadata.google.internal for Compute Engine,
 *     169.254.169.254 and fd00:ec2::254 for EC2's IMDS), which only
 *     answer plain http and are reached without leaving the host.
 * The URL is parsed by libcurl (curl_url), the same parser that later
 * sends the request, so the host judged here is the host connected to.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Host names (as libcurl returns them, IPv6 in brackets) where plain http
 * reaches a metadata server. */
static const char *const metadata_hosts[] = {
	"169.254.169.254",          /* Compute Engine and EC2 */
	"metadata.google.internal", /* Compute Engine */
	"[fd00:ec2::254]",          /* EC2 IMDS over IPv6 */
	NULL,
};

int pbx_http_host_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	char inner[INET6_ADDRSTRLEN + 1];
	size_t len = strlen(host);
	if (!strcasecmp(host, "localhost"))
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (len < 3 || host[0] != '[' || host[len - 1] != ']' || len - 2 >= sizeof(inner))
		return 0;
	memcpy(inner, host + 1, len - 2);
	inner[len - 2] = '\0';
	return inet_pton(AF_INET6, inner, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static int host_is_metadata(const char *host)
{
	size_t i;
	for (i = 0; metadata_hosts[i]; i++)
		if (!strcasecmp(host, metadata_hosts[i]))
			return 1;
	return 0;
}

int pbx_http_url_loopback(const char *url)
{
	CURLU *u = curl_url();
	char *host = NULL;
	int loopback = u && url && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
		       curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
		       pbx_http_host_loopback(host);
	curl_free(host);
	curl_url_cleanup(u);
	return loopback;
}

int pbx_http_url_allowed(const char *url, char *why, size_t size)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	int ok = 0;
	why[0] = '\0';
	if (!u || !url || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		snprintf(why, size, "not an http:// or https:// URL");
	} else if (!strcasecmp(scheme, "https")) {
		ok = 1;
	} else if (strcasecmp(scheme, "http") != 0) {
		snprintf(why, size,
			 "the scheme must be https:// (or http:// to a loopback host), "
			 "not %.20s://",
			 scheme);
	} else if (pbx_http_host_loopback(host) || host_is_metadata(host)) {
		ok = 1;
	} else {
		snprintf(
			why, size,
			"plain http:// to %.100s would send credentials in clear: use "
			"https://, or http:// only to a loopback host (127.0.0.0/8, ::1, localhost) "
			"or a cloud metadata server",
			host);
	}
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return ok;
}
