/* latent_gmrf.c -- the graph family as a gmm_latent (latent.h): Q assembled
 * in RCM order (gmrf.h), one latent per node, each data row reading its
 * node's latent with coefficient 1.
 *
 * WHITENING.  W = L^-T, L L' = Q (banded Cholesky of the assembled Q at the
 * setup's theta): x = L^-T v and W' g = L^-1 g are one banded triangular
 * solve each.  Reverse mode of c = xbar . L^-T v: Lbar from the solve's
 * reverse (gmm_band_tri_solve_vec_rev, x recomputed), Qbar from the
 * Cholesky's (gmm_band_chol_decomp_rev, in Lbar's storage), thetabar from
 * the assembly's (gmm_gmrf_assemble_rev).  Forward saves L and theta. */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"

typedef struct {
    const gmm_gmrf *g;
    double *theta;        /* nparam: of the last prior call, for its reverse */
    int prior_ok;         /* that call succeeded */
    size_t nrows;
    const size_t *offset; /* the latent's row offsets */
    /* Gaussian likelihood: Q, Qbar, workspace and the observed rows */
    gmm_band *Q, *Qbar;
    gmm_marglik_work *w;
    size_t *ooff;
    double *oy, one;
    gmm_obs obs;
    /* whitening, allocated by the first setup: L's and Lbar's band storage,
     * x of whiten_rev, the solve's work (n each), the setup's theta */
    double *wbuf, *wL, *wLb, *wx, *wwork, *wtheta;
    size_t *wreach;       /* gmm_band_tri_reach of L (n) */
    gmm_band L;           /* view of wL: the factor */
    int wready;
} gmrf_impl;

static void gmrf_free_impl(void *p)
{
    gmrf_impl *c = p;
    if (!c)
        return;
    gmm_band_free(c->Q);
    gmm_band_free(c->Qbar);
    gmm_marglik_work_free(c->w);
    gmm_free(c->ooff);
    gmm_free(c->oy);
    gmm_free(c->theta);
    gmm_free(c->wbuf);
    gmm_free(c->wreach);
    gmm_free(c);
}

static gmm_status gmrf_prior(void *p, const double *theta, gmm_band *Q, double *logdet)
{
    gmrf_impl *c = p;
    *logdet = NAN;
    gmm_status st = gmm_gmrf_assemble(c->g, theta, Q);
    c->prior_ok = st == GMM_OK;
    if (c->prior_ok)
        memcpy(c->theta, theta, c->g->nparam * sizeof *theta);
    return st;
}

static gmm_status gmrf_prior_rev(void *p, const gmm_band *Qbar, double logdetbar,
                                 double *thetabar)
{
    gmrf_impl *c = p;
    (void)logdetbar; /* 0: checked by latent.c */
    if (!c->prior_ok)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev: no gmm_latent_prior before");
    return gmm_gmrf_assemble_rev(c->g, c->theta, Qbar, thetabar);
}

/* The band workspaces of the exact Gaussian likelihood, on first use. */
static gmm_status gauss_work(gmrf_impl *c)
{
    if (c->w)
        return GMM_OK;
    c->Q = gmm_gmrf_band_alloc(c->g, 0);
    c->Qbar = c->Q ? gmm_gmrf_band_alloc(c->g, 0) : NULL;
    if (!c->Q || !c->Qbar)
        return GMM_ENOMEM; /* recorded by gmm_gmrf_band_alloc */
    c->w = gmm_marglik_work_alloc(c->g->n, c->g->bw);
    return c->w ? GMM_OK : GMM_ENOMEM;
}

static gmm_status gmrf_gaussian(void *p, const double *theta, const double *y, double noise,
                                double *loglik, double *thetabar, double *noisebar)
{
    gmrf_impl *c = p;
    gmm_status st;
    if ((st = gauss_work(c)))
        return st;
    if (!isfinite(noise) || !(noise > 0.0))
        return gmm_error(GMM_EDOM, "likelihood.variance = %g must be positive and finite",
                         noise);
    size_t o = 0;
    for (size_t r = 0; r < c->nrows; r++) {
        if (isnan(y[r]))
            continue;
        if (!isfinite(y[r]))
            return gmm_error_at(GMM_EINVAL, r, "y[%zu] = %g is not finite", r, y[r]);
        c->ooff[o] = c->offset[r];
        c->oy[o++] = y[r];
    }
    c->obs = (gmm_obs){c->g->n, o, 1, c->ooff, &c->one, 0, c->oy};
    if ((st = gmm_gmrf_assemble(c->g, theta, c->Q)) ||
        (st = gmm_marglik_eval(c->Q, &c->obs, noise, NULL, c->w, loglik)))
        return st;
    if (!thetabar)
        return GMM_OK;
    double nb = 0.0;
    gmm_band_set_zero(c->Qbar);
    if ((st = gmm_marglik_grad(c->w, c->Qbar, &nb)))
        return st;
    memset(thetabar, 0, c->g->nparam * sizeof *thetabar);
    if ((st = gmm_gmrf_assemble_rev(c->g, theta, c->Qbar, thetabar)))
        return st;
    if (noisebar)
        *noisebar = nb;
    return GMM_OK;
}

static gmm_status gmrf_gaussian_post(void *p, double *mean, gmm_band *cov)
{
    gmrf_impl *c = p;
    if (!c->w)
        return gmm_error(GMM_EINVAL, "graph latent: no Gaussian evaluation yet");
    return gmm_marglik_posterior(c->w, mean, cov);
}

static gmm_status gmrf_whiten_setup(void *p, const double *theta)
{
    gmrf_impl *c = p;
    gmm_status st;
    size_t n = c->g->n, bw = c->g->bw;
    c->wready = 0;
    if (!c->wbuf) {
        size_t band = gmm_band_size(n, bw, 0);
        if ((st = gmm_gmrf_band_check(c->g, 0)))
            return st;
        c->wbuf = gmm_malloc(2 * band + 2 * n + (c->g->nparam ? c->g->nparam : 1),
                             sizeof *c->wbuf);
        c->wreach = gmm_malloc(n ? n : 1, sizeof *c->wreach);
        if (!c->wbuf || !c->wreach)
            return gmm_error(GMM_ENOMEM, "out of memory for the whitening workspace (two "
                                         "bands of %zu x %zu, bandwidth %zu)",
                             n, n, bw);
        c->wL = c->wbuf;
        c->wLb = c->wL + band;
        c->wx = c->wLb + band;
        c->wwork = c->wx + n;
        c->wtheta = c->wwork + n;
    }
    /* Q assembled in L's storage, factorised in place (the view turns LOWER) */
    if ((st = gmm_band_view(&c->L, c->wL, n, bw, 0, GMM_BAND_SYMMETRIC)) ||
        (st = gmm_gmrf_assemble(c->g, theta, &c->L)) || (st = gmm_band_chol_decomp(&c->L, &c->L)) ||
        (st = gmm_band_tri_reach(&c->L, c->wreach)))
        return st;
    memcpy(c->wtheta, theta, c->g->nparam * sizeof *theta);
    c->wready = 1;
    return GMM_OK;
}

static gmm_status wready(const gmrf_impl *c, const double *a, const double *b, const char *fn)
{
    if (!c->wready)
        return gmm_error(GMM_EINVAL, "%s: no successful whitening setup before", fn);
    if (!a || !b)
        return gmm_error(GMM_EINVAL, "%s: NULL argument", fn);
    return GMM_OK;
}

static gmm_status gmrf_whiten(void *p, const double *v, double *x)
{
    gmrf_impl *c = p;
    gmm_status st = wready(c, v, x, "gmm_latent_whiten");
    if (st)
        return st;
    if (x != v)
        memcpy(x, v, c->g->n * sizeof *x);
    return gmm_band_tri_solve_vec_reach(&c->L, c->wreach, GMM_TRANS, x);
}

static gmm_status gmrf_unwhiten(void *p, const double *x, double *v)
{
    gmrf_impl *c = p;
    gmm_status st = wready(c, x, v, "gmm_latent_unwhiten");
    if (st)
        return st;
    if (x == v)
        return gmm_error(GMM_EINVAL, "gmm_latent_unwhiten: x and v alias");
    return gmm_band_gemv(GMM_TRANS, 1.0, &c->L, x, 0.0, v); /* v = L' x */
}

static gmm_status gmrf_whiten_t(void *p, const double *g, double *u)
{
    gmrf_impl *c = p;
    gmm_status st = wready(c, g, u, "gmm_latent_whiten_t");
    if (st)
        return st;
    if (u != g)
        memcpy(u, g, c->g->n * sizeof *u);
    return gmm_band_tri_solve_vec_reach(&c->L, c->wreach, GMM_NOTRANS, u);
}

static gmm_status gmrf_whiten_rev(void *p, const double *v, const double *xbar,
                                  double *thetabar)
{
    gmrf_impl *c = p;
    gmm_status st = wready(c, v, xbar, "gmm_latent_whiten_rev");
    if (st)
        return st;
    if (!thetabar)
        return gmm_error(GMM_EINVAL, "gmm_latent_whiten_rev: NULL argument");
    size_t n = c->g->n;
    gmm_band Lb;
    memcpy(c->wx, v, n * sizeof *v);
    if ((st = gmm_band_tri_solve_vec(&c->L, GMM_TRANS, c->wx)) ||
        (st = gmm_band_view(&Lb, c->wLb, n, c->g->bw, 0, GMM_BAND_LOWER)))
        return st;
    gmm_band_set_zero(&Lb);
    /* Lbar, then Qbar in the same storage (the view turns SYMMETRIC) */
    if ((st = gmm_band_tri_solve_vec_rev(&c->L, GMM_TRANS, c->wx, xbar, NULL, &Lb, c->wwork)) ||
        (st = gmm_band_chol_decomp_rev(&c->L, &Lb, &Lb)))
        return st;
    return gmm_gmrf_assemble_rev(c->g, c->wtheta, &Lb, thetabar);
}

static const gmm_latent_ops gmrf_ops = {
    .family = "graph",
    .free = gmrf_free_impl,
    .prior = gmrf_prior,
    .prior_rev = gmrf_prior_rev,
    .gaussian = gmrf_gaussian,
    .gaussian_posterior = gmrf_gaussian_post,
    .whiten_setup = gmrf_whiten_setup,
    .whiten = gmrf_whiten,
    .whiten_t = gmrf_whiten_t,
    .unwhiten = gmrf_unwhiten,
    .whiten_rev = gmrf_whiten_rev,
};

gmm_status gmm_latent_gmrf_alloc(const gmm_gmrf *g, size_t nrows, const size_t *row_node,
                                 gmm_latent **out)
{
    if (!g || !out || (nrows && !row_node))
        return gmm_error(GMM_EINVAL, "gmm_latent_gmrf_alloc: NULL argument");
    *out = NULL;
    for (size_t r = 0; r < nrows; r++)
        if (row_node[r] >= g->n)
            return gmm_error_at(GMM_EINVAL, r, "row %zu: node %zu of a graph of %zu nodes", r,
                                row_node[r], g->n);
    gmm_status st = gmm_gmrf_band_check(g, 0);
    if (st)
        return st;
    gmm_latent *l = latent_new(&gmrf_ops, nrows, 1, g->nparam);
    gmrf_impl *c = gmm_calloc(1, sizeof *c);
    if (l)
        l->impl = c;
    if (c) {
        c->ooff = gmm_malloc(nrows ? nrows : 1, sizeof *c->ooff);
        c->oy = gmm_malloc(nrows ? nrows : 1, sizeof *c->oy);
        c->theta = gmm_malloc(g->nparam ? g->nparam : 1, sizeof *c->theta);
    }
    if (l)
        l->node_row = gmm_malloc(g->n ? g->n : 1, sizeof *l->node_row);
    if (!l || !c || !c->ooff || !c->oy || !c->theta || !l->node_row) {
        if (!l)
            gmrf_free_impl(c);
        gmm_latent_free(l);
        return gmm_error(GMM_ENOMEM, "out of memory for the latent model");
    }
    c->g = g;
    c->nrows = nrows;
    c->one = 1.0;
    c->offset = l->offset;
    l->n = g->n;
    l->kl = g->bw;
    l->cov_kl = g->bw;
    for (size_t v = 0; v < g->n; v++)
        l->node_row[v] = g->iperm[v];
    for (size_t r = 0; r < nrows; r++) {
        l->offset[r] = g->iperm[row_node[r]];
        l->coef[r] = 1.0;
    }
    for (size_t i = 0; i < g->nparam; i++) {
        l->name[i] = g->param_name[i];
        l->start[i] = g->param_value[i];
        l->zero_ok[i] = g->param_zero_ok[i];
    }
    *out = l;
    return GMM_OK;
}
