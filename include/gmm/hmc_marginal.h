/* hmc_marginal.h -- the hyperparameters by NUTS on their marginal posterior
 * (`hmc --sample-hyper --marginal laplace`), the latents drawn given them.
 *
 * TARGET.  u = the sampled parameters (gmm_problem_joint_setup's: log theta
 * for positive ones, logit theta for those in (0, 1), the coefficients as
 * they are), with the joint sampler's priors, and
 *
 *   lp(u) = log p(y | theta(u)) + sum_k log N(u_k; mu_k, sigma_k^2)
 *
 * (the normal density on u_k = log theta_k is the lognormal prior times the
 * Jacobian theta_k; on u_k = logit theta_k the logit-normal prior times
 * theta_k (1 - theta_k)), log p(y | theta) the problem's objective: exact for the
 * Gaussian likelihood, the Laplace approximation log q(y | theta) otherwise,
 * with its exact gradient.  Its constants are kept (the objective's are,
 * the priors' -log(sigma sqrt(2 pi)) are dropped), so lp is not the joint
 * sampler's lp__.
 *
 * LATENTS.  Given a draw of theta, x ~ N(x^(theta), (Q + H'WH)^-1) by one
 * banded solve with the posterior precision's factor
 * (gmm_problem_draw_latent).  With the Gaussian likelihood the pair is an
 * exact draw from p(theta, x | y) (a collapsed sampler); otherwise it is the
 * embedded-Laplace approximation of R-INLA and TMB with the latent
 * uncertainty kept.
 *
 * CORRECTION (GMM_MARGINAL_LAPLACE_MH).  A NUTS transition is reversible
 * with respect to p_L(theta) ~ p(theta) q(y | theta).  From theta' (one
 * transition) draw M latents x_1..x_M ~ q(x | theta') with weights w_k =
 * p(y, x_k | theta') / (q(y | theta') q(x_k | theta')) (gmm_laplace_draw),
 * pick one with probability w_k / sum w, and accept the pair with
 * probability min(1, W' / W), W the mean weight of the current pair's draw
 * (kept, not recomputed): a pseudo-marginal Metropolis-Hastings step whose
 * invariant law has the exact posterior p(theta, x | y) as its marginal
 * (Andrieu & Roberts 2009; Vihola, Helske & Franks 2020, "Importance
 * sampling type estimators based on approximate marginal MCMC").  On a
 * rejection the chain keeps (theta, x) and NUTS goes on from theta
 * (gmm_hmc_set_point).  The mean of M weights has 1/M of one weight's
 * variance, so more draws mean fewer rejections for M cheap solves.  With the
 * Gaussian likelihood every w_k = 1: nothing is rejected.
 *
 * Cost: a gradient is one objective evaluation -- a Laplace fit warm-started
 * from the last mode plus its reverse mode, O(n kl^2) -- against the joint
 * sampler's O(n kl) per leapfrog step; in return NUTS runs on a handful of
 * coordinates whose posterior is close to Gaussian.
 */
#ifndef GMM_HMC_MARGINAL_H
#define GMM_HMC_MARGINAL_H

#include <stddef.h>

#include "gmm/problem.h"
#include "gmm/status.h"

typedef enum {
    GMM_MARGINAL_NONE = 0,    /* theta sampled jointly with the latents */
    GMM_MARGINAL_LAPLACE = 1, /* theta on its (Laplace) marginal, x given theta */
    GMM_MARGINAL_LAPLACE_MH = 2 /* the same pairs as proposals of a
                                 * Metropolis-Hastings step on (theta, x):
                                 * exact (see CORRECTION) */
} gmm_marginal;

typedef struct gmm_hmc_marginal gmm_hmc_marginal;

/* The marginal target of p (borrowed: it must outlive the object) for the
 * parameters with sampled[k] != 0 under priors[k] (nparam each, copied),
 * the others held at theta[k] (copied).  The priors are checked as
 * gmm_problem_joint_setup checks them (which this calls).  Errors:
 * GMM_EINVAL (no parameter sampled, a bad prior, a positive parameter not >
 * 0), GMM_ENOMEM; *out NULL then. */
gmm_status gmm_hmc_marginal_alloc(gmm_problem *p, const double *theta, const int *sampled,
                                  const gmm_prior *priors, gmm_hmc_marginal **out);
void gmm_hmc_marginal_free(gmm_hmc_marginal *m); /* NULL-safe */

/* The number of sampled parameters: the dimension of u. */
size_t gmm_hmc_marginal_dim(const gmm_hmc_marginal *m);

/* The start u (dim values) at theta, and a reset of the problem's warm
 * starts (gmm_problem_whitened_start at theta), so that a chain from here
 * does not depend on what the problem did before.  Errors as the posterior
 * at theta. */
gmm_status gmm_hmc_marginal_start(gmm_hmc_marginal *m, double *u);

/* lp(u) and its gradient in u (dim values, or NULL): a gmm_hmc_logp_fn with
 * ctx the gmm_hmc_marginal.  A theta where the model is not defined (out of
 * the domain, or no Laplace mode: GMM_EINVAL, GMM_ENOTPD, GMM_ENOCONV, a
 * non-finite value) is GMM_EDOM, a refusal the sampler takes as a
 * divergence; GMM_ENOMEM is an error. */
gmm_status gmm_hmc_marginal_logp(void *ctx, const double *u, double *lp, double *grad);

/* theta (nparam) at u. */
void gmm_hmc_marginal_theta(const gmm_hmc_marginal *m, const double *u, double *theta);

/* k draws of the latents given theta(u) (x: k rows of n) from z (k rows of
 * n standard normals, the caller's), and their log importance weights (k,
 * or NULL): gmm_problem_draw_latent at theta(u).  Errors as that. */
gmm_status gmm_hmc_marginal_draw(gmm_hmc_marginal *m, const double *u, size_t k,
                                 const double *z, double *x, double *logw);

#endif
