/*
 * sinfo.h - parsing `sinfo -h -N -o '%N %t'` output into node states.
 */
#ifndef PBX_SLURM_SINFO_H
#define PBX_SLURM_SINFO_H

#include <stddef.h>

#include "util/err.h"

/* The command pbx runs on the head (through the cluster's env.sh). */
#define PBX_SINFO_CMD "sinfo -h -N -o '%N %t'"

struct pbx_sinfo_node {
	char *name;
	char *state; /* compact state as sinfo prints it: idle, alloc, mix, down*, drain ... */
};

/*
 * Parses `text` (len bytes, not necessarily NUL-terminated).  A node listed
 * more than once (one line per partition) appears once.  *nodes is owned by
 * the caller: pbx_sinfo_free(*nodes, *n).  Malformed lines are an error
 * naming the line number.
 */
int pbx_sinfo_parse(const char *text, size_t len, struct pbx_sinfo_node **nodes, size_t *n,
		    struct pbx_err *err);
void pbx_sinfo_free(struct pbx_sinfo_node *nodes, size_t n);
/* True for states in which a node can take work (idle, mix, alloc, comp,
 * alloc+, and 21.08's plnd and mix-, 24.05's block), false when it is down,
 * drained, failing, powered down or not responding (a '*' suffix). */
int pbx_sinfo_state_usable(const char *state);
/* True for states a `scontrol update state=resume` may fix: down, drained,
 * invalid, failed (with or without the '*'). */
int pbx_sinfo_state_resumable(const char *state);
/* The state of `name` in the list, or NULL. */
const char *pbx_sinfo_state_of(const struct pbx_sinfo_node *nodes, size_t n, const char *name);

#endif
