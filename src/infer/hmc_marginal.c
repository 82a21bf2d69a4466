/* hmc_marginal.c -- the marginal target of the hyperparameters and the draw
 * of the latents given them (hmc_marginal.h).
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
#include "gmm/hmc_marginal.h"

#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/latent.h"
#include "gmm/objective.h"

struct gmm_hmc_marginal {
    gmm_problem *p;
    const gmm_scale *scale; /* np: each parameter's scale (the objective's) */
    size_t np, dim;
    int *samp;             /* np */
    gmm_prior *prior;      /* np */
    double *theta0;        /* np: the held values and the start */
    double *theta, *grad;  /* np scratch */
    double *x;             /* n scratch */
};

void gmm_hmc_marginal_free(gmm_hmc_marginal *m)
{
    if (!m)
        return;
    gmm_free(m->samp);
    gmm_free(m->prior);
    gmm_free(m->theta0);
    gmm_free(m->theta);
    gmm_free(m->grad);
    gmm_free(m->x);
    gmm_free(m);
}

gmm_status gmm_hmc_marginal_alloc(gmm_problem *p, const double *theta, const int *sampled,
                                  const gmm_prior *priors, gmm_hmc_marginal **out)
{
    gmm_status st;
    if (!out)
        return gmm_error(GMM_EINVAL, "gmm_hmc_marginal_alloc: NULL argument");
    *out = NULL;
    /* the same parameters, scales and priors as the joint sampler's */
    if ((st = gmm_problem_joint_setup(p, theta, sampled, priors)))
        return st;
    const gmm_objective *o = gmm_problem_objective(p);
    size_t np = o->nparam, n = gmm_latent_dim(gmm_problem_latent(p)), a = np ? np : 1;
    gmm_hmc_marginal *m = gmm_calloc(1, sizeof *m);
    if (!m)
        return gmm_error(GMM_ENOMEM, "out of memory for the marginal sampler");
    m->p = p;
    m->np = np;
    m->scale = o->scale;
    m->samp = gmm_malloc(a, sizeof *m->samp);
    m->prior = gmm_malloc(a, sizeof *m->prior);
    m->theta0 = gmm_malloc(a, sizeof *m->theta0);
    m->theta = gmm_malloc(a, sizeof *m->theta);
    m->grad = gmm_malloc(a, sizeof *m->grad);
    m->x = gmm_malloc(n ? n : 1, sizeof *m->x);
    if (!m->samp || !m->prior || !m->theta0 || !m->theta || !m->grad || !m->x) {
        gmm_hmc_marginal_free(m);
        return gmm_error(GMM_ENOMEM, "out of memory for the marginal sampler");
    }
    for (size_t k = 0; k < np; k++) {
        m->samp[k] = sampled[k] != 0;
        m->prior[k] = priors[k];
        m->theta0[k] = theta[k];
        m->dim += (size_t)m->samp[k];
    }
    if (m->dim == 0) {
        gmm_hmc_marginal_free(m);
        return gmm_error(GMM_EINVAL, "the marginal sampler needs a sampled hyperparameter");
    }
    *out = m;
    return GMM_OK;
}

size_t gmm_hmc_marginal_dim(const gmm_hmc_marginal *m) { return m->dim; }

void gmm_hmc_marginal_theta(const gmm_hmc_marginal *m, const double *u, double *theta)
{
    /* a value outside its domain is the logp's to refuse */
    gmm_problem_hyper_theta(m->p, u, theta);
}

gmm_status gmm_hmc_marginal_start(gmm_hmc_marginal *m, double *u)
{
    gmm_status st;
    if ((st = gmm_problem_whiten_setup(m->p, m->theta0)) ||
        (st = gmm_problem_whitened_start(m->p, m->theta0, m->x)))
        return st;
    return gmm_problem_hyper_u(m->p, m->theta0, u);
}

gmm_status gmm_hmc_marginal_logp(void *ctx, const double *u, double *lp, double *grad)
{
    gmm_hmc_marginal *m = ctx;
    gmm_objective *o = gmm_problem_objective(m->p);
    double *th = m->theta, f;
    gmm_status st = gmm_problem_hyper_theta(m->p, u, th);
    if (st)
        return st;
    st = o->eval(o->ctx, th, &f, grad ? m->grad : NULL);
    if (st == GMM_EINVAL || st == GMM_ENOCONV)
        return gmm_error(GMM_EDOM, "%s", gmm_error_message());
    if (st)
        return st;
    double lprior = gmm_problem_hyper_prior(m->p, u, th, grad ? m->grad : NULL, grad);
    *lp = f + lprior;
    if (!isfinite(*lp))
        return gmm_error(GMM_EDOM, "marginal log density not finite");
    for (size_t i = 0; grad && i < m->dim; i++)
        if (!isfinite(grad[i]))
            return gmm_error(GMM_EDOM, "marginal log density gradient not finite");
    return GMM_OK;
}

gmm_status gmm_hmc_marginal_draw(gmm_hmc_marginal *m, const double *u, size_t k,
                                 const double *z, double *x, double *logw)
{
    gmm_hmc_marginal_theta(m, u, m->theta);
    return gmm_problem_draw_latent(m->p, m->theta, k, z, x, logw);
}
