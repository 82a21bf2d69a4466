/* problem.h -- a latent model (latent.h), a likelihood (likelihood.h) and
 * the data: the marginal likelihood of the hyperparameters as a
 * gmm_objective for fit and gradcheck -- exact for the Gaussian likelihood,
 * the Laplace approximation (laplace.h) otherwise -- and the Gaussian
 * posterior of the latents it implies, with predictions of f.
 *
 * PARAMETERS, in this order: the latent model's (gmm_latent_param_name),
 * the likelihood's ("likelihood.<param>"), then "intercept" for a
 * non-Gaussian likelihood unless it was dropped: f_i = b + (H x)_i.
 * Gaussian data are centred by the caller instead (no intercept).
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

typedef struct gmm_problem gmm_problem;

/* lat and lik are borrowed (lik's values are the starting values) and must
 * outlive the problem; y (nrows of lat, NAN = missing) and e (NULL = 1) are
 * copied and checked (gmm_lik_check_data: GMM_EINVAL with the row in
 * gmm_error_index()).  intercept: nonzero to estimate b (non-Gaussian only;
 * GMM_EINVAL for the Gaussian), starting at b0.  Workspaces are sized here;
 * evaluations do not allocate.  GMM_ENOMEM. */
gmm_status gmm_problem_alloc(gmm_latent *lat, const gmm_lik *lik, const double *y,
                             const double *e, int intercept, double b0, gmm_problem **out);
void gmm_problem_free(gmm_problem *p); /* NULL-safe */

/* The objective (names, values = starting values, positive flags, none
 * fixed, eval); owned by p.  eval(theta) is log p(y | theta) (exact) or
 * log q(y | theta) (Laplace) with its exact gradient. */
gmm_objective *gmm_problem_objective(gmm_problem *p);
/* Nonzero for the exact (Gaussian) marginal likelihood. */
int gmm_problem_exact(const gmm_problem *p);
int gmm_problem_has_intercept(const gmm_problem *p);
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
const double *gmm_problem_exposure(const gmm_problem *p);
/* How the last evaluation factorised the posterior precision: "cholesky"
 * or "square-root" (exact: gmm_latent_factorisation; Laplace: the
 * assembled precision or the square-root form, laplace.h), and the
 * Cholesky's rounding bound at its theta (0 when not estimated). */
const char *gmm_problem_factorisation(const gmm_problem *p, double *bound);
/* Newton iterations of the last Laplace evaluation (0 when exact). */
size_t gmm_problem_iterations(const gmm_problem *p);
/* Observed rows. */
size_t gmm_problem_nobs(const gmm_problem *p);

/* The Gaussian posterior of the latents at theta (exact, or the Laplace
 * approximation): mean (n, or NULL) and the covariance band (SYMMETRIC,
 * bandwidth gmm_latent_cov_bandwidth, or NULL).  Errors as the objective's
 * evaluation. */
gmm_status gmm_problem_posterior(gmm_problem *p, const double *theta, double *mean,
                                 gmm_band *cov);

/* Posterior mean and variance of the linear predictor b + f at theta:
 * at every data row (nrows), at every node of a graph latent (n, graph
 * numbering), or at new inputs of a state-space latent.  Errors as
 * gmm_problem_posterior; GMM_EINVAL where the family has no such sites. */
gmm_status gmm_problem_predict_rows(gmm_problem *p, const double *theta, double *mean,
                                    double *var);
gmm_status gmm_problem_predict_nodes(gmm_problem *p, const double *theta, double *mean,
                                     double *var);
gmm_status gmm_problem_predict_at(gmm_problem *p, const double *theta, const double *xq,
                                  size_t nq, double *mean, double *var);

/* Given MCMC draws of the latent states (draw s: x_s, row s of xs, n
 * values, and theta_s, row s of thetas; theta_stride 0: one theta for all),
 * b + f at new input xq[q] is normal, N(mean[s nq + q], var[s nq + q]) --
 * the Markov bridge between the draw's neighbouring states, or the prior
 * dynamics beyond them; var 0 at an input that has a state.  For exact
 * per-draw predictive densities (score).  mean and var hold ndraw nq
 * values.  GMM_EINVAL for a family without inputs or no draws; GMM_ENOMEM
 * (one band of the latent's size).
 * O(ndraw nq (d^3 + log K)). */
gmm_status gmm_problem_predict_at_draws_normal(gmm_problem *p, const double *thetas,
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

/* Fix the hyperparameters theta (nparam) for the functions below: the
 * latent's whitening x = W(theta) v, the observation rows and the
 * likelihood's parameters at theta.  Errors as gmm_latent_whiten_setup;
 * GMM_EDOM for a likelihood parameter out of its domain. */
gmm_status gmm_problem_whiten_setup(gmm_problem *p, const double *theta);
/* lp = sum_i log p(y_i | b + h_i' x) - |v|^2 / 2 at x = W v (constants of
 * the N(0, I) density dropped, as Stan's lp__), and its gradient in v
 * (n, or NULL): W' H' g - v.  One whiten and one transposed whiten: O(n kl).
 * A non-finite log density is GMM_EDOM (a divergence for the sampler). */
gmm_status gmm_problem_whitened_logp(gmm_problem *p, const double *v, double *lp, double *grad);
/* The linear predictor b + (H W v)_r at every data row (nrows), and the
 * latent x = W v at the graph nodes (graph numbering; n) or NULL. */
gmm_status gmm_problem_whitened_linpred(gmm_problem *p, const double *v, double *frows,
                                        double *xnodes);
/* The latent x = W v (n) at the setup's theta. */
gmm_status gmm_problem_whitened_latent(gmm_problem *p, const double *v, double *x);
/* A starting point: v = W^-1 (the posterior mode at theta: exact or
 * Laplace, its Newton iterations from x = 0 so that the result does not
 * depend on earlier calls), after gmm_problem_whiten_setup at the same
 * theta. */
gmm_status gmm_problem_whitened_start(gmm_problem *p, const double *theta, double *v);

/* ---- the log joint of v and the hyperparameters (HMC --sample-hyper) ----- */

/* A prior on one parameter: lognormal(mu, sigma) on a positive parameter
 * (its log u is N(mu, sigma^2), and u is what is sampled), normal(mu,
 * sigma) on the intercept (sampled as it is). */
typedef enum { GMM_PRIOR_LOGNORMAL = 1, GMM_PRIOR_NORMAL = 2 } gmm_prior_kind;
typedef struct {
    gmm_prior_kind kind;
    double mu, sigma; /* sigma > 0 */
} gmm_prior;

/* Sample the parameters with sampled[k] != 0 (nparam flags; a fixed one
 * keeps theta[k]) jointly with v, under priors[k] (lognormal for positive
 * parameters, normal for the intercept: GMM_EINVAL otherwise).  theta and
 * priors are copied.  Errors: GMM_EINVAL (a bad prior), GMM_ENOMEM. */
gmm_status gmm_problem_joint_setup(gmm_problem *p, const double *theta, const int *sampled,
                                   const gmm_prior *priors);
/* n + the number of sampled parameters: q = (v, u), u the sampled
 * parameters in their order (log scale for positive ones). */
size_t gmm_problem_joint_dim(const gmm_problem *p);
/* lp = log p(y | b + H W(theta) v) - |v|^2/2 + sum_k log prior(u_k) and its
 * gradient in q (through the whitening's and the observation rows' reverse
 * modes in theta, the likelihood's parameter gradient and the intercept).
 * Each call re-does the whitening setup at theta(q): O(n kl) plus the
 * family's setup (graphs: a banded Cholesky, O(n kl^2)).  A theta outside
 * the domain or a non-finite density is GMM_EDOM. */
gmm_status gmm_problem_joint_logp(gmm_problem *p, const double *q, double *lp, double *grad);
/* theta (nparam) at q; and the start q at theta (the posterior mode in v,
 * from x = 0, and u = log theta). */
gmm_status gmm_problem_joint_theta(const gmm_problem *p, const double *q, double *theta);
gmm_status gmm_problem_joint_start(gmm_problem *p, double *q);

#endif
