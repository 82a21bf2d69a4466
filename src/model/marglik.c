/* marglik.c -- Gaussian marginal likelihood of a banded GMRF observed through
 * a sparse map (paper, section 3.1, eq. 2): the workspace, the evaluation
 * on an assembled precision, and the constraints.  The square-root form is
 * marglik_rows.c; the reverse mode and the posterior are marglik_grad.c.
 * See marglik.h for the model.
 *
 * Forward, with P = Q + E'E / noise (banded: row k of E touches `width`
 * consecutive columns, width - 1 <= kl), L L' = P, b = E'y, r = L^{-1} b:
 *
 *   log p(y) = -nobs/2 log 2pi - logdet(L L')/2 + log|Q|/2 - nobs/2 log noise
 *              - y'y / (2 noise) + r'r / (2 noise^2).
 *
 * The forward pass keeps L, LQ, r, y'y, r'r, noise and the obs pointer.
 */
#include "marglik_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"

gmm_marglik_work *gmm_marglik_work_alloc(size_t n, size_t kl)
{
    gmm_marglik_work *w = gmm_calloc(1, sizeof *w);
    if (!w) {
        gmm_error(GMM_ENOMEM, "marglik: out of memory");
        return NULL;
    }
    w->n = n;
    w->kl = n == 0 ? 0 : kl > n - 1 ? n - 1 : kl; /* as band.h clamps */
    w->rows_tau = NAN;
    size_t sz = gmm_band_size(n, w->kl, 0);
    w->pdata = gmm_malloc(sz, sizeof *w->pdata);
    w->bardata = gmm_malloc(sz, sizeof *w->bardata);
    w->LQ = gmm_band_alloc(n, w->kl, 0, GMM_BAND_LOWER);
    w->r = gmm_malloc(n, sizeof *w->r);
    w->work = gmm_malloc(n, sizeof *w->work);
    w->work2 = gmm_malloc(n, sizeof *w->work2);
    w->cwork = gmm_malloc(gmm_band_chol_work_size(w->kl), sizeof *w->cwork);
    w->bcap = BLOCK_MAX + w->kl + 1;
    w->bfirst = gmm_malloc(2 * w->bcap, sizeof *w->bfirst);
    w->bsrc = w->bfirst ? w->bfirst + w->bcap : NULL;
    w->bv = gmm_malloc(w->bcap * (w->kl + 1), sizeof *w->bv);
    w->bwork = gmm_malloc(gmm_band_chol_add_rows_work(w->bcap, w->kl), sizeof *w->bwork);
    w->qfirst = gmm_malloc(2 * QCAP, sizeof *w->qfirst);
    w->qwidth = w->qfirst ? w->qfirst + QCAP : NULL;
    w->qv = gmm_malloc(QCAP * (w->kl + 1), sizeof *w->qv);
    if (!w->pdata || !w->bardata || !w->LQ || !w->r || !w->work || !w->work2 || !w->cwork ||
        !w->bfirst || !w->bv || !w->bwork || !w->qfirst || !w->qv) {
        gmm_marglik_work_free(w);
        gmm_error(GMM_ENOMEM, "marglik: out of memory for n = %zu, bandwidth %zu", n, kl);
        return NULL;
    }
    gmm_band_view(&w->P, w->pdata, n, w->kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band_view(&w->L, w->pdata, n, w->kl, 0, GMM_BAND_LOWER);
    gmm_band_view(&w->Pbar, w->bardata, n, w->kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band_view(&w->Lbar, w->bardata, n, w->kl, 0, GMM_BAND_LOWER);
    return w;
}

void gmm_marglik_work_free(gmm_marglik_work *w)
{
    if (!w)
        return;
    gmm_free(w->pdata);
    gmm_free(w->bardata);
    gmm_band_free(w->LQ);
    gmm_free(w->r);
    gmm_free(w->work);
    gmm_free(w->work2);
    gmm_free(w->cwork);
    gmm_free(w->bfirst);
    gmm_free(w->bv);
    gmm_free(w->tape.data);
    gmm_free(w->rb);
    gmm_free(w->src);
    gmm_free(w->mwork.data);
    gmm_free(w->vbuf);
    gmm_free(w->ubuf);
    gmm_free(w->bwork);
    gmm_free(w->qfirst);
    gmm_free(w->qv);
    gmm_constr_free(w->con);
    gmm_free(w->cmu);
    gmm_free(w);
}

gmm_status gmm_marglik_constrain(gmm_marglik_work *w, size_t k, const double *A,
                                 const size_t *pin)
{
    if (!w || (k && (!A || !pin)))
        return gmm_error(GMM_EINVAL, "marglik: NULL argument");
    w->valid = 0;
    gmm_constr_free(w->con);
    w->con = NULL;
    if (k == 0)
        return GMM_OK;
    if (!w->cmu && !(w->cmu = gmm_malloc(w->n ? w->n : 1, sizeof *w->cmu)))
        return gmm_error(GMM_ENOMEM, "marglik: out of memory for the constraints");
    w->con = gmm_constr_alloc(w->n, k, A, pin);
    return w->con ? GMM_OK : gmm_error_status();
}

/* The band module's ENOTPD message, prefixed with which matrix failed; the
 * row index is kept. */
static gmm_status not_pd(const char *what)
{
    char msg[GMM_ERROR_MAX];
    gmm_status st = gmm_error_status();
    size_t row = gmm_error_index();
    snprintf(msg, sizeof msg, "%s", gmm_error_message());
    if (st != GMM_ENOTPD)
        return gmm_error(st, "%s: %s", what, msg);
    if (row == GMM_NO_INDEX)
        return gmm_error(st, "%s: %s", what, msg);
    return gmm_error_at(st, row, "%s not positive definite (row %zu): %s", what, row, msg);
}

/* r = E'y (length obs->n, overwritten); returns y'y.  Both forms of the
 * evaluation start from it. */
double marglik_obs_rhs(const gmm_obs *obs, double *r)
{
    double yy = 0.0;
    memset(r, 0, obs->n * sizeof *r);
    for (size_t k = 0; k < obs->nobs; k++) {
        const double *c = obs->coef + k * obs->coef_stride;
        size_t o = obs->offset[k];
        double yk = obs->y[k];
        for (size_t b = 0; b < obs->width; b++)
            if (c[b] != 0.0) /* state-space rows are mostly zeros */
                r[o + b] += c[b] * yk;
        yy += yk * yk;
    }
    return yy;
}

/* E against a workspace of order n and bandwidth kl, the noise, the data. */
gmm_status marglik_check_obs_map(const gmm_obs *obs, double noise, const gmm_marglik_work *w)
{
    if (obs->n != w->n)
        return gmm_error(GMM_EDIM, "marglik: E has %zu columns, the workspace is for %zu",
                         obs->n, w->n);
    if (obs->nobs > 0) {
        if (!obs->offset || !obs->coef || !obs->y)
            return gmm_error(GMM_EINVAL, "marglik: NULL observation array");
        if ((obs->width == 0 && obs->n > 0) || (obs->width > 0 && obs->width - 1 > w->kl))
            return gmm_error(GMM_EDIM, "marglik: observation width %zu needs bandwidth >= %zu, "
                                       "Q has %zu",
                             obs->width, obs->width ? obs->width - 1 : 0, w->kl);
    }
    if (!(noise > 0.0) || !isfinite(noise))
        return gmm_error(GMM_EINVAL, "marglik: noise variance must be finite and > 0, got %g",
                         noise);
    for (size_t k = 0; k < obs->nobs; k++) {
        if (obs->offset[k] > obs->n || obs->width > obs->n - obs->offset[k])
            return gmm_error_at(GMM_EDIM, k, "marglik: observation %zu reads columns %zu..%zu "
                                             "of %zu",
                                k, obs->offset[k], obs->offset[k] + obs->width - 1, obs->n);
        if (!isfinite(obs->y[k]))
            return gmm_error_at(GMM_EINVAL, k, "marglik: observation %zu is not finite", k);
        if (k > 0 && obs->coef_stride == 0)
            continue; /* shared coefficients: checked at k = 0 */
        const double *c = obs->coef + k * obs->coef_stride;
        for (size_t m = 0; m < obs->width; m++)
            if (!isfinite(c[m]))
                return gmm_error_at(GMM_EINVAL, k,
                                    "marglik: coefficient %zu of observation %zu is not finite",
                                    m, k);
    }
    return GMM_OK;
}

static gmm_status check_obs(const gmm_band *Q, const gmm_obs *obs, double noise,
                            const gmm_marglik_work *w)
{
    if (!Q || !obs || !w)
        return gmm_error(GMM_EINVAL, "marglik: NULL argument");
    if (Q->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "marglik: Q must be SYMMETRIC");
    if (Q->n != w->n || Q->kl != w->kl)
        return gmm_error(GMM_EDIM, "marglik: Q is %zu x %zu with bandwidth %zu, workspace is "
                                   "for %zu with bandwidth %zu",
                         Q->n, Q->n, Q->kl, w->n, w->kl);
    return marglik_check_obs_map(obs, noise, w);
}

gmm_status gmm_marglik_eval(const gmm_band *Q, const gmm_obs *obs, double noise,
                            const double *prior_logdet, gmm_marglik_work *w, double *loglik)
{
    gmm_status st;
    double logdet_q, yy;

    if (w)
        w->valid = 0;
    if ((st = check_obs(Q, obs, noise, w)) != GMM_OK)
        return st;
    if (!loglik)
        return gmm_error(GMM_EINVAL, "marglik: NULL loglik");
    if (prior_logdet && !isfinite(*prior_logdet))
        return gmm_error(GMM_EINVAL, "marglik: supplied log|Q| is not finite");
    if (w->con && !prior_logdet)
        return gmm_error(GMM_EINVAL, "marglik: constraints need the prior's log-determinant on "
                                     "the constrained subspace");
    double tau = w->con ? gmm_constr_tau(w->con, Q) : 0.0;

    if (prior_logdet) {
        logdet_q = *prior_logdet;
    } else {
        if (gmm_band_chol_decomp_work(Q, w->LQ, w->cwork) != GMM_OK)
            return not_pd("prior precision");
        logdet_q = gmm_band_chol_logdet(w->LQ);
    }

    /* P = Q + E'E / noise: row k adds c c' / noise on its width x width
     * block (lower triangle stored); repeated rows accumulate.  A Q
     * assembled in P's own storage (gmm_marglik_prior_band) is used as is. */
    if (Q->data != w->pdata && (st = gmm_band_copy(&w->P, Q)) != GMM_OK)
        return st;
    yy = marglik_obs_rhs(obs, w->r);
    double inv_noise = 1.0 / noise;
    obs_pairs pr;
    shared_pairs(obs, &pr);
    for (size_t k = 0; k < obs->nobs && pr.n; k++) {
        size_t o = obs->offset[k];
        for (size_t q = 0; q < pr.n; q++)
            gmm_band_col(&w->P, o + pr.b[q])[o + pr.a[q]] += pr.v[q] * inv_noise;
    }
    for (size_t k = 0; k < obs->nobs && !pr.n; k++) {
        const double *c = obs->coef + k * obs->coef_stride;
        size_t o = obs->offset[k];
        for (size_t b = 0; b < obs->width; b++) {
            double cb = c[b];
            if (cb == 0.0) /* state-space rows are mostly zeros */
                continue;
            double *col = gmm_band_col(&w->P, o + b), f = cb * inv_noise;
            for (size_t a = b; a < obs->width; a++)
                col[o + a] += c[a] * f;
        }
    }
    if (w->con)
        gmm_constr_pin(w->con, tau, &w->P);
    if (gmm_band_chol_decomp_work(&w->P, &w->L, w->cwork) != GMM_OK)
        return not_pd("posterior precision");
    st = w->con ? marglik_finish_constrained(w, obs, noise, logdet_q, yy, tau, loglik)
                : marglik_finish(w, obs, noise, logdet_q, yy, loglik);
    if (st != GMM_OK)
        return st;
    w->prior_here = prior_logdet == NULL;
    return GMM_OK;
}

/* *loglik = f when finite, and the state the reverse mode and the posterior
 * read marked valid; GMM_EDOM otherwise (w unchanged). */
static gmm_status store_loglik(gmm_marglik_work *w, const gmm_obs *obs, double noise, double yy,
                               double f, double *loglik)
{
    if (!isfinite(f)) {
        /* Which end: outcomes whose squares (y'y, noise^2 ~ var(y)^2 in
         * r'r / noise^2) overflow, or a noise that is small against them
         * (y'y / noise or r'r / noise^2 overflows). */
        double ms = obs->nobs ? yy / (double)obs->nobs : 0.0;
        if (!isfinite(yy) || !isfinite(noise * noise))
            return gmm_error(GMM_EDOM,
                             "the Gaussian log likelihood is not finite at noise variance %g: "
                             "the data's scale (mean square %g) is too large for double "
                             "precision; rescale the outcomes",
                             noise, ms);
        return gmm_error(GMM_EDOM, "the Gaussian log likelihood is not finite at noise variance "
                                   "%g (too %s for the scale of the data, mean square %g)",
                         noise, noise < ms ? "small" : "large", ms);
    }
    *loglik = f;
    w->valid = 1;
    w->obs = obs;
    w->noise = noise;
    w->yy = yy;
    return GMM_OK;
}

/* From L (in w->L) and r = E'y (in w->r): the log-likelihood, and what the
 * reverse mode and the posterior keep. */
gmm_status marglik_finish(gmm_marglik_work *w, const gmm_obs *obs, double noise,
                          double logdet_q, double yy, double *loglik)
{
    gmm_status st;
    const double log2pi = 1.8378770664093454836;
    double logdet_p, rr = 0.0;
    if ((st = gmm_band_tri_solve_vec_logdet(&w->L, w->r, &logdet_p)) != GMM_OK)
        return st;
    for (size_t i = 0; i < w->n; i++)
        rr += w->r[i] * w->r[i];

    double nobs = (double)obs->nobs;
    double f = -0.5 * nobs * log2pi - 0.5 * logdet_p + 0.5 * logdet_q -
               0.5 * nobs * log(noise) - yy / (2.0 * noise) + rr / (2.0 * noise * noise);
    if ((st = store_loglik(w, obs, noise, yy, f, loglik)) == GMM_OK)
        w->rr = rr;
    return st;
}

/* CONSTRAINTS.  With A x = 0 (constr.h), the posterior is the Gaussian on
 * the subspace with precision P (mean mu_c = Sigma_c b, b = E'y / noise)
 * and, at x = 0 of the identity log p(y) = log p(y | x) + log pi(x) -
 * log p(x | y) on the subspace,
 *
 *   log p(y) = -nobs/2 log 2pi - nobs/2 log noise - y'y / (2 noise)
 *              + [log det(V'QV) + log det(AA')]/2
 *              - [log det(V'PV) + log det(AA')]/2 + b'mu_c / 2.
 *
 * The reverse sweep is marglik_grad.c's grad_constrained. */
gmm_status marglik_finish_constrained(gmm_marglik_work *w, const gmm_obs *obs, double noise,
                                      double logdet_q, double yy, double tau, double *loglik)
{
    gmm_status st;
    const double log2pi = 1.8378770664093454836;
    if ((st = gmm_constr_factor(w->con, &w->L, tau)) != GMM_OK)
        return st;
    for (size_t i = 0; i < w->n; i++)
        w->cmu[i] = w->r[i] / noise;
    if ((st = gmm_constr_solve(w->con, &w->L, w->cmu)) != GMM_OK)
        return st;
    double bmu = 0.0;
    for (size_t i = 0; i < w->n; i++)
        bmu += w->r[i] * w->cmu[i];
    bmu /= noise;
    double ldp = gmm_band_chol_logdet(&w->L) + gmm_constr_logdet(w->con);
    double nobs = (double)obs->nobs;
    double f = -0.5 * nobs * log2pi - 0.5 * ldp + 0.5 * logdet_q - 0.5 * nobs * log(noise) -
               yy / (2.0 * noise) + 0.5 * bmu;
    return store_loglik(w, obs, noise, yy, f, loglik);
}

double gmm_marglik_constr_tau(const gmm_marglik_work *w, const gmm_band *Q)
{
    return w && w->con ? gmm_constr_tau(w->con, Q) : 0.0;
}

gmm_band *gmm_marglik_prior_band(gmm_marglik_work *w)
{
    if (!w) {
        gmm_error(GMM_EINVAL, "marglik: NULL workspace");
        return NULL;
    }
    w->valid = 0; /* the caller is about to overwrite L */
    return gmm_band_set_kind(&w->P, GMM_BAND_SYMMETRIC) == GMM_OK ? &w->P : NULL;
}
