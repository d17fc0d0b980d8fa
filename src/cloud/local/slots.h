/*
 * slots.h - which local clusters of this machine hold which slot
 * (addresses and ports, src/cloud/local/local.c), across pbx homes: two
 * people with a PBX_HOME each on one teaching machine can each run a local
 * cluster at once (docs/SECURITY.md, "Two homes on one machine").
 */
#ifndef PBX_CLOUD_LOCAL_SLOTS_H
#define PBX_CLOUD_LOCAL_SLOTS_H

#include "util/err.h"

/* Claims slot `slot` of the address and port space `space` (address base
 * and SLURM port base, e.g. "127.0.1.0-17000") for cluster `uid`, whose
 * directory is `dir`.  Returns 1 when it is this cluster's now (claimed, or
 * already its own), 0 when a live cluster of another home holds it (a claim
 * whose directory no longer holds that cluster's id is stale and taken
 * over), -1 on an error.  Without a registry directory it can make (not
 * root), every slot is this cluster's: one home per machine, as before. */
int pbx_local_slot_claim(const char *space, int slot, const char *uid, const char *dir,
			 struct pbx_err *err);

/* The address and port space of the local clouds of `cfg`: its address
 * base and SLURM port base, "127.0.1.0-17000" by default; caller frees. */
struct pbx_config;
char *pbx_local_slot_space(const struct pbx_config *cfg);

/* Gives up cluster `uid`'s claim on `slot` of `space`, if it holds it. */
void pbx_local_slot_release(const char *space, int slot, const char *uid);

#endif
