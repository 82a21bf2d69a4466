/* problem_joint.c -- the joint density of the whitened latents and the
 * sampled hyperparameters, and their priors (problem.h). */
#include "gmm/problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/laplace.h"
#include "infer_impl.h"
#include "gmm/summary.h"
#include "problem_impl.h"

gmm_prior_kind gmm_prior_kind_of(gmm_scale s)
{
    return s == GMM_SCALE_LOG     ? GMM_PRIOR_LOGNORMAL
           : s == GMM_SCALE_LOGIT ? GMM_PRIOR_LOGITNORMAL
           : s == GMM_SCALE_ATANH ? GMM_PRIOR_ATANHNORMAL
                                  : GMM_PRIOR_NORMAL;
}

const char *gmm_prior_kind_name(gmm_prior_kind k)
{
    return k == GMM_PRIOR_LOGNORMAL     ? "lognormal"
           : k == GMM_PRIOR_LOGITNORMAL ? "logitnormal"
           : k == GMM_PRIOR_ATANHNORMAL ? "atanhnormal"
           : k == GMM_PRIOR_NORMAL      ? "normal"
                                        : "unknown";
}

/* The observed rows' column means of the design, and which column is the
 * intercept's (every observed row 1), for the prior on the centred design. */
static gmm_status coef_moments(gmm_problem *p)
{
    size_t nc = p->ncoef;
    gmm_free(p->cmean);
    gmm_free(p->jg);
    p->cmean = gmm_calloc(nc ? nc : 1, sizeof *p->cmean);
    p->jg = gmm_malloc(p->nparam ? p->nparam : 1, sizeof *p->jg);
    if (!p->cmean || !p->jg)
        return gmm_error(GMM_ENOMEM, "out of memory for the joint density");
    p->icpt = -1;
    for (size_t k = 0; k < nc; k++) {
        int ones = p->nobs > 0;
        for (size_t r = 0; r < p->nrows; r++)
            if (!isnan(p->y[r])) {
                p->cmean[k] += p->X[r * nc + k];
                ones = ones && p->X[r * nc + k] == 1.0;
            }
        p->cmean[k] /= p->nobs ? (double)p->nobs : 1.0;
        if (ones && p->icpt < 0)
            p->icpt = (long)k;
    }
    return GMM_OK;
}

gmm_status gmm_problem_coef_moments(gmm_problem *p, double *mean, double *sd, long *icpt)
{
    gmm_status st = coef_moments(p);
    if (st)
        return st;
    for (size_t k = 0; k < p->ncoef; k++) {
        double ss = 0.0;
        for (size_t r = 0; r < p->nrows; r++)
            if (!isnan(p->y[r])) {
                double d = p->X[r * p->ncoef + k] - p->cmean[k];
                ss += d * d;
            }
        if (mean)
            mean[k] = p->cmean[k];
        if (sd)
            sd[k] = p->nobs > 1 ? sqrt(ss / (double)(p->nobs - 1)) : 0.0;
    }
    if (icpt)
        *icpt = p->icpt;
    return GMM_OK;
}

gmm_status gmm_problem_joint_setup(gmm_problem *p, const double *theta, const int *sampled,
                                   const gmm_prior *priors)
{
    if (!p || !theta || !sampled || !priors)
        return gmm_error(GMM_EINVAL, "gmm_problem_joint_setup: NULL argument");
    if (p->metric == GMM_METRIC_LAPLACE)
        return gmm_error(GMM_EINVAL, "the Laplace metric holds the hyperparameters fixed: "
                                     "sample them under the prior's");
    size_t np = p->nparam ? p->nparam : 1, nc = gmm_obsmap_nnz(&p->map);
    if (!p->jsamp) {
        p->jsamp = gmm_calloc(np, sizeof *p->jsamp);
        p->jprior = gmm_calloc(np, sizeof *p->jprior);
        p->jtheta = gmm_calloc(np, sizeof *p->jtheta);
        p->jbar = gmm_calloc(np, sizeof *p->jbar);
        p->jcbar = gmm_calloc(nc ? nc : 1, sizeof *p->jcbar);
        if (!p->jsamp || !p->jprior || !p->jtheta || !p->jbar || !p->jcbar)
            return gmm_error(GMM_ENOMEM, "out of memory for the joint density");
    }
    p->jn = 0;
    for (size_t k = 0; k < p->nparam; k++) {
        gmm_scale sc = p->obj.scale[k];
        if (sampled[k]) {
            gmm_prior_kind want = gmm_prior_kind_of(sc);
            if (priors[k].kind != want || !isfinite(priors[k].mu) ||
                !(priors[k].sigma > 0.0) || !isfinite(priors[k].sigma))
                return gmm_error_at(GMM_EINVAL, k, "prior of %s: %s(mu, sigma > 0) expected",
                                    p->obj.name[k], gmm_prior_kind_name(want));
            if (!gmm_scale_inside(sc, theta[k]))
                return gmm_error_at(GMM_EINVAL, k, "%s = %g cannot be sampled on the %s scale",
                                    p->obj.name[k], theta[k], gmm_scale_name(sc));
            p->jn++;
        }
        p->jsamp[k] = sampled[k] != 0;
        p->jprior[k] = priors[k];
        p->jtheta[k] = theta[k];
    }
    gmm_free(p->jidx);
    infer_scale_free(&p->jsc);
    if (!(p->jidx = gmm_malloc(p->jn ? p->jn : 1, sizeof *p->jidx)))
        return gmm_error(GMM_ENOMEM, "out of memory for the joint density");
    for (size_t k = 0, j = 0; k < p->nparam; k++)
        if (p->jsamp[k])
            p->jidx[j++] = k;
    /* the basis applies to sampled coefficients as to free ones */
    int *fx = p->obj.fixed, *keep = gmm_malloc(np, sizeof *keep);
    if (!keep)
        return gmm_error(GMM_ENOMEM, "out of memory for the joint density");
    memcpy(keep, fx, p->nparam * sizeof *keep);
    for (size_t k = 0; k < p->nparam; k++)
        fx[k] = !p->jsamp[k];
    gmm_status st = infer_scale_init(&p->jsc, &p->obj, p->jn, p->jidx);
    memcpy(fx, keep, p->nparam * sizeof *keep);
    gmm_free(keep);
    if (st)
        return st;
    return coef_moments(p);
}

size_t gmm_problem_joint_dim(const gmm_problem *p) { return p->n + p->jn; }

size_t gmm_problem_hyper_dim(const gmm_problem *p) { return p->jsamp ? p->jn : 0; }

gmm_status gmm_problem_hyper_theta(gmm_problem *p, const double *u, double *theta)
{
    if (!p->jsamp)
        return gmm_error(GMM_EINVAL, "gmm_problem_hyper_theta: no joint setup");
    memcpy(theta, p->jtheta, p->nparam * sizeof *theta);
    return infer_scale_theta(&p->jsc, u, theta) ? GMM_OK : gmm_error_status();
}

gmm_status gmm_problem_hyper_u(const gmm_problem *p, const double *theta, double *u)
{
    if (!p->jsamp)
        return gmm_error(GMM_EINVAL, "gmm_problem_hyper_u: no joint setup");
    infer_scale_u(&p->jsc, theta, u);
    return GMM_OK;
}

/* PRIORS: a coefficient's normal prior is on the centred design -- the
 * intercept's on b + sum_k beta_k mean(x_k), the others' on beta_k -- so
 * that a covariate's location moves neither its slope's prior nor the
 * intercept's; on u (the design basis, a linear map of beta) the density
 * differs from beta's by a constant Jacobian. */
double gmm_problem_hyper_prior(gmm_problem *p, const double *u, const double *theta,
                               const double *thetabar, double *gu)
{
    double lp = 0.0, bc = 0.0, gb = 0.0;
    double *g = p->jg;
    if (thetabar)
        memcpy(g, thetabar, p->nparam * sizeof *g);
    else
        memset(g, 0, p->nparam * sizeof *g);
    if (p->icpt >= 0 && p->jsamp[p->c0 + (size_t)p->icpt]) {
        size_t ib = p->c0 + (size_t)p->icpt;
        bc = theta[ib];
        for (size_t k = 0; k < p->ncoef; k++)
            if ((long)k != p->icpt)
                bc += theta[p->c0 + k] * p->cmean[k];
        double s = p->jprior[ib].sigma, z = (bc - p->jprior[ib].mu) / s;
        lp -= 0.5 * z * z;
        gb = -z / s; /* d/d bc, into b and each beta_k through its mean */
        g[ib] += gb;
    }
    for (size_t k = 0; k < p->ncoef; k++) {
        size_t i = p->c0 + k;
        if (!p->jsamp[i] || (long)k == p->icpt)
            continue;
        double s = p->jprior[i].sigma, z = (theta[i] - p->jprior[i].mu) / s;
        lp -= 0.5 * z * z;
        g[i] += -z / s + (p->icpt >= 0 && p->jsamp[p->c0 + (size_t)p->icpt] ? gb * p->cmean[k]
                                                                             : 0.0);
    }
    if (gu)
        infer_scale_grad(&p->jsc, theta, g, 1.0, gu);
    /* the others: normal on u itself */
    for (size_t j = 0; j < p->jn; j++) {
        size_t i = p->jidx[j];
        if (i >= p->c0)
            continue;
        double s = p->jprior[i].sigma, z = (u[j] - p->jprior[i].mu) / s;
        lp -= 0.5 * z * z;
        if (gu)
            gu[j] -= z / s;
    }
    return lp;
}

gmm_status gmm_problem_joint_theta(const gmm_problem *p, const double *q, double *theta)
{
    if (!p->jsamp)
        return gmm_error(GMM_EINVAL, "gmm_problem_joint_theta: no joint setup");
    memcpy(theta, p->jtheta, p->nparam * sizeof *theta);
    /* a value outside the domain is left for the caller to refuse */
    infer_scale_theta((infer_scale *)&p->jsc, q + p->n, theta);
    return GMM_OK;
}

gmm_status gmm_problem_joint_start(gmm_problem *p, double *q)
{
    gmm_status st;
    if (!p->jsamp)
        return gmm_error(GMM_EINVAL, "gmm_problem_joint_start: no joint setup");
    if ((st = gmm_problem_whiten_setup(p, p->jtheta)) ||
        (st = gmm_problem_whitened_start(p, p->jtheta, q)))
        return st;
    infer_scale_u(&p->jsc, p->jtheta, q + p->n);
    return GMM_OK;
}

gmm_status gmm_problem_joint_logp(gmm_problem *p, const double *q, double *lp, double *grad)
{
    gmm_status st;
    if (!p || !p->jsamp)
        return gmm_error(GMM_EINVAL, "gmm_problem_joint_logp: no joint setup");
    double *th = p->thetabar; /* scratch: theta at q */
    if ((st = gmm_problem_hyper_theta(p, q + p->n, th)))
        return st;
    if ((st = gmm_problem_whiten_setup(p, th)))
        return st == GMM_EINVAL ? gmm_error(GMM_EDOM, "%s", gmm_error_message()) : st;
    const double *v = q;
    if ((st = gmm_latent_whiten(p->lat, v, p->wx)))
        return st;
    size_t nl = p->nl;
    int varies = gmm_latent_obs_varies(p->lat);
    memset(p->jbar, 0, p->nparam * sizeof *p->jbar);
    problem_packed_f(p);
    double sum = problem_packed_lik(p, p->wd, p->np ? p->jbar + nl : NULL);
    double vv = 0.0;
    for (size_t j = 0; j < p->n; j++)
        vv += v[j] * v[j];
    double lprior = gmm_problem_hyper_prior(p, q + p->n, th, NULL, NULL);
    double l = sum - 0.5 * vv + lprior;
    if (!isfinite(l))
        return gmm_error(GMM_EDOM, "joint log density not finite");
    *lp = l;
    if (!grad)
        return GMM_OK;
    /* v: W' H' g - v; theta: through W(theta) and the rows, then to u */
    problem_packed_scatter(p, p->wd);
    if (varies) {
        memset(p->jcbar, 0, gmm_obsmap_nnz(&p->map) * sizeof *p->jcbar);
        for (size_t i = 0; i < p->nobs; i++) {
            size_t lo = gmm_obsmap_row_lo(&p->map, p->wrow[i]), k0 = p->wptr[i];
            for (size_t k = k0; k < p->wptr[i + 1]; k++)
                p->jcbar[lo + (k - k0)] = p->wd[i] * p->wx[p->widx[k]];
        }
    }
    if ((st = gmm_latent_whiten_t(p->lat, p->wg, grad)))
        return st;
    for (size_t i = 0; i < p->n; i++)
        grad[i] -= v[i];
    /* v and wg are the whiten's and whiten_t's above: their solves are reused */
    if ((st = gmm_latent_whiten_rev(p->lat, NULL, NULL, p->jbar)) ||
        (varies && (st = gmm_latent_obs_coef_rev(p->lat, th, p->jcbar, p->jbar))))
        return st;
    if (p->ncoef) {
        memset(p->offbar, 0, p->nrows * sizeof *p->offbar);
        for (size_t i = 0; i < p->nobs; i++)
            p->offbar[p->wrow[i]] = p->wd[i];
        gmm_problem_offsets_rev(p, p->offbar, p->jbar);
    }
    gmm_problem_hyper_prior(p, q + p->n, th, p->jbar, grad + p->n);
    return GMM_OK;
}
