/* marglik_stub.c -- TEMPORARY test scaffolding: a slow but simple
 * implementation of include/gmm/marglik.h (GSL band Cholesky; the covariance
 * band by one solve per column, O(n^2 l)), so the model tests can run before
 * the real one lands from branch infer.  Test-only: it is linked into the test
 * runner, never into libgmm.a.  Delete this file when merging main brings
 * src/infer/marglik.c (the duplicate symbols would not link). */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/marglik.h"

struct gmm_marglik_work {
    size_t n, kl;
    gsl_matrix *LLT; /* n x (kl + 1), GSL symmetric band = Cholesky of the posterior */
    gsl_matrix *LQ;  /* Cholesky of the prior, when its log-determinant is not supplied */
    gsl_vector *mu, *col;
    gmm_obs obs;
    double noise;
    int own_logdet, ok;
};

gmm_marglik_work *gmm_marglik_work_alloc(size_t n, size_t kl)
{
    gmm_marglik_work *w = calloc(1, sizeof *w);
    w->n = n;
    w->kl = kl;
    w->LLT = gsl_matrix_alloc(n, kl + 1);
    w->LQ = gsl_matrix_alloc(n, kl + 1);
    w->mu = gsl_vector_alloc(n);
    w->col = gsl_vector_alloc(n);
    return w;
}

void gmm_marglik_work_free(gmm_marglik_work *w)
{
    if (!w)
        return;
    gsl_matrix_free(w->LLT);
    gsl_matrix_free(w->LQ);
    gsl_vector_free(w->mu);
    gsl_vector_free(w->col);
    free(w);
}

static void band_add(gsl_matrix *B, size_t i, size_t j, double v)
{
    if (i < j) {
        size_t t = i;
        i = j;
        j = t;
    }
    *gsl_matrix_ptr(B, j, i - j) += v;
}

static double band_logdet(const gsl_matrix *L)
{
    double s = 0.0;
    for (size_t i = 0; i < L->size1; i++)
        s += log(gsl_matrix_get(L, i, 0));
    return 2.0 * s;
}

gmm_status gmm_marglik_eval(const gmm_band *Q, const gmm_obs *obs, double noise,
                            const double *prior_logdet, gmm_marglik_work *w, double *loglik)
{
    gsl_set_error_handler_off();
    w->ok = 0;
    if (Q->n != w->n || Q->kl != w->kl || obs->n != w->n)
        return gmm_error(GMM_EDIM, "marglik stub: shape mismatch");
    if (!(noise > 0.0))
        return gmm_error(GMM_EINVAL, "noise must be positive");
    size_t n = w->n, kl = w->kl;
    gsl_matrix_set_zero(w->LLT);
    for (size_t j = 0; j < n; j++)
        for (size_t r = 0; r <= kl && j + r < n; r++)
            gsl_matrix_set(w->LLT, j, r, gmm_band_get(Q, j + r, j));
    w->own_logdet = prior_logdet == NULL;
    double ldq = 0.0;
    if (w->own_logdet) {
        gsl_matrix_memcpy(w->LQ, w->LLT);
        if (gsl_linalg_cholesky_band_decomp(w->LQ))
            return gmm_error(GMM_ENOTPD, "marglik stub: prior not positive definite");
        ldq = band_logdet(w->LQ);
    } else {
        ldq = *prior_logdet;
    }
    gsl_vector_set_zero(w->mu);
    double yy = 0.0;
    for (size_t o = 0; o < obs->nobs; o++) {
        const double *c = obs->coef + o * obs->coef_stride;
        size_t off = obs->offset[o];
        for (size_t a = 0; a < obs->width; a++) {
            w->mu->data[off + a] += c[a] * obs->y[o] / noise;
            for (size_t b = 0; b <= a; b++)
                band_add(w->LLT, off + a, off + b, c[a] * c[b] / noise);
        }
        yy += obs->y[o] * obs->y[o];
    }
    if (gsl_linalg_cholesky_band_decomp(w->LLT))
        return gmm_error(GMM_ENOTPD, "marglik stub: posterior not positive definite");
    gsl_vector_memcpy(w->col, w->mu); /* b = E'y / noise */
    gsl_linalg_cholesky_band_svx(w->LLT, w->mu);
    double bmu = 0.0;
    for (size_t i = 0; i < n; i++)
        bmu += w->col->data[i] * w->mu->data[i];
    double m = (double)obs->nobs;
    *loglik = -0.5 * m * log(2.0 * M_PI) - 0.5 * band_logdet(w->LLT) + 0.5 * ldq
              - 0.5 * m * log(noise) - yy / (2.0 * noise) + 0.5 * bmu;
    w->obs = *obs;
    w->noise = noise;
    w->ok = 1;
    return GMM_OK;
}

/* S = band of inv(L L^T) (S->kl wide), by one solve per column. */
static void cov_band(const gsl_matrix *L, gsl_vector *col, gmm_band *S)
{
    size_t n = L->size1;
    for (size_t j = 0; j < n; j++) {
        gsl_vector_set_basis(col, j);
        gsl_linalg_cholesky_band_svx(L, col);
        for (size_t i = j; i <= j + S->kl && i < n; i++)
            *gmm_band_ptr(S, i, j) = col->data[i];
    }
}

gmm_status gmm_marglik_grad(gmm_marglik_work *w, gmm_band *Qbar, double *noisebar)
{
    if (!w->ok)
        return gmm_error(GMM_EINVAL, "marglik stub: no evaluation");
    size_t n = w->n;
    gmm_band *S = gmm_band_alloc(n, w->kl, 0, GMM_BAND_SYMMETRIC);
    cov_band(w->LLT, w->col, S);
    const double *mu = w->mu->data;
    if (Qbar)
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i <= j + Qbar->kl && i < n; i++) {
                double g = -0.5 * (gmm_band_get(S, i, j) + mu[i] * mu[j]);
                *gmm_band_ptr(Qbar, i, j) += i == j ? g : 2.0 * g;
            }
    if (Qbar && w->own_logdet) {
        gmm_band *R = gmm_band_alloc(n, w->kl, 0, GMM_BAND_SYMMETRIC);
        cov_band(w->LQ, w->col, R);
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i <= j + Qbar->kl && i < n; i++)
                *gmm_band_ptr(Qbar, i, j) += (i == j ? 0.5 : 1.0) * gmm_band_get(R, i, j);
        gmm_band_free(R);
    }
    if (noisebar) {
        const gmm_obs *o = &w->obs;
        double tr = 0.0, rr = 0.0;
        for (size_t k = 0; k < o->nobs; k++) {
            const double *c = o->coef + k * o->coef_stride;
            size_t off = o->offset[k];
            double f = 0.0;
            for (size_t a = 0; a < o->width; a++) {
                f += c[a] * mu[off + a];
                for (size_t b = 0; b < o->width; b++)
                    tr += c[a] * c[b] * gmm_band_get(S, off + a, off + b);
            }
            rr += (o->y[k] - f) * (o->y[k] - f);
        }
        double nz = w->noise;
        *noisebar += (tr + rr) / (2.0 * nz * nz) - (double)o->nobs / (2.0 * nz);
    }
    gmm_band_free(S);
    return GMM_OK;
}

gmm_status gmm_marglik_posterior(gmm_marglik_work *w, double *mean, gmm_band *cov)
{
    if (!w->ok)
        return gmm_error(GMM_EINVAL, "marglik stub: no evaluation");
    if (mean)
        memcpy(mean, w->mu->data, w->n * sizeof *mean);
    if (cov)
        cov_band(w->LLT, w->col, cov);
    return GMM_OK;
}
