/* marglik.c -- Gaussian marginal likelihood of a banded GMRF observed through
 * a sparse map (paper, section 3.1, eq. 2), its reverse mode and the
 * posterior.  See marglik.h for the model.
 *
 * Forward, with P = Q + E'E / noise (banded: row k of E touches `width`
 * consecutive columns, width - 1 <= kl), L L' = P, b = E'y, r = L^{-1} b:
 *
 *   log p(y) = -nobs/2 log 2pi - logdet(L L')/2 + log|Q|/2 - nobs/2 log noise
 *              - y'y / (2 noise) + r'r / (2 noise^2).
 *
 * Reverse (cbar = 1):  rbar = r / noise^2 -> tri_solve_vec_rev gives Lbar
 * (b does not depend on Q or noise); Lbar += -1/2 dlogdet; chol_decomp_rev
 * gives Pbar; Qbar += Pbar (P's copy of Q), and noise enters P through
 * -E'E / noise^2:  noisebar += -sum_stored Pbar .* (E'E)_stored / noise^2,
 * plus the explicit terms -nobs/(2 noise) + y'y/(2 noise^2) - r'r/noise^3.
 * The prior term log|Q|/2 goes through chol(Q) when it was computed here.
 * The forward pass keeps L, LQ, r, y'y, r'r, noise and the obs pointer.
 *
 * Since P = Q + (terms free of Q), Pbar IS dlogp/dQ (when log|Q| is the
 * caller's): a caller that assembles Q in P's storage and reads Pbar in
 * place (gmm_marglik_prior_band, gmm_marglik_grad_view) saves a band copy,
 * a band zeroing and a band addition per evaluation.
 */
#include "gmm/marglik.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"

/* Rows per block of the square-root form (gmm_marglik_eval_rows): a
 * state-space model's segment is an interval's d transition rows and an
 * observation, and a block merges whole segments while it holds fewer than
 * BLOCK_MERGE rows (segment_fits; 32: about 5 intervals of the CO2 model,
 * the fastest of 16 .. 64 -- fewer sweep states twice more often,
 * more give the gradient's undo more lanes).  With block starts a block may
 * grow to BLOCK_MAX + kl + 1 rows so that prior rows with one first column
 * are never split (ROW MOMENTS). */
#define BLOCK_MAX 48
#define BLOCK_MERGE 32
/* Prior rows read at once through gmm_prior_rows' rows (a segment's). */
#define QCAP 64
/* An observation in a block's row sources (bsrc): OBS_TAG | its index. */
#define OBS_TAG (~(SIZE_MAX >> 1))

/* What ROW MOMENTS needs of one block of the fold beside its tape: where
 * its row sources (m of them) were saved, its prior rows g0 .. g1 - 1. */
typedef struct {
    size_t spos, g0, g1, tpos; /* tpos: the block's position on the tape */
} row_block;

struct gmm_marglik_work {
    size_t n, kl;
    /* P and L = chol(P) share storage (the Cholesky runs in place), as do
     * Lbar and Pbar (chol_decomp_rev may alias them): two views each, so
     * every band the band module sees has the kind it expects. */
    double *pdata, *bardata;
    gmm_band P, L, Pbar, Lbar;
    gmm_band *LQ;    /* chol(Q), when the prior log-determinant is computed here */
    double *r;       /* L^{-1} E'y */
    double *work, *work2; /* n doubles each */
    double *cwork;        /* the band Cholesky's and its reverse's panels */
    /* square-root form: a block of up to BLOCK_MAX rows (first columns,
     * entries, where each came from) and gmm_band_chol_add_rows' work */
    size_t *bfirst, *bsrc, bcap;
    double *bv, *bwork;
    /* prior rows read ahead by G->rows: up to QCAP, their first columns
     * and widths */
    size_t *qfirst, *qwidth;
    double *qv;
    /* ROW MOMENTS: recorded by eval_rows when record is set; all grow as
     * needed and are kept (later evaluations allocate nothing) */
    int record, recorded;
    double rows_tau;      /* the pins the rows hold (gmm_marglik_rows_pinned; NAN: none) */
    gmm_band_tape tape;
    row_block *rb;
    size_t nrb, rbcap;
    size_t *src;          /* the blocks' row sources */
    size_t nsrc, srccap;
    gmm_band_tape mwork;  /* gmm_band_chol_rows_moments' buffer */
    double *vbuf;         /* a block's vv and vx */
    size_t vcap;
    /* CONSTRAINTS (gmm_marglik_constrain; NULL: none) and the conditioned
     * posterior mean of the last eval */
    gmm_constr *con;
    double *cmu;
    double *ovar;         /* the next row moments' observation variances, or NULL */
    double *ubuf;         /* ROW MEANS: R's rows' lanes, then a block's (ucap doubles) */
    size_t ucap;
    /* What the last successful eval saw. */
    int valid, prior_here;
    const gmm_obs *obs;
    double noise, yy, rr;
};

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

/* Shared coefficient rows (coef_stride 0, a state-space model's H): the
 * pairs b <= a with c_a c_b != 0, at most PAIRS_MAX of them (else 0 and the
 * general loops run).  Every observation touches only these slots. */
#define PAIRS_MAX 64
typedef struct {
    size_t n, a[PAIRS_MAX], b[PAIRS_MAX];
    double v[PAIRS_MAX]; /* c_a c_b */
} obs_pairs;

static void shared_pairs(const gmm_obs *obs, obs_pairs *p)
{
    p->n = 0;
    if (obs->coef_stride != 0 || obs->nobs == 0)
        return;
    const double *c = obs->coef;
    for (size_t b = 0; b < obs->width; b++)
        for (size_t a = b; a < obs->width && c[b] != 0.0; a++) {
            if (c[a] == 0.0)
                continue;
            if (p->n == PAIRS_MAX) {
                p->n = 0;
                return;
            }
            p->a[p->n] = a;
            p->b[p->n] = b;
            p->v[p->n++] = c[a] * c[b];
        }
}

/* r = E'y (length obs->n, overwritten); returns y'y.  Both forms of the
 * evaluation start from it. */
static double obs_rhs(const gmm_obs *obs, double *r)
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
static gmm_status check_obs_map(const gmm_obs *obs, double noise, const gmm_marglik_work *w)
{
    if (obs->n != w->n)
        return gmm_error(GMM_EDIM, "marglik: E has %zu columns, the workspace is for %zu",
                         obs->n, w->n);
    if (obs->nobs > 0) {
        if (!obs->offset || !obs->coef || !obs->y)
            return gmm_error(GMM_EINVAL, "marglik: NULL observation array");
        if (obs->width == 0 || obs->width - 1 > w->kl)
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
    return check_obs_map(obs, noise, w);
}

static gmm_status finish(gmm_marglik_work *w, const gmm_obs *obs, double noise, double logdet_q,
                         double yy, double *loglik);
static gmm_status finish_constrained(gmm_marglik_work *w, const gmm_obs *obs, double noise,
                                     double logdet_q, double yy, double tau, double *loglik);

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
    yy = obs_rhs(obs, w->r);
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
    st = w->con ? finish_constrained(w, obs, noise, logdet_q, yy, tau, loglik)
                : finish(w, obs, noise, logdet_q, yy, loglik);
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
static gmm_status finish(gmm_marglik_work *w, const gmm_obs *obs, double noise, double logdet_q,
                         double yy, double *loglik)
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
 * Reverse: dlogp/dP = -(Sigma_c + mu_c mu_c')/2 (band.h's convention:
 * doubled off the diagonal), read from Sigma_c's band, and dlogp/dnoise =
 * -nobs/(2 noise) + sum_k [(y_k - e_k'mu_c)^2 + e_k'Sigma_c e_k] / (2
 * noise^2). */
static gmm_status finish_constrained(gmm_marglik_work *w, const gmm_obs *obs, double noise,
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

/* The constrained reverse sweep (CONSTRAINTS) into w->Pbar. */
static gmm_status grad_constrained(gmm_marglik_work *w, double *noisebar)
{
    gmm_status st;
    const gmm_obs *obs = w->obs;
    gmm_band *S = &w->Pbar;
    const double *mu = w->cmu;
    if ((st = gmm_band_chol_selinv(&w->L, S)) != GMM_OK)
        return st;
    gmm_constr_band(w->con, S);
    if (noisebar) {
        double s = 0.0, n2 = w->noise * w->noise;
        for (size_t k = 0; k < obs->nobs; k++) {
            const double *c = obs->coef + k * obs->coef_stride;
            size_t o = obs->offset[k];
            double e = obs->y[k], v = 0.0;
            for (size_t a = 0; a < obs->width; a++) {
                if (c[a] == 0.0)
                    continue;
                e -= c[a] * mu[o + a];
                for (size_t b = 0; b < obs->width; b++)
                    v += c[a] * c[b] * gmm_band_get(S, o + a, o + b);
            }
            s += e * e + v;
        }
        *noisebar += -0.5 * (double)obs->nobs / w->noise + s / (2.0 * n2);
    }
    for (size_t j = 0; j < w->n; j++) {
        double *col = gmm_band_col(S, j);
        size_t iend = j + w->kl < w->n ? j + w->kl : w->n - 1;
        col[j] = -0.5 * (col[j] + mu[j] * mu[j]);
        for (size_t i = j + 1; i <= iend; i++)
            col[i] = -(col[i] + mu[i] * mu[j]);
    }
    return GMM_OK;
}

/* *p (cap *cap elements of size sz) with room for need: 0, or 1 when it
 * cannot grow.  Doubling: evaluations after the first allocate nothing. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 64;
    while (c < need)
        c *= 2;
    void *q = gmm_realloc(*p, c, sz);
    if (!q)
        return 1;
    *p = q;
    *cap = c;
    return 0;
}

/* Before folding a block of m rows (ROW MOMENTS): its sources and prior
 * rows. */
static gmm_status record_block(gmm_marglik_work *w, size_t m)
{
    size_t g0 = SIZE_MAX, g1 = 0;
    if (grow((void **)&w->rb, &w->rbcap, w->nrb + 1, sizeof *w->rb) ||
        grow((void **)&w->src, &w->srccap, w->nsrc + m, sizeof *w->src))
        return gmm_error(GMM_ENOMEM, "marglik: out of memory for the square-root form's "
                                     "record");
    for (size_t i = 0; i < m; i++) {
        size_t src = w->bsrc[i];
        w->src[w->nsrc + i] = src;
        if (!(src & OBS_TAG)) {
            g0 = src < g0 ? src : g0;
            g1 = src + 1 > g1 ? src + 1 : g1;
        }
    }
    row_block *b = w->rb + w->nrb++;
    b->spos = w->nsrc;
    b->tpos = w->tape.len;
    b->g0 = g0 == SIZE_MAX ? 0 : g0;
    b->g1 = g0 == SIZE_MAX ? 0 : g1;
    w->nsrc += m;
    return GMM_OK;
}

/* Whether the segment that prior row gi (first column gfirst) starts --
 * up to the next block start -- fits the block being gathered (m rows so
 * far) whole: its prior rows, and every observation from ok on that can
 * start in its columns, counted generously (no later rule may split it).
 * Merging segments nearly halves the fold's sequential reflections: a
 * state's columns are then swept once, by its own rows and its
 * predecessor's remainder together, instead of once by each block. */
static int segment_fits(const gmm_prior_rows *G, const gmm_obs *obs, size_t gi, size_t gfirst,
                        size_t ok, size_t kl, size_t m, size_t seglen)
{
    if (m >= BLOCK_MERGE)
        return 0;
    size_t need = m + 1;
    if (seglen) /* known (read whole by G->rows) */
        need = need + seglen - 1 < BLOCK_MAX ? need + seglen - 1 : BLOCK_MAX;
    for (size_t i = gi + 1;
         !seglen && i < G->nrows && !G->block_start(G->ctx, i) && need < BLOCK_MAX; i++)
        need++;
    for (size_t t = ok; t < obs->nobs && obs->offset[t] <= gfirst + kl && need < BLOCK_MAX; t++)
        need++;
    return need < BLOCK_MAX;
}

/* SQUARE-ROOT FORM.  The rows of [G; E / sqrt(noise)] are merged by first
 * column and folded into L in blocks (gmm_band_chol_add_rows): a block
 * takes the rows that start inside the columns already reached by earlier
 * rows (at least the first row's), so each block's reflections first sweep
 * the filled columns of L, then deposit the block's remainder into the empty
 * ones after them.  For a state-space model that block is one state's
 * observation and its d transition rows: 2d reflections per state, each
 * with one square root, where row-by-row Givens rotations cost ~7d; with
 * segments merged (segment_fits: each block's rows may then also start
 * inside the columns the block itself reaches) a state's columns are swept
 * once by its rows and its predecessor's remainder together: d + d / (the
 * intervals per block) reflections per state (CO2 model: 7.2 instead of
 * 12), and the gradient's row moments have fewer blocks to compress.
 * Reading the rows backwards (the factor of J P J, J the exchange matrix)
 * does not help even though a Markov chain's transition rows, read so, are
 * triangular: the observations have filled the factor's rows they would
 * land in.  Counted on the CO2 model (d = 6): 42 rotations per state in
 * either order row by row, 12 reflections per state in either order by
 * blocks.  G->block_start, when given, marks segments: a block ends
 * before a marked row (and before the observations that start in that
 * row's first column) unless that row's whole segment fits the block
 * (segment_fits), and no block splits a segment. */
gmm_status gmm_marglik_eval_rows(const gmm_prior_rows *G, const gmm_obs *obs, double noise,
                                 double prior_logdet, gmm_marglik_work *w, double *loglik)
{
    gmm_status st;
    if (w) {
        w->valid = 0;
        w->recorded = 0;
    }
    if (!G || !G->row || !obs || !w || !loglik)
        return gmm_error(GMM_EINVAL, "marglik: NULL argument");
    if (w->con && !(w->rows_tau >= 0.0))
        return gmm_error(GMM_EINVAL, "marglik: constraints in the square-root form need the "
                                     "pins among the rows (gmm_marglik_rows_pinned)");
    if ((st = check_obs_map(obs, noise, w)) != GMM_OK)
        return st;
    if (!isfinite(prior_logdet))
        return gmm_error(GMM_EINVAL, "marglik: supplied log|Q| is not finite");
    for (size_t k = 1; k < obs->nobs; k++)
        if (obs->offset[k] < obs->offset[k - 1])
            return gmm_error_at(GMM_EINVAL, k, "marglik: observation offsets must be "
                                               "nondecreasing for the square-root form");

    size_t n = w->n, kl = w->kl, ld = kl + 1, nobs = obs->nobs, wd = obs->width;
    if ((st = gmm_band_set_kind(&w->L, GMM_BAND_LOWER)) != GMM_OK)
        return st;
    gmm_band_set_zero(&w->L);
    double yy = obs_rhs(obs, w->r), sn = 1.0 / sqrt(noise);
    const double *gv = w->work; /* the prior row gi, read and not yet taken (have) */
    size_t gi = 0, ok = 0, gfirst = 0, gwidth = 0, filled = 0;
    /* G->rows: qn rows read ahead, the next at qi; qlen: the segment's
     * length when they are all of it (else 0) */
    size_t qn = 0, qi = 0, qlen = 0;
    int have = 0, gstart = 0, record = w->record;
    w->tape.len = 0;
    w->nrb = w->nsrc = 0;
    while (have || gi < G->nrows || ok < nobs) {
        size_t m = 0, lim = 0, reach = filled, opener = SIZE_MAX, lastpf = SIZE_MAX;
        size_t merged = SIZE_MAX; /* the last segment start merged into this block */
        for (;;) {
            if (!have && gi < G->nrows) {
                size_t f;
                int seg0 = 1; /* may start a segment */
                if (G->rows) {
                    if (qi == qn) {
                        size_t cap = G->nrows - gi < QCAP ? G->nrows - gi : QCAP;
                        qn = G->rows(G->ctx, gi, cap, w->qfirst, w->qwidth, w->qv, ld);
                        if (qn == 0 || qn > cap)
                            return gmm_error_at(GMM_EINVAL, gi, "marglik: the prior's row "
                                                                "reader gave %zu rows from "
                                                                "row %zu (1 .. %zu)",
                                                qn, gi, cap);
                        /* the segment's length, when the read ended
                         * at its end (one question; a short read leaves
                         * segment_fits to ask row by row) */
                        qlen = gi + qn == G->nrows ||
                                       (G->block_start && G->block_start(G->ctx, gi + qn))
                                   ? qn
                                   : 0;
                        qi = 0;
                    }
                    seg0 = qi == 0;
                    f = w->qfirst[qi];
                    gv = w->qv + qi * ld;
                    gwidth = w->qwidth[qi];
                    qi++;
                } else {
                    gwidth = G->row(G->ctx, gi, &f, w->work);
                }
                if (gwidth == 0 || gwidth > kl + 1 || f > n || gwidth > n - f)
                    return gmm_error_at(GMM_EDIM, gi, "marglik: prior row %zu (columns %zu, "
                                                      "width %zu) does not fit the band",
                                        gi, f, gwidth);
                if (gi > 0 && f < gfirst) /* named: the row that comes too early */
                    return gmm_error_at(GMM_EINVAL, gi - 1, "marglik: prior row %zu starts at "
                                                            "column %zu, after row %zu (%zu)",
                                        gi - 1, gfirst, gi, f);
                gfirst = f;
                have = 1;
                gstart = G->block_start && seg0 && G->block_start(G->ctx, gi);
            }
            int bstart = have && gstart;
            if (m == 0 && bstart)
                opener = gi; /* this block is the one gi starts */
            if (m > 0 && bstart && gi != opener && gi != merged)
                merged = segment_fits(G, obs, gi, gfirst, ok, kl, m, qi == 1 ? qlen : 0)
                             ? gi
                             : SIZE_MAX;
            if (merged != SIZE_MAX && reach > lim)
                lim = reach; /* a merged segment's rows start inside the block's reach */
            size_t ofirst = ok < nobs ? obs->offset[ok] : 0;
            int take_obs = ok < nobs && (!have || ofirst <= gfirst);
            if (!take_obs && !have)
                break;
            size_t f = take_obs ? ofirst : gfirst, wdt = take_obs ? wd : gwidth;
            if (m > 0 && f >= lim)
                break;
            if (!G->block_start) {
                if (m == BLOCK_MAX)
                    break;
            } else if (m == w->bcap || (m >= BLOCK_MAX && (take_obs || gfirst != lastpf)) ||
                       (m > 0 && bstart && gi != opener && gi != merged &&
                        (!take_obs || ofirst >= gfirst))) {
                break;
            }
            double *v = w->bv + m * ld;
            if (take_obs) {
                const double *c = obs->coef + ok * obs->coef_stride;
                for (size_t b = 0; b < wd; b++)
                    v[b] = c[b] * sn;
                w->bsrc[m] = OBS_TAG | ok;
                ok++;
            } else {
                memcpy(v, gv, gwidth * sizeof *v);
                w->bsrc[m] = gi;
                lastpf = gfirst;
                gi++;
                have = 0;
            }
            for (size_t t = wdt; t < ld; t++)
                v[t] = 0.0;
            w->bfirst[m] = f;
            if (m == 0)
                lim = filled > f + 1 ? filled : f + 1;
            if (f + wdt > reach)
                reach = f + wdt;
            m++;
        }
        if (record && (st = record_block(w, m)) != GMM_OK)
            return st;
        st = record ? gmm_band_chol_add_rows_tape(&w->L, m, w->bfirst, w->bv, ld, w->bwork,
                                                  &w->tape)
                    : gmm_band_chol_add_rows(&w->L, m, w->bfirst, w->bv, ld, w->bwork);
        if (st != GMM_OK) {
            char msg[GMM_ERROR_MAX];
            size_t src = st == GMM_ENOMEM ? SIZE_MAX : w->bsrc[gmm_error_index()];
            snprintf(msg, sizeof msg, "%s", gmm_error_message());
            if (src == SIZE_MAX)
                return gmm_error(st, "marglik: %s", msg);
            if (src & OBS_TAG)
                return gmm_error(st, "marglik: an observation row: %s", msg);
            return gmm_error_at(st, src, "marglik: prior row %zu: %s", src, msg);
        }
        filled = reach;
    }
    if (gmm_band_chol_rows_check(&w->L) != GMM_OK) {
        size_t j = gmm_error_index();
        return gmm_error_at(GMM_ENOTPD, j,
                            "posterior precision (square-root form) not positive definite: "
                            "column %zu is not determined by the prior rows and the data",
                            j);
    }
    st = w->con ? finish_constrained(w, obs, noise, prior_logdet, yy, w->rows_tau, loglik)
                : finish(w, obs, noise, prior_logdet, yy, loglik);
    if (st != GMM_OK)
        return st;
    w->prior_here = 0;
    w->recorded = record;
    return GMM_OK;
}

void gmm_marglik_rows_pinned(gmm_marglik_work *w, double tau)
{
    if (w)
        w->rows_tau = tau;
}

double gmm_marglik_constr_tau(const gmm_marglik_work *w, const gmm_band *Q)
{
    return w && w->con ? gmm_constr_tau(w->con, Q) : 0.0;
}

void gmm_marglik_rows_record(gmm_marglik_work *w, int on)
{
    if (w)
        w->record = on != 0;
}

/* ROW MOMENTS (gmm_marglik_rows_moments).  The fold is recorded
 * (band.h, TAPE) and gmm_band_chol_rows_moments gives each block's rows'
 * posterior moments (z = R mu = L^-1 E'y / noise, the forward solve's r /
 * noise); here they are sorted by source.  Prior rows v = G_block x pass on
 * E[v v'] - I and E[v x_J']; an observation row o = c'x / s (s =
 * sqrt(noise)) gives E[(y - c'x)^2] = (y - s E[o])^2 + noise Var(o), Var(o) =
 * E[o^2] - E[o]^2, for the noise gradient by Fisher's identity:
 * dlogp/dnoise = -nobs / (2 noise) + sum E[(y - c'x)^2] / (2 noise^2). */
typedef struct {
    gmm_marglik_work *w;
    gmm_rows_moments_fn fn;
    void *ctx;
    double ey;
} moments_ctx;

static gmm_status moments_block(void *ctx, size_t block, const gmm_band_block_moments *bm)
{
    moments_ctx *mc = ctx;
    gmm_marglik_work *w = mc->w;
    const row_block *rb = w->rb + (w->nrb - 1 - block); /* block counts back from the last */
    const size_t *src = w->src + rb->spos;
    const gmm_obs *obs = w->obs;
    double s = sqrt(w->noise);
    size_t np = rb->g1 - rb->g0, lw = bm->lw;
    if (grow((void **)&w->vbuf, &w->vcap, np * lw + 1, sizeof *w->vbuf))
        return gmm_error(GMM_ENOMEM, "marglik: out of memory for the row moments");
    for (size_t i = 0; i < bm->m; i++) {
        const double *a = bm->rows + i * lw;
        if (src[i] & OBS_TAG) {
            /* Var(o) = E[o^2] - E[o]^2 */
            double e = obs->y[src[i] & ~OBS_TAG] - s * a[bm->r];
            double var = 1.0 + gmm_band_moment(bm, a, a) - a[bm->r] * a[bm->r];
            mc->ey += e * e + w->noise * var;
            if (w->ovar)
                w->ovar[src[i] & ~OBS_TAG] = w->noise * var;
        } else {
            memcpy(w->vbuf + (src[i] - rb->g0) * lw, a, lw * sizeof *a);
        }
    }
    if (np == 0 || !mc->fn)
        return GMM_OK;
    gmm_rows_moments mo = {rb->g0, np, bm->c0, bm->nj, {bm->c0, np, bm->nj, lw, bm->r,
                                                         w->vbuf, bm->xj}};
    return mc->fn(mc->ctx, &mo);
}

gmm_status gmm_marglik_rows_moments(gmm_marglik_work *w, gmm_rows_moments_fn fn, void *ctx,
                                    double *noisebar)
{
    gmm_status st;
    if (!w || !w->valid || !w->recorded)
        return gmm_error(GMM_EINVAL, "marglik: row moments without a recorded square-root "
                                     "evaluation (gmm_marglik_rows_record)");
    /* z = R mu = r / noise, into work */
    for (size_t i = 0; i < w->n; i++)
        w->work[i] = w->r[i] / w->noise;
    moments_ctx mc = {w, fn, ctx, 0.0};
    st = gmm_band_chol_rows_moments(&w->tape, w->work, w->n, moments_block, &mc, &w->mwork);
    w->ovar = NULL;
    if (st)
        return st;
    if (noisebar)
        *noisebar += -0.5 * (double)w->obs->nobs / w->noise + mc.ey / (2.0 * w->noise * w->noise);
    return GMM_OK;
}

void gmm_marglik_rows_obs_var(gmm_marglik_work *w, double *var)
{
    if (w)
        w->ovar = var;
}

/* ROW MEANS (gmm_marglik_rows_solve).  A mean needs none of the moments'
 * covariance lanes: R's rows' values R x (x = mu, and x = P^-1 b, whose R
 * x = L' P^-1 b = L^-1 b is one forward solve) carried back block by block
 * through the tape's inverse maps give every row's a'x as the fold saw it
 * -- G_a x for a prior row without a product with G_a's (possibly huge)
 * entries.  Four lanes: mu, P^-1 b, two unused. */
gmm_status gmm_marglik_rows_solve(gmm_marglik_work *w, const double *b, double *x, double *gx)
{
    gmm_status st;
    if (!w || !b || !x || !gx)
        return gmm_error(GMM_EINVAL, "marglik: NULL argument");
    if (!w->valid || !w->recorded)
        return gmm_error(GMM_EINVAL, "marglik: row means without a recorded square-root "
                                     "evaluation (gmm_marglik_rows_record)");
    size_t n = w->n, lw = 4, cap = (n + w->bcap + w->kl + 1) * lw;
    if (grow((void **)&w->ubuf, &w->ucap, cap, sizeof *w->ubuf))
        return gmm_error(GMM_ENOMEM, "marglik: out of memory for the row means");
    memcpy(x, b, n * sizeof *x);
    if ((st = gmm_band_tri_solve_vec(&w->L, GMM_NOTRANS, x)))
        return st;
    double *U = w->ubuf, *S = w->ubuf + n * lw;
    for (size_t j = 0; j < n; j++) {
        U[j * lw] = w->r[j] / w->noise;
        U[j * lw + 1] = x[j];
        U[j * lw + 2] = U[j * lw + 3] = 0.0;
    }
    if ((st = gmm_band_tri_solve_vec(&w->L, GMM_TRANS, x)))
        return st;
    for (size_t bi = w->nrb; bi-- > 0;) {
        const row_block *rb = w->rb + bi;
        size_t c0, m, cend, next;
        if ((st = gmm_band_tape_block(&w->tape, rb->tpos, &c0, &m, &cend, &next, NULL)))
            return st;
        size_t nR = cend - c0;
        if ((n + nR + m) * lw > w->ucap) {
            if (grow((void **)&w->ubuf, &w->ucap, (n + nR + m) * lw, sizeof *w->ubuf))
                return gmm_error(GMM_ENOMEM, "marglik: out of memory for the row means");
            U = w->ubuf;
            S = w->ubuf + n * lw;
        }
        memcpy(S, U + c0 * lw, nR * lw * sizeof *S);
        memset(S + nR * lw, 0, m * lw * sizeof *S);
        if ((st = gmm_band_chol_rows_unfold(&w->tape, rb->tpos, nR, S, lw, lw)))
            return st;
        memcpy(U + c0 * lw, S, nR * lw * sizeof *S);
        const size_t *src = w->src + rb->spos;
        for (size_t i = 0; i < m; i++) {
            if (src[i] & OBS_TAG)
                continue;
            gx[2 * src[i]] = S[(nR + i) * lw];
            gx[2 * src[i] + 1] = S[(nR + i) * lw + 1];
        }
    }
    return GMM_OK;
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

/* The reverse sweep up to dlogp/dP, left in w->Pbar, and the noise
 * adjoint.  Every slot of Lbar is written by the first step (no zeroing). */
static gmm_status grad_core(gmm_marglik_work *w, double *noisebar)
{
    gmm_status st;
    const gmm_obs *obs = w->obs;
    double noise = w->noise, n2 = noise * noise;

    /* r'r / (2 noise^2) through r = L^{-1} b, rbar = r / noise^2 (in work),
     * and -logdet(L L')/2, in one sweep. */
    double inv_n2 = 1.0 / n2;
    for (size_t i = 0; i < w->n; i++)
        w->work[i] = w->r[i] * inv_n2;
    st = gmm_band_tri_solve_vec_rev_set(&w->L, GMM_NOTRANS, w->r, w->work, -0.5, &w->Lbar,
                                        w->work2);
    if (st != GMM_OK)
        return st;
    /* Pbar overwrites Lbar (same storage). */
    if ((st = gmm_band_chol_decomp_rev_work(&w->L, &w->Lbar, &w->Pbar, w->cwork)) != GMM_OK)
        return st;
    if (noisebar) {
        double s = 0.0;
        obs_pairs pr;
        shared_pairs(obs, &pr);
        for (size_t k = 0; k < obs->nobs && pr.n; k++) {
            size_t o = obs->offset[k];
            for (size_t q = 0; q < pr.n; q++)
                s += gmm_band_col(&w->Pbar, o + pr.b[q])[o + pr.a[q]] * pr.v[q];
        }
        for (size_t k = 0; k < obs->nobs && !pr.n; k++) {
            const double *c = obs->coef + k * obs->coef_stride;
            size_t o = obs->offset[k];
            for (size_t b = 0; b < obs->width; b++) {
                if (c[b] == 0.0)
                    continue;
                const double *col = gmm_band_col(&w->Pbar, o + b);
                double t = 0.0;
                for (size_t a = b; a < obs->width; a++)
                    t += col[o + a] * c[a];
                s += t * c[b];
            }
        }
        *noisebar += -s / n2 - 0.5 * (double)obs->nobs / noise + w->yy / (2.0 * n2) -
                     w->rr / (n2 * noise);
    }
    return GMM_OK;
}

gmm_status gmm_marglik_grad(gmm_marglik_work *w, gmm_band *Qbar, double *noisebar)
{
    gmm_status st;
    if (!w || !w->valid)
        return gmm_error(GMM_EINVAL, "marglik: gradient without a successful evaluation");
    if (Qbar && (Qbar->kind != GMM_BAND_SYMMETRIC || Qbar->n != w->n || Qbar->kl != w->kl))
        return gmm_error(GMM_EDIM, "marglik: Qbar must be SYMMETRIC %zu x %zu with bandwidth "
                                   "%zu",
                         w->n, w->n, w->kl);
    st = w->con ? grad_constrained(w, noisebar) : grad_core(w, noisebar);
    if (st != GMM_OK)
        return st;
    if (Qbar && (st = gmm_band_copy_band_rev(&w->Pbar, Qbar)) != GMM_OK)
        return st;
    if (Qbar && w->prior_here) {
        gmm_band_set_zero(&w->Lbar);
        if ((st = gmm_band_chol_logdet_rev(w->LQ, 0.5, &w->Lbar)) != GMM_OK)
            return st;
        st = gmm_band_chol_decomp_rev_work(w->LQ, &w->Lbar, Qbar, w->cwork);
    }
    return st;
}

gmm_status gmm_marglik_grad_view(gmm_marglik_work *w, const gmm_band **Qbar, double *noisebar)
{
    gmm_status st;
    if (!w || !w->valid || !Qbar)
        return gmm_error(GMM_EINVAL, "marglik: gradient without a successful evaluation");
    if (w->prior_here)
        return gmm_error(GMM_EINVAL, "marglik: gradient view needs the prior log-determinant "
                                     "supplied to the evaluation");
    st = w->con ? grad_constrained(w, noisebar) : grad_core(w, noisebar);
    if (st != GMM_OK)
        return st;
    *Qbar = &w->Pbar;
    return GMM_OK;
}

gmm_status gmm_marglik_posterior(gmm_marglik_work *w, double *mean, gmm_band *cov)
{
    gmm_status st;
    if (!w || !w->valid)
        return gmm_error(GMM_EINVAL, "marglik: posterior without a successful evaluation");
    if (cov && (cov->kind != GMM_BAND_SYMMETRIC || cov->n != w->n || cov->kl < w->kl))
        return gmm_error(GMM_EDIM, "marglik: posterior covariance band must be SYMMETRIC "
                                   "%zu x %zu with bandwidth >= %zu",
                         w->n, w->n, w->kl);
    if (w->con) {
        if (mean)
            memcpy(mean, w->cmu, w->n * sizeof *mean);
        if (cov && (st = gmm_band_chol_selinv(&w->L, cov)) != GMM_OK)
            return st;
        if (cov)
            gmm_constr_band(w->con, cov);
        return GMM_OK;
    }
    if (mean) {
        /* P^{-1} E'y / noise = L^{-T} r / noise. */
        for (size_t i = 0; i < w->n; i++)
            mean[i] = w->r[i];
        if ((st = gmm_band_tri_solve_vec(&w->L, GMM_TRANS, mean)) != GMM_OK)
            return st;
        for (size_t i = 0; i < w->n; i++)
            mean[i] /= w->noise;
    }
    if (cov && (st = gmm_band_chol_selinv(&w->L, cov)) != GMM_OK)
        return st;
    return GMM_OK;
}

gmm_status gmm_marglik_posterior_solve(gmm_marglik_work *w, double *v)
{
    gmm_status st;
    if (!w || !w->valid || !w->obs || !v)
        return gmm_error(GMM_EINVAL, "marglik: posterior solve without a successful "
                                     "evaluation");
    if (w->con)
        return gmm_constr_solve(w->con, &w->L, v);
    if ((st = gmm_band_tri_solve_vec(&w->L, GMM_NOTRANS, v)))
        return st;
    return gmm_band_tri_solve_vec(&w->L, GMM_TRANS, v);
}
