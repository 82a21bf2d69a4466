/* band_chol.c -- banded Cholesky L L^T = Q and log det(L L^T).
 *
 * Storage (include/gmm/band.h): with ku = 0 the entry (i, j) of an n x n band
 * of lower bandwidth l lives at data[j*l + i] (ld - 1 = l), so the kernels
 * below address "column j" as a + j*s with s = l and read A(i, j) as
 * a[j*s + i].  Any block of entries that lies wholly inside the band is
 * therefore an ordinary column-major matrix with leading dimension s, which is
 * what lets BLAS-3 work on the band in place (LAPACK's dpbtrf uses the same
 * trick, LDAB - 1).
 *
 * Two paths, chosen by the bandwidth:
 *
 *   l <  CHOL_BLOCKED_MIN   chol_unblocked: right-looking, two columns at a
 *                           time, hand loops (run as an AVX2 build when the
 *                           CPU has it, band_simd.h).  No calls, no copies.
 *                           For l <= 16 a copy compiled for that l with its
 *                           loops unrolled (FIXED BANDWIDTHS).
 *   l >= CHOL_BLOCKED_MIN   chol_blocked: right-looking in blocks of nb
 *                           columns with dtrsm + dsyrk on each block.
 *
 * CHOL_BLOCKED_MIN is the bandwidth from which the blocked path costs less
 * than the hand loops (re-tune it with -D and tests/bench/bench_band.c).
 * Beyond it the blocked path and LAPACK's dpbtrf spend their time in the same
 * BLAS kernels; dpbtrf splits the trailing update of a block into five calls
 * where chol_blocked makes two.  Times: docs/benchmarks.md.
 */
#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "band_chol_impl.h"
#include "band_simd.h"
#include "gmm/alloc.h"
#include "gmm/band.h"

/* A pivot is accepted when it is a normal positive double: below DBL_MIN its
 * reciprocal (used by the kernel) overflows, NaN and +inf fail the tests. */
static int pivot_ok(double d) { return d >= DBL_MIN && d <= DBL_MAX; }

/* The pair step (band_chol_pair.h): plain, and unrolled for the fixed
 * bandwidths (FIXED BANDWIDTHS below; unrolling the generic loops by 16 too
 * slowed l = 17 .. 32 down). */
#define CHOL_PAIR chol_pair
#define CHOL_UNROLL
#include "band_chol_pair.h"
#undef CHOL_PAIR
#undef CHOL_UNROLL
#define CHOL_PAIR chol_pair_unrolled
/* Sanitizer builds instrument every unrolled access: the forced unroll
 * there took minutes to compile this file, so they test the same steps
 * rolled (identical arithmetic; the unroll changes only the code layout). */
#if defined(__SANITIZE_ADDRESS__)
#define CHOL_UNROLL
#else
#define CHOL_UNROLL _Pragma("GCC unroll 16")
#endif
#include "band_chol_pair.h"
#undef CHOL_PAIR
#undef CHOL_UNROLL

/* In-place Cholesky of the n x n band of bandwidth bw <= s held at
 * a[j*s + i] (i = j .. j + bw).  Returns n, or the first row whose pivot is
 * not acceptable (its value in *bad).
 *
 * Right-looking by pairs of columns (j, j+1): the pair is pivoted, then the
 * columns j+2 .. j+1+bw it reaches get one rank-2 update, which halves the
 * loads and stores of the trailing update compared with one column at a time.
 * The square root is deferred: the trailing update uses the unscaled columns
 * and the reciprocal pivot,
 *     A(i,q) -= A(i,j) A(q,j) / d_j,        L(i,j) = A(i,j) / sqrt(d_j),
 * so the chain from one pivot to the next is one division, not a square root
 * followed by a division; at small bw that chain is the whole cost.  The
 * pairs whose columns reach their full length (all but the last few) run in
 * a loop of their own, so that a constant bw gives constant trip counts. */
BAND_INLINE size_t chol_unblocked_body(double *a, size_t n, size_t bw, size_t s, int fixed,
                                       double *bad)
{
    if (bw == 0) {
        for (size_t j = 0; j < n; j++) {
            double *d = a + j * s + j;
            if (!pivot_ok(*d)) {
                *bad = *d;
                return j;
            }
            *d = sqrt(*d);
        }
        return n;
    }
    size_t j = 0;
    for (; j + bw + 2 <= n; j += 2) {
        int r = fixed ? chol_pair_unrolled(a, j, j + bw, j + 1 + bw, s, bad)
                      : chol_pair(a, j, j + bw, j + 1 + bw, s, bad);
        if (r)
            return j + (size_t)r - 1;
    }
    for (; j + 1 < n; j += 2) {
        size_t e0 = j + bw < n ? j + bw : n - 1;         /* last row of column j   */
        size_t e1 = j + 1 + bw < n ? j + 1 + bw : n - 1; /* last row of column j+1 */
        int r = chol_pair(a, j, e0, e1, s, bad);
        if (r)
            return j + (size_t)r - 1;
    }
    if (j < n) { /* odd n: the last column has no entries below the diagonal */
        double *d = a + j * s + j;
        if (!pivot_ok(*d)) {
            *bad = *d;
            return j;
        }
        *d = sqrt(*d);
    }
    return n;
}

/* The body above, compiled for the x86-64 baseline and for AVX2
 * (band_simd.h). */
static size_t chol_unblocked_base(double *a, size_t n, size_t bw, size_t s, double *bad)
{
    return chol_unblocked_body(a, n, bw, s, 0, bad);
}
#if BAND_AVX2
BAND_TARGET_AVX2 static size_t chol_unblocked_avx2(double *a, size_t n, size_t bw, size_t s,
                                                   double *bad)
{
    return chol_unblocked_body(a, n, bw, s, 0, bad);
}
#endif
static size_t chol_unblocked(double *a, size_t n, size_t bw, size_t s, double *bad)
{
#if BAND_AVX2
    if (band_cpu_has_avx2())
        return chol_unblocked_avx2(a, n, bw, s, bad);
#endif
    return chol_unblocked_base(a, n, bw, s, bad);
}

/* FIXED BANDWIDTHS.  For the small bandwidths of state-space models the body
 * is instantiated with bw = s = L a compile-time constant (both builds), so
 * the pair step of the interior is straight-line code with constant offsets.
 * Same operations in the same order as the generic copy: bit-identical. */
#define CHOL_FIXED_MAX 16
#define CHOL_FIXED_LIST(F)                                                                     \
    F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15) F(16)
typedef size_t (*chol_fn)(double *a, size_t n, double *bad);
#define CHOL_FIXED_BASE(L)                                                                     \
    static size_t chol_fixed_base_##L(double *a, size_t n, double *bad)                       \
    {                                                                                          \
        return chol_unblocked_body(a, n, L, L, 1, bad);                                           \
    }
CHOL_FIXED_LIST(CHOL_FIXED_BASE)
#define CHOL_FIXED_ENTRY_BASE(L) chol_fixed_base_##L,
static const chol_fn chol_fixed_base[CHOL_FIXED_MAX + 1] = {
    NULL, CHOL_FIXED_LIST(CHOL_FIXED_ENTRY_BASE)};
#if BAND_AVX2
#define CHOL_FIXED_AVX2(L)                                                                     \
    BAND_TARGET_AVX2 static size_t chol_fixed_avx2_##L(double *a, size_t n, double *bad)      \
    {                                                                                          \
        return chol_unblocked_body(a, n, L, L, 1, bad);                                           \
    }
CHOL_FIXED_LIST(CHOL_FIXED_AVX2)
#define CHOL_FIXED_ENTRY_AVX2(L) chol_fixed_avx2_##L,
static const chol_fn chol_fixed_avx2[CHOL_FIXED_MAX + 1] = {
    NULL, CHOL_FIXED_LIST(CHOL_FIXED_ENTRY_AVX2)};
#endif

/* The whole band of bandwidth l (stride l), by a fixed-bandwidth copy when
 * there is one. */
static size_t chol_band(double *a, size_t n, size_t l, double *bad)
{
    if (l >= 1 && l <= CHOL_FIXED_MAX) {
#if BAND_AVX2
        if (band_cpu_has_avx2())
            return chol_fixed_avx2[l](a, n, bad);
#endif
        return chol_fixed_base[l](a, n, bad);
    }
    return chol_unblocked(a, n, l, l, bad);
}

/* Rows of the panel below the nb x nb diagonal block of block column i that
 * column c (0-based in the block) holds inside the band: rows i+ib .. i+c+l,
 * cut at the panel's m rows.  Needs ib <= l. */
static size_t panel_rows(size_t c, size_t ib, size_t l, size_t m)
{
    size_t k = c + l - ib + 1;
    return k < m ? k : m;
}

/* Blocked right-looking factorisation, the structure of LAPACK's dpbtrf.
 * For the block column of width ib starting at i, with m = min(l, n-i-ib):
 *
 *     [ A11      ]        L11 = chol(A11)                    (chol_unblocked)
 *     [ AP   C   ]        P   = AP L11^{-T}                  (dtrsm, m x ib)
 *                         C  -= P P^T, lower m x m           (dsyrk)
 *
 * AP (rows i+ib .. i+ib+m-1 of the block) is a rectangle whose bottom-left
 * triangle lies outside the band; those slots alias other entries, so AP is
 * copied into a zero-padded work panel (m x ib, leading dimension l) and
 * copied back after the solve.  C is the whole lower triangle of the next
 * m x m diagonal window, which lies inside the band (i - j <= m - 1 < l), so
 * a single dsyrk updates it in place.  dpbtrf instead splits the same update
 * into five calls; one dtrsm + one dsyrk on a bigger panel is cheaper.
 * work: l * nb doubles. */
static size_t chol_blocked(double *a, size_t n, size_t l, size_t nb, double *work, double *bad)
{
    int ldl = (int)l;
    for (size_t i = 0; i < n; i += nb) {
        size_t ib = n - i < nb ? n - i : nb;
        double *a11 = a + i * l + i;
        size_t r = chol_unblocked(a11, ib, ib - 1, l, bad);
        if (r < ib)
            return i + r;
        if (i + ib == n)
            break;
        size_t m = n - i - ib < l ? n - i - ib : l;
        for (size_t c = 0; c < ib; c++) {
            size_t k = panel_rows(c, ib, l, m);
            memcpy(work + c * l, a11 + c * l + ib, k * sizeof(double));
            memset(work + c * l + k, 0, (m - k) * sizeof(double));
        }
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)m,
                    (int)ib, 1.0, a11, ldl, work, ldl);
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)m, (int)ib, -1.0, work, ldl,
                    1.0, a11 + ib * l + ib, ldl);
        for (size_t c = 0; c < ib; c++)
            memcpy(a11 + c * l + ib, work + c * l, panel_rows(c, ib, l, m) * sizeof(double));
    }
    return n;
}

gmm_status gmm_band_chol_decomp(const gmm_band *Q, gmm_band *L)
{
    return gmm_band_chol_decomp_work(Q, L, NULL);
}

gmm_status gmm_band_chol_decomp_work(const gmm_band *Q, gmm_band *L, double *work)
{
    /* In place (L == Q) the one struct is SYMMETRIC on entry and becomes
     * LOWER on success. */
    int in_place = L == Q;
    if (Q->kind != GMM_BAND_SYMMETRIC || (!in_place && L->kind != GMM_BAND_LOWER))
        return gmm_error(GMM_EDIM, "chol: Q must be SYMMETRIC and L LOWER (kinds %d, %d)",
                         (int)Q->kind, (int)L->kind);
    if (L->n != Q->n || L->kl != Q->kl)
        return gmm_error(GMM_EDIM, "chol: L is %zu x %zu with bandwidth %zu, Q %zu x %zu with %zu",
                         L->n, L->n, L->kl, Q->n, Q->n, Q->kl);
    size_t n = Q->n, l = Q->kl;
    if (n == 0) {
        L->kind = GMM_BAND_LOWER;
        return GMM_OK;
    }
    if (L->data != Q->data)
        memcpy(L->data, Q->data, Q->ld * n * sizeof(double));

    double *a = gmm_band_col(L, 0); /* a[j*l + i] = L(i, j) */
    double bad = 0.0;
    size_t row;
    if (l < CHOL_BLOCKED_MIN || l > (size_t)INT_MAX) { /* BLAS takes int sizes */
        row = chol_band(a, n, l, &bad);
    } else {
        size_t nb = chol_block_width(l);
        double *own = NULL;
        if (!work && !(work = own = gmm_malloc(l * nb, sizeof(double))))
            return gmm_error(GMM_ENOMEM, "chol: out of memory for a %zu x %zu panel", l, nb);
        row = chol_blocked(a, n, l, nb, work, &bad);
        gmm_free(own);
    }
    if (row < n)
        return gmm_error_at(GMM_ENOTPD, row, "matrix not positive definite: pivot of row %zu is %g",
                            row, bad);
    L->kind = GMM_BAND_LOWER;
    return GMM_OK;
}

double gmm_band_chol_logdet(const gmm_band *L)
{
    /* Summing logs (not log of a product) cannot overflow. */
    double s = 0.0;
    for (size_t i = 0; i < L->n; i++)
        s += log(gmm_band_col(L, i)[i]);
    return 2.0 * s;
}
