/* ssm_predict.c -- posterior of f at any input from the posterior of the
 * data states (see PREDICTION FROM THE DATA STATES). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/marglik.h"
#include "gmm/ssm.h"
#include "../model_dense.h"

#include "ssm_impl.h"

typedef struct {
    double *A1, *Q1, *A2, *Q2, *S, *T; /* d x d */
    double *h, *v, *w, *u, *g;         /* d, d, d, d, 2d */
} pred_work;

#define PRED_WORK_SIZE(d) (6 * (d) * (d) + 6 * (d))

/* Carve p out of buf (PRED_WORK_SIZE(d) doubles). */
static void pred_work_init(pred_work *p, double *buf, size_t d)
{
    double **mat[] = {&p->A1, &p->Q1, &p->A2, &p->Q2, &p->S, &p->T};
    double **vec[] = {&p->h, &p->v, &p->w, &p->u};
    for (size_t i = 0; i < sizeof mat / sizeof mat[0]; i++, buf += d * d)
        *mat[i] = buf;
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++, buf += d)
        *vec[i] = buf;
    p->g = buf;
}

/* Number of states with t_k <= t (the first state after t). */
static size_t states_upto(const gmm_ssm *m, double t)
{
    size_t lo = 0, hi = m->K;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->t[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A query within merge_tol of a state (on either side) is predicted at that
 * state, as an input there would have been merged into it. */
static double snap(const gmm_ssm *m, double xq)
{
    double tol = m->par.merge_tol;
    if (tol <= 0.0)
        return xq;
    size_t lo = states_upto(m, xq);
    if (lo > 0 && xq - m->t[lo - 1] <= tol)
        return m->t[lo - 1];
    if (lo < m->K && m->t[lo] - xq <= tol)
        return m->t[lo];
    return xq;
}

/* y = M x (trans 0) or M' x (trans 1), d x d row-major. */
static void mat_vec(size_t d, int trans, const double *M, const double *x, double *y)
{
    for (size_t i = 0; i < d; i++) {
        double s = 0.0;
        for (size_t j = 0; j < d; j++)
            s += (trans ? M[j * d + i] : M[i * d + j]) * x[j];
        y[i] = s;
    }
}

static double quad_form(size_t d, const double *M, const double *x)
{
    double s = 0.0;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            s += x[i] * M[i * d + j] * x[j];
    return s;
}

/* g' Sigma[b .. b+w) g and g' mu[b .. b+w) from the posterior band; g (w =
 * d or 2d) is in the kernel's order state by state, the band in its own
 * (BLOCKS): band position i of a state pairs with g's variable perm[i]. */
static void band_moments(const gmm_ssm *a, const gmm_band *cov, const double *mu, size_t b,
                         size_t w, const double *g, double *mean, double *var)
{
    size_t d = a->d;
    double mq = 0.0, vq = 0.0;
    for (size_t i = 0; i < w; i++) {
        double gi = g[i / d * d + a->perm[i % d]];
        if (gi == 0.0)
            continue;
        mq += gi * mu[b + i];
        double s = 0.0;
        for (size_t j = 0; j < w; j++)
            s += gmm_band_get(cov, b + i, b + j) * g[j / d * d + a->perm[j % d]];
        vq += gi * s;
    }
    *mean = mq;
    *var = vq;
}

/* x = (L L')^-1 x in place, L lower (as left by md_chol). */
static void chol_solve_vec(size_t d, const double *L, double *x)
{
    for (size_t i = 0; i < d; i++) {
        double s = x[i];
        for (size_t j = 0; j < i; j++)
            s -= L[i * d + j] * x[j];
        x[i] = s / L[i * d + i];
    }
    for (size_t i = d; i-- > 0;) {
        double s = x[i];
        for (size_t j = i + 1; j < d; j++)
            s -= L[j * d + i] * x[j];
        x[i] = s / L[i * d + i];
    }
}

/* Posterior mean and variance of f(t) in the evaluated model a (mu, cov its
 * data-state posterior); see PREDICTION FROM THE DATA STATES. */
static gmm_status predict_one(gmm_ssm *a, const double *mu, const gmm_band *cov, double t,
                              pred_work *p, double *mean, double *var)
{
    gmm_status st;
    size_t d = a->d, dd = d * d, K = a->K, lo = states_upto(a, t);
    double ve = 0.0;
    if ((st = gmm_kernel_obs(a->k, a->kw, t - a->t[0], p->h)))
        return st;
    if (lo > 0 && a->t[lo - 1] == t) { /* at a state */
        band_moments(a, cov, mu, (lo - 1) * d, d, p->h, mean, var);
        return GMM_OK;
    }
    if (lo == K) { /* after the last state */
        if ((st = gmm_kernel_disc(a->k, a->kw, t - a->t[K - 1], p->A1, p->Q1)))
            return st;
        mat_vec(d, 1, p->A1, p->h, p->g);
        ve = quad_form(d, p->Q1, p->h);
        band_moments(a, cov, mu, (K - 1) * d, d, p->g, mean, var);
    } else if (lo == 0) { /* before the first state */
        if ((st = gmm_kernel_disc(a->k, a->kw, a->t[0] - t, p->A1, p->Q1)))
            return st;
        mat_vec(d, 0, a->P, p->h, p->v);
        mat_vec(d, 0, p->A1, p->v, p->u);
        mat_vec(d, 0, a->W0, p->u, p->w);
        mat_vec(d, 1, p->A1, p->w, p->u);
        for (size_t i = 0; i < d; i++)
            p->u[i] = p->h[i] - p->u[i];
        ve = quad_form(d, a->P, p->u) + quad_form(d, p->Q1, p->w);
        band_moments(a, cov, mu, 0, d, p->w, mean, var);
    } else { /* between states lo - 1 and lo */
        size_t k = lo - 1;
        if ((st = gmm_kernel_disc(a->k, a->kw, t - a->t[k], p->A1, p->Q1))
            || (st = gmm_kernel_disc(a->k, a->kw, a->t[k + 1] - t, p->A2, p->Q2)))
            return st;
        md_gemm(d, 0, 0, 1.0, p->A2, p->Q1, 0.0, p->T);
        md_gemm(d, 0, 1, 1.0, p->T, p->A2, 0.0, p->S);
        md_axpy(dd, 1.0, p->Q2, p->S);
        md_symmetrise(d, p->S);
        if (md_chol(d, p->S))
            return gmm_error(GMM_ENOTPD,
                             "transition noise Q(dt = %g) between inputs x = %.15g and %.15g is "
                             "not positive definite at these parameters",
                             a->t[k + 1] - a->t[k], a->t[k], a->t[k + 1]);
        mat_vec(d, 0, p->Q1, p->h, p->v);
        mat_vec(d, 0, p->A2, p->v, p->w);
        chol_solve_vec(d, p->S, p->w);
        mat_vec(d, 1, p->A2, p->w, p->u);
        for (size_t i = 0; i < d; i++)
            p->u[i] = p->h[i] - p->u[i];
        mat_vec(d, 1, p->A1, p->u, p->g);
        memcpy(p->g + d, p->w, d * sizeof *p->g);
        ve = quad_form(d, p->Q1, p->u) + quad_form(d, p->Q2, p->w);
        band_moments(a, cov, mu, k * d, 2 * d, p->g, mean, var);
    }
    *var += ve;
    return GMM_OK;
}

gmm_status gmm_ssm_predict_post(gmm_ssm *m, const double *theta, const double *mu,
                                const gmm_band *cov, const double *xq, size_t nq, double *mean,
                                double *var)
{
    gmm_status st = GMM_OK;
    double *buf = NULL;
    pred_work p;
    if (!m || !theta || !mu || !cov || (nq && (!xq || !mean || !var)))
        return gmm_error(GMM_EINVAL, "gmm_ssm_predict_post: NULL argument");
    /* the blocks (k, k) and (k+1, k): bandwidth 2d - 1, or all of a single
     * state's d x d block (N = d; a band is never wider than N - 1) */
    size_t need = m->K > 1 ? 2 * m->d - 1 : m->d - 1;
    if (cov->n != m->N || cov->kl < need || cov->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gmm_ssm_predict_post: cov must be SYMMETRIC %zu x %zu with "
                                   "bandwidth >= %zu",
                         m->N, m->N, need);
    for (size_t q = 0; q < nq; q++)
        if (!isfinite(xq[q]))
            return gmm_error_at(GMM_EINVAL, q, "query x[%zu] = %g is not finite", q, xq[q]);
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = ssm_pinf(m, theta)))
        return st;
    buf = gmm_malloc(PRED_WORK_SIZE(m->d), sizeof *buf);
    if (!buf)
        return gmm_error(GMM_ENOMEM, "out of memory for prediction");
    pred_work_init(&p, buf, m->d);
    for (size_t q = 0; q < nq; q++) {
        if ((st = predict_one(m, mu, cov, snap(m, xq[q]), &p, mean + q, var + q)))
            break;
        if (m->progress && (q + 1) % 262144 == 0 && m->progress(m->progress_user, q + 1, nq)) {
            st = gmm_error(GMM_ECANCEL, "prediction cancelled");
            break;
        }
    }
    gmm_free(buf);
    return st;
}

void gmm_ssm_set_progress(gmm_ssm *m, int (*fn)(void *user, size_t done, size_t total),
                          void *user)
{
    m->progress = fn;
    m->progress_user = user;
}

gmm_status gmm_ssm_predict(gmm_ssm *m, const double *theta, double noise, const double *xq,
                           size_t nq, double *mean, double *var)
{
    gmm_status st = GMM_OK;
    gmm_band *cov = NULL;
    double *mu = NULL, ll;
    if (!m || !theta || (nq && (!xq || !mean || !var)))
        return gmm_error(GMM_EINVAL, "gmm_ssm_predict: NULL argument");
    mu = gmm_malloc(m->N, sizeof *mu);
    /* bandwidth 2d - 1 (at least the precision's, BLOCKS) covers the blocks (k, k)
     * and (k+1, k) whatever the order of the variables within the states */
    cov = gmm_band_alloc(m->N, 2 * m->d - 1, 0, GMM_BAND_SYMMETRIC);
    if (!mu || !cov) {
        st = gmm_error(GMM_ENOMEM, "out of memory for prediction");
        goto done;
    }
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = ssm_forward(m, theta, noise, &ll, 0)) ||
        (st = gmm_marglik_posterior(m->mw, mu, cov)))
        goto done;
    st = gmm_ssm_predict_post(m, theta, mu, cov, xq, nq, mean, var);
done:
    gmm_free(mu);
    gmm_band_free(cov);
    return st;
}

gmm_status gmm_ssm_posterior(gmm_ssm *m, double *mean, gmm_band *cov)
{
    if (!m)
        return gmm_error(GMM_EINVAL, "gmm_ssm_posterior: NULL model");
    return gmm_marglik_posterior(m->mw, mean, cov);
}
