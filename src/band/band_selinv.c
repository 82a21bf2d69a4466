/* band_selinv.c -- the band of (L L^T)^{-1} from a band Cholesky factor
 * (Takahashi's recurrence; the paper's appendix Alg. 3).
 *
 * With Sigma = (L L^T)^{-1}, L^T Sigma = L^{-1} is lower triangular with
 * diagonal 1/L(i,i), so row i of L^T Sigma, read at columns j >= i, gives
 *
 *     Sigma(i,j) = delta_ij / L(i,i)^2
 *                  - (1/L(i,i)) sum_{k=i+1}^{i+l} L(k,i) Sigma(k,j),   j >= i.
 *
 * For j in [i, i+l'] the Sigma(k,j) on the right have i < k <= i+l and
 * |k - j| <= max(l, l'-1) <= l', so with l' >= l every value the recurrence
 * needs lies in the band being computed: sweeping i from n-1 down, row i
 * (= stored column i) needs only rows below it, except that the diagonal
 * needs the off-diagonals of its own column, so those come first.  Any l' >= l
 * gives the exact entries of Sigma on that band; l' < l cannot close.
 *
 * Storage: S's stored column i holds Sigma(j,i) = Sigma(i,j) for j = i..i+l',
 * which is what step i writes.  A read of Sigma(k,j) is of the stored entry
 * (max(k,j), min(k,j)); the inner sum is split at k = j so each part walks
 * one stored column contiguously.
 */
#include "gmm/band.h"

#include <math.h>

#include "band_selinv_impl.h"

/* Step i of the sweep: stored column i of S from the later columns. */
static void selinv_col(const gmm_band *L, gmm_band *S, size_t i)
{
    size_t n = L->n;
    const double *Lc = gmm_band_col(L, i);
    double *Sc = gmm_band_col(S, i);
    size_t kmax = i + L->kl < n ? i + L->kl : n - 1; /* last row of L's column i */
    size_t jmax = i + S->kl < n ? i + S->kl : n - 1; /* last row of S's column i */
    double d = Lc[i];

    /* k > j: Sigma(k,j) is stored (k,j), column j (k - j < l <= l'). */
    for (size_t j = i + 1; j <= jmax; j++)
        Sc[j] = j < kmax ? selinv_dot(Lc + j + 1, gmm_band_col(S, j) + j + 1, kmax - j) : 0.0;
    /* k <= j: Sigma(k,j) is stored (j,k), column k; two columns per pass
     * halve the loads and stores of Sc. */
    size_t k = i + 1;
    for (; k + 1 <= kmax; k += 2) {
        const double a0 = Lc[k], a1 = Lc[k + 1];
        const double *S0 = gmm_band_col(S, k), *S1 = gmm_band_col(S, k + 1);
        Sc[k] += a0 * S0[k];
        for (size_t j = k + 1; j <= jmax; j++)
            Sc[j] += a0 * S0[j] + a1 * S1[j];
    }
    if (k <= kmax) {
        const double a = Lc[k], *Sk = gmm_band_col(S, k);
        for (size_t j = k; j <= jmax; j++)
            Sc[j] += a * Sk[j];
    }
    for (size_t j = i + 1; j <= jmax; j++)
        Sc[j] = -Sc[j] / d;

    /* The diagonal reads the off-diagonals of its own column just written. */
    double t = kmax > i ? selinv_dot(Lc + i + 1, Sc + i + 1, kmax - i) : 0.0;
    Sc[i] = (1.0 / d - t) / d;
}

gmm_status gmm_band_chol_selinv(const gmm_band *L, gmm_band *S)
{
    if (!L || !S)
        return gmm_error(GMM_EINVAL, "band selinv: NULL argument");
    if (L->kind != GMM_BAND_LOWER || S->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "band selinv: L must be LOWER and S SYMMETRIC");
    if (S->n != L->n || S->kl < L->kl)
        return gmm_error(GMM_EDIM,
                         "band selinv: S must be %zu x %zu with kl >= %zu (got %zu x %zu, kl %zu)",
                         L->n, L->n, L->kl, S->n, S->n, S->kl);
    size_t n = L->n;
    if (n == 0)
        return GMM_OK;
    if (S->data == L->data)
        return gmm_error(GMM_EDIM, "band selinv: S must not alias L");
    for (size_t i = 0; i < n; i++) {
        double d = gmm_band_col(L, i)[i];
        if (!(d != 0.0 && isfinite(d)))
            return gmm_error_at(GMM_EDOM, i, "band selinv: L(%zu,%zu) = %g is singular", i, i, d);
    }
    for (size_t i = n; i-- > 0;)
        selinv_col(L, S, i);
    return GMM_OK;
}
