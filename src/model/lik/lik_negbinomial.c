/* lik_negbinomial.c -- negative binomial counts with mean m = e exp(f) and
 * dispersion r (variance m + m^2 / r; r -> inf is Poisson):
 *
 *   log p = log Gamma(y + r) - log Gamma(r) - log y!
 *           + r log(r / (r + m)) + y log(m / (r + m)).
 *
 * In terms of the odds z = m / r, p = z / (1 + z) = m / (r + m), q = 1 - p:
 *
 *   log p = G(y, r) - r log1p(z) - y log1p(1 / z),
 *   d1 = y q - r p,   d2 = -(y + r) p q,   d3 = -(y + r) p q (q - p),
 *   d/dr log p = psi(y + r) - psi(r) + p - log1p(z) - y / (r + m),
 *   d/dr d1 = p (y / (r + m) - p),
 *   d/dr d2 = -p q - (y / (r + m) + q) p (p - q).
 *
 * p, q, q - p and both log1p terms come from z when z <= 1 and from 1 / z
 * otherwise, so none is formed as 1 - (something near 1).
 *
 * G and psi(y + r) - psi(r) are differences of large numbers when r >> y
 * (near the Poisson limit, where d/dr log p is O(1/r^2)):
 *   y < 32:  G = sum_{j<y} log((r + j) / (j + 1)), and
 *            psi(y + r) - psi(r) - y / (r + m) = sum_{j<y} (p - j / (r + m)) / (r + j);
 *   r > y >= 32: Stirling's series for both log-gammas and digammas,
 *            G + log y! = (r - 1/2) log1p(y / r) + y log(y + r) - y + c(y + r) - c(r),
 *            psi(y + r) - psi(r) = log1p(y / r) + y / (2 r (y + r)) - (d(y + r) - d(r)),
 *            and log1p(y / r) - log1p(z) - (y - m) / (r + m) = log1pmx(w),
 *            w = (y - m) / (r + m), log1pmx(w) = log1p(w) - w (a series for small w);
 *   else (y >= 32, r <= y): the log-gammas and digammas themselves.
 * No closed-form expectation.
 */
#include <float.h>
#include <math.h>

#include <gsl/gsl_sf_psi.h>

#include "lik_impl.h"

/* Below this count, G and its r-derivative are summed term by term. */
#define SMALL_Y 32.0

static const char *const negbinomial_param[] = {"dispersion"};

/* log1p(w) - w for |w| < 0.1 (series; 15 terms reach 1e-16). */
static double log1pmx_small(double w)
{
    double s = 0.0, t = w;
    for (int k = 2; k <= 17; k++) {
        t *= -w;
        s += t / k;
    }
    return s;
}

/* log1p(w) - w, w > -1, given opw = 1 + w formed without cancellation. */
static double log1pmx(double w, double opw)
{
    return fabs(w) < 0.1 ? log1pmx_small(w) : log(opw) - w;
}

/* Stirling corrections for x >= 32: lgamma(x) = (x - 1/2) log x - x +
 * log(2 pi) / 2 + c(x) and psi(x) = log x - 1 / (2 x) - d(x), each to
 * below 1e-16 relative. */
static double stirling_c(double x)
{
    double u = 1.0 / (x * x);
    return (1.0 / 12 - u * (1.0 / 360 - u * (1.0 / 1260 - u / 1680))) / x;
}

static double stirling_d(double x)
{
    double u = 1.0 / (x * x);
    return u * (1.0 / 12 - u * (1.0 / 120 - u * (1.0 / 252 - u * (1.0 / 240 - u / 132))));
}

/* c[0] = log y!, formed only for y >= SMALL_Y (where eval needs it) */
static void negbinomial_row_const(double y, double e, double *c)
{
    (void)e;
    c[0] = y < SMALL_Y ? 0.0 : gmm_lik_impl_lgamma(y + 1.0);
}

static void negbinomial_eval_const(const double *par, double y, double e, const double *c,
                                   double f, double out[4], double *dpar)
{
    double r = par[0];
    double m = e * exp(f);
    double z = m / r;
    /* log z from z while it is a normal number, else from its logarithms */
    double lz = z >= DBL_MIN && z <= DBL_MAX ? log(z) : f + log(e) - log(r);
    double p, q, qmp, sp, sn; /* sp = log1p(z) = -log q, sn = log1p(1/z) = -log p */
    if (z <= 1.0) {
        q = 1.0 / (1.0 + z);
        p = z * q;
        qmp = (1.0 - z) * q;
        sp = log1p(z);
        sn = sp - lz;
    } else {
        double w = z <= DBL_MAX ? 1.0 / z : exp(-lz);
        p = 1.0 / (1.0 + w);
        q = w * p;
        qmp = (w - 1.0) * p;
        sn = log1p(w);
        sp = lz + sn;
    }
    double a = 1.0 / (r + m); /* 0 when m overflows */
    double ya = y * a;         /* y / (r + m) */
    double pq = p * q;
    /* G(y, r), and dr = d/dr log p */
    double lg = 0.0, dr = 0.0;
    if (y < SMALL_Y) {
        for (double j = 0.0; j < y; j += 1.0) {
            lg += log((r + j) / (j + 1.0));
            dr += (p - j * a) / (r + j);
        }
        /* p - log1p(z) = -z p - (log1p(z) - z): no cancellation for small z */
        dr += z < 0.1 ? -z * p - log1pmx_small(z) : p - sp;
    } else if (r > y) {
        double l1 = log1p(y / r);
        lg = (r - 0.5) * l1 + y * log(y + r) - y + stirling_c(y + r) - stirling_c(r) - c[0];
        if (dpar)
            dr = 0.5 * y / (r * (y + r)) - (stirling_d(y + r) - stirling_d(r))
                 + log1pmx(ya - p, q + ya);
    } else {
        lg = gmm_lik_impl_lgamma(y + r) - gmm_lik_impl_lgamma(r) - c[0];
        if (dpar)
            dr = gsl_sf_psi(y + r) - gsl_sf_psi(r) - ya + p - sp;
    }
    out[0] = lg - r * sp - (y > 0.0 ? y * sn : 0.0);
    out[1] = y * q - r * p;
    out[2] = -(y + r) * pq;
    out[3] = -(y + r) * pq * qmp;
    if (dpar) {
        dpar[0] = dr;
        dpar[1] = p * (ya - p);
        dpar[2] = (ya + q) * p * qmp - pq;
    }
}

static void negbinomial_eval(const double *par, double y, double e, double f, double out[4],
                             double *dpar)
{
    double c[1];
    negbinomial_row_const(y, e, c);
    negbinomial_eval_const(par, y, e, c, f, out, dpar);
}

/* Dispersion 1: variance mu + mu^2, a geometric count. */
static gmm_status negbinomial_defaults(const double *y, size_t n, double *dflt)
{
    (void)y;
    (void)n;
    dflt[0] = 1.0;
    return GMM_OK;
}

static double negbinomial_mean(const double *par, double e, double f)
{
    (void)par;
    return e * exp(f);
}

const gmm_lik_type gmm_lik_impl_negbinomial = {
    .name = "negbinomial",
    .nparam = 1,
    .param = negbinomial_param,
    .rowq = "exposure",
    .conjugate = 0,
    .resp = "rate",
    .check_y = gmm_lik_impl_check_count,
    .check_e = gmm_lik_impl_check_exposure,
    .eval = negbinomial_eval,
    .nconst = 1,
    .row_const = negbinomial_row_const,
    .eval_const = negbinomial_eval_const,
    .expect = NULL,
    .mean = negbinomial_mean,
    .link = gmm_lik_impl_link_log,
    .mean_normal = gmm_lik_impl_mean_normal_log,
    .working = gmm_lik_impl_working_log,
    .intercept = gmm_lik_impl_intercept_log,
    .defaults = negbinomial_defaults,
    .degenerate = gmm_lik_impl_degenerate_log,
    .predictive = NULL,
};
