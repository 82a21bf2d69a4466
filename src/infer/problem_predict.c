/* problem_predict.c -- predictions from the posterior at theta or at
 * draws of theta (problem.h). */
#include "gmm/problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/laplace.h"
#include "infer_impl.h"
#include "gmm/rng.h"
#include "gmm/summary.h"
#include "problem_impl.h"

/* The posterior mean and covariance band at theta, allocated. */
static gmm_status posterior_alloc(gmm_problem *p, const double *theta, double **mean,
                                  gmm_band **cov)
{
    *mean = gmm_malloc(p->n, sizeof **mean);
    *cov = gmm_band_alloc(p->n, gmm_latent_cov_bandwidth(p->lat), 0, GMM_BAND_SYMMETRIC);
    if (!*mean || !*cov)
        return gmm_error(GMM_ENOMEM, "out of memory for the posterior (%zu latents)", p->n);
    return gmm_problem_posterior(p, theta, *mean, *cov);
}

gmm_status gmm_problem_add_offset(const gmm_problem *p, const double *theta, size_t m,
                                  double *mean)
{
    double b;
    if (!gmm_problem_offset_constant(p, theta, &b))
        return gmm_error(GMM_EINVAL, "the model has covariates: predictions need their values, "
                                     "which nodes and new inputs do not have (predict at the "
                                     "data rows)");
    for (size_t i = 0; i < m; i++)
        mean[i] += b;
    return GMM_OK;
}

gmm_status gmm_problem_predict_rows(gmm_problem *p, const double *theta, double *mean,
                                    double *var)
{
    if (p->sparse)
        return problem_sparse_rows(p, theta, mean, var);
    double *mu = NULL;
    gmm_band *cov = NULL;
    gmm_status st = posterior_alloc(p, theta, &mu, &cov);
    if (st == GMM_OK &&
        (st = gmm_latent_predict_rows(p->lat, theta, mu, cov, mean, var)) == GMM_OK && p->ncoef) {
        gmm_problem_offsets(p, theta, p->off);
        for (size_t r = 0; r < p->nrows; r++)
            mean[r] += p->off[r];
    }
    gmm_free(mu);
    gmm_band_free(cov);
    return st;
}

gmm_status gmm_problem_predict_latent(gmm_problem *p, const double *theta, const double *xq,
                                      size_t nq, double *mean, double *var)
{
    int inputs = gmm_latent_has_inputs(p->lat);
    if (inputs && nq && !xq)
        return gmm_error(GMM_EINVAL, "a %s model predicts at inputs, not at nodes",
                         gmm_latent_family(p->lat));
    if (!inputs && gmm_latent_node_index(p->lat, 0) == GMM_NO_INDEX)
        return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(p->lat));
    if (p->sparse && !inputs)
        return problem_sparse_nodes(p, theta, mean, var);
    if (p->sparse)
        return gmm_error(GMM_EINVAL, "the sparse factorisation keeps no covariance band to "
                                     "predict a %s model at new inputs",
                         gmm_latent_family(p->lat));
    double *mu = NULL;
    gmm_band *cov = NULL;
    gmm_status st = posterior_alloc(p, theta, &mu, &cov);
    if (st == GMM_OK && inputs)
        st = gmm_latent_predict_at(p->lat, theta, mu, cov, xq, nq, mean, var);
    for (size_t v = 0; st == GMM_OK && !inputs && v < p->n; v++) {
        size_t r = gmm_latent_node_index(p->lat, v);
        mean[v] = mu[r];
        var[v] = gmm_band_get(cov, r, r);
    }
    gmm_free(mu);
    gmm_band_free(cov);
    return st;
}

/* v <- Sigma v with the posterior of the last gmm_problem_posterior. */
static gmm_status posterior_solve(void *ctx, double *v)
{
    gmm_problem *p = ctx;
    /* the square-root form's Laplace posterior is the latent's last fold
     * (gmm_problem_posterior) */
    return p->exact || p->sqrt_form ? gmm_latent_gaussian_posterior_solve(p->lat, v)
                                    : gmm_laplace_posterior_solve(p->lap, v);
}

gmm_status gmm_problem_predict_forms(gmm_problem *p, const double *theta, size_t nq,
                                     const size_t *ptr, const size_t *idx, const double *w,
                                     double *mean, double *var)
{
    if (p->sparse)
        return problem_sparse_forms(p, theta, nq, ptr, idx, w, mean, var);
    double *mu = NULL, *work = NULL;
    gmm_band *cov = NULL;
    gmm_status st = posterior_alloc(p, theta, &mu, &cov);
    if (st == GMM_OK && !(work = gmm_malloc(p->n ? p->n : 1, sizeof *work)))
        st = gmm_error(GMM_ENOMEM, "out of memory");
    if (st == GMM_OK)
        st = gmm_latent_forms_moments(p->n, mu, cov, posterior_solve, p, nq, ptr, idx, w, work,
                                      mean, var);
    gmm_free(mu);
    gmm_free(work);
    gmm_band_free(cov);
    return st;
}

gmm_status gmm_problem_predict_nodes(gmm_problem *p, const double *theta, double *mean,
                                     double *var)
{
    if (gmm_latent_has_inputs(p->lat))
        return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(p->lat));
    gmm_status st = gmm_problem_predict_latent(p, theta, NULL, 0, mean, var);
    return st == GMM_OK ? gmm_problem_add_offset(p, theta, p->n, mean) : st;
}

gmm_status gmm_problem_predict_at(gmm_problem *p, const double *theta, const double *xq,
                                  size_t nq, double *mean, double *var)
{
    if (!gmm_latent_has_inputs(p->lat))
        return gmm_error(GMM_EINVAL, "a %s model predicts at its nodes, not at new inputs",
                         gmm_latent_family(p->lat));
    gmm_status st = gmm_problem_predict_latent(p, theta, xq, nq, mean, var);
    return st == GMM_OK ? gmm_problem_add_offset(p, theta, nq, mean) : st;
}

gmm_status gmm_problem_predict_at_draws(gmm_problem *p, const double *thetas,
                                        size_t theta_stride, const double *xs, size_t ndraw,
                                        const double *xq, size_t nq, uint64_t seed,
                                        double level, gmm_summary_pred *out)
{
    gmm_status st = GMM_OK;
    if (!p || !thetas || !xs || (nq && (!xq || !out)))
        return gmm_error(GMM_EINVAL, "gmm_problem_predict_at_draws: NULL argument");
    if (!(level > 0.0 && level < 1.0))
        return gmm_error(GMM_EINVAL, "interval level %g is not in (0, 1)", level);
    size_t nqq = nq ? nq : 1, nd = ndraw ? ndraw : 1;
    double *fs = gmm_malloc(nqq * nd, sizeof *fs), *m = gmm_malloc(nqq * nd, sizeof *m);
    double *v = gmm_malloc(nqq * nd, sizeof *v);
    if (!fs || !m || !v) {
        st = gmm_error(GMM_ENOMEM, "out of memory for %zu draws at %zu inputs", ndraw, nq);
        goto done;
    }
    if ((st = gmm_problem_predict_at_draws_normal(p, thetas, theta_stride, xs, ndraw, xq, nq, m,
                                                  v)) != GMM_OK)
        goto done;
    gmm_rng r;
    gmm_rng_seed(&r, seed, 0);
    for (size_t s = 0; s < ndraw; s++)
        for (size_t q = 0; q < nq; q++) {
            double vq = v[s * nq + q];
            fs[q * ndraw + s] = m[s * nq + q] + sqrt(vq > 0.0 ? vq : 0.0) * gmm_rng_normal(&r);
        }
    for (size_t q = 0; q < nq && st == GMM_OK; q++)
        st = gmm_summary_pred_draws(p->lik0, fs + q * ndraw, ndraw, level, &out[q]);
done:
    gmm_free(fs);
    gmm_free(m);
    gmm_free(v);
    return st;
}

gmm_status gmm_problem_latent_at_draws_normal(gmm_problem *p, const double *thetas,
                                              size_t theta_stride, const double *xs,
                                              size_t ndraw, const double *xq, size_t nq,
                                              double *mean, double *var)
{
    gmm_status st = GMM_OK;
    if (!p || !thetas || !xs || (nq && (!xq || !mean || !var)))
        return gmm_error(GMM_EINVAL, "gmm_problem_predict_at_draws_normal: NULL argument");
    if (!gmm_latent_has_inputs(p->lat))
        return gmm_error(GMM_EINVAL, "a %s model has no inputs to predict at",
                         gmm_latent_family(p->lat));
    if (ndraw == 0)
        return gmm_error(GMM_EINVAL, "no draws to predict from");
    /* a draw is a point mass: its covariance is zero */
    gmm_band *zero = gmm_band_alloc(p->n, gmm_latent_cov_bandwidth(p->lat), 0,
                                    GMM_BAND_SYMMETRIC);
    if (!zero)
        return gmm_error(GMM_ENOMEM, "out of memory for a band of %zu rows", p->n);
    for (size_t s = 0; s < ndraw && st == GMM_OK; s++)
        st = gmm_latent_predict_at(p->lat, thetas + s * theta_stride, xs + s * p->n, zero, xq,
                                   nq, mean + s * nq, var + s * nq);
    gmm_band_free(zero);
    return st;
}

gmm_status gmm_problem_predict_at_draws_normal(gmm_problem *p, const double *thetas,
                                               size_t theta_stride, const double *xs,
                                               size_t ndraw, const double *xq, size_t nq,
                                               double *mean, double *var)
{
    gmm_status st = gmm_problem_latent_at_draws_normal(p, thetas, theta_stride, xs, ndraw, xq,
                                                       nq, mean, var);
    for (size_t s = 0; st == GMM_OK && s < ndraw; s++)
        st = gmm_problem_add_offset(p, thetas + s * theta_stride, nq, mean + s * nq);
    return st;
}
