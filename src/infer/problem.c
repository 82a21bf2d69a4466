/* problem.c -- latent model + likelihood + data as an objective and a
 * posterior (problem.h). */
#include "gmm/problem.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/laplace.h"
#include "gmm/rng.h"
#include "gmm/summary.h"

struct gmm_problem {
    gmm_latent *lat;
    const gmm_lik *lik0;
    gmm_lik lik;          /* values of the current evaluation */
    size_t nrows, n, nl, np, nparam, width, nobs;
    /* the latent's map (latent.h): nnz coefficients, sparse rows' pattern
     * (NULL: dense windows) */
    size_t nnz;
    const size_t *rowptr, *pos;
    int exact;
    double *y, *e;        /* nrows (e NULL: no exposure) */
    /* fixed effects: the last ncoef parameters, design X (nrows x ncoef) */
    size_t ncoef, c0;     /* c0 = nparam - ncoef */
    int const_off;        /* X is empty or a column of ones */
    const double *X;      /* owned (Xown, freed here) or the caller's (borrowed) */
    double *Xown;
    double *off, *offbar; /* nrows each: X beta, and its adjoint */
    double *oshift, *oshiftbar; /* observed rows' X beta and adjoint (Laplace) */
    double *ry, *rx;      /* exact: y - X beta (nrows), posterior mean of x (n) */
    /* observed rows, in the latent's row order */
    size_t *orow, *ooff, *orowptr, *opos; /* orowptr: nobs + 1; opos: sparse */
    double *oy, *oe, *ocoef, *coef_all, *coefbar_all, *ocoefbar; /* nnz of theirs or all */
    double *ocst;         /* their likelihood constants (nobs x nconst) */
    gmm_laplace_obs lobs;
    gmm_band *Q, *Qbar;
    gmm_laplace *lap;
    /* the Laplace approximation in the square-root form (laplace.h): the
     * smoother over the latent's rows, full-length scratch (nrows each:
     * data, weights, variances, adjoint weights and values), theta and the
     * gradient of the current evaluation, the observations' total weight
     * at the last mode (for the choice) */
    gmm_laplace_smoother sm;
    double *sy, *sw, *sv, *sr, *su, *ssh; /* ssh: nrows x width (rows that vary) */
    const double *stheta;
    double *sgrad;
    double wsum, sbound;
    int sqrt_form;        /* the last Laplace evaluation took it */
    int sqrt_declined;    /* ... or the family's rule asked for it, but the
                           * likelihood is not log-concave */
    double *thetabar;     /* nparam scratch */
    double ld;            /* log|Q| of the last prior (NAN: not known) */
    int cold;             /* the next Laplace evaluation starts from x = 0 */
    /* whitened log joint: theta fixed by gmm_problem_whiten_setup */
    int wready;
    double *woff;         /* X beta at the setup's theta (nrows) */
    double wb;            /* the intercept there, when the offset is constant */
    gmm_lik wlik;
    double *wcoef, *wx, *wg; /* nnz, n, n */
    /* The observed rows packed for the density's loops (row i of the nobs
     * is data row wrow[i]): y, e (1 without exposure), the likelihood's
     * constants (nobs x nconst); coefficients [wptr[i], wptr[i + 1]) of
     * wh, each reading latent widx[k]; at the setup's theta X beta (wo)
     * and the coefficients (wh); scratch f, d log p / df and h'x (wf, wd,
     * whx) */
    size_t *wrow, *wptr, *widx;
    int wone;             /* every row has one coefficient (wptr[i] = i) */
    double *wy, *we, *wconst, *wo, *wh, *wf, *wd, *whx;
    /* the Laplace metric: x = wxh + wL^-T v, wL wL' = Q + H' diag(wwt) H
     * at the mode (wwt: nobs), wc = wL' wxh */
    gmm_metric metric;
    gmm_band *wL;
    size_t *wreach;       /* gmm_band_tri_reach of wL (n) */
    double *wxh, *wqx, *wc, *wwt; /* n, n, n, nobs */
    /* joint sampling of the hyperparameters */
    int *jsamp;           /* nparam flags */
    gmm_prior *jprior;    /* nparam */
    double *jtheta, *jbar, *jcbar; /* nparam, nparam, nnz */
    size_t jn;            /* sampled count */
    gmm_objective obj;
    char (*names)[64];
};

void gmm_problem_free(gmm_problem *p)
{
    if (!p)
        return;
    gmm_free(p->y);
    gmm_free(p->e);
    gmm_free(p->Xown);
    gmm_free(p->off);
    gmm_free(p->offbar);
    gmm_free(p->oshift);
    gmm_free(p->oshiftbar);
    gmm_free(p->ry);
    gmm_free(p->rx);
    gmm_free(p->woff);
    gmm_free(p->orow);
    gmm_free(p->ooff);
    gmm_free(p->oy);
    gmm_free(p->oe);
    gmm_free(p->ocst);
    gmm_free(p->ocoef);
    gmm_free(p->orowptr);
    gmm_free(p->opos);
    gmm_free(p->coef_all);
    gmm_free(p->coefbar_all);
    gmm_free(p->ocoefbar);
    gmm_band_free(p->Q);
    gmm_band_free(p->Qbar);
    gmm_laplace_free(p->lap);
    gmm_free(p->thetabar);
    gmm_free(p->wcoef);
    gmm_free(p->wrow);
    gmm_free(p->wy);
    gmm_free(p->jsamp);
    gmm_free(p->jprior);
    gmm_free(p->jtheta);
    gmm_free(p->jbar);
    gmm_free(p->jcbar);
    gmm_free(p->wx);
    gmm_free(p->wg);
    gmm_band_free(p->wL);
    gmm_free(p->wreach);
    gmm_free(p->wxh);
    gmm_free(p->sy);
    gmm_free(p->ssh);
    gmm_free(p->obj.name);
    gmm_free(p->obj.value);
    gmm_free(p->obj.scale);
    gmm_free(p->obj.fixed);
    gmm_free(p->names);
    gmm_free(p);
}

static gmm_status set_lik(gmm_problem *p, const double *theta)
{
    return gmm_problem_lik_at(p, theta, &p->lik);
}

/* Row r's entries [row_lo, row_hi) of the latent's coefficients; entry k
 * reads latent offset[r] + row_pos. */
static size_t row_lo(const gmm_problem *p, size_t r)
{
    return p->rowptr ? p->rowptr[r] : r * p->width;
}
static size_t row_hi(const gmm_problem *p, size_t r)
{
    return p->rowptr ? p->rowptr[r + 1] : (r + 1) * p->width;
}
static size_t row_pos(const gmm_problem *p, size_t k, size_t lo)
{
    return p->pos ? p->pos[k] : k - lo;
}

/* Observed rows' coefficients from all rows' (after gmm_latent_obs_values). */
static void gather_coef(gmm_problem *p)
{
    for (size_t i = 0; i < p->nobs; i++) {
        size_t lo = row_lo(p, p->orow[i]);
        memcpy(p->ocoef + p->orowptr[i], p->coef_all + lo,
               (row_hi(p, p->orow[i]) - lo) * sizeof *p->ocoef);
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
        size_t lo = row_lo(p, p->orow[i]);
        memcpy(sh + p->orowptr[i], p->ssh + lo, (row_hi(p, p->orow[i]) - lo) * sizeof *sh);
    }
    return st;
}

/* Prior and mode at theta (the Laplace case); allow_sqrt: the square-root
 * form may be taken (not where P's factor is wanted: draws, the Laplace
 * metric). */
static gmm_status laplace_forward_form(gmm_problem *p, const double *theta, double *f,
                                       int allow_sqrt)
{
    gmm_status st;
    double ld;
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
            gmm_laplace_mode(p->lap, p->Q, &p->lobs, &p->lik, b, NULL, warm, NULL) == GMM_OK)
            warm = 1;
        gmm_error_clear();
        p->stheta = theta;
        p->sqrt_form = 1;
        return gmm_laplace_eval_sqrt(p->lap, &p->sm, &p->lobs, &p->lik, b, NULL, warm, NULL, f);
    }
    p->sqrt_form = 0;
    if (gmm_latent_obs_varies(p->lat)) {
        if ((st = gmm_latent_obs_values(p->lat, theta, p->coef_all)))
            return st;
        gather_coef(p);
    }
    if ((st = gmm_latent_prior(p->lat, theta, p->Q, &ld)))
        return st;
    p->ld = ld;
    int warm = !p->cold;
    p->cold = 0;
    return gmm_laplace_eval(p->lap, p->Q, ld, &p->lobs, &p->lik, 0.0, NULL, warm, NULL, f);
}

static gmm_status laplace_forward(gmm_problem *p, const double *theta, double *f)
{
    return laplace_forward_form(p, theta, f, 1);
}

/* The Gaussian marginal likelihood of r = y - X beta.  Its gradient in
 * beta is X'(K + noise I)^-1 r = X'(r - E[f | r]) / noise: the residual
 * from the posterior mean at the rows, so no dense matrix is formed. */
static gmm_status exact_eval(gmm_problem *p, const double *theta, double noise, double *f,
                             double *grad)
{
    gmm_status st;
    const double *y = p->y;
    if (p->ncoef) {
        gmm_problem_offsets(p, theta, p->off);
        for (size_t r = 0; r < p->nrows; r++)
            p->ry[r] = p->y[r] - p->off[r];
        y = p->ry;
    }
    if ((st = gmm_latent_gaussian(p->lat, theta, y, noise, f, grad, grad ? grad + p->nl : NULL)) ||
        !grad || !p->ncoef)
        return st;
    if ((st = gmm_latent_gaussian_posterior(p->lat, p->rx, NULL)) ||
        (gmm_latent_obs_varies(p->lat) &&
         (st = gmm_latent_obs_values(p->lat, theta, p->coef_all))))
        return st;
    const size_t *off = gmm_latent_obs_offset(p->lat);
    for (size_t r = 0; r < p->nrows; r++) {
        if (isnan(y[r])) {
            p->offbar[r] = 0.0;
            continue;
        }
        size_t lo = row_lo(p, r), hi = row_hi(p, r);
        const double *x = p->rx + off[r];
        double fr = 0.0;
        for (size_t k = lo; k < hi; k++)
            fr += p->coef_all[k] * x[row_pos(p, k, lo)];
        p->offbar[r] = (y[r] - fr) / noise;
    }
    memset(grad + p->c0, 0, p->ncoef * sizeof *grad);
    gmm_problem_offsets_rev(p, p->offbar, grad);
    return GMM_OK;
}

void gmm_problem_offsets(const gmm_problem *p, const double *theta, double *off)
{
    const double *beta = theta + p->c0;
    for (size_t r = 0; r < p->nrows; r++) {
        const double *xr = p->X + r * p->ncoef;
        double s = 0.0;
        for (size_t k = 0; k < p->ncoef; k++)
            s += xr[k] * beta[k];
        off[r] = s;
    }
}

void gmm_problem_offsets_rev(const gmm_problem *p, const double *offbar, double *thetabar)
{
    double *bb = thetabar + p->c0;
    for (size_t r = 0; r < p->nrows; r++) {
        const double *xr = p->X + r * p->ncoef;
        for (size_t k = 0; k < p->ncoef; k++)
            bb[k] += xr[k] * offbar[r];
    }
}

size_t gmm_problem_ncoef(const gmm_problem *p) { return p->ncoef; }

int gmm_problem_offset_constant(const gmm_problem *p, const double *theta, double *b)
{
    if (b)
        *b = p->ncoef ? theta[p->c0] : 0.0;
    return p->const_off;
}

static gmm_status eval(void *ctx, const double *theta, double *f, double *grad)
{
    gmm_problem *p = ctx;
    gmm_status st;
    if (p->exact) {
        double noise = theta[p->nl];
        if (!isfinite(noise) || !(noise > 0.0))
            return gmm_error_at(GMM_EDOM, p->nl, "likelihood.variance = %g must be positive "
                                                 "and finite",
                                noise);
        return exact_eval(p, theta, noise, f, grad);
    }
    if ((st = laplace_forward(p, theta, f)) || !grad)
        return st;
    memset(grad, 0, p->nparam * sizeof *grad);
    if (p->ncoef)
        memset(p->oshiftbar, 0, p->nobs * sizeof *p->oshiftbar);
    int varies = gmm_latent_obs_varies(p->lat);
    if (varies)
        memset(p->ocoefbar, 0, p->orowptr[p->nobs] * sizeof *p->ocoefbar);
    if (p->sqrt_form) {
        p->sgrad = grad;
        if ((st = gmm_laplace_grad_sqrt(p->lap, NULL, grad + p->nl, varies ? p->ocoefbar : NULL,
                                        p->ncoef ? p->oshiftbar : NULL)))
            return st;
    } else {
        gmm_band_set_zero(p->Qbar);
        if ((st = gmm_laplace_grad(p->lap, p->Qbar, NULL, grad + p->nl,
                                   varies ? p->ocoefbar : NULL, p->ncoef ? p->oshiftbar : NULL)))
            return st;
        /* log|Q|/2 is ours when the family gave log|Q| (laplace.h) */
        if ((st = gmm_latent_prior_rev(p->lat, p->Qbar, isnan(p->ld) ? 0.0 : 0.5, grad)))
            return st;
    }
    if (varies) {
        memset(p->coefbar_all, 0, p->nnz * sizeof *p->coefbar_all);
        for (size_t i = 0; i < p->nobs; i++) {
            size_t lo = row_lo(p, p->orow[i]);
            memcpy(p->coefbar_all + lo, p->ocoefbar + p->orowptr[i],
                   (row_hi(p, p->orow[i]) - lo) * sizeof *p->ocoefbar);
        }
        if ((st = gmm_latent_obs_coef_rev(p->lat, theta, p->coefbar_all, grad)))
            return st;
    }
    if (p->ncoef) {
        memset(p->offbar, 0, p->nrows * sizeof *p->offbar);
        for (size_t i = 0; i < p->nobs; i++)
            p->offbar[p->orow[i]] = p->oshiftbar[i];
        gmm_problem_offsets_rev(p, p->offbar, grad);
    }
    return GMM_OK;
}

/* The observed rows and the Laplace workspace: at allocation for a
 * non-Gaussian likelihood, on the first draw of the latents for the
 * Gaussian one (whose marginal likelihood does not need them). */
static gmm_status laplace_alloc(gmm_problem *p)
{
    gmm_status st;
    size_t nr = p->nrows ? p->nrows : 1, no = p->nobs ? p->nobs : 1, w = p->width;
    size_t kl = gmm_latent_bandwidth(p->lat), nz = p->nnz ? p->nnz : 1;
    const size_t *off = gmm_latent_obs_offset(p->lat);
    p->orow = gmm_malloc(no, sizeof *p->orow);
    p->ooff = gmm_malloc(no, sizeof *p->ooff);
    p->orowptr = gmm_malloc(no + 1, sizeof *p->orowptr);
    p->oy = gmm_malloc(no, sizeof *p->oy);
    p->oe = gmm_malloc(no, sizeof *p->oe);
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
        p->orowptr[o + 1] = p->orowptr[o] + (row_hi(p, r) - row_lo(p, r));
        o++;
    }
    size_t nc = gmm_lik_nconst(&p->lik);
    if (!(p->ocst = gmm_malloc(nc ? nc * no : 1, sizeof *p->ocst)))
        return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation");
    for (size_t i = 0; i < p->nobs; i++)
        gmm_lik_row_const(&p->lik, p->oy[i], p->oe[i], p->ocst + i * nc);
    size_t onz = p->orowptr[p->nobs] ? p->orowptr[p->nobs] : 1;
    if (p->pos) {
        if (!(p->opos = gmm_malloc(onz, sizeof *p->opos)))
            return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation");
        for (size_t i = 0; i < p->nobs; i++) {
            size_t lo = row_lo(p, p->orow[i]);
            memcpy(p->opos + p->orowptr[i], p->pos + lo,
                   (row_hi(p, p->orow[i]) - lo) * sizeof *p->opos);
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
    p->Q = gmm_band_alloc(p->n, kl, 0, GMM_BAND_SYMMETRIC);
    p->Qbar = gmm_band_alloc(p->n, kl, 0, GMM_BAND_SYMMETRIC);
    if (!p->orow || !p->ooff || !p->oy || !p->oe || !p->ocoef || !p->ocoefbar || !p->coef_all ||
        !p->coefbar_all || !p->Q || !p->Qbar)
        return gmm_error(GMM_ENOMEM, "out of memory for the Laplace approximation "
                                     "(%zu latents, bandwidth %zu)",
                         p->n, kl);
    p->lap = gmm_laplace_alloc(p->n, kl, gmm_latent_cov_bandwidth(p->lat), p->nobs, w);
    if (!p->lap)
        return gmm_error_status();
    if ((st = gmm_laplace_constrain(p->lap, gmm_latent_nconstr(p->lat),
                                    gmm_latent_constraints(p->lat),
                                    gmm_latent_constraint_pins(p->lat))))
        return st;
    if ((st = gmm_latent_obs_values(p->lat, p->obj.value, p->coef_all)))
        return st;
    gather_coef(p);
    p->lobs = (gmm_laplace_obs){p->nobs,    w,     p->ooff,   p->ocoef,
                                p->oy,      p->oe, p->oshift, p->rowptr ? p->orowptr : NULL,
                                p->opos,    p->ocst};
    if (gmm_latent_has_wls(p->lat)) {
        /* a family with a square-root smoother: its scratch */
        int varies = gmm_latent_obs_varies(p->lat);
        p->sy = gmm_malloc(5 * nr, sizeof *p->sy);
        p->ssh = varies ? gmm_malloc(p->nnz + 1, sizeof *p->ssh) : NULL;
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

gmm_status gmm_problem_alloc(gmm_latent *lat, const gmm_lik *lik, const double *y,
                             const double *e, int intercept, double b0, gmm_problem **out)
{
    if (!lat || !lik || !lik->type || !y || !out)
        return gmm_error(GMM_EINVAL, "gmm_problem_alloc: NULL argument");
    if (lik->type->conjugate && intercept)
        return gmm_error(GMM_EINVAL, "the %s likelihood takes no intercept (its data are "
                                     "centred instead)",
                         lik->type->name);
    if (!intercept)
        return gmm_problem_alloc_design(lat, lik, y, e, NULL, out);
    size_t nrows = gmm_latent_nrows(lat);
    double *ones = gmm_malloc(nrows ? nrows : 1, sizeof *ones);
    if (!ones)
        return gmm_error(GMM_ENOMEM, "out of memory for the model");
    for (size_t r = 0; r < nrows; r++)
        ones[r] = 1.0;
    const char *name[] = {"intercept"};
    gmm_problem_design d = {1, ones, name, &b0, 0};
    gmm_status st = gmm_problem_alloc_design(lat, lik, y, e, &d, out);
    gmm_free(ones);
    return st;
}

gmm_status gmm_problem_alloc_design(gmm_latent *lat, const gmm_lik *lik, const double *y,
                                    const double *e, const gmm_problem_design *d,
                                    gmm_problem **out)
{
    gmm_status st;
    if (!lat || !lik || !lik->type || !y || !out)
        return gmm_error(GMM_EINVAL, "gmm_problem_alloc: NULL argument");
    *out = NULL;
    int exact = lik->type->conjugate;
    size_t ncoef = d ? d->ncoef : 0;
    size_t nrows = gmm_latent_nrows(lat);
    if (ncoef && (!d->X || !d->name || !d->start))
        return gmm_error(GMM_EINVAL, "gmm_problem_alloc: NULL design");
    for (size_t k = 0; k < ncoef; k++)
        if (!isfinite(d->start[k]))
            return gmm_error(GMM_EINVAL, "%s start %g is not finite", d->name[k], d->start[k]);
    for (size_t i = 0; i < nrows * ncoef; i++)
        if (!isfinite(d->X[i]))
            return gmm_error_at(GMM_EINVAL, i / ncoef, "row %zu: %s = %g is not finite",
                                i / ncoef, d->name[i % ncoef], d->X[i]);
    if ((st = gmm_lik_check_data(lik, y, e, nrows)))
        return st;
    gmm_problem *p = gmm_calloc(1, sizeof *p);
    if (!p)
        return gmm_error(GMM_ENOMEM, "out of memory for the model");
    p->lat = lat;
    p->lik0 = lik;
    p->lik = *lik;
    p->nrows = nrows;
    p->n = gmm_latent_dim(lat);
    p->nl = gmm_latent_nparam(lat);
    p->np = lik->type->nparam;
    p->exact = exact;
    p->ncoef = ncoef;
    p->c0 = p->nl + p->np;
    p->nparam = p->c0 + ncoef;
    p->width = gmm_latent_obs_width(lat);
    p->nnz = gmm_latent_obs_nnz(lat);
    p->rowptr = gmm_latent_obs_rowptr(lat);
    p->pos = gmm_latent_obs_pos(lat);
    p->ld = NAN;
    size_t nr = nrows ? nrows : 1, np = p->nparam ? p->nparam : 1;
    p->y = gmm_malloc(nr, sizeof *p->y);
    if (e)
        p->e = gmm_malloc(nr, sizeof *p->e);
    p->obj.name = gmm_calloc(np, sizeof *p->obj.name);
    p->obj.value = gmm_calloc(np, sizeof *p->obj.value);
    p->obj.scale = gmm_calloc(np, sizeof *p->obj.scale);
    p->obj.fixed = gmm_calloc(np, sizeof *p->obj.fixed);
    p->names = gmm_calloc(np, sizeof *p->names);
    p->thetabar = gmm_calloc(np, sizeof *p->thetabar);
    if (ncoef) {
        p->X = d->borrow ? d->X : (p->Xown = gmm_malloc(nr * ncoef, sizeof *p->Xown));
        p->off = gmm_malloc(nr, sizeof *p->off);
        p->offbar = gmm_malloc(nr, sizeof *p->offbar);
    }
    if (ncoef && exact) {
        p->ry = gmm_malloc(nr, sizeof *p->ry);
        p->rx = gmm_malloc(p->n, sizeof *p->rx);
        p->coef_all = gmm_malloc(p->nnz ? p->nnz : 1, sizeof *p->coef_all);
    }
    if (!p->y || (e && !p->e) || !p->obj.name || !p->obj.value || !p->obj.scale ||
        !p->obj.fixed || !p->names || !p->thetabar ||
        (ncoef && (!p->X || !p->off || !p->offbar)) ||
        (ncoef && exact && (!p->ry || !p->rx || !p->coef_all))) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the model");
        goto fail;
    }
    memcpy(p->y, y, nrows * sizeof *y);
    if (e)
        memcpy(p->e, e, nrows * sizeof *e);
    for (size_t i = 0; i < p->nl; i++) {
        snprintf(p->names[i], sizeof p->names[i], "%s", gmm_latent_param_name(lat, i));
        p->obj.value[i] = gmm_latent_param_start(lat)[i];
        /* optimised on the log scale (the logit scale in (0, 1)); a
         * parameter that may be 0 (a ridge) is held fixed there (fit.h) */
        p->obj.scale[i] = gmm_latent_param_unit(lat, i) ? GMM_SCALE_LOGIT : GMM_SCALE_LOG;
    }
    for (size_t k = 0; k < p->np; k++) {
        gmm_lik_param_name(lik, k, p->names[p->nl + k]);
        p->obj.value[p->nl + k] = lik->par[k];
        p->obj.scale[p->nl + k] = GMM_SCALE_LOG;
    }
    p->const_off = 1;
    for (size_t k = 0; k < ncoef; k++) {
        snprintf(p->names[p->c0 + k], sizeof p->names[0], "%s", d->name[k]);
        p->obj.value[p->c0 + k] = d->start[k];
    }
    if (ncoef) {
        if (p->Xown)
            memcpy(p->Xown, d->X, nrows * ncoef * sizeof *p->Xown);
        for (size_t i = 0; i < nrows * ncoef; i++)
            p->const_off = p->const_off && ncoef == 1 && p->X[i] == 1.0;
    }
    for (size_t i = 0; i < p->nparam; i++)
        p->obj.name[i] = p->names[i];
    /* constant coefficients once (exact_eval refreshes varying ones) */
    if (ncoef && exact && !gmm_latent_obs_varies(lat) &&
        (st = gmm_latent_obs_values(lat, p->obj.value, p->coef_all)))
        goto fail;
    p->obj.nparam = p->nparam;
    p->obj.eval = eval;
    p->obj.ctx = p;
    for (size_t r = 0; r < nrows; r++)
        p->nobs += !isnan(y[r]);
    if (!exact && (st = laplace_alloc(p)))
        goto fail;
    *out = p;
    return GMM_OK;
fail:
    gmm_problem_free(p);
    return st;
}

gmm_objective *gmm_problem_objective(gmm_problem *p) { return &p->obj; }
int gmm_problem_exact(const gmm_problem *p) { return p->exact; }
const gmm_latent *gmm_problem_latent(const gmm_problem *p) { return p->lat; }
gmm_latent *gmm_problem_latent_eval(gmm_problem *p) { return p->lat; }
const gmm_lik *gmm_problem_lik(const gmm_problem *p) { return p->lik0; }

gmm_status gmm_problem_lik_at(const gmm_problem *p, const double *theta, gmm_lik *out)
{
    if (!p || !theta || !out)
        return gmm_error(GMM_EINVAL, "gmm_problem_lik_at: NULL argument");
    gmm_lik l = *p->lik0;
    for (size_t k = 0; k < p->np; k++) {
        double v = theta[p->nl + k];
        if (!isfinite(v) || !(v > 0.0))
            return gmm_error_at(GMM_EDOM, p->nl + k, "%s = %g must be positive and finite",
                                p->obj.name[p->nl + k], v);
        l.par[k] = v;
    }
    *out = l;
    return GMM_OK;
}
const double *gmm_problem_y(const gmm_problem *p) { return p->y; }
const double *gmm_problem_exposure(const gmm_problem *p) { return p->e; }
size_t gmm_problem_nobs(const gmm_problem *p) { return p->nobs; }
int gmm_problem_sqrt_declined(const gmm_problem *p)
{
    return !p->exact && !p->sqrt_form && p->sqrt_declined;
}

const char *gmm_problem_factorisation(const gmm_problem *p, double *bound)
{
    if (p->exact)
        return gmm_latent_factorisation(p->lat, bound);
    if (bound)
        *bound = p->sbound;
    return p->sqrt_form ? "square-root" : "cholesky";
}

size_t gmm_problem_iterations(const gmm_problem *p)
{
    return p->exact ? 0 : gmm_laplace_iterations(p->lap);
}

gmm_status gmm_problem_posterior(gmm_problem *p, const double *theta, double *mean,
                                 gmm_band *cov)
{
    gmm_status st;
    double f;
    if (!p || !theta)
        return gmm_error(GMM_EINVAL, "gmm_problem_posterior: NULL argument");
    if ((st = eval(p, theta, &f, NULL)))
        return st;
    if (p->exact)
        return gmm_latent_gaussian_posterior(p->lat, mean, cov);
    if (p->sqrt_form && (st = gmm_latent_gaussian_posterior(p->lat, NULL, cov)))
        return st;
    return gmm_laplace_posterior(p->lap, mean, p->sqrt_form ? NULL : cov);
}

gmm_status gmm_problem_draw_latent(gmm_problem *p, const double *theta, size_t m,
                                   const double *z, double *x, double *logw)
{
    gmm_status st;
    double lq;
    if (!p || !theta || !z || !x)
        return gmm_error(GMM_EINVAL, "gmm_problem_draw_latent: NULL argument");
    if (!p->lap && (st = laplace_alloc(p)))
        return st;
    /* Gaussian too: Newton is exact there, and P's factor is what a draw needs */
    if ((st = laplace_forward_form(p, theta, &lq, 0)))
        return st;
    for (size_t k = 0; k < m; k++)
        if ((st = gmm_laplace_draw(p->lap, z + k * p->n, x + k * p->n, logw ? logw + k : NULL)))
            return st;
    return GMM_OK;
}

/* The posterior mean and covariance band at theta, allocated. */
static gmm_status posterior_alloc(gmm_problem *p, const double *theta, double **mean,
                                  gmm_band **cov)
{
    *mean = gmm_malloc(p->n, sizeof **mean);
    *cov = gmm_band_alloc(p->n, gmm_latent_cov_bandwidth(p->lat), 0, GMM_BAND_SYMMETRIC);
    if (!*mean || !*cov)
        return gmm_error(GMM_ENOMEM, "out of memory for the posterior (%zu latents)", p->n);
    return gmm_problem_posterior(p, theta, *mean, *cov);
}

gmm_status gmm_problem_add_offset(const gmm_problem *p, const double *theta, size_t m,
                                  double *mean)
{
    double b;
    if (!gmm_problem_offset_constant(p, theta, &b))
        return gmm_error(GMM_EINVAL, "the model has covariates: predictions need their values, "
                                     "which nodes and new inputs do not have (predict at the "
                                     "data rows)");
    for (size_t i = 0; i < m; i++)
        mean[i] += b;
    return GMM_OK;
}

gmm_status gmm_problem_predict_rows(gmm_problem *p, const double *theta, double *mean,
                                    double *var)
{
    double *mu = NULL;
    gmm_band *cov = NULL;
    gmm_status st = posterior_alloc(p, theta, &mu, &cov);
    if (st == GMM_OK &&
        (st = gmm_latent_predict_rows(p->lat, theta, mu, cov, mean, var)) == GMM_OK && p->ncoef) {
        gmm_problem_offsets(p, theta, p->off);
        for (size_t r = 0; r < p->nrows; r++)
            mean[r] += p->off[r];
    }
    gmm_free(mu);
    gmm_band_free(cov);
    return st;
}

gmm_status gmm_problem_predict_latent(gmm_problem *p, const double *theta, const double *xq,
                                      size_t nq, double *mean, double *var)
{
    int inputs = gmm_latent_has_inputs(p->lat);
    if (inputs && nq && !xq)
        return gmm_error(GMM_EINVAL, "a %s model predicts at inputs, not at nodes",
                         gmm_latent_family(p->lat));
    if (!inputs && gmm_latent_node_index(p->lat, 0) == GMM_NO_INDEX)
        return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(p->lat));
    double *mu = NULL;
    gmm_band *cov = NULL;
    gmm_status st = posterior_alloc(p, theta, &mu, &cov);
    if (st == GMM_OK && inputs)
        st = gmm_latent_predict_at(p->lat, theta, mu, cov, xq, nq, mean, var);
    for (size_t v = 0; st == GMM_OK && !inputs && v < p->n; v++) {
        size_t r = gmm_latent_node_index(p->lat, v);
        mean[v] = mu[r];
        var[v] = gmm_band_get(cov, r, r);
    }
    gmm_free(mu);
    gmm_band_free(cov);
    return st;
}

/* v <- Sigma v with the posterior of the last gmm_problem_posterior. */
static gmm_status posterior_solve(void *ctx, double *v)
{
    gmm_problem *p = ctx;
    /* the square-root form's Laplace posterior is the latent's last fold
     * (gmm_problem_posterior) */
    return p->exact || p->sqrt_form ? gmm_latent_gaussian_posterior_solve(p->lat, v)
                                    : gmm_laplace_posterior_solve(p->lap, v);
}

gmm_status gmm_problem_predict_forms(gmm_problem *p, const double *theta, size_t nq,
                                     const size_t *ptr, const size_t *idx, const double *w,
                                     double *mean, double *var)
{
    double *mu = NULL, *work = NULL;
    gmm_band *cov = NULL;
    gmm_status st = posterior_alloc(p, theta, &mu, &cov);
    if (st == GMM_OK && !(work = gmm_malloc(p->n ? p->n : 1, sizeof *work)))
        st = gmm_error(GMM_ENOMEM, "out of memory");
    if (st == GMM_OK)
        st = gmm_latent_forms_moments(p->n, mu, cov, posterior_solve, p, nq, ptr, idx, w, work,
                                      mean, var);
    gmm_free(mu);
    gmm_free(work);
    gmm_band_free(cov);
    return st;
}

gmm_status gmm_problem_predict_nodes(gmm_problem *p, const double *theta, double *mean,
                                     double *var)
{
    if (gmm_latent_has_inputs(p->lat))
        return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(p->lat));
    gmm_status st = gmm_problem_predict_latent(p, theta, NULL, 0, mean, var);
    return st == GMM_OK ? gmm_problem_add_offset(p, theta, p->n, mean) : st;
}

gmm_status gmm_problem_predict_at(gmm_problem *p, const double *theta, const double *xq,
                                  size_t nq, double *mean, double *var)
{
    if (!gmm_latent_has_inputs(p->lat))
        return gmm_error(GMM_EINVAL, "a %s model predicts at its nodes, not at new inputs",
                         gmm_latent_family(p->lat));
    gmm_status st = gmm_problem_predict_latent(p, theta, xq, nq, mean, var);
    return st == GMM_OK ? gmm_problem_add_offset(p, theta, nq, mean) : st;
}

void gmm_problem_set_metric(gmm_problem *p, gmm_metric m)
{
    p->metric = m;
    p->wready = 0;
}

gmm_metric gmm_problem_metric(const gmm_problem *p) { return p->metric; }

/* The Laplace fit at theta, kept for the map: Q, chol(Q + H'WH), the mode. */
static gmm_status laplace_map_setup(gmm_problem *p, const double *theta)
{
    gmm_status st;
    double f;
    if (!p->lap && (st = laplace_alloc(p)))
        return st;
    if (!p->wL) {
        size_t kl = gmm_latent_bandwidth(p->lat);
        p->wL = gmm_band_alloc(p->n, kl, 0, GMM_BAND_LOWER);
        p->wxh = gmm_malloc(3 * p->n + p->nobs, sizeof *p->wxh);
        p->wreach = gmm_malloc(p->n ? p->n : 1, sizeof *p->wreach);
        if (!p->wL || !p->wxh || !p->wreach)
            return gmm_error(GMM_ENOMEM, "out of memory for the Laplace metric (%zu latents)",
                             p->n);
        p->wqx = p->wxh + p->n;
        p->wc = p->wqx + p->n;
        p->wwt = p->wc + p->n;
    }
    /* from x = 0: the map must not depend on the object's history */
    p->cold = 1;
    if ((st = laplace_forward_form(p, theta, &f, 0)))
        return st;
    const gmm_band *L = gmm_laplace_chol(p->lap);
    const double *wt = gmm_laplace_weights(p->lap);
    if (!L || !wt)
        return gmm_error(GMM_EINVAL, "the Laplace metric is not available for a latent with "
                                     "linear constraints (use the prior's)");
    /* the Laplace workspace's observations are the packed rows, in order */
    memcpy(p->wwt, wt, p->nobs * sizeof *wt);
    if ((st = gmm_band_copy(p->wL, L)) || (st = gmm_band_tri_reach(p->wL, p->wreach)) ||
        (st = gmm_laplace_posterior(p->lap, p->wxh, NULL)))
        return st;
    return gmm_band_gemv(GMM_TRANS, 1.0, p->wL, p->wxh, 0.0, p->wc);
}

/* The whitened density's arrays, and the packed observed rows. */
static gmm_status whiten_alloc(gmm_problem *p)
{
    size_t no = p->nobs ? p->nobs : 1, nc = gmm_lik_nconst(&p->lik), onz = 0;
    for (size_t r = 0; r < p->nrows; r++)
        if (!isnan(p->y[r]))
            onz += row_hi(p, r) - row_lo(p, r);
    p->wcoef = gmm_malloc(p->nnz ? p->nnz : 1, sizeof *p->wcoef);
    p->wx = gmm_malloc(p->n, sizeof *p->wx);
    p->wg = gmm_malloc(p->n, sizeof *p->wg);
    p->woff = gmm_calloc(p->nrows ? p->nrows : 1, sizeof *p->woff);
    p->wrow = gmm_malloc(2 * no + 1 + (onz ? onz : 1), sizeof *p->wrow);
    p->wy = gmm_malloc((6 + nc) * no + (onz ? onz : 1), sizeof *p->wy);
    if (!p->wcoef || !p->wx || !p->wg || !p->woff || !p->wrow || !p->wy)
        return gmm_error(GMM_ENOMEM, "out of memory for the whitened density (%zu latents)",
                         p->n);
    p->wptr = p->wrow + no;
    p->widx = p->wptr + no + 1;
    p->we = p->wy + no;
    p->wo = p->we + no;
    p->wf = p->wo + no;
    p->wd = p->wf + no;
    p->whx = p->wd + no;
    p->wconst = p->whx + no;
    p->wh = p->wconst + nc * no;
    const size_t *off = gmm_latent_obs_offset(p->lat);
    size_t i = 0;
    p->wptr[0] = 0;
    for (size_t r = 0; r < p->nrows; r++) {
        if (isnan(p->y[r]))
            continue;
        size_t lo = row_lo(p, r), hi = row_hi(p, r), k0 = p->wptr[i];
        for (size_t k = lo; k < hi; k++)
            p->widx[k0 + k - lo] = off[r] + row_pos(p, k, lo);
        p->wrow[i] = r;
        p->wy[i] = p->y[r];
        p->we[i] = p->e ? p->e[r] : 1.0;
        /* y and e are the problem's for good: their constants once */
        gmm_lik_row_const(&p->lik, p->wy[i], p->we[i], p->wconst + i * nc);
        p->wptr[++i] = k0 + hi - lo;
    }
    p->wone = p->wptr[p->nobs] == p->nobs;
    return GMM_OK;
}

/* f = X beta + H x at the packed rows into p->wf (in row_f's order of
 * operations), from x = p->wx. */
static void packed_f(gmm_problem *p)
{
    const double *x = p->wx, *h = p->wh;
    if (p->wone) { /* the same operations without the inner loop */
        for (size_t i = 0; i < p->nobs; i++)
            p->wf[i] = p->wo[i] + h[i] * x[p->widx[i]];
        return;
    }
    for (size_t i = 0; i < p->nobs; i++) {
        double f = p->wo[i];
        for (size_t k = p->wptr[i]; k < p->wptr[i + 1]; k++)
            f += h[k] * x[p->widx[k]];
        p->wf[i] = f;
    }
}

/* p->wg = H' a over the packed rows (a: nobs). */
static void packed_scatter(gmm_problem *p, const double *a)
{
    const double *h = p->wh;
    memset(p->wg, 0, p->n * sizeof *p->wg);
    if (p->wone) {
        for (size_t i = 0; i < p->nobs; i++)
            p->wg[p->widx[i]] += a[i] * h[i];
        return;
    }
    for (size_t i = 0; i < p->nobs; i++)
        for (size_t k = p->wptr[i]; k < p->wptr[i + 1]; k++)
            p->wg[p->widx[k]] += a[i] * h[k];
}

gmm_status gmm_problem_whiten_setup(gmm_problem *p, const double *theta)
{
    gmm_status st;
    if (!p || !theta)
        return gmm_error(GMM_EINVAL, "gmm_problem_whiten_setup: NULL argument");
    p->wready = 0;
    if (!p->wx && (st = whiten_alloc(p)))
        return st;
    if ((st = set_lik(p, theta)))
        return st;
    p->wlik = p->lik;
    if (p->ncoef)
        gmm_problem_offsets(p, theta, p->woff);
    gmm_problem_offset_constant(p, theta, &p->wb);
    if ((st = gmm_latent_theta_check(p->lat, theta)) ||
        (st = gmm_latent_obs_values(p->lat, theta, p->wcoef)))
        return st;
    for (size_t i = 0; i < p->nobs; i++) {
        size_t r = p->wrow[i];
        p->wo[i] = p->woff[r];
        memcpy(p->wh + p->wptr[i], p->wcoef + row_lo(p, r),
               (p->wptr[i + 1] - p->wptr[i]) * sizeof *p->wh);
    }
    if ((st = p->metric == GMM_METRIC_LAPLACE ? laplace_map_setup(p, theta)
                                              : gmm_latent_whiten_setup(p->lat, theta)))
        return st;
    p->wready = 1;
    return GMM_OK;
}

/* x = W v (prior metric) or x^ + L^-T v (Laplace metric) into p->wx. */
static gmm_status whiten(gmm_problem *p, const double *v, double *x)
{
    if (p->metric != GMM_METRIC_LAPLACE)
        return gmm_latent_whiten(p->lat, v, x);
    memcpy(x, v, p->n * sizeof *x);
    gmm_status st = gmm_band_tri_solve_vec_reach(p->wL, p->wreach, GMM_TRANS, x);
    for (size_t j = 0; j < p->n && st == GMM_OK; j++)
        x[j] += p->wxh[j];
    return st;
}

gmm_status gmm_problem_unwhiten(gmm_problem *p, const double *x, double *v)
{
    if (!p || !p->wready || !x || !v)
        return gmm_error(GMM_EINVAL, "gmm_problem_unwhiten: no whitening setup");
    if (p->metric != GMM_METRIC_LAPLACE)
        return gmm_latent_unwhiten(p->lat, x, v);
    for (size_t j = 0; j < p->n; j++)
        p->wqx[j] = x[j] - p->wxh[j];
    return gmm_band_gemv(GMM_TRANS, 1.0, p->wL, p->wqx, 0.0, v);
}

/* b + h_r' x at data row r, from the whitening setup's rows and p->wx. */
static double row_f(const gmm_problem *p, size_t r)
{
    size_t lo = row_lo(p, r), hi = row_hi(p, r);
    const double *x = p->wx + gmm_latent_obs_offset(p->lat)[r];
    double f = p->woff[r];
    for (size_t k = lo; k < hi; k++)
        f += p->wcoef[k] * x[row_pos(p, k, lo)];
    return f;
}

/* Under the Laplace map x = x^ + L^-T v with L L' = Q + H'WH (W = diag(w),
 * the weights the factorisation used), so L'x = c + v with c = L'x^, and
 *
 *   x'Qx = |c + v|^2 - sum_i w_i (h_i'x)^2,
 *   d/dv (x'Qx / 2) = L^-1 Q x = (c + v) - L^-1 H'W H x,
 *
 * which leaves the two triangular solves of the map and its transpose and
 * no product with Q.  The rows' h_i'x (without X beta) are formed on the
 * way to f.  Rounding: the sums err by at most about (n + 2) eps (|c + v|^2
 * + x'Wx) against n eps x'|Q||x| for x'Qx formed with Q x, so where the
 * data dominate (x'Wx >> x'Qx) the subtraction loses the digits of their
 * ratio -- an absolute error in lp still far below the energy errors NUTS
 * works with (a few tenths); and L L' = Q + H'WH holds to the Cholesky
 * factor's backward error, |E| <= gamma_{kl+2} |L| |L'|, so the density
 * sampled has Q + E for Q, x'Ex of the same order.  The value and the
 * gradient are those of one function of v, so the sampler's target is
 * consistent (tests/infer/test_whitened.c: against the dense definition). */
static double laplace_quad(gmm_problem *p, const double *v)
{
    const double *x = p->wx, *h = p->wh, *w = p->wwt;
    double xwx = 0.0, cv = 0.0;
    for (size_t i = 0; p->wone && i < p->nobs; i++)
        p->whx[i] = h[i] * x[p->widx[i]];
    for (size_t i = 0; !p->wone && i < p->nobs; i++) {
        double hx = 0.0;
        for (size_t k = p->wptr[i]; k < p->wptr[i + 1]; k++)
            hx += h[k] * x[p->widx[k]];
        p->whx[i] = hx;
    }
    for (size_t i = 0; i < p->nobs; i++) {
        double hx = p->whx[i];
        p->wf[i] = p->wo[i] + hx;
        xwx += w[i] * hx * hx;
    }
    for (size_t j = 0; j < p->n; j++) {
        double t = p->wc[j] + v[j];
        cv += t * t;
        p->wqx[j] = t; /* for the gradient */
    }
    return cv - xwx;
}

gmm_status gmm_problem_whitened_logp(gmm_problem *p, const double *v, double *lp, double *grad)
{
    gmm_status st;
    if (!p || !p->wready)
        return gmm_error(GMM_EINVAL, "gmm_problem_whitened_logp: no whitening setup");
    if ((st = whiten(p, v, p->wx)))
        return st;
    int lap = p->metric == GMM_METRIC_LAPLACE;
    /* x'Qx: v'v under the prior's map; see laplace_quad under the Laplace
     * map, whose Jacobian |L|^-1 is constant at fixed theta */
    double xqx = 0.0;
    if (lap) {
        xqx = laplace_quad(p, v);
    } else {
        packed_f(p);
        for (size_t j = 0; j < p->n; j++)
            xqx += v[j] * v[j];
    }
    double sum = gmm_lik_sum_const(&p->wlik, p->nobs, p->wy, p->we, p->wconst, p->wf,
                                   grad ? p->wd : NULL);
    double l = sum - 0.5 * xqx;
    if (!isfinite(l))
        return gmm_error(GMM_EDOM, "whitened log density not finite");
    *lp = l;
    if (!grad)
        return GMM_OK;
    if (lap) {
        /* L^-1 H'(g + W H x) - (c + v) */
        for (size_t i = 0; i < p->nobs; i++)
            p->wd[i] += p->wwt[i] * p->whx[i];
        packed_scatter(p, p->wd);
        memcpy(grad, p->wg, p->n * sizeof *grad);
        if ((st = gmm_band_tri_solve_vec_reach(p->wL, p->wreach, GMM_NOTRANS, grad)))
            return st;
        for (size_t j = 0; j < p->n; j++)
            grad[j] -= p->wqx[j];
        return GMM_OK;
    }
    packed_scatter(p, p->wd);
    if ((st = gmm_latent_whiten_t(p->lat, p->wg, grad)))
        return st;
    for (size_t j = 0; j < p->n; j++)
        grad[j] -= v[j];
    return GMM_OK;
}

gmm_status gmm_problem_whitened_linpred(gmm_problem *p, const double *v, double *frows,
                                        double *xnodes)
{
    gmm_status st;
    if (!p || !p->wready)
        return gmm_error(GMM_EINVAL, "gmm_problem_whitened_linpred: no whitening setup");
    if ((st = whiten(p, v, p->wx)))
        return st;
    for (size_t r = 0; frows && r < p->nrows; r++) {
        frows[r] = row_f(p, r);
    }
    if (xnodes) {
        if (gmm_latent_node_index(p->lat, 0) == GMM_NO_INDEX)
            return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(p->lat));
        if (!p->const_off)
            return gmm_error(GMM_EINVAL, "the model has covariates: its nodes have no linear "
                                         "predictor of their own");
        for (size_t v2 = 0; v2 < p->n; v2++)
            xnodes[v2] = p->wb + p->wx[gmm_latent_node_index(p->lat, v2)];
    }
    return GMM_OK;
}

gmm_status gmm_problem_whitened_start(gmm_problem *p, const double *theta, double *v)
{
    gmm_status st;
    if (!p || !p->wready || !theta || !v)
        return gmm_error(GMM_EINVAL, "gmm_problem_whitened_start: no whitening setup");
    if (p->metric == GMM_METRIC_LAPLACE) {
        memset(v, 0, p->n * sizeof *v); /* the mode */
        return GMM_OK;
    }
    /* from x = 0, not from whatever mode an earlier call left: the start
     * (and so a chain) must not depend on the object's history */
    p->cold = 1;
    if ((st = gmm_problem_posterior(p, theta, p->wg, NULL)))
        return st;
    return gmm_latent_unwhiten(p->lat, p->wg, v);
}

gmm_status gmm_problem_data_information(gmm_problem *p, const double *theta, double *lmax)
{
    gmm_status st;
    if (!p || !theta || !lmax)
        return gmm_error(GMM_EINVAL, "gmm_problem_data_information: NULL argument");
    if (gmm_latent_nconstr(p->lat))
        return gmm_error(GMM_EINVAL, "the latent has linear constraints, where the Laplace "
                                     "metric is not available");
    if (!gmm_latent_assembled(p->lat))
        return gmm_error(GMM_EINVAL, "the latent's precision exists only in the square-root "
                                     "form, where the Laplace metric is not available");
    gmm_metric keep = p->metric;
    p->metric = GMM_METRIC_PRIOR;
    double *u = gmm_malloc(p->n, sizeof *u), *z = gmm_malloc(p->n, sizeof *z);
    double *wr = gmm_calloc(p->nrows ? p->nrows : 1, sizeof *wr);
    if (!u || !z || !wr) {
        st = gmm_error(GMM_ENOMEM, "out of memory for %zu latents", p->n);
        goto done;
    }
    double f, out[4];
    if ((st = gmm_problem_whiten_setup(p, theta)) || (!p->lap && (st = laplace_alloc(p))))
        goto done;
    p->cold = 1;
    if ((st = laplace_forward(p, theta, &f)) ||
        (st = gmm_laplace_posterior(p->lap, p->wx, NULL)))
        goto done;
    /* W at the mode, its negative entries (a non-log-concave likelihood's
     * outliers) as 0: they add no information */
    for (size_t r = 0; r < p->nrows; r++)
        if (!isnan(p->y[r])) {
            gmm_lik_eval(&p->wlik, p->y[r], p->e ? p->e[r] : 1.0, row_f(p, r), out, NULL);
            wr[r] = fmax(-out[2], 0.0);
        }
    /* power iteration on M u = W' H' diag(w) H W u from a constant u: the
     * Rayleigh quotients rise to lambda_max; a few digits are plenty */
    const size_t *off = gmm_latent_obs_offset(p->lat);
    double lam = 0.0;
    for (size_t j = 0; j < p->n; j++)
        u[j] = 1.0 / sqrt((double)p->n);
    for (int it = 0; it < 200; it++) {
        if ((st = gmm_latent_whiten(p->lat, u, p->wx)))
            goto done;
        memset(p->wg, 0, p->n * sizeof *p->wg);
        for (size_t r = 0; r < p->nrows; r++) {
            if (wr[r] == 0.0)
                continue;
            size_t lo = row_lo(p, r), hi = row_hi(p, r);
            const double *h = p->wcoef, *x = p->wx + off[r];
            double fr = 0.0;
            for (size_t k = lo; k < hi; k++)
                fr += h[k] * x[row_pos(p, k, lo)];
            for (size_t k = lo; k < hi; k++)
                p->wg[off[r] + row_pos(p, k, lo)] += wr[r] * fr * h[k];
        }
        if ((st = gmm_latent_whiten_t(p->lat, p->wg, z)))
            goto done;
        double uz = 0.0, zz = 0.0;
        for (size_t j = 0; j < p->n; j++) {
            uz += u[j] * z[j];
            zz += z[j] * z[j];
        }
        double prev = lam;
        lam = uz;
        if (!(zz > 0.0))
            break;
        for (size_t j = 0; j < p->n; j++)
            u[j] = z[j] / sqrt(zz);
        if (it > 0 && fabs(lam - prev) <= 1e-3 * lam)
            break;
    }
    *lmax = lam;
done:
    p->metric = keep;
    p->wready = 0;
    gmm_free(u);
    gmm_free(z);
    gmm_free(wr);
    return st;
}

gmm_prior_kind gmm_prior_kind_of(gmm_scale s)
{
    return s == GMM_SCALE_LOG     ? GMM_PRIOR_LOGNORMAL
           : s == GMM_SCALE_LOGIT ? GMM_PRIOR_LOGITNORMAL
                                  : GMM_PRIOR_NORMAL;
}

const char *gmm_prior_kind_name(gmm_prior_kind k)
{
    return k == GMM_PRIOR_LOGNORMAL     ? "lognormal"
           : k == GMM_PRIOR_LOGITNORMAL ? "logitnormal"
           : k == GMM_PRIOR_NORMAL      ? "normal"
                                        : "unknown";
}

gmm_status gmm_problem_joint_setup(gmm_problem *p, const double *theta, const int *sampled,
                                   const gmm_prior *priors)
{
    if (!p || !theta || !sampled || !priors)
        return gmm_error(GMM_EINVAL, "gmm_problem_joint_setup: NULL argument");
    if (p->metric == GMM_METRIC_LAPLACE)
        return gmm_error(GMM_EINVAL, "the Laplace metric holds the hyperparameters fixed: "
                                     "sample them under the prior's");
    size_t np = p->nparam ? p->nparam : 1, nc = p->nnz;
    if (!p->jsamp) {
        p->jsamp = gmm_calloc(np, sizeof *p->jsamp);
        p->jprior = gmm_calloc(np, sizeof *p->jprior);
        p->jtheta = gmm_calloc(np, sizeof *p->jtheta);
        p->jbar = gmm_calloc(np, sizeof *p->jbar);
        p->jcbar = gmm_calloc(nc ? nc : 1, sizeof *p->jcbar);
        if (!p->jsamp || !p->jprior || !p->jtheta || !p->jbar || !p->jcbar)
            return gmm_error(GMM_ENOMEM, "out of memory for the joint density");
    }
    p->jn = 0;
    for (size_t k = 0; k < p->nparam; k++) {
        gmm_scale sc = p->obj.scale[k];
        if (sampled[k]) {
            gmm_prior_kind want = gmm_prior_kind_of(sc);
            if (priors[k].kind != want || !isfinite(priors[k].mu) ||
                !(priors[k].sigma > 0.0) || !isfinite(priors[k].sigma))
                return gmm_error_at(GMM_EINVAL, k, "prior of %s: %s(mu, sigma > 0) expected",
                                    p->obj.name[k], gmm_prior_kind_name(want));
            if (!gmm_scale_inside(sc, theta[k]))
                return gmm_error_at(GMM_EINVAL, k, "%s = %g cannot be sampled on the %s scale",
                                    p->obj.name[k], theta[k], gmm_scale_name(sc));
            p->jn++;
        }
        p->jsamp[k] = sampled[k] != 0;
        p->jprior[k] = priors[k];
        p->jtheta[k] = theta[k];
    }
    return GMM_OK;
}

size_t gmm_problem_joint_dim(const gmm_problem *p) { return p->n + p->jn; }

gmm_status gmm_problem_joint_theta(const gmm_problem *p, const double *q, double *theta)
{
    if (!p->jsamp)
        return gmm_error(GMM_EINVAL, "gmm_problem_joint_theta: no joint setup");
    size_t j = p->n;
    for (size_t k = 0; k < p->nparam; k++)
        theta[k] = !p->jsamp[k] ? p->jtheta[k] : gmm_scale_from_u(p->obj.scale[k], q[j++]);
    return GMM_OK;
}

gmm_status gmm_problem_joint_start(gmm_problem *p, double *q)
{
    gmm_status st;
    if (!p->jsamp)
        return gmm_error(GMM_EINVAL, "gmm_problem_joint_start: no joint setup");
    if ((st = gmm_problem_whiten_setup(p, p->jtheta)) ||
        (st = gmm_problem_whitened_start(p, p->jtheta, q)))
        return st;
    size_t j = p->n;
    for (size_t k = 0; k < p->nparam; k++)
        if (p->jsamp[k])
            q[j++] = gmm_scale_to_u(p->obj.scale[k], p->jtheta[k]);
    return GMM_OK;
}

gmm_status gmm_problem_joint_logp(gmm_problem *p, const double *q, double *lp, double *grad)
{
    gmm_status st;
    if (!p || !p->jsamp)
        return gmm_error(GMM_EINVAL, "gmm_problem_joint_logp: no joint setup");
    double *th = p->thetabar; /* scratch: theta at q */
    gmm_problem_joint_theta(p, q, th);
    for (size_t k = 0; k < p->nparam; k++)
        if (p->jsamp[k] && !gmm_scale_inside(p->obj.scale[k], th[k]))
            return gmm_error(GMM_EDOM, "%s = %g must be %s", p->obj.name[k], th[k],
                             gmm_scale_domain(p->obj.scale[k]));
    if ((st = gmm_problem_whiten_setup(p, th)))
        return st == GMM_EINVAL ? gmm_error(GMM_EDOM, "%s", gmm_error_message()) : st;
    const double *v = q;
    if ((st = gmm_latent_whiten(p->lat, v, p->wx)))
        return st;
    size_t nl = p->nl, nc = gmm_lik_nconst(&p->wlik);
    int varies = gmm_latent_obs_varies(p->lat);
    double sum = 0.0, out[4], dpar[3 * GMM_LIK_MAXPARAM];
    memset(p->jbar, 0, p->nparam * sizeof *p->jbar);
    packed_f(p);
    if (p->np == 0) {
        sum = gmm_lik_sum_const(&p->wlik, p->nobs, p->wy, p->we, p->wconst, p->wf, p->wd);
    } else {
        for (size_t i = 0; i < p->nobs; i++) {
            gmm_lik_eval_const(&p->wlik, p->wy[i], p->we[i], p->wconst + i * nc, p->wf[i], out,
                               dpar);
            sum += out[0];
            p->wd[i] = out[1];
            for (size_t k = 0; k < p->np; k++)
                p->jbar[nl + k] += dpar[3 * k];
        }
    }
    double vv = 0.0, lprior = 0.0;
    for (size_t j = 0; j < p->n; j++)
        vv += v[j] * v[j];
    size_t j = p->n;
    for (size_t k = 0; k < p->nparam; k++)
        if (p->jsamp[k]) {
            double z = (q[j++] - p->jprior[k].mu) / p->jprior[k].sigma;
            lprior -= 0.5 * z * z;
        }
    double l = sum - 0.5 * vv + lprior;
    if (!isfinite(l))
        return gmm_error(GMM_EDOM, "joint log density not finite");
    *lp = l;
    if (!grad)
        return GMM_OK;
    /* v: W' H' g - v; theta: through W(theta) and the rows, then to u */
    packed_scatter(p, p->wd);
    if (varies) {
        memset(p->jcbar, 0, p->nnz * sizeof *p->jcbar);
        for (size_t i = 0; i < p->nobs; i++) {
            size_t lo = row_lo(p, p->wrow[i]), k0 = p->wptr[i];
            for (size_t k = k0; k < p->wptr[i + 1]; k++)
                p->jcbar[lo + (k - k0)] = p->wd[i] * p->wx[p->widx[k]];
        }
    }
    if ((st = gmm_latent_whiten_t(p->lat, p->wg, grad)))
        return st;
    for (size_t i = 0; i < p->n; i++)
        grad[i] -= v[i];
    /* v and wg are the whiten's and whiten_t's above: their solves are reused */
    if ((st = gmm_latent_whiten_rev(p->lat, NULL, NULL, p->jbar)) ||
        (varies && (st = gmm_latent_obs_coef_rev(p->lat, th, p->jcbar, p->jbar))))
        return st;
    if (p->ncoef) {
        memset(p->offbar, 0, p->nrows * sizeof *p->offbar);
        for (size_t i = 0; i < p->nobs; i++)
            p->offbar[p->wrow[i]] = p->wd[i];
        gmm_problem_offsets_rev(p, p->offbar, p->jbar);
    }
    j = p->n;
    for (size_t k = 0; k < p->nparam; k++)
        if (p->jsamp[k]) {
            double dprior = -(q[j] - p->jprior[k].mu) / (p->jprior[k].sigma * p->jprior[k].sigma);
            grad[j++] = gmm_scale_dp_du(p->obj.scale[k], th[k]) * p->jbar[k] + dprior;
        }
    return GMM_OK;
}

gmm_status gmm_problem_whitened_latent(gmm_problem *p, const double *v, double *x)
{
    if (!p || !p->wready || !v || !x)
        return gmm_error(GMM_EINVAL, "gmm_problem_whitened_latent: no whitening setup");
    return whiten(p, v, x);
}

gmm_status gmm_problem_predict_at_draws(gmm_problem *p, const double *thetas,
                                        size_t theta_stride, const double *xs, size_t ndraw,
                                        const double *xq, size_t nq, uint64_t seed,
                                        double level, gmm_summary_pred *out)
{
    gmm_status st = GMM_OK;
    if (!p || !thetas || !xs || (nq && (!xq || !out)))
        return gmm_error(GMM_EINVAL, "gmm_problem_predict_at_draws: NULL argument");
    if (!(level > 0.0 && level < 1.0))
        return gmm_error(GMM_EINVAL, "interval level %g is not in (0, 1)", level);
    size_t nqq = nq ? nq : 1, nd = ndraw ? ndraw : 1;
    double *fs = gmm_malloc(nqq * nd, sizeof *fs), *m = gmm_malloc(nqq * nd, sizeof *m);
    double *v = gmm_malloc(nqq * nd, sizeof *v);
    if (!fs || !m || !v) {
        st = gmm_error(GMM_ENOMEM, "out of memory for %zu draws at %zu inputs", ndraw, nq);
        goto done;
    }
    if ((st = gmm_problem_predict_at_draws_normal(p, thetas, theta_stride, xs, ndraw, xq, nq, m,
                                                  v)) != GMM_OK)
        goto done;
    gmm_rng r;
    gmm_rng_seed(&r, seed, 0);
    for (size_t s = 0; s < ndraw; s++)
        for (size_t q = 0; q < nq; q++) {
            double vq = v[s * nq + q];
            fs[q * ndraw + s] = m[s * nq + q] + sqrt(vq > 0.0 ? vq : 0.0) * gmm_rng_normal(&r);
        }
    for (size_t q = 0; q < nq && st == GMM_OK; q++)
        st = gmm_summary_pred_draws(p->lik0, fs + q * ndraw, ndraw, level, &out[q]);
done:
    gmm_free(fs);
    gmm_free(m);
    gmm_free(v);
    return st;
}

gmm_status gmm_problem_latent_at_draws_normal(gmm_problem *p, const double *thetas,
                                              size_t theta_stride, const double *xs,
                                              size_t ndraw, const double *xq, size_t nq,
                                              double *mean, double *var)
{
    gmm_status st = GMM_OK;
    if (!p || !thetas || !xs || (nq && (!xq || !mean || !var)))
        return gmm_error(GMM_EINVAL, "gmm_problem_predict_at_draws_normal: NULL argument");
    if (!gmm_latent_has_inputs(p->lat))
        return gmm_error(GMM_EINVAL, "a %s model has no inputs to predict at",
                         gmm_latent_family(p->lat));
    if (ndraw == 0)
        return gmm_error(GMM_EINVAL, "no draws to predict from");
    /* a draw is a point mass: its covariance is zero */
    gmm_band *zero = gmm_band_alloc(p->n, gmm_latent_cov_bandwidth(p->lat), 0,
                                    GMM_BAND_SYMMETRIC);
    if (!zero)
        return gmm_error(GMM_ENOMEM, "out of memory for a band of %zu rows", p->n);
    for (size_t s = 0; s < ndraw && st == GMM_OK; s++)
        st = gmm_latent_predict_at(p->lat, thetas + s * theta_stride, xs + s * p->n, zero, xq,
                                   nq, mean + s * nq, var + s * nq);
    gmm_band_free(zero);
    return st;
}

gmm_status gmm_problem_predict_at_draws_normal(gmm_problem *p, const double *thetas,
                                               size_t theta_stride, const double *xs,
                                               size_t ndraw, const double *xq, size_t nq,
                                               double *mean, double *var)
{
    gmm_status st = gmm_problem_latent_at_draws_normal(p, thetas, theta_stride, xs, ndraw, xq,
                                                       nq, mean, var);
    for (size_t s = 0; st == GMM_OK && s < ndraw; s++)
        st = gmm_problem_add_offset(p, thetas + s * theta_stride, nq, mean + s * nq);
    return st;
}
