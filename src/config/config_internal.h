/*
 * config_internal.h - internals shared by the files of src/config (not for use
 * outside it): turning a parsed YAML document into a struct pbx_config.
 */
#ifndef PBX_CONFIG_CONFIG_INTERNAL_H
#define PBX_CONFIG_CONFIG_INTERNAL_H

#include "config/config.h"
#include "config/yamltree.h"

/* Default local-provider settings (also used by the built-in config). */
#define PBX_LOCAL_ADDRESS_BASE    "127.0.1.0"
#define PBX_LOCAL_SSH_PORT        22022
#define PBX_LOCAL_SLURM_PORT_BASE 17000

/* Fills the zeroed `cfg` (whose `path` is already set) from `doc`.  On
 * failure cfg may be partly filled; the caller frees it with
 * pbx_config_free(). */
int pbx_config_from_doc(const struct pbx_ydoc *doc, struct pbx_config *cfg, struct pbx_err *err);

/* Template map m's optional `proxy` and `no_proxy` (proxy.c) into t->proxy
 * (normalised: "http://HOST:PORT") and t->no_proxy.  -1 with err naming the
 * file, line and key (never the URL's user or password, which it refuses). */
int pbx_config_parse_proxy(const struct pbx_ynode *m, struct pbx_cluster_template *t,
			   struct pbx_err *err);

#endif
