/*
 * mpi_allreduce.c - the MPI program of t0250-multirank.sh: three
 * MPI_Allreduce rounds of (rank + step) over all ranks; rank 0 writes them
 * as metrics.jsonl lines on stdout ({"step": S, "name": "sum", ...}), every
 * rank says on stderr which node (SLURMD_NODENAME) it ran on.  With n ranks
 * step S sums to n*S + n*(n-1)/2, so the values show every rank took part.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	const char *node = getenv("SLURMD_NODENAME");
	double v, sum;
	int rank, size, step;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (step = 1; step <= 3; step++) {
		v = rank + step;
		MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		if (rank == 0)
			printf("{\"step\": %d, \"name\": \"sum\", \"value\": %g}\n", step, sum);
	}
	fprintf(stderr, "rank %d of %d on %s\n", rank, size, node ? node : "?");
	MPI_Finalize();
	return 0;
}
