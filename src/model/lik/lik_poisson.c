/* lik_poisson.c -- y ~ Poisson(lambda), lambda = e exp(f) (log link, the
 * exposure an offset log e):
 *
 *   log p = y (log e + f) - e exp(f) - log y!,
 *   d^k/df^k log p = y [k = 1] - lambda   (k = 1, 2, 3),
 *   E_{N(mu, s2)} log p = y (log e + mu) - e exp(mu + s2 / 2) - log y!.
 *
 * lambda is formed as e * exp(f) (relative error ~2 ulp) rather than
 * exp(f + log e), whose rounded exponent costs |f + log e| ulps.  Finite for
 * f + log e < 709.
 */
#include <math.h>

#include "lik_impl.h"

/* c[0] = log e, c[1] = log y! (not formed for y = 0, where eval needs neither) */
static void poisson_row_const(double y, double e, double *c)
{
    c[0] = y > 0.0 ? log(e) : 0.0;
    c[1] = y > 0.0 ? gmm_lik_impl_lgamma(y + 1.0) : 0.0;
}

static void poisson_eval_const(const double *par, double y, double e, const double *c,
                               double f, double out[4], double *dpar)
{
    (void)par;
    (void)dpar;
    double lambda = e * exp(f);
    out[0] = (y > 0.0 ? y * (c[0] + f) - c[1] : 0.0) - lambda;
    out[1] = y - lambda;
    out[2] = -lambda;
    out[3] = -lambda;
}

static double poisson_sum_const(const double *par, size_t m, const double *y, const double *e,
                                const double *c, const double *f, double *g)
{
    (void)par;
    double sum = 0.0;
    for (size_t i = 0; i < m; i++) {
        double lambda = e[i] * exp(f[i]);
        sum += (y[i] > 0.0 ? y[i] * (c[2 * i] + f[i]) - c[2 * i + 1] : 0.0) - lambda;
        if (g)
            g[i] = y[i] - lambda;
    }
    return sum;
}

static void poisson_eval(const double *par, double y, double e, double f, double out[4],
                         double *dpar)
{
    double c[2];
    poisson_row_const(y, e, c);
    poisson_eval_const(par, y, e, c, f, out, dpar);
}

static void poisson_expect(const double *par, double y, double e, double mu, double s2,
                           double out[3], double *dpar)
{
    (void)par;
    (void)dpar;
    double m = e * exp(mu + 0.5 * s2); /* E[lambda] */
    out[0] = (y > 0.0 ? y * (log(e) + mu) - gmm_lik_impl_lgamma(y + 1.0) : 0.0) - m;
    out[1] = y - m;
    out[2] = -0.5 * m;
}

static double poisson_mean(const double *par, double e, double f)
{
    (void)par;
    return e * exp(f);
}

const gmm_lik_type gmm_lik_impl_poisson = {
    .name = "poisson",
    .nparam = 0,
    .param = NULL,
    .rowq = "exposure",
    .conjugate = 0,
    .resp = "rate",
    .check_y = gmm_lik_impl_check_count,
    .check_e = gmm_lik_impl_check_exposure,
    .eval = poisson_eval,
    .nconst = 2,
    .row_const = poisson_row_const,
    .eval_const = poisson_eval_const,
    .sum_const = poisson_sum_const,
    .expect = poisson_expect,
    .mean = poisson_mean,
    .link = gmm_lik_impl_link_log,
    .mean_normal = gmm_lik_impl_mean_normal_log,
    .working = gmm_lik_impl_working_log,
    .intercept = gmm_lik_impl_intercept_log,
    .defaults = NULL,
    .degenerate = gmm_lik_impl_degenerate_log,
    .predictive = NULL,
};
