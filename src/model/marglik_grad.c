/* marglik_grad.c -- the reverse mode of the Gaussian marginal likelihood
 * (marglik.c has the forward pass) and the posterior.
 *
 * Reverse (cbar = 1):  rbar = r / noise^2 -> tri_solve_vec_rev gives Lbar
 * (b does not depend on Q or noise); Lbar += -1/2 dlogdet; chol_decomp_rev
 * gives Pbar; Qbar += Pbar (P's copy of Q), and noise enters P through
 * -E'E / noise^2:  noisebar += -sum_stored Pbar .* (E'E)_stored / noise^2,
 * plus the explicit terms -nobs/(2 noise) + y'y/(2 noise^2) - r'r/noise^3.
 * The prior term log|Q|/2 goes through chol(Q) when it was computed here.
 *
 * Since P = Q + (terms free of Q), Pbar IS dlogp/dQ (when log|Q| is the
 * caller's): a caller that assembles Q in P's storage and reads Pbar in
 * place (gmm_marglik_prior_band, gmm_marglik_grad_view) saves a band copy,
 * a band zeroing and a band addition per evaluation.
 */
#include "marglik_impl.h"

#include <string.h>

#include "gmm/constr.h"

/* The constrained reverse sweep (marglik.c, CONSTRAINTS) into w->Pbar:
 * dlogp/dP = -(Sigma_c + mu_c mu_c')/2 (band.h's convention: doubled off
 * the diagonal), read from Sigma_c's band, and dlogp/dnoise = -nobs/(2
 * noise) + sum_k [(y_k - e_k'mu_c)^2 + e_k'Sigma_c e_k] / (2 noise^2). */
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
