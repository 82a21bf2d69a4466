/* lik_binomial.c -- k successes in n trials, k ~ Binomial(n, p), p = 1 / (1
 * + exp(-f)) (logit link; n the row's "trials", 1 when absent):
 *
 *   log p = log C(n, k) - k softplus(-f) - (n - k) softplus(f),
 *   d1 = k q - (n - k) p,   d2 = -n p q,   d3 = n p q (p - q),
 *
 * q = 1 - p, p - q = tanh(f / 2); log C(n, k) is the full normalising
 * constant, as R's dbinom has it.  p and q are each formed from exp(-|f|)
 * so neither is 1 - (something near 1).  With n = 1 every expression
 * reduces exactly (0 and 1 factors, a zero log C) to the Bernoulli one, so
 * "bernoulli" is this family without a per-row quantity.  No closed-form
 * expectation (Gauss-Hermite).  The predictive density is an adaptive
 * quadrature: with many trials the likelihood's cliff (exp(-n f) for a
 * zero count) defeats Gauss-Hermite; bernoulli keeps the Gauss-Hermite
 * rule, accurate for one trial.
 */
#include <math.h>
#include <stdio.h>

#include "lik_impl.h"

static const char *binomial_check_e(double e)
{
    return e >= 1.0 && isfinite(e) && floor(e) == e ? NULL : "must be a positive integer";
}

static const char *binomial_check_y(double y, double e, char *buf, size_t size)
{
    const char *why = gmm_lik_impl_check_count(y, e, buf, size);
    if (why || binomial_check_e(e) || y <= e)
        return why;
    snprintf(buf, size, "exceeds trials = %.15g", e);
    return buf;
}

static const char *bernoulli_check_y(double y, double e, char *buf, size_t size)
{
    (void)e;
    (void)buf;
    (void)size;
    return y == 0.0 || y == 1.0 ? NULL : "is not 0 or 1";
}

/* c[0] = log C(n, k), formed only for 0 < k < n (eval needs it there) */
static void binomial_row_const(double y, double e, double *c)
{
    c[0] = y == 0.0 || y == e ? 0.0
           : gmm_lik_impl_lgamma(e + 1.0) - gmm_lik_impl_lgamma(y + 1.0)
                 - gmm_lik_impl_lgamma(e - y + 1.0);
}

static void binomial_eval_const(const double *par, double y, double e, const double *c,
                                double f, double out[4], double *dpar)
{
    (void)par;
    (void)dpar;
    double n = e, t = exp(-fabs(f)), p, q;
    if (f >= 0.0) {
        p = 1.0 / (1.0 + t);
        q = t * p;
    } else {
        q = 1.0 / (1.0 + t);
        p = t * q;
    }
    double l = log1p(t); /* softplus(-|f|) */
    double sn = fmax(-f, 0.0) + l, sp = fmax(f, 0.0) + l; /* -log p, -log q */
    if (y == 0.0) {
        out[0] = -(n * sp);
        out[1] = -(n * p);
    } else if (y == n) {
        out[0] = -(n * sn);
        out[1] = n * q;
    } else {
        out[0] = c[0] - (y * sn + (n - y) * sp);
        out[1] = y * q - (n - y) * p;
    }
    out[2] = -(n * p * q);
    out[3] = n * p * q * tanh(0.5 * f);
}

static void binomial_eval(const double *par, double y, double e, double f, double out[4],
                          double *dpar)
{
    double c[1];
    binomial_row_const(y, e, c);
    binomial_eval_const(par, y, e, c, f, out, dpar);
}

static double binomial_mean(const double *par, double e, double f)
{
    (void)par;
    return e * (f >= 0.0 ? 1.0 / (1.0 + exp(-f)) : exp(f) / (1.0 + exp(f)));
}

static double logit(const double *par, double m)
{
    (void)par;
    return log(m / (1.0 - m));
}

static double binomial_working(double y, double e) { return 2.0 * y / e - 1.0; }

/* The logit of the overall success fraction, shrunk by 1/2 success in 1
 * trial so that all-0 or all-n data give a finite start. */
static gmm_status binomial_intercept(const double *y, const double *e, size_t n, double *b)
{
    double sy = 0.0, se = 0.0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r])) {
            sy += y[r];
            se += e ? e[r] : 1.0;
        }
    if (se == 0.0) {
        *b = 0.0;
        return GMM_OK;
    }
    double p = (sy + 0.5) / (se + 1.0);
    *b = log(p / (1.0 - p));
    return GMM_OK;
}

/* Every y 0, or every y its trials: the probability's maximum likelihood
 * is 0 or 1.  Without trials (bernoulli) the message names the value. */
static const char *binomial_degenerate(const double *y, const double *e, size_t n,
                                       const char *yname, char *buf, size_t size)
{
    int zero = 1, full = 1;
    double first = NAN;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r])) {
            if (isnan(first))
                first = y[r];
            zero &= y[r] == 0.0;
            full &= y[r] == (e ? e[r] : 1.0);
        }
    if (!zero && !full)
        return NULL;
    if (!e || zero)
        snprintf(buf, size, "every observed '%s' is %g: the probability's maximum likelihood is "
                            "%g (the intercept would go to %sinfinity)",
                 yname, first, zero ? 0.0 : 1.0, zero ? "-" : "+");
    else
        snprintf(buf, size, "every observed '%s' equals its trials: the probability's maximum "
                            "likelihood is 1 (the intercept would go to +infinity)",
                 yname);
    return buf;
}

extern const gmm_lik_type gmm_lik_impl_binomial; /* below */

/* The likelihood's peak is at the logit of k / n (clamped off 0 and n). */
static gmm_status binomial_predictive(const double *par, double y, double e, double mu,
                                      double s2, double *lpd)
{
    double m = (y + 0.5) / (e + 1.0);
    return gmm_lik_impl_predictive_quad(&gmm_lik_impl_binomial, par, y, e, mu, s2,
                                        log(m / (1.0 - m)), lpd);
}

const gmm_lik_type gmm_lik_impl_binomial = {
    .name = "binomial",
    .nparam = 0,
    .param = NULL,
    .rowq = "trials",
    .conjugate = 0,
    .resp = "prob",
    .check_y = binomial_check_y,
    .check_e = binomial_check_e,
    .eval = binomial_eval,
    .nconst = 1,
    .row_const = binomial_row_const,
    .eval_const = binomial_eval_const,
    .expect = NULL,
    .mean = binomial_mean,
    .link = logit,
    .mean_normal = NULL,
    .working = binomial_working,
    .intercept = binomial_intercept,
    .defaults = NULL,
    .degenerate = binomial_degenerate,
    .predictive = binomial_predictive,
};

const gmm_lik_type gmm_lik_impl_bernoulli = {
    .name = "bernoulli",
    .nparam = 0,
    .param = NULL,
    .rowq = NULL,
    .conjugate = 0,
    .resp = "prob",
    .check_y = bernoulli_check_y,
    .check_e = NULL,
    .eval = binomial_eval,
    .expect = NULL,
    .mean = binomial_mean,
    .link = logit,
    .mean_normal = NULL,
    .working = binomial_working,
    .intercept = binomial_intercept,
    .defaults = NULL,
    .degenerate = binomial_degenerate,
    .predictive = NULL,
};
