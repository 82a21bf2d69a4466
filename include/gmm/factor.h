/* factor.h -- one interface to the factorisation of a symmetric positive
 * definite precision Q = L L^T: factor, solve with L, L^T or Q, log|Q| and
 * the selected inverse on Q's pattern.  Inference asks these of a
 * gmm_factor, not of band storage, so that a second factorisation can stand
 * beside the band one. */
#ifndef GMM_FACTOR_H
#define GMM_FACTOR_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/sparse.h"
#include "gmm/status.h"

/* A factor is allocated once for a pattern (symbolic work: the band's
 * width here) and refactored at every parameter value (numeric work); the
 * dispatch is one indirect call per operation, the loops stay inside each
 * implementation.  Errors: GMM_EDIM (a matrix of another size or pattern),
 * GMM_ENOTPD (Q not positive definite; gmm_error_index the failing column),
 * GMM_EINVAL (no factor yet).  A factor owns its storage. */
typedef struct gmm_factor gmm_factor;

/* A factor for n x n symmetric precisions of lower bandwidth kl (the band
 * Cholesky, band.h).  NULL when out of memory (gmm_error's record says). */
gmm_factor *gmm_factor_band_alloc(size_t n, size_t kl);
void gmm_factor_free(gmm_factor *f);

/* A factor for n x n symmetric precisions with the pattern of A (values
 * not read; sparse.h): the supernodal sparse Cholesky (CHOLMOD) after a
 * fill-reducing ordering (the best of AMD and METIS's nested dissection by
 * the analysis' count), analysed here once.  Its L is the factor of Q in
 * the original order (the ordering's permutation folded in, P'L_c), so
 * that Q = L L^T and every operation below keeps its meaning.  NULL when
 * out of memory or the analysis fails (gmm_error's record says).  Its
 * solves and selected inverse write scratch the factor owns: one factor
 * serves one thread at a time. */
gmm_factor *gmm_factor_sparse_alloc(const gmm_sparse *A);
/* Predicted cost of one factorisation and of its storage: *flops, and
 * *bytes for L's values and indices (band: n (kl + 1) doubles;
 * sparse: from the analysis).  Either may be NULL. */
void gmm_factor_cost(const gmm_factor *f, double *flops, double *bytes);
/* Nonzeros of L, its diagonal included: the band's n (kl + 1) - kl (kl +
 * 1) / 2, the sparse factor's from the analysis (without the explicit
 * zeros of relaxed supernodes). */
double gmm_factor_nnz(const gmm_factor *f);

/* The fill-reducing ordering the factor's analysis chose: "AMD", "METIS",
 * "NESDIS" (CHOLMOD's nested dissection) for the sparse factor, "RCM band"
 * for the band (whose ordering is the caller's).  A static string. */
const char *gmm_factor_ordering(const gmm_factor *f);

/* The implementation's name ("band", "sparse"). */
const char *gmm_factor_name(const gmm_factor *f);
size_t gmm_factor_dim(const gmm_factor *f);

/* L L^T = Q (Q SYMMETRIC, of the size and bandwidth the factor was made for).
 * Q is read, not kept.  O(n kl^2) for the band. */
gmm_status gmm_factor_decomp(gmm_factor *f, const gmm_band *Q);

/* L L^T = Q for Q with the pattern the sparse factor was made for
 * (GMM_EDIM otherwise; GMM_EINVAL on a band factor). */
gmm_status gmm_factor_decomp_sparse(gmm_factor *f, const gmm_sparse *Q);

/* Take L (LOWER, the factor's size and bandwidth) as the factor of
 * Q = L L^T: one made elsewhere (the Laplace posterior's), copied.  Its
 * solves then skip the columns below which L is zero (band.h,
 * gmm_band_tri_reach; the same result), worth it for a factor solved with
 * many times. */
gmm_status gmm_factor_set_chol(gmm_factor *f, const gmm_band *L);

/* x <- L^-1 x, x <- L^-T x, x <- Q^-1 x = L^-T L^-1 x (x: n).  O(n kl). */
gmm_status gmm_factor_solve_l(const gmm_factor *f, double *x);
gmm_status gmm_factor_solve_lt(const gmm_factor *f, double *x);
gmm_status gmm_factor_solve(const gmm_factor *f, double *x);

/* X <- Q^-1 X for the ncol columns of X (n x ncol, column-major).  The
 * sparse factor solves them together, reading L once for all (triangular
 * solves are bound by reading L: a lattice's three right-hand sides cost
 * about one); the band one column at a time. */
gmm_status gmm_factor_solve_many(const gmm_factor *f, double *X, size_t ncol);

/* y = L^T x (x, y: n, distinct).  O(n kl). */
gmm_status gmm_factor_mul_lt(const gmm_factor *f, const double *x, double *y);

/* log|Q| = 2 sum_j log L_jj of the last factorisation. */
double gmm_factor_logdet(const gmm_factor *f);

/* S <- the entries of Q^-1 on S's band (S SYMMETRIC n x n; at least Q's
 * pattern is exact, wider bands too for the band factor).  O(n kl^2). */
gmm_status gmm_factor_selinv(const gmm_factor *f, gmm_band *S);

/* S <- the entries of Q^-1 on S's pattern, which must lie within the
 * factor's L pattern (the pattern it was made for always does; GMM_EDIM
 * otherwise).  Both factors: the band's from its band, the sparse one's by
 * Takahashi's recurrence on the pattern of L.  O(sum over columns of L of
 * their count squared) for the sparse factor. */
gmm_status gmm_factor_selinv_sparse(const gmm_factor *f, gmm_sparse *S);
/* Reverse mode of the last gmm_factor_selinv_sparse (the same f, not
 * refactored since; S its output, read): Qbar += d<Sbar, S>/dQ on Qbar's
 * pattern (within the pattern the factor was made for), by the
 * recurrence's reverse and the Cholesky's; Sbar on S's pattern, symmetric
 * convention (an off-diagonal entry stands for both (i, j) and (j, i)).
 * O(the forward's).  The band factor: from its band's reverse modes
 * (band.h), recomputing the band of Q^-1. */
gmm_status gmm_factor_selinv_sparse_rev(const gmm_factor *f, const gmm_sparse *S,
                                        const gmm_sparse *Sbar, gmm_sparse *Qbar);

/* The band Cholesky factor of the last factorisation, for the band's own
 * reverse-mode routines; NULL for a factorisation that is not banded. */
const gmm_band *gmm_factor_band_chol(const gmm_factor *f);

#endif
