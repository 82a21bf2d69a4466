/* constr.h -- a Gaussian with a banded precision P conditioned on k linear
 * constraints A x = 0, where P itself may be singular along directions the
 * constraints remove (an intrinsic prior the data do not see), by kriging
 * and pinned latents (the derivation: src/model/constr.c).  Used by the
 * exact marginal likelihood, the Laplace approximation and VI's q.
 */
#ifndef GMM_CONSTR_H
#define GMM_CONSTR_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/factor.h"
#include "gmm/sparse.h"
#include "gmm/status.h"

/* TAU.  The caller adds tau E_S E_S' to P (gmm_constr_pin) and passes the
 * same tau to gmm_constr_factor, which keeps it with the factors it makes:
 * solve, band, logdet, krig and rev read the last factor's.  The object
 * holds no other tau, so nothing needs resetting between uses.
 *
 * Vectors have n entries; A is k x n row-major.  Costs: factor O(k n l + n
 * k^2) (2k banded solves), solve O(n l + n k), band O(n l' k). */

typedef struct gmm_constr gmm_constr;

/* Copies A (k x n) and pin (k indices < n).  NULL + GMM_ENOMEM, or
 * GMM_EINVAL for a pin out of range. */
gmm_constr *gmm_constr_alloc(size_t n, size_t k, const double *A, const size_t *pin);
void gmm_constr_free(gmm_constr *c); /* NULL-safe */

/* tau from the prior Q (SYMMETRIC n x n): the largest Q(s, s) over the
 * pins, 1 when none is positive. */
double gmm_constr_tau(const gmm_constr *c, const gmm_band *Q);
/* P += tau E_S E_S' (P SYMMETRIC n x n). */
void gmm_constr_pin(const gmm_constr *c, double tau, gmm_band *P);
/* The kriging and pin factors from L (LOWER, L L' = P~ = P + tau E_S E_S',
 * the tau given to gmm_constr_pin; 0: no pins, L L' = P).  GMM_ENOTPD when
 * the constraints are dependent or the conditioned precision is not
 * positive definite on the subspace (the message says which). */
gmm_status gmm_constr_factor(gmm_constr *c, const gmm_band *L, double tau);
/* v <- Sigma_c v (after gmm_constr_factor with the same L). */
gmm_status gmm_constr_solve(gmm_constr *c, const gmm_band *L, double *v);
/* S <- Sigma_c's band, from S = the band of P~^-1 (gmm_band_chol_selinv of
 * L; S SYMMETRIC, any bandwidth). */
void gmm_constr_band(const gmm_constr *c, gmm_band *S);
/* The same through a gmm_factor F of P~ (any implementation: the sparse
 * path's), one algebra with the band's: gmm_constr_factor and
 * gmm_constr_solve with F's solves for L's; gmm_constr_sparse for
 * gmm_constr_band on S = P~^-1's entries on a sparse pattern (sparse.h,
 * from gmm_factor_selinv_sparse); tau and the pins on sparse Q and P
 * (their diagonals, always stored).  gmm_constr_rev stays the band's. */
gmm_status gmm_constr_factor_with(gmm_constr *c, const gmm_factor *F, double tau);
gmm_status gmm_constr_solve_with(gmm_constr *c, const gmm_factor *F, double *v);
/* gmm_constr_factor_with, then gmm_constr_solve_with of v: v's solve by F
 * joins the factors' own (gmm_factor_solve_many), one pass over F's L for
 * all (a Newton step's).  On an error v is overwritten. */
gmm_status gmm_constr_factor_solve_with(gmm_constr *c, const gmm_factor *F, double tau,
                                        double *v);
void gmm_constr_sparse(const gmm_constr *c, gmm_sparse *S);
double gmm_constr_tau_sparse(const gmm_constr *c, const gmm_sparse *Q);
void gmm_constr_pin_sparse(const gmm_constr *c, double tau, gmm_sparse *P);
/* log|G| + log|K| of the last factor. */
double gmm_constr_logdet(const gmm_constr *c);
/* v <- v - P~^-1 A' G^-1 A v (after gmm_constr_factor): the mean of
 * N(v, P~^-1) conditioned on A x = 0.  O(n k). */
void gmm_constr_krig(gmm_constr *c, double *v);
/* x <- x - A'(AA')^-1 A x: x's nearest point with A x = 0 (no factor
 * needed).  GMM_ENOMEM; GMM_ENOTPD when the constraints are dependent (x
 * unchanged). */
gmm_status gmm_constr_project(const gmm_constr *c, double *x);
/* v <- a draw from N(0, Sigma_c) made of v = L^-T z, z ~ N(0, I) a draw
 * from N(0, P~^-1) (after gmm_constr_factor, either form): krig(v) (the
 * covariance Sigma~_c) plus sqrt(tau) Z L_G^-1 A v, the pins' term tau Z Z'
 * drawn from the k coordinates of z that kriging removes (L_G^-1 A v =
 * B'z, B = L^-1 A' L_G^-T orthonormal: independent of the rest).  A v = 0
 * after.  O(n k). */
void gmm_constr_draw(gmm_constr *c, double *v);
/* Reverse mode without pins (after gmm_constr_factor with tau = 0;
 * GMM_EINVAL otherwise), after gmm_constr_factor with L (L L' = P, Sigma = P^-1): for
 *
 *   f(L, m) = mcbar' m_c + <Sbar, -band(V V')>,  m_c = krig(m),
 *
 * the part of Sigma_c's band that gmm_constr_band subtracts from Sigma's
 * (Sbar SYMMETRIC, any bandwidth, band.h's symmetric convention; NULL: 0),
 * Lbar (LOWER, bandwidth >= L's) += df/dL on L's band and mbar (n) +=
 * df/dm.  mc = krig(m) from the forward pass.  The dependence through
 * Sigma's band itself is gmm_band_chol_selinv_rev's (the caller's): the
 * two together differentiate any function of m_c and Sigma_c's band
 * (constr.c, GRADIENT).  The first call allocates 4 n k + 3 n doubles
 * (GMM_ENOMEM); GMM_EDIM for bands of another order.  O(n (b + l) k). */
gmm_status gmm_constr_rev(gmm_constr *c, const gmm_band *L, const double *m, const double *mc,
                          const double *mcbar, const gmm_band *Sbar, gmm_band *Lbar,
                          double *mbar);

#endif
