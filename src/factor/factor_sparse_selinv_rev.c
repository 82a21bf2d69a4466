/* factor_sparse_selinv_rev.c -- reverse mode of the sparse factor's
 * selected inverse: Sbar on a pattern (symmetric convention, band.h) ->
 * Sigmabar on L's pattern -> Lbar (Takahashi's recurrence reversed) ->
 * Qbar (the Cholesky factorisation reversed), all in the factor's order
 * and L's layout, then read on Qbar's pattern through the permutation.
 *
 * Derived as the exact adjoint of the forward sweeps, as the band's twins
 * are (band_selinv_rev.c, band_chol_rev.c; the paper's appendix); here the
 * loops run over the columns' patterns instead of the band.  Every stored
 * (lower) entry is one variable, so a read of Sigma(k, i), k < i, is a read
 * of the stored (i, k) and its adjoint lands there once.
 *
 * 1. Takahashi (factor_sparse_selinv.c) computes, for j = n-1 down to 0,
 *    with d = L(j,j), C_j the rows below j in column j, a, b places in C_j:
 *
 *        t_a = sum_b L(r_b, j) Sigma[r_b, r_a],   Sigma[r_a, j] = -t_a / d
 *        t_0 = sum_a L(r_a, j) Sigma[r_a, j],     Sigma[j, j] = 1/d^2 - t_0/d.
 *
 *    Column j reads later columns and, for its diagonal, its own
 *    off-diagonals; so the reverse runs j = 0 up to n-1 (every reader of
 *    column j has then been reversed) and undoes the diagonal first:
 *
 *        t0bar = -Sbar[j,j]/d,  dbar = Sbar[j,j] (-1/d^3 - Sigma[j,j]/d)
 *        Lbar(r_a, j) += t0bar Sigma[r_a, j],  Sbar[r_a, j] += t0bar L(r_a, j)
 *
 *    then the off-diagonals, whose adjoints are now complete:
 *
 *        tbar_a = -Sbar[r_a, j]/d,  dbar -= Sbar[r_a, j] Sigma[r_a, j]/d
 *        Lbar(r_b, j) += tbar_a Sigma[r_b, r_a],  Sbar[r_b, r_a] += tbar_a L(r_b, j)
 *
 *    (the t's recovered from the outputs, t_a = -d Sigma[r_a, j], so only
 *    L and Sigma are needed).  The pairs (r_a, r_b) are visited as in the
 *    forward: walking column k = r_a of Sigma at the rows of C_j.
 *
 * 2. The Cholesky, read right-looking: for k = 0 .. n-1, L(k,k) =
 *    sqrt(A(k,k)), L(i,k) = A(i,k)/L(k,k) (i in C_k), then A(i,i') -=
 *    L(i,k) L(i',k) for i >= i' in C_k.  Reversed, k = n-1 down to 0, the
 *    update first (its adjoint Abar(i,i') is complete: only later steps
 *    wrote it):
 *
 *        Lbar(i,k) -= Abar(i,i') L(i',k),  Lbar(i',k) -= Abar(i,i') L(i,k)   (i > i')
 *        Lbar(i,k) -= 2 Abar(i,i) L(i,k)
 *
 *    then the column:
 *
 *        Lbar(k,k) -= sum_{i in C_k} Lbar(i,k) L(i,k) / L(k,k)
 *        Abar(i,k) += Lbar(i,k) / L(k,k),  Abar(k,k) += Lbar(k,k) / (2 L(k,k)).
 *
 *    Abar at the end is Qbar in the factor's order (P Q P^T's stored
 *    entries are Q's, permuted).  Murray (2016) gives the same sweep for a
 *    dense blocked Cholesky; the sparse one differs only in its loops.
 *
 * Both sweeps cost what Takahashi's forward costs.  Saved from the forward:
 * L (the factor) and Sigma (kept by the forward until the next
 * factorisation); workspace: Lbar and Abar in L's layout, kept at the
 * largest size seen.
 */
#include "gmm/factor.h"

#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "factor_sparse_impl.h"

/* Step 1 for column j: Sbar (sb, L's layout) -> Lbar (lb). */
static void takahashi_rev_col(const sparse_state *s, const double *Lx, double *sb, double *lb,
                              size_t j)
{
    const SuiteSparse_long *r;
    size_t off, m = lcol(s, j, &r, &off);
    const double *l = Lx + off, *sj = s->sigma + off, *sig = s->sigma;
    double *sbj = sb + off, *lbj = lb + off, d = l[0];
    SuiteSparse_long *mark = s->mark, last = r[m - 1];

    double t0bar = -sbj[0] / d;
    double dbar = sbj[0] * (-1.0 / (d * d * d) - sj[0] / d);
    for (size_t a = 1; a < m; a++) {
        lbj[a] += t0bar * sj[a];
        sbj[a] += t0bar * l[a];
    }
    for (size_t a = 1; a < m; a++) {
        dbar -= sbj[a] * sj[a] / d;
        sbj[a] = -sbj[a] / d; /* now tbar_a: nothing reads Sbar[r_a, j] again */
        mark[r[a]] = (SuiteSparse_long)a;
    }
    const double *tb = sbj;
    for (size_t a = 1; a < m; a++) {
        const SuiteSparse_long *rk;
        size_t offk, mk = lcol(s, (size_t)r[a], &rk, &offk);
        const double *sk = sig + offk;
        double *sbk = sb + offk, la = l[a], ta = tb[a];
        /* the diagonal Sigma[k,k], k = r_a: a term of t_a */
        lbj[a] += ta * sk[0];
        sbk[0] += ta * la;
        for (size_t q = 1; q < mk && rk[q] <= last; q++) {
            SuiteSparse_long b = mark[rk[q]];
            if (b < 0)
                continue;
            /* Sigma[r_b, r_a], r_b > r_a: in t_b with L(r_a, j), in t_a with L(r_b, j) */
            lbj[a] += tb[b] * sk[q];
            lbj[b] += ta * sk[q];
            sbk[q] += tb[b] * la + ta * l[b];
        }
    }
    for (size_t a = 1; a < m; a++)
        mark[r[a]] = -1;
    lbj[0] += dbar;
}

/* Step 2 for column k: Lbar (lb) -> Abar (ab). */
static void chol_rev_col(const sparse_state *s, const double *Lx, double *lb, double *ab,
                         size_t k)
{
    const SuiteSparse_long *r;
    size_t off, m = lcol(s, k, &r, &off);
    const double *l = Lx + off;
    double *lbk = lb + off, *abk = ab + off, d = l[0];
    SuiteSparse_long *mark = s->mark, last = r[m - 1];

    for (size_t a = 1; a < m; a++)
        mark[r[a]] = (SuiteSparse_long)a;
    for (size_t a = 1; a < m; a++) {
        const SuiteSparse_long *ri;
        size_t offi, mi = lcol(s, (size_t)r[a], &ri, &offi);
        const double *abi = ab + offi;
        double t = -2.0 * abi[0] * l[a];
        for (size_t q = 1; q < mi && ri[q] <= last; q++) {
            SuiteSparse_long b = mark[ri[q]];
            if (b < 0)
                continue;
            t -= abi[q] * l[b];
            lbk[b] -= abi[q] * l[a];
        }
        lbk[a] += t;
    }
    double t = 0.0;
    for (size_t a = 1; a < m; a++) {
        mark[r[a]] = -1;
        t += lbk[a] * l[a];
        abk[a] += lbk[a] / d;
    }
    abk[0] += (lbk[0] - t / d) / (2.0 * d);
}

/* Lbar and Abar in L's layout, zeroed; kept at the largest size seen. */
static gmm_status rev_workspace(sparse_state *s, size_t len)
{
    if (len > s->rev_cap) {
        double *p = gmm_realloc(s->rev, 2 * len, sizeof *p);
        if (!p)
            return gmm_error(GMM_ENOMEM, "sparse selinv reverse: out of memory for %zu values",
                             2 * len);
        s->rev = p;
        s->rev_cap = len; /* advised huge pages by gmm_realloc */
    }
    memset(s->rev, 0, 2 * len * sizeof *s->rev);
    return GMM_OK;
}

/* Each entry of A (original order) at its place in L's layout, or EDIM. */
static gmm_status place_entries(const sparse_state *s, const gmm_sparse *A, const char *what)
{
    if (A->n != s->n)
        return gmm_error(GMM_EDIM, "sparse selinv reverse: %s is %zu x %zu, the factor %zu x "
                                   "%zu",
                         what, A->n, A->n, s->n, s->n);
    for (size_t j = 0; j < s->n; j++)
        for (size_t p = A->colptr[j]; p < A->colptr[j + 1]; p++)
            if (gmm_factor_impl_sparse_sigma_find(s, (size_t)s->pinv[A->rowind[p]],
                                                  (size_t)s->pinv[j]) == SIZE_MAX)
                return gmm_error_at(GMM_EDIM, p,
                                    "sparse selinv reverse: %s's entry (%zu, %zu) is outside "
                                    "the pattern of L",
                                    what, A->rowind[p], j);
    return GMM_OK;
}

gmm_status gmm_factor_impl_sparse_selinv_rev(const void *state, const gmm_sparse *S,
                                             const gmm_sparse *Sbar, gmm_sparse *Qbar)
{
    sparse_state *s = (sparse_state *)state; /* workspace only, as the forward's */
    (void)S;                                  /* Sigma on L's pattern is kept */
    if (!s->has_sigma)
        return gmm_error(GMM_EINVAL, "sparse selinv reverse: no selected inverse of the "
                                     "current factorisation");
    gmm_status st;
    if ((st = place_entries(s, Sbar, "Sbar")) || (st = place_entries(s, Qbar, "Qbar")))
        return st;
    size_t len = s->L->is_super ? s->L->xsize : s->L->nzmax;
    if ((st = rev_workspace(s, len)))
        return st;
    double *sb = s->rev, *lb = s->rev + len; /* Sbar, then Lbar; Abar reuses Sbar's */
    const double *Lx = s->L->x;
    size_t n = s->n;
    for (size_t j = 0; j < n; j++)
        for (size_t p = Sbar->colptr[j]; p < Sbar->colptr[j + 1]; p++)
            sb[gmm_factor_impl_sparse_sigma_find(s, (size_t)s->pinv[Sbar->rowind[p]],
                                                 (size_t)s->pinv[j])] += Sbar->val[p];
    if (s->L->is_super) {
        if ((st = gmm_factor_impl_sparse_selinv_rev_super(s, sb, lb, len)))
            return st;
    } else {
        for (size_t j = 0; j < n; j++)
            takahashi_rev_col(s, Lx, sb, lb, j);
        memset(sb, 0, len * sizeof *sb);
        for (size_t k = n; k-- > 0;)
            chol_rev_col(s, Lx, lb, sb, k);
    }
    for (size_t j = 0; j < n; j++)
        for (size_t p = Qbar->colptr[j]; p < Qbar->colptr[j + 1]; p++)
            Qbar->val[p] += sb[gmm_factor_impl_sparse_sigma_find(
                s, (size_t)s->pinv[Qbar->rowind[p]], (size_t)s->pinv[j])];
    return GMM_OK;
}
