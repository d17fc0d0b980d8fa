/*
 * testkill.h - kill points for the crash tests: PBX_TEST_KILL_AT=PHASE:N
 * makes pbx kill itself with SIGKILL, exactly as `kill -9` would, when the
 * named phase reaches N (PHASE:N:INT: SIGINT instead, as Ctrl-C would).
 * Unset (always, outside tests) it does nothing.
 * The phases, and the tests that use them:
 *   stream, install, ingest   harvest (src/jobs/harvest.c; t0310)
 *   power                     1: a resume's nodes marked waking, before the
 *                             start that makes them (src/cluster/slurm_sleep.c)
 *   start                     1: instances made, before the bootstrap;
 *                             2: bootstrapped, before SLURM sees the nodes
 *                             (src/cluster/start.c; t0137)
 */
#ifndef PBX_UTIL_TESTKILL_H
#define PBX_UTIL_TESTKILL_H

#include <stdint.h>

void pbx_test_kill_point(const char *phase, uint64_t reached);

#endif
