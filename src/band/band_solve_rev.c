/* band_solve_rev.c -- reverse modes of the triangular solves (band.h
 * section 2).
 *
 * DERIVATION (paper appendix A, "Solve"; Giles 2008).  For S = op(L)^{-1} V,
 * dS = op(L)^{-1} dV - op(L)^{-1} d(op(L)) S, so with G = op(L)^{-T} Sbar
 *
 *     Vbar += G,
 *     Lbar += -G S^T   (op = L),       Lbar += -S G^T   (op = L^T),
 *
 * each restricted to L's band.  The forward pass saves only its result S;
 * the reverse pass costs one triangular solve (for G) plus a band-restricted
 * outer product: O(n l) per right-hand side column.
 *
 * BANDED RIGHT-HAND SIDE.  The forward result is X = P(S), S = op(L)^{-1} B
 * and P the restriction to X's band (kl_X, ku_X), so Sbar = Xbar is banded.
 * Every intermediate stays banded:
 *
 *   op = L:   S has upper bandwidth ku_B (dense below); G = L^{-T} Xbar has
 *             lower bandwidth kl_X (dense above).  In
 *                 Lbar(i,m) = -sum_j G(i,j) S(m,j),   0 <= i - m <= l,
 *             G(i,j) != 0 needs j >= i - kl_X and S(m,j) != 0 needs
 *             j <= m + ku_B <= i + ku_B, so only G's band (kl_X, ku_B) and
 *             S's band (kl_X, ku_B) enter (m - j <= i - j <= kl_X).  The
 *             latter lies inside X's band: the forward result is all of S
 *             that is needed, no recomputation.  Bbar needs G on Bbar's
 *             band; G is zero below kl_X, so G is computed on
 *             (kl_X, max(ku_B, ku_Bbar)) by one banded solve with L^T.
 *   op = L^T: S has lower bandwidth kl_B (dense above); G = L^{-1} Xbar has
 *             upper bandwidth ku_X (dense below).  In
 *                 Lbar(i,m) = -sum_j S(i,j) G(m,j),
 *             j runs over [i - kl_B, m + ku_X]: S on (kl_B, ku_X) (inside X's
 *             band, as X->kl >= kl_B) and G on (kl_B, ku_X).  G is computed
 *             on (max(kl_B, kl_Bbar), ku_X) by one banded solve with L.
 *
 * Both solves are exact on their bands (see band_solve.c), so the reverse
 * pass costs O(n l w), w = kl_X + ku_X + 1 plus Bbar's width, like the
 * forward pass.
 */
#include "gmm/band.h"

#include <string.h>

#include "gmm/alloc.h"
#include "band_solve_impl.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* Lbar must be LOWER with L's n and bandwidth, or NULL. */
static gmm_status check_lbar(const char *who, const gmm_band *L, const gmm_band *Lbar)
{
    if (L->kind != GMM_BAND_LOWER)
        return gmm_error(GMM_EDIM, "%s: L must be LOWER (kind %d given)", who, (int)L->kind);
    if (Lbar && (Lbar->kind != GMM_BAND_LOWER || Lbar->n != L->n || Lbar->kl != L->kl))
        return gmm_error(GMM_EDIM,
                         "%s: Lbar must be LOWER %zu x %zu with kl %zu like L (got kind %d, "
                         "n %zu, kl %zu)",
                         who, L->n, L->n, L->kl, (int)Lbar->kind, Lbar->n, Lbar->kl);
    return GMM_OK;
}

/* Lbar(i,m) -= sum_c A(i,c) Bm(m,c) on L's band, A and Bm dense n x k. */
static void lbar_outer(gmm_band *Lbar, size_t k, const double *A, size_t lda, const double *Bm,
                       size_t ldb)
{
    size_t n = Lbar->n;
    for (size_t c = 0; c < k; c++) {
        const double *a = A + c * lda, *b = Bm + c * ldb;
        for (size_t m = 0; m < n; m++) {
            double *col = gmm_band_col(Lbar, m), bm = b[m];
            size_t i1 = min_sz(n - 1, m + Lbar->kl);
            for (size_t i = m; i <= i1; i++)
                col[i] -= a[i] * bm;
        }
    }
}

/* One sweep for a single right-hand side: g = op(L)^{-T} sbar into G (which
 * holds sbar on entry) and, when Lbar, the band outer product of the
 * derivation -- set (=) or accumulated (+=) -- column by column as each g(m)
 * becomes final, so L and Lbar are each streamed once; plus ldbar / L(i,i)
 * on the diagonal (ldbar = 2 cbar: the adjoint of cbar logdet(L L^T)).
 *   op = L:    g by back substitution (rows n-1 .. 0); column i of Lbar is
 *              -g(i..i+l) s(i), final once g(i) is.
 *   op = L^T:  g by forward substitution down the columns; column m of Lbar
 *              is -s(m..m+l) g(m).
 * Reciprocals and the order of the sums as in band_solve.c. */
static void vec_rev_sweep(const gmm_band *L, gmm_trans trans, const double *s, double *G,
                          gmm_band *Lbar, int set, double ldbar)
{
    size_t n = L->n, l = L->kl;
    if (trans == GMM_NOTRANS) {
        for (size_t i = n; i-- > 0;) {
            const double *lc = gmm_band_col(L, i);
            size_t e = min_sz(n - 1, i + l);
            double inv = 1.0 / lc[i];
            double t = G[i] - band_dot_far(lc, G, i + 2, e);
            if (i + 1 <= e)
                t -= lc[i + 1] * G[i + 1];
            G[i] = t * inv;
            if (!Lbar)
                continue;
            /* restrict: Lbar never shares storage with the work vector,
             * which spares the vectorised loops their overlap tests */
            double *restrict c = gmm_band_col(Lbar, i) + i;
            const double *restrict g = G + i;
            double si = s[i];
            size_t len = e - i + 1;
            if (set)
                for (size_t m = 0; m < len; m++)
                    c[m] = -g[m] * si;
            else
                for (size_t m = 0; m < len; m++)
                    c[m] -= g[m] * si;
            c[0] += ldbar * inv;
        }
    } else {
        for (size_t m = 0; m < n; m++) {
            const double *lc = gmm_band_col(L, m);
            size_t e = min_sz(n - 1, m + l);
            double inv = 1.0 / lc[m];
            double gm = G[m] *= inv;
            {
                double *restrict g = G + m;
                const double *restrict lm = lc + m;
                for (size_t i = 1; i <= e - m; i++)
                    g[i] -= lm[i] * gm;
            }
            if (!Lbar)
                continue;
            double *restrict c = gmm_band_col(Lbar, m) + m;
            const double *restrict sm = s + m;
            size_t len = e - m + 1;
            if (set)
                for (size_t i = 0; i < len; i++)
                    c[i] = -sm[i] * gm;
            else
                for (size_t i = 0; i < len; i++)
                    c[i] -= sm[i] * gm;
            c[0] += ldbar * inv;
        }
    }
}

/* The op = L, set case of vec_rev_sweep (the marginal likelihood's), with
 * the bandwidth l a constant in the specialised copies (band_solve_impl.h). */
/* One column; gp carries g(i+1) in a register from the previous column (the
 * critical path), and returns g(i). */
BAND_INLINE double notrans_set_col(const double *restrict lc, double *restrict g,
                                   double *restrict c, double si, size_t len, double ldbar,
                                   double gp)
{
    double inv = 1.0 / lc[0];
    double t = g[0] - band_dot_far(lc, g, 2, len);
    if (len >= 1)
        t -= lc[1] * gp;
    double gi = t * inv;
    g[0] = gi;
    c[0] = -gi * si + ldbar * inv;
    /* g(i+1) from the register: a vector load of g(i+1..) would straddle
     * its recent 8-byte store */
    if (len >= 1)
        c[1] = -gp * si;
    for (size_t m = 2; m <= len; m++)
        c[m] = -g[m] * si;
    return gi;
}

BAND_INLINE void notrans_set_sweep(const gmm_band *L, size_t l, const double *s, double *G,
                                   gmm_band *Lbar, double ldbar)
{
    size_t n = L->n, ifull = n > l ? n - l : 0;
    double gp = 0.0;
    for (size_t i = n; i-- > ifull;)
        gp = notrans_set_col(gmm_band_col(L, i) + i, G + i, gmm_band_col(Lbar, i) + i, s[i],
                             n - 1 - i, ldbar, gp);
    for (size_t i = ifull; i-- > 0;)
        gp = notrans_set_col(gmm_band_col(L, i) + i, G + i, gmm_band_col(Lbar, i) + i, s[i], l,
                             ldbar, gp);
}

/* Wide bands, op = L: G = L^{-T} sbar by the blocked back substitution
 * (band_solve.c), then Lbar in one streaming pass, column j (op)=
 * -g(j..j+l) s(j), plus ldbar / L(j,j) on the diagonal.  The fused sweep
 * (vec_rev_sweep) does the back substitution by one dot product per column,
 * a chain of dependent sums that wide bands pay for several times over.  For
 * op = L^T the fused forward sweep streams L and Lbar together and stays:
 * from memory, one pass over both beats two. */
static void lbar_pass(const gmm_band *L, const double *s, const double *G, gmm_band *Lbar,
                      int set, double ldbar)
{
    size_t n = L->n, l = L->kl;
    for (size_t j = 0; j < n; j++) {
        double *restrict c = gmm_band_col(Lbar, j) + j;
        const double *restrict g = G + j;
        double sj = s[j];
        size_t len = min_sz(n - 1, j + l) - j + 1;
        if (set)
            for (size_t i = 0; i < len; i++)
                c[i] = -g[i] * sj;
        else
            for (size_t i = 0; i < len; i++)
                c[i] -= g[i] * sj;
        if (ldbar != 0.0)
            c[0] += ldbar / gmm_band_col(L, j)[j];
    }
}

static gmm_status vec_rev(const char *who, const gmm_band *L, gmm_trans trans, const double *s,
                          const double *sbar, double *vbar, gmm_band *Lbar, double *work,
                          int set, double ldbar)
{
    gmm_status st = check_lbar(who, L, Lbar);
    if (st != GMM_OK)
        return st;
    size_t n = L->n;
    if ((!vbar && !Lbar) || n == 0)
        return GMM_OK;
    double *G = work, *own = NULL;
    if (!G) {
        G = own = gmm_malloc(n, sizeof *G);
        if (!G)
            return gmm_error(GMM_ENOMEM, "%s: out of memory (%zu doubles)", who, n);
    }
    memcpy(G, sbar, n * sizeof *G);
    if (trans == GMM_NOTRANS && blk_use(L->n, L->kl, 1)) {
        gmm_band_tri_solve_vec(L, GMM_TRANS, G);
        if (Lbar)
            lbar_pass(L, s, G, Lbar, set, ldbar);
    } else if (set && trans == GMM_NOTRANS) {
        switch (L->kl) {
#define FIXED(K)                                                                                   \
    case K:                                                                                        \
        notrans_set_sweep(L, K, s, G, Lbar, ldbar);                                                \
        break;
            BAND_FIXED_BANDWIDTHS(FIXED)
#undef FIXED
        default:
            notrans_set_sweep(L, L->kl, s, G, Lbar, ldbar);
        }
    } else {
        vec_rev_sweep(L, trans, s, G, Lbar, set, ldbar);
    }
    /* vbar after the sweep, so that vbar may share storage with s. */
    if (vbar)
        for (size_t i = 0; i < n; i++)
            vbar[i] += G[i];
    gmm_free(own);
    return GMM_OK;
}

gmm_status gmm_band_tri_solve_vec_rev(const gmm_band *L, gmm_trans trans, const double *s,
                                      const double *sbar, double *vbar, gmm_band *Lbar,
                                      double *work)
{
    return vec_rev("tri_solve_vec_rev", L, trans, s, sbar, vbar, Lbar, work, 0, 0.0);
}

gmm_status gmm_band_tri_solve_vec_rev_set(const gmm_band *L, gmm_trans trans, const double *s,
                                          const double *sbar, double cbar_logdet,
                                          gmm_band *Lbar, double *work)
{
    if (!Lbar)
        return gmm_error(GMM_EINVAL, "tri_solve_vec_rev_set: NULL Lbar");
    return vec_rev("tri_solve_vec_rev_set", L, trans, s, sbar, NULL, Lbar, work, 1,
                   2.0 * cbar_logdet);
}

gmm_status gmm_band_tri_solve_mat_rev(const gmm_band *L, gmm_trans trans, size_t k,
                                      const double *S, size_t lds, const double *Sbar,
                                      size_t ldsbar, double *Vbar, size_t ldvbar,
                                      gmm_band *Lbar, double *work)
{
    gmm_status st = check_lbar("tri_solve_mat_rev", L, Lbar);
    if (st != GMM_OK)
        return st;
    size_t n = L->n;
    if (k > 0 && (lds < n || ldsbar < n || (Vbar && ldvbar < n)))
        return gmm_error(GMM_EDIM, "tri_solve_mat_rev: leading dimension < n = %zu (lds %zu, "
                                   "ldsbar %zu, ldvbar %zu)", n, lds, ldsbar, ldvbar);
    if ((!Vbar && !Lbar) || n == 0 || k == 0)
        return GMM_OK;

    double *G = work, *own = NULL;
    if (!G) {
        G = own = gmm_malloc(n * k, sizeof *G);
        if (!G)
            return gmm_error(GMM_ENOMEM, "tri_solve_mat_rev: out of memory (%zu x %zu)", n, k);
    }
    for (size_t c = 0; c < k; c++)
        memcpy(G + c * n, Sbar + c * ldsbar, n * sizeof *G);
    /* G = op(L)^{-T} Sbar. */
    st = gmm_band_tri_solve_mat(L, trans == GMM_NOTRANS ? GMM_TRANS : GMM_NOTRANS, k, G, n);
    if (st != GMM_OK)
        goto done;
    /* Lbar before Vbar, so that Vbar may share storage with S. */
    if (Lbar) {
        if (trans == GMM_NOTRANS)
            lbar_outer(Lbar, k, G, n, S, lds);
        else
            lbar_outer(Lbar, k, S, lds, G, n);
    }
    if (Vbar)
        for (size_t c = 0; c < k; c++)
            for (size_t i = 0; i < n; i++)
                Vbar[c * ldvbar + i] += G[c * n + i];
done:
    gmm_free(own);
    return st;
}

/* Row p of a band matrix as (offset of entry (p, 0), stride): entry (p, j)
 * lives at data[off + j * (ld - 1)] for j in p's band. */
static size_t row_off(const gmm_band *A, size_t p) { return A->ku + p; }

/* sum_j P(i,j) Q(m,j) over j in [j0, j1]; both rows inside their bands. */
static double row_dot(const gmm_band *P, size_t i, const gmm_band *Q, size_t m, size_t j0,
                      size_t j1)
{
    const double *p = P->data + row_off(P, i), *q = Q->data + row_off(Q, m);
    size_t sp = P->ld - 1, sq = Q->ld - 1;
    double s = 0.0;
    for (size_t j = j0; j <= j1; j++)
        s += p[j * sp] * q[j * sq];
    return s;
}

gmm_status gmm_band_tri_solve_band_rev(const gmm_band *L, gmm_trans trans, const gmm_band *B,
                                       const gmm_band *X, const gmm_band *Xbar, gmm_band *Bbar,
                                       gmm_band *Lbar)
{
    gmm_status st = check_lbar("tri_solve_band_rev", L, Lbar);
    if (st != GMM_OK)
        return st;
    size_t n = L->n;
    if (B->n != n || X->n != n || Xbar->n != n || (Bbar && Bbar->n != n))
        return gmm_error(GMM_EDIM, "tri_solve_band_rev: n differs (L %zu, B %zu, X %zu, Xbar "
                                   "%zu, Bbar %zu)", n, B->n, X->n, Xbar->n,
                         Bbar ? Bbar->n : n);
    if (B->kind == GMM_BAND_SYMMETRIC || X->kind == GMM_BAND_SYMMETRIC ||
        (Bbar && Bbar->kind == GMM_BAND_SYMMETRIC))
        return gmm_error(GMM_EDIM, "tri_solve_band_rev: B, X and Bbar must be GENERAL or "
                                   "LOWER");
    if (Xbar->kl != X->kl || Xbar->ku != X->ku || Xbar->kind == GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "tri_solve_band_rev: Xbar must have X's band (kl %zu, ku "
                                   "%zu), got kl %zu, ku %zu", X->kl, X->ku, Xbar->kl,
                         Xbar->ku);
    if (trans == GMM_NOTRANS ? X->ku < B->ku : X->kl < B->kl)
        return gmm_error(GMM_EDIM, "tri_solve_band_rev: X's band (kl %zu, ku %zu) does not "
                                   "hold the forward result for B (kl %zu, ku %zu)",
                         X->kl, X->ku, B->kl, B->ku);
    if ((!Bbar && !Lbar) || n == 0)
        return GMM_OK;

    /* G = op(L)^{-T} Xbar on the band derived in the header comment. */
    size_t gkl, gku;
    if (trans == GMM_NOTRANS) {
        gkl = X->kl;
        gku = max_sz(Lbar ? B->ku : 0, Bbar ? Bbar->ku : 0);
    } else {
        gkl = max_sz(Lbar ? B->kl : 0, Bbar ? Bbar->kl : 0);
        gku = X->ku;
    }
    gmm_band *G = gmm_band_alloc(n, gkl, gku, GMM_BAND_GENERAL);
    if (!G)
        return gmm_error_status();
    st = gmm_band_tri_solve_band(L, trans == GMM_NOTRANS ? GMM_TRANS : GMM_NOTRANS, Xbar, G);
    if (st != GMM_OK)
        goto done;

    if (Bbar)
        for (size_t j = 0; j < n; j++) {
            double *b = gmm_band_col(Bbar, j);
            size_t i0 = j >= Bbar->ku ? j - Bbar->ku : 0, i1 = min_sz(n - 1, j + Bbar->kl);
            for (size_t i = i0; i <= i1; i++)
                if (gmm_band_in_band(G, i, j))
                    b[i] += *gmm_band_ptr(G, i, j);
        }

    if (Lbar)
        for (size_t m = 0; m < n; m++) {
            double *col = gmm_band_col(Lbar, m);
            size_t i1 = min_sz(n - 1, m + L->kl);
            for (size_t i = m; i <= i1; i++) {
                size_t j0, j1;
                if (trans == GMM_NOTRANS) { /* -sum_j G(i,j) X(m,j) */
                    j0 = i >= X->kl ? i - X->kl : 0;
                    j1 = min_sz(n - 1, m + B->ku);
                    if (j0 <= j1)
                        col[i] -= row_dot(G, i, X, m, j0, j1);
                } else { /* -sum_j X(i,j) G(m,j) */
                    j0 = i >= B->kl ? i - B->kl : 0;
                    j1 = min_sz(n - 1, m + X->ku);
                    if (j0 <= j1)
                        col[i] -= row_dot(X, i, G, m, j0, j1);
                }
            }
        }
done:
    gmm_band_free(G);
    return st;
}
