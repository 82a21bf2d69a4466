/* lik_impl.c -- the numerics the likelihood families share (lik_impl.h):
 * data checks, links, working responses and intercepts of the log-link
 * and identity-link families, and the predictive density by adaptive
 * quadrature.  The families call these and the table in likelihood.c
 * lists the families, so nothing here calls likelihood.c. */
#define _DEFAULT_SOURCE /* lgamma_r */

#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <math.h>
#include <stdio.h>

#include "gmm/likelihood.h"
#include "lik_impl.h"

double gmm_lik_impl_lgamma(double x)
{
    int sign;
    return lgamma_r(x, &sign);
}

const char *gmm_lik_impl_check_count(double y, double e, char *buf, size_t size)
{
    (void)e;
    (void)buf;
    (void)size;
    return y >= 0.0 && floor(y) == y ? NULL : "is not a non-negative integer";
}

const char *gmm_lik_impl_check_exposure(double e)
{
    return e > 0.0 && isfinite(e) ? NULL : "must be positive and finite";
}

double gmm_lik_impl_link_log(const double *par, double m)
{
    (void)par;
    return log(m);
}

double gmm_lik_impl_mean_normal_log(const double *par, double mu, double s2)
{
    (void)par;
    return exp(mu + 0.5 * s2);
}

double gmm_lik_impl_working_log(double y, double e) { return log((y + 0.5) / e); }

double gmm_lik_impl_mean_identity(const double *par, double e, double f)
{
    (void)par;
    (void)e;
    return f;
}

double gmm_lik_impl_link_identity(const double *par, double m)
{
    (void)par;
    return m;
}

double gmm_lik_impl_mean_normal_identity(const double *par, double mu, double s2)
{
    (void)par;
    (void)s2;
    return mu;
}

double gmm_lik_impl_working_identity(double y, double e)
{
    (void)e;
    return y;
}

const char *gmm_lik_impl_degenerate_log(const double *y, const double *e, size_t n,
                                        const char *yname, char *buf, size_t size)
{
    (void)e;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r]) && y[r] != 0.0)
            return NULL;
    snprintf(buf, size, "every observed count in '%s' is 0: the rate's maximum likelihood is 0 "
                        "(the intercept would go to -infinity)",
             yname);
    return buf;
}

gmm_status gmm_lik_impl_intercept_log(const double *y, const double *e, size_t n, double *b)
{
    double sy = 0.0, se = 0.0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r])) {
            sy += y[r];
            se += e ? e[r] : 1.0;
        }
    *b = se == 0.0 ? 0.0 : log((sy + 0.5) / se);
    return GMM_OK;
}

const char *gmm_lik_impl_degenerate_level(const double *y, size_t n, const char *yname,
                                          const char *param, char *buf, size_t size)
{
    double first = NAN;
    for (size_t r = 0; r < n; r++)
        if (!isnan(y[r])) {
            if (isnan(first))
                first = y[r];
            else if (y[r] != first)
                return NULL;
        }
    snprintf(buf, size, "every observed %s is %.17g: there is no variation to fit (its %s "
                        "would go to 0)",
             yname, first, param);
    return buf;
}

/* ---- predictive density by quadrature ------------------------------------------ */

typedef struct {
    const gmm_lik_type *t;
    const double *par;
    double y, e, mu, s2, shift;
} pred_ctx;

/* log p(y | f) + log N(f; mu, s2) */
static double log_joint(const pred_ctx *c, double f)
{
    double out[4], r = f - c->mu;
    c->t->eval(c->par, c->y, c->e, f, out, NULL);
    return out[0] - 0.5 * (1.8378770664093454836 + log(c->s2)) - 0.5 * r * r / c->s2;
}

static double joint(double f, void *p)
{
    const pred_ctx *c = p;
    return exp(log_joint(c, f) - c->shift);
}

#define PRED_GRID 400
#define PRED_LIMIT 400

/* Over mu -/+ 40 sd (the normal factor is below e^-800 beyond, p(y | f) <=
 * 1 or bounded) with break points at mu and, when inside, the peak: QAGP
 * bisects towards each however narrow.  The integrand is scaled by its
 * largest value on a grid of the interval (and at the peak), so it neither
 * overflows nor underflows. */
gmm_status gmm_lik_impl_predictive_quad(const gmm_lik_type *t, const double *par, double y,
                                        double e, double mu, double s2, double peak,
                                        double *lpd)
{
    pred_ctx c = {t, par, y, e, mu, s2, -INFINITY};
    double sd = sqrt(s2), lo = mu - 40.0 * sd, hi = mu + 40.0 * sd;
    for (int i = 0; i <= PRED_GRID; i++)
        c.shift = fmax(c.shift, log_joint(&c, lo + (hi - lo) * i / PRED_GRID));
    double pts[4];
    size_t np = 0;
    pts[np++] = lo;
    if (peak > lo && peak < mu) {
        c.shift = fmax(c.shift, log_joint(&c, peak));
        pts[np++] = peak;
    }
    pts[np++] = mu;
    if (peak > mu && peak < hi) {
        c.shift = fmax(c.shift, log_joint(&c, peak));
        pts[np++] = peak;
    }
    pts[np++] = hi;
    if (!isfinite(c.shift))
        return gmm_error(GMM_EDOM, "%s predictive density: no finite density", t->name);
    gsl_integration_workspace *w = gsl_integration_workspace_alloc(PRED_LIMIT);
    if (!w)
        return gmm_error(GMM_ENOMEM, "%s predictive density: out of memory", t->name);
    gsl_function F = {joint, &c};
    double v, err;
    int rc = gsl_integration_qagp(&F, pts, np, 0.0, 1e-10, PRED_LIMIT, w, &v, &err);
    gsl_integration_workspace_free(w);
    if (rc || !(v > 0.0))
        return gmm_error(GMM_EDOM, "%s predictive density: quadrature failed (%s)", t->name,
                         rc ? gsl_strerror(rc) : "zero integral");
    *lpd = c.shift + log(v);
    return GMM_OK;
}
