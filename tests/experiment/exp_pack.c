/*
 * exp_pack.c - test driver: loads an experiment file, builds its package
 * and writes the tar (all tasks, or FIRST N), as pbx parrun will; prints
 * "SHORT_ID NTASKS".  Used by wrapper.sh to run the real task wrapper.
 *
 * Usage: exp_pack EXPERIMENT.yaml OUT.tar [FIRST N]
 */
#include "experiment/experiment.h"
#include "experiment/package.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_experiment *e = NULL;
	struct pbx_package *p = NULL;
	size_t first = 0, n;
	int rc = 1;
	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: exp_pack EXPERIMENT.yaml OUT.tar [FIRST N]\n");
		return 2;
	}
	if (pbx_experiment_load(argv[1], &e, &err) < 0 || pbx_package_build(e, &p, &err) < 0)
		goto out;
	n = e->npoints;
	if (argc == 5) {
		first = strtoul(argv[3], NULL, 10);
		n = strtoul(argv[4], NULL, 10);
	}
	if (pbx_package_write_tar(p, e, first, n, argv[2], &err) < 0)
		goto out;
	printf("%s %zu\n", p->short_id, e->npoints);
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "exp_pack: %s\n", err.msg);
	pbx_package_free(p);
	pbx_experiment_free(e);
	return rc;
}
