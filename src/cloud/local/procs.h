/*
 * procs.h - finding and ending every process that belongs to a local
 * cluster: any process whose command line, environment or working
 * directory mentions the cluster's directory.  Daemons started by the
 * bootstrap (sshd, munged, slurmctld, slurmd) name their prefix on the
 * command line; slurmstepd and job processes inherit PBX_ROOT / SLURM_CONF
 * in their environment.  This is the local analogue of "find by label".
 */
#ifndef PBX_CLOUD_LOCAL_PROCS_H
#define PBX_CLOUD_LOCAL_PROCS_H

#include <stddef.h>
#include <sys/types.h>

/* `dir` must end in '/', so that cluster "a" never matches cluster "ab".
 * Pids of processes that mention `dir` (never this process or its
 * ancestors).  Returns the count; *pids owned by the caller (free). */
size_t pbx_local_procs_find(const char *dir, pid_t **pids);
/* TERM, wait up to grace_ms, then KILL what is left.  Returns how many
 * processes were signalled. */
size_t pbx_local_procs_kill(const char *dir, int grace_ms);

#endif
