/* latent_gmrf.c -- the graph family as a gmm_latent (latent.h): Q assembled
 * in RCM order (gmrf.h), one latent per node, each data row reading its
 * node's latent with coefficient 1.
 *
 * WHITENING.  W = L^-T, L L' = Q (banded Cholesky of the assembled Q at the
 * setup's theta): x = L^-T v and W' g = L^-1 g are one banded triangular
 * solve each.  Reverse mode of c = xbar . L^-T v: Lbar from the solve's
 * reverse (gmm_band_tri_solve_vec_rev, x recomputed), Qbar from the
 * Cholesky's (gmm_band_chol_decomp_rev, in Lbar's storage), thetabar from
 * the assembly's (gmm_gmrf_assemble_rev).  Forward saves L and theta; whiten
 * its x and whiten_t its u = L^-1 g, for a whiten_rev of them (v, xbar
 * NULL), which then needs neither solve: the solve's reverse is -x u' on
 * L's band. */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_asm.h"
#include "../latent_impl.h"
#include "../latent_sparse.h"

typedef struct {
    latent_asm as;        /* first: Q's assembly, the rows (one node's latent
                           * each), the Gaussian likelihood (latent_asm.h) */
    const gmm_gmrf *g;
    double *theta;        /* nparam: of the last prior call, for its reverse */
    int prior_ok;         /* that call succeeded: 1 the band one, 2 the sparse one */
    /* whitening, allocated by the first setup: L's and Lbar's band storage,
     * x of whiten_rev, the solve's work, x of the last whiten, u of the
     * last whiten_t (n each), the setup's theta */
    double *wbuf, *wL, *wLb, *wx, *wwork, *wsx, *wsu, *wtheta;
    size_t *wreach;       /* gmm_band_tri_reach of L (n) */
    gmm_band L;           /* view of wL: the factor */
    int wready;
    int wsx_ok, wsu_ok;   /* whiten, whiten_t since the setup */
    /* the sparse prior (latent.h), on first use: the pattern of the
     * diagonal and the edges, and where each sits in it (n + nedge:
     * gmm_gmrf_assemble_at's pos) */
    latent_sparse ls;
    size_t *spos;
} gmrf_impl;

static void gmrf_free_impl(void *p)
{
    gmrf_impl *c = p;
    if (!c)
        return;
    latent_asm_gauss_free(&c->as.gs);
    gmm_free(c->theta);
    gmm_free(c->wbuf);
    gmm_free(c->wreach);
    latent_sparse_free(&c->ls);
    gmm_free(c->spos);
    gmm_free(c);
}

static gmm_status gmrf_assemble(void *p, const double *theta, gmm_band *Q)
{
    const gmrf_impl *c = p;
    return gmm_gmrf_assemble(c->g, theta, Q);
}

static gmm_status gmrf_assemble_rev(void *p, const double *theta, const gmm_band *Qbar,
                                    double *thetabar)
{
    const gmrf_impl *c = p;
    return gmm_gmrf_assemble_rev(c->g, theta, Qbar, thetabar);
}

static gmm_status gmrf_prior(void *p, const double *theta, gmm_band *Q, double *logdet)
{
    gmrf_impl *c = p;
    *logdet = NAN;
    gmm_status st = gmm_gmrf_assemble(c->g, theta, Q);
    c->prior_ok = st == GMM_OK; /* 1: the band one */
    if (c->prior_ok)
        memcpy(c->theta, theta, c->g->nparam * sizeof *theta);
    return st;
}

static gmm_status gmrf_prior_rev(void *p, const gmm_band *Qbar, double logdetbar,
                                 double *thetabar)
{
    gmrf_impl *c = p;
    (void)logdetbar; /* 0: checked by latent.c */
    if (c->prior_ok != 1)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev: no gmm_latent_prior before");
    return gmm_gmrf_assemble_rev(c->g, c->theta, Qbar, thetabar);
}

/* The sparse prior's symbolic work (the graph's adjacency), on first use. */
static gmm_status sparse_setup(gmrf_impl *c)
{
    const gmm_gmrf *g = c->g;
    size_t n = g->n, m = g->nedge;
    gmm_status st;
    if (c->spos)
        return GMM_OK;
    size_t *diag = gmm_malloc(n ? n : 1, sizeof *diag);
    size_t *pos = gmm_malloc(n + m ? n + m : 1, sizeof *pos);
    if (!diag || !pos) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the graph's sparse prior (n = %zu, %zu "
                                   "edges)",
                       n, m);
        goto fail;
    }
    for (size_t r = 0; r < n; r++)
        diag[r] = r;
    if ((st = latent_sparse_init(&c->ls, n, m, g->ehi, g->elo)) ||
        (st = latent_sparse_find(c->ls.Q, n, diag, diag, pos)) ||
        (st = latent_sparse_find(c->ls.Q, m, g->ehi, g->elo, pos + n)))
        goto fail;
    gmm_free(diag);
    c->spos = pos;
    return GMM_OK;
fail:
    latent_sparse_free(&c->ls);
    gmm_free(diag);
    gmm_free(pos);
    return st;
}

static gmm_status gmrf_prior_pattern(const void *p, gmm_sparse **Q)
{
    gmrf_impl *c = (gmrf_impl *)p; /* the symbolic work is cached */
    gmm_status st = sparse_setup(c);
    return st ? st : latent_sparse_pattern(&c->ls, Q);
}

static gmm_status gmrf_prior_sparse(void *p, const double *theta, gmm_sparse *Q,
                                    double *logdet)
{
    gmrf_impl *c = p;
    gmm_status st;
    *logdet = NAN;
    c->prior_ok = 0;
    if ((st = sparse_setup(c)))
        return st;
    gmm_sparse_set_zero(c->ls.Q);
    if ((st = gmm_gmrf_assemble_at(c->g, theta, c->spos, c->ls.Q->val)) ||
        (st = latent_sparse_put(&c->ls, Q)))
        return st;
    memcpy(c->theta, theta, c->g->nparam * sizeof *theta);
    c->prior_ok = 2; /* the sparse one */
    return GMM_OK;
}

static gmm_status gmrf_prior_rev_sparse(void *p, const gmm_sparse *Qbar, double logdetbar,
                                        double *thetabar)
{
    gmrf_impl *c = p;
    gmm_status st;
    (void)logdetbar; /* 0: checked by latent.c */
    if (c->prior_ok != 2)
        return gmm_error(GMM_EINVAL, "gmm_latent_prior_rev_sparse: no gmm_latent_prior_sparse "
                                     "before");
    if ((st = latent_sparse_get(&c->ls, Qbar)))
        return st;
    return gmm_gmrf_assemble_at_rev(c->g, c->theta, c->spos, c->ls.Qbar->val, thetabar);
}

static gmm_status gmrf_band_check(const void *p)
{
    const gmrf_impl *c = p;
    return gmm_gmrf_band_check(c->g, 0);
}

/* The band workspaces of the exact Gaussian likelihood, on first use. */
static gmm_status gauss_work(void *p)
{
    gmrf_impl *c = p;
    if (c->as.gs.w)
        return GMM_OK;
    c->as.gs.Q = gmm_gmrf_band_alloc(c->g, 0);
    c->as.gs.Qbar = c->as.gs.Q ? gmm_gmrf_band_alloc(c->g, 0) : NULL;
    if (!c->as.gs.Q || !c->as.gs.Qbar)
        return GMM_ENOMEM; /* recorded by gmm_gmrf_band_alloc */
    c->as.gs.w = gmm_marglik_work_alloc(c->g->n, c->g->bw);
    return c->as.gs.w ? GMM_OK : GMM_ENOMEM;
}

static gmm_status gmrf_whiten_setup(void *p, const double *theta)
{
    gmrf_impl *c = p;
    gmm_status st;
    size_t n = c->g->n, bw = c->g->bw;
    c->wready = c->wsx_ok = c->wsu_ok = 0;
    if (!c->wbuf) {
        size_t band = gmm_band_size(n, bw, 0);
        if ((st = gmm_gmrf_band_check(c->g, 0)))
            return st;
        c->wbuf = gmm_malloc(2 * band + 4 * n + (c->g->nparam ? c->g->nparam : 1),
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
        c->wsx = c->wwork + n;
        c->wsu = c->wsx + n;
        c->wtheta = c->wsu + n;
    }
    /* Q assembled in L's storage, factorised in place (the view turns LOWER) */
    if ((st = gmm_band_view(&c->L, c->wL, n, bw, 0, GMM_BAND_SYMMETRIC)) ||
        (st = latent_asm_factor(&c->as, theta, &c->L)) ||
        (st = gmm_band_tri_reach(&c->L, c->wreach)))
        return st;
    memcpy(c->wtheta, theta, c->g->nparam * sizeof *theta);
    c->wready = 1;
    return GMM_OK;
}

static gmm_status gmrf_whiten(void *p, const double *v, double *x)
{
    gmrf_impl *c = p;
    gmm_status st = latent_asm_wready(c->wready, v, x, "gmm_latent_whiten");
    if (st || (st = latent_asm_whiten_z(&c->as, &c->L, c->wreach, v, x)))
        return st;
    memcpy(c->wsx, x, c->g->n * sizeof *x);
    c->wsx_ok = 1;
    return GMM_OK;
}

static gmm_status gmrf_unwhiten(void *p, const double *x, double *v)
{
    gmrf_impl *c = p;
    gmm_status st = latent_asm_wready(c->wready, x, v, "gmm_latent_unwhiten");
    if (st)
        return st;
    if (x == v)
        return gmm_error(GMM_EINVAL, "gmm_latent_unwhiten: x and v alias");
    return gmm_band_gemv(GMM_TRANS, 1.0, &c->L, x, 0.0, v); /* v = L' x */
}

static gmm_status gmrf_whiten_t(void *p, const double *g, double *u)
{
    gmrf_impl *c = p;
    gmm_status st = latent_asm_wready(c->wready, g, u, "gmm_latent_whiten_t");
    if (st)
        return st;
    if (u != g)
        memcpy(u, g, c->g->n * sizeof *u);
    if ((st = gmm_band_tri_solve_vec_reach(&c->L, c->wreach, GMM_NOTRANS, u)))
        return st;
    memcpy(c->wsu, u, c->g->n * sizeof *u);
    c->wsu_ok = 1;
    return GMM_OK;
}

static gmm_status gmrf_whiten_rev(void *p, const double *v, const double *xbar,
                                  double *thetabar)
{
    gmrf_impl *c = p;
    gmm_status st =
        latent_asm_wready_rev(c->wready, c->wsx_ok, c->wsu_ok, v, xbar, thetabar);
    if (st)
        return st;
    gmm_band Lb;
    const double *z = v ? c->wx : c->wsx;
    if ((v && (st = latent_asm_whiten_z(&c->as, &c->L, NULL, v, c->wx))) ||
        (st = gmm_band_view(&Lb, c->wLb, c->g->n, c->g->bw, 0, GMM_BAND_LOWER)) ||
        (st = latent_asm_factor_rev(&c->as, &c->L, z, xbar, xbar ? NULL : c->wsu, &Lb,
                                    c->wwork)))
        return st;
    return gmm_gmrf_assemble_rev(c->g, c->wtheta, &Lb, thetabar);
}

/* One iid term, Q = I / variance: a single scale block (latent.h). */
static int gmrf_scale_blocks(const void *p, size_t *par)
{
    const gmm_gmrf *g = ((const gmrf_impl *)p)->g;
    if (g->nterm != 1 || strcmp(gmm_gmrf_term_family(g, 0), "iid") != 0)
        return 0;
    for (size_t j = 0; par && j < g->n; j++)
        par[j] = 0;
    return 1;
}

static const gmm_latent_ops gmrf_ops = {
    .family = "graph",
    .free = gmrf_free_impl,
    .prior = gmrf_prior,
    .prior_rev = gmrf_prior_rev,
    .gaussian = latent_asm_gaussian,
    .gaussian_posterior = latent_asm_posterior,
    .whiten_setup = gmrf_whiten_setup,
    .whiten = gmrf_whiten,
    .whiten_t = gmrf_whiten_t,
    .unwhiten = gmrf_unwhiten,
    .whiten_rev = gmrf_whiten_rev,
    .prior_pattern = gmrf_prior_pattern,
    .prior_sparse = gmrf_prior_sparse,
    .prior_rev_sparse = gmrf_prior_rev_sparse,
    .band_check = gmrf_band_check,
    .scale_blocks = gmrf_scale_blocks,
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
    /* the band's limit waits for the band path (gmm_latent_band_check) */
    gmm_latent *l = latent_new(&gmrf_ops, nrows, 1, g->nparam);
    gmrf_impl *c = gmm_calloc(1, sizeof *c);
    if (l)
        l->impl = c;
    if (c) {
        c->as.gs.ooff = gmm_malloc(nrows ? nrows : 1, sizeof *c->as.gs.ooff);
        c->as.gs.oy = gmm_malloc(nrows ? nrows : 1, sizeof *c->as.gs.oy);
        c->theta = gmm_malloc(g->nparam ? g->nparam : 1, sizeof *c->theta);
    }
    if (l)
        l->node_row = gmm_malloc(g->n ? g->n : 1, sizeof *l->node_row);
    if (!l || !c || !c->as.gs.ooff || !c->as.gs.oy || !c->theta || !l->node_row) {
        if (!l)
            gmrf_free_impl(c);
        gmm_latent_free(l);
        return gmm_error(GMM_ENOMEM, "out of memory for the latent model");
    }
    c->g = g;
    c->as = (latent_asm){.ctx = c, .what = "graph latent", .n = g->n, .nparam = g->nparam,
                         .assemble = gmrf_assemble, .assemble_rev = gmrf_assemble_rev,
                         .work = gauss_work,
                         .map = gmm_latent_obs_map(l),
                         .gs = c->as.gs}; /* its rows allocated above */
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
