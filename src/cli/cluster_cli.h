/*
 * cluster_cli.h - what the files of `pbx cluster` share (cmd-cluster*.c,
 * src/cli only): each subcommand's struct for the group's table in
 * cmd-cluster.c, and the few helpers more than one family uses.
 */
#ifndef PBX_CLI_CLUSTER_CLI_H
#define PBX_CLI_CLUSTER_CLI_H

#include <stdint.h>

#include <jansson.h>

#include "cli/cmd.h"

struct pbx_cluster_target;

/* The subcommands, in the files of their families. */
extern const struct pbx_cmd pbx_cmd_cluster_start;           /* cmd-cluster-lifecycle.c */
extern const struct pbx_cmd pbx_cmd_cluster_stop;            /* cmd-cluster-lifecycle.c */
extern const struct pbx_cmd pbx_cmd_cluster_resize;          /* cmd-cluster-lifecycle.c */
extern const struct pbx_cmd pbx_cmd_cluster_price;           /* cmd-cluster-price.c */
extern const struct pbx_cmd pbx_cmd_cluster_list;            /* cmd-cluster-info.c */
extern const struct pbx_cmd pbx_cmd_cluster_show;            /* cmd-cluster-info.c */
extern const struct pbx_cmd pbx_cmd_cluster_exec;            /* cmd-cluster-remote.c */
extern const struct pbx_cmd pbx_cmd_cluster_ssh;             /* cmd-cluster-remote.c */
extern const struct pbx_cmd pbx_cmd_cluster_forget_host;     /* cmd-cluster-remote.c */
extern const struct pbx_cmd pbx_cmd_cluster_power;           /* cmd-cluster-head.c */
extern const struct pbx_cmd pbx_cmd_cluster_record;          /* cmd-cluster-head.c */
extern const struct pbx_cmd pbx_cmd_cluster_adopt;           /* cmd-cluster-head.c */
extern const struct pbx_cmd pbx_cmd_cluster_runs;            /* cmd-cluster-head.c */
extern const struct pbx_cmd pbx_cmd_cluster_data;            /* cmd-cluster-head.c */
extern const struct pbx_cmd pbx_cmd_cluster_disconnect;      /* cmd-cluster-disconnect.c */
extern const struct pbx_cmd pbx_cmd_cluster_gc;              /* cmd-cluster-gc.c */
extern const struct pbx_cmd pbx_cmd_cluster_registry_login;  /* cmd-cluster-registry.c */
extern const struct pbx_cmd pbx_cmd_cluster_registry_logout; /* cmd-cluster-registry.c */

/* 0, or a usage error (exit 2) when cluster `name` is one pbx uses as it
 * is (cloud ssh: docs/ssh-clusters.md), which `verb` does not act on
 * (cmd-cluster-lifecycle.c). */
int pbx_cli_cluster_not_users(const struct pbx_ctx *ctx, const char *name, const char *verb);

/* Before a start: the price an hour on stderr (quiet with -q); a price
 * that cannot be had is a warning, never a reason not to start
 * (cmd-cluster-price.c). */
void pbx_cli_cluster_price_note(struct pbx_ctx *ctx, const struct pbx_cluster_target *tg);
/* nanos as an amount of 4 decimals into out, "?" when negative (unknown). */
void pbx_cli_price_amount(int64_t nanos, char out[32]);
/* nanos as a JSON number of the currency, null when negative (unknown). */
json_t *pbx_cli_price_money(int64_t nanos);

#endif
