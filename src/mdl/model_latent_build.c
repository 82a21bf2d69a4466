/* model_latent_build.c -- the latent from the data: a state-space model on
 * the input column, a graph GMRF on the node column, or a stack of a
 * formula's f() terms. */

#include "model_build.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/problem.h"
#include "gmm/ssm.h"
#include "gmm/stack.h"

/* A working response on the latent's scale for the kernel's default
 * variance (the likelihood's own, gmm_lik_working). */
static double *working_response(const gmm_mdl *m)
{
    double *z = gmm_malloc(m->nrow, sizeof *z);
    if (!z)
        return NULL;
    for (size_t r = 0; r < m->nrow; r++)
        z[r] = gmm_lik_working(&m->lik, m->y[r], m->e ? m->e[r] : 1.0);
    return z;
}

gmm_status gmm_mdl_impl_build_ssm(const mdl_build *b, gmm_mdl *m)
{
    const gmm_mdl_spec *sp = b->s;
    gmm_status s;
    if ((s = gmm_mdl_impl_parse_spec(b, "kernel", b->s->desc.kernel, &m->spec)) != GMM_OK)
        return s;
    if ((s = gmm_kernel_from_spec(m->spec, &m->kernel)) != GMM_OK)
        return s == GMM_EPARSE ? gmm_mdl_impl_spec_error(b, "kernel", b->s->desc.kernel, s) : s;
    size_t np = gmm_kernel_nparam(m->kernel);
    int *defaulted = gmm_calloc(np ? np : 1, sizeof(int));
    double *z = working_response(m);
    if (!defaulted || !z) {
        gmm_free(defaulted);
        gmm_free(z);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    s = gmm_kernel_fill_defaults(m->kernel, m->x, z, m->nrow, defaulted);
    gmm_free(z);
    if (s != GMM_OK) {
        gmm_free(defaulted);
        return s;
    }
    if (sp->verbose)
        for (size_t i = 0; i < np; i++)
            if (defaulted[i])
                gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO, "default %s = %.6g",
                                    gmm_kernel_param_name(m->kernel, i),
                                    gmm_kernel_values(m->kernel)[i]);
    gmm_free(defaulted);

    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.merge_tol = m->merge_tol = sp->desc.merge_tol;
    par.factor = (gmm_ssm_factor)sp->factor;
    if ((s = gmm_latent_ssm_alloc(m->kernel, m->x, m->nrow, &par, &m->lat)) != GMM_OK)
        return s;
    const gmm_ssm *ssm = gmm_latent_ssm(m->lat);
    if (gmm_ssm_nmerged(ssm) > 0)
        gmm_mdl_impl_report(
            b, GMM_MDL_REPORT_WARNING,
            "warning: %zu distinct inputs within merge_tol %g of another were merged "
            "into one state",
            gmm_ssm_nmerged(ssm), sp->desc.merge_tol);
    if (sp->verbose)
        gmm_mdl_impl_report(
            b, GMM_MDL_REPORT_INFO,
            "state dimension %zu, %zu states, bandwidth %zu, %zu distinct intervals",
            gmm_ssm_dim(ssm), gmm_ssm_nstates(ssm), gmm_ssm_bandwidth(ssm),
            gmm_ssm_nintervals(ssm));
    return GMM_OK;
}

/* The isolated nodes' warning: a header and up to 20 labels. */
static void report_isolated(const mdl_build *b, gmm_mdl *m, const gmm_table *data,
                            const size_t *isolated, size_t nisolated)
{
    if (!b->s->report)
        return;
    size_t cap = 256 + 70 * (nisolated < 20 ? nisolated : 20) + 64;
    char *buf = gmm_malloc(cap, 1), lb[64];
    if (!buf)
        return;
    int at = snprintf(
        buf, cap, "warning: %zu node(s) of %s are not in %s and become isolated nodes:", nisolated,
        data->file, m->graph_file);
    for (size_t k = 0; k < nisolated && k < 20 && at >= 0 && (size_t)at < cap; k++)
        at += snprintf(buf + at, cap - (size_t)at, "\n  %s",
                       gmm_graph_node_label(m->g, isolated[k], lb));
    if (nisolated > 20 && at >= 0 && (size_t)at < cap)
        snprintf(buf + at, cap - (size_t)at, "\n  ... and %zu more", nisolated - 20);
    b->s->report(b->s->report_user, GMM_MDL_REPORT_WARNING, buf);
    gmm_free(buf);
}

/* Read the graph, attach the data's nodes, order by RCM, build the latent. */
gmm_status gmm_mdl_impl_build_graph(const mdl_build *b, gmm_mdl *m, gmm_table *data, int strict)
{
    gmm_status s;
    gmm_table *edges = NULL;
    size_t *isolated = NULL, nisolated = 0;

    if (m->edgeless) {
        if ((s = gmm_graph_empty(&m->g)) != GMM_OK)
            goto done;
    } else if ((s = gmm_table_read(m->graph_file, &edges)) != GMM_OK ||
               /* The default "length" column is optional; a named one is required. */
               (s = gmm_mdl_graph_read(edges, m->edge_cols[0], m->edge_cols[1], m->edge_cols[2],
                                       m->len_optional, &m->g)) != GMM_OK) {
        goto done;
    }
    if (m->g->nmerged)
        gmm_mdl_impl_report(b, GMM_MDL_REPORT_WARNING,
                            "warning: %zu duplicate edge(s) in %s merged", m->g->nmerged,
                            m->graph_file);
    m->row_node = gmm_malloc(data->nrow ? data->nrow : 1, sizeof(size_t));
    if (!m->row_node) {
        s = gmm_error(GMM_ENOMEM, "out of memory");
        goto done;
    }
    if ((s = gmm_mdl_graph_attach(m->g, data, m->nodename, strict, m->row_node, &isolated,
                                  &nisolated)) != GMM_OK)
        goto done;
    if (nisolated && !m->edgeless)
        report_isolated(b, m, data, isolated, nisolated);
    if ((s = gmm_mdl_impl_parse_spec(b, "precision", b->s->desc.precision, &m->spec)) != GMM_OK)
        goto done;
    if ((s = gmm_gmrf_alloc(m->g, m->spec, m->spec_text, &m->gmrf)) != GMM_OK) {
        if (s == GMM_EPARSE)
            gmm_mdl_impl_spec_error(b, "precision", b->s->desc.precision, s);
        goto done;
    }
    if (b->s->verbose) {
        char buf[256];
        gmm_gmrf_describe(m->gmrf, buf, sizeof buf);
        gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO, "%s", buf);
    }
    s = gmm_latent_gmrf_alloc(m->gmrf, m->nrow, m->row_node, &m->lat);
done:
    gmm_free(isolated);
    gmm_table_free(edges);
    return s;
}

char *gmm_mdl_impl_join_cells(const gmm_table *t, size_t r, const size_t *col, size_t nc)
{
    size_t len = 1;
    for (size_t k = 0; k < nc; k++)
        len += strlen(t->cell[r][col[k]]) + 1;
    char *key = gmm_malloc(len, 1);
    if (!key)
        return NULL;
    size_t at = 0;
    for (size_t k = 0; k < nc; k++) {
        size_t l = strlen(t->cell[r][col[k]]);
        memcpy(key + at, t->cell[r][col[k]], l);
        at += l;
        key[at++] = '\x1f';
    }
    key[at] = '\0';
    return key;
}

/* Each row's cells of the formula's columns (f() indices, covariates,
 * factors, random slopes), joined by a unit separator: the key by which draws without
 * latent states find a new row's data row. */
static gmm_status stack_rowkeys(gmm_mdl *m, const gmm_table *data)
{
    const gmm_formula *fm = m->fm;
    size_t cap = gmm_mdl_impl_key_ncol(fm), nc = 0;
    size_t *col = gmm_malloc(cap ? cap : 1, sizeof *col);
    if (!col)
        return gmm_error(GMM_ENOMEM, "out of memory");
    gmm_status s = gmm_mdl_impl_key_columns(fm, data, col, cap, &nc);
    if (s == GMM_OK && !(m->rowkey = gmm_calloc(m->nrow ? m->nrow : 1, sizeof *m->rowkey)))
        s = gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t r = 0; s == GMM_OK && r < m->nrow; r++)
        if (!(m->rowkey[r] = gmm_mdl_impl_join_cells(data, r, col, nc)))
            s = gmm_error(GMM_ENOMEM, "out of memory");
    gmm_free(col);
    return s;
}

/* The graph of a besag, bym2 or graph-precision term: its edge list (columns
 * i, j and an optional length) with the rows' nodes attached. */
static gmm_status stack_graph(const mdl_build *b, const gmm_table *data,
                              const gmm_formula_latent *t, const char *path, size_t *row_node,
                              gmm_graph **g)
{
    gmm_table *edges = NULL;
    size_t *isolated = NULL, nisolated = 0;
    gmm_status s;
    if ((s = gmm_table_read(path, &edges)) != GMM_OK ||
        (s = gmm_mdl_graph_read(edges, "i", "j", "length", 1, g)) != GMM_OK)
        goto done;
    if ((*g)->nmerged)
        gmm_mdl_impl_report(b, GMM_MDL_REPORT_WARNING,
                            "warning: %zu duplicate edge(s) in %s merged", (*g)->nmerged, path);
    if ((s = gmm_mdl_graph_attach(*g, data, t->name, 0, row_node, &isolated, &nisolated)) !=
        GMM_OK)
        goto done;
    if (nisolated)
        gmm_mdl_impl_report(
            b, GMM_MDL_REPORT_WARNING,
            "warning: %zu value(s) of column '%s' are not nodes of %s and become isolated "
            "nodes",
            nisolated, t->name, path);
done:
    gmm_free(isolated);
    gmm_table_free(edges);
    return s;
}

/* A stacked kernel term's spec and kernel (its errors point into the
 * formula), its unset parameters defaulted from the index values x and the
 * working response as a kernel alone is (build_ssm). */
static gmm_status stack_kernel(mdl_build *b, gmm_mdl *m, const gmm_formula_latent *t,
                               const double *x, gmm_spec_node **spec, gmm_kernel **k)
{
    gmm_status s;
    b->ftext = b->s->desc.formula;
    b->fspec = t->model;
    b->fbase = t->model_pos;
    if ((s = gmm_mdl_impl_parse_spec(b, "kernel", t->model, spec)) != GMM_OK)
        return s;
    if ((s = gmm_kernel_from_spec(*spec, k)) != GMM_OK)
        return s == GMM_EPARSE ? gmm_mdl_impl_spec_error(b, "kernel", t->model, s) : s;
    size_t np = gmm_kernel_nparam(*k);
    int *defaulted = gmm_calloc(np ? np : 1, sizeof(int));
    double *z = working_response(m);
    if (!defaulted || !z)
        s = gmm_error(GMM_ENOMEM, "out of memory");
    else
        s = gmm_kernel_fill_defaults(*k, x, z, m->nrow, defaulted);
    for (size_t i = 0; s == GMM_OK && b->s->verbose && i < np; i++)
        if (defaulted[i])
            gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO, "default f.%s: %s = %.6g", t->name,
                                gmm_kernel_param_name(*k, i), gmm_kernel_values(*k)[i]);
    gmm_free(defaulted);
    gmm_free(z);
    return s;
}

/* A correlated term's effects (m->scorr[k]) and the rows' coefficients
 * into *z (the caller frees), on the term. */
static gmm_status corr_term(const mdl_build *b, gmm_mdl *m, size_t k, const gmm_table *data,
                            gmm_stack_term *term, double **z)
{
    mdl_corr *c = &m->scorr[k];
    gmm_status s = gmm_mdl_impl_corr_effects(b, &m->fm->latent[k], data, c);
    if (s != GMM_OK)
        return s;
    if (!(*z = gmm_malloc(data->nrow * c->k + 1, sizeof **z)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    if ((s = gmm_mdl_impl_corr_rows(c, data, *z)) != GMM_OK)
        return s;
    /* lme4 starts Sigma at the residual variance times I: the working
     * response's variance here, for every effect */
    double *w = working_response(m), mu = 0.0, v = 0.0;
    if (!w)
        return gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t r = 0; r < m->nrow; r++)
        mu += w[r] / (double)m->nrow;
    for (size_t r = 0; r < m->nrow; r++)
        v += (w[r] - mu) * (w[r] - mu) / (double)m->nrow;
    gmm_free(w);
    term->variance = isfinite(v) && v > 0.0 ? v : 1.0;
    term->neffect = c->k;
    term->z = *z;
    term->effect = (const char *const *)c->name;
    return GMM_OK;
}

/* A keyword term's group=, control=, replicate= and season into *st, the
 * group and replicate columns' values read into *buf (2 nr, freed by the
 * caller) when given. */
static gmm_status stack_group_columns(const mdl_build *b, const gmm_table *data,
                                      const gmm_formula_latent *t, size_t nr, gmm_stack_term *st,
                                      double **buf)
{
    const char *gc, *rc;
    size_t c;
    gmm_status s;
    if ((s = gmm_mdl_impl_term_group(b, t, st, &gc, &rc)) != GMM_OK || (!gc && !rc))
        return s;
    if (!(*buf = gmm_malloc(2 * nr, sizeof **buf)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    if (gc && ((s = gmm_table_column(data, gc, &c)) != GMM_OK ||
               (s = gmm_table_column_double(data, c, 0, *buf)) != GMM_OK))
        return s;
    if (rc && ((s = gmm_table_column(data, rc, &c)) != GMM_OK ||
               (s = gmm_table_column_double(data, c, 0, *buf + nr)) != GMM_OK))
        return s;
    st->group = gc ? *buf : NULL;
    st->replicate = rc ? *buf + nr : NULL;
    return GMM_OK;
}

/* Every f() term a component of one stacked latent (stack.h), indexed by
 * the data rows' values of its column. */
gmm_status gmm_mdl_impl_build_stack(mdl_build *b, gmm_mdl *m, const gmm_table *data)
{
    const gmm_formula *fm = m->fm;
    size_t K = fm->nlatent, nr = m->nrow ? m->nrow : 1;
    gmm_status s = GMM_OK;
    gmm_stack_term *terms = gmm_calloc(K, sizeof *terms);
    char(*names)[72] = gmm_calloc(K, sizeof *names);
    size_t **level = gmm_calloc(K, sizeof *level);
    double **value = gmm_calloc(2 * K, sizeof *value); /* then group, replicate */
    m->sg = gmm_calloc(K, sizeof *m->sg);
    m->sspec = gmm_calloc(K, sizeof *m->sspec);
    m->sgmrf = gmm_calloc(K, sizeof *m->sgmrf);
    m->skern = gmm_calloc(K, sizeof *m->skern);
    m->scorr = gmm_calloc(K, sizeof *m->scorr);
    if (!terms || !names || !level || !value || !m->sg || !m->sspec || !m->sgmrf || !m->skern ||
        !m->scorr) {
        s = gmm_error(GMM_ENOMEM, "out of memory");
        goto done;
    }
    m->nterm = K;
    for (size_t k = 0; k < K && s == GMM_OK; k++) {
        const gmm_formula_latent *t = &fm->latent[k];
        const char *graph = gmm_formula_arg_find(t, "graph", NULL);
        int mk = gmm_mdl_impl_term_model(t);
        snprintf(names[k], sizeof names[k], "f.%s", t->label ? t->label : t->name);
        terms[k].name = names[k];
        int kern = mk < 0 && !graph;
        if (mk >= 0 && (s = stack_group_columns(b, data, t, nr, &terms[k], &value[K + k])))
            goto done;
        if (kern || (mk >= 0 && (gmm_mdl_impl_term_kind(mk) == GMM_STACK_RW1 ||
                                 gmm_mdl_impl_term_kind(mk) == GMM_STACK_RW2 ||
                                 gmm_mdl_impl_term_kind(mk) == GMM_STACK_AR1 ||
                                 gmm_mdl_impl_term_kind(mk) == GMM_STACK_SEASONAL))) {
            size_t c;
            terms[k].model = kern ? GMM_STACK_KERNEL : gmm_mdl_impl_term_kind(mk);
            if (!(value[k] = gmm_malloc(nr, sizeof **value))) {
                s = gmm_error(GMM_ENOMEM, "out of memory");
                goto done;
            }
            if ((s = gmm_table_column(data, t->name, &c)) != GMM_OK ||
                (s = gmm_table_column_double(data, c, 0, value[k])) != GMM_OK)
                goto done;
            terms[k].value = value[k];
            if (kern) {
                if ((s = stack_kernel(b, m, t, value[k], &m->sspec[k], &m->skern[k])) != GMM_OK)
                    goto done;
                terms[k].kernel = m->skern[k];
                terms[k].merge_tol = m->merge_tol = b->s->desc.merge_tol;
                continue;
            }
            if ((s = gmm_mdl_impl_term_cyclic(b, t, &terms[k].cyclic, &terms[k].period)) != GMM_OK)
                goto done;
            continue;
        }
        if (!(level[k] = gmm_malloc(nr, sizeof **level))) {
            s = gmm_error(GMM_ENOMEM, "out of memory");
            goto done;
        }
        if (!graph) { /* iid: the column's levels alone */
            size_t *added = NULL, nadded = 0;
            if ((s = gmm_graph_empty(&m->sg[k])) == GMM_OK)
                s = gmm_mdl_graph_attach(m->sg[k], data, t->name, 0, level[k], &added, &nadded);
            gmm_free(added);
        } else {
            s = stack_graph(b, data, t, graph, level[k], &m->sg[k]);
        }
        if (s != GMM_OK)
            goto done;
        terms[k].level = level[k];
        terms[k].nlevel = m->sg[k]->n;
        terms[k].graph = m->sg[k];
        if (mk >= 0) {
            terms[k].model = gmm_mdl_impl_term_kind(mk);
            if (terms[k].model == GMM_STACK_CORR &&
                (s = corr_term(b, m, k, data, &terms[k], &value[k])) != GMM_OK)
                goto done;
            continue;
        }
        /* a graph precision spec: its errors point into the formula */
        terms[k].model = GMM_STACK_GRAPH;
        b->ftext = b->s->desc.formula;
        b->fspec = t->model;
        b->fbase = t->model_pos;
        if ((s = gmm_mdl_impl_parse_spec(b, "precision", t->model, &m->sspec[k])) != GMM_OK)
            goto done;
        if ((s = gmm_gmrf_alloc(m->sg[k], m->sspec[k], t->model, &m->sgmrf[k])) != GMM_OK) {
            if (s == GMM_EPARSE)
                gmm_mdl_impl_spec_error(b, "precision", t->model, s);
            goto done;
        }
        terms[k].gmrf = m->sgmrf[k];
    }
    if ((s = gmm_latent_stack_alloc(m->nrow, K, terms, 0, &m->lat)) != GMM_OK) {
        if (gmm_error_index() < m->nrow) {
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            s = gmm_error(s, "%s:%zu: %s", m->data_file, m->line[gmm_error_index()], why);
        }
        goto done;
    }
    for (size_t k = 0; k < K; k++)
        if (gmm_latent_stack_nmerged(m->lat, k) > 0)
            gmm_mdl_impl_report(
                b, GMM_MDL_REPORT_WARNING,
                "warning: %s: %zu distinct inputs within merge_tol %g of another were "
                "merged into one state",
                names[k], gmm_latent_stack_nmerged(m->lat, k), b->s->desc.merge_tol);
    if (b->s->verbose) {
        char buf[1024];
        gmm_latent_stack_describe(m->lat, buf, sizeof buf);
        gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO, "%s", buf);
    }
    s = stack_rowkeys(m, data);
done:
    for (size_t k = 0; k < K; k++) {
        if (level)
            gmm_free(level[k]);
        if (value) {
            gmm_free(value[k]);
            gmm_free(value[K + k]);
        }
    }
    gmm_free(level);
    gmm_free(value);
    gmm_free(names);
    gmm_free(terms);
    return s;
}
