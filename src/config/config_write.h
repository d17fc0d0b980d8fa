/*
 * config_write.h - a cluster template written back in config syntax: the
 * keys and shapes config_parse.c reads, as a JSON object (JSON is YAML, so
 * pbx_config_parse reads it), so another pbx (pbx on the cluster's head,
 * docs/head-identity.md) builds exactly what this one would.
 */
#ifndef PBX_CONFIG_CONFIG_WRITE_H
#define PBX_CONFIG_CONFIG_WRITE_H

#include <jansson.h>

#include "config/config.h"

/*
 * The value of clusters.NAME for template `t`: every field the parser
 * knows, with `ssh_key` as the key it names (NULL: none, the SSH agent;
 * t->ssh_key is a path on the machine that read the configuration and is
 * never copied by itself).  Counts are t's (a cluster's sized template
 * gives its sizes); what config syntax cannot say is adjusted to what
 * means the same (config_write.c).  Returns a new reference (json_decref).
 */
json_t *pbx_config_template_write(const struct pbx_cluster_template *t, const char *ssh_key);

/*
 * The value of clouds.CLOUD ("gce", "aws"; an empty object for another):
 * where that cloud's resources are (project, zones, region, subnets,
 * endpoint, disk size), never how to sign in (no credentials file, key or
 * profile).  Returns a new reference (json_decref).
 */
json_t *pbx_config_cloud_write(const struct pbx_config *cfg, const char *cloud);

#endif
