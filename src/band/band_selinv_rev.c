/* band_selinv_rev.c -- reverse mode of gmm_band_chol_selinv.
 *
 * Derived as the exact adjoint of the forward sweep in band_selinv.c (not
 * transcribed from the appendix's Alg. 4).  Write d = L(i,i), l = L->kl,
 * l' = S->kl >= l, and S[r,c] for the STORED entry (max(r,c), min(r,c)): the
 * forward treats each stored entry as one variable (reading Sigma(k,j) with
 * k < j reads the stored (j,k)), which is exactly band.h's sensitivity
 * convention, so Sbar(r,c) is that variable's adjoint.  Step i of the forward
 * (i = n-1 down to 0) computes
 *
 *     t_ij    = sum_{k=i+1}^{i+l} L(k,i) S[k,j]         j = i+1..i+l'
 *     S[j,i]  = -t_ij / d
 *     t_ii    = sum_{k=i+1}^{i+l} L(k,i) S[k,i]         (reads the S[k,i] above)
 *     S[i,i]  = 1/d^2 - t_ii / d.
 *
 * Its reads are of columns > i, plus, for the diagonal, of column i itself.
 * So the reverse sweep runs i = 0 up to n-1: when it reaches i, every later
 * forward step (all i' < i) has been undone and has pushed its adjoint into
 * column i.  Undoing step i, diagonal first (it was computed last):
 *
 *     tbar_ii   = -Sbar[i,i] / d
 *     dbar     += Sbar[i,i] (-2/d^3 + t_ii/d^2) = Sbar[i,i] (-1/d^3 - S[i,i]/d)
 *     Lbar(k,i) += tbar_ii S[k,i],   Sbar[k,i] += tbar_ii L(k,i)     k = i+1..i+l
 *
 * then the off-diagonals, with Sbar[j,i] now complete:
 *
 *     tbar_ij   = -Sbar[j,i] / d
 *     dbar     += Sbar[j,i] t_ij / d^2 = -Sbar[j,i] S[j,i] / d
 *     Lbar(k,i) += sum_j tbar_ij S[k,j],  Sbar[k,j] += tbar_ij L(k,i),
 *
 * where for k != j both (k,j) and (j,k) land in the same stored slot of Sbar,
 * as they must.  The t's are recovered from the forward output
 * (t_ij = -d S[j,i], t_ii = 1/d - d S[i,i]), so the reverse needs from the
 * forward only L and S -- nothing is saved or recomputed.  tbar_ij overwrites
 * Sbar[j,i], which nothing reads again (hence Sbar is destroyed, and no
 * workspace is allocated).  Cost: per column, l l' multiply-adds for Lbar and
 * l l' for Sbar, about twice the forward's l l'.
 */
#include "gmm/band.h"

#include <math.h>

#include "band_selinv_impl.h"

static void selinv_rev_col(const gmm_band *L, const gmm_band *S, gmm_band *Sbar, gmm_band *Lbar,
                           size_t i)
{
    size_t n = L->n;
    const double *Lc = gmm_band_col(L, i), *Sc = gmm_band_col(S, i);
    double *Bc = gmm_band_col(Sbar, i), *Lbc = gmm_band_col(Lbar, i);
    size_t kmax = i + L->kl < n ? i + L->kl : n - 1;
    size_t jmax = i + S->kl < n ? i + S->kl : n - 1;
    double d = Lc[i];

    double sb = Bc[i], tb = -sb / d;
    double dbar = -sb / (d * d * d) - sb * Sc[i] / d;
    for (size_t k = i + 1; k <= kmax; k++) {
        Lbc[k] += tb * Sc[k];
        Bc[k] += tb * Lc[k];
    }

    if (jmax > i)
        dbar -= selinv_dot(Bc + i + 1, Sc + i + 1, jmax - i) / d;
    for (size_t j = i + 1; j <= jmax; j++)
        Bc[j] = -Bc[j] / d; /* now tbar_ij */
    /* j >= k: S[k,j] is stored (j,k), column k. */
    for (size_t k = i + 1; k <= kmax; k++) {
        const double a = Lc[k];
        double *Bk = gmm_band_col(Sbar, k);
        Lbc[k] += selinv_dot(Bc + k, gmm_band_col(S, k) + k, jmax - k + 1);
        for (size_t j = k; j <= jmax; j++)
            Bk[j] += a * Bc[j];
    }
    /* j < k: S[k,j] is stored (k,j), column j; two columns j, j+1 per pass
     * halve the loads and stores of Lbar's column. */
    size_t j = i + 1;
    for (; j + 1 < kmax; j += 2) {
        const double b0 = Bc[j], b1 = Bc[j + 1];
        const double *S0 = gmm_band_col(S, j), *S1 = gmm_band_col(S, j + 1);
        double *B0 = gmm_band_col(Sbar, j), *B1 = gmm_band_col(Sbar, j + 1);
        Lbc[j + 1] += b0 * S0[j + 1];
        B0[j + 1] += b0 * Lc[j + 1];
        for (size_t k = j + 2; k <= kmax; k++) {
            Lbc[k] += b0 * S0[k] + b1 * S1[k];
            B0[k] += b0 * Lc[k];
            B1[k] += b1 * Lc[k];
        }
    }
    if (j < kmax) {
        const double b = Bc[j], *Sj = gmm_band_col(S, j);
        double *Bj = gmm_band_col(Sbar, j);
        for (size_t k = j + 1; k <= kmax; k++) {
            Lbc[k] += b * Sj[k];
            Bj[k] += b * Lc[k];
        }
    }
    Lbc[i] += dbar;
}

gmm_status gmm_band_chol_selinv_rev(const gmm_band *L, const gmm_band *S, gmm_band *Sbar,
                                    gmm_band *Lbar)
{
    if (!L || !S || !Sbar)
        return gmm_error(GMM_EINVAL, "band selinv rev: NULL argument");
    if (L->kind != GMM_BAND_LOWER || S->kind != GMM_BAND_SYMMETRIC ||
        Sbar->kind != GMM_BAND_SYMMETRIC || (Lbar && Lbar->kind != GMM_BAND_LOWER))
        return gmm_error(GMM_EDIM,
                         "band selinv rev: L, Lbar must be LOWER and S, Sbar SYMMETRIC");
    if (S->n != L->n || S->kl < L->kl || Sbar->n != S->n || Sbar->kl != S->kl)
        return gmm_error(GMM_EDIM,
                         "band selinv rev: S and Sbar must be %zu x %zu with one kl >= %zu",
                         L->n, L->n, L->kl);
    if (Lbar && (Lbar->n != L->n || Lbar->kl != L->kl))
        return gmm_error(GMM_EDIM, "band selinv rev: Lbar must have L's shape (%zu, kl %zu)",
                         L->n, L->kl);
    size_t n = L->n;
    if (n == 0 || !Lbar)
        return GMM_OK;
    if (Sbar->data == S->data || Lbar->data == L->data || Sbar->data == Lbar->data)
        return gmm_error(GMM_EDIM, "band selinv rev: Sbar, Lbar must not alias S, L or each other");
    for (size_t i = 0; i < n; i++) {
        double d = gmm_band_col(L, i)[i];
        if (!(d != 0.0 && isfinite(d)))
            return gmm_error_at(GMM_EDOM, i, "band selinv rev: L(%zu,%zu) = %g is singular", i,
                                i, d);
    }
    for (size_t i = 0; i < n; i++)
        selinv_rev_col(L, S, Sbar, Lbar, i);
    return GMM_OK;
}
