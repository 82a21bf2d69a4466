/* problem_laplace.c -- the Laplace approximation of a problem: its
 * workspace, the square-root form's smoother and the mode at theta. */
#include "gmm/problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/laplace.h"
#include "infer_impl.h"
#include "problem_impl.h"

/* Observed rows' coefficients from all rows' (after gmm_latent_obs_values). */
static void gather_coef(gmm_problem *p)
{
    for (size_t i = 0; i < p->nobs; i++) {
        size_t lo = gmm_obsmap_row_lo(&p->map, p->orow[i]);
        memcpy(p->ocoef + p->orowptr[i], p->coef_all + lo,
               (gmm_obsmap_row_hi(&p->map, p->orow[i]) - lo) * sizeof *p->ocoef);
    }
}

/* The smoother of the square-root form (laplace.h) on the latent's rows:
 * observation i is row orow[i]. */
static gmm_status sm_smooth(void *ctx, const double *yt, const double *wt, int record, double *ml,
                            double *mean)
{
    gmm_problem *p = ctx;
    double ws = 0.0;
    for (size_t r = 0; r < p->nrows; r++)
        p->sy[r] = NAN;
    for (size_t i = 0; i < p->nobs; i++) {
        p->sy[p->orow[i]] = yt[i];
        p->sw[p->orow[i]] = wt[i];
        ws += wt[i];
    }
    p->wsum = ws;
    const double *th = p->stheta; /* then NULL: the same theta (latent.h) */
    p->stheta = NULL;
    return gmm_latent_wls(p->lat, th, p->sy, p->sw, record, ml, mean);
}

static gmm_status sm_quad(void *ctx, const double *x, double *q)
{
    gmm_problem *p = ctx;
    return gmm_latent_wls_quad(p->lat, x, q);
}

static gmm_status sm_var(void *ctx, double *s)
{
    gmm_problem *p = ctx;
    gmm_status st = gmm_latent_wls_var(p->lat, p->sv);
    for (size_t i = 0; !st && i < p->nobs; i++)
        s[i] = p->sv[p->orow[i]];
    return st;
}

static gmm_status sm_adjoint(void *ctx, const double *rw, double *u)
{
    gmm_problem *p = ctx;
    memset(p->sr, 0, p->nrows * sizeof *p->sr);
    for (size_t i = 0; i < p->nobs; i++)
        p->sr[p->orow[i]] = rw[i];
    gmm_status st = gmm_latent_wls_adjoint(p->lat, p->sr, p->su, p->sgrad);
    for (size_t i = 0; !st && i < p->nobs; i++)
        u[i] = p->su[p->orow[i]];
    return st;
}

/* Rows that vary with theta: zeta and Sigma h_i in observation order. */
static gmm_status sm_rowcov(void *ctx, double *zeta, double *sh)
{
    gmm_problem *p = ctx;
    gmm_status st = gmm_latent_wls_rowcov(p->lat, zeta, p->ssh);
    for (size_t i = 0; !st && i < p->nobs; i++) {
        size_t lo = gmm_obsmap_row_lo(&p->map, p->orow[i]);
        memcpy(sh + p->orowptr[i], p->ssh + lo,
               (gmm_obsmap_row_hi(&p->map, p->orow[i]) - lo) * sizeof *sh);
    }
    return st;
}

/* Prior and mode at theta (the Laplace case); allow_sqrt: the square-root
 * form may be taken (not where P's factor is wanted: draws, the Laplace
 * metric). */
gmm_status problem_laplace_forward_form(gmm_problem *p, const double *theta, double *f,
                                       int allow_sqrt)
{
    gmm_status st;
    double ld;
    /* the Laplace metric borrows the sparse form's factor of P, which this
     * evaluation refactors: the whitening must be set up again (the
     * prior's has a factor of its own) */
    if (p->sparse && p->metric == GMM_METRIC_LAPLACE)
        p->wready = 0;
    if ((st = set_lik(p, theta)))
        return st;
    if (p->ncoef) {
        gmm_problem_offsets(p, theta, p->off);
        for (size_t i = 0; i < p->nobs; i++)
            p->oshift[i] = p->off[p->orow[i]];
    }
    /* the square-root form where the family's --factor rule takes it (the
     * weights of the last mode standing in for this one's) */
    int rows = 0;
    if (allow_sqrt && p->sy && (st = gmm_latent_wls_rows(p->lat, theta, p->wsum, &rows)))
        return st;
    (void)gmm_latent_factorisation(p->lat, &p->sbound);
    /* the square-root form folds rows sqrt(w_i) h_i: no row with w_i < 0 */
    p->sqrt_declined = rows && p->lik.type->not_log_concave;
    if (p->sqrt_declined && !gmm_latent_assembled(p->lat))
        return gmm_error(GMM_EINVAL, "the %s likelihood is not log-concave, so its Laplace "
                                     "approximation needs the assembled precision, which this "
                                     "model (a damped kernel beside other terms) does not have",
                         p->lik.type->name);
    if (p->sqrt_declined)
        rows = 0;
    if (rows && gmm_latent_obs_varies(p->lat)) {
        if ((st = gmm_latent_obs_values(p->lat, theta, p->coef_all)))
            return st;
        gather_coef(p);
    }
    if (rows) {
        double b = 0.0; /* the intercept is a coefficient: in the shifts */
        int warm = !p->cold;
        p->cold = 0;
        /* Newton on the assembled precision where the family admits it is
         * cheaper per step: its mode starts the square-root form, which
         * keeps it when its own step from there is below rounding (one
         * recorded smoothing); its failures (rounding, a spacing below the
         * Cholesky's limit) only cost the start */
        if (gmm_latent_prior(p->lat, theta, p->Q, &ld) == GMM_OK &&
            gmm_laplace_mode(p->lap, p->Q, &p->lobs, &p->lik, b, NULL, warm, &p->lpar) ==
                GMM_OK)
            warm = 1;
        gmm_error_clear();
        p->stheta = theta;
        p->sqrt_form = 1;
        return gmm_laplace_eval_sqrt(p->lap, &p->sm, &p->lobs, &p->lik, b, NULL, warm, &p->lpar,
                                     f);
    }
    p->sqrt_form = 0;
    if (gmm_latent_obs_varies(p->lat)) {
        if ((st = gmm_latent_obs_values(p->lat, theta, p->coef_all)))
            return st;
        gather_coef(p);
    }
    if ((st = p->sparse ? gmm_latent_prior_sparse(p->lat, theta, p->Qs, &ld)
                        : gmm_latent_prior(p->lat, theta, p->Q, &ld)))
        return st;
    p->ld = ld;
    int warm = !p->cold;
    p->cold = 0;
    if (p->sparse)
        return gmm_laplace_eval_sparse(p->lap, p->Qs, ld, &p->lobs, &p->lik, 0.0, NULL, warm,
                                       &p->lpar, f);
    return gmm_laplace_eval(p->lap, p->Q, ld, &p->lobs, &p->lik, 0.0, NULL, warm, &p->lpar, f);
}

gmm_status problem_laplace_forward(gmm_problem *p, const double *theta, double *f)
{
    return problem_laplace_forward_form(p, theta, f, 1);
}

/* The observed rows and the Laplace workspace: at allocation for a
 * non-Gaussian likelihood, on the first draw of the latents for the
 * Gaussian one (whose marginal likelihood does not need them). */
gmm_status problem_laplace_alloc(gmm_problem *p)
{
    gmm_status st;
    size_t nr = p->nrows ? p->nrows : 1, no = p->nobs ? p->nobs : 1, w = p->map.width;
    size_t kl = gmm_latent_bandwidth(p->lat),
           nz = gmm_obsmap_nnz(&p->map) ? gmm_obsmap_nnz(&p->map) : 1;
    const size_t *off = gmm_latent_obs_offset(p->lat);
    p->orow = gmm_malloc(no, sizeof *p->orow);
    p->ooff = gmm_malloc(no, sizeof *p->ooff);
    p->orowptr = gmm_malloc(no + 1, sizeof *p->orowptr);
    p->oy = gmm_malloc(no, sizeof *p->oy);
    p->oe = gmm_malloc(no, sizeof *p->oe);
    if (p->wt && !(p->owt = gmm_malloc(no, sizeof *p->owt)))
        return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation");
    if (!p->orow || !p->ooff || !p->orowptr || !p->oy || !p->oe)
        return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation");
    size_t o = 0;
    p->orowptr[0] = 0;
    for (size_t r = 0; r < p->nrows; r++) {
        if (isnan(p->y[r]))
            continue;
        p->orow[o] = r;
        p->ooff[o] = off[r];
        p->oy[o] = p->y[r];
        p->oe[o] = p->e ? p->e[r] : 1.0;
        if (p->owt)
            p->owt[o] = p->wt[r];
        p->orowptr[o + 1] =
            p->orowptr[o] + (gmm_obsmap_row_hi(&p->map, r) - gmm_obsmap_row_lo(&p->map, r));
        o++;
    }
    size_t nc = gmm_lik_nconst(&p->lik);
    if (!(p->ocst = gmm_malloc(nc ? nc * no : 1, sizeof *p->ocst)))
        return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation");
    for (size_t i = 0; i < p->nobs; i++)
        gmm_lik_row_const(&p->lik, p->oy[i], p->oe[i], p->ocst + i * nc);
    size_t onz = p->orowptr[p->nobs] ? p->orowptr[p->nobs] : 1;
    if (p->map.pos) {
        if (!(p->opos = gmm_malloc(onz, sizeof *p->opos)))
            return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation");
        for (size_t i = 0; i < p->nobs; i++) {
            size_t lo = gmm_obsmap_row_lo(&p->map, p->orow[i]);
            memcpy(p->opos + p->orowptr[i], p->map.pos + lo,
                   (gmm_obsmap_row_hi(&p->map, p->orow[i]) - lo) * sizeof *p->opos);
        }
    }
    p->ocoef = gmm_malloc(onz, sizeof *p->ocoef);
    p->ocoefbar = gmm_malloc(onz, sizeof *p->ocoefbar);
    if (!p->coef_all) /* the exact path with coefficients has it already */
        p->coef_all = gmm_malloc(nz, sizeof *p->coef_all);
    p->coefbar_all = gmm_malloc(nz, sizeof *p->coefbar_all);
    if (p->ncoef) {
        p->oshift = gmm_malloc(no, sizeof *p->oshift);
        p->oshiftbar = gmm_malloc(no, sizeof *p->oshiftbar);
        if (!p->oshift || !p->oshiftbar)
            return gmm_error(GMM_ENOMEM, "out of memory for the model");
    }
    if (!p->orow || !p->ooff || !p->oy || !p->oe || !p->ocoef || !p->ocoefbar || !p->coef_all ||
        !p->coefbar_all)
        return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation "
                                     "(%zu latents)",
                         p->n);
    p->lobs = (gmm_laplace_obs){
        .map = {.nrows = p->nobs, .width = w, .offset = p->ooff,
                .rowptr = p->map.rowptr ? p->orowptr : NULL, .pos = p->opos, .coef = p->ocoef},
        .y = p->oy, .e = p->oe, .shift = p->oshift, .cst = p->ocst};
    if (p->sparse) {
        /* Q's pattern from the latent; P's (with H'H's) analysed by the
         * sparse form once, here */
        if ((st = gmm_latent_prior_pattern(p->lat, &p->Qs)))
            return st;
        if (!(p->Qsbar = gmm_sparse_alloc_like(p->Qs)))
            return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation "
                                         "(%zu latents, %zu entries)",
                             p->n, p->Qs->nnz);
        p->lap = gmm_laplace_alloc_sparse(p->Qs, &p->lobs.map);
    } else {
        p->Q = gmm_band_alloc(p->n, kl, 0, GMM_BAND_SYMMETRIC);
        p->Qbar = gmm_band_alloc(p->n, kl, 0, GMM_BAND_SYMMETRIC);
        if (!p->Q || !p->Qbar)
            return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation "
                                         "(%zu latents, bandwidth %zu)",
                             p->n, kl);
        p->lap = gmm_laplace_alloc(p->n, kl, gmm_latent_cov_bandwidth(p->lat), p->nobs, w);
    }
    if (!p->lap)
        return gmm_error_status();
    if ((st = gmm_laplace_constrain(p->lap, gmm_latent_nconstr(p->lat),
                                    gmm_latent_constraints(p->lat),
                                    gmm_latent_constraint_pins(p->lat))))
        return st;
    if ((st = gmm_latent_obs_values(p->lat, p->obj.value, p->coef_all)))
        return st;
    gather_coef(p);
    gmm_laplace_set_weights(p->lap, p->owt);
    if (gmm_latent_has_wls(p->lat) && !p->sparse) {
        /* a family with a square-root smoother: its scratch */
        int varies = gmm_latent_obs_varies(p->lat);
        p->sy = gmm_malloc(5 * nr, sizeof *p->sy);
        p->ssh = varies ? gmm_malloc(gmm_obsmap_nnz(&p->map) + 1, sizeof *p->ssh) : NULL;
        if (!p->sy || (varies && !p->ssh))
            return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation");
        p->sw = p->sy + nr;
        p->sv = p->sw + nr;
        p->sr = p->sv + nr;
        p->su = p->sr + nr;
        for (size_t r = 0; r < 2 * nr; r++)
            p->sy[r] = 0.0;
        p->sm = (gmm_laplace_smoother){p,      sm_smooth,  sm_quad,
                                       sm_var, sm_adjoint, varies ? sm_rowcov : NULL};
    }
    p->wsum = (double)p->nobs;
    return GMM_OK;
}

gmm_status gmm_problem_draw_latent(gmm_problem *p, const double *theta, size_t m,
                                   const double *z, double *x, double *logw)
{
    gmm_status st;
    double lq;
    if (!p || !theta || !z || !x)
        return gmm_error(GMM_EINVAL, "gmm_problem_draw_latent: NULL argument");
    if (!p->lap && (st = problem_laplace_alloc(p)))
        return st;
    /* Gaussian too: Newton is exact there, and P's factor is what a draw needs */
    if ((st = problem_laplace_forward_form(p, theta, &lq, 0)))
        return st;
    for (size_t k = 0; k < m; k++)
        if ((st = gmm_laplace_draw(p->lap, z + k * p->n, x + k * p->n, logw ? logw + k : NULL)))
            return st;
    return GMM_OK;
}
