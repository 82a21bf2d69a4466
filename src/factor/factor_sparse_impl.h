/* factor_sparse_impl.h -- the sparse factor's state, shared by its
 * factorisation (factor_sparse.c), its selected inverse
 * (factor_sparse_selinv.c) and that one's reverse mode
 * (factor_sparse_selinv_rev.c).  Private. */
#ifndef GMM_FACTOR_SPARSE_IMPL_H
#define GMM_FACTOR_SPARSE_IMPL_H

#include <cholmod.h>
#include <stddef.h>

#include "gmm/factor.h"

/* CHOLMOD factors P Q P^T = L_c L_c^T (P the fill-reducing permutation,
 * Perm[k] the original index of position k); the factor's L is P^T L_c.
 * Every array below indexed by position is in the factor's (permuted)
 * order, except pinv, which maps original indices to positions. */
typedef struct {
    cholmod_common c;      /* one per factor: CHOLMOD's workspace and options */
    cholmod_sparse *A;     /* Q's lower triangle (stype -1), original order */
    cholmod_sparse *S;     /* supernodal L: tril(P Q P'), L's order (stype -1) ... */
    size_t *smap;          /* ... entry t of S holds Q's entry smap[t] */
    cholmod_factor *L;     /* LL^T, supernodal or simplicial as the analysis chose */
    cholmod_dense *B;      /* n x 1: a solve's right-hand side */
    cholmod_dense *X, *Y, *E; /* cholmod_l_solve2's result and workspaces, reused */
    cholmod_dense *Bm, *Xm, *Ym, *Em; /* the same for solve_many's columns */
    SuiteSparse_long *colsup; /* supernodal L: the supernode of each column */
    SuiteSparse_long *pinv;   /* n: position of each original index */
    SuiteSparse_long *mark;   /* n: -1, or a row's place in the column at hand */
    double *z;                /* n: a column's accumulator */
    double *sigma;            /* Q^-1 on L's pattern, in L->x's layout */
    size_t sigma_cap;         /* doubles allocated for sigma */
    int has_sigma;            /* sigma is of the current factorisation */
    double *rev;              /* the reverse mode's two arrays in L's layout */
    size_t rev_cap;           /* doubles of each */
    size_t n;
    double fl, lnz;           /* the analysis' flops and nnz(L) */
} sparse_state;

/* Column j of L_c (and of sigma, in the same layout): its rows ascending,
 * the diagonal first, at *rows; the offset of its diagonal value in L->x
 * at *off; returns its length.  Both CHOLMOD layouts store a column's rows
 * and values contiguously: a supernode's columns are the trailing parts of
 * its column-major block. */
static inline size_t lcol(const sparse_state *s, size_t j, const SuiteSparse_long **rows,
                          size_t *off)
{
    const cholmod_factor *L = s->L;
    if (L->is_super) {
        const SuiteSparse_long *super = L->super, *pi = L->pi, *px = L->px;
        SuiteSparse_long k = s->colsup[j];
        size_t nsrow = (size_t)(pi[k + 1] - pi[k]), jj = j - (size_t)super[k];
        *rows = (const SuiteSparse_long *)L->s + pi[k] + jj;
        *off = (size_t)px[k] + jj * nsrow + jj;
        return nsrow - jj;
    }
    const SuiteSparse_long *Lp = L->p, *Lnz = L->nz;
    *rows = (const SuiteSparse_long *)L->i + Lp[j];
    *off = (size_t)Lp[j];
    return (size_t)Lnz[j];
}

/* The sparse factor's selected inverse (factor_sparse_selinv.c): sigma
 * from the current L, then S's entries from sigma. */
gmm_status gmm_factor_impl_sparse_selinv(const void *state, gmm_sparse *S);
/* Its reverse mode (factor_sparse_selinv_rev.c). */
gmm_status gmm_factor_impl_sparse_selinv_rev(const void *state, const gmm_sparse *S,
                                              const gmm_sparse *Sbar,
                                              gmm_sparse *Qbar);
/* The supernodal forms (factor_sparse_super.c), for a supernodal L: sigma
 * from L; Sbar (sb, L's layout) -> Lbar (lb) -> Abar (into sb), len the
 * arrays' length. */
gmm_status gmm_factor_impl_sparse_selinv_super(sparse_state *s);
gmm_status gmm_factor_impl_sparse_selinv_rev_super(sparse_state *s, double *sb, double *lb,
                                                   size_t len);
/* The position of Sigma(i, j) (positions in the factor's order) in sigma,
 * SIZE_MAX when (i, j) is outside L's pattern.  O(log of the column). */
size_t gmm_factor_impl_sparse_sigma_find(const sparse_state *s, size_t i, size_t j);

/* The sparse factor's numeric work (CHOLMOD's factorisation, the selected
 * inverse and its reverse, the solves) runs on one thread: _serial_begin
 * saves the OpenMP and OpenBLAS thread settings and sets both to one,
 * _serial_end restores them (factor_sparse_serial.c says why). */
void gmm_factor_impl_sparse_serial_begin(void);
void gmm_factor_impl_sparse_serial_end(void);

#endif
