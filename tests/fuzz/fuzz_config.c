/*
 * fuzz_config.c - libFuzzer target for config.yaml parsing: any bytes go
 * through pbx_config_parse (and so the whole yamltree reader); a config
 * that loads is also summarised, to walk every parsed field.
 */
#include "config/config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
		    !s[0])
			abort();
		free(s);
	}
	pbx_config_free(cfg);
	return 0;
}
