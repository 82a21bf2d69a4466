/* band_prod_rev.c -- reverse modes of the products (band.h sections 4, 5).
 *
 * DERIVATION (paper appendix A and Table 1; Giles 2008).  Each reverse mode is
 * a composition of forward band operators, so every intermediate is banded:
 *
 *   C = P(op(A) op(B)), P the restriction to C's band: Cbar lives on C's
 *       band, op(A)bar = Cbar op(B)^T and op(B)bar = op(A)^T Cbar, and only
 *       Abar's (Bbar's) band of them is wanted -- one restricted gemm each,
 *       O(n w l), into a temporary of Abar's (Bbar's) shape that is then
 *       added (the adjoints accumulate).
 *   y = alpha op(A) x: the full-matrix gradient of A is alpha ybar x^T (of
 *       A^T: alpha x ybar^T), so Abar is a band-restricted outer product and
 *       the SYMMETRIC case is gmm_band_outer's symmetric convention; xbar =
 *       alpha op(A)^T ybar is one gemv.  O(n l).
 *   O += alpha M V^T on O's band: Mbar = alpha Obar V, Vbar = alpha Obar^T M
 *       with Obar zero outside its band (a SYMMETRIC Obar read as the full
 *       symmetric matrix, which is exactly the symmetric convention: a stored
 *       off-diagonal of O moved with both (M V^T)(i,j) and (V M^T)(i,j)).
 *       One gemv per column: O(n l k).
 *
 * Nothing from the forward pass is saved beyond its inputs.
 */
#include "gmm/band.h"

#include <stddef.h>

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

static gmm_trans flip(gmm_trans t) { return t == GMM_TRANS ? GMM_NOTRANS : GMM_TRANS; }

/* Xbar += Z on Xbar's band (Z has Xbar's shape). */
static void band_add(gmm_band *Xbar, const gmm_band *Z)
{
    size_t n = Xbar->n;
    for (size_t j = 0; j < n; j++) {
        double *x = gmm_band_col(Xbar, j);
        const double *z = gmm_band_col(Z, j);
        size_t i0 = j >= Xbar->ku ? j - Xbar->ku : 0, i1 = min_sz(n - 1, j + Xbar->kl);
        for (size_t i = i0; i <= i1; i++)
            x[i] += z[i];
    }
}

/* Xbar += op(P) op(Q) restricted to Xbar's band, through a temporary. */
static gmm_status gemm_acc(gmm_trans tp, const gmm_band *P, gmm_trans tq, const gmm_band *Q,
                           gmm_band *Xbar)
{
    gmm_band *Z = gmm_band_alloc(Xbar->n, Xbar->kl, Xbar->ku, GMM_BAND_GENERAL);
    if (!Z)
        return gmm_error_status();
    gmm_status st = gmm_band_gemm(tp, P, tq, Q, Z);
    if (st == GMM_OK)
        band_add(Xbar, Z);
    gmm_band_free(Z);
    return st;
}

gmm_status gmm_band_gemm_rev(gmm_trans ta, const gmm_band *A, gmm_trans tb, const gmm_band *B,
                             const gmm_band *Cbar, gmm_band *Abar, gmm_band *Bbar)
{
    size_t n = Cbar->n;
    if (A->n != n || B->n != n || (Abar && Abar->n != n) || (Bbar && Bbar->n != n))
        return gmm_error(GMM_EDIM, "gemm_rev: n differs (A %zu, B %zu, Cbar %zu, Abar %zu, "
                                   "Bbar %zu)", A->n, B->n, n, Abar ? Abar->n : n,
                         Bbar ? Bbar->n : n);
    if (A->kind == GMM_BAND_SYMMETRIC || B->kind == GMM_BAND_SYMMETRIC ||
        Cbar->kind == GMM_BAND_SYMMETRIC || (Abar && Abar->kind == GMM_BAND_SYMMETRIC) ||
        (Bbar && Bbar->kind == GMM_BAND_SYMMETRIC))
        return gmm_error(GMM_EDIM, "gemm_rev: A, B, Cbar, Abar, Bbar must be GENERAL or LOWER");
    gmm_status st = GMM_OK;
    /* op(A)bar = Cbar op(B)^T; Abar is its transpose when ta. */
    if (Abar) {
        st = ta == GMM_NOTRANS ? gemm_acc(GMM_NOTRANS, Cbar, flip(tb), B, Abar)
                               : gemm_acc(tb, B, GMM_TRANS, Cbar, Abar);
        if (st != GMM_OK)
            return st;
    }
    /* op(B)bar = op(A)^T Cbar; Bbar is its transpose when tb. */
    if (Bbar)
        st = tb == GMM_NOTRANS ? gemm_acc(flip(ta), A, GMM_NOTRANS, Cbar, Bbar)
                               : gemm_acc(GMM_TRANS, Cbar, ta, A, Bbar);
    return st;
}

gmm_status gmm_band_gemv_rev(gmm_trans ta, double alpha, const gmm_band *A, const double *x,
                             const double *ybar, gmm_band *Abar, double *xbar)
{
    size_t n = A->n;
    if (Abar && Abar->n != n)
        return gmm_error(GMM_EDIM, "gemv_rev: n differs (A %zu, Abar %zu)", n, Abar->n);
    if (Abar && (Abar->kind == GMM_BAND_SYMMETRIC) != (A->kind == GMM_BAND_SYMMETRIC))
        return gmm_error(GMM_EDIM, "gemv_rev: Abar must be SYMMETRIC exactly when A is (kinds "
                                   "%d and %d)", (int)Abar->kind, (int)A->kind);
    gmm_status st = GMM_OK;
    if (Abar) {
        /* For a SYMMETRIC A both orders give the same symmetrised sum. */
        if (ta == GMM_TRANS)
            st = gmm_band_outer(alpha, 1, x, n, ybar, n, Abar);
        else
            st = gmm_band_outer(alpha, 1, ybar, n, x, n, Abar);
        if (st != GMM_OK)
            return st;
    }
    if (xbar)
        st = gmm_band_gemv(flip(ta), alpha, A, ybar, 1.0, xbar);
    return st;
}

gmm_status gmm_band_outer_rev(double alpha, size_t k, const double *M, size_t ldm,
                              const double *V, size_t ldv, const gmm_band *Obar, double *Mbar,
                              size_t ldmbar, double *Vbar, size_t ldvbar)
{
    size_t n = Obar->n;
    if (k > 0 && (ldm < n || ldv < n || (Mbar && ldmbar < n) || (Vbar && ldvbar < n)))
        return gmm_error(GMM_EDIM, "outer_rev: leading dimension < n = %zu (ldm %zu, ldv %zu, "
                                   "ldmbar %zu, ldvbar %zu)", n, ldm, ldv, ldmbar, ldvbar);
    gmm_status st = GMM_OK;
    for (size_t c = 0; c < k && st == GMM_OK; c++) {
        if (Mbar)
            st = gmm_band_gemv(GMM_NOTRANS, alpha, Obar, V + c * ldv, 1.0, Mbar + c * ldmbar);
        if (Vbar && st == GMM_OK)
            st = gmm_band_gemv(GMM_TRANS, alpha, Obar, M + c * ldm, 1.0, Vbar + c * ldvbar);
    }
    return st;
}
