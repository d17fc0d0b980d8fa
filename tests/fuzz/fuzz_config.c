/*
 * fuzz_config.c - libFuzzer target for config.yaml parsing: any bytes go
 * through pbx_config_parse (and so the whole yamltree reader); a config
 * that loads is also summarised, to walk every parsed field, and a
 * template's proxy must be what env.sh and apt's file may carry
 * (src/config/proxy.c): http://HOST:PORT, no quote, space or shell byte.
 */
#include "config/config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether s is made only of bytes of `set`. */
static int only(const char *s, const char *set)
{
	return strspn(s, set) == strlen(s);
}

/* A loaded template's proxy and no_proxy as proxy.c promises them. */
static int proxy_ok(const struct pbx_cluster_template *t)
{
	static const char name[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-";
	const char *host, *colon;
	size_t i;
	if (!t->proxy)
		return t->nno_proxy == 0;
	host = t->proxy + 7;
	colon = strrchr(t->proxy, ':');
	if (strncmp(t->proxy, "http://", 7) != 0 || !colon || colon <= host || !colon[1] ||
	    !only(colon + 1, "0123456789"))
		return 0;
	if (host[0] == '[') { /* an IPv6 address */
		if (colon[-1] != ']' ||
		    strspn(host + 1, "0123456789abcdefABCDEF:.") != (size_t)(colon - host - 2))
			return 0;
	} else if (strspn(host, name) != (size_t)(colon - host)) {
		return 0;
	}
	for (i = 0; i < t->nno_proxy; i++) /* names, domains, addresses, blocks */
		if (!t->no_proxy[i][0] || !only(t->no_proxy[i], "abcdefghijklmnopqrstuvwxyz"
								"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
								"0123456789.-:/"))
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t i;
	if (pbx_config_parse("fuzz.yaml", (const char *)data, size, &cfg, &err) < 0) {
		if (cfg || err.code != PBX_EXIT_USAGE || !err.msg[0])
			abort();
		return 0;
	}
	for (i = 0; i < cfg->ntemplates; i++) {
		char *s = pbx_template_describe(&cfg->templates[i]);
		/* every template but an existing cluster's (cloud ssh) has nodes */
		if (pbx_config_template(cfg, cfg->templates[i].name) != &cfg->templates[i] ||
		    (pbx_template_node_count(&cfg->templates[i]) < 1) !=
			    !strcmp(cfg->templates[i].cloud, "ssh") ||
		    !s[0] || !proxy_ok(&cfg->templates[i]))
			abort();
		free(s);
	}
	pbx_config_free(cfg);
	return 0;
}
