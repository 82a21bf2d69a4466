/* model_design.c -- a formula's fixed effects as the columns of a design
 * matrix X (problem.h): the intercept, numeric covariates and the
 * treatment coding of factors. */
#include "model_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"

typedef struct {
    const char *s;
    double v;   /* the level as a number (numeric factors) */
} level;

static int numeric_cmp(const void *a, const void *b)
{
    const level *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return strcmp(x->s, y->s);
}

static int text_cmp(const void *a, const void *b)
{
    return strcmp(((const level *)a)->s, ((const level *)b)->s);
}

/* A cell's level: the cell without surrounding blanks, into buf. */
static const char *trim(const char *c, char *buf, size_t size)
{
    while (isspace((unsigned char)*c))
        c++;
    size_t n = strlen(c);
    while (n > 0 && isspace((unsigned char)c[n - 1]))
        n--;
    if (n >= size)
        n = size - 1;
    memcpy(buf, c, n);
    buf[n] = '\0';
    return buf;
}

static int is_number(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && *end == '\0' && isfinite(*v);
}

/* The levels of column c, sorted (numeric order when every level is a
 * number), each once, into *out. */
static gmm_status factor_levels(const gmm_table *t, size_t c, gmm_mdl_levels *out)
{
    size_t n = t->nrow, total = 0;
    for (size_t r = 0; r < n; r++)
        total += strlen(t->cell[r][c]) + 1;
    out->store = gmm_malloc(total ? total : 1, 1);
    level *lv = gmm_malloc(n ? n : 1, sizeof *lv);
    out->s = gmm_malloc(n ? n : 1, sizeof *out->s);
    out->v = gmm_malloc(n ? n : 1, sizeof *out->v);
    if (!out->store || !lv || !out->s || !out->v) {
        gmm_free(lv);
        return gmm_error(GMM_ENOMEM, "out of memory for the levels of '%s'", t->header[c]);
    }
    char *p = out->store;
    int numeric = 1;
    for (size_t r = 0; r < n; r++) {
        trim(t->cell[r][c], p, strlen(t->cell[r][c]) + 1);
        if (!*p) {
            gmm_free(lv);
            return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': empty factor level",
                                t->file, t->line[r], t->header[c]);
        }
        lv[r].s = p;
        numeric = numeric && is_number(p, &lv[r].v);
        p += strlen(p) + 1;
    }
    out->isnum = numeric;
    qsort(lv, n, sizeof *lv, numeric ? numeric_cmp : text_cmp);
    size_t k = 0;
    for (size_t r = 0; r < n; r++)
        if (k == 0 || strcmp(lv[k - 1].s, lv[r].s))
            lv[k++] = lv[r];
    out->n = k;
    for (size_t l = 0; l < k; l++) {
        out->s[l] = (char *)lv[l].s;
        out->v[l] = lv[l].v;
    }
    gmm_free(lv);
    return GMM_OK;
}

/* The index of level c among lv's (by value when they are numbers), or
 * lv->n when it is not one of them. */
static size_t level_find(const gmm_mdl_levels *lv, const char *c)
{
    level key = {c, 0.0};
    int numeric = lv->isnum && is_number(c, &key.v);
    if (lv->isnum && !numeric)
        return lv->n;
    size_t lo = 0, hi = lv->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        level at = {lv->s[mid], lv->v[mid]};
        int d = numeric ? numeric_cmp(&at, &key) : text_cmp(&at, &key);
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == lv->n)
        return lv->n;
    level at = {lv->s[lo], lv->v[lo]};
    return (numeric ? at.v == key.v : !strcmp(at.s, c)) ? lo : lv->n;
}

void gmm_mdl_impl_levels_free(gmm_mdl *m)
{
    for (size_t j = 0; m->flev && j < m->nflev; j++) {
        gmm_free(m->flev[j].store);
        gmm_free(m->flev[j].s);
        gmm_free(m->flev[j].v);
    }
    gmm_free(m->flev);
    m->flev = NULL;
    m->nflev = 0;
}

/* Coefficient k's name "coef.NAME" + suffix. */
static gmm_status add_name(gmm_mdl *m, size_t k, const char *name, const char *suffix)
{
    int len = snprintf(m->coef_name[k], sizeof m->coef_name[k], "coef.%s%s", name, suffix);
    if (len < 0 || (size_t)len >= sizeof m->coef_name[k])
        return gmm_error(GMM_EINVAL, "formula: the coefficient name 'coef.%s%s' is too long "
                                     "(%zu bytes at most)",
                         name, suffix, sizeof m->coef_name[k] - 1);
    return GMM_OK;
}

/* Rows of t into X (t->nrow x m->ncoef) with m's terms and levels. */
static gmm_status fill_rows(const gmm_mdl *m, const gmm_table *t, const gmm_formula *fm,
                            int intercept, double *X)
{
    size_t n = t->nrow, ncoef = m->ncoef, nf = fm->nfixed;
    double *num = gmm_malloc(n ? n : 1, sizeof *num);
    if (!num)
        return gmm_error(GMM_ENOMEM, "out of memory for the design");
    memset(X, 0, n * ncoef * sizeof *X);
    gmm_status s = GMM_OK;
    size_t k = 0;
    if (intercept) {
        for (size_t r = 0; r < n; r++)
            X[r * ncoef] = 1.0;
        k++;
    }
    for (size_t j = 0; j < nf && s == GMM_OK; j++) {
        size_t c;
        if ((s = gmm_table_column(t, fm->fixed[j].name, &c)) != GMM_OK)
            break;
        if (!fm->fixed[j].factor) {
            /* a covariate is needed on every row: predictions at rows with a
             * missing outcome use it too */
            if ((s = gmm_table_column_double(t, c, 0, num)) != GMM_OK)
                break;
            for (size_t r = 0; r < n; r++)
                X[r * ncoef + k] = num[r];
            k++;
            continue;
        }
        const gmm_mdl_levels *lv = &m->flev[j];
        char buf[256];
        for (size_t r = 0; r < n; r++) {
            const char *cell = trim(t->cell[r][c], buf, sizeof buf);
            size_t l = level_find(lv, cell);
            if (l == lv->n) {
                s = gmm_error_at(GMM_EPARSE, r,
                                 "%s:%zu: column '%s': level '%s' of factor(%s) is not one of "
                                 "the model's data (%zu levels, from '%s' to '%s'): it has no "
                                 "coefficient",
                                 t->file, t->line[r], t->header[c], cell, fm->fixed[j].name,
                                 lv->n, lv->s[0], lv->s[lv->n - 1]);
                break;
            }
            if (l > 0)
                X[r * ncoef + k + l - 1] = 1.0;
        }
        k += lv->n - 1;
    }
    gmm_free(num);
    return s;
}

gmm_status gmm_mdl_impl_design_rows(const gmm_mdl *m, const gmm_table *t, double *X)
{
    static const gmm_formula no_terms;
    int intercept = m->ncoef > 0 && !strcmp(m->coef_name[0], "intercept");
    return fill_rows(m, t, m->fm ? m->fm : &no_terms, intercept, X);
}

gmm_status gmm_mdl_impl_design(gmm_mdl *m, const gmm_table *t, const gmm_formula *fm,
                               int intercept)
{
    gmm_status s = GMM_OK;
    size_t nf = fm->nfixed, n = t->nrow;
    m->flev = gmm_calloc(nf ? nf : 1, sizeof *m->flev);
    if (!m->flev)
        return gmm_error(GMM_ENOMEM, "out of memory for the design");
    m->nflev = nf;
    size_t ncoef = intercept != 0;
    for (size_t j = 0; j < nf; j++) {
        size_t c;
        if ((s = gmm_table_column(t, fm->fixed[j].name, &c)) != GMM_OK)
            return s;
        if (fm->fixed[j].factor) {
            gmm_mdl_levels *lv = &m->flev[j];
            if ((s = factor_levels(t, c, lv)) != GMM_OK)
                return s;
            if (lv->n < 2)
                return gmm_error(GMM_EINVAL, "%s: factor(%s) has one level ('%s'): nothing to "
                                             "estimate",
                                 t->file, fm->fixed[j].name, lv->n ? lv->s[0] : "");
            ncoef += lv->n - 1;
        } else {
            ncoef++;
        }
    }
    m->ncoef = ncoef;
    m->X = gmm_calloc((n ? n : 1) * (ncoef ? ncoef : 1), sizeof *m->X);
    m->coef_name = gmm_calloc(ncoef ? ncoef : 1, sizeof *m->coef_name);
    if (!m->X || !m->coef_name)
        return gmm_error(GMM_ENOMEM, "out of memory for the design (%zu rows x %zu coefficients)",
                         n, ncoef);
    size_t k = 0;
    if (intercept)
        snprintf(m->coef_name[k++], sizeof m->coef_name[0], "intercept");
    for (size_t j = 0; j < nf; j++) {
        const char *name = fm->fixed[j].name;
        if (!fm->fixed[j].factor) {
            if ((s = add_name(m, k++, name, "")) != GMM_OK)
                return s;
            continue;
        }
        for (size_t l = 1; l < m->flev[j].n; l++) {
            char lab[200];
            snprintf(lab, sizeof lab, "[%s]", m->flev[j].s[l]);
            if ((s = add_name(m, k++, name, lab)) != GMM_OK)
                return s;
        }
    }
    return fill_rows(m, t, fm, intercept, m->X);
}
