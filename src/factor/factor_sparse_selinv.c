/* factor_sparse_selinv.c -- the entries of Q^-1 on the pattern of the
 * sparse factor's L (Takahashi's recurrence; Rue & Martino 2007, Campbell &
 * Davis's sparseinv), then read on a caller's pattern.
 *
 * In the factor's order, Sigma = (L_c L_c^T)^-1 satisfies L_c^T Sigma =
 * L_c^-1; read at row j and columns i >= j, where L_c^-1 is 0 for i > j and
 * 1/L_c(j, j) at i = j:
 *
 *     Sigma(i, j) = -(1/d) sum_{k in C_j} L_c(k, j) Sigma(k, i),  i in C_j
 *     Sigma(j, j) = 1/d^2 - (1/d) sum_{k in C_j} L_c(k, j) Sigma(k, j)
 *
 * with d = L_c(j, j) and C_j the rows below j of column j of L_c.  For i, k
 * in C_j, (max(i,k), min(i,k)) lies in L's pattern (a Cholesky factor's
 * pattern is chordal: the rows of a column form a clique in the later
 * columns; CHOLMOD's relaxed supernodes only merge a column with its
 * parent, which keeps that).  So sweeping j from n-1 down, every Sigma the
 * right side reads is on L's pattern and already computed, and Sigma is
 * kept in L's own layout (sigma parallels L->x).
 *
 * Column j's sum walks, for each k in C_j, the stored column k of Sigma
 * (rows i >= k): a dense map (mark: row -> place in C_j) picks the rows of
 * C_j, and the walk stops past C_j's last row.  Each stored Sigma(i, k),
 * i > k, both in C_j, serves twice: L(k, j) Sigma(i, k) goes to row i's sum
 * and L(i, j) Sigma(i, k) to row k's.  Cost O(sum_j sum_{k in C_j} |column
 * k up to max C_j|), the order of the factorisation's flops.
 */
#include "gmm/factor.h"

#include <math.h>
#include <stdint.h>

#include "gmm/alloc.h"
#include "factor_sparse_impl.h"

/* Column j of Sigma from the later columns. */
static void selinv_col(const sparse_state *s, const double *Lx, double *sig, size_t j)
{
    const SuiteSparse_long *r;
    size_t off, m = lcol(s, j, &r, &off);
    const double *l = Lx + off;
    double *sj = sig + off, *z = s->z, d = l[0];
    SuiteSparse_long *mark = s->mark, last = r[m - 1];
    for (size_t a = 1; a < m; a++) {
        mark[r[a]] = (SuiteSparse_long)a;
        z[a] = 0.0;
    }
    for (size_t a = 1; a < m; a++) {
        const SuiteSparse_long *rk;
        size_t offk, mk = lcol(s, (size_t)r[a], &rk, &offk);
        const double *sk = sig + offk, lk = l[a];
        double za = lk * sk[0];
        for (size_t b = 1; b < mk && rk[b] <= last; b++) {
            SuiteSparse_long p = mark[rk[b]];
            if (p < 0)
                continue;
            z[p] += lk * sk[b];
            za += l[p] * sk[b];
        }
        z[a] += za;
    }
    double t = 0.0;
    for (size_t a = 1; a < m; a++) {
        sj[a] = -z[a] / d;
        t += l[a] * sj[a];
        mark[r[a]] = -1;
    }
    sj[0] = (1.0 / d - t) / d;
}

size_t gmm_factor_impl_sparse_sigma_find(const sparse_state *s, size_t i, size_t j)
{
    if (i < j) {
        size_t t = i;
        i = j;
        j = t;
    }
    const SuiteSparse_long *r;
    size_t off, m = lcol(s, j, &r, &off), lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((size_t)r[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m && (size_t)r[lo] == i ? off + lo : SIZE_MAX;
}

/* Sigma for the current factorisation, kept until the next one.  The
 * buffer and the mark/z scratch sit behind the interface's const: they
 * are the factor's cache, not its value. */
static gmm_status sigma_compute(sparse_state *s)
{
    if (s->has_sigma)
        return GMM_OK;
    size_t len = s->L->is_super ? s->L->xsize : s->L->nzmax;
    if (len > s->sigma_cap) {
        double *p = gmm_realloc(s->sigma, len, sizeof *p);
        if (!p)
            return gmm_error(GMM_ENOMEM, "sparse factor: out of memory for the selected "
                                         "inverse (%zu values)",
                             len);
        s->sigma = p;
        s->sigma_cap = len; /* advised huge pages by gmm_realloc */
    }
    const double *Lx = s->L->x;
    for (size_t j = 0; j < s->n; j++) {
        const SuiteSparse_long *r;
        size_t off;
        lcol(s, j, &r, &off);
        if (!(Lx[off] > 0.0 && isfinite(Lx[off])))
            return gmm_error_at(GMM_EDOM, (size_t)((const SuiteSparse_long *)s->L->Perm)[j],
                                "sparse selinv: a diagonal entry of L is %g", Lx[off]);
    }
    if (s->L->is_super) {
        gmm_status st = gmm_factor_impl_sparse_selinv_super(s);
        if (st)
            return st;
    } else {
        for (size_t j = s->n; j-- > 0;)
            selinv_col(s, Lx, s->sigma, j);
    }
    s->has_sigma = 1;
    return GMM_OK;
}

gmm_status gmm_factor_impl_sparse_selinv(const void *state, gmm_sparse *S)
{
    sparse_state *s = (sparse_state *)state;
    if (S->n != s->n)
        return gmm_error(GMM_EDIM, "sparse selinv: S is %zu x %zu, the factor %zu x %zu", S->n,
                         S->n, s->n, s->n);
    gmm_status st = sigma_compute(s);
    if (st)
        return st;
    for (size_t j = 0; j < s->n; j++)
        for (size_t p = S->colptr[j]; p < S->colptr[j + 1]; p++) {
            size_t i = S->rowind[p];
            size_t q = gmm_factor_impl_sparse_sigma_find(s, (size_t)s->pinv[i],
                                                         (size_t)s->pinv[j]);
            if (q == SIZE_MAX)
                return gmm_error_at(GMM_EDIM, p,
                                    "sparse selinv: S's entry (%zu, %zu) is outside the "
                                    "pattern of L",
                                    i, j);
            S->val[p] = s->sigma[q];
        }
    return GMM_OK;
}
