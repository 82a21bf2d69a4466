/* band_solve.c -- triangular solves with a banded lower-triangular L:
 * vector, dense block and banded right-hand sides (band.h section 2).
 *
 * Vector and block solves are CBLAS dtbsv on the LAPACK band layout, one
 * column at a time (O(n l) per column).
 *
 * SOLVE BY A BANDED RIGHT-HAND SIDE (paper appendix, Alg. 5).  X = op(L)^{-1} B
 * is dense in general, but the entries inside a band are exact entries of the
 * product when they are computed in the right order:
 *
 *   op = L:    L x_j = b_j with L^{-1} lower triangular, so x_j(i) = 0 for
 *              i < j - ku_B: X has B's upper bandwidth.  Forward substitution
 *              down column j, x(i) = (b(i) - sum_{i-l <= m < i} L(i,m) x(m)) /
 *              L(i,i), reads only rows above i of the same column, all of them
 *              inside X's band (rows j - ku_B .. i) or exact zeros.  Hence
 *              diagonals are produced from the top one (i - j = -ku_B) down to
 *              i - j = kl_X, each from those above it; Alg. 5's loop over k from
 *              -u to l is this order.
 *   op = L^T:  L^T x_j = b_j with L^{-T} upper triangular, so x_j(i) = 0 for
 *              i > j + kl_B: X has B's lower bandwidth.  Back substitution up
 *              column j, x(i) = (b(i) - sum_{i < m <= i+l} L(m,i) x(m)) / L(i,i),
 *              reads only rows below i, inside X's band (i .. j + kl_B) or
 *              zero.  Diagonals go from the bottom (i - j = kl_B) up to
 *              i - j = -ku_X.
 *
 * In both cases column j of X is a triangular solve with the diagonal block
 * L[r0..r1, r0..r1] (r0..r1 the rows of X's band that can be nonzero), which is
 * itself a band matrix starting at column r0 of L's storage: one dtbsv on the
 * contiguous stored column of X.
 */
#include "gmm/band.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "gmm/alloc.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* L must be a LOWER band whose order fits CBLAS's int. */
static gmm_status check_factor(const char *who, const gmm_band *L)
{
    if (L->kind != GMM_BAND_LOWER)
        return gmm_error(GMM_EDIM, "%s: L must be LOWER (kind %d given)", who, (int)L->kind);
    if (L->n > INT_MAX || L->ld > INT_MAX)
        return gmm_error(GMM_EDIM, "%s: n = %zu too large for CBLAS", who, L->n);
    return GMM_OK;
}

/* x <- op(L[r0.., r0..])^{-1} x for the m x m diagonal block starting at r0. */
static void tbsv_block(const gmm_band *L, gmm_trans trans, size_t r0, size_t m, double *x)
{
    if (m == 0)
        return;
    cblas_dtbsv(CblasColMajor, CblasLower, trans == GMM_TRANS ? CblasTrans : CblasNoTrans,
                CblasNonUnit, (int)m, (int)L->kl, L->data + r0 * L->ld, (int)L->ld, x, 1);
}

gmm_status gmm_band_tri_solve_vec(const gmm_band *L, gmm_trans trans, double *x)
{
    gmm_status st = check_factor("tri_solve_vec", L);
    if (st != GMM_OK)
        return st;
    tbsv_block(L, trans, 0, L->n, x);
    return GMM_OK;
}

gmm_status gmm_band_tri_solve_mat(const gmm_band *L, gmm_trans trans, size_t k, double *X,
                                  size_t ldx)
{
    gmm_status st = check_factor("tri_solve_mat", L);
    if (st != GMM_OK)
        return st;
    if (k > 0 && ldx < L->n)
        return gmm_error(GMM_EDIM, "tri_solve_mat: ldx = %zu < n = %zu", ldx, L->n);
    for (size_t c = 0; c < k; c++)
        tbsv_block(L, trans, 0, L->n, X + c * ldx);
    return GMM_OK;
}

gmm_status gmm_band_tri_solve_band(const gmm_band *L, gmm_trans trans, const gmm_band *B,
                                   gmm_band *X)
{
    gmm_status st = check_factor("tri_solve_band", L);
    if (st != GMM_OK)
        return st;
    if (B->n != L->n || X->n != L->n)
        return gmm_error(GMM_EDIM, "tri_solve_band: n differs (L %zu, B %zu, X %zu)", L->n,
                         B->n, X->n);
    if (B->kind == GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "tri_solve_band: B must be GENERAL or LOWER, not SYMMETRIC"
                                   " (expand it with gmm_band_copy_band)");
    if (X->kind == GMM_BAND_SYMMETRIC ||
        (X->kind == GMM_BAND_LOWER && (trans == GMM_TRANS || B->ku != 0)))
        return gmm_error(GMM_EDIM, "tri_solve_band: X must be GENERAL (LOWER only for "
                                   "L^{-1} B with B lower), kind %d given",
                         (int)X->kind);
    if (trans == GMM_NOTRANS && X->ku < B->ku)
        return gmm_error(GMM_EDIM, "tri_solve_band: X->ku = %zu < B->ku = %zu (L^{-1} B keeps"
                                   " B's upper band)", X->ku, B->ku);
    if (trans == GMM_TRANS && X->kl < B->kl)
        return gmm_error(GMM_EDIM, "tri_solve_band: X->kl = %zu < B->kl = %zu (L^{-T} B keeps"
                                   " B's lower band)", X->kl, B->kl);
    if (X->n > 0 && (X->data == B->data || X->data == L->data))
        return gmm_error(GMM_EDIM, "tri_solve_band: X must not alias B or L");

    size_t n = L->n;
    for (size_t j = 0; j < n; j++) {
        double *x = gmm_band_col(X, j);
        size_t i0 = j >= X->ku ? j - X->ku : 0, i1 = min_sz(n - 1, j + X->kl);
        for (size_t i = i0; i <= i1; i++)
            x[i] = gmm_band_in_band(B, i, j) ? *gmm_band_ptr(B, i, j) : 0.0;
        /* Rows of X's band that can be nonzero (see the header comment). */
        size_t r0, r1;
        if (trans == GMM_NOTRANS) {
            r0 = j >= B->ku ? j - B->ku : 0;
            r1 = i1;
        } else {
            r0 = i0;
            r1 = min_sz(n - 1, j + B->kl);
        }
        tbsv_block(L, trans, r0, r1 - r0 + 1, x + r0);
    }
    return GMM_OK;
}
