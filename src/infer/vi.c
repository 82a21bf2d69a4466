/* vi.c -- precision-parameterised variational inference (vi.h): the
 * parameters, allocation, the state and its starts.  The ELBO is in
 * vi_elbo.c, q's factor and moments in vi_q.c, the fit in vi_fit.c. */
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

/* ---- parameters ------------------------------------------------------------ */

void gmm_vi_params_init(gmm_vi_params *p)
{
    memset(p, 0, sizeof *p);
    p->bandwidth = GMM_VI_BANDWIDTH_PRIOR;
    p->max_iter = 2000;
    p->tol = 1e-9;
    p->epsilon = 1e-6;
    p->memory = 10;
    p->nquad = 0;
    p->learn_hyper = 0;
    p->prior = GMM_VI_PRIOR_AUTO;
}

gmm_status gmm_vi_params_check(const gmm_vi_params *p)
{
    if (!p)
        return gmm_error(GMM_EINVAL, "vi: no parameters");
    if (!(p->tol >= 0.0) || !isfinite(p->tol))
        return gmm_error(GMM_EINVAL, "vi: tol must be finite and >= 0, got %g", p->tol);
    if (!(p->epsilon > 0.0) || !isfinite(p->epsilon))
        return gmm_error(GMM_EINVAL, "vi: epsilon must be finite and > 0, got %g", p->epsilon);
    if (p->max_iter > 100000000)
        return gmm_error(GMM_EINVAL, "vi: max_iter must be at most 1e8, got %zu", p->max_iter);
    if (p->memory < 1 || p->memory > 1000)
        return gmm_error(GMM_EINVAL, "vi: memory must be in 1..1000, got %zu", p->memory);
    if (p->nquad > GMM_LIK_QUAD_MAX)
        return gmm_error(GMM_EINVAL, "vi: nquad must be 0 (automatic) or 1..%d, got %zu",
                         GMM_LIK_QUAD_MAX, p->nquad);
    if (p->prior != GMM_VI_PRIOR_AUTO && p->prior != GMM_VI_PRIOR_ROWS &&
        p->prior != GMM_VI_PRIOR_ASSEMBLED)
        return gmm_error(GMM_EINVAL, "vi: prior must be AUTO, ROWS or ASSEMBLED, got %d",
                         (int)p->prior);
    return GMM_OK;
}

/* ---- allocation ------------------------------------------------------------ */

void gmm_vi_free(gmm_vi *v)
{
    if (!v)
        return;
    gmm_band *bands[] = {v->L,   v->Lbar, v->S, v->Sbar, v->D,  v->Dlo,
                         v->Q,   v->Qbar, v->K, v->Kbar, v->Sc};
    for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++)
        gmm_band_free(bands[i]);
    void *arr[] = {v->ow, v->orow, v->ooff, v->oord, v->orowptr, v->opos, v->oy, v->oe, v->ocoef,
                   v->coef_all, v->coefbar_all, v->mu, v->s2, v->ea, v->offs, v->oshift,
                   v->ec, v->rule, v->dpar, v->Smo, v->rw, v->rfirst, v->mlo,
                   v->grow, v->Sg, v->work, v->cwork, v->lambda, v->theta, v->thbar, v->tmp,
                   v->mc, v->mcbar};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++)
        gmm_free(arr[i]);
    gmm_constr_free(v->con);
    gmm_factor_free(v->fQ);
    gmm_free(v);
}

/* oord: the observed rows in nondecreasing offset, stably (a counting sort:
 * offsets are below n). */
static gmm_status sort_by_offset(gmm_vi *v)
{
    size_t *count = gmm_calloc(v->n + 1, sizeof *count);
    if (!count)
        return gmm_error(GMM_ENOMEM, "vi: out of memory for %zu latents", v->n);
    for (size_t i = 0; i < v->nobs; i++)
        count[v->ooff[i] + 1]++;
    for (size_t j = 0; j < v->n; j++)
        count[j + 1] += count[j];
    for (size_t i = 0; i < v->nobs; i++)
        v->oord[count[v->ooff[i]]++] = i;
    gmm_free(count);
    return GMM_OK;
}

gmm_status gmm_vi_alloc(gmm_problem *p, const gmm_vi_params *par, gmm_vi **out)
{
    gmm_status st;
    if (!p || !out)
        return gmm_error(GMM_EINVAL, "gmm_vi_alloc: NULL argument");
    *out = NULL;
    if ((st = gmm_vi_params_check(par)))
        return st;
    gmm_latent *lat = gmm_problem_latent_eval(p);
    /* q's precision factor is a band of the latent's bandwidth: exactly
     * the storage the sparse path exists to avoid, so vi refuses it */
    if (gmm_problem_sparse(p))
        return gmm_error(GMM_EINVAL, "vi: q's precision factor is banded, and the model is "
                                     "factorised by the sparse Cholesky, whose band would be "
                                     "too wide: variational inference needs the band "
                                     "factorisation");
    if (gmm_latent_dim(lat) == 0)
        return gmm_error(GMM_EINVAL, "vi: the model has no latent field (no latent term): its "
                                     "marginal likelihood is the exact log-likelihood, there is "
                                     "no posterior to approximate");
    size_t ncon = gmm_latent_nconstr(lat);
    int rows = par->prior == GMM_VI_PRIOR_ROWS ||
               (par->prior == GMM_VI_PRIOR_AUTO && gmm_latent_prior_nrows(lat) > 0);
    if (rows && gmm_latent_prior_nrows(lat) == 0)
        return gmm_error(GMM_EINVAL, "vi: the %s family has no square root of its prior "
                                     "precision (use the assembled prior)",
                         gmm_latent_family(lat));
    if (rows && ncon && !gmm_latent_has_rows_rev_q(lat))
        return gmm_error(GMM_EINVAL, "vi: the prior's square root does not take constraints "
                                     "(use the assembled prior)");
    gmm_vi *v = gmm_calloc(1, sizeof *v);
    if (!v)
        return gmm_error(GMM_ENOMEM, "vi: out of memory");
    const gmm_objective *obj = gmm_problem_objective(p);
    v->prob = p;
    v->lat = lat;
    v->par = *par;
    v->lik = *gmm_problem_lik(p);
    v->n = gmm_latent_dim(lat);
    v->kl = gmm_latent_bandwidth(lat);
    v->map = gmm_latent_obs_map(lat);
    v->nrows = gmm_latent_nrows(lat);
    v->nl = gmm_latent_nparam(lat);
    v->np = v->lik.type->nparam;
    v->nparam = obj->nparam;
    v->ncoef = gmm_problem_ncoef(p);
    v->c0 = v->nparam - v->ncoef;
    v->varies = gmm_latent_obs_varies(lat);
    v->rows = rows;
    v->qrev = rows && gmm_latent_has_rows_rev_q(lat);
    v->nrowsG = rows ? gmm_latent_prior_nrows(lat) : 0;
    size_t n = v->n, kl = v->kl, w = v->map.width, nm1 = n ? n - 1 : 0;
    v->b = par->bandwidth == GMM_VI_BANDWIDTH_PRIOR ? kl : par->bandwidth;
    if (v->b > nm1)
        v->b = nm1;
    v->sk = smax(smax(v->b, w - 1), kl);
    if (v->sk > nm1)
        v->sk = nm1;
    v->dk = smax(v->b, kl);
    if (v->dk > nm1)
        v->dk = nm1;
    v->nvar = n + gmm_band_size(n, v->b, 0);
    const double *y = gmm_problem_y(p), *e = gmm_problem_exposure(p);
    for (size_t r = 0; r < v->nrows; r++)
        v->nobs += !isnan(y[r]);
    size_t no = v->nobs ? v->nobs : 1, nr = v->nrows ? v->nrows : 1;
    size_t npar = v->nparam ? v->nparam : 1, k1 = kl + 1;
    v->orow = gmm_malloc(no, sizeof *v->orow);
    v->ooff = gmm_malloc(no, sizeof *v->ooff);
    v->oord = gmm_malloc(no, sizeof *v->oord);
    v->oy = gmm_malloc(no, sizeof *v->oy);
    v->ow = gmm_problem_weights(p) ? gmm_malloc(no, sizeof *v->ow) : NULL;
    v->oe = gmm_malloc(no, sizeof *v->oe);
    size_t nnz = gmm_obsmap_nnz(&v->map), onz = 0;
    for (size_t r = 0; r < v->nrows; r++)
        if (!isnan(y[r]))
            onz += gmm_obsmap_row_hi(&v->map, r) - gmm_obsmap_row_lo(&v->map, r);
    v->orowptr = gmm_malloc(no + 1, sizeof *v->orowptr);
    v->opos = v->map.pos ? gmm_malloc(onz ? onz : 1, sizeof *v->opos) : NULL;
    v->ocoef = gmm_malloc(onz ? onz : 1, sizeof *v->ocoef);
    v->coef_all = gmm_malloc(nnz ? nnz : 1, sizeof *v->coef_all);
    v->coefbar_all = v->varies ? gmm_malloc(nnz ? nnz : 1, sizeof *v->coefbar_all) : NULL;
    v->mu = gmm_malloc(no, sizeof *v->mu);
    v->s2 = gmm_malloc(no, sizeof *v->s2);
    v->ea = gmm_malloc(no, sizeof *v->ea);
    v->offs = gmm_calloc(nr, sizeof *v->offs);
    v->oshift = gmm_calloc(no, sizeof *v->oshift);
    v->ec = gmm_malloc(no, sizeof *v->ec);
    v->rule = gmm_calloc(no, sizeof *v->rule);
    v->dpar = gmm_calloc(GMM_LIK_MAXPARAM, sizeof *v->dpar);
    v->lambda = gmm_calloc(v->nvar, sizeof *v->lambda);
    v->theta = gmm_malloc(npar, sizeof *v->theta);
    v->thbar = gmm_malloc(npar, sizeof *v->thbar);
    v->tmp = gmm_malloc(n, sizeof *v->tmp);
    v->grow = gmm_malloc(k1, sizeof *v->grow);
    v->Sg = gmm_malloc(k1, sizeof *v->Sg);
    v->work = gmm_malloc(4 * k1, sizeof *v->work);
    v->cwork = gmm_malloc(gmm_band_chol_work_size(kl), sizeof *v->cwork);
    v->L = gmm_band_alloc(n, v->b, 0, GMM_BAND_LOWER);
    v->Lbar = gmm_band_alloc(n, v->b, 0, GMM_BAND_LOWER);
    v->S = gmm_band_alloc(n, v->sk, 0, GMM_BAND_SYMMETRIC);
    v->Sbar = gmm_band_alloc(n, v->sk, 0, GMM_BAND_SYMMETRIC);
    v->K = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    v->Kbar = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
    v->D = gmm_band_alloc(n, v->dk, 0, GMM_BAND_SYMMETRIC);
    int ok = v->orow && v->ooff && v->oord && v->orowptr && (v->opos || !v->map.pos) && v->oy &&
             (v->ow || !gmm_problem_weights(p)) &&
             v->oe && v->ocoef && v->coef_all && (v->coefbar_all || !v->varies) && v->mu &&
             v->s2 && v->ea && v->offs && v->oshift && v->ec && v->rule && v->dpar &&
             v->lambda && v->theta && v->thbar && v->tmp && v->grow && v->Sg && v->work &&
             v->cwork && v->L && v->Lbar && v->S && v->Sbar && v->K && v->Kbar && v->D;
    v->omap = (gmm_obsmap){.nrows = v->nobs, .width = v->map.width, .offset = v->ooff,
                           .rowptr = v->orowptr, .pos = v->opos, .coef = v->ocoef};
    if (ok && rows) {
        size_t sg = gmm_latent_prior_segment(lat), nJ = k1 + sg; /* >= a window's width */
        v->seg = sg;
        v->Smo = gmm_malloc(2 * v->nrowsG * (sg ? sg : 1), sizeof *v->Smo);
        v->rw = gmm_malloc(sg * k1 + 2 * sg + nJ * nJ + v->b * nJ + sg * nJ + sg * v->b + v->b +
                               nJ + v->b * v->b + 1,
                           sizeof *v->rw);
        v->rfirst = gmm_malloc(2 * (sg ? sg : 1), sizeof *v->rfirst);
        v->mlo = gmm_malloc(n ? n : 1, sizeof *v->mlo);
        v->Dlo = gmm_band_alloc(n, v->dk, 0, GMM_BAND_SYMMETRIC);
        ok = v->Smo && v->rw && v->rfirst && v->mlo && v->Dlo;
    } else if (ok) {
        v->Q = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
        v->Qbar = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
        v->fQ = gmm_factor_band_alloc(n, kl);
        ok = v->Q && v->Qbar && v->fQ;
    }
    if (ok && ncon) {
        v->con = gmm_constr_alloc(n, ncon, gmm_latent_constraints(lat),
                                  gmm_latent_constraint_pins(lat));
        v->Sc = gmm_band_alloc(n, v->sk, 0, GMM_BAND_SYMMETRIC);
        v->mc = gmm_malloc(n, sizeof *v->mc);
        v->mcbar = gmm_malloc(n, sizeof *v->mcbar);
        ok = v->con && v->Sc && v->mc && v->mcbar;
    }
    if (!ok) {
        st = gmm_error(GMM_ENOMEM, "vi: out of memory for %zu latents (bandwidth %zu, "
                                   "covariance band %zu)",
                       n, v->b, v->sk);
        gmm_vi_free(v);
        return st;
    }
    memcpy(v->theta, obj->value, v->nparam * sizeof *v->theta);
    const size_t *off = gmm_latent_obs_offset(lat);
    v->orowptr[0] = 0;
    for (size_t r = 0, o = 0; r < v->nrows; r++) {
        if (isnan(y[r]))
            continue;
        size_t lo = gmm_obsmap_row_lo(&v->map, r), hi = gmm_obsmap_row_hi(&v->map, r);
        v->orow[o] = r;
        v->ooff[o] = off[r];
        v->oy[o] = y[r];
        v->oe[o] = e ? e[r] : 1.0;
        if (v->ow)
            v->ow[o] = gmm_problem_weights(p)[r];
        v->orowptr[o + 1] = v->orowptr[o] + (hi - lo);
        if (v->map.pos)
            memcpy(v->opos + v->orowptr[o], v->map.pos + lo, (hi - lo) * sizeof *v->opos);
        o++;
    }
    if ((st = sort_by_offset(v))) {
        gmm_vi_free(v);
        return st;
    }
    if (!v->varies) {
        if ((st = gmm_latent_obs_values(lat, v->theta, v->coef_all))) {
            gmm_vi_free(v);
            return st;
        }
        gather_coef(v);
    }
    v->start = "given";
    *out = v;
    return GMM_OK;
}

static gmm_status theta_check(gmm_vi *v, const double *theta)
{
    gmm_status st = gmm_latent_theta_check(v->lat, theta);
    for (size_t k = 0; st == GMM_OK && k < v->np; k++) {
        double t = theta[v->nl + k];
        if (!isfinite(t) || !(t > 0.0))
            st = gmm_error_at(GMM_EINVAL, v->nl + k, "vi: likelihood parameter %zu = %g must be "
                                                     "positive and finite",
                              k, t);
    }
    for (size_t k = v->c0; st == GMM_OK && k < v->nparam; k++)
        if (!isfinite(theta[k]))
            st = gmm_error(GMM_EINVAL, "vi: coefficient %g is not finite", theta[k]);
    return st == GMM_EDOM ? GMM_EINVAL : st;
}

gmm_status gmm_vi_set_state(gmm_vi *v, const double *theta, const double *m, const gmm_band *L)
{
    gmm_status st;
    if (!v)
        return gmm_error(GMM_EINVAL, "gmm_vi_set_state: NULL argument");
    if (theta && (st = theta_check(v, theta)))
        return st;
    if (L && (L->n != v->n || L->kind != GMM_BAND_LOWER))
        return gmm_error(GMM_EDIM, "gmm_vi_set_state: L must be LOWER %zu x %zu", v->n, v->n);
    for (size_t j = 0; L && j < v->n; j++) {
        double d = gmm_band_get(L, j, j);
        if (!(d > 0.0) || !isfinite(d))
            return gmm_error_at(GMM_EINVAL, j, "gmm_vi_set_state: L(%zu, %zu) = %g is not "
                                               "positive and finite",
                                j, j, d);
    }
    if (theta)
        memcpy(v->theta, theta, v->nparam * sizeof *theta);
    if (m)
        memcpy(v->lambda, m, v->n * sizeof *m);
    else
        memset(v->lambda, 0, v->n * sizeof *v->lambda);
    if (L) {
        if ((st = gmm_band_copy_band(v->L, L)))
            return st;
    } else {
        gmm_band_set_zero(v->L);
        for (size_t j = 0; j < v->n; j++)
            *gmm_band_ptr(v->L, j, j) = 1.0;
    }
    vi_pack(v);
    if ((st = vi_canonical(v)))
        return st;
    v->have_start = 1;
    v->start = "given";
    return GMM_OK;
}

gmm_status gmm_vi_set_state_from(gmm_vi *v, const double *theta, gmm_vi *src)
{
    if (!v || !src)
        return gmm_error(GMM_EINVAL, "gmm_vi_set_state_from: NULL argument");
    gmm_band *L = gmm_band_alloc(v->n, v->b, 0, GMM_BAND_LOWER);
    if (!L)
        return gmm_error(GMM_ENOMEM, "vi: out of memory for q's factor");
    gmm_status st = gmm_vi_factor(src, L);
    if (st == GMM_OK)
        st = gmm_vi_set_state(v, theta, gmm_vi_mean(src), L);
    gmm_band_free(L);
    return st;
}

/* K = chol(Q_p + sum_i w_i h_i h_i') (w NULL: the prior alone) at v->theta,
 * the coefficients set (set_hyper); with pin, + tau E_S E_S' (constr.h's
 * pins: positive definite when Q_p is intrinsic). */
static gmm_status factor_start(gmm_vi *v, const double *w, int pin)
{
    gmm_status st;
    size_t wd = v->map.width;
    if (v->rows) {
        /* fold the prior's rows and sqrt(w_i) h_i, merged by first column */
        gmm_prior_rows G;
        if ((st = gmm_latent_prior_rows(v->lat, v->theta, &G, NULL)))
            return st;
        if ((st = gmm_band_set_kind(v->K, GMM_BAND_LOWER)))
            return st;
        gmm_band_set_zero(v->K);
        size_t io = 0, first = 0, gw = 0;
        double *hv = v->Sg;
        for (size_t i = 0; i < G.nrows || (w && io < v->nobs);) {
            if (i < G.nrows && gw == 0)
                gw = G.row(G.ctx, i, &first, v->grow);
            size_t o = w && io < v->nobs ? v->oord[io] : 0;
            if (w && io < v->nobs && (i == G.nrows || v->ooff[o] < first)) {
                io++;
                if (!(w[o] > 0.0))
                    continue;
                double sw = sqrt(w[o]);
                memset(hv, 0, wd * sizeof *hv);
                for (size_t k = v->orowptr[o]; k < v->orowptr[o + 1]; k++)
                    hv[entry_at(v, o, k) - v->ooff[o]] = sw * v->ocoef[k];
                if ((st = gmm_band_chol_add_row(v->K, v->ooff[o], wd, hv, v->work)))
                    return st;
                continue;
            }
            if ((st = gmm_band_chol_add_row(v->K, first, gw, v->grow, v->work)))
                return st;
            i++;
            gw = 0;
        }
        return gmm_band_chol_rows_check(v->K);
    }
    if ((st = gmm_latent_prior(v->lat, v->theta, v->Q, NULL)))
        return st;
    if ((st = gmm_band_copy(v->K, v->Q)))
        return st;
    if (pin)
        gmm_constr_pin(v->con, gmm_constr_tau(v->con, v->Q), v->K);
    for (size_t i = 0; w && i < v->nobs; i++) {
        const double *h = v->ocoef;
        for (size_t a = v->orowptr[i]; a < v->orowptr[i + 1]; a++)
            for (size_t c = v->orowptr[i]; c <= a; c++)
                *gmm_band_ptr(v->K, entry_at(v, i, a), entry_at(v, i, c)) += w[i] * h[a] * h[c];
    }
    return gmm_band_chol_decomp_work(v->K, v->K, v->cwork);
}

/* L from K (restricted to b); with constraints, when K came without pins
 * and is singular off the subspace in rounding (constrained_band), K and L
 * again with the pins: an intrinsic Q_p is always singular there, and so
 * is Q_p + H'WH when two intrinsic terms are read only through their sum. */
static gmm_status start_factor(gmm_vi *v, const double *w)
{
    gmm_status st;
    int pin = v->con && !w;
    st = factor_start(v, w, pin);
    if (st == GMM_ENOTPD && v->con && !pin)
        st = factor_start(v, w, pin = 1);
    if (st || (st = gmm_band_copy_band(v->L, v->K)))
        return st;
    if (!v->con || pin)
        return GMM_OK;
    if ((st = gmm_band_chol_selinv(v->L, v->S)))
        return st;
    st = vi_constrained_band(v);
    if (st != GMM_EDOM && st != GMM_ENOTPD)
        return st;
    if ((st = factor_start(v, w, 1)))
        return st;
    return gmm_band_copy_band(v->L, v->K);
}

gmm_status gmm_vi_start_laplace(gmm_vi *v, const char **start)
{
    gmm_status st;
    if (!v)
        return gmm_error(GMM_EINVAL, "gmm_vi_start_laplace: NULL argument");
    double *m = v->lambda;
    int laplace = 1;
    st = gmm_problem_posterior(v->prob, v->theta, m, NULL);
    if (st == GMM_EDOM || st == GMM_ENOTPD || st == GMM_ENOCONV) {
        laplace = 0;
        memset(m, 0, v->n * sizeof *m);
    } else if (st) {
        return st;
    }
    if ((st = vi_set_hyper(v, v->theta)))
        return st;
    double *w = NULL;
    if (laplace) {
        w = v->ec; /* scratch: -d2 log p at the mode */
        double out[4];
        for (size_t i = 0; i < v->nobs; i++) {
            double f = v->oshift[i];
            for (size_t a = v->orowptr[i]; a < v->orowptr[i + 1]; a++)
                f += v->ocoef[a] * m[entry_at(v, i, a)];
            gmm_lik_eval_weighted(&v->lik, v->oy[i], v->oe[i], v->ow ? v->ow[i] : 1.0, NULL, f,
                                  out, NULL);
            w[i] = -out[2];
        }
    }
    if ((st = start_factor(v, w)))
        return st;
    vi_pack(v);
    if ((st = vi_canonical(v)))
        return st;
    v->have_start = 1;
    v->start = laplace ? "laplace" : "prior";
    if (start)
        *start = v->start;
    return GMM_OK;
}
