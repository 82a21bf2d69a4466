/* vi_q.c -- q = N(m, (L L')^-1): its parameters lambda (the band of L,
 * the diagonal by its logarithm) and its moments (vi.h). */
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

size_t gmm_vi_dim(const gmm_vi *v) { return v->n; }
size_t gmm_vi_bandwidth(const gmm_vi *v) { return v->b; }
size_t gmm_vi_nvar(const gmm_vi *v) { return v->nvar; }
size_t gmm_vi_nparam(const gmm_vi *v) { return v->nparam; }
int gmm_vi_uses_rows(const gmm_vi *v) { return v->rows; }
const double *gmm_vi_theta(const gmm_vi *v) { return v->theta; }
const double *gmm_vi_lambda(const gmm_vi *v) { return v->lambda; }
const double *gmm_vi_mean(const gmm_vi *v) { return v->lambda; }

/* L from lambda: the band copied, its log-diagonal exponentiated. */
gmm_status vi_unpack(gmm_vi *v, const double *lambda)
{
    memcpy(v->L->data, lambda + v->n, gmm_band_size(v->n, v->b, 0) * sizeof *lambda);
    v->ldq = 0.0;
    for (size_t j = 0; j < v->n; j++) {
        double *d = gmm_band_ptr(v->L, j, j), t = exp(*d);
        v->ldq += 2.0 * *d;
        if (!(t >= DBL_MIN) || !isfinite(t))
            return gmm_error_at(GMM_EDOM, j, "vi: L(%zu, %zu) = exp(%g) is not a positive "
                                             "normal double",
                                j, j, *d);
        *d = t;
    }
    return GMM_OK;
}

/* ---- state ----------------------------------------------------------------------- */

/* lambda's band from v->L (its diagonal to logs). */
void vi_pack(gmm_vi *v)
{
    gmm_band lb;
    memcpy(v->lambda + v->n, v->L->data, gmm_band_size(v->n, v->b, 0) * sizeof *v->lambda);
    gmm_band_view(&lb, v->lambda + v->n, v->n, v->b, 0, GMM_BAND_LOWER);
    for (size_t j = 0; j < v->n; j++) {
        double *d = gmm_band_ptr(&lb, j, j);
        *d = log(*d);
    }
}

/* With constraints, the state's m replaced by q's mean m_c = krig(m) (the
 * same q: krig(m_c) = m_c), so that gmm_vi_mean is q's mean. */
gmm_status vi_canonical(gmm_vi *v)
{
    gmm_status st;
    if (!v->con)
        return GMM_OK;
    if ((st = vi_unpack(v, v->lambda)) || (st = gmm_constr_factor(v->con, v->L, 0.0)))
        return st;
    gmm_constr_krig(v->con, v->lambda);
    return GMM_OK;
}

/* Sigma_c = Sigma - V V' loses about log10(Sigma_jj / Sigma_c,jj) digits
 * to the subtraction; q's with more than this ratio at some j (P nearly
 * singular off the subspace, along directions that do not move the
 * conditioned q) are outside the ELBO's domain (CONSTRAINTS). */
#define CANCEL_MAX 1e6

/* q's moments on the subspace from L: Sigma's band into S, Sigma_c's into
 * Sc (constr.h, no pins); GMM_EDOM when the subtraction cancels beyond
 * CANCEL_MAX. */
gmm_status vi_constrained_band(gmm_vi *v)
{
    gmm_status st;
    if ((st = gmm_constr_factor(v->con, v->L, 0.0)) || (st = gmm_band_copy(v->Sc, v->S)))
        return st;
    gmm_constr_band(v->con, v->Sc);
    for (size_t j = 0; j < v->n; j++) {
        double s = gmm_band_get(v->S, j, j), sc = gmm_band_get(v->Sc, j, j);
        if (!(sc * CANCEL_MAX >= s))
            return gmm_error_at(GMM_EDOM, j, "vi: q's precision is nearly singular off the "
                                             "constrained subspace (variance of latent %zu "
                                             "%g, %g conditioned)",
                                j, s, sc);
    }
    return GMM_OK;
}

/* ---- q as a posterior --------------------------------------------------------------- */

gmm_status gmm_vi_factor(gmm_vi *v, gmm_band *L)
{
    gmm_status st;
    if (!v || !L)
        return gmm_error(GMM_EINVAL, "gmm_vi_factor: NULL argument");
    if (L->n != v->n || L->kind != GMM_BAND_LOWER)
        return gmm_error(GMM_EDIM, "gmm_vi_factor: L must be LOWER %zu x %zu", v->n, v->n);
    if ((st = vi_unpack(v, v->lambda)))
        return st;
    return gmm_band_copy_band(L, v->L);
}

gmm_status gmm_vi_posterior(gmm_vi *v, double *mean, gmm_band *cov)
{
    gmm_status st;
    if (!v)
        return gmm_error(GMM_EINVAL, "gmm_vi_posterior: NULL argument");
    if (mean)
        memcpy(mean, v->lambda, v->n * sizeof *mean);
    if (!cov)
        return GMM_OK;
    if (cov->n != v->n || cov->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gmm_vi_posterior: cov must be SYMMETRIC %zu x %zu", v->n,
                         v->n);
    if ((st = vi_unpack(v, v->lambda)))
        return st;
    if (cov->kl >= v->b)
        st = gmm_band_chol_selinv(v->L, cov);
    else if ((st = gmm_band_chol_selinv(v->L, v->S)) == GMM_OK)
        st = gmm_band_copy_band(cov, v->S);
    if (st || !v->con)
        return st;
    if ((st = gmm_constr_factor(v->con, v->L, 0.0)))
        return st;
    gmm_constr_band(v->con, cov);
    return GMM_OK;
}
