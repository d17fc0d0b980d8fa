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
#include <string.h>

void pbx_gemm_init(void)
{
	openblas_set_num_threads(1);
	pbx_gemm_small_init();
}

/* One single-threaded product (defined below): the AVX-512 kernel where
 * it applies, else OpenBLAS. */
static void gemm_one(int transa, int transb, int M, int N, int K, float alpha, const float *A,
		     int lda, const float *B, int ldb, float beta, float *C, int ldc);

void pbx_gemm(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda,
	      const float *B, int ldb, float beta, float *C, int ldc)
{
	int nt = omp_get_max_threads();
	long long work = (long long)M * N * K;
	if (!omp_in_parallel())
		pbx_gemm_small_init();
	if (nt <= 1 || work < (1LL << 18) || omp_in_parallel()) {
		gemm_one(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
			gemm_one(transa, transb, M, hi - lo, K, alpha, A, lda,
				 transb ? B + (size_t)lo * ldb : B + lo, ldb, beta, C + lo, ldc);
		else /* C[lo:hi, :] = op(A)[lo:hi, :] x op(B) */
			gemm_one(transa, transb, hi - lo, N, K, alpha,
				 transa ? A + lo : A + (size_t)lo * lda, lda, B, ldb, beta,
				 C + (size_t)lo * ldc, ldc);
	}
}

/* ------------------------------------------------- small single-threaded */

/*
 * The Winograd convolution's 16 products per chunk are small (M, N or K
 * of 32-64) and already run on every thread.  OpenBLAS does them well
 * with the kernels it is given, but the VM's OPENBLAS_CORETYPE=Haswell
 * pins those to AVX2; where the CPU has AVX-512 these two kernels use it
 * (a CPU with 512-bit FMA units doubles the rate).  Both keep a fixed
 * summation order: the same floats on every run on the same CPU.
 */
int pbx_gemm_avx512 = -1;

void pbx_gemm_small_init(void)
{
	if (pbx_gemm_avx512 < 0) {
#if defined(__x86_64__) && defined(__GNUC__)
		__builtin_cpu_init();
		pbx_gemm_avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
#else
		pbx_gemm_avx512 = 0;
#endif
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMM512 __attribute__((target("avx512f")))

/* C[8 rows, 2x16 columns (masks m0, m1)] (beta 0: =, 1: +=) =
 * opA[8, K] x B[K, cols], opA(r, k) = A[r*rs + k*ks] (rs = lda, ks = 1
 * plain; rs = 1, ks = lda transposed).  Named accumulators: GCC keeps an
 * array of them in memory. */
GEMM512 static void gemm512_8x32(int K, const float *A, size_t rs, size_t ks, const float *B,
				 int ldb, float *C, int ldc, __mmask16 m0, __mmask16 m1, int beta)
{
#define ROW(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0
	ROW(0);
	ROW(1);
	ROW(2);
	ROW(3);
	ROW(4);
	ROW(5);
	ROW(6);
	ROW(7);
#undef ROW
	const float *a = A;
	for (int k = 0; k < K; k++, a += ks) {
		const float *b = B + (size_t)k * ldb;
		__m512 b0 = _mm512_maskz_loadu_ps(m0, b);
		__m512 b1 = _mm512_maskz_loadu_ps(m1, b + 16);
		__m512 x;
#define ROW(r)                                     \
	x = _mm512_set1_ps(a[(size_t)(r)*rs]);     \
	c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0); \
	c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1)
		ROW(0);
		ROW(1);
		ROW(2);
		ROW(3);
		ROW(4);
		ROW(5);
		ROW(6);
		ROW(7);
#undef ROW
	}
#define ROW(r)                                                                                \
	do {                                                                                  \
		float *cr = C + (size_t)(r)*ldc;                                              \
		if (beta) {                                                                   \
			c##r##0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), c##r##0);      \
			c##r##1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), c##r##1); \
		}                                                                             \
		_mm512_mask_storeu_ps(cr, m0, c##r##0);                                       \
		_mm512_mask_storeu_ps(cr + 16, m1, c##r##1);                                  \
	} while (0)
	ROW(0);
	ROW(1);
	ROW(2);
	ROW(3);
	ROW(4);
	ROW(5);
	ROW(6);
	ROW(7);
#undef ROW
}

/* The same for one row (the M % 8 rows left over). */
GEMM512 static void gemm512_1x32(int K, const float *A, size_t ks, const float *B, int ldb,
				 float *C, __mmask16 m0, __mmask16 m1, int beta)
{
	__m512 c0 = _mm512_setzero_ps(), c1 = c0;
	for (int k = 0; k < K; k++) {
		const float *b = B + (size_t)k * ldb;
		__m512 x = _mm512_set1_ps(A[(size_t)k * ks]);
		c0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m0, b), c0);
		c1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m1, b + 16), c1);
	}
	if (beta) {
		c0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, C), c0);
		c1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, C + 16), c1);
	}
	_mm512_mask_storeu_ps(C, m0, c0);
	_mm512_mask_storeu_ps(C + 16, m1, c1);
}

/* C (M,N) (beta 0: =, 1: +=) = opA (M,K) x B (K,N), opA as above. */
GEMM512 static void gemm512_nn(int M, int N, int K, const float *A, size_t rs, size_t ks,
			       const float *B, int ldb, float *C, int ldc, int beta)
{
	int M8 = M / 8 * 8;
	for (int j = 0; j < N; j += 32) {
		int n = N - j < 32 ? N - j : 32;
		__mmask16 m0 = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
		__mmask16 m1 = (__mmask16)(n >= 32 ? 0xFFFF : n > 16 ? (1u << (n - 16)) - 1 : 0);
		for (int i = 0; i < M8; i += 8)
			gemm512_8x32(K, A + (size_t)i * rs, rs, ks, B + j, ldb,
				     C + (size_t)i * ldc + j, ldc, m0, m1, beta);
		for (int i = M8; i < M; i++)
			gemm512_1x32(K, A + (size_t)i * rs, ks, B + j, ldb, C + (size_t)i * ldc + j,
				     m0, m1, beta);
	}
}

/* C[4, 4] += A[4, K] . B[4, K] (rows as dot products), named
 * accumulators. */
GEMM512 static void gemm512_nt_4x4(int K, const float *A, int lda, const float *B, int ldb,
				   float *C, int ldc)
{
#define ROW(r)                                                                      \
	__m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0, c##r##2 = c##r##0, \
	       c##r##3 = c##r##0
	ROW(0);
	ROW(1);
	ROW(2);
	ROW(3);
#undef ROW
	for (int k = 0; k < K; k += 16) {
		__mmask16 m = (__mmask16)(K - k >= 16 ? 0xFFFF : (1u << (K - k)) - 1);
		__m512 b0 = _mm512_maskz_loadu_ps(m, B + k);
		__m512 b1 = _mm512_maskz_loadu_ps(m, B + (size_t)ldb + k);
		__m512 b2 = _mm512_maskz_loadu_ps(m, B + (size_t)2 * ldb + k);
		__m512 b3 = _mm512_maskz_loadu_ps(m, B + (size_t)3 * ldb + k);
		__m512 x;
#define ROW(r)                                                 \
	x = _mm512_maskz_loadu_ps(m, A + (size_t)(r)*lda + k); \
	c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);             \
	c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);             \
	c##r##2 = _mm512_fmadd_ps(x, b2, c##r##2);             \
	c##r##3 = _mm512_fmadd_ps(x, b3, c##r##3)
		ROW(0);
		ROW(1);
		ROW(2);
		ROW(3);
#undef ROW
	}
#define ROW(r)                                                   \
	C[(size_t)(r)*ldc] += _mm512_reduce_add_ps(c##r##0);     \
	C[(size_t)(r)*ldc + 1] += _mm512_reduce_add_ps(c##r##1); \
	C[(size_t)(r)*ldc + 2] += _mm512_reduce_add_ps(c##r##2); \
	C[(size_t)(r)*ldc + 3] += _mm512_reduce_add_ps(c##r##3)
	ROW(0);
	ROW(1);
	ROW(2);
	ROW(3);
#undef ROW
}

/* C[i, j] += A[i, K] . B[j, K] for one element (the edges). */
GEMM512 static void gemm512_nt_1x1(int K, const float *A, const float *B, float *C)
{
	__m512 c = _mm512_setzero_ps();
	for (int k = 0; k < K; k += 16) {
		__mmask16 m = (__mmask16)(K - k >= 16 ? 0xFFFF : (1u << (K - k)) - 1);
		c = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, A + k),
				    _mm512_maskz_loadu_ps(m, B + k), c);
	}
	*C += _mm512_reduce_add_ps(c);
}

/* C (M,N) += A (M,K) x B (N,K)^T, in blocks of 512 of K (so that the rows
 * of a block stay in L2 while every 4x4 block of C passes over them). */
GEMM512 static void gemm512_nt_acc(int M, int N, int K, const float *A, int lda, const float *B,
				   int ldb, float *C, int ldc)
{
	for (int k0 = 0; k0 < K; k0 += 512) {
		int kn = K - k0 < 512 ? K - k0 : 512;
		const float *Ak = A + k0, *Bk = B + k0;
		for (int i = 0; i < M; i += 4) {
			for (int j = 0; j < N; j += 4) {
				float *c = C + (size_t)i * ldc + j;
				if (M - i >= 4 && N - j >= 4) {
					gemm512_nt_4x4(kn, Ak + (size_t)i * lda, lda,
						       Bk + (size_t)j * ldb, ldb, c, ldc);
					continue;
				}
				for (int r = i; r < M && r < i + 4; r++)
					for (int q = j; q < N && q < j + 4; q++)
						gemm512_nt_1x1(kn, Ak + (size_t)r * lda,
							       Bk + (size_t)q * ldb,
							       C + (size_t)r * ldc + q);
			}
		}
	}
}
#endif

void pbx_gemm_small_nn(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
		       float *C, int ldc)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (pbx_gemm_avx512 > 0) {
		gemm512_nn(M, N, K, A, (size_t)lda, 1, B, ldb, C, ldc, 0);
		return;
	}
#endif
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, 0.0f,
		    C, ldc);
}

void pbx_gemm_small_nt_acc(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
			   float *C, int ldc)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (pbx_gemm_avx512 > 0) {
		gemm512_nt_acc(M, N, K, A, lda, B, ldb, C, ldc);
		return;
	}
#endif
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C,
		    ldc);
}

/* The AVX-512 kernels take alpha 1, beta 0 or 1, and either op(B) = B
 * with an inner dimension whose B panel (K x 32 floats) stays in L1/L2
 * (no K blocking: fc1's gradients, K = batch, and im2col convs), or
 * op(A) = A, op(B) = B^T (fc1's forward, as dot products); the rest goes
 * to OpenBLAS. */
static void gemm_one(int transa, int transb, int M, int N, int K, float alpha, const float *A,
		     int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (pbx_gemm_avx512 > 0 && alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {
		if (!transb && K <= 512) {
			gemm512_nn(M, N, K, A, transa ? 1 : (size_t)lda, transa ? (size_t)lda : 1,
				   B, ldb, C, ldc, beta != 0.0f);
			return;
		}
		if (transb && !transa) { /* fc1's forward */
			if (beta == 0.0f)
				for (int i = 0; i < M; i++)
					memset(C + (size_t)i * ldc, 0, sizeof(float) * N);
			gemm512_nt_acc(M, N, K, A, lda, B, ldb, C, ldc);
			return;
		}
	}
#endif
	cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans,
		    transb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
		    ldc);
}
