/* latent_asm.c -- the glue of assembled-precision latents (latent_asm.h).
 *
 * The Gaussian likelihood hands Q (or, with constraints, Q and the
 * normaliser of the prior on the constrained subspace) to marglik; its
 * gradient comes back as Qbar and goes through the normaliser's and the
 * assembly's reverse modes.  The whitening's reverse mode of c = zbar .
 * L^-T v: Lbar from the solve's reverse (z given), Qbar from the
 * Cholesky's (in Lbar's storage), thetabar then from the assembly's. */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "latent_asm.h"

void latent_asm_gauss_free(latent_asm_gauss *g)
{
    gmm_band_free(g->Q);
    gmm_band_free(g->Qbar);
    gmm_marglik_work_free(g->w);
    gmm_free(g->ooff);
    gmm_free(g->oy);
    gmm_free(g->ocoef);
    gmm_free(g->cwork);
}

/* y's observed rows into g->obs (their offsets, coefficients and values). */
static gmm_status observe(const gmm_obsmap *m, size_t n, const double *y,
                          latent_asm_gauss *g)
{
    size_t o = 0, W = m->width;
    for (size_t r = 0; r < m->nrows; r++) {
        if (isnan(y[r]))
            continue;
        if (!isfinite(y[r]))
            return gmm_error_at(GMM_EINVAL, r, "y[%zu] = %g is not finite", r, y[r]);
        g->ooff[o] = m->offset[r];
        if (m->rowptr)
            gmm_obsmap_row_window(m, r, g->ocoef + o * W);
        g->oy[o++] = y[r];
    }
    g->one = 1.0;
    g->obs = m->rowptr ? (gmm_obs){n, o, W, g->ooff, g->ocoef, W, g->oy}
                       : (gmm_obs){n, o, 1, g->ooff, &g->one, 0, g->oy};
    return GMM_OK;
}

gmm_status latent_asm_gaussian(void *impl, const double *theta, const double *y, double noise,
                               double *loglik, double *thetabar, double *noisebar)
{
    latent_asm *a = impl;
    latent_asm_gauss *g = &a->gs;
    gmm_status st;
    if ((st = a->work(a->ctx)))
        return st;
    if (!isfinite(noise) || !(noise > 0.0))
        return gmm_error(GMM_EDOM, "likelihood.variance = %g must be positive and finite",
                         noise);
    if ((st = observe(&a->map, a->n, y, g)))
        return st;
    double ld = 0.0;
    int given = 0;
    if ((st = a->assemble(a->ctx, theta, g->Q)) ||
        (a->normaliser && (st = a->normaliser(a->ctx, theta, y, noise, g->Q, &ld, &given))))
        return st;
    if ((st = gmm_marglik_eval(g->Q, &g->obs, noise, given ? &ld : NULL, g->w, loglik)))
        return st;
    if (!thetabar)
        return GMM_OK;
    double nb = 0.0;
    gmm_band_set_zero(g->Qbar);
    if ((st = gmm_marglik_grad(g->w, g->Qbar, &nb)))
        return st;
    /* the log-likelihood carries the prior's log-determinant halved */
    if (given && (st = a->normaliser_rev(a->ctx, 0.5, g->Qbar)))
        return st;
    memset(thetabar, 0, a->nparam * sizeof *thetabar);
    if ((st = a->assemble_rev(a->ctx, theta, g->Qbar, thetabar)))
        return st;
    if (noisebar)
        *noisebar = nb;
    return GMM_OK;
}

gmm_status latent_asm_posterior(void *impl, double *mean, gmm_band *cov)
{
    const latent_asm *a = impl;
    if (!a->gs.w)
        return gmm_error(GMM_EINVAL, "%s: no Gaussian evaluation yet", a->what);
    return gmm_marglik_posterior(a->gs.w, mean, cov);
}

gmm_status latent_asm_posterior_solve(void *impl, double *v)
{
    const latent_asm *a = impl;
    if (!a->gs.w)
        return gmm_error(GMM_EINVAL, "%s: no Gaussian evaluation yet", a->what);
    return gmm_marglik_posterior_solve(a->gs.w, v);
}

void latent_asm_zero_rowcol(gmm_band *B, size_t i)
{
    size_t j0 = i > B->kl ? i - B->kl : 0, i1 = i + B->kl < B->n ? i + B->kl : B->n - 1;
    for (size_t j = j0; j <= i; j++)
        *gmm_band_ptr(B, i, j) = 0.0;
    for (size_t r = i; r <= i1; r++)
        *gmm_band_ptr(B, r, i) = 0.0;
}

void latent_asm_pin(const latent_asm *a, gmm_band *B)
{
    for (size_t i = 0; i < a->npin; i++) {
        latent_asm_zero_rowcol(B, a->pin[i]);
        *gmm_band_ptr(B, a->pin[i], a->pin[i]) = 1.0;
    }
}

double *latent_asm_chol_work(latent_asm *a, size_t kl)
{
    size_t need = gmm_band_chol_work_size(kl);
    if (need > a->gs.ccap) {
        double *p = gmm_realloc(a->gs.cwork, need, sizeof *p);
        if (!p)
            return NULL;
        a->gs.cwork = p;
        a->gs.ccap = need;
    }
    return a->gs.cwork;
}

gmm_status latent_asm_factor(latent_asm *a, const double *theta, gmm_band *L)
{
    gmm_status st;
    if ((st = gmm_band_set_kind(L, GMM_BAND_SYMMETRIC)) || (st = a->assemble(a->ctx, theta, L)))
        return st;
    latent_asm_pin(a, L);
    return gmm_band_chol_decomp_work(L, L, latent_asm_chol_work(a, L->kl));
}

gmm_status latent_asm_wready(int ready, const double *a, const double *b, const char *fn)
{
    if (!ready)
        return gmm_error(GMM_EINVAL, "%s: no successful whitening setup before", fn);
    if (!a || !b)
        return gmm_error(GMM_EINVAL, "%s: NULL argument", fn);
    return GMM_OK;
}

gmm_status latent_asm_wready_rev(int ready, int z_ok, int g_ok, const double *v,
                                 const double *xbar, const double *thetabar)
{
    if (!ready)
        return gmm_error(GMM_EINVAL, "gmm_latent_whiten_rev: no successful whitening setup "
                                     "before");
    if (!thetabar)
        return gmm_error(GMM_EINVAL, "gmm_latent_whiten_rev: NULL argument");
    if (!v && !z_ok)
        return gmm_error(GMM_EINVAL, "gmm_latent_whiten_rev: v NULL without a "
                                     "gmm_latent_whiten since the setup");
    if (!xbar && !g_ok)
        return gmm_error(GMM_EINVAL, "gmm_latent_whiten_rev: xbar NULL without a "
                                     "gmm_latent_whiten_t since the setup");
    return GMM_OK;
}

gmm_status latent_asm_whiten_z(const latent_asm *a, const gmm_band *L, const size_t *reach,
                               const double *v, double *z)
{
    if (z != v)
        memcpy(z, v, a->n * sizeof *z);
    for (size_t i = 0; i < a->npin; i++)
        z[a->pin[i]] = 0.0;
    return reach ? gmm_band_tri_solve_vec_reach(L, reach, GMM_TRANS, z)
                 : gmm_band_tri_solve_vec(L, GMM_TRANS, z);
}

gmm_status latent_asm_factor_rev(latent_asm *a, const gmm_band *L, const double *z,
                                 const double *zbar, const double *g, gmm_band *Lb,
                                 double *work)
{
    gmm_status st;
    if ((st = gmm_band_set_kind(Lb, GMM_BAND_LOWER)))
        return st;
    gmm_band_set_zero(Lb);
    /* Lbar = -z g' on L's band (band_solve_rev.c, op = L^T), then Qbar in
     * the same storage (the aliased reverse turns it SYMMETRIC) */
    st = g ? gmm_band_outer(-1.0, 1, z, a->n, g, a->n, Lb)
           : gmm_band_tri_solve_vec_rev(L, GMM_TRANS, z, zbar, NULL, Lb, work);
    if (st || (st = gmm_band_chol_decomp_rev_work(L, Lb, Lb, latent_asm_chol_work(a, L->kl))))
        return st;
    for (size_t i = 0; i < a->npin; i++)
        latent_asm_zero_rowcol(Lb, a->pin[i]);
    return GMM_OK;
}
