/* latent_ssm.c -- the state-space family as a gmm_latent (latent.h): every
 * method forwards to ssm.h; whitening by the innovations form, the prior's
 * square root from its transition rows. */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"

static void ssm_free_impl(void *impl) { gmm_ssm_free(impl); }

static gmm_status ssm_prior_impl(void *impl, const double *theta, gmm_band *Q, double *logdet)
{
    return gmm_ssm_prior(impl, theta, Q, logdet);
}

static gmm_status ssm_prior_rev_impl(void *impl, const gmm_band *Qbar, double logdetbar,
                                     double *thetabar)
{
    return gmm_ssm_prior_rev(impl, Qbar, logdetbar, thetabar);
}

static gmm_status ssm_obs_coef(void *impl, const double *theta, double *coef)
{
    return gmm_ssm_obs_rows(impl, theta, coef);
}

static gmm_status ssm_obs_coef_rev(void *impl, const double *theta, const double *coefbar,
                                   double *thetabar)
{
    return gmm_ssm_obs_rows_rev(impl, theta, coefbar, thetabar);
}

static gmm_status ssm_gaussian(void *impl, const double *theta, const double *y, double noise,
                               double *loglik, double *thetabar, double *noisebar)
{
    gmm_status st = gmm_ssm_set_y(impl, y);
    if (st)
        return st;
    return gmm_ssm_loglik(impl, theta, noise, loglik, thetabar, thetabar ? noisebar : NULL);
}

static gmm_status ssm_gaussian_post(void *impl, double *mean, gmm_band *cov)
{
    return gmm_ssm_posterior(impl, mean, cov);
}

static const char *ssm_factorisation(const void *impl, double *bound)
{
    if (bound)
        *bound = gmm_ssm_chol_bound(impl);
    return gmm_ssm_used_rows(impl) ? "square-root" : "cholesky";
}

static gmm_status ssm_predict_at(void *impl, const double *theta, const double *mean,
                                 const gmm_band *cov, const double *xq, size_t nq, double *fmean,
                                 double *fvar)
{
    return gmm_ssm_predict_post(impl, theta, mean, cov, xq, nq, fmean, fvar);
}

static gmm_status ssm_whiten_setup(void *impl, const double *theta)
{
    return gmm_ssm_whiten_setup(impl, theta);
}

static gmm_status ssm_whiten(void *impl, const double *v, double *x)
{
    return gmm_ssm_whiten(impl, v, x);
}

static gmm_status ssm_whiten_t(void *impl, const double *g, double *u)
{
    return gmm_ssm_whiten_t(impl, g, u);
}

static gmm_status ssm_whiten_rev(void *impl, const double *v, const double *xbar,
                                 double *thetabar)
{
    return gmm_ssm_whiten_rev(impl, v, xbar, thetabar);
}

static gmm_status ssm_prior_rows(void *impl, const double *theta, gmm_prior_rows *G,
                                 double *logdet)
{
    return gmm_ssm_prior_rows(impl, theta, G, logdet);
}

static gmm_status ssm_prior_rows_rev(void *impl, const double *Gbar, double logdetbar,
                                     double *thetabar)
{
    return gmm_ssm_prior_rows_rev(impl, Gbar, logdetbar, thetabar);
}

static gmm_status ssm_prior_rows_rev_mo(void *impl, const double *Svv, const double *Svx,
                                        double *thetabar)
{
    return gmm_ssm_prior_rows_rev_moments(impl, Svv, Svx, thetabar);
}

static gmm_status ssm_unwhiten_impl(void *impl, const double *x, double *v)
{
    return gmm_ssm_unwhiten(impl, x, v);
}

static gmm_status ssm_wls_rows(void *impl, const double *theta, double obs_prec, int *rows)
{
    return gmm_ssm_wls_rows(impl, theta, obs_prec, rows);
}

static gmm_status ssm_wls(void *impl, const double *theta, const double *y, const double *wt,
                          int record, double *loglik, double *mean)
{
    return gmm_ssm_wls(impl, theta, y, wt, record, loglik, mean);
}

static gmm_status ssm_wls_quad(void *impl, const double *x, double *q)
{
    return gmm_ssm_wls_quad(impl, x, q);
}

static gmm_status ssm_wls_var(void *impl, double *fvar) { return gmm_ssm_wls_var(impl, fvar); }

static gmm_status ssm_wls_adjoint(void *impl, const double *rw, double *u, double *thetabar)
{
    return gmm_ssm_wls_adjoint(impl, rw, u, thetabar);
}

static gmm_status ssm_wls_rowcov(void *impl, double *zeta, double *sh)
{
    return gmm_ssm_wls_rowcov(impl, zeta, sh);
}

static const gmm_latent_ops ssm_ops = {
    .family = "state-space",
    .free = ssm_free_impl,
    .prior = ssm_prior_impl,
    .prior_rev = ssm_prior_rev_impl,
    .obs_coef = ssm_obs_coef,
    .obs_coef_rev = ssm_obs_coef_rev,
    .gaussian = ssm_gaussian,
    .gaussian_posterior = ssm_gaussian_post,
    .factorisation = ssm_factorisation,
    .predict_at = ssm_predict_at,
    .whiten_setup = ssm_whiten_setup,
    .whiten = ssm_whiten,
    .whiten_t = ssm_whiten_t,
    .unwhiten = ssm_unwhiten_impl,
    .whiten_rev = ssm_whiten_rev,
    .prior_rows = ssm_prior_rows,
    .prior_rows_rev = ssm_prior_rows_rev,
    .prior_rows_rev_moments = ssm_prior_rows_rev_mo,
    .wls_rows = ssm_wls_rows,
    .wls = ssm_wls,
    .wls_quad = ssm_wls_quad,
    .wls_var = ssm_wls_var,
    .wls_adjoint = ssm_wls_adjoint,
    .wls_rowcov = ssm_wls_rowcov,
};

gmm_status gmm_latent_ssm_alloc(const gmm_kernel *k, const double *x, size_t n,
                                const gmm_ssm_params *par, gmm_latent **out)
{
    gmm_ssm *m = NULL;
    if (!out)
        return gmm_error(GMM_EINVAL, "gmm_latent_ssm_alloc: NULL argument");
    *out = NULL;
    gmm_status st = gmm_ssm_alloc(k, x, n, par, &m);
    if (st)
        return st;
    size_t d = gmm_ssm_dim(m), np = gmm_ssm_nparam(m);
    gmm_latent *l = latent_new(&ssm_ops, n, d, np);
    if (!l) {
        gmm_ssm_free(m);
        return gmm_error(GMM_ENOMEM, "out of memory for the latent model");
    }
    l->impl = m;
    l->n = gmm_ssm_dimension(m);
    l->kl = gmm_ssm_bandwidth(m);
    l->prior_nrows = l->n;
    l->prior_seg = d;
    /* prediction between states reads the blocks (k, k) and (k+1, k) */
    l->cov_kl = 2 * d - 1 > l->kl ? 2 * d - 1 : l->kl;
    if (l->cov_kl > l->n - 1)
        l->cov_kl = l->n - 1;
    l->varies = gmm_ssm_obs_varies(m);
    for (size_t r = 0; r < n; r++)
        l->offset[r] = gmm_ssm_row_offset(m, r);
    for (size_t i = 0; i < np; i++) {
        l->name[i] = gmm_ssm_param_name(m, i);
        l->start[i] = gmm_kernel_values_const(k)[i];
    }
    /* constant rows: H at the start values (it does not depend on theta
     * unless the rows vary, and then it is recomputed per call) */
    if ((st = gmm_ssm_obs_rows(m, l->start, l->coef))) {
        gmm_latent_free(l);
        return st;
    }
    *out = l;
    return GMM_OK;
}
