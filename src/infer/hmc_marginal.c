/* hmc_marginal.c -- the marginal target of the hyperparameters and the draw
 * of the latents given them (hmc_marginal.h). */
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
    size_t j = 0;
    for (size_t k = 0; k < m->np; k++)
        theta[k] = !m->samp[k] ? m->theta0[k] : gmm_scale_from_u(m->scale[k], u[j++]);
}

gmm_status gmm_hmc_marginal_start(gmm_hmc_marginal *m, double *u)
{
    gmm_status st;
    if ((st = gmm_problem_whiten_setup(m->p, m->theta0)) ||
        (st = gmm_problem_whitened_start(m->p, m->theta0, m->x)))
        return st;
    size_t j = 0;
    for (size_t k = 0; k < m->np; k++)
        if (m->samp[k])
            u[j++] = gmm_scale_to_u(m->scale[k], m->theta0[k]);
    return GMM_OK;
}

gmm_status gmm_hmc_marginal_logp(void *ctx, const double *u, double *lp, double *grad)
{
    gmm_hmc_marginal *m = ctx;
    gmm_objective *o = gmm_problem_objective(m->p);
    double *th = m->theta, f;
    gmm_hmc_marginal_theta(m, u, th);
    for (size_t k = 0; k < m->np; k++)
        if (m->samp[k] && !gmm_scale_inside(m->scale[k], th[k]))
            return gmm_error(GMM_EDOM, "%s = %g must be %s", o->name[k], th[k],
                             gmm_scale_domain(m->scale[k]));
    gmm_status st = o->eval(o->ctx, th, &f, grad ? m->grad : NULL);
    if (st == GMM_EINVAL || st == GMM_ENOCONV)
        return gmm_error(GMM_EDOM, "%s", gmm_error_message());
    if (st)
        return st;
    double lprior = 0.0;
    size_t j = 0;
    for (size_t k = 0; k < m->np; k++) {
        if (!m->samp[k])
            continue;
        double s = m->prior[k].sigma, z = (u[j] - m->prior[k].mu) / s;
        lprior -= 0.5 * z * z;
        if (grad) /* d/du = dtheta/du d/dtheta */
            grad[j] = gmm_scale_dp_du(m->scale[k], th[k]) * m->grad[k] - z / s;
        j++;
    }
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
