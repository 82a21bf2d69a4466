/* laplace.h -- the Laplace approximation of a latent GMRF x ~ N(0, Q^-1)
 * under a non-Gaussian likelihood, in banded form (linear in n): the mode
 * by Newton, log q(y) and its exact gradient, the Gaussian posterior at the
 * mode and draws from it; with Q assembled or through a smoother on a
 * square root of Q.  Derivations: laplace.c (the model, log q, the line
 * search), laplace_newton.c (Newton, the gradient, constraints),
 * laplace_sqrt.c (the square-root form).
 */
#ifndef GMM_LAPLACE_H
#define GMM_LAPLACE_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/factor.h"
#include "gmm/sparse.h"
#include "gmm/likelihood.h"
#include "gmm/obsmap.h"
#include "gmm/status.h"

/* The observations: map's nrows rows (obsmap.h; sparse rows in the
 * assembled form only; the coefficient gradient is laid out as map.coef),
 * row i with outcome y[i] (finite, valid for the likelihood), exposure e[i]
 * (e NULL: 1), and a fixed shift s_i of its linear predictor, shift[i]
 * (shift NULL: 0; the fixed effects X_i beta).
 * cst: the rows' likelihood constants, gmm_lik_row_const of (y[i], e[i])
 * at cst[i nconst ..] (nconst = gmm_lik_nconst of the evaluations' lik),
 * or NULL to form them at every row evaluation (log y!, log e: the same
 * values, at a cost the Newton iterations repeat). */
typedef struct {
    gmm_obsmap map;
    const double *y;
    const double *e;
    const double *shift;
    const double *cst;
} gmm_laplace_obs;

typedef struct {
    size_t max_iter;  /* Newton iterations, default 200 */
    double tol;       /* stop when the Newton decrement g'P^-1 g is below
                       * tol max(1, |Psi|) (then one more full step); default
                       * 1e-12 */
    /* polled before each Newton step: nonzero ends the evaluation with
     * GMM_ECANCEL (a caller's interrupt; NULL, the default: never) */
    int (*stop)(void *user);
    void *stop_user;
    /* the cold start without x0 (laplace.c, COLD START): 0, the default,
     * where a factorisation is dear; 1 always; -1 never (Newton from 0) */
    int cold;
} gmm_laplace_params;

void gmm_laplace_params_init(gmm_laplace_params *p);

typedef struct gmm_laplace gmm_laplace;

/* Workspace for latent dimension n, prior bandwidth kl, covariance band
 * cov_kl >= kl (what predictions need), up to maxobs rows of width <= kl +
 * 1; n = 0 with width 0 (an empty latent: a GLM, whose Laplace value is
 * the log-likelihood at the offsets).  About four bands of (cov_kl + 1) n
 * doubles.  NULL + GMM_ENOMEM. */
gmm_laplace *gmm_laplace_alloc(size_t n, size_t kl, size_t cov_kl, size_t maxobs, size_t width);
/* Prior weights of the observations (borrowed: one per row of the obs
 * later evaluations take, finite and >= 0, unchanged and alive while they
 * are used; NULL: all 1): row i's log p(y_i | f) is then
 * gmm_lik_eval_weighted's with w[i], in the Newton steps, log q, the
 * draws' weights and every gradient alike. */
void gmm_laplace_set_weights(gmm_laplace *w, const double *wt);
void gmm_laplace_free(gmm_laplace *w);

/* Linear constraints A x = 0 (k rows of n, row-major, linearly
 * independent; pin: k latents as constr.h; both copied; k = 0 removes
 * them) for the evals that follow: the mode is sought on the subspace (x0
 * must lie in it), logdet_q must then be supplied as log det(V'QV) + log
 * det(AA') (V an orthonormal basis of the subspace; Q may be singular off
 * it), and
 *
 *   log q(y) = sum_i log p(y_i | f^_i) - x^'Q x^/2
 *              + logdet_q/2 - [log det(V'PV) + log det(AA')]/2;
 *
 * the gradient and the posterior are those of the conditioned Gaussian.
 * GMM_EINVAL, GMM_ENOMEM (3 n k + 2 k^2 doubles).  Each Newton iteration
 * then costs 2k more solves. */
gmm_status gmm_laplace_constrain(gmm_laplace *w, size_t k, const double *A, const size_t *pin);

/* Find the mode x^ of Psi(x) = sum_i log p(y_i | f_i, phi) - x'Qx/2, f_i =
 * b + s_i + h_i' x[o_i .. o_i + width), and the Laplace approximation
 *
 *   log q(y) = sum_i log p(y_i | f^_i) - x^'Q x^/2 + log|Q|/2 - log|P|/2,
 *
 * P = Q + H'WH at the mode (W = diag of -d2 log p), into *logq; Newton with
 * a line search on Psi, convergent from any start for a log-concave
 * likelihood (laplace.c, laplace_newton.c).  Q SYMMETRIC n x n, bandwidth kl
 * (read only).  logdet_q: log|Q| when the caller knows it (state-space),
 * NAN to factorise Q here.  x0: starting latent (n) or NULL (0, or for a
 * log-concave likelihood the mode of an independent model where it is
 * better: laplace.c, COLD START; the last mode of w is used when warm != 0
 * and one exists).  A likelihood that is
 * not log-concave may have several modes: the one found depends on the
 * start.  Errors: GMM_ENOTPD (Q, or P at the point Newton converged to,
 * a saddle rather than a mode: index = row), GMM_ENOCONV (no convergence in max_iter; the
 * message gives the decrement), GMM_EDOM (non-finite values), GMM_EDIM. */
gmm_status gmm_laplace_eval(gmm_laplace *w, const gmm_band *Q, double logdet_q,
                            const gmm_laplace_obs *obs, const gmm_lik *lik, double b,
                            const double *x0, int warm, const gmm_laplace_params *par,
                            double *logq);
/* The mode alone: gmm_laplace_eval's Newton iterations (the same steps,
 * stopping rule and errors, except that P is not checked positive definite
 * at the mode), without the factorisation there or log q: no posterior,
 * draw or gradient follows, but the mode starts a warm evaluation
 * (gmm_laplace_eval_sqrt's, whose own step from it decides whether it is
 * kept).  Q, obs, lik, b, x0, warm, par as gmm_laplace_eval; GMM_EINVAL for
 * a NULL argument. */
gmm_status gmm_laplace_mode(gmm_laplace *w, const gmm_band *Q, const gmm_laplace_obs *obs,
                            const gmm_lik *lik, double b, const double *x0, int warm,
                            const gmm_laplace_params *par);
/* Iterations of the last eval. */
size_t gmm_laplace_iterations(const gmm_laplace *w);

/* Reverse mode of the last successful eval (obs and lik unchanged):
 * Qbar (SYMMETRIC, bandwidth >= kl, band.h convention) += dlogq/dQ, without
 * the log|Q|/2 term when the eval was given logdet_q (the caller then adds
 * 1/2 dlog|Q|); *bbar += dlogq/db; parbar (nparam of lik) += dlogq/dphi;
 * coefbar (nobs x width) += dlogq/dh; shiftbar (nobs) += dlogq/ds_i.  Any
 * may be NULL.  O(n cov_kl^2). */
gmm_status gmm_laplace_grad(gmm_laplace *w, gmm_band *Qbar, double *bbar, double *parbar,
                            double *coefbar, double *shiftbar);

/* THE SPARSE FORM.  Q in sparse storage (sparse.h) and P = Q + H'WH
 * factored by the sparse Cholesky (factor.h): for precisions whose band is
 * wide.  The same Newton iterations, stopping rule, log q, gradient,
 * constraints (gmm_laplace_constrain), draws and errors as the assembled
 * form's; only the storage differs.
 *
 * A workspace for Q's pattern (values not read) and the rows of map (the
 * observed rows later evaluations take: the same nrows, offsets and
 * positions): P's pattern, Q's joined with H'H's, is analysed here once.
 * NULL + GMM_ENOMEM (or the analysis' error). */
gmm_laplace *gmm_laplace_alloc_sparse(const gmm_sparse *Q, const gmm_obsmap *map);
/* gmm_laplace_eval on a workspace from gmm_laplace_alloc_sparse, Q with
 * the pattern it was made for (GMM_EDIM otherwise). */
gmm_status gmm_laplace_eval_sparse(gmm_laplace *w, const gmm_sparse *Q, double logdet_q,
                                   const gmm_laplace_obs *obs, const gmm_lik *lik, double b,
                                   const double *x0, int warm, const gmm_laplace_params *par,
                                   double *logq);
/* gmm_laplace_grad of the last gmm_laplace_eval_sparse: Qbar (the pattern
 * of Q, or one containing it; sparse.h's symmetric convention) +=
 * dlogq/dQ at Q's entries (Qbar's others, not inputs, unchanged; GMM_EDIM
 * when Qbar misses one).  O(Takahashi's recurrence on P's factor). */
gmm_status gmm_laplace_grad_sparse(gmm_laplace *w, gmm_sparse *Qbar, double *bbar,
                                   double *parbar, double *coefbar, double *shiftbar);
/* The posterior of the last sparse evaluation: mode (n, may be NULL) and
 * the entries of its covariance (under constraints the conditioned one) on
 * S's pattern (within P's; may be NULL): the rows' covariances come from
 * H'H's entries. */
gmm_status gmm_laplace_posterior_sparse(gmm_laplace *w, double *mode, gmm_sparse *S);
/* The factor of P at the mode of the last successful sparse evaluation
 * (NULL for the other forms, and under constraints: the factor is then of
 * the pinned P, as gmm_laplace_chol), valid until the next evaluation: for
 * whitening by L^-T.  gmm_laplace_draw and gmm_laplace_posterior_solve
 * serve the sparse form too, the draw under constraints as well (from the
 * conditioned Gaussian: A x = 0; constr.h, gmm_constr_draw). */
const gmm_factor *gmm_laplace_factor(const gmm_laplace *w);

/* THE SQUARE-ROOT FORM.  Each Newton step is a Gaussian smoothing problem
 * (working data yt_i = h_i'x + g_i / w_i, noise variances 1 / w_i), which a
 * smoother solves from a square root of Q without forming Q or P, keeping
 * digits the assembled form loses at close state-space inputs
 * (laplace_sqrt.c, SQUARE-ROOT FORM).  Log-concave likelihoods only (w_i >
 * 0; GMM_EDOM naming the observation otherwise).  The callbacks, arrays
 * over the nobs observations in obs order (status on error):
 *
 *   smooth   the posterior mean (n) of x given yt ~ N(Hx, W^-1), x ~ N(0,
 *            Q^-1), and ML = log N(W^1/2 yt; 0, W^1/2 H Q^-1 H' W^1/2 + I);
 *            record: keep the fold for var and adjoint (the last recorded
 *            call's serve them).  Fixes the smoother's theta for quad.
 *   quad     x'Qx (x: n).
 *   var      after a recorded smooth: s_i = Var(h_i'x) under its posterior;
 *            starts the smoother's gradient in its own parameters (the
 *            prior's), at fixed yt and W.
 *   adjoint  then: zeta = P^-1 sum_i rw_i h_i, u_i = h_i'zeta, and adds to
 *            the prior's gradient d(-zeta'Q mu)/dtheta at fixed zeta and mu
 *            (mu the posterior mean).
 *   rowcov   (NULL: no gradient in the coefficients) then: zeta (n) and
 *            (Sigma h_i) at each of observation i's entries, laid out as
 *            obs->map.coef, Sigma the smoother's posterior covariance. */
typedef struct {
    void *ctx;
    gmm_status (*smooth)(void *ctx, const double *yt, const double *wt, int record, double *ml,
                         double *mean);
    gmm_status (*quad)(void *ctx, const double *x, double *q);
    gmm_status (*var)(void *ctx, double *s);
    gmm_status (*adjoint)(void *ctx, const double *rw, double *u);
    gmm_status (*rowcov)(void *ctx, double *zeta, double *sh);
} gmm_laplace_smoother;

/* As gmm_laplace_eval with the prior through sm (borrowed until the next
 * eval) instead of Q and log|Q|; the same Newton iterations, line search
 * and stopping rule (x0 NULL: 0, without the cold start), except that a
 * start (x0, or warm with a last mode)
 * whose Newton step is below rounding is kept as the mode, its smoothing
 * the evaluation's last (0 iterations; laplace_sqrt.c, SQUARE-ROOT FORM).
 * Errors as gmm_laplace_eval and the smoother's. */
gmm_status gmm_laplace_eval_sqrt(gmm_laplace *w, const gmm_laplace_smoother *sm,
                                 const gmm_laplace_obs *obs, const gmm_lik *lik, double b,
                                 const double *x0, int warm, const gmm_laplace_params *par,
                                 double *logq);
/* Reverse mode of the last successful gmm_laplace_eval_sqrt: the prior's
 * part through the smoother (var, then adjoint), *bbar += dlogq/db,
 * parbar (nparam of lik) += dlogq/dphi and shiftbar (nobs) += dlogq/dshift
 * (any may be NULL), and coefbar (laid out as obs->map.coef; NULL: none;
 * GMM_EINVAL when the smoother has no rowcov) += dlogq/dcoef, the rows'
 * coefficients being parameters too (demodulated kernels).  O(the
 * smoother's gradient), and O(n l^2) for coefbar's covariance. */
gmm_status gmm_laplace_grad_sqrt(gmm_laplace *w, double *bbar, double *parbar, double *coefbar,
                                 double *shiftbar);

/* After a successful eval: the mode (n, or NULL) and the band of the
 * Laplace posterior covariance P^-1 (SYMMETRIC, bandwidth <= cov_kl of the
 * workspace and >= kl, or NULL; after gmm_laplace_eval_sqrt the smoother's
 * posterior gives it: GMM_EINVAL here). */
gmm_status gmm_laplace_posterior(gmm_laplace *w, double *mode, gmm_band *cov);
/* After a successful gmm_laplace_eval: v <- Sigma v (n), Sigma the Laplace
 * posterior covariance P^-1 (conditioned on the constraints when there are
 * any).  Two banded triangular solves, O(n kl + n k).  GMM_EINVAL without
 * one (the square-root form keeps no factor). */
gmm_status gmm_laplace_posterior_solve(gmm_laplace *w, double *v);

/* After a successful eval: x = x^ + L^-T z with L L' = P = Q + H'WH at the
 * mode, a draw from the Laplace Gaussian N(x^, P^-1) when z (n) is standard
 * normal; z and x (n) may be the same array.  The factor is eval's, so a
 * draw costs one banded triangular solve, O(n kl).  logw (or NULL): the
 * draw's log importance weight against the exact posterior,
 * log p(y, x) - log q(y) - log q(x) = Psi(x) - Psi(x^) + z'z/2 (0 for a
 * Gaussian likelihood), O(n kl + nobs width) more.  The workspace's
 * eval results (mode, factor, gradient) are kept.  GMM_EINVAL without a
 * successful eval on the assembled precision (gmm_laplace_eval; the
 * square-root form keeps no factor of P), or under constraints
 * (gmm_laplace_constrain: P's factor is then pinned, not the constrained
 * posterior's) except for the sparse form, which draws from the
 * conditioned Gaussian (logw's last term then (x - x^)'P(x - x^)/2). */
gmm_status gmm_laplace_draw(gmm_laplace *w, const double *z, double *x, double *logw);

/* After a successful eval: L with L L' = Q + H'WH at the mode (LOWER,
 * bandwidth kl; the workspace's, valid until its next eval), or NULL (no
 * successful gmm_laplace_eval -- the square-root form keeps no factor --
 * or constraints: the factor is then of the pinned P). */
const gmm_band *gmm_laplace_chol(const gmm_laplace *w);
/* Where gmm_laplace_chol (or on the sparse form gmm_laplace_factor) gives
 * L: the weights w (nobs, the workspace's, valid until its next eval) with
 * L L' = Q + H' diag(w) H, w_i = -d2 log p(y_i | f_i) at the mode's f_i
 * (negative for a likelihood that is not log-concave); NULL where both
 * give NULL. */
const double *gmm_laplace_weights(const gmm_laplace *w);

#endif
