/* lik_gaussian.c -- y ~ N(f, v):
 *
 *   log p = -log(2 pi v) / 2 - (y - f)^2 / (2 v),
 *   E_{N(mu, s2)} log p = -log(2 pi v) / 2 - ((y - mu)^2 + s2) / (2 v).
 *
 * Conjugate: the marginal likelihood of a Gaussian model is exact, so this
 * family serves the Laplace and VI paths only for comparisons.  No exposure.
 */
#include <math.h>

#include "gmm/kernel.h"
#include "lik_impl.h"

#define LOG_2PI 1.8378770664093454835606594728112353

static const char *const gaussian_param[] = {"variance"};

static void gaussian_eval(const double *par, double y, double e, double f, double out[4],
                          double *dpar)
{
    (void)e;
    double v = par[0], r = y - f;
    out[0] = -0.5 * (LOG_2PI + log(v)) - 0.5 * r * r / v;
    out[1] = r / v;
    out[2] = -1.0 / v;
    out[3] = 0.0;
    if (dpar) {
        dpar[0] = 0.5 * (r * r / v - 1.0) / v;
        dpar[1] = -r / (v * v);
        dpar[2] = 1.0 / (v * v);
    }
}

static void gaussian_expect(const double *par, double y, double e, double mu, double s2,
                            double out[3], double *dpar)
{
    (void)e;
    double v = par[0], r = y - mu, q = r * r + s2;
    out[0] = -0.5 * (LOG_2PI + log(v)) - 0.5 * q / v;
    out[1] = r / v;
    out[2] = -0.5 / v;
    if (dpar)
        dpar[0] = 0.5 * (q / v - 1.0) / v;
}

static gmm_status gaussian_intercept(const double *y, const double *e, size_t n, double *b)
{
    (void)e;
    double sum = 0.0;
    size_t m = 0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r])) {
            sum += y[r];
            m++;
        }
    *b = m ? sum / (double)m : 0.0;
    return GMM_OK;
}

static gmm_status gaussian_defaults(const double *y, size_t n, double *dflt)
{
    dflt[0] = gmm_kernel_default_noise(y, n);
    return GMM_OK;
}

static const char *gaussian_degenerate(const double *y, const double *e, size_t n,
                                       const char *yname, char *buf, size_t size)
{
    (void)e;
    return gmm_lik_impl_degenerate_level(y, n, yname, "variance", buf, size);
}

/* N(y; mu, s2 + variance) */
static gmm_status gaussian_predictive(const double *par, double y, double e, double mu,
                                      double s2, double *lpd)
{
    (void)e;
    double v = s2 + par[0], r = y - mu;
    *lpd = -0.5 * (LOG_2PI + log(v)) - 0.5 * r * r / v;
    return GMM_OK;
}

const gmm_lik_type gmm_lik_impl_gaussian = {
    .name = "gaussian",
    .nparam = 1,
    .param = gaussian_param,
    .rowq = NULL,
    .conjugate = 1,
    .weight_param = 1, /* the variance: y ~ N(f, variance / w) */
    .resp = NULL,
    .check_y = NULL,
    .check_e = NULL,
    .eval = gaussian_eval,
    .expect = gaussian_expect,
    .mean = gmm_lik_impl_mean_identity,
    .link = gmm_lik_impl_link_identity,
    .mean_normal = gmm_lik_impl_mean_normal_identity,
    .working = gmm_lik_impl_working_identity,
    .intercept = gaussian_intercept,
    .defaults = gaussian_defaults,
    .degenerate = gaussian_degenerate,
    .predictive = gaussian_predictive,
};
