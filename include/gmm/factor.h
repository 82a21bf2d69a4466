/* factor.h -- one interface to the factorisation of a symmetric positive
 * definite precision Q = L L^T: factor, solve with L, L^T or Q, log|Q| and
 * the selected inverse on Q's pattern.  Inference asks these of a
 * gmm_factor, not of band storage, so that a second factorisation can stand
 * beside the band one. */
#ifndef GMM_FACTOR_H
#define GMM_FACTOR_H

#include <stddef.h>

#include "gmm/band.h"
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

/* The implementation's name ("band"). */
const char *gmm_factor_name(const gmm_factor *f);
size_t gmm_factor_dim(const gmm_factor *f);

/* L L^T = Q (Q SYMMETRIC, of the size and bandwidth the factor was made for).
 * Q is read, not kept.  O(n kl^2) for the band. */
gmm_status gmm_factor_decomp(gmm_factor *f, const gmm_band *Q);

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

/* y = L^T x (x, y: n, distinct).  O(n kl). */
gmm_status gmm_factor_mul_lt(const gmm_factor *f, const double *x, double *y);

/* log|Q| = 2 sum_j log L_jj of the last factorisation. */
double gmm_factor_logdet(const gmm_factor *f);

/* S <- the entries of Q^-1 on S's band (S SYMMETRIC n x n; at least Q's
 * pattern is exact, wider bands too for the band factor).  O(n kl^2). */
gmm_status gmm_factor_selinv(const gmm_factor *f, gmm_band *S);

/* The band Cholesky factor of the last factorisation, for the band's own
 * reverse-mode routines; NULL for a factorisation that is not banded. */
const gmm_band *gmm_factor_band_chol(const gmm_factor *f);

#endif
