/* vi_predict.c -- predictions from q (vi.h). */
#include "gmm/vi.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "vi_impl.h"

gmm_status gmm_vi_predict_rows(gmm_vi *v, double *mean, double *var)
{
    gmm_status st;
    if (!v || !mean || !var)
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_rows: NULL argument");
    if ((st = gmm_vi_posterior(v, NULL, v->S)) ||
        (st = gmm_latent_predict_rows(v->lat, v->theta, v->lambda, v->S, mean, var)))
        return st;
    if (v->ncoef) {
        gmm_problem_offsets(v->prob, v->theta, v->offs);
        for (size_t r = 0; r < v->nrows; r++)
            mean[r] += v->offs[r];
    }
    return GMM_OK;
}

gmm_status gmm_vi_predict_latent(gmm_vi *v, const double *xq, size_t nq, double *mean,
                                 double *var)
{
    gmm_status st;
    if (!v || !mean || !var)
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_latent: NULL argument");
    int inputs = gmm_latent_has_inputs(v->lat);
    if (inputs && nq && !xq)
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_latent: NULL inputs");
    if (!inputs && gmm_latent_node_index(v->lat, 0) == GMM_NO_INDEX)
        return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(v->lat));
    if (!inputs) {
        if ((st = gmm_vi_posterior(v, NULL, v->S)))
            return st;
        for (size_t j = 0; j < v->n; j++) {
            size_t r = gmm_latent_node_index(v->lat, j);
            mean[j] = v->lambda[r];
            var[j] = gmm_band_get(v->S, r, r);
        }
        return GMM_OK;
    }
    gmm_band *cov = gmm_band_alloc(v->n, smax(gmm_latent_cov_bandwidth(v->lat), v->b), 0,
                                   GMM_BAND_SYMMETRIC);
    if (!cov)
        return gmm_error(GMM_ENOMEM, "vi: out of memory for the covariance band");
    st = gmm_vi_posterior(v, NULL, cov);
    if (st == GMM_OK)
        st = gmm_latent_predict_at(v->lat, v->theta, v->lambda, cov, xq, nq, mean, var);
    gmm_band_free(cov);
    return st;
}

gmm_status gmm_vi_predict_nodes(gmm_vi *v, double *mean, double *var)
{
    if (v && gmm_latent_has_inputs(v->lat))
        return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(v->lat));
    gmm_status st = gmm_vi_predict_latent(v, NULL, 0, mean, var);
    return st == GMM_OK ? gmm_problem_add_offset(v->prob, v->theta, v->n, mean) : st;
}

gmm_status gmm_vi_predict_at(gmm_vi *v, const double *xq, size_t nq, double *mean, double *var)
{
    if (!v || (nq && (!xq || !mean || !var)))
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_at: NULL argument");
    if (!gmm_latent_has_inputs(v->lat))
        return gmm_error(GMM_EINVAL, "a %s model predicts at its nodes, not at new inputs",
                         gmm_latent_family(v->lat));
    gmm_status st = gmm_vi_predict_latent(v, xq, nq, mean, var);
    return st == GMM_OK ? gmm_problem_add_offset(v->prob, v->theta, nq, mean) : st;
}

/* v <- Sigma v = L^-T L^-1 v with q's factor (unpacked in v->L); with
 * constraints Sigma_c v (constr.h, factorised by gmm_vi_posterior). */
static gmm_status q_solve(void *ctx, double *x)
{
    gmm_vi *v = ctx;
    if (v->con)
        return gmm_constr_solve(v->con, v->L, x);
    gmm_status st = gmm_band_tri_solve_vec(v->L, GMM_NOTRANS, x);
    return st ? st : gmm_band_tri_solve_vec(v->L, GMM_TRANS, x);
}

gmm_status gmm_vi_predict_forms(gmm_vi *v, size_t nq, const size_t *ptr, const size_t *idx,
                                const double *w, double *mean, double *var)
{
    gmm_status st;
    if (!v || !ptr || !mean || !var)
        return gmm_error(GMM_EINVAL, "gmm_vi_predict_forms: NULL argument");
    double *work = gmm_malloc(v->n ? v->n : 1, sizeof *work);
    if (!work)
        return gmm_error(GMM_ENOMEM, "out of memory");
    if (!(st = gmm_vi_posterior(v, NULL, v->S)) && !(st = vi_unpack(v, v->lambda)))
        st = gmm_latent_forms_moments(v->n, v->lambda, v->S, q_solve, v, nq, ptr, idx, w, work,
                                      mean, var);
    gmm_free(work);
    return st;
}
