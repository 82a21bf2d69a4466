/* model_fixed.c -- predictions from the fixed effects alone (model.h): the
 * linear predictor X_r beta of a row with every latent term dropped, lme4's
 * predict(re.form = NA).
 *
 * WHICH TERMS GO.  lme4 drops every random effect; here every f() term of
 * the latent goes with them, structured or not (iid, rw1, rw2, besag, bym2,
 * graph precisions, kernels): what is left is the design's part, the same
 * for every level, node and input.  A Gaussian model without coefficients
 * keeps its centre (the data's mean, a constant of the model).
 *
 * ITS UNCERTAINTY.  beta is a maximum-likelihood estimate, not a latent:
 * the variance of X_r beta is x_r' C x_r with C the coefficients' block of
 * the inverse observed information (gmm_fit_lincomb_var, the covariance
 * whose diagonal is fit's std_errors), at the model's values.  It is the
 * only variance these predictions carry. */
#include "model_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/fit.h"
#include "gmm/problem.h"

/* The design row of prediction r: t's row, or at the model's sites a data
 * row (sites that are rows) or, at new inputs or other sites, the constant
 * row of a design that is the same at every row. */
static const double *design_row(const gmm_mdl *m, const gmm_mdl_test *t, int at_rows, size_t r)
{
    if (t)
        return t->X + r * m->ncoef;
    return m->X + (at_rows ? r : 0) * m->ncoef;
}

gmm_status gmm_mdl_predict_fixed(gmm_mdl *m, const gmm_mdl_test *t, const double *xq, size_t nq,
                                 double *mean, double *var)
{
    size_t nc = m->ncoef, np = m->obj->nparam, n = t ? t->n : nq;
    int at_rows = !t && !xq && (m->stack || gmm_mdl_impl_rows(m));
    if (!t && at_rows && nq != m->nrow)
        return gmm_error(GMM_EDIM, "predict: %zu outputs for %zu data rows", nq, m->nrow);
    if (!t && !at_rows && nc && !gmm_problem_offset_constant(m->prob, m->obj->value, NULL))
        return gmm_error(GMM_EINVAL, "the fixed effects differ from row to row: predictions "
                                     "without the latent terms are at rows with the model's "
                                     "covariates");
    if (nc && !t && m->nrow == 0)
        return gmm_error(GMM_EINVAL, "the model has no data rows: no design to predict from");
    double center = m->has_center > 0 ? m->center : 0.0;
    const double *beta = m->obj->value + np - nc;
    double *A = nc && n ? gmm_calloc(n * np, sizeof *A) : NULL;
    if (nc && n && !A)
        return gmm_error(GMM_ENOMEM, "out of memory for %zu design rows", n);
    for (size_t r = 0; r < n; r++) {
        double mu = center;
        if (nc) {
            const double *x = design_row(m, t, at_rows, r);
            for (size_t k = 0; k < nc; k++)
                mu += x[k] * beta[k];
            memcpy(A + r * np + np - nc, x, nc * sizeof *x);
        }
        mean[r] = mu;
        var[r] = 0.0;
    }
    gmm_status s = A ? gmm_fit_lincomb_var(m->obj, A, n, var) : GMM_OK;
    if (s != GMM_OK) {
        char why[GMM_ERROR_MAX];
        snprintf(why, sizeof why, "%s", gmm_error_message());
        s = gmm_error(s, "the coefficients' variance: %s", why);
    }
    gmm_free(A);
    return s;
}

gmm_status gmm_mdl_predict_fixed_summary(gmm_mdl *m, const gmm_mdl_test *t, const double *xq,
                                         size_t nq, double level, int observed,
                                         gmm_summary_pred *pr)
{
    if (observed && !gmm_mdl_observed_normal(m))
        return gmm_error(GMM_EINVAL, "predict: new observations of the %s likelihood have no "
                                     "normal interval",
                         m->lik.type->name);
    size_t n = t ? t->n : nq, nn = n ? n : 1;
    double *mean = gmm_malloc(nn, sizeof *mean), *var = gmm_malloc(nn, sizeof *var);
    gmm_status s = mean && var ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK)
        s = gmm_mdl_predict_fixed(m, t, xq, nq, mean, var);
    if (s == GMM_OK) {
        const gmm_lik *lik = gmm_mdl_likelihood(m);
        double noise = observed ? gmm_mdl_noise(m) : 0.0;
        for (size_t i = 0; i < n && s == GMM_OK; i++)
            s = gmm_summary_pred_normal(lik, mean[i], var[i] + noise, level, &pr[i]);
    }
    gmm_free(mean);
    gmm_free(var);
    return s;
}
