/*
 * gemm.c - sgemm split across the OpenMP threads, each running OpenBLAS
 * single-threaded on its own block of C.
 *
 * Why: pbx-train's threads are OpenMP's.  Letting OpenBLAS start its own
 * pool as well puts two sets of threads on the same cores; on a small
 * machine OpenBLAS's idle workers spin in sched_yield while the OpenMP loops
 * run, and a third of the time went there.  Splitting C by rows or columns
 * (whichever is longer, in blocks of 16) keeps one pool, and since every
 * element of C is computed by exactly one call with the whole K reduction,
 * the result does not depend on the split: deterministic for any thread
 * count.  Call pbx_gemm_init() once (it pins OpenBLAS to one thread).
 */
#include "train/layers/layers.h"

#include <cblas.h>
#include <omp.h>

void pbx_gemm_init(void)
{
	openblas_set_num_threads(1);
}

void pbx_gemm(int transa, int transb, int M, int N, int K, float alpha,
	      const float *A, int lda, const float *B, int ldb, float beta,
	      float *C, int ldc)
{
	enum CBLAS_TRANSPOSE ta = transa ? CblasTrans : CblasNoTrans;
	enum CBLAS_TRANSPOSE tb = transb ? CblasTrans : CblasNoTrans;
	int nt = omp_get_max_threads();
	long long work = (long long)M * N * K;
	if (nt <= 1 || work < (1LL << 18) || omp_in_parallel()) {
		cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B,
			    ldb, beta, C, ldc);
		return;
	}
	int split_n = N >= M;
	int len = split_n ? N : M;
	int chunk = (len + nt - 1) / nt;
	chunk = (chunk + 15) / 16 * 16;
	#pragma omp parallel for schedule(static) num_threads(nt)
	for (int t = 0; t < nt; t++) {
		int lo = t * chunk, hi = lo + chunk < len ? lo + chunk : len;
		if (lo >= hi)
			continue;
		if (split_n) /* C[:, lo:hi] = op(A) x op(B)[:, lo:hi] */
			cblas_sgemm(CblasRowMajor, ta, tb, M, hi - lo, K, alpha,
				    A, lda, transb ? B + (size_t)lo * ldb : B + lo,
				    ldb, beta, C + lo, ldc);
		else        /* C[lo:hi, :] = op(A)[lo:hi, :] x op(B) */
			cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, N, K, alpha,
				    transa ? A + lo : A + (size_t)lo * lda, lda,
				    B, ldb, beta, C + (size_t)lo * ldc, ldc);
	}
}
