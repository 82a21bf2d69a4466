/* hmc_marginal.h -- the hyperparameters by NUTS on their marginal posterior
 * (`hmc --sample-hyper --marginal laplace`), the latents drawn given them,
 * optionally corrected to the exact posterior by a pseudo-marginal
 * Metropolis-Hastings step (the target and the correction:
 * src/infer/hmc_marginal.c).
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
                                 * exact (hmc_marginal.c, CORRECTION) */
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
