/* stack_sqrt_wls.c -- the square-root form of a stacked latent with a
 * damped kernel (stack_sqrt.c) as the Laplace approximation and VI use it:
 * the weighted smoothing (latent.h, wls*: the fold with weights for
 * noise), its variances, adjoint and row covariances, and the prior's
 * merged rows with the reverse from q's moments. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "stack_impl.h"
#include "stack_sqrt_impl.h"

gmm_status stack_sq_wls(void *impl, const double *theta, const double *y, const double *wt,
                        int record, double *loglik, double *mean)
{
    stack_impl *c = impl;
    gmm_latent *l = c->latent;
    (void)record; /* every evaluation is kept */
    gmm_status st;
    if ((st = stack_sq_alloc(c, l)) || (st = stack_sq_eval(c, l, theta, y, wt, 1.0, loglik)))
        return st;
    return mean ? gmm_marglik_posterior(c->sqrt_work->w, mean, NULL) : GMM_OK;
}

gmm_status stack_sq_wls_quad(void *impl, const double *x, double *q)
{
    stack_impl *c = impl;
    struct stack_sq *s = c->sqrt_work;
    if (!s || !s->have_theta)
        return gmm_error(GMM_EINVAL, "stacked latent: no weighted smoothing before");
    /* x'Q_r x = |L_r' x|^2 over the other components' latents */
    double sum = 0.0;
    for (size_t j = 0; j < s->n; j++) {
        if (s->lblk[j] != SIZE_MAX)
            continue;
        size_t hi = j + s->kl < s->n - 1 ? j + s->kl : s->n - 1;
        double v = 0.0;
        for (size_t i = j; i <= hi; i++)
            v += gmm_band_get(s->Qr, i, j) * x[i];
        sum += v * v;
    }
    /* and |G_k x|^2 over every kernel row, damped blocks or not */
    for (size_t qk = 0; qk < s->nk; qk++) {
        const sq_kern *kq = &s->kern[qk];
        const stack_comp *m = &c->comp[kq->k];
        for (size_t i = 0; i < kq->G.nrows; i++) {
            size_t lf, w = kern_row(s, qk, i, &lf, s->vloc);
            double d = 0.0;
            for (size_t a = 0; a < w; a++)
                d += s->vloc[a] * x[c->iperm[m->off + lf + a]];
            sum += d * d;
        }
    }
    *q = sum;
    return GMM_OK;
}

gmm_status stack_sq_wls_var(void *impl, double *fvar)
{
    stack_impl *c = impl;
    gmm_latent *l = c->latent;
    struct stack_sq *s = c->sqrt_work;
    gmm_status st;
    if (!s || !s->have_theta)
        return gmm_error(GMM_EINVAL, "stacked latent: no weighted smoothing before");
    memset(s->gpart, 0, c->nparam * sizeof *s->gpart);
    if ((st = stack_sq_fisher(c, l, s->gpart, NULL)))
        return st;
    for (size_t r = 0; r < c->nrows; r++)
        fvar[r] = NAN;
    for (size_t o = 0; o < s->nobs; o++) {
        size_t r = s->orow[o];
        double v = 0.0;
        for (size_t k = l->rowptr[r]; k < l->rowptr[r + 1]; k++)
            v += l->coef[k] * stack_sq_sigma_a(s, l, r, l->offset[r] + l->pos[k]);
        fvar[r] = v;
    }
    return GMM_OK;
}

gmm_status stack_sq_wls_adjoint(void *impl, const double *rw, double *u, double *thetabar)
{
    stack_impl *c = impl;
    struct stack_sq *s = c->sqrt_work;
    gmm_status st;
    if (!s || !s->have_grad)
        return gmm_error(GMM_EINVAL, "stacked latent: no weighted smoothing's variances before "
                                     "its adjoint");
    memset(s->zeta, 0, s->n * sizeof *s->zeta);
    for (size_t o = 0; o < s->nobs; o++)
        gmm_obsmap_row_axpy(&c->as.map, s->orow[o], rw[s->orow[o]], s->zeta);
    if ((st = gmm_marglik_posterior_solve(s->w, s->zeta)))
        return st;
    for (size_t r = 0; r < c->nrows; r++)
        u[r] = NAN;
    for (size_t o = 0; o < s->nobs; o++)
        u[s->orow[o]] = gmm_obsmap_row_dot(&c->as.map, s->orow[o], s->zeta);
    for (size_t i = 0; i < c->nparam; i++)
        thetabar[i] += s->gpart[i];
    /* -zeta' dQ mu: the entries' chain, and (dp_b / p_b) (G_b zeta).(G_b mu) */
    gmm_band_set_zero(s->Qb);
    if ((st = gmm_band_outer(-1.0, 1, s->zeta, s->n, s->mu, s->n, s->Qb)) ||
        (st = stack_sq_chain_entries(c, s->Qb, s->Qb, 0.0, thetabar)))
        return st;
    memset(s->bgz, 0, s->nblk * sizeof *s->bgz);
    stack_sq_kern_dots(c, s->zeta, s->mu, s->bgz);
    for (size_t b = 0; b < s->nblk; b++)
        s->pbar[b] = s->bdamp[b] ? s->bgz[b] / s->bp[b] : 0.0;
    return stack_sq_chain_damped(c, s->pbar, thetabar);
}

gmm_status stack_sq_wls_rowcov(void *impl, double *zeta, double *sh)
{
    stack_impl *c = impl;
    gmm_latent *l = c->latent;
    struct stack_sq *s = c->sqrt_work;
    if (!s || !s->have_grad)
        return gmm_error(GMM_EINVAL, "stacked latent: no weighted smoothing's adjoint before");
    memcpy(zeta, s->zeta, s->n * sizeof *zeta);
    memset(sh, 0, l->nnz * sizeof *sh);
    for (size_t o = 0; o < s->nobs; o++) {
        size_t r = s->orow[o];
        for (size_t k = l->rowptr[r]; k < l->rowptr[r + 1]; k++)
            sh[k] = stack_sq_sigma_a(s, l, r, l->offset[r] + l->pos[k]);
    }
    return GMM_OK;
}

/* ---- the prior's square root (vi) -------------------------------------------- */

gmm_status stack_sq_prior_rows(void *impl, const double *theta, gmm_prior_rows *G,
                               double *logdet)
{
    stack_impl *c = impl;
    gmm_latent *l = c->latent;
    gmm_status st;
    double ld;
    if ((st = stack_sq_alloc(c, l)) || (st = stack_sq_eval_prior(c, l, theta, &c->sqrt_work->ld)))
        return st;
    ld = c->sqrt_work->ld;
    l->rows_tau = c->ncon ? c->sqrt_work->tau : 0.0;
    *G = (gmm_prior_rows){.nrows = c->sqrt_work->nG, .row = stack_sq_merged_row, .ctx = c};
    if (logdet)
        *logdet = ld;
    return GMM_OK;
}

gmm_status stack_sq_rows_rev_q(void *impl, const gmm_band *Sq, const double *m,
                               const gmm_band *D, double *thetabar)
{
    stack_impl *c = impl;
    struct stack_sq *s = c->sqrt_work;
    gmm_status st;
    if (!s || !s->have_theta)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rows_rev_q: no prior rows before");
    /* -(S + m m')/2 through the entries (the kernels' undamped blocks with
     * their log|Q_k| / 2), + log|Q_r| / 2 for the other components */
    gmm_band_set_zero(s->S);
    if ((st = gmm_band_axpy(-0.5, 2.0, Sq, s->S)) ||
        (st = gmm_band_outer(-0.5, 1, m, s->n, m, s->n, s->S)) ||
        (st = gmm_band_copy(s->Qb, s->S)))
        return st;
    /* with constraints the normaliser's (Q^'s, pins dropped), as stack_sq_fisher */
    if (c->ncon ? (st = stack_pinned_logdet_rev(c, 0.5, s->Qb))
                : ((st = gmm_band_chol_selinv(s->Qr, s->Sr)) ||
                   (st = gmm_band_axpy(0.5, 2.0, s->Sr, s->Qb))))
        return st;
    if ((st = stack_sq_chain_entries(c, s->Qb, s->S, 0.5, thetabar)))
        return st;
    /* a damped block: T_b / (2 p_b) per unit of p_b, T_b = E_q[x_b'Q_b x_b]
     * with tr(Q_b S) = |b| + sum_{i in b} (D S)_ii ((L L' S)_ii = 1, Q's row
     * i is Q_b's) */
    memset(s->bdl, 0, s->nblk * sizeof *s->bdl);
    for (size_t i = 0; i < s->n; i++) {
        size_t b = s->lblk[i];
        if (b == SIZE_MAX || !s->bdamp[b])
            continue;
        size_t lo = i > D->kl ? i - D->kl : 0, hi = i + D->kl < s->n ? i + D->kl : s->n - 1;
        double a = 0.0;
        for (size_t j = lo; j <= hi; j++)
            a += gmm_band_get(D, i, j) * gmm_band_get(Sq, j, i);
        s->bdl[b] += a;
    }
    memset(s->bgm, 0, s->nblk * sizeof *s->bgm);
    stack_sq_kern_dots(c, m, NULL, s->bgm);
    for (size_t b = 0; b < s->nblk; b++)
        s->pbar[b] = s->bdamp[b] ? (s->bcnt[b] + s->bdl[b] + s->bgm[b]) / (2.0 * s->bp[b]) : 0.0;
    return stack_sq_chain_damped(c, s->pbar, thetabar);
}
