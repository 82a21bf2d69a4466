/* lik_response.c -- the mean outcome under a Gaussian posterior of f
 * (gmm_lik_response in likelihood.h), for predictions, and the predictive
 * density of an outcome (gmm_lik_predictive), for scoring. */
#include <math.h>

#include "gmm/likelihood.h"
#include "lik_impl.h"

/* 40 Gauss-Hermite points (the rule of gmm_lik_expect): E[logistic(f)] to
 * ~1e-12 for s2 <= 100. */
#define NGH 40

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
    if (t->mean_normal) {
        out[0] = t->mean_normal(lik->par, mu, s2);
        return GMM_OK;
    }
    const double *gt, *gw;
    gmm_status st = gmm_lik_impl_gh_rule(NGH, &gt, &gw);
    if (st != GMM_OK)
        return st;
    /* E g(f) = sum w_i g(mu + sd t_i) */
    double s = 0.0;
    for (size_t i = 0; i < NGH; i++)
        s += gw[i] * t->mean(lik->par, 1.0, mu + sd * gt[i]);
    out[0] = s;
    return GMM_OK;
}

gmm_status gmm_lik_predictive(const gmm_lik *lik, double y, double e, double mu, double s2,
                              double *lpd)
{
    if (!lik || !lik->type || !lpd)
        return gmm_error(GMM_EINVAL, "gmm_lik_predictive: NULL argument");
    if (!(s2 >= 0.0) || !isfinite(mu) || !isfinite(s2) || !isfinite(y))
        return gmm_error(GMM_EINVAL, "gmm_lik_predictive: y %g, mean %g, variance %g", y, mu,
                         s2);
    double out[4];
    if (s2 == 0.0) {
        gmm_lik_eval(lik, y, e, mu, out, NULL);
        *lpd = out[0];
        return GMM_OK;
    }
    if (lik->type->predictive) {
        gmm_status st = lik->type->predictive(lik->par, y, e, mu, s2, lpd);
        if (st == GMM_OK && !isfinite(*lpd))
            return gmm_error(GMM_EDOM, "predictive density not finite (y %g, mean %g, var %g)",
                             y, mu, s2);
        return st;
    }
    const double *gt, *gw;
    gmm_status st = gmm_lik_impl_gh_rule(NGH, &gt, &gw);
    if (st != GMM_OK)
        return st;
    /* adaptive Gauss-Hermite: centred at the mode f* of log p(y | f) +
     * log N(f; mu, s2) with the scale of its curvature, so a likelihood far
     * narrower than the Gaussian (many counts) is still integrated exactly */
    double f = mu;
    for (int it = 0; it < 100; it++) {
        gmm_lik_eval(lik, y, e, f, out, NULL);
        double g = out[1] - (f - mu) / s2, h = out[2] - 1.0 / s2;
        double step = -g / h;
        if (!isfinite(step))
            break;
        /* damped: the log density is concave, a step never needs more than
         * halving to increase it, and |step| <= 10 sd keeps exp() finite */
        double lim = 10.0 * sqrt(s2) + 10.0;
        if (fabs(step) > lim)
            step = step > 0 ? lim : -lim;
        f += step;
        if (fabs(step) < 1e-12 * (1.0 + fabs(f)))
            break;
    }
    gmm_lik_eval(lik, y, e, f, out, NULL);
    double c = 1.0 / s2 - out[2]; /* curvature > 0 */
    if (!(c > 0.0) || !isfinite(c))
        return gmm_error(GMM_EDOM, "predictive density: no curvature at the mode");
    /* the rule's weights are for N(0, 1): w_i exp(t_i^2 / 2) sqrt(2 pi) per
     * unit of t */
    double sc = 1.0 / sqrt(c), lw[NGH], mx = -INFINITY;
    for (size_t i = 0; i < NGH; i++) {
        double x = f + sc * gt[i], r = x - mu;
        gmm_lik_eval(lik, y, e, x, out, NULL);
        lw[i] = log(gw[i]) + 0.5 * gt[i] * gt[i] + out[0] - 0.5 * r * r / s2;
        if (lw[i] > mx)
            mx = lw[i];
    }
    double sum = 0.0;
    for (size_t i = 0; i < NGH; i++)
        sum += exp(lw[i] - mx);
    /* N(f; mu, s2)'s normalisation, N(0, 1)'s and the change of variables
     * f = f* + sc t */
    *lpd = mx + log(sum) + log(sc) - 0.5 * log(s2);
    if (!isfinite(*lpd))
        return gmm_error(GMM_EDOM, "predictive density not finite (y %g, mean %g, var %g)", y,
                         mu, s2);
    return GMM_OK;
}

gmm_status gmm_lik_predictive_draws(const gmm_lik *lik, double y, double e, const double *f,
                                    size_t nf, double *lpd)
{
    if (!lik || !lik->type || !f || !lpd || nf == 0)
        return gmm_error(GMM_EINVAL, "gmm_lik_predictive_draws: NULL argument or no draws");
    double out[4], mx = -INFINITY, sum = 0.0;
    for (size_t s = 0; s < nf; s++) {
        gmm_lik_eval(lik, y, e, f[s], out, NULL);
        if (out[0] > mx)
            mx = out[0];
    }
    if (!isfinite(mx))
        return gmm_error(GMM_EDOM, "predictive density: no draw gives y = %g a finite density", y);
    for (size_t s = 0; s < nf; s++) {
        gmm_lik_eval(lik, y, e, f[s], out, NULL);
        sum += exp(out[0] - mx);
    }
    *lpd = mx + log(sum / (double)nf);
    return GMM_OK;
}
