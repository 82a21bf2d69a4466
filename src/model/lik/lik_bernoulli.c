/* lik_bernoulli.c -- y in {0, 1}, P(y = 1) = p = 1 / (1 + exp(-f)) (logit
 * link), q = 1 - p = 1 / (1 + exp(f)):
 *
 *   log p(y | f) = -softplus(-f) (y = 1),  -softplus(f) (y = 0),
 *   d1 = y - p,  d2 = -p q,  d3 = -p q (q - p),  q - p = -tanh(f / 2).
 *
 * p and q both come from t = exp(-|f|) <= 1 (the larger one is 1 / (1 + t),
 * the smaller t / (1 + t)), so each has full relative accuracy: d1 at
 * y = 1, f = 600 is q = 2.6e-261, not 1 - 1 = 0.  No exposure.  No
 * closed-form expectation: gmm_lik_expect uses Gauss-Hermite.
 */
#include <math.h>

#include "lik_impl.h"

static const char *bernoulli_check(double y)
{
    return y == 0.0 || y == 1.0 ? NULL : "is not 0 or 1";
}

static void bernoulli_eval(const double *par, double y, double e, double f, double out[4],
                           double *dpar)
{
    (void)par;
    (void)e;
    (void)dpar;
    double t = exp(-fabs(f)), p, q;
    if (f >= 0.0) {
        p = 1.0 / (1.0 + t);
        q = t * p;
    } else {
        q = 1.0 / (1.0 + t);
        p = t * q;
    }
    double l = log1p(t); /* softplus(-|f|) */
    out[0] = y == 1.0 ? -(fmax(-f, 0.0) + l) : -(fmax(f, 0.0) + l);
    out[1] = y == 1.0 ? q : -p;
    out[2] = -p * q;
    out[3] = p * q * tanh(0.5 * f);
}

static double bernoulli_mean(const double *par, double e, double f)
{
    (void)par;
    (void)e;
    return f >= 0.0 ? 1.0 / (1.0 + exp(-f)) : exp(f) / (1.0 + exp(f));
}

const gmm_lik_type gmm_lik_impl_bernoulli = {
    .name = "bernoulli",
    .nparam = 0,
    .param = NULL,
    .exposure = 0,
    .conjugate = 0,
    .link_log = 0,
    .check_y = bernoulli_check,
    .eval = bernoulli_eval,
    .expect = NULL,
    .mean = bernoulli_mean,
};
