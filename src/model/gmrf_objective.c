/* gmrf_objective.c -- the graph GMRF's Gaussian marginal likelihood as a
 * gmm_objective: assemble Q, marglik, chain Qbar to the parameters. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/gmrf.h"

typedef struct {
    const gmm_gmrf *m;
    const gmm_obs *obs;
    gmm_band *Q, *Qbar;
    gmm_marglik_work *w;
} gmrf_ctx;

static gmm_status eval(void *vctx, const double *theta, double *f, double *grad)
{
    gmrf_ctx *c = vctx;
    size_t np = c->m->nparam;
    double noise = theta[np];
    if (!isfinite(noise) || !(noise > 0.0))
        return gmm_error(GMM_EDOM, "noise.variance = %g must be > 0", noise);
    gmm_status st = gmm_gmrf_assemble(c->m, theta, c->Q);
    if (st == GMM_OK)
        st = gmm_marglik_eval(c->Q, c->obs, noise, NULL, c->w, f);
    if (st != GMM_OK || !grad)
        return st;
    double noisebar = 0.0;
    gmm_band_set_zero(c->Qbar);
    if ((st = gmm_marglik_grad(c->w, c->Qbar, &noisebar)) != GMM_OK)
        return st;
    memset(grad, 0, np * sizeof *grad);
    if ((st = gmm_gmrf_assemble_rev(c->m, theta, c->Qbar, grad)) != GMM_OK)
        return st;
    grad[np] = noisebar;
    return GMM_OK;
}

void gmm_gmrf_objective_free(gmm_objective *o)
{
    if (!o)
        return;
    gmrf_ctx *c = o->ctx;
    if (c) {
        gmm_band_free(c->Q);
        gmm_band_free(c->Qbar);
        gmm_marglik_work_free(c->w);
        gmm_free(c);
    }
    if (o->name)
        for (size_t k = 0; k < o->nparam; k++)
            gmm_free(o->name[k]);
    gmm_free(o->name);
    gmm_free(o->value);
    gmm_free(o->positive);
    gmm_free(o->fixed);
    gmm_free(o);
}

gmm_status gmm_gmrf_objective_alloc(const gmm_gmrf *m, const gmm_obs *obs, double noise,
                                    size_t limit, gmm_objective **out)
{
    if (!m || !obs || !out)
        return gmm_error(GMM_EINVAL, "precision: NULL argument to gmm_gmrf_objective_alloc");
    *out = NULL;
    if (!isfinite(noise) || !(noise > 0.0))
        return gmm_error(GMM_EINVAL, "noise.variance = %g must be > 0", noise);
    if (obs->n != m->n)
        return gmm_error(GMM_EDIM, "precision: observations over %zu nodes, model has %zu",
                         obs->n, m->n);
    gmm_status st = gmm_gmrf_band_check(m, limit);
    if (st != GMM_OK)
        return st;

    size_t np = m->nparam + 1;
    gmm_objective *o = gmm_calloc(1, sizeof *o);
    gmrf_ctx *c = gmm_calloc(1, sizeof *c);
    if (o) {
        o->ctx = c;
        o->name = gmm_calloc(np, sizeof *o->name);
        o->value = gmm_calloc(np, sizeof *o->value);
        o->positive = gmm_calloc(np, sizeof *o->positive);
        o->fixed = gmm_calloc(np, sizeof *o->fixed);
    }
    if (!o || !c || !o->name || !o->value || !o->positive || !o->fixed) {
        if (o)
            o->nparam = 0;
        else
            gmm_free(c);
        gmm_gmrf_objective_free(o);
        return gmm_error(GMM_ENOMEM, "precision: out of memory");
    }
    o->nparam = np;
    o->eval = eval;
    c->m = m;
    c->obs = obs;
    for (size_t k = 0; k < np; k++) {
        const char *name = k < m->nparam ? m->param_name[k] : "noise.variance";
        o->name[k] = gmm_malloc(strlen(name) + 1, 1);
        if (!o->name[k]) {
            st = gmm_error(GMM_ENOMEM, "precision: out of memory");
            goto fail;
        }
        strcpy(o->name[k], name);
        o->value[k] = k < m->nparam ? m->param_value[k] : noise;
        o->positive[k] = 1;
    }
    c->Q = gmm_gmrf_band_alloc(m, limit);
    c->Qbar = c->Q ? gmm_gmrf_band_alloc(m, limit) : NULL;
    if (!c->Q || !c->Qbar) {
        st = GMM_ENOMEM; /* message recorded by gmm_gmrf_band_alloc */
        goto fail;
    }
    c->w = gmm_marglik_work_alloc(m->n, m->bw);
    if (!c->w) {
        st = GMM_ENOMEM; /* recorded by gmm_marglik_work_alloc */
        goto fail;
    }
    *out = o;
    return GMM_OK;

fail:
    gmm_gmrf_objective_free(o);
    return st;
}

gmm_marglik_work *gmm_gmrf_objective_work(const gmm_objective *o)
{
    return o && o->ctx ? ((const gmrf_ctx *)o->ctx)->w : NULL;
}
