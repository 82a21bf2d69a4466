/* model_draws.c -- the model draws belong to (model.h, draws.h): a built
 * model's identity as a sidecar's "origin", and the check of draws against
 * it.
 *
 * PREDICTING AT ROWS FROM DRAWS.  Each draw's X_r beta (its coefficients
 * when sampled) plus its latent at the row's input (drawn from the Markov
 * bridge given the draw's states), node, or a new iid level (drawn from
 * N(0, the draw's variance)); for several f() terms the row's form of the
 * draw's latents plus its independent part (gmm_latent_stack_row). */
#include "model_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/problem.h"
#include "gmm/rng.h"

/* m's identity (draws.h); the digests go into dig[3] (model file, sites,
 * data).  sampled: nparam flags or NULL. */
static gmm_status draws_origin(gmm_mdl *m, const int *sampled, gmm_draws_origin *o,
                               char dig[3][32])
{
    gmm_status s;
    uint64_t h;
    memset(o, 0, sizeof *o);
    o->model_file = m->model_rec;
    if (m->model_path) {
        if ((s = gmm_digest_file(m->model_path, dig[0])) != GMM_OK)
            return s;
        o->model_digest = dig[0];
    }
    o->likelihood = m->lik.type->name;
    o->latent = gmm_latent_family(m->lat);
    o->latent_size = gmm_latent_dim(m->lat);
    o->rows = m->nrow;
    gmm_digest_init(&h);
    if (gmm_latent_has_inputs(m->lat)) {
        gmm_digest_add(&h, m->x, m->nrow * sizeof *m->x);
    } else {
        char buf[64];
        for (size_t v = 0; v < gmm_mdl_nsites(m); v++) {
            const char *l = gmm_mdl_site_label(m, v, buf);
            gmm_digest_add(&h, l, strlen(l) + 1);
        }
    }
    gmm_digest_format(h, dig[1]);
    o->sites_digest = dig[1];
    /* y as modelled (centred), the centre, the exposures; NAN has one
     * pattern here (the table reader's) */
    gmm_digest_init(&h);
    gmm_digest_add(&h, m->y, m->nrow * sizeof *m->y);
    double c = m->has_center > 0 ? m->center : 0.0;
    gmm_digest_add(&h, &c, sizeof c);
    if (m->e)
        gmm_digest_add(&h, m->e, m->nrow * sizeof *m->e);
    gmm_digest_format(h, dig[2]);
    o->data_digest = dig[2];
    o->nparam = m->obj->nparam;
    o->param_name = (const char *const *)m->obj->name;
    o->param_value = m->obj->value;
    o->sampled = sampled;
    return GMM_OK;
}

gmm_status gmm_mdl_draws_origin(gmm_mdl *m, const int *sampled, json_t **out)
{
    gmm_draws_origin o;
    char dig[3][32];
    gmm_status s = draws_origin(m, sampled, &o, dig);
    return s != GMM_OK ? s : gmm_draws_origin_json(&o, out);
}

/* Draws without a sidecar: their columns must be exactly those hmc writes
 * for m -- f at every data row or node in order, x[1..n] if any, and
 * otherwise lp__, m's parameters and log_lik[row] (not model columns).
 * NULL when they are, else the first column that is not (in buf). */
static const char *foreign_column(gmm_mdl *m, const gmm_draws *d, char *buf, size_t size)
{
    int inputs = gmm_mdl_impl_rows(m);
    size_t nf = inputs ? m->nrow : m->gmrf->n, jf = 0, jx = 0;
    size_t nx = gmm_latent_dim(m->lat);
    char want[96], lb[64];
    for (size_t v = 0; v < d->nvar; v++) {
        const char *name = d->name[v];
        if (!strncmp(name, "f[", 2)) {
            if (jf == nf)
                return name;
            if (inputs)
                snprintf(want, sizeof want, "f[%zu]", jf + 1);
            else
                snprintf(want, sizeof want, "f[%s]", gmm_graph_node_label(m->g, jf, lb));
            jf++;
            if (strcmp(name, want))
                return name;
        } else if (!strncmp(name, "x[", 2)) {
            snprintf(want, sizeof want, "x[%zu]", ++jx);
            if (jx > nx || strcmp(name, want))
                return name;
        } else if (strncmp(name, "log_lik[", 8) && strcmp(name, "lp__")) {
            size_t k;
            for (k = 0; k < m->obj->nparam && strcmp(name, m->obj->name[k]); k++)
                ;
            if (k == m->obj->nparam)
                return name;
        }
    }
    if (jf < nf) {
        if (inputs)
            snprintf(buf, size, "f[%zu] (missing)", jf + 1);
        else
            snprintf(buf, size, "f[%s] (missing)", gmm_graph_node_label(m->g, jf, lb));
        return buf;
    }
    if (jx && jx < nx) {
        snprintf(buf, size, "x[%zu] (missing)", jx + 1);
        return buf;
    }
    return NULL;
}

gmm_status gmm_mdl_check_draws(gmm_mdl *m, const char *path, const gmm_draws *d,
                               gmm_mdl_draws_verdict *verdict)
{
    gmm_draws_origin cur;
    char dig[3][32];
    json_t *rec = NULL;
    int same = 1;
    gmm_status s = draws_origin(m, NULL, &cur, dig);
    if (s != GMM_OK || (s = gmm_draws_origin_read(path, &rec)) != GMM_OK)
        return s;
    if (rec) {
        s = gmm_draws_origin_check(rec, &cur, &same);
        json_decref(rec);
        if (s != GMM_OK) {
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            return gmm_error(GMM_EINVAL, "%s: %s", path, why);
        }
        *verdict = same ? GMM_MDL_DRAWS_SAME : GMM_MDL_DRAWS_OTHER_FILE;
        return GMM_OK;
    }
    char buf[96];
    const char *bad = foreign_column(m, d, buf, sizeof buf);
    if (bad) {
        int inputs = gmm_mdl_impl_rows(m);
        return gmm_error(GMM_EINVAL,
                         "%s: no sidecar %s.json says which model these draws came from, and "
                         "column '%s' is not this model's (%s %s, f at %zu %s): give the draws "
                         "of this model (with their sidecar FILE.json)",
                         path, strcmp(path, "-") ? path : "<stdin>", bad, m->lik.type->name,
                         gmm_latent_family(m->lat), inputs ? m->nrow : m->gmrf->n,
                         inputs ? "data rows" : "nodes");
    }
    *verdict = GMM_MDL_DRAWS_UNCHECKED;
    return GMM_OK;
}

gmm_status gmm_mdl_draws_stan_sites(const gmm_mdl *m, gmm_draws *d)
{
    if (!d->stan)
        return GMM_OK;
    d->stan = 0;
    if (gmm_latent_has_inputs(m->lat))
        return GMM_OK;  /* f[ROW] either way */
    char buf[96];
    for (size_t v = 0; v < d->nvar; v++) {
        const char *name = d->name[v];
        size_t len = strlen(name);
        if (len < 4 || strncmp(name, "f[", 2) || name[len - 1] != ']')
            continue;
        char *end;
        unsigned long k = strtoul(name + 2, &end, 10);
        if (end != name + len - 1 || name[2] < '1' || name[2] > '9' || k > m->gmrf->n)
            return gmm_error(GMM_EINVAL,
                             "column 'f.%.*s' is not the position of one of the graph's %zu "
                             "nodes (CmdStan's f.K is the K-th node)",
                             (int)(len - 3), name + 2, m->gmrf->n);
        char *label = gmm_strdup(gmm_mdl_draws_column(m, k - 1, buf));
        if (!label)
            return gmm_error(GMM_ENOMEM, "out of memory");
        gmm_free(d->name[v]);
        d->name[v] = label;
    }
    return GMM_OK;
}

gmm_status gmm_mdl_draws_site(const gmm_mdl *m, const char *name, size_t *v)
{
    size_t len = strlen(name);
    if (gmm_mdl_impl_rows(m)) {
        char *end;
        unsigned long r = strtoul(name + 2, &end, 10);
        if (end != name + len - 1 || r < 1 || r > m->nrow)
            return gmm_error(GMM_EINVAL,
                             "column '%s' is not a data row of the model's data (1..%zu)", name,
                             m->nrow);
        *v = r - 1;
        return GMM_OK;
    }
    char label[256];
    snprintf(label, sizeof label, "%.*s", (int)(len - 3), name + 2);
    if (!gmm_graph_node_find(m->g, label, v))
        return gmm_error(GMM_EINVAL, "column '%s' is not a node of the model's graph", name);
    return GMM_OK;
}

const char *gmm_mdl_draws_column(const gmm_mdl *m, size_t v, char *buf)
{
    char lb[64];
    if (gmm_mdl_impl_rows(m))
        snprintf(buf, 96, "f[%zu]", v + 1);
    else
        snprintf(buf, 96, "f[%s]", gmm_graph_node_label(m->g, v, lb));
    return buf;
}

const char *gmm_mdl_site_noun(const gmm_mdl *m)
{
    return gmm_mdl_impl_rows(m) ? "data row" : "the graph's node";
}

gmm_status gmm_mdl_sites_parse(const gmm_mdl *m, const char *item, size_t *first, size_t *last)
{
    if (gmm_mdl_impl_rows(m)) {
        char *end;
        unsigned long a = strtoul(item, &end, 10), b = a;
        if (*end == '-')
            b = strtoul(end + 1, &end, 10);
        if (*end || a < 1 || b < a || b > m->nrow)
            return gmm_error(GMM_EINVAL, "'%s' is not a data row or range A-B in 1..%zu", item,
                             m->nrow);
        *first = a - 1;
        *last = b - 1;
        return GMM_OK;
    }
    if (!gmm_graph_node_find(m->g, item, first))
        return gmm_error(GMM_EINVAL, "'%s' is not a node of the graph", item);
    *last = *first;
    return GMM_OK;
}

gmm_status gmm_mdl_predict_draws(gmm_mdl *m, const gmm_draws *d, const char *dpath,
                                 double level, size_t *site, gmm_summary_pred *pr, size_t *nout)
{
    gmm_status s = GMM_OK;
    const gmm_lik *lik = gmm_mdl_likelihood(m);
    size_t N = d->nchain * d->niter;
    double *work = gmm_malloc(N ? N : 1, sizeof *work);
    *nout = 0;
    if (!work)
        return gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t v = 0; v < d->nvar; v++) {
        const char *name = d->name[v];
        size_t len = strlen(name);
        if (len < 4 || strncmp(name, "f[", 2) || name[len - 1] != ']')
            continue;
        if ((s = gmm_mdl_draws_site(m, name, &site[*nout])) != GMM_OK) {
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            s = gmm_error(GMM_EINVAL, "%s: %s", dpath, why);
            goto done;
        }
        memcpy(work, gmm_draws_variable(d, v), N * sizeof *work);
        if ((s = gmm_summary_pred_draws(lik, work, N, level, &pr[*nout])) != GMM_OK)
            goto done;
        (*nout)++;
    }
    if (*nout == 0)
        s = gmm_error(GMM_EINVAL, "%s: no f[...] columns in the draws", dpath);
done:
    gmm_free(work);
    return s;
}

gmm_status gmm_mdl_impl_stack_draw(const gmm_mdl *m, const gmm_mdl_test *t, size_t r,
                                   const double *theta, const double *x, size_t *idx,
                                   double *w, double *mean, double *var)
{
    size_t nnz = 0;
    gmm_status s =
        gmm_latent_stack_row_group(m->lat, theta, t->sat + r * m->nterm,
                                   t->sgrp + 2 * r * m->nterm, idx, w, &nnz, var);
    *mean = 0.0;
    for (size_t e = 0; s == GMM_OK && e < nnz; e++)
        *mean += w[e] * x[idx[e]];
    if (s != GMM_OK) {
        char why[GMM_ERROR_MAX];
        snprintf(why, sizeof why, "%s", gmm_error_message());
        return gmm_error_at(s, r, "%s:%zu: %s", t->table->file, t->table->line[r], why);
    }
    return GMM_OK;
}

size_t gmm_mdl_impl_draws_var(const gmm_draws *d, const char *name)
{
    size_t v;
    for (v = 0; v < d->nvar && strcmp(d->name[v], name); v++)
        ;
    return v;
}

void gmm_mdl_impl_draws_theta(const gmm_mdl *m, const gmm_draws *d, double *th)
{
    const gmm_objective *o = m->obj;
    size_t N = d->nchain * d->niter, np = o->nparam;
    for (size_t k2 = 0; k2 < np; k2++) {
        size_t v = gmm_mdl_impl_draws_var(d, o->name[k2]);
        for (size_t k = 0; k < N; k++)
            th[k * np + k2] = v < d->nvar ? gmm_draws_variable(d, v)[k] : o->value[k2];
    }
}

size_t gmm_mdl_impl_draws_states_at(const gmm_draws *d, size_t n)
{
    size_t x1 = gmm_mdl_impl_draws_var(d, "x[1]");
    if (x1 == d->nvar || x1 + n > d->nvar)
        return d->nvar;
    char name[48];
    snprintf(name, sizeof name, "x[%zu]", n);
    return strcmp(d->name[x1 + n - 1], name) ? d->nvar : x1;
}

/* Gaussian data were centred: f and its interval move back by the centre
 * (the response of a Gaussian model is not printed). */
static void uncentre(const gmm_mdl *m, gmm_summary_pred *pr, size_t nq)
{
    double c0 = gmm_mdl_center(m, NULL);
    for (size_t q = 0; q < nq; q++) {
        pr[q].mean += c0;
        pr[q].lower += c0;
        pr[q].upper += c0;
    }
}

void gmm_mdl_impl_draws_states(const gmm_draws *d, size_t x1, size_t n, double *xs)
{
    size_t N = d->nchain * d->niter;
    for (size_t j = 0; j < n; j++) {
        const double *col = gmm_draws_variable(d, x1 + j);
        for (size_t k = 0; k < N; k++)
            xs[k * n + j] = col[k];
    }
}

gmm_status gmm_mdl_predict_draws_at(gmm_mdl *m, const gmm_draws *d, const char *dpath,
                                    const double *xq, size_t nq, double level,
                                    gmm_summary_pred *pr)
{
    gmm_status s;
    gmm_problem *p = m->prob;
    gmm_objective *o = m->obj;
    size_t n = gmm_latent_dim(m->lat), N = d->nchain * d->niter, np = o->nparam;
    size_t x1 = gmm_mdl_impl_draws_states_at(d, n);
    double *xs = NULL, *th = NULL;
    if (x1 == d->nvar)
        return gmm_error(GMM_EINVAL,
                         "%s: no latent states x[1..%zu]: predicting new inputs from draws "
                         "needs them (draws saved with their latent states)",
                         dpath, n);
    xs = gmm_malloc(N * n, sizeof *xs);
    th = gmm_malloc(N * (np ? np : 1), sizeof *th);
    if (!xs || !th) {
        s = gmm_error(GMM_ENOMEM, "out of memory");
        goto done;
    }
    gmm_mdl_impl_draws_states(d, x1, n, xs);
    gmm_mdl_impl_draws_theta(m, d, th);
    if ((s = gmm_problem_predict_at_draws(p, th, np, xs, N, xq, nq, 1, level, pr)) != GMM_OK)
        goto done;
    uncentre(m, pr, nq);
done:
    gmm_free(xs);
    gmm_free(th);
    return s;
}

gmm_status gmm_mdl_predict_draws_rows(gmm_mdl *m, const gmm_draws *d, const char *dpath,
                                      const gmm_mdl_test *t, double level,
                                      gmm_summary_pred *pr)
{
    gmm_status s = GMM_OK;
    gmm_objective *o = m->obj;
    int inputs = gmm_latent_has_inputs(m->lat);
    size_t n = gmm_latent_dim(m->lat), N = d->nchain * d->niter, np = o->nparam;
    size_t nq = t->n, nc = m->ncoef, x1 = gmm_mdl_impl_draws_states_at(d, n);
    if (x1 == d->nvar)
        return gmm_error(GMM_EINVAL,
                         "%s: no latent states x[1..%zu]: predicting new rows from draws "
                         "needs them (draws saved with their latent states)",
                         dpath, n);
    if (N == 0)
        return gmm_error(GMM_EINVAL, "%s: no draws", dpath);
    double *xs = gmm_malloc(N * n, sizeof *xs), *th = gmm_malloc(N * (np ? np : 1), sizeof *th);
    double *M = gmm_malloc(N * (nq ? nq : 1), sizeof *M);
    double *V = gmm_malloc(N * (nq ? nq : 1), sizeof *V), *fs = gmm_malloc(N, sizeof *fs);
    size_t cap = m->stack ? gmm_latent_stack_row_max(m->lat) : 0;
    size_t *sidx = gmm_malloc(cap ? cap : 1, sizeof *sidx);
    double *sw = gmm_malloc(cap ? cap : 1, sizeof *sw);
    if (!xs || !th || !M || !V || !fs || !sidx || !sw) {
        s = gmm_error(GMM_ENOMEM, "out of memory for %zu draws at %zu rows", N, nq);
        goto done;
    }
    gmm_mdl_impl_draws_states(d, x1, n, xs);
    gmm_mdl_impl_draws_theta(m, d, th);
    /* each draw's latent at the row: the Markov bridge's normal at an
     * input, the draw's value at a node, the prior at a new iid level */
    if (inputs &&
        (s = gmm_problem_latent_at_draws_normal(m->prob, th, np, xs, N, t->x, nq, M, V)) != GMM_OK)
        goto done;
    for (size_t k = 0; m->stack && k < N; k++)
        for (size_t q = 0; q < nq; q++)
            if ((s = gmm_mdl_impl_stack_draw(m, t, q, th + k * np, xs + k * n, sidx, sw,
                                             &M[k * nq + q], &V[k * nq + q])) != GMM_OK)
                goto done;
    for (size_t k = 0; !inputs && !m->stack && k < N; k++)
        for (size_t q = 0; q < nq; q++) {
            int fresh = t->site[q] == GMM_MDL_NEW_LEVEL;
            M[k * nq + q] = fresh ? 0.0 : xs[k * n + gmm_latent_node_index(m->lat, t->site[q])];
            V[k * nq + q] = fresh ? th[k * np] : 0.0;
        }
    const gmm_lik *lik = gmm_mdl_likelihood(m);
    gmm_rng r;
    gmm_rng_seed(&r, 1, 0);
    for (size_t q = 0; q < nq && s == GMM_OK; q++) {
        for (size_t k = 0; k < N; k++) {
            const double *beta = th + k * np + np - nc;
            double f = M[k * nq + q], v = V[k * nq + q];
            for (size_t c = 0; c < nc; c++)
                f += t->X[q * nc + c] * beta[c];
            fs[k] = f + (v > 0.0 ? sqrt(v) * gmm_rng_normal(&r) : 0.0);
        }
        if ((s = gmm_summary_pred_draws(lik, fs, N, level, &pr[q])) != GMM_OK)
            break;
    }
    if (s == GMM_OK)
        uncentre(m, pr, nq);
done:
    gmm_free(xs);
    gmm_free(th);
    gmm_free(M);
    gmm_free(V);
    gmm_free(fs);
    gmm_free(sidx);
    gmm_free(sw);
    return s;
}
