/* problem.c -- latent model + likelihood + data as an objective and a
 * posterior (problem.h): allocation, the objective and the posterior. */
#include "gmm/problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/laplace.h"
#include "infer_impl.h"
#include "problem_impl.h"

void gmm_problem_free(gmm_problem *p)
{
    if (!p)
        return;
    gmm_free(p->y);
    gmm_free(p->e);
    gmm_free(p->wt);
    gmm_free(p->owt);
    gmm_free(p->Xown);
    gmm_free(p->off);
    gmm_free(p->offbar);
    gmm_free(p->oshift);
    gmm_free(p->oshiftbar);
    gmm_free(p->ry);
    gmm_free(p->rx);
    gmm_free(p->woff);
    gmm_free(p->orow);
    gmm_free(p->ooff);
    gmm_free(p->oy);
    gmm_free(p->oe);
    gmm_free(p->ocst);
    gmm_free(p->ocoef);
    gmm_free(p->orowptr);
    gmm_free(p->opos);
    gmm_free(p->coef_all);
    gmm_free(p->coefbar_all);
    gmm_free(p->ocoefbar);
    gmm_band_free(p->Q);
    gmm_band_free(p->Qbar);
    gmm_sparse_free(p->Qs);
    gmm_sparse_free(p->Qsbar);
    gmm_sparse_free(p->Ss);
    gmm_laplace_free(p->lap);
    gmm_free(p->thetabar);
    gmm_free(p->lin_idx);
    gmm_free(p->lin_R);
    gmm_free(p->wcoef);
    gmm_free(p->wrow);
    gmm_free(p->wy);
    gmm_free(p->jsamp);
    gmm_free(p->jidx);
    infer_scale_free(&p->jsc);
    gmm_free(p->cmean);
    gmm_free(p->jg);
    gmm_free(p->jprior);
    gmm_free(p->jtheta);
    gmm_free(p->jbar);
    gmm_free(p->jcbar);
    gmm_free(p->wx);
    gmm_free(p->wg);
    gmm_factor_free(p->wfac);
    gmm_free(p->wxh);
    gmm_free(p->sy);
    gmm_free(p->ssh);
    gmm_free(p->ipar);
    gmm_free(p->ix);
    gmm_free(p->iw);
    gmm_free(p->obj.name);
    gmm_free(p->obj.value);
    gmm_free(p->obj.scale);
    gmm_free(p->obj.fixed);
    gmm_free(p->names);
    gmm_free(p);
}

/* The Gaussian marginal likelihood of r = y - X beta.  Its gradient in
 * beta is X'(K + noise I)^-1 r = X'(r - E[f | r]) / noise: the residual
 * from the posterior mean at the rows, so no dense matrix is formed. */
static gmm_status exact_eval(gmm_problem *p, const double *theta, double noise, double *f,
                             double *grad)
{
    gmm_status st;
    const double *y = p->y;
    if (p->ncoef) {
        gmm_problem_offsets(p, theta, p->off);
        for (size_t r = 0; r < p->nrows; r++)
            p->ry[r] = p->y[r] - p->off[r];
        y = p->ry;
    }
    if ((st = gmm_latent_gaussian(p->lat, theta, y, noise, f, grad, grad ? grad + p->nl : NULL)) ||
        !grad || !p->ncoef)
        return st;
    if ((st = gmm_latent_gaussian_posterior(p->lat, p->rx, NULL)) ||
        (gmm_latent_obs_varies(p->lat) &&
         (st = gmm_latent_obs_values(p->lat, theta, p->coef_all))))
        return st;
    const size_t *off = gmm_latent_obs_offset(p->lat);
    for (size_t r = 0; r < p->nrows; r++) {
        if (isnan(y[r])) {
            p->offbar[r] = 0.0;
            continue;
        }
        size_t lo = gmm_obsmap_row_lo(&p->map, r), hi = gmm_obsmap_row_hi(&p->map, r);
        const double *x = p->rx + off[r];
        double fr = 0.0;
        for (size_t k = lo; k < hi; k++)
            fr += p->coef_all[k] * x[gmm_obsmap_row_pos(&p->map, k, lo)];
        p->offbar[r] = (y[r] - fr) / noise;
    }
    memset(grad + p->c0, 0, p->ncoef * sizeof *grad);
    gmm_problem_offsets_rev(p, p->offbar, grad);
    return GMM_OK;
}

static gmm_status eval(void *ctx, const double *theta, double *f, double *grad)
{
    gmm_problem *p = ctx;
    gmm_status st;
    if (p->exact) {
        double noise = theta[p->nl];
        if (!isfinite(noise) || !(noise > 0.0))
            return gmm_error_at(GMM_EDOM, p->nl, "likelihood.variance = %g must be positive "
                                                 "and finite",
                                noise);
        return exact_eval(p, theta, noise, f, grad);
    }
    if ((st = problem_laplace_forward(p, theta, f)) || !grad)
        return st;
    memset(grad, 0, p->nparam * sizeof *grad);
    if (p->ncoef)
        memset(p->oshiftbar, 0, p->nobs * sizeof *p->oshiftbar);
    int varies = gmm_latent_obs_varies(p->lat);
    if (varies)
        memset(p->ocoefbar, 0, p->orowptr[p->nobs] * sizeof *p->ocoefbar);
    if (p->sqrt_form) {
        p->sgrad = grad;
        if ((st = gmm_laplace_grad_sqrt(p->lap, NULL, grad + p->nl, varies ? p->ocoefbar : NULL,
                                        p->ncoef ? p->oshiftbar : NULL)))
            return st;
    } else if (p->sparse) {
        gmm_sparse_set_zero(p->Qsbar);
        if ((st = gmm_laplace_grad_sparse(p->lap, p->Qsbar, NULL, grad + p->nl,
                                          varies ? p->ocoefbar : NULL,
                                          p->ncoef ? p->oshiftbar : NULL)))
            return st;
        if ((st = gmm_latent_prior_rev_sparse(p->lat, p->Qsbar, isnan(p->ld) ? 0.0 : 0.5, grad)))
            return st;
    } else {
        gmm_band_set_zero(p->Qbar);
        if ((st = gmm_laplace_grad(p->lap, p->Qbar, NULL, grad + p->nl,
                                   varies ? p->ocoefbar : NULL, p->ncoef ? p->oshiftbar : NULL)))
            return st;
        /* log|Q|/2 is ours when the family gave log|Q| (laplace.h) */
        if ((st = gmm_latent_prior_rev(p->lat, p->Qbar, isnan(p->ld) ? 0.0 : 0.5, grad)))
            return st;
    }
    if (varies) {
        memset(p->coefbar_all, 0, gmm_obsmap_nnz(&p->map) * sizeof *p->coefbar_all);
        for (size_t i = 0; i < p->nobs; i++) {
            size_t lo = gmm_obsmap_row_lo(&p->map, p->orow[i]);
            memcpy(p->coefbar_all + lo, p->ocoefbar + p->orowptr[i],
                   (gmm_obsmap_row_hi(&p->map, p->orow[i]) - lo) * sizeof *p->ocoefbar);
        }
        if ((st = gmm_latent_obs_coef_rev(p->lat, theta, p->coefbar_all, grad)))
            return st;
    }
    if (p->ncoef) {
        memset(p->offbar, 0, p->nrows * sizeof *p->offbar);
        for (size_t i = 0; i < p->nobs; i++)
            p->offbar[p->orow[i]] = p->oshiftbar[i];
        gmm_problem_offsets_rev(p, p->offbar, grad);
    }
    return GMM_OK;
}

static gmm_status alloc_problem(gmm_latent *lat, const gmm_lik *lik, const double *y,
                                const double *e, const gmm_problem_design *d, int sparse,
                                gmm_problem **out);

gmm_status gmm_problem_alloc(gmm_latent *lat, const gmm_lik *lik, const double *y,
                             const double *e, int intercept, double b0, gmm_problem **out)
{
    if (!lat || !lik || !lik->type || !y || !out)
        return gmm_error(GMM_EINVAL, "gmm_problem_alloc: NULL argument");
    if (lik->type->conjugate && intercept)
        return gmm_error(GMM_EINVAL, "the %s likelihood takes no intercept (its data are "
                                     "centred instead)",
                         lik->type->name);
    if (!intercept)
        return gmm_problem_alloc_design(lat, lik, y, e, NULL, out);
    size_t nrows = gmm_latent_nrows(lat);
    double *ones = gmm_malloc(nrows ? nrows : 1, sizeof *ones);
    if (!ones)
        return gmm_error(GMM_ENOMEM, "out of memory for the model");
    for (size_t r = 0; r < nrows; r++)
        ones[r] = 1.0;
    const char *name[] = {"intercept"};
    gmm_problem_design d = {1, ones, name, &b0, 0};
    gmm_status st = gmm_problem_alloc_design(lat, lik, y, e, &d, out);
    gmm_free(ones);
    return st;
}

gmm_status gmm_problem_alloc_design(gmm_latent *lat, const gmm_lik *lik, const double *y,
                                    const double *e, const gmm_problem_design *d,
                                    gmm_problem **out)
{
    return alloc_problem(lat, lik, y, e, d, 0, out);
}

gmm_status gmm_problem_alloc_sparse(gmm_latent *lat, const gmm_lik *lik, const double *y,
                                    const double *e, const gmm_problem_design *d,
                                    gmm_problem **out)
{
    return alloc_problem(lat, lik, y, e, d, 1, out);
}

static gmm_status alloc_problem(gmm_latent *lat, const gmm_lik *lik, const double *y,
                                const double *e, const gmm_problem_design *d, int sparse,
                                gmm_problem **out)
{
    gmm_status st;
    if (!lat || !lik || !lik->type || !y || !out)
        return gmm_error(GMM_EINVAL, "gmm_problem_alloc: NULL argument");
    *out = NULL;
    int exact = lik->type->conjugate && !sparse; /* sparse: Laplace, exact for a Gaussian */
    size_t ncoef = d ? d->ncoef : 0;
    size_t nrows = gmm_latent_nrows(lat);
    if (ncoef && (!d->X || !d->name || !d->start))
        return gmm_error(GMM_EINVAL, "gmm_problem_alloc: NULL design");
    for (size_t k = 0; k < ncoef; k++)
        if (!isfinite(d->start[k]))
            return gmm_error(GMM_EINVAL, "%s start %g is not finite", d->name[k], d->start[k]);
    for (size_t i = 0; i < nrows * ncoef; i++)
        if (!isfinite(d->X[i]))
            return gmm_error_at(GMM_EINVAL, i / ncoef, "row %zu: %s = %g is not finite",
                                i / ncoef, d->name[i % ncoef], d->X[i]);
    if ((st = gmm_lik_check_data(lik, y, e, nrows)))
        return st;
    /* the band path's bands fit the latent's limit (it no longer refuses
     * at its build, so that the sparse path can take wide models) */
    if (!sparse && (st = gmm_latent_band_check(lat)))
        return st;
    gmm_problem *p = gmm_calloc(1, sizeof *p);
    if (!p)
        return gmm_error(GMM_ENOMEM, "out of memory for the model");
    gmm_laplace_params_init(&p->lpar);
    p->lat = lat;
    p->lik0 = lik;
    p->lik = *lik;
    p->nrows = nrows;
    p->n = gmm_latent_dim(lat);
    p->nl = gmm_latent_nparam(lat);
    p->np = lik->type->nparam;
    p->exact = exact;
    p->sparse = sparse;
    p->ncoef = ncoef;
    p->c0 = p->nl + p->np;
    p->nparam = p->c0 + ncoef;
    p->map = gmm_latent_obs_map(lat);
    p->ld = NAN;
    size_t nr = nrows ? nrows : 1, np = p->nparam ? p->nparam : 1;
    p->y = gmm_malloc(nr, sizeof *p->y);
    if (e)
        p->e = gmm_malloc(nr, sizeof *p->e);
    p->obj.name = gmm_calloc(np, sizeof *p->obj.name);
    p->obj.value = gmm_calloc(np, sizeof *p->obj.value);
    p->obj.scale = gmm_calloc(np, sizeof *p->obj.scale);
    p->obj.fixed = gmm_calloc(np, sizeof *p->obj.fixed);
    p->names = gmm_calloc(np, sizeof *p->names);
    p->thetabar = gmm_calloc(np, sizeof *p->thetabar);
    if (ncoef) {
        p->X = d->borrow ? d->X : (p->Xown = gmm_malloc(nr * ncoef, sizeof *p->Xown));
        p->off = gmm_malloc(nr, sizeof *p->off);
        p->offbar = gmm_malloc(nr, sizeof *p->offbar);
    }
    if (ncoef && exact) {
        p->ry = gmm_malloc(nr, sizeof *p->ry);
        p->rx = gmm_malloc(p->n, sizeof *p->rx);
        size_t nnz = gmm_obsmap_nnz(&p->map);
        p->coef_all = gmm_malloc(nnz ? nnz : 1, sizeof *p->coef_all);
    }
    if (!p->y || (e && !p->e) || !p->obj.name || !p->obj.value || !p->obj.scale ||
        !p->obj.fixed || !p->names || !p->thetabar ||
        (ncoef && (!p->X || !p->off || !p->offbar)) ||
        (ncoef && exact && (!p->ry || !p->rx || !p->coef_all))) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the model");
        goto fail;
    }
    memcpy(p->y, y, nrows * sizeof *y);
    if (e)
        memcpy(p->e, e, nrows * sizeof *e);
    for (size_t i = 0; i < p->nl; i++) {
        snprintf(p->names[i], sizeof p->names[i], "%s", gmm_latent_param_name(lat, i));
        p->obj.value[i] = gmm_latent_param_start(lat)[i];
        /* optimised on the log scale (the logit scale in (0, 1), atanh in
         * (-1, 1)); a parameter that may be 0 (a ridge) is held fixed there
         * (fit.h) */
        gmm_param_domain dom = gmm_latent_param_domain(lat, i);
        p->obj.scale[i] = dom == GMM_PARAM_UNIT     ? GMM_SCALE_LOGIT
                          : dom == GMM_PARAM_SIGNED ? GMM_SCALE_ATANH
                                                  : GMM_SCALE_LOG;
    }
    for (size_t k = 0; k < p->np; k++) {
        gmm_lik_param_name(lik, k, p->names[p->nl + k]);
        p->obj.value[p->nl + k] = lik->par[k];
        p->obj.scale[p->nl + k] = GMM_SCALE_LOG;
    }
    p->const_off = 1;
    for (size_t k = 0; k < ncoef; k++) {
        snprintf(p->names[p->c0 + k], sizeof p->names[0], "%s", d->name[k]);
        p->obj.value[p->c0 + k] = d->start[k];
    }
    if (ncoef) {
        if (p->Xown)
            memcpy(p->Xown, d->X, nrows * ncoef * sizeof *p->Xown);
        for (size_t i = 0; i < nrows * ncoef; i++)
            p->const_off = p->const_off && ncoef == 1 && p->X[i] == 1.0;
    }
    for (size_t i = 0; i < p->nparam; i++)
        p->obj.name[i] = p->names[i];
    /* constant coefficients once (exact_eval refreshes varying ones) */
    if (ncoef && exact && !gmm_latent_obs_varies(lat) &&
        (st = gmm_latent_obs_values(lat, p->obj.value, p->coef_all)))
        goto fail;
    p->obj.nparam = p->nparam;
    p->obj.eval = eval;
    p->obj.ctx = p;
    for (size_t r = 0; r < nrows; r++)
        p->nobs += !isnan(y[r]);
    if (!exact && (st = problem_laplace_alloc(p)))
        goto fail;
    if ((st = problem_info_enable(p)))
        goto fail;
    *out = p;
    return GMM_OK;
fail:
    gmm_problem_free(p);
    return st;
}

gmm_status gmm_problem_set_weights(gmm_problem *p, const double *w)
{
    if (!p || !w)
        return gmm_error(GMM_EINVAL, "gmm_problem_set_weights: NULL argument");
    for (size_t r = 0; r < p->nrows; r++)
        if (!isfinite(w[r]) || w[r] < 0.0)
            return gmm_error_at(GMM_EINVAL, r, "row %zu: weight %g is not finite and >= 0", r,
                                w[r]);
    if (!p->wt && !(p->wt = gmm_malloc(p->nrows ? p->nrows : 1, sizeof *p->wt)))
        return gmm_error(GMM_ENOMEM, "out of memory for the weights");
    memcpy(p->wt, w, p->nrows * sizeof *w);
    if (p->exact) { /* the Laplace path from now on (its workspace reads wt) */
        p->exact = 0;
        gmm_status st = problem_laplace_alloc(p);
        return st ? st : problem_info_enable(p);
    }
    if (!p->owt && !(p->owt = gmm_malloc(p->nobs ? p->nobs : 1, sizeof *p->owt)))
        return gmm_error(GMM_ENOMEM, "out of memory for the weights");
    for (size_t i = 0; i < p->nobs; i++)
        p->owt[i] = p->wt[p->orow[i]];
    gmm_laplace_set_weights(p->lap, p->owt);
    return GMM_OK;
}

gmm_objective *gmm_problem_objective(gmm_problem *p) { return &p->obj; }
int gmm_problem_exact(const gmm_problem *p) { return p->exact; }
int gmm_problem_sparse(const gmm_problem *p) { return p->sparse; }
const gmm_latent *gmm_problem_latent(const gmm_problem *p) { return p->lat; }
gmm_latent *gmm_problem_latent_eval(gmm_problem *p) { return p->lat; }
const gmm_lik *gmm_problem_lik(const gmm_problem *p) { return p->lik0; }

const double *gmm_problem_y(const gmm_problem *p) { return p->y; }
const double *gmm_problem_exposure(const gmm_problem *p) { return p->e; }
const double *gmm_problem_weights(const gmm_problem *p) { return p->wt; }
size_t gmm_problem_nobs(const gmm_problem *p) { return p->nobs; }
int gmm_problem_sqrt_declined(const gmm_problem *p)
{
    return !p->exact && !p->sqrt_form && p->sqrt_declined;
}

const char *gmm_problem_factorisation(const gmm_problem *p, double *bound)
{
    if (p->exact)
        return gmm_latent_factorisation(p->lat, bound);
    if (bound)
        *bound = p->sparse ? 0.0 : p->sbound;
    if (p->sparse)
        return "sparse";
    return p->sqrt_form ? "square-root" : "cholesky";
}

size_t gmm_problem_iterations(const gmm_problem *p)
{
    return p->exact ? 0 : gmm_laplace_iterations(p->lap);
}

gmm_status gmm_problem_posterior(gmm_problem *p, const double *theta, double *mean,
                                 gmm_band *cov)
{
    gmm_status st;
    double f;
    if (!p || !theta)
        return gmm_error(GMM_EINVAL, "gmm_problem_posterior: NULL argument");
    if (p->sparse && cov)
        return gmm_error(GMM_EINVAL, "the sparse factorisation keeps no covariance band "
                                     "(its moments: gmm_problem_predict_forms)");
    if ((st = eval(p, theta, &f, NULL)))
        return st;
    if (p->sparse)
        return gmm_laplace_posterior_sparse(p->lap, mean, NULL);
    if (p->exact)
        return gmm_latent_gaussian_posterior(p->lat, mean, cov);
    if (p->sqrt_form && (st = gmm_latent_gaussian_posterior(p->lat, NULL, cov)))
        return st;
    return gmm_laplace_posterior(p->lap, mean, p->sqrt_form ? NULL : cov);
}
