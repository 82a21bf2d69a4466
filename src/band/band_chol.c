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
 *   l >= CHOL_BLOCKED_MIN   chol_blocked: right-looking in blocks of nb
 *                           columns with dtrsm + dsyrk on each block.
 *
 * Measured on the development machine (AMD EPYC Zen 3, 1 thread, OpenBLAS
 * 0.3.21 Zen kernels, gcc -O3, portable x86-64 build): n = 2e4, milliseconds
 * of thread CPU time, minimum over 18 .. 36 runs interleaved with dpbtrf on a
 * machine shared with other jobs (single runs vary by 10 .. 30%).
 * "unblocked"/"blocked" force one path at every l.
 *
 *     l            1     3    11    24    32    40    48    64    80   117   160   250
 *     dpbtrf     0.57  0.81  1.67  3.74  5.40  7.05  8.78  13.4  9.84  15.3  22.9  45.9
 *     unblocked  0.22  0.31  0.66  1.48  2.21  3.08  4.05  6.95  10.5  20.2  37.0  96.5
 *     blocked      -     -   2.06  2.09  2.81  3.52  4.14  6.34  8.34  14.2  22.7  47.2
 *
 * The paths cross near l = 48.  dpbtrf itself switches from its unblocked
 * loop (one dsyr per column) to a blocked path between l = 64 and 80, hence
 * its dip there; it and the blocked path call the same OpenBLAS kernels, so
 * beyond l ~ 100 the two stay within 10% of each other (dpbtrf splits the
 * trailing update of a block into five calls where chol_blocked makes two).
 * tests/bench/bench_band.c measures the grid of the report (n up to 1e6).
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

/* Bandwidth from which the blocked path is used (table above; a -D override
 * exists for re-tuning). */
#ifndef CHOL_BLOCKED_MIN
#define CHOL_BLOCKED_MIN 48
#endif

/* A pivot is accepted when it is a normal positive double: below DBL_MIN its
 * reciprocal (used by the kernel) overflows, NaN and +inf fail the tests. */
static int pivot_ok(double d) { return d >= DBL_MIN && d <= DBL_MAX; }

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
 * followed by a division; at small bw that chain is the whole cost. */
BAND_INLINE size_t chol_unblocked_body(double *a, size_t n, size_t bw, size_t s, double *bad)
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
    for (; j + 1 < n; j += 2) {
        double *restrict c0 = a + j * s; /* c0[i] = A(i, j)   */
        double *restrict c1 = c0 + s;    /* c1[i] = A(i, j+1) */
        size_t e0 = j + bw < n ? j + bw : n - 1;         /* last row of column j   */
        size_t e1 = j + 1 + bw < n ? j + 1 + bw : n - 1; /* last row of column j+1 */
        double d0 = c0[j];
        if (!pivot_ok(d0)) {
            *bad = d0;
            return j;
        }
        double r0 = 1.0 / d0;
        double f = c0[j + 1] * r0;
        for (size_t i = j + 1; i <= e0; i++)
            c1[i] -= c0[i] * f;
        double d1 = c1[j + 1];
        if (!pivot_ok(d1)) {
            *bad = d1;
            return j + 1;
        }
        double r1 = 1.0 / d1;
        for (size_t q = j + 2; q <= e1; q++) {
            double *restrict cq = a + q * s;
            double f0 = q <= e0 ? c0[q] * r0 : 0.0; /* row q may lie past column j's band */
            double f1 = c1[q] * r1;
            size_t i = q;
            for (; i <= e0; i++)
                cq[i] -= c0[i] * f0 + c1[i] * f1;
            if (i <= e1) /* row j+1+bw: in column j+1's band only */
                cq[i] -= c1[i] * f1;
        }
        double s0 = sqrt(d0), s1 = sqrt(d1), i0 = 1.0 / s0, i1 = 1.0 / s1;
        c0[j] = s0;
        c1[j + 1] = s1;
        for (size_t i = j + 1; i <= e0; i++)
            c0[i] *= i0;
        for (size_t i = j + 2; i <= e1; i++)
            c1[i] *= i1;
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
 * (band_simd.h); the AVX2 copy is ~1.25x faster at l = 24 .. 40. */
static size_t chol_unblocked_base(double *a, size_t n, size_t bw, size_t s, double *bad)
{
    return chol_unblocked_body(a, n, bw, s, bad);
}
#if BAND_AVX2
BAND_TARGET_AVX2 static size_t chol_unblocked_avx2(double *a, size_t n, size_t bw, size_t s,
                                                   double *bad)
{
    return chol_unblocked_body(a, n, bw, s, bad);
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
        row = chol_unblocked(a, n, l, l, &bad);
    } else {
        size_t nb = chol_block_width(l);
        double *work = gmm_malloc(l * nb, sizeof(double));
        if (!work)
            return gmm_error(GMM_ENOMEM, "chol: out of memory for a %zu x %zu panel", l, nb);
        row = chol_blocked(a, n, l, nb, work, &bad);
        gmm_free(work);
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
