/* band_chol_rev.c -- reverse mode of the banded Cholesky and of its
 * log-determinant.
 *
 * DERIVATION.  Giles (2008), "Collected matrix derivative results for forward
 * and reverse mode AD", gives the reverse sweep of the unblocked Cholesky; the
 * paper's appendix Alg. 2 is its banded, row-oriented form.  Murray (2016),
 * "Differentiation of the Cholesky decomposition" (arXiv:1602.07527), gives
 * the column-oriented unblocked sweep and the blocked one used here.  For one
 * column j of the forward sweep (left-looking form),
 *
 *     D = L(j,j) = sqrt(A(j,j) - R R^T),   C = L(j+1:, j) = (A(j+1:, j) - B R^T) / D,
 *
 * with R = L(j, :j) and B = L(j+1:, :j), the reverse step is
 *
 *     Abar(j+1:, j) = Cbar / D
 *     Abar(j, j)    = (Dbar - Cbar.C / D) / (2 D)
 *     Bbar         -= Abar(j+1:, j) R
 *     Rbar         -= Abar(j+1:, j)^T B + 2 Abar(j, j) R
 *
 * run for j = n-1 down to 0 in the storage of Lbar.  Because the forward pass
 * reads only the lower triangle of Q, Abar is the derivative with respect to
 * the stored lower entries: exactly band.h's symmetric convention, no factor
 * of two to add.  In the band, R, B and C are the parts of those rows and
 * columns inside the band, so a step costs O(l^2) and the sweep O(n l^2).
 *
 * WORKING CONVENTION.  Internally the sweep keeps H = Abar + Abar^T restricted
 * to the lower band, i.e. H(i,j) = Abar(i,j) off the diagonal and
 * H(j,j) = 2 Abar(j,j): H is the matrix that multiplies a factor in the
 * adjoint of a symmetric update (for C -= P P^T read on its lower triangle,
 * Pbar -= H P), so the blocked sweep can hand it to dsymm unchanged.  The
 * diagonal is halved once at the end.
 *
 * WHAT THE FORWARD PASS MUST SAVE: only L.  Nothing else is needed (the
 * sweep never needs Q), so callers keep L and may factor Q in place.
 *
 * Two paths, as in the forward (band_chol.c): an unblocked sweep over pairs of
 * columns for small l (run as an AVX2 build when the CPU has it,
 * band_simd.h; for l <= 16 a copy compiled for that l, its interior steps
 * unrolled: FIXED BANDWIDTHS), and, from CHOL_REV_BLOCKED_MIN on, a blocked sweep
 * that undoes the blocked forward's block steps in reverse order with dsymm,
 * dtrsm and dgemm (the BLAS-3 form of Murray's blocked algorithm, here for the
 * right-looking block step):
 *
 *     forward block step              reverse, blocks from last to first
 *     L11 = chol(A11)                 Pbar  -= H_C P                (dsymm)
 *     P   = AP L11^{-T}               APbar  = Pbar L11^{-1}        (dtrsm)
 *     C  -= P P^T                     L11bar -= tril(APbar^T P)     (dgemm)
 *                                     H11    = unblocked sweep on L11bar
 *
 * The adjoint of the trailing window C passes through unchanged (C is both
 * read and written by the update), and that of the panel AP, once computed,
 * is what the earlier block steps see as part of their own trailing window.
 */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "band_chol_impl.h"
#include "band_simd.h"
#include "gmm/alloc.h"
#include "gmm/band.h"

/* Bandwidth from which the blocked sweep is used (a -D override exists for
 * re-tuning), and its block width (as in the forward, band_chol.c: narrow
 * blocks win up to l ~ 200).  The two sweeps cross at about the same
 * bandwidth as the forward's two paths, so both switch at 48; the reverse's
 * cost relative to the forward is in docs/benchmarks.md. */
#ifndef CHOL_REV_BLOCKED_MIN
#define CHOL_REV_BLOCKED_MIN 48
#endif

/* Two doubles, for the dot products of the sweep: summed in two lanes, a dot
 * product is a vector add per pair of rows instead of a chain of dependent
 * scalar adds (which ISO C forbids the compiler to reorder).  The lanes are
 * added in a fixed order, so the result is deterministic. */
typedef double pair __attribute__((vector_size(2 * sizeof(double))));
BAND_INLINE pair pair_load(const double *p)
{
    pair v;
    memcpy(&v, p, sizeof v);
    return v;
}
BAND_INLINE void pair_store(double *p, pair v) { memcpy(p, &v, sizeof v); }

#define CHOL_REV_PAIR chol_rev_pair
#define CHOL_REV_FINISH finish_column
#define CHOL_UNROLL
#include "band_chol_rev_pair.h"
#undef CHOL_REV_PAIR
#undef CHOL_REV_FINISH
#undef CHOL_UNROLL
#define CHOL_REV_PAIR chol_rev_pair_unrolled
#define CHOL_REV_FINISH finish_column_unrolled
/* Sanitizer builds instrument every unrolled access: the forced unroll
 * there took minutes to compile this file, so they test the same steps
 * rolled (identical arithmetic; the unroll changes only the code layout). */
#if defined(__SANITIZE_ADDRESS__)
#define CHOL_UNROLL
#else
#define CHOL_UNROLL _Pragma("GCC unroll 16")
#endif
#include "band_chol_rev_pair.h"
#undef CHOL_REV_PAIR
#undef CHOL_REV_FINISH
#undef CHOL_UNROLL

/* The unblocked sweep, in place: on entry W holds Lbar of the n x n band of
 * bandwidth bw <= s stored as L (entry (i,j) at [j*s + i]); on return W holds
 * H (see above).  Columns are taken in pairs (p, p+1), p+1 first, so that
 * each column k to their left is read and written once for both: its update
 *     W(i,k) -= W(i,p) L(p,k) + W(i,p+1) L(p+1,k)
 * and the two dot products that finish rows p and p+1 of column k share one
 * pass; the sums run in two lanes.  Both halve the memory traffic of one
 * column at a time with scalar sums. */
BAND_INLINE void chol_rev_unblocked_body(const double *L, double *W, size_t n, size_t bw,
                                         size_t s, int fixed)
{
    if (bw == 0) { /* diagonal: H(j,j) = Dbar / D */
        for (size_t j = 0; j < n; j++)
            W[j * s + j] /= L[j * s + j];
        return;
    }
    size_t top = n; /* columns top .. n-1 are finished */
    if (n % 2 == 1) {
        size_t j = n - 1; /* the last column has no rows below its diagonal */
        double h = finish_column(L + j * s, W + j * s, j, j, 0);
        for (size_t k = j > bw ? j - bw : 0; k < j; k++)
            W[k * s + j] -= h * L[k * s + j];
        top = j;
    }
    while (top >= 2) {
        size_t p = top - 2, q = p + 1;
        if (fixed && p >= bw && p + bw + 2 <= n)
            chol_rev_pair_unrolled(L, W, n, bw, s, p, p + bw, q + bw, q - bw, 1);
        else
            chol_rev_pair(L, W, n, bw, s, p, p + bw < n ? p + bw : n - 1,
                          q + bw < n ? q + bw : n - 1, q > bw ? q - bw : 0, 0);
        top = p;
    }
}

/* The body above for the x86-64 baseline and for AVX2 (band_simd.h). */
static void chol_rev_unblocked_base(const double *L, double *W, size_t n, size_t bw, size_t s)
{
    chol_rev_unblocked_body(L, W, n, bw, s, 0);
}
#if BAND_AVX2
BAND_TARGET_AVX2 static void chol_rev_unblocked_avx2(const double *L, double *W, size_t n,
                                                     size_t bw, size_t s)
{
    chol_rev_unblocked_body(L, W, n, bw, s, 0);
}
#endif
static void chol_rev_unblocked(const double *L, double *W, size_t n, size_t bw, size_t s)
{
#if BAND_AVX2
    if (band_cpu_has_avx2()) {
        chol_rev_unblocked_avx2(L, W, n, bw, s);
        return;
    }
#endif
    chol_rev_unblocked_base(L, W, n, bw, s);
}

/* FIXED BANDWIDTHS (as for the forward, band_chol.c): the sweep instantiated
 * with bw = s = L a compile-time constant in both builds, its interior pairs
 * unrolled into straight-line code. */
#define CHOL_REV_FIXED_MAX 16
#define CHOL_REV_FIXED_LIST(F)                                                                 \
    F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15) F(16)
typedef void (*chol_rev_fn)(const double *L, double *W, size_t n);
#define CHOL_REV_FIXED_BASE(L_)                                                                \
    static void chol_rev_fixed_base_##L_(const double *L, double *W, size_t n)                \
    {                                                                                          \
        chol_rev_unblocked_body(L, W, n, L_, L_, 1);                                           \
    }
CHOL_REV_FIXED_LIST(CHOL_REV_FIXED_BASE)
#define CHOL_REV_ENTRY_BASE(L_) chol_rev_fixed_base_##L_,
static const chol_rev_fn chol_rev_fixed_base[CHOL_REV_FIXED_MAX + 1] = {
    NULL, CHOL_REV_FIXED_LIST(CHOL_REV_ENTRY_BASE)};
#if BAND_AVX2
#define CHOL_REV_FIXED_AVX2(L_)                                                                \
    BAND_TARGET_AVX2 static void chol_rev_fixed_avx2_##L_(const double *L, double *W,         \
                                                          size_t n)                           \
    {                                                                                          \
        chol_rev_unblocked_body(L, W, n, L_, L_, 1);                                           \
    }
CHOL_REV_FIXED_LIST(CHOL_REV_FIXED_AVX2)
#define CHOL_REV_ENTRY_AVX2(L_) chol_rev_fixed_avx2_##L_,
static const chol_rev_fn chol_rev_fixed_avx2[CHOL_REV_FIXED_MAX + 1] = {
    NULL, CHOL_REV_FIXED_LIST(CHOL_REV_ENTRY_AVX2)};
#endif

/* The sweep over the whole band of bandwidth l (stride l), by a
 * fixed-bandwidth copy when there is one. */
static void chol_rev_band(const double *L, double *W, size_t n, size_t l)
{
    if (l >= 1 && l <= CHOL_REV_FIXED_MAX) {
#if BAND_AVX2
        if (band_cpu_has_avx2()) {
            chol_rev_fixed_avx2[l](L, W, n);
            return;
        }
#endif
        chol_rev_fixed_base[l](L, W, n);
        return;
    }
    chol_rev_unblocked(L, W, n, l, l);
}

/* Copy the panel of block column i (rows i+ib .. i+ib+m-1, columns
 * i .. i+ib-1) of the band at a (stride l) into dst (m x ib, leading dimension
 * l), zero where the panel leaves the band: column c is in the band down to
 * row i+c+l, i.e. for its first c + l - ib + 1 panel rows. */
static void panel_get(const double *a, size_t l, size_t ib, size_t m, double *dst)
{
    for (size_t c = 0; c < ib; c++) {
        size_t k = c + l - ib + 1 < m ? c + l - ib + 1 : m;
        memcpy(dst + c * l, a + c * l + ib, k * sizeof(double));
        memset(dst + c * l + k, 0, (m - k) * sizeof(double));
    }
}

/* The in-band part of the panel back from src. */
static void panel_put(double *a, size_t l, size_t ib, size_t m, const double *src)
{
    for (size_t c = 0; c < ib; c++) {
        size_t k = c + l - ib + 1 < m ? c + l - ib + 1 : m;
        memcpy(a + c * l + ib, src + c * l, k * sizeof(double));
    }
}

/* The blocked sweep (see the file comment), in place on W, for bandwidth
 * l >= nb.  work: 2 l nb + nb^2 doubles. */
static void chol_rev_blocked(const double *L, double *W, size_t n, size_t l, size_t nb,
                             double *work)
{
    double *P = work, *Pbar = work + l * nb, *T = work + 2 * l * nb;
    int ldl = (int)l;
    for (size_t i = (n - 1) / nb * nb;; i -= nb) {
        size_t ib = n - i < nb ? n - i : nb;
        const double *l11 = L + i * l + i;
        double *w11 = W + i * l + i;
        if (i + ib < n) {
            size_t m = n - i - ib < l ? n - i - ib : l;
            int mi = (int)m, ibi = (int)ib;
            panel_get(l11, l, ib, m, P);
            panel_get(w11, l, ib, m, Pbar);
            cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, mi, ibi, -1.0,
                        w11 + ib * l + ib, ldl, P, ldl, 1.0, Pbar, ldl);
            cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, mi,
                        ibi, 1.0, l11, ldl, Pbar, ldl);
            cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, ibi, ibi, mi, -1.0, Pbar, ldl, P,
                        ldl, 0.0, T, ibi);
            for (size_t c = 0; c < ib; c++)
                for (size_t r = c; r < ib; r++)
                    w11[c * l + r] += T[c * ib + r];
            panel_put(w11, l, ib, m, Pbar);
        }
        chol_rev_unblocked(l11, w11, ib, ib - 1, l);
        if (i == 0)
            break;
    }
}

size_t gmm_band_chol_work_size(size_t l)
{
    if (l < CHOL_BLOCKED_MIN && l < CHOL_REV_BLOCKED_MIN)
        return 0;
    size_t nb = chol_block_width(l); /* the reverse's need covers the forward's l nb */
    return 2 * l * nb + nb * nb;
}

gmm_status gmm_band_chol_decomp_rev(const gmm_band *L, gmm_band *Lbar, gmm_band *Qbar)
{
    return gmm_band_chol_decomp_rev_work(L, Lbar, Qbar, NULL);
}

gmm_status gmm_band_chol_decomp_rev_work(const gmm_band *L, gmm_band *Lbar, gmm_band *Qbar,
                                         double *work)
{
    if (L->kind != GMM_BAND_LOWER || Lbar->kind != GMM_BAND_LOWER || Lbar->n != L->n ||
        Lbar->kl != L->kl)
        return gmm_error(GMM_EDIM, "chol rev: L and Lbar must be LOWER of the same shape "
                                   "(n %zu/%zu, l %zu/%zu)",
                         L->n, Lbar->n, L->kl, Lbar->kl);
    if (Lbar->data == L->data && L->n > 0)
        return gmm_error(GMM_EDIM, "chol rev: Lbar must not alias L");
    if (!Qbar)
        return GMM_OK;
    /* Qbar aliases Lbar when it is the same struct or views the same data;
     * the struct then turns SYMMETRIC, as it holds a symmetric adjoint. */
    int alias = Qbar == Lbar || Qbar->data == Lbar->data;
    if ((!alias && Qbar->kind != GMM_BAND_SYMMETRIC) || Qbar->n != L->n || Qbar->kl != L->kl)
        return gmm_error(GMM_EDIM, "chol rev: Qbar must be SYMMETRIC with n %zu and l %zu",
                         L->n, L->kl);
    size_t n = L->n, l = L->kl;
    if (n == 0) {
        Qbar->kind = GMM_BAND_SYMMETRIC;
        return GMM_OK;
    }
    const double *a = gmm_band_col(L, 0); /* a[j*l + i] = L(i, j) */
    double *w = gmm_band_col(Lbar, 0);
    if (l < CHOL_REV_BLOCKED_MIN || l > (size_t)INT_MAX) { /* BLAS takes int sizes */
        chol_rev_band(a, w, n, l);
    } else {
        size_t nb = chol_block_width(l);
        double *own = NULL;
        if (!work && !(work = own = gmm_malloc(2 * l * nb + nb * nb, sizeof(double))))
            return gmm_error(GMM_ENOMEM, "chol rev: out of memory for %zu x %zu panels", l, nb);
        chol_rev_blocked(a, w, n, l, nb, work);
        gmm_free(own);
    }
    for (size_t j = 0; j < n; j++) /* H -> Abar: halve the diagonal */
        w[j * l + j] *= 0.5;
    if (alias) {
        Qbar->kind = GMM_BAND_SYMMETRIC;
    } else {
        for (size_t j = 0; j < n; j++) {
            double *qj = gmm_band_col(Qbar, j);
            const double *wj = gmm_band_col(Lbar, j);
            size_t e = j + l < n ? j + l : n - 1;
            for (size_t i = j; i <= e; i++)
                qj[i] += wj[i];
        }
    }
    return GMM_OK;
}

gmm_status gmm_band_chol_logdet_rev(const gmm_band *L, double cbar, gmm_band *Lbar)
{
    if (L->kind != GMM_BAND_LOWER || Lbar->kind != GMM_BAND_LOWER || Lbar->n != L->n)
        return gmm_error(GMM_EDIM, "chol logdet rev: L LOWER, Lbar LOWER of the same n");
    for (size_t i = 0; i < L->n; i++)
        gmm_band_col(Lbar, i)[i] += 2.0 * cbar / gmm_band_col(L, i)[i];
    return GMM_OK;
}
