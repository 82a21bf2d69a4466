/* lik_gaussian.c -- y ~ N(f, v):
 *
 *   log p = -log(2 pi v) / 2 - (y - f)^2 / (2 v),
 *   E_{N(mu, s2)} log p = -log(2 pi v) / 2 - ((y - mu)^2 + s2) / (2 v).
 *
 * Conjugate: the marginal likelihood of a Gaussian model is exact, so this
 * family serves the Laplace and VI paths only for comparisons.  No exposure.
 */
#include <math.h>

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

static double gaussian_mean(const double *par, double e, double f)
{
    (void)par;
    (void)e;
    return f;
}

const gmm_lik_type gmm_lik_impl_gaussian = {
    .name = "gaussian",
    .nparam = 1,
    .param = gaussian_param,
    .exposure = 0,
    .conjugate = 1,
    .link_log = 0,
    .check_y = NULL,
    .eval = gaussian_eval,
    .expect = gaussian_expect,
    .mean = gaussian_mean,
};
