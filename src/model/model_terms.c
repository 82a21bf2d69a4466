/* model_terms.c -- a built model (model.h) term by term: each
 * coefficient's estimate and standard error, and the f() term's posterior
 * at each of its levels (predict --terms). */
#include "model_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/fit.h"
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

gmm_status gmm_mdl_terms_get(gmm_mdl *m, gmm_mdl_terms *out)
{
    memset(out, 0, sizeof *out);
    if (m->stack)
        return gmm_error(GMM_EINVAL, "predict --terms: a model of several f() terms (or rw1, "
                                     "rw2, besag, bym2) has no per-term summaries yet");
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
        out->mean[k] = o->value[np - nc + k];
        out->sd[k] = se[np - nc + k];
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
