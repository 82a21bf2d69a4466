/* model_terms.c -- a built model (model.h) term by term: each
 * coefficient's estimate and standard error, and each f() term's posterior
 * at each of its levels. */
#include "model_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/fit.h"
#include "gmm/stack.h"
#include "gmm/vi.h"

void gmm_mdl_terms_free(gmm_mdl_terms *t)
{
    if (!t)
        return;
    gmm_free(t->term);
    for (size_t i = 0; t->level && i < t->n; i++)
        gmm_free(t->level[i]);
    gmm_free(t->level);
    gmm_free(t->mean);
    gmm_free(t->sd);
    memset(t, 0, sizeof *t);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A stacked term's kind (a quoted model is a graph precision). */
static gmm_stack_model stack_kind_of(const gmm_formula_latent *t)
{
    int k = gmm_mdl_impl_stack_kind(t);
    return k < 0 ? GMM_STACK_GRAPH : (gmm_stack_model)k;
}

/* The rows a stacked component contributes: one per level (rw2: its x_j,
 * not the slopes; a kernel: H x at each value; bym2: b then u). */
static size_t stack_rows(const gmm_mdl *m, size_t k)
{
    return gmm_latent_stack_nlevel(m->lat, k);
}

/* The sparse path's moments of every stacked level (stack_terms' order)
 * as linear forms of the latent (gmm_problem_predict_forms): nr of them
 * into *fm and *fv (allocated). */
static gmm_status sparse_levels(gmm_mdl *m, size_t nr, double **fm, double **fv)
{
    size_t cap = gmm_latent_stack_row_max(m->lat), r = 0;
    size_t *ptr = gmm_malloc(nr + 1, sizeof *ptr), *idx = gmm_malloc(nr * cap + 1, sizeof *idx);
    double *w = gmm_malloc(nr * cap + 1, sizeof *w);
    *fm = gmm_malloc(2 * nr + 1, sizeof **fm);
    *fv = *fm ? *fm + nr : NULL;
    gmm_status s = GMM_OK;
    if (!ptr || !idx || !w || !*fm)
        s = gmm_error(GMM_ENOMEM, "out of memory for the posterior (%zu levels)", nr);
    if (ptr)
        ptr[0] = 0;
    for (size_t k = 0; s == GMM_OK && k < m->nterm; k++)
        for (size_t j = 0; s == GMM_OK && j < stack_rows(m, k); j++, r++) {
            size_t ne = 0;
            s = gmm_latent_stack_level(m->lat, k, j, idx + ptr[r], w + ptr[r], &ne);
            ptr[r + 1] = ptr[r] + ne;
        }
    if (s == GMM_OK)
        s = gmm_problem_predict_forms(m->prob, m->obj->value, nr, ptr, idx, w, *fm, *fv);
    gmm_free(ptr);
    gmm_free(idx);
    gmm_free(w);
    return s;
}

/* Stacked latent rows from index nc on: component k's levels in its local
 * order, each with the posterior mean and sd of its latent (the marginal of
 * the constrained Gaussian or Laplace posterior at the model's values). */
static gmm_status stack_terms(gmm_mdl *m, size_t nc, gmm_mdl_terms *out)
{
    gmm_latent *l = m->lat;
    size_t n = gmm_latent_dim(l);
    double *mean = gmm_malloc(n ? n : 1, sizeof *mean);
    size_t cap = gmm_latent_stack_row_max(l), *ix = gmm_malloc(cap ? cap : 1, sizeof *ix);
    double *wx = gmm_malloc(cap ? cap : 1, sizeof *wx);
    /* the sparse path keeps no covariance band: each level's moments */
    int sparse = gmm_problem_sparse(m->prob);
    size_t nlev = 0;
    for (size_t k = 0; k < m->nterm; k++)
        nlev += stack_rows(m, k);
    double *fm = NULL, *fv = NULL;
    gmm_band *cov =
        sparse ? NULL : gmm_band_alloc(n, gmm_latent_cov_bandwidth(l), 0, GMM_BAND_SYMMETRIC);
    gmm_status s = GMM_OK;
    if (!mean || (!sparse && !cov) || !ix || !wx) {
        s = gmm_error(GMM_ENOMEM, "out of memory for the posterior (%zu latents)", n);
        goto done;
    }
    if ((s = sparse ? sparse_levels(m, nlev, &fm, &fv)
                    : gmm_problem_posterior(m->prob, m->obj->value, mean, cov)) != GMM_OK)
        goto done;
    size_t r = nc;
    for (size_t k = 0; k < m->nterm && s == GMM_OK; k++) {
        const gmm_formula_latent *t = &m->fm->latent[k];
        gmm_stack_model kd = stack_kind_of(t);
        size_t nr = stack_rows(m, k), nv = 0;
        const double *val = gmm_latent_stack_values(l, k, &nv);
        /* a correlated term's latents: level by level, its effects each */
        size_t ke = m->scorr && m->scorr[k].k ? m->scorr[k].k : 1;
        for (size_t j = 0; j < nr && s == GMM_OK; j++, r++) {
            size_t lev = kd == GMM_STACK_BYM2 && j >= nr / 2 ? j - nr / 2 : j / ke;
            size_t ne = 0;
            if ((s = gmm_latent_stack_level(l, k, j, ix, wx, &ne)) != GMM_OK)
                break;
            char buf[64];
            const char *label = buf;
            if (val)
                snprintf(buf, sizeof buf, "%.17g", val[lev]);
            else
                label = gmm_graph_node_label(m->sg[k], lev, buf);
            const char *eff = m->scorr && m->scorr[k].k ? m->scorr[k].name[j % ke] : NULL;
            snprintf(out->term[r], sizeof out->term[r], "f.%s%s%s%s", t->label ? t->label : t->name,
                     kd == GMM_STACK_BYM2 && j >= nr / 2 ? ".u" : "", eff ? "." : "",
                     eff ? eff : "");
            if (!(out->level[r] = gmm_strdup(label))) {
                s = gmm_error(GMM_ENOMEM, "out of memory");
                break;
            }
            double mu = sparse ? fm[r - nc] : 0.0, v = sparse ? fv[r - nc] : 0.0;
            for (size_t a = 0; !sparse && a < ne; a++) {
                mu += wx[a] * mean[ix[a]];
                for (size_t c = 0; c < ne; c++)
                    v += wx[a] * wx[c] * gmm_band_get(cov, ix[a], ix[c]);
            }
            out->mean[r] = mu;
            out->sd[r] = sqrt(v > 0.0 ? v : 0.0);
        }
    }
done:
    gmm_free(mean);
    gmm_free(fm);
    gmm_free(ix);
    gmm_free(wx);
    gmm_band_free(cov);
    return s;
}

gmm_status gmm_mdl_terms_get(gmm_mdl *m, gmm_mdl_terms *out)
{
    memset(out, 0, sizeof *out);
    gmm_objective *o = m->obj;
    size_t np = o->nparam, nc = m->ncoef, nl = 0;
    int inputs = gmm_latent_has_inputs(m->lat);
    double *xq = NULL, *se = NULL;
    gmm_status s = GMM_OK;
    if (inputs) {
        /* the distinct data inputs, in order */
        xq = gmm_malloc(m->nrow ? m->nrow : 1, sizeof *xq);
        if (!xq)
            return gmm_error(GMM_ENOMEM, "out of memory");
        memcpy(xq, m->x, m->nrow * sizeof *xq);
        qsort(xq, m->nrow, sizeof *xq, cmp_double);
        for (size_t i = 0; i < m->nrow; i++)
            if (nl == 0 || xq[i] != xq[nl - 1])
                xq[nl++] = xq[i];
    } else if (m->stack) {
        for (size_t k = 0; k < m->nterm; k++)
            nl += stack_rows(m, k);
    } else {
        nl = m->gmrf->n;
    }
    size_t n = nc + nl, nn = n ? n : 1;
    out->term = gmm_calloc(nn, sizeof *out->term);
    out->level = gmm_calloc(nn, sizeof *out->level);
    out->mean = gmm_malloc(nn, sizeof *out->mean);
    out->sd = gmm_malloc(nn, sizeof *out->sd);
    se = gmm_malloc(np ? np : 1, sizeof *se);
    if (!out->term || !out->level || !out->mean || !out->sd || !se) {
        s = gmm_error(GMM_ENOMEM, "out of memory");
        goto done;
    }
    out->n = n;
    if (nc) {
        /* as fit's std_errors: the observed information at the values;
         * a model not at a maximum has none (NAN) */
        if (gmm_fit_std_errors(o, se) != GMM_OK) {
            out->se_failed = 1;
            for (size_t k = 0; k < np; k++)
                se[k] = NAN;
        }
    }
    for (size_t k = 0; k < nc; k++) {
        if (!(out->level[k] = gmm_strdup(""))) {
            s = gmm_error(GMM_ENOMEM, "out of memory");
            goto done;
        }
        snprintf(out->term[k], sizeof out->term[k], "%s", o->name[np - nc + k]);
        /* an aliased column's coefficient is not estimated (model.c) */
        int al = m->aliased && m->aliased[k];
        out->mean[k] = al ? NAN : o->value[np - nc + k];
        out->sd[k] = al ? NAN : se[np - nc + k];
    }
    if (m->stack) {
        s = stack_terms(m, nc, out);
        goto done;
    }
    /* the term's name: f.NAME for a formula, else f */
    char tname[64] = "f";
    if (m->fm && m->fm->nlatent == 1)
        snprintf(tname, sizeof tname, "f.%s", m->fm->latent[0].name);
    double *mean = out->mean + nc, *var = out->sd + nc;
    s = m->vi ? gmm_vi_predict_latent(m->vi, xq, nl, mean, var)
              : gmm_problem_predict_latent(m->prob, o->value, xq, nl, mean, var);
    for (size_t i = 0; s == GMM_OK && i < nl; i++) {
        char buf[64];
        snprintf(out->term[nc + i], sizeof out->term[0], "%s", tname);
        if (inputs)
            snprintf(buf, sizeof buf, "%.17g", xq[i]);
        if (!(out->level[nc + i] = gmm_strdup(inputs ? buf : gmm_graph_node_label(m->g, i, buf))))
            s = gmm_error(GMM_ENOMEM, "out of memory");
        var[i] = sqrt(var[i] > 0.0 ? var[i] : 0.0);
    }
done:
    gmm_free(xq);
    gmm_free(se);
    if (s != GMM_OK)
        gmm_mdl_terms_free(out);
    return s;
}
