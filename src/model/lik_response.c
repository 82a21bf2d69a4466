/* lik_response.c -- the mean outcome under a Gaussian posterior of f
 * (gmm_lik_response in likelihood.h), for predictions. */
#include <gsl/gsl_integration.h>
#include <math.h>
#include <pthread.h>

#include "gmm/likelihood.h"

/* 40 Gauss-Hermite points: E[logistic(f)] to ~1e-12 for s2 <= 100. */
#define NGH 40
static double gh_x[NGH], gh_w[NGH];
static int gh_ok;
static pthread_once_t gh_once = PTHREAD_ONCE_INIT;

static void gh_init(void)
{
    gsl_integration_fixed_workspace *w =
        gsl_integration_fixed_alloc(gsl_integration_fixed_hermite, NGH, 0.0, 1.0, 0.0, 0.0);
    if (!w)
        return;
    const double *x = gsl_integration_fixed_nodes(w), *wt = gsl_integration_fixed_weights(w);
    for (size_t i = 0; i < NGH; i++) {
        gh_x[i] = x[i];
        gh_w[i] = wt[i];
    }
    gsl_integration_fixed_free(w);
    gh_ok = 1;
}

gmm_status gmm_lik_response(const gmm_lik *lik, double mu, double s2, double z, double out[3])
{
    if (!lik || !lik->type || !out)
        return gmm_error(GMM_EINVAL, "gmm_lik_response: NULL argument");
    if (!(s2 >= 0.0) || !isfinite(mu) || !isfinite(s2))
        return gmm_error(GMM_EINVAL, "gmm_lik_response: mean %g, variance %g", mu, s2);
    const gmm_lik_type *t = lik->type;
    double sd = sqrt(s2);
    out[1] = t->mean(lik->par, 1.0, mu - z * sd);
    out[2] = t->mean(lik->par, 1.0, mu + z * sd);
    if (t->link_log) {
        out[0] = exp(mu + 0.5 * s2);
        return GMM_OK;
    }
    if (t->conjugate) {
        out[0] = mu;
        return GMM_OK;
    }
    pthread_once(&gh_once, gh_init);
    if (!gh_ok)
        return gmm_error(GMM_ENOMEM, "Gauss-Hermite nodes: out of memory");
    /* E g(f) = pi^-1/2 sum w_i g(mu + sqrt(2 s2) x_i) */
    double s = 0.0, c = sqrt(2.0 * s2);
    for (size_t i = 0; i < NGH; i++)
        s += gh_w[i] * t->mean(lik->par, 1.0, mu + c * gh_x[i]);
    out[0] = s / 1.7724538509055160273; /* sqrt(pi) */
    return GMM_OK;
}
