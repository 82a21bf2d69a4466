/* problem.h -- a latent model (latent.h), a likelihood (likelihood.h) and
 * the data as one problem: the marginal likelihood of the hyperparameters
 * as a gmm_objective (objective.h) -- exact for the Gaussian likelihood,
 * the Laplace approximation (laplace.h) otherwise -- the Gaussian
 * posterior of the latents it implies, predictions of f, and the log joint
 * in whitened coordinates that HMC samples.
 */
#ifndef GMM_PROBLEM_H
#define GMM_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "gmm/band.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/objective.h"
#include "gmm/status.h"
#include "gmm/summary.h"

/* PARAMETERS, in this order: the latent model's (gmm_latent_param_name),
 * the likelihood's ("likelihood.<param>"), then the ncoef coefficients beta
 * of a design X (nrows x ncoef): f_r = X_r beta + (H x)_r.  The intercept
 * is the coefficient of a column of ones ("intercept"); covariates and
 * factor levels are further columns.  Coefficients are parameters of the
 * marginal likelihood, not latents (problem_coef.c). */

typedef struct gmm_problem gmm_problem;

/* lat and lik are borrowed (lik's values are the starting values) and must
 * outlive the problem; y (nrows of lat, NAN = missing) and e (NULL = 1) are
 * copied and checked (gmm_lik_check_data: GMM_EINVAL with the row in
 * gmm_error_index()).  intercept: nonzero to estimate b (non-Gaussian only;
 * GMM_EINVAL for the Gaussian, whose data the caller centres instead),
 * starting at b0.  Workspaces are sized here;
 * evaluations do not allocate.  GMM_ENOMEM. */
gmm_status gmm_problem_alloc(gmm_latent *lat, const gmm_lik *lik, const double *y,
                             const double *e, int intercept, double b0, gmm_problem **out);

/* The fixed effects of a problem: ncoef columns of X (nrows x ncoef,
 * row-major, finite), named name[k] (< 64 bytes), starting at start[k].
 * X is copied into the problem, or with borrow nonzero read where it is
 * (the caller keeps it unchanged and alive until gmm_problem_free: no
 * second copy of a large design). */
typedef struct {
    size_t ncoef;
    const double *X;
    const char *const *name;
    const double *start;
    int borrow;
} gmm_problem_design;

/* As gmm_problem_alloc with a design d (NULL or ncoef 0: none),
 * for any likelihood (the Gaussian's marginal likelihood then has the
 * gradient X'(K + noise I)^-1 (y - X beta) in beta, from the posterior
 * mean at the rows).  Errors as gmm_problem_alloc; GMM_EINVAL for a
 * non-finite X or start. */
gmm_status gmm_problem_alloc_design(gmm_latent *lat, const gmm_lik *lik, const double *y,
                                    const double *e, const gmm_problem_design *d,
                                    gmm_problem **out);
/* As gmm_problem_alloc_design on THE SPARSE PATH: the latent's prior in
 * sparse storage (gmm_latent_prior_sparse) and the Laplace approximation's
 * sparse form (laplace.h), P = Q + H'WH factored by the sparse Cholesky
 * after a fill-reducing ordering, analysed here once; no band of the
 * latent's bandwidth is allocated.  A Gaussian likelihood goes through the
 * Laplace approximation too (exact for it: Newton's first step reaches the
 * mode), as with prior weights.  Errors as gmm_problem_alloc_design, and
 * GMM_EINVAL for a latent without a sparse prior (state-space models,
 * gmm_latent_prior_pattern). */
gmm_status gmm_problem_alloc_sparse(gmm_latent *lat, const gmm_lik *lik, const double *y,
                                    const double *e, const gmm_problem_design *d,
                                    gmm_problem **out);
void gmm_problem_free(gmm_problem *p); /* NULL-safe */

/* Prior weights w (nrows, copied; finite and >= 0; 0 drops a row from the
 * likelihood) for every later evaluation: each row's log p(y | f) as
 * gmm_lik_eval_weighted takes it (R's lm and glm).  Every likelihood, the
 * Gaussian too, is then evaluated by the Laplace approximation, exact for a
 * Gaussian (Newton reaches the mode in one step): the exact path's
 * marginal likelihood has one noise variance for all rows.  Call before
 * the first evaluation.  GMM_EINVAL (row in gmm_error_index()), GMM_ENOMEM. */
gmm_status gmm_problem_set_weights(gmm_problem *p, const double *w);

/* The objective (names, values = starting values, positive flags, none
 * fixed, eval); owned by p.  eval(theta) is log p(y | theta) (exact) or
 * log q(y | theta) (Laplace) with its exact gradient. */
gmm_objective *gmm_problem_objective(gmm_problem *p);
/* Nonzero for the exact (Gaussian) marginal likelihood. */
int gmm_problem_exact(const gmm_problem *p);
/* Nonzero on the sparse path (gmm_problem_design's sparse). */
int gmm_problem_sparse(const gmm_problem *p);
/* The number of coefficients: the last ncoef parameters. */
size_t gmm_problem_ncoef(const gmm_problem *p);
/* The coefficients' scale for optimisers (objective.h, lin_*): a QR of the
 * design's observed rows over the coefficients not fixed, column by column
 * in their order (as R's lm): a column whose part outside the span of the
 * columns kept before it has norm <= tol times its own is aliased -- held
 * fixed at 0 and flagged in aliased[k] (ncoef, may be NULL) -- and the
 * others form R.  Call it again after fixing coefficients.  Errors:
 * GMM_EINVAL (tol outside [0, 1)), GMM_ENOMEM.  O(nobs ncoef^2). */
gmm_status gmm_problem_coef_basis(gmm_problem *p, double tol, int *aliased);
/* The tolerance R's lm uses (dqrdc2's), and the model layer with it. */
#define GMM_ALIAS_TOL 1e-7
/* Nonzero when every row's offset X_r beta is the same (no coefficient, or
 * the intercept alone), so that f at a node or a new input is b + f
 * without covariate values; *b (may be NULL) gets b at theta. */
int gmm_problem_offset_constant(const gmm_problem *p, const double *theta, double *b);
/* mean[0 .. m) += b where the offset is constant (above); GMM_EINVAL
 * when it depends on covariates, which a node or a new input lacks. */
gmm_status gmm_problem_add_offset(const gmm_problem *p, const double *theta, size_t m,
                                  double *mean);
/* off[r] = X_r beta at theta, for every data row (nrows). */
void gmm_problem_offsets(const gmm_problem *p, const double *theta, double *off);
/* thetabar[coefficient k] += sum_r offbar[r] X_rk (offbar: nrows). */
void gmm_problem_offsets_rev(const gmm_problem *p, const double *offbar, double *thetabar);
const gmm_latent *gmm_problem_latent(const gmm_problem *p);
/* The same latent for methods that evaluate it (vi.h): it was lent to
 * gmm_problem_alloc as a modifiable object. */
gmm_latent *gmm_problem_latent_eval(gmm_problem *p);
/* The likelihood as given (its values are the starting values), the
 * outcomes (nrows, NAN = missing) and exposures (nrows; NULL when none were
 * given): the problem's copies. */
const gmm_lik *gmm_problem_lik(const gmm_problem *p);
/* The likelihood with its parameters at theta (nparam values: the
 * "likelihood.<param>" entries), into *out -- what scoring and predicting
 * at theta use.  GMM_EDOM (index in gmm_error_index()) for a parameter
 * that is not finite and > 0; GMM_EINVAL for NULL arguments. */
gmm_status gmm_problem_lik_at(const gmm_problem *p, const double *theta, gmm_lik *out);
const double *gmm_problem_y(const gmm_problem *p);
/* The prior weights (nrows, the problem's copy), NULL when none were given. */
const double *gmm_problem_weights(const gmm_problem *p);
const double *gmm_problem_exposure(const gmm_problem *p);
/* How the last evaluation factorised the posterior precision: "cholesky"
 * or "square-root" (exact: gmm_latent_factorisation; Laplace: the
 * assembled precision or the square-root form, laplace.h) or "sparse"
 * (the sparse path, bound 0), and the
 * Cholesky's rounding bound at its theta (0 when not estimated). */
const char *gmm_problem_factorisation(const gmm_problem *p, double *bound);
/* Nonzero when the last Laplace evaluation factorised the assembled
 * precision although the family's rule (its rounding bound, a damped
 * factor: ssm.h, FACTORISATION) asked for the square-root form, because
 * the likelihood is not log-concave (studentt): its value and gradient
 * carry that bound's rounding.  A latent with no assembled precision
 * (gmm_latent_assembled zero) makes that evaluation GMM_EINVAL instead. */
int gmm_problem_sqrt_declined(const gmm_problem *p);
/* Newton iterations of the last Laplace evaluation (0 when exact). */
size_t gmm_problem_iterations(const gmm_problem *p);
/* Observed rows. */
size_t gmm_problem_nobs(const gmm_problem *p);

/* The Gaussian posterior of the latents at theta (exact, or the Laplace
 * approximation): mean (n, or NULL) and the covariance band (SYMMETRIC,
 * bandwidth gmm_latent_cov_bandwidth, or NULL; the sparse path keeps no
 * band: GMM_EINVAL there, whose moments the predict functions below give
 * from the covariance's entries on the observed rows' pattern).  Errors as
 * the objective's evaluation. */
gmm_status gmm_problem_posterior(gmm_problem *p, const double *theta, double *mean,
                                 gmm_band *cov);

/* m draws of the latents from their Gaussian posterior at theta -- exact
 * for the Gaussian likelihood, the Laplace approximation otherwise: draw k
 * is x_k = x^ + L^-T z_k (rows k of x and z, n values each; z standard
 * normals from the caller; x and z may be the same array), L L' = Q + H'WH
 * at the mode x^ (gmm_laplace_draw), and logw[k] (logw m values, or NULL)
 * its log importance weight log p(y, x_k | theta) - log q(y | theta) -
 * log q(x_k | theta) (0 for the Gaussian likelihood).  One Laplace fit for
 * all m, its Newton iterations from the last mode found, so a sequence of
 * calls on one problem is reproducible after gmm_problem_whitened_start.
 * Errors as the Laplace evaluation (GMM_ENOTPD, GMM_ENOCONV, GMM_EDOM),
 * GMM_ENOMEM (the first draw of a Gaussian problem allocates the Laplace
 * workspace), GMM_EINVAL (NULL).  O(n kl^2 + m n kl). */
gmm_status gmm_problem_draw_latent(gmm_problem *p, const double *theta, size_t m,
                                   const double *z, double *x, double *logw);

/* Posterior mean and variance of the linear predictor X beta + f at theta:
 * at every data row (nrows), at every node of a graph latent (n, graph
 * numbering), or at new inputs of a state-space latent.  Errors as
 * gmm_problem_posterior; GMM_EINVAL where the family has no such sites,
 * and at nodes and new inputs when the offset is not constant (covariate
 * values there are unknown: gmm_problem_offset_constant). */
gmm_status gmm_problem_predict_rows(gmm_problem *p, const double *theta, double *mean,
                                    double *var);
gmm_status gmm_problem_predict_nodes(gmm_problem *p, const double *theta, double *mean,
                                     double *var);
gmm_status gmm_problem_predict_at(gmm_problem *p, const double *theta, const double *xq,
                                  size_t nq, double *mean, double *var);
/* The latent part alone, h' x without the offset X beta (whose covariate
 * values the caller supplies): at nq new inputs xq of a state-space latent,
 * or at every node of a graph latent (xq NULL, nq ignored; n outputs, graph
 * numbering).  Errors as gmm_problem_posterior; GMM_EINVAL where the family
 * has no such sites. */
gmm_status gmm_problem_predict_latent(gmm_problem *p, const double *theta, const double *xq,
                                      size_t nq, double *mean, double *var);
/* The posterior (exact or Laplace) mean and variance at theta of nq sparse
 * linear forms a_q'x of the latent (ptr, idx, w as latent.h's
 * gmm_latent_forms_moments; no offset): the variance from the covariance
 * band where a form's latents lie within it, else by one solve with the
 * posterior's banded factor (O(n kl) per such form; never a dense matrix).
 * Errors as gmm_problem_posterior; GMM_EINVAL for a latent that keeps no
 * factor of its exact posterior (only stacked latents do) when a form
 * leaves the band; GMM_ENOMEM. */
gmm_status gmm_problem_predict_forms(gmm_problem *p, const double *theta, size_t nq,
                                     const size_t *ptr, const size_t *idx, const double *w,
                                     double *mean, double *var);

/* Given MCMC draws of the latent states (draw s: x_s, row s of xs, n
 * values, and theta_s, row s of thetas; theta_stride 0: one theta for all),
 * b + f at new input xq[q] is normal, N(mean[s nq + q], var[s nq + q]) --
 * the Markov bridge between the draw's neighbouring states, or the prior
 * dynamics beyond them; var 0 at an input that has a state.  For exact
 * per-draw predictive densities.  mean and var hold ndraw nq
 * values.  GMM_EINVAL for a family without inputs or no draws; GMM_ENOMEM
 * (one band of the latent's size).
 * O(ndraw nq (d^3 + log K)). */
gmm_status gmm_problem_predict_at_draws_normal(gmm_problem *p, const double *thetas,
                                               size_t theta_stride, const double *xs,
                                               size_t ndraw, const double *xq, size_t nq,
                                               double *mean, double *var);
/* The same without the offset: the latent part h' x alone. */
gmm_status gmm_problem_latent_at_draws_normal(gmm_problem *p, const double *thetas,
                                              size_t theta_stride, const double *xs,
                                              size_t ndraw, const double *xq, size_t nq,
                                              double *mean, double *var);

/* Posterior of b + f at nq new inputs xq (state-space latents) from MCMC
 * draws of the latent states: draw s gives x_s (row s of xs, n values) and
 * theta_s (row s of thetas, nparam values; theta_stride 0: one theta for
 * all).  Given a draw, f(t) is normal -- the Markov bridge between the
 * draw's neighbouring states, or the prior dynamics beyond them
 * (gmm_problem_predict_at_draws_normal) -- and one f(t) is drawn from it
 * per draw (gmm_rng, seed); out[q] (nq) summarises the ndraw
 * values at xq[q] as gmm_summary_pred_draws does, with the interval at
 * `level` and the response of p's likelihood.  GMM_EINVAL for a family
 * without inputs, no draws or a level outside (0, 1); GMM_ENOMEM (3 ndraw nq
 * doubles are kept).  O(ndraw nq (d^3 + log K)). */
gmm_status gmm_problem_predict_at_draws(gmm_problem *p, const double *thetas,
                                        size_t theta_stride, const double *xs, size_t ndraw,
                                        const double *xq, size_t nq, uint64_t seed,
                                        double level, gmm_summary_pred *out);

/* ---- the log joint in whitened coordinates (for HMC) --------------------- */

/* The map from v to x that the functions below use (set before
 * gmm_problem_whiten_setup; prior the default):
 *
 *   GMM_METRIC_PRIOR:    x = W(theta) v, W W' = Q^-1 (the latent's whitening);
 *   GMM_METRIC_LAPLACE:  x = x^ + L^-T v, L L' = Q + H'WH at the Laplace mode
 *                        x^ at theta (one Laplace fit and one banded Cholesky
 *                        in the setup; exact posterior whitening for a
 *                        Gaussian likelihood).
 *
 * At fixed theta either map is affine with a constant Jacobian, so lp is
 * the same function of x under both: sum_i log p(y_i | f_i) - x'Qx/2. */
typedef enum { GMM_METRIC_PRIOR = 0, GMM_METRIC_LAPLACE } gmm_metric;
void gmm_problem_set_metric(gmm_problem *p, gmm_metric m);
/* stop (NULL: none) is polled before each Newton step of the Laplace
 * evaluations: nonzero ends the evaluation with GMM_ECANCEL, so that a
 * caller's interrupt stops a long evaluation within one step. */
void gmm_problem_set_stop(gmm_problem *p, int (*stop)(void *user), void *user);
gmm_metric gmm_problem_metric(const gmm_problem *p);
/* lambda_max of W' H' D H W (W the prior's whitening, D the likelihood's
 * -d2 log p at the Laplace mode at theta, its negative entries as 0): how
 * much the data's information exceeds the prior's in the stiffest
 * direction.  Under the prior metric the posterior of v has condition
 * number about 1 + lambda_max, which sets NUTS's steps per iteration.  By
 * power iteration (relative precision 1e-3, at most 200 products of O(n
 * kl)) after one Laplace fit.  Leaves no whitening setup.  Errors as
 * gmm_problem_whiten_setup and the Laplace fit's; GMM_EINVAL for a latent
 * with linear constraints (no Laplace metric there). */
gmm_status gmm_problem_data_information(gmm_problem *p, const double *theta, double *lmax);
/* The lambda_max above which the Laplace metric beats the prior's
 * (docs/design.md). */
#define GMM_METRIC_AUTO_INFO 4.0

/* Fix the hyperparameters theta (nparam) for the functions below: the
 * latent's whitening x = W(theta) v, the observation rows and the
 * likelihood's parameters at theta.  Errors as gmm_latent_whiten_setup;
 * GMM_EDOM for a likelihood parameter out of its domain. */
gmm_status gmm_problem_whiten_setup(gmm_problem *p, const double *theta);
/* lp = sum_i log p(y_i | b + h_i' x) - x'Qx / 2 at x = map(v) (constants
 * dropped, as Stan's lp__; under the prior map x'Qx = |v|^2), and its
 * gradient in v (n, or NULL): W' H' g - v under the prior map (one whiten
 * and one transposed whiten), L^-1 (H' g - Q x) under the Laplace map (two
 * triangular solves of bandwidth kl, Q x and x'Qx through L L' = Q + H'WH
 * without a product with Q; problem_whiten.c states the rounding): O(n kl) either
 * way.  A non-finite log density is GMM_EDOM (a divergence for the
 * sampler). */
gmm_status gmm_problem_whitened_logp(gmm_problem *p, const double *v, double *lp, double *grad);
/* The linear predictor b + (H x)_r, x = map(v), at every data row (nrows),
 * and x at the graph nodes (graph numbering; n) or NULL. */
gmm_status gmm_problem_whitened_linpred(gmm_problem *p, const double *v, double *frows,
                                        double *xnodes);
/* The latent x = map(v) (n) at the setup's theta. */
gmm_status gmm_problem_whitened_latent(gmm_problem *p, const double *v, double *x);
/* A starting point: v = map^-1 (the posterior mode at theta: exact or
 * Laplace, its Newton iterations from x = 0 so that the result does not
 * depend on earlier calls), after gmm_problem_whiten_setup at the same
 * theta. */
gmm_status gmm_problem_whitened_start(gmm_problem *p, const double *theta, double *v);
/* v with x = the map of v (n each; not aliased), after the setup. */
gmm_status gmm_problem_unwhiten(gmm_problem *p, const double *x, double *v);

/* ---- the log joint of v and the hyperparameters (HMC on both) ----------- */

/* A prior on one parameter, by its scale (objective.h, SCALES): the
 * parameter is sampled as u, its value on that scale, and u ~ N(mu, sigma^2):
 *
 *   normal(mu, sigma)       a coefficient, u = theta;
 *   lognormal(mu, sigma)    a positive parameter, u = log theta;
 *   logitnormal(mu, sigma)  a parameter in (0, 1), u = logit theta;
 *   atanhnormal(mu, sigma)  a parameter in (-1, 1), u = atanh theta.
 *
 * On u the density is the normal one: the prior's density on theta times
 * the Jacobian dtheta/du (theta, theta (1 - theta), 1 - theta^2) is N(u; mu, sigma^2)
 * exactly, so the target in u needs no separate Jacobian term. */
typedef enum {
    GMM_PRIOR_LOGNORMAL = 1,
    GMM_PRIOR_NORMAL = 2,
    GMM_PRIOR_LOGITNORMAL = 3,
    GMM_PRIOR_ATANHNORMAL = 4
} gmm_prior_kind;
typedef struct {
    gmm_prior_kind kind;
    double mu, sigma; /* sigma > 0 */
} gmm_prior;

/* The kind of prior a parameter on scale s takes (above), and a kind's
 * name: "normal", "lognormal", "logitnormal", "atanhnormal". */
gmm_prior_kind gmm_prior_kind_of(gmm_scale s);
const char *gmm_prior_kind_name(gmm_prior_kind k);

/* Sample the parameters with sampled[k] != 0 (nparam flags; a fixed one
 * keeps theta[k]) jointly with v, under priors[k] (the kind for the
 * parameter's scale, gmm_prior_kind_of: GMM_EINVAL otherwise).  theta and
 * priors are copied; v is always under the prior's map.  Errors:
 * GMM_EINVAL (a bad prior, a sampled theta[k] outside the open domain of
 * its scale, the Laplace metric set), GMM_ENOMEM. */
gmm_status gmm_problem_joint_setup(gmm_problem *p, const double *theta, const int *sampled,
                                   const gmm_prior *priors);
/* n + the number of sampled parameters: q = (v, u), u the sampled
 * parameters in their order, each on its scale (log, logit or as it is). */
size_t gmm_problem_joint_dim(const gmm_problem *p);
/* lp = log p(y | b + H W(theta) v) - |v|^2/2 + sum_k log N(u_k; mu_k,
 * sigma_k^2) and its gradient in q (through the whitening's and the
 * observation rows' reverse modes in theta, the likelihood's parameter
 * gradient and the coefficients, times dtheta/du).
 * Each call re-does the whitening setup at theta(q): O(n kl) plus the
 * family's setup (graphs: a banded Cholesky, O(n kl^2)).  A theta outside
 * the domain (a logit rounding to 1) or a non-finite density is GMM_EDOM. */
gmm_status gmm_problem_joint_logp(gmm_problem *p, const double *q, double *lp, double *grad);
/* theta (nparam) at q; and the start q at theta (the posterior mode in v,
 * from x = 0, and u = theta on its scale). */
gmm_status gmm_problem_joint_theta(const gmm_problem *p, const double *q, double *theta);
gmm_status gmm_problem_joint_start(gmm_problem *p, double *q);

/* PRIORS ON THE COEFFICIENTS.  After gmm_problem_joint_setup, the sampled
 * parameters' coordinates u (gmm_problem_hyper_dim of them): each on its
 * scale, except that the coefficients, when all are sampled, move in the
 * design basis (objective.h, lin_*), so that a covariate's location and
 * scale change neither the sampler's geometry nor its answer.  Their
 * normal priors are on the centred design: the intercept's (the
 * coefficient of a column of ones) on b + sum_k beta_k mean(x_k), the
 * others' on beta_k (means over the observed rows); the other parameters'
 * on u.  gmm_problem_hyper_theta: theta (nparam) at u, GMM_EDOM outside a
 * domain; gmm_problem_hyper_u: u at theta; gmm_problem_hyper_prior: the
 * log prior at (u, theta), and where gu (dim) is given, gu = d/du of the
 * function whose natural-scale gradient is thetabar (nparam, or NULL: 0)
 * plus the log prior. */
size_t gmm_problem_hyper_dim(const gmm_problem *p);
gmm_status gmm_problem_hyper_theta(gmm_problem *p, const double *u, double *theta);
gmm_status gmm_problem_hyper_u(const gmm_problem *p, const double *theta, double *u);
double gmm_problem_hyper_prior(gmm_problem *p, const double *u, const double *theta,
                               const double *thetabar, double *gu);
/* The design's columns over the observed rows: means, sds (ncoef each, or
 * NULL) and the intercept's column (a column of ones; -1 none), for the
 * default priors (hmc_chains.h).  GMM_ENOMEM. */
gmm_status gmm_problem_coef_moments(gmm_problem *p, double *mean, double *sd, long *icpt);

#endif
