/* model_score.c -- held-out data against a built model (model.h): the log
 * predictive density of every observed test row under the model's
 * posterior or under MCMC draws.
 *
 * ROWS.  A factor level the model's data do not have is GMM_EPARSE
 * "FILE:LINE: column 'C': level 'L' of factor(C) is not one of the model's
 * data ..."; a level not in an iid term's data is kept (GMM_MDL_NEW_LEVEL).
 * A model of several f() terms reads each term's column (t->sat): any
 * value of a walk's index, any level of an iid term, a node of a besag,
 * bym2 or graph term's graph (another is GMM_EPARSE "FILE:LINE: column
 * 'C': 'NODE' is not a node of the graph of f(C, MODEL) (EDGES)").
 *
 * SEVERAL f() TERMS.  A row's linear predictor is the row's form of the
 * stacked latent, a'x (stack.h's gmm_latent_stack_row: a new walk value
 * the walk's bridge or extrapolation), its variance a'Sigma a with the
 * posterior covariances between the row's latents -- from the Takahashi
 * band, or by one banded solve, O(n l), for a row whose latents lie
 * further apart than the band -- plus the independent part's.
 *
 * LEAVE-ONE-OUT.  The posterior of the linear predictor at row r,
 * N(m_r, v_r), with row r's Gaussian site removed: the site is the
 * likelihood's curvature w_r and slope g_r at the mode (Laplace), the
 * expected ones under q (VI), 1/noise and the residual/noise (Gaussian:
 * the exact LOO of Rasmussen & Williams eq. 5.12); the cavity
 * 1/v = 1/v_r - w_r, mu = v (m_r/v_r - w_r m_r - g_r), and lpd[r] =
 * log E_{N(mu, v)} p(y_r | f).  A site that carries more than the
 * posterior (non-log-concave likelihoods) leaves no cavity: GMM_EDOM.
 *
 * UNDER DRAWS.  A draw fixes f at a site (column f[row] at a data input,
 * f[node]); with the latent states x[1..n] f at any input is the Markov
 * bridge's normal.  A model of several f() terms: with the states, a row's
 * form of the draw's latents plus its independent part at the draw's
 * variances (gmm_latent_stack_row); without them the f[row] of the first
 * data row with the row's cells in the formula's columns ("FILE:LINE: no
 * row of the model's data ..." when there is none).  Without the states,
 * a row whose input is not a data input is "FILE:LINE: column 'C': X is
 * not an input of the model's data, and ...". */
#include "model_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/problem.h"
#include "gmm/vi.h"

void gmm_mdl_test_free(gmm_mdl_test *t)
{
    if (!t)
        return;
    gmm_table_free(t->table);
    gmm_free(t->y);
    gmm_free(t->e);
    gmm_free(t->x);
    gmm_free(t->site);
    gmm_free(t->X);
    gmm_free(t->sat);
    gmm_free(t->sgrp);
    gmm_free(t->sz);
    gmm_free(t);
}

/* The data row of a stacked model whose formula columns hold the same
 * cells as row r of test table tb (the first such row), or nrow: where
 * draws without latent states have the row's f. */
static gmm_status stack_row(const gmm_mdl *m, const gmm_table *tb, size_t r, size_t *row)
{
    size_t nc, col[64];
    gmm_status s = gmm_mdl_impl_key_columns(m->fm, tb, col, 64, &nc);
    if (s != GMM_OK)
        return s;
    char *key = gmm_mdl_impl_join_cells(tb, r, col, nc);
    if (!key)
        return gmm_error(GMM_ENOMEM, "out of memory");
    size_t q;
    for (q = 0; q < m->nrow && strcmp(m->rowkey[q], key); q++)
        ;
    gmm_free(key);
    *row = q;
    return GMM_OK;
}

/* A grouped or replicated term's group and replicate values of tb's rows
 * into g[2 K r], g[2 K r + 1] (v: scratch of tb->nrow). */
static gmm_status stack_read_group(const gmm_formula_latent *ft, const gmm_table *tb, double *v,
                                   double *g, size_t K)
{
    static const char *key[2] = {"group", "replicate"};
    for (int w = 0; w < 2; w++) {
        const char *col = gmm_formula_arg_find(ft, key[w], NULL);
        size_t c;
        gmm_status s;
        if (!col)
            continue;
        if ((s = gmm_table_column(tb, col, &c)) != GMM_OK ||
            (s = gmm_table_column_double(tb, c, 0, v)) != GMM_OK)
            return s;
        for (size_t r = 0; r < tb->nrow; r++)
            g[2 * K * r + (size_t)w] = v[r];
    }
    return GMM_OK;
}

/* Each f() term's reading of every row of tb (a stacked model's new rows)
 * into sat (tb->nrow x nterm): a walk's value, an iid level, a node of a
 * graph term; a new iid level GMM_NO_INDEX.  Errors name the file, line,
 * column and cell. */
static gmm_status stack_read(const gmm_mdl *m, const gmm_table *tb, gmm_stack_at *sat,
                             double *sgrp)
{
    size_t n = tb->nrow, K = m->nterm;
    double *v = gmm_malloc(n ? n : 1, sizeof *v);
    gmm_status s = v ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t k = 0; s == GMM_OK && k < K; k++) {
        const gmm_formula_latent *ft = &m->fm->latent[k];
        gmm_stack_model kind = gmm_latent_stack_kind(m->lat, k);
        size_t c;
        if ((s = gmm_table_column(tb, ft->name, &c)) != GMM_OK)
            break;
        if (kind == GMM_STACK_RW1 || kind == GMM_STACK_RW2 || kind == GMM_STACK_KERNEL ||
            kind == GMM_STACK_AR1 || kind == GMM_STACK_SEASONAL) {
            if ((s = gmm_table_column_double(tb, c, 0, v)) != GMM_OK)
                break;
            for (size_t r = 0; r < n; r++)
                sat[r * K + k] = (gmm_stack_at){GMM_NO_INDEX, v[r], NULL};
            if ((s = stack_read_group(ft, tb, v, sgrp + 2 * k, K)) != GMM_OK)
                break;
            continue;
        }
        for (size_t r = 0; s == GMM_OK && r < n; r++) {
            const char *cell = tb->cell[r][c];
            size_t lev = GMM_NO_INDEX;
            if (!*cell)
                s = gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': missing value", tb->file,
                                 tb->line[r], ft->name);
            else if (!gmm_graph_node_find(m->sg[k], cell, &lev) && kind != GMM_STACK_IID &&
                     kind != GMM_STACK_CORR)
                /* a new iid level is a new group (its prior); a node has no
                 * neighbours off its graph */
                s = gmm_error_at(GMM_EPARSE, r,
                                 "%s:%zu: column '%s': '%s' is not a node of the graph of "
                                 "f(%s, %s) (%s)",
                                 tb->file, tb->line[r], ft->name, cell, ft->name, ft->model,
                                 gmm_formula_arg_find(ft, "graph", NULL));
            sat[r * K + k] = (gmm_stack_at){lev, NAN, NULL};
        }
        if (s == GMM_OK)
            s = stack_read_group(ft, tb, v, sgrp + 2 * k, K);
    }
    gmm_free(v);
    return s;
}

/* The correlated terms' coefficients of every row of tb (model_bars.c)
 * into t->sz, each row's reading (t->sat) pointed at its own. */
static gmm_status corr_read(const gmm_mdl *m, const gmm_table *tb, gmm_mdl_test *t)
{
    size_t n = tb->nrow, K = m->nterm, tot = 0;
    for (size_t k = 0; m->scorr && k < K; k++)
        tot += m->scorr[k].k;
    if (!tot)
        return GMM_OK;
    if (!(t->sz = gmm_malloc(n * tot + 1, sizeof *t->sz)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    gmm_status s = GMM_OK;
    for (size_t k = 0, at = 0; k < K && s == GMM_OK; at += n * m->scorr[k].k, k++) {
        size_t ke = m->scorr[k].k;
        if (!ke)
            continue;
        s = gmm_mdl_impl_corr_rows(&m->scorr[k], tb, t->sz + at);
        for (size_t r = 0; r < n; r++)
            t->sat[r * K + k].z = t->sz + at + r * ke;
    }
    return s;
}

const double *gmm_mdl_test_inputs(const gmm_mdl *m, const gmm_mdl_test *t)
{
    return gmm_mdl_has_inputs(m) ? t->x : NULL;
}

gmm_status gmm_mdl_test_read(const gmm_mdl *m, const char *path, gmm_mdl_test **out)
{
    return gmm_mdl_rows_read(m, path, 1, out);
}

gmm_status gmm_mdl_rows_read(const gmm_mdl *m, const char *path, int mode, gmm_mdl_test **out)
{
    gmm_status s;
    int inputs = gmm_latent_has_inputs(m->lat), score = mode == GMM_MDL_ROWS_SCORE;
    /* the fixed effects alone read no node, level or index: any value, or
     * none, of a term's column will do (an input still labels the row) */
    int terms = mode != GMM_MDL_ROWS_FIXED, stack = m->stack && terms;
    *out = NULL;
    gmm_mdl_test *t = gmm_calloc(1, sizeof *t);
    if (!t)
        return gmm_error(GMM_ENOMEM, "out of memory");
    if ((s = gmm_table_read(path, &t->table)) != GMM_OK ||
        (terms && (s = gmm_mdl_impl_group_columns(m->fm, t->table)) != GMM_OK))
        goto fail;
    const gmm_table *tb = t->table;
    size_t ce = 0, n = tb->nrow, nn = n ? n : 1;
    const char *ename = m->ename;
    /* predictions need no outcome or exposure column */
    if (!score) {
        ename = NULL;
        t->col_y = tb->ncol;
    }
    t->col_site = tb->ncol;
    if (!terms && !m->stack && !inputs &&
        gmm_table_column(tb, gmm_mdl_data_site_name(m), &t->col_site) != GMM_OK)
        t->col_site = tb->ncol;
    else if ((!m->stack && (terms || inputs) &&
              (s = gmm_table_column(tb, gmm_mdl_data_site_name(m), &t->col_site)) != GMM_OK) ||
        (score && (s = gmm_table_column(tb, m->yname, &t->col_y)) != GMM_OK) ||
        (ename && (s = gmm_table_column(tb, ename, &ce)) != GMM_OK))
        goto fail;
    t->n = n;
    t->y = gmm_malloc(nn, sizeof *t->y);
    t->e = gmm_malloc(nn, sizeof *t->e);
    t->x = gmm_malloc(nn, sizeof *t->x);
    t->site = gmm_malloc(nn, sizeof *t->site);
    t->X = m->ncoef ? gmm_malloc(nn * m->ncoef, sizeof *t->X) : NULL;
    t->sat = stack ? gmm_malloc(nn * m->nterm, sizeof *t->sat) : NULL;
    t->sgrp = stack ? gmm_calloc(2 * nn * m->nterm, sizeof *t->sgrp) : NULL;
    if (!t->y || !t->e || !t->x || !t->site || (m->ncoef && !t->X) ||
        (stack && (!t->sat || !t->sgrp))) {
        s = gmm_error(GMM_ENOMEM, "out of memory");
        goto fail;
    }
    if ((score && (s = gmm_table_column_double(tb, t->col_y, 1, t->y)) != GMM_OK) ||
        (score && (s = gmm_mdl_impl_response(m, tb, t->y)) != GMM_OK) ||
        (inputs && (s = gmm_table_column_double(tb, t->col_site, 0, t->x)) != GMM_OK) ||
        (ename && (s = gmm_table_column_double(tb, ce, 1, t->e)) != GMM_OK) ||
        (m->ncoef && (s = gmm_mdl_impl_design_rows(m, tb, t->X)) != GMM_OK) ||
        (stack && (s = stack_read(m, tb, t->sat, t->sgrp)) != GMM_OK) ||
        (stack && (s = corr_read(m, tb, t)) != GMM_OK))
        goto fail;
    for (size_t r = 0; r < n; r++) {
        if (!score)
            t->y[r] = NAN;
        if (!ename)
            t->e[r] = 1.0;
        if (m->stack || !terms) {
            t->site[r] = r; /* labelled by its row or its own cell (gmm_mdl_test_label) */
        } else if (!inputs && !gmm_graph_node_find(m->g, tb->cell[r][t->col_site], &t->site[r])) {
            if (m->edgeless) {
                /* a level the data do not have: its effect is the prior's */
                t->site[r] = GMM_MDL_NEW_LEVEL;
                continue;
            }
            s = gmm_error_at(GMM_EPARSE, r,
                             "%s:%zu: column '%s': node '%s' is not a node of the model's graph",
                             tb->file, tb->line[r], tb->header[t->col_site],
                             tb->cell[r][t->col_site]);
            goto fail;
        }
    }
    for (size_t r = 0; r < n; r++) {
        if (isnan(t->y[r]))
            continue;
        t->nobs++;
        if (ename && isnan(t->e[r])) {
            s = gmm_error_at(GMM_EPARSE, r,
                             "%s:%zu: column '%s': missing exposure for an observed outcome",
                             tb->file, tb->line[r], ename);
            goto fail;
        }
    }
    if (!score) {
        *out = t;
        return GMM_OK;
    }
    if (t->nobs == 0) {
        if (n == 0)
            s = gmm_error(GMM_EPARSE, "%s: no data rows: nothing to score", tb->file);
        else
            s = gmm_error(GMM_EPARSE, "%s: column '%s' is missing on all %zu rows: nothing to "
                                      "score",
                          tb->file, tb->header[t->col_y], n);
        goto fail;
    }
    if ((s = gmm_lik_check_data(&m->lik, t->y, ename ? t->e : NULL, n)) != GMM_OK) {
        size_t r = gmm_error_index();
        if (r < n) {
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            s = gmm_error_at(s, r, "%s:%zu: column '%s': %s", tb->file, tb->line[r],
                             strstr(why, "exposure") && ename ? ename : tb->header[t->col_y],
                             why);
        }
        goto fail;
    }
    *out = t;
    return GMM_OK;
fail:
    gmm_mdl_test_free(t);
    return s;
}

gmm_status gmm_mdl_impl_stack_forms(const gmm_mdl *m, const gmm_mdl_test *t,
                                    const double *theta, size_t *ptr, size_t *idx, double *w,
                                    double *evar)
{
    size_t K = m->nterm;
    ptr[0] = 0;
    for (size_t r = 0; r < t->n; r++) {
        size_t nnz = 0;
        gmm_status s = gmm_latent_stack_row_group(m->lat, theta, t->sat + r * K,
                                                  t->sgrp + 2 * r * K, idx + ptr[r],
                                                  w + ptr[r], &nnz, &evar[r]);
        if (s != GMM_OK) {
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            return gmm_error_at(s, r, "%s:%zu: %s", t->table->file, t->table->line[r], why);
        }
        ptr[r + 1] = ptr[r] + nnz;
    }
    return GMM_OK;
}

/* A stacked model's new rows: each a sparse form of the latent
 * (gmm_latent_stack_row) plus independent noise from new levels and walk
 * bridges, plus X_r beta. */
static gmm_status stack_predict_test(gmm_mdl *m, const gmm_mdl_test *t, double *mean,
                                     double *var)
{
    size_t n = t->n, cap = (n ? n : 1) * gmm_latent_stack_row_max(m->lat), nc = m->ncoef;
    size_t *ptr = gmm_malloc(n + 1, sizeof *ptr), *idx = gmm_malloc(cap, sizeof *idx);
    double *w = gmm_malloc(cap, sizeof *w), *ev = gmm_malloc(n ? n : 1, sizeof *ev);
    const double *theta = m->obj->value, *beta = theta + m->obj->nparam - nc;
    gmm_status s = ptr && idx && w && ev ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK)
        s = gmm_mdl_impl_stack_forms(m, t, theta, ptr, idx, w, ev);
    if (s == GMM_OK)
        s = m->vi ? gmm_vi_predict_forms(m->vi, n, ptr, idx, w, mean, var)
                  : gmm_problem_predict_forms(m->prob, theta, n, ptr, idx, w, mean, var);
    for (size_t r = 0; s == GMM_OK && r < n; r++) {
        var[r] += ev[r];
        for (size_t k = 0; k < nc; k++)
            mean[r] += t->X[r * nc + k] * beta[k];
        mean[r] += m->has_center > 0 ? m->center : 0.0;
    }
    if (s == GMM_OK)
        s = gmm_mdl_impl_coef_var(m, t->X, n, var);
    gmm_free(ptr);
    gmm_free(idx);
    gmm_free(w);
    gmm_free(ev);
    return s;
}

const char *gmm_mdl_test_label(const gmm_mdl *m, const gmm_mdl_test *t, size_t r, char *buf)
{
    if (!m->stack && t->col_site < t->table->ncol)
        return t->table->cell[r][t->col_site];
    snprintf(buf, 64, "%zu", r + 1);
    return buf;
}

gmm_status gmm_mdl_predict_test(gmm_mdl *m, const gmm_mdl_test *t, double *mean, double *var)
{
    if (m->stack)
        return stack_predict_test(m, t, mean, var);
    int inputs = gmm_latent_has_inputs(m->lat);
    size_t nl = inputs ? t->n : m->gmrf->n, nc = m->ncoef;
    double *lm = inputs ? mean : gmm_malloc(nl ? nl : 1, sizeof *lm);
    double *lv = inputs ? var : gmm_malloc(nl ? nl : 1, sizeof *lv);
    if (!lm || !lv) {
        if (!inputs) {
            gmm_free(lm);
            gmm_free(lv);
        }
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    const double *beta = m->obj->value + m->obj->nparam - nc;
    gmm_status s = m->vi ? gmm_vi_predict_latent(m->vi, t->x, t->n, lm, lv)
                         : gmm_problem_predict_latent(m->prob, m->obj->value, t->x, t->n, lm, lv);
    for (size_t r = 0; s == GMM_OK && r < t->n; r++) {
        double mu, v;
        if (inputs) {
            mu = lm[r];
            v = lv[r];
        } else if (t->site[r] == GMM_MDL_NEW_LEVEL) {
            /* iid: the one latent parameter is the effects' variance */
            mu = 0.0;
            v = m->obj->value[0];
        } else {
            mu = lm[t->site[r]];
            v = lv[t->site[r]];
        }
        for (size_t k = 0; k < nc; k++)
            mu += t->X[r * nc + k] * beta[k];
        mean[r] = mu + (m->has_center > 0 ? m->center : 0.0);
        var[r] = v;
    }
    if (!inputs) {
        gmm_free(lm);
        gmm_free(lv);
    }
    return s;
}

gmm_status gmm_mdl_predict_test_summary(gmm_mdl *m, const gmm_mdl_test *t, double level,
                                        int observed, gmm_summary_pred *pr)
{
    if (observed && !gmm_mdl_observed_normal(m))
        return gmm_error(GMM_EINVAL, "predict: new observations of the %s likelihood have no "
                                     "normal interval",
                         m->lik.type->name);
    size_t n = t->n ? t->n : 1;
    double *mean = gmm_malloc(n, sizeof *mean), *var = gmm_malloc(n, sizeof *var);
    gmm_status s = mean && var ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK)
        s = gmm_mdl_predict_test(m, t, mean, var);
    if (s == GMM_OK) {
        const gmm_lik *lik = gmm_mdl_likelihood(m);
        double noise = observed ? gmm_mdl_noise(m) : 0.0;
        for (size_t i = 0; i < t->n && s == GMM_OK; i++)
            s = gmm_summary_pred_normal(lik, mean[i], var[i] + noise, level, &pr[i]);
    }
    gmm_free(mean);
    gmm_free(var);
    return s;
}

gmm_status gmm_mdl_score(gmm_mdl *m, const gmm_mdl_test *t, double *lpd)
{
    const gmm_lik *lik = gmm_mdl_likelihood(m);
    double center = gmm_mdl_center(m, NULL);
    size_t nq = t->n;
    double *mean = gmm_malloc(nq ? nq : 1, sizeof *mean);
    double *var = gmm_malloc(nq ? nq : 1, sizeof *var);
    gmm_status s = mean && var ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK)
        s = gmm_mdl_predict_test(m, t, mean, var);
    for (size_t r = 0; s == GMM_OK && r < t->n; r++) {
        if (isnan(t->y[r]))
            continue;
        s = gmm_lik_predictive(lik, t->y[r] - center, t->e[r], mean[r] - center, var[r],
                               &lpd[r]);
    }
    gmm_free(mean);
    gmm_free(var);
    return s;
}

/* A data input and its row, ordered by input. */
typedef struct {
    double x;
    size_t row;
} xrow;

static int cmp_xrow(const void *a, const void *b)
{
    double x = ((const xrow *)a)->x, y = ((const xrow *)b)->x;
    return (x > y) - (x < y);
}

/* log of the mean of exp(l[0..N)), without overflow. */
static double log_mean_exp(const double *l, size_t N)
{
    double mx = -INFINITY, sum = 0.0;
    for (size_t k = 0; k < N; k++)
        if (l[k] > mx)
            mx = l[k];
    if (!isfinite(mx))
        return mx;
    for (size_t k = 0; k < N; k++)
        sum += exp(l[k] - mx);
    return mx + log(sum / (double)N);
}

/* Test rows per bridge call: its per-draw normals take 2 N SCORE_BLOCK
 * doubles. */
#define SCORE_BLOCK 256

gmm_status gmm_mdl_score_draws(gmm_mdl *m, const gmm_mdl_test *tt, const gmm_draws *d,
                               const char *dpath, double *lpd)
{
    const gmm_table *t = tt->table;
    const double *y = tt->y, *e = tt->e, *site = tt->x;
    const size_t *idx = tt->site;
    size_t cs = tt->col_site;
    gmm_problem *p = gmm_mdl_problem(m);
    gmm_objective *o = gmm_mdl_objective(m);
    size_t n = t->nrow, N = d->nchain * d->niter, np = o->nparam;
    size_t nlat = gmm_latent_dim(gmm_problem_latent(p));
    int inputs = gmm_latent_has_inputs(m->lat);
    double c0 = gmm_mdl_center(m, NULL);
    double *th = gmm_malloc(N * (np ? np : 1), sizeof *th), *l = gmm_malloc(N, sizeof *l);
    gmm_lik *lik = gmm_malloc(N, sizeof *lik);
    double *xs = NULL, *xq = NULL, *M = NULL, *V = NULL, *sw = NULL;
    size_t *sidx = NULL;
    xrow *xsort = NULL;
    size_t *rq = NULL;
    gmm_status s = GMM_OK;
    if (!th || !l || !lik) {
        s = gmm_error(GMM_ENOMEM, "out of memory");
        goto done;
    }
    gmm_mdl_impl_draws_theta(m, d, th);
    for (size_t k = 0; k < N; k++)
        if ((s = gmm_problem_lik_at(p, th + k * np, &lik[k])) != GMM_OK) {
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            s = gmm_error(GMM_EINVAL, "%s: draw %zu: %s", dpath, k + 1, why);
            goto done;
        }
    size_t x1 = gmm_mdl_impl_draws_states_at(d, nlat);
    int states = x1 < d->nvar;
    int covariates = !gmm_problem_offset_constant(p, o->value, NULL);
    if (!states && covariates) {
        s = gmm_error(GMM_EINVAL, "%s has no latent states x[1..%zu]: scoring held-out rows of "
                                  "a model with covariates under draws needs them (draws "
                                  "saved with their latent states)",
                      dpath, nlat);
        goto done;
    }
    if (states) {
        /* each row's linear predictor given each draw: the latent at its
         * input (the Markov bridge's normal) or node (the draw's value; a
         * new iid level: N(0, the draw's variance)), plus X_r beta */
        size_t nc = m->ncoef;
        xs = gmm_malloc(N * nlat, sizeof *xs);
        xq = gmm_malloc(SCORE_BLOCK, sizeof *xq);
        rq = gmm_malloc(SCORE_BLOCK, sizeof *rq);
        M = gmm_malloc(N * SCORE_BLOCK, sizeof *M);
        V = gmm_malloc(N * SCORE_BLOCK, sizeof *V);
        if (m->stack) {
            size_t cap = gmm_latent_stack_row_max(m->lat);
            sidx = gmm_malloc(cap ? cap : 1, sizeof *sidx);
            sw = gmm_malloc(cap ? cap : 1, sizeof *sw);
        }
        if (!xs || !xq || !rq || !M || !V || (m->stack && (!sidx || !sw))) {
            s = gmm_error(GMM_ENOMEM, "out of memory");
            goto done;
        }
        gmm_mdl_impl_draws_states(d, x1, nlat, xs);
        for (size_t r0 = 0; r0 < n;) {
            size_t nq = 0;
            for (; r0 < n && nq < SCORE_BLOCK; r0++)
                if (!isnan(y[r0])) {
                    xq[nq] = inputs ? site[r0] : 0.0;
                    rq[nq++] = r0;
                }
            if (inputs && (s = gmm_problem_latent_at_draws_normal(p, th, np, xs, N, xq, nq, M,
                                                                  V)) != GMM_OK)
                goto done;
            for (size_t k = 0; m->stack && k < N; k++)
                for (size_t q = 0; q < nq; q++)
                    if ((s = gmm_mdl_impl_stack_draw(m, tt, rq[q], th + k * np, xs + k * nlat,
                                                     sidx, sw, &M[k * nq + q],
                                                     &V[k * nq + q])) != GMM_OK)
                        goto done;
            for (size_t k = 0; !inputs && !m->stack && k < N; k++)
                for (size_t q = 0; q < nq; q++) {
                    size_t v = idx[rq[q]];
                    int fresh = v == GMM_MDL_NEW_LEVEL;
                    M[k * nq + q] =
                        fresh ? 0.0 : xs[k * nlat + gmm_latent_node_index(m->lat, v)];
                    V[k * nq + q] = fresh ? th[k * np] : 0.0;
                }
            for (size_t q = 0; q < nq; q++) {
                size_t r = rq[q];
                for (size_t k = 0; k < N; k++) {
                    double mu = M[k * nq + q];
                    const double *beta = th + k * np + np - nc;
                    for (size_t c = 0; c < nc; c++)
                        mu += tt->X[r * nc + c] * beta[c];
                    if ((s = gmm_lik_predictive(&lik[k], y[r] - c0, e[r], mu, V[k * nq + q],
                                                &l[k])) != GMM_OK)
                        goto done;
                }
                lpd[r] = log_mean_exp(l, N);
            }
        }
        goto done;
    }
    /* f at the data rows: a test input must be one of the data's */
    size_t nx = m->nrow;
    const double *x = m->x;
    if (inputs) {
        xsort = gmm_malloc(nx ? nx : 1, sizeof *xsort);
        if (!xsort) {
            s = gmm_error(GMM_ENOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < nx; i++)
            xsort[i] = (xrow){x[i], i};
        qsort(xsort, nx, sizeof *xsort, cmp_xrow);
    }
    for (size_t r = 0; r < n; r++) {
        if (isnan(y[r]))
            continue;
        char name[96];
        size_t sv = 0;
        if (inputs) {
            /* rows at one input share its state, so any of them serves */
            const xrow key = {site[r], 0}, *hit = bsearch(&key, xsort, nx, sizeof *xsort,
                                                          cmp_xrow);
            if (!hit) {
                s = gmm_error_at(GMM_EINVAL, r,
                                 "%s:%zu: column '%s': %.17g is not an input of the model's "
                                 "data, and %s has no latent states x[1..%zu]: scoring new "
                                 "inputs under draws needs them (draws saved with their "
                                 "latent states)",
                                 t->file, t->line[r], t->header[cs], site[r], dpath, nlat);
                goto done;
            }
            sv = hit->row;
        } else if (m->stack) {
            if ((s = stack_row(m, t, r, &sv)) != GMM_OK)
                goto done;
            if (sv == m->nrow) {
                s = gmm_error_at(GMM_EINVAL, r,
                                 "%s:%zu: no row of the model's data %s has this row's values "
                                 "of the formula's columns, and %s has no latent states "
                                 "x[1..%zu] (draws saved with their latent states) to "
                                 "predict a new row from",
                                 t->file, t->line[r], m->data_file, dpath, nlat);
                goto done;
            }
        } else if (idx[r] == GMM_MDL_NEW_LEVEL) {
            s = gmm_error_at(GMM_EINVAL, r,
                             "%s:%zu: column '%s': level '%s' is not in the model's data, and "
                             "%s has no latent states x[1..%zu] (draws saved with their "
                             "latent states) for its draws",
                             t->file, t->line[r], t->header[cs], t->cell[r][cs], dpath, nlat);
            goto done;
        } else {
            sv = idx[r];
        }
        gmm_mdl_draws_column(m, sv, name);
        size_t v = gmm_mdl_impl_draws_var(d, name);
        if (v == d->nvar) {
            s = gmm_error_at(GMM_EINVAL, r,
                             "%s: no column '%s' (the %s of %s:%zu); draws of a subset "
                             "of the latents must include it",
                             dpath, name, inputs ? "data row at the input" : "node", t->file,
                             t->line[r]);
            goto done;
        }
        /* the draws are of f + the centre (Gaussian data) */
        const double *f = gmm_draws_variable(d, v);
        for (size_t k = 0; k < N; k++)
            if ((s = gmm_lik_predictive(&lik[k], y[r] - c0, e[r], f[k] - c0, 0.0, &l[k])) !=
                GMM_OK)
                goto done;
        lpd[r] = log_mean_exp(l, N);
    }
done:
    gmm_free(th);
    gmm_free(l);
    gmm_free(lik);
    gmm_free(xs);
    gmm_free(xq);
    gmm_free(rq);
    gmm_free(M);
    gmm_free(V);
    gmm_free(sidx);
    gmm_free(sw);
    gmm_free(xsort);
    return s;
}

void gmm_mdl_data_row(const gmm_mdl *m, size_t r, size_t *line, double *y, size_t *site)
{
    *line = m->line[r];
    *y = m->y[r] + (m->has_center > 0 ? m->center : 0.0);
    *site = gmm_latent_has_inputs(m->lat) || m->stack ? r : m->row_node[r];
}

gmm_status gmm_mdl_score_loo(gmm_mdl *m, double *lpd)
{
    if (gmm_latent_dim(m->lat) == 0)
        return gmm_error(GMM_EINVAL, "leave-one-out scoring removes a row's site from the "
                                     "latent field's posterior: the model has no latent field "
                                     "(no latent term)");
    if (m->wt) /* a weighted row's site and its one-outcome density differ: not derived */
        return gmm_error(GMM_EINVAL, "leave-one-out scoring does not take prior weights (the "
                                     "model's rows are weighted by '%s')",
                         m->wname);
    /* one site per row for models with inputs, and where covariates make
     * each row's linear predictor its own */
    int rows = gmm_mdl_impl_rows(m);
    const gmm_lik *lik = gmm_mdl_likelihood(m);
    double center = gmm_mdl_center(m, NULL), noise = gmm_mdl_noise(m);
    size_t n = m->nrow, nq = rows ? n : gmm_mdl_nsites(m);
    double *mean = gmm_malloc(nq ? nq : 1, sizeof *mean);
    double *var = gmm_malloc(nq ? nq : 1, sizeof *var);
    gmm_status s = mean && var ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK)
        s = rows && !gmm_latent_has_inputs(m->lat) ? gmm_mdl_impl_predict_rows(m, mean, var)
                                                   : gmm_mdl_predict(m, m->x, nq, mean, var);
    for (size_t r = 0; s == GMM_OK && r < n; r++) {
        lpd[r] = NAN;
        if (isnan(m->y[r]))
            continue;
        size_t q = rows ? r : m->row_node[r];
        double y = m->y[r], e = m->e ? m->e[r] : 1.0, mr = mean[q] - center, vr = var[q];
        double w, g;
        if (lik->type->conjugate) {
            w = 1.0 / noise;
            g = (y - mr) / noise;
        } else if (m->vi) {
            /* q's stationary point: its site is the expected slope and
             * curvature (d/ds2 E log p = E[d2] / 2) */
            double out[3];
            if ((s = gmm_lik_expect(lik, y, e, mr, vr, 0, out, NULL)) != GMM_OK)
                break;
            w = -2.0 * out[2];
            g = out[1];
        } else {
            double out[4];
            gmm_lik_eval(lik, y, e, mr, out, NULL);
            w = -out[2];
            g = out[1];
        }
        /* 1 - v_r w is the share of row r's site in the posterior precision */
        double keep = 1.0 - vr * w;
        if (!(keep > 0.0)) {
            s = gmm_error_at(GMM_EDOM, r,
                             "data row %zu: the cavity variance is not positive (the "
                             "row's site carries all of the posterior's precision): no "
                             "leave-one-out approximation",
                             m->line[r]);
            break;
        }
        double vc = vr / keep, mc = vc * (mr / vr - w * mr - g);
        s = gmm_lik_predictive(lik, y, e, mc, vc, &lpd[r]);
    }
    gmm_free(mean);
    gmm_free(var);
    return s;
}

const char *gmm_mdl_loo_method(const gmm_mdl *m)
{
    return gmm_mdl_observed_normal(m) && strcmp(gmm_mdl_posterior_kind(m), "vi") ? "exact"
                                                                                  : "cavity";
}
