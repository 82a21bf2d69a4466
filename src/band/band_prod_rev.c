/* band_prod_rev.c -- reverse modes of the products (band.h sections 4, 5).
 *
 * DERIVATION (paper appendix A and Table 1; Giles 2008).  Each reverse mode is
 * a composition of forward band operators, so every intermediate is banded:
 *
 *   C = P(op(A) op(B)), P the restriction to C's band: Cbar lives on C's
 *       band, op(A)bar = Cbar op(B)^T and op(B)bar = op(A)^T Cbar, and only
 *       Abar's (Bbar's) band of them is wanted -- one restricted product
 *       each, O(n w l), accumulated straight into the adjoint by the gemm
 *       kernel (no temporary).
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

#include "band_prod_impl.h"

static gmm_trans flip(gmm_trans t) { return t == GMM_TRANS ? GMM_NOTRANS : GMM_TRANS; }

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
    if (n > 0 && ((Abar && (Abar->data == Cbar->data || Abar->data == A->data ||
                            Abar->data == B->data)) ||
                  (Bbar && (Bbar->data == Cbar->data || Bbar->data == A->data ||
                            Bbar->data == B->data))))
        return gmm_error(GMM_EDIM, "gemm_rev: Abar and Bbar must not alias A, B or Cbar");
    /* Abar == Bbar is allowed (C = A A^T: both contributions collect), as
     * neither update reads an adjoint. */
    /* op(A)bar = Cbar op(B)^T; Abar is its transpose when ta. */
    if (Abar) {
        if (ta == GMM_NOTRANS)
            gmm_band_gemm_kernel(GMM_NOTRANS, Cbar, flip(tb), B, 1, Abar);
        else
            gmm_band_gemm_kernel(tb, B, GMM_TRANS, Cbar, 1, Abar);
    }
    /* op(B)bar = op(A)^T Cbar; Bbar is its transpose when tb. */
    if (Bbar) {
        if (tb == GMM_NOTRANS)
            gmm_band_gemm_kernel(flip(ta), A, GMM_NOTRANS, Cbar, 1, Bbar);
        else
            gmm_band_gemm_kernel(GMM_TRANS, Cbar, ta, A, 1, Bbar);
    }
    return GMM_OK;
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
