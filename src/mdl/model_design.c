/* model_design.c -- a formula's fixed effects as the columns of a design
 * matrix X (problem.h), as R's model.matrix makes them: the intercept, then
 * each term's columns -- the products of its variables' columns, the first
 * variable's varying fastest -- with R's names, then one column per
 * offset().
 *
 * CODING (R's TermCode, src/library/stats/src/model.c).  A factor in a
 * term is coded by treatment contrasts (its levels but the reference) when
 * the term without it is the empty term or lies within a term before it,
 * else by an indicator per level: ~ x:f without f gives f every level,
 * ~ f + x:f contrasts.  Without an intercept the first factor of the first
 * term holding one takes every level (~ 0 + f). */
#include "model_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
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

gmm_status gmm_mdl_impl_factor_levels(const gmm_table *t, size_t c, gmm_mdl_levels *out)
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


/* The coded position of sorted level l: the reference 0, the others after
 * it in their order; and back. */
static size_t coded(const gmm_mdl_levels *lv, size_t l)
{
    return l == lv->ref ? 0 : l < lv->ref ? l + 1 : l;
}

static const char *coded_level(const gmm_mdl_levels *lv, size_t k)
{
    return lv->s[k == 0 ? lv->ref : k <= lv->ref ? k - 1 : k];
}

void gmm_mdl_impl_levels_free(gmm_mdl *m)
{
    for (size_t j = 0; m->flev && j < m->nflev; j++) {
        gmm_free(m->flev[j].store);
        gmm_free(m->flev[j].s);
        gmm_free(m->flev[j].v);
        gmm_free(m->flev[j].alpha);
        gmm_free(m->flev[j].norm2);
    }
    gmm_free(m->flev);
    m->flev = NULL;
    m->nflev = 0;
}

/* Each term's coding of each variable into code[t * 64 + v]: 0 not a
 * factor or not in the term, 1 contrasts, 2 indicators (R's TermCode). */
static void term_codes(const gmm_mdl *m, const gmm_formula *fm, int intercept,
                       unsigned char *code)
{
    memset(code, 0, fm->nfixed * 64);
    int first = !intercept;
    for (size_t t = 0; t < fm->nfixed; t++)
        for (size_t v = 0; v < fm->nvar; v++) {
            uint64_t bit = 1ULL << v, rest = fm->fixed[t].vars & ~bit;
            if (!(fm->fixed[t].vars & bit) || !m->flev[v].factor)
                continue;
            int c = 2;
            if (!rest)
                c = 1;
            for (size_t u = 0; u < t && c == 2; u++)
                if (!(rest & ~fm->fixed[u].vars))
                    c = 1;
            if (first) {
                c = 2;
                first = 0;
            }
            code[t * 64 + v] = (unsigned char)c;
        }
}

/* The number of columns of variable v coded `code` in a term. */
static size_t var_cols(const gmm_mdl *m, const gmm_formula *fm, size_t v, int code)
{
    const gmm_formula_var *x = &fm->var[v];
    if (m->flev[v].factor)
        return code == 2 ? m->flev[v].n : m->flev[v].n - 1;
    return x->kind == GMM_FV_POLY ? (size_t)x->degree : 1;
}

/* A variable's values at every row: numbers (n x width) or, for a factor,
 * each row's coded level. */
typedef struct {
    double *x;
    size_t *lev;
} var_rows;

static gmm_status read_var(const gmm_mdl *m, const gmm_table *t, const gmm_formula *fm,
                           size_t v, var_rows *out, size_t *pos)
{
    const gmm_formula_var *x = &fm->var[v];
    size_t n = t->nrow, nn = n ? n : 1, c;
    gmm_status s = GMM_OK;
    if (m->flev[v].factor) {
        const gmm_mdl_levels *lv = &m->flev[v];
        if (!(out->lev = gmm_malloc(nn, sizeof *out->lev)))
            return gmm_error(GMM_ENOMEM, "out of memory for the design");
        if ((s = gmm_table_column(t, x->name, &c)) != GMM_OK)
            return s;
        char buf[256];
        for (size_t r = 0; r < n; r++) {
            const char *cell = trim(t->cell[r][c], buf, sizeof buf);
            size_t l = level_find(lv, cell);
            if (l == lv->n)
                return gmm_error_at(GMM_EPARSE, r,
                                    "%s:%zu: column '%s': level '%s' of factor(%s) is not one of "
                                    "the model's data (%zu levels, from '%s' to '%s'): it has no "
                                    "coefficient",
                                    t->file, t->line[r], t->header[c], cell, x->name, lv->n,
                                    lv->s[0], lv->s[lv->n - 1]);
            out->lev[r] = coded(lv, l);
        }
        return GMM_OK;
    }
    if (!(out->x = gmm_malloc(nn, sizeof *out->x)))
        return gmm_error(GMM_ENOMEM, "out of memory for the design");
    if (x->name) {
        /* a covariate is needed on every row: predictions at rows with a
         * missing outcome use it too */
        if ((s = gmm_table_column(t, x->name, &c)) == GMM_OK)
            s = gmm_table_column_double(t, c, 0, out->x);
    } else {
        s = gmm_mdl_impl_expr_eval(x->e, t, x->label, 0, out->x, pos);
    }
    if (s != GMM_OK || x->kind != GMM_FV_POLY)
        return s;
    const gmm_mdl_levels *lv = &m->flev[v];
    size_t k = (size_t)x->degree;
    double *z = gmm_malloc(nn * k, sizeof *z);
    if (!z)
        return gmm_error(GMM_ENOMEM, "out of memory for the design");
    for (size_t r = 0; r < n; r++)
        gmm_mdl_impl_poly_at(out->x[r], x->degree, lv->alpha, lv->norm2, z + r * k);
    gmm_free(out->x);
    out->x = z;
    return GMM_OK;
}

/* Rows of t into X (t->nrow x m->ncoef) with m's terms, levels and bases. */
static gmm_status fill_rows(const gmm_mdl *m, const gmm_table *t, const gmm_formula *fm,
                            int intercept, double *X, size_t *pos)
{
    size_t n = t->nrow, ncoef = m->ncoef, nv = fm->nvar;
    unsigned char *code = gmm_malloc(fm->nfixed ? fm->nfixed * 64 : 1, 1);
    var_rows *vr = gmm_calloc(nv ? nv : 1, sizeof *vr);
    double *off = gmm_malloc(n ? n : 1, sizeof *off);
    gmm_status s = code && vr && off ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t v = 0; v < nv && s == GMM_OK; v++)
        s = read_var(m, t, fm, v, &vr[v], pos);
    if (s != GMM_OK)
        goto done;
    memset(X, 0, n * ncoef * sizeof *X);
    term_codes(m, fm, intercept, code);
    size_t k = 0;
    if (intercept) {
        for (size_t r = 0; r < n; r++)
            X[r * ncoef] = 1.0;
        k++;
    }
    for (size_t j = 0; j < fm->nfixed; j++) {
        size_t width[64], ncol = 1;
        for (size_t v = 0; v < nv; v++)
            if (fm->fixed[j].vars >> v & 1) {
                width[v] = var_cols(m, fm, v, code[j * 64 + v]);
                ncol *= width[v];
            }
        for (size_t r = 0; r < n; r++)
            for (size_t c = 0; c < ncol; c++) {
                double val = 1.0;
                for (size_t v = 0, rest = c; v < nv; v++) {
                    if (!(fm->fixed[j].vars >> v & 1))
                        continue;
                    size_t i = rest % width[v];
                    rest /= width[v];
                    if (m->flev[v].factor)
                        val *= vr[v].lev[r] == i + (code[j * 64 + v] == 1);
                    else
                        val *= vr[v].x[r * width[v] + i];
                }
                X[r * ncoef + k + c] = val;
            }
        k += ncol;
    }
    for (size_t o = 0; o < fm->noffset && s == GMM_OK; o++, k++) {
        size_t at = SIZE_MAX;
        s = gmm_mdl_impl_expr_eval(fm->offset[o].e, t, fm->offset[o].label, 0, off, &at);
        if (s != GMM_OK && pos)
            *pos = at;
        for (size_t r = 0; s == GMM_OK && r < n; r++)
            X[r * ncoef + k] = off[r];
    }
done:
    for (size_t v = 0; v < nv; v++) {
        gmm_free(vr ? vr[v].x : NULL);
        gmm_free(vr ? vr[v].lev : NULL);
    }
    gmm_free(vr);
    gmm_free(code);
    gmm_free(off);
    return s;
}

gmm_status gmm_mdl_impl_design_rows(const gmm_mdl *m, const gmm_table *t, double *X)
{
    static const gmm_formula no_terms;
    int intercept = m->ncoef > 0 && !strcmp(m->coef_name[0], "intercept");
    return fill_rows(m, t, m->fm ? m->fm : &no_terms, intercept, X, NULL);
}

int gmm_mdl_impl_text_column(const gmm_table *t, size_t c)
{
    char buf[256], *end;
    for (size_t r = 0; r < t->nrow; r++) {
        /* missing (empty, NA, NaN) and infinite cells stay the table's errors */
        const char *cell = trim(t->cell[r][c], buf, sizeof buf);
        (void)strtod(cell, &end);
        if (*cell && strcmp(cell, "NA") && (end == cell || *end))
            return 1;
    }
    return 0;
}

/* What variable v takes from the data: a factor's levels (and its
 * reference), poly()'s basis. */
static gmm_status learn_var(gmm_mdl *m, const gmm_table *t, const gmm_formula *fm, size_t v,
                            size_t *pos)
{
    const gmm_formula_var *x = &fm->var[v];
    gmm_mdl_levels *lv = &m->flev[v];
    gmm_status s = GMM_OK;
    size_t c, n = t->nrow;
    if (x->kind == GMM_FV_NUMERIC && x->name) {
        if ((s = gmm_table_column(t, x->name, &c)) != GMM_OK)
            return s;
        lv->factor = gmm_mdl_impl_text_column(t, c);
    }
    if (x->kind == GMM_FV_FACTOR || lv->factor) {
        lv->factor = 1;
        if ((s = gmm_table_column(t, x->name, &c)) != GMM_OK ||
            (s = gmm_mdl_impl_factor_levels(t, c, lv)) != GMM_OK)
            return s;
        if (lv->n < 2)
            return gmm_error(GMM_EINVAL, "%s: %s has one level ('%s'): nothing to estimate",
                             t->file, x->label, lv->n ? lv->s[0] : "");
        if (x->ref && (lv->ref = level_find(lv, x->ref)) == lv->n) {
            *pos = x->ref_pos;
            return gmm_error(GMM_EPARSE, "formula: '%s' is not a level of column '%s' (%zu "
                                         "levels, from '%s' to '%s')",
                             x->ref, x->name, lv->n, lv->s[0], lv->s[lv->n - 1]);
        }
        return GMM_OK;
    }
    if (x->kind != GMM_FV_POLY)
        return GMM_OK;
    double *val = gmm_malloc(n ? n : 1, sizeof *val);
    lv->alpha = gmm_malloc((size_t)x->degree, sizeof *lv->alpha);
    lv->norm2 = gmm_malloc((size_t)x->degree + 2, sizeof *lv->norm2);
    if (!val || !lv->alpha || !lv->norm2)
        s = gmm_error(GMM_ENOMEM, "out of memory for %s", x->label);
    if (s == GMM_OK)
        s = gmm_mdl_impl_expr_eval(x->e, t, x->label, 0, val, pos);
    if (s == GMM_OK && (s = gmm_mdl_impl_poly_fit(val, n, x->degree, lv->alpha, lv->norm2)))
        *pos = x->pos;
    gmm_free(val);
    return s;
}

/* Column k's names: the part of each variable of term j at index i. */
static gmm_status name_column(gmm_mdl *m, const gmm_formula *fm, size_t j,
                              const unsigned char *code, size_t c, size_t k)
{
    char name[256] = "coef.", label[256] = "";
    for (size_t v = 0, rest = c; v < fm->nvar; v++) {
        if (!(fm->fixed[j].vars >> v & 1))
            continue;
        const gmm_formula_var *x = &fm->var[v];
        size_t w = var_cols(m, fm, v, code[v]), i = rest % w;
        rest /= w;
        const char *sep = label[0] ? ":" : "";
        size_t nl = strlen(name), ll = strlen(label);
        if (m->flev[v].factor) {
            const char *lev = coded_level(&m->flev[v], i + (code[v] == 1));
            snprintf(name + nl, sizeof name - nl, "%s%s[%s]", sep, x->name, lev);
            snprintf(label + ll, sizeof label - ll, "%s%s%s", sep, x->label, lev);
        } else if (x->kind == GMM_FV_POLY) {
            snprintf(name + nl, sizeof name - nl, "%s%s%zu", sep, x->label, i + 1);
            snprintf(label + ll, sizeof label - ll, "%s%s%zu", sep, x->label, i + 1);
        } else {
            snprintf(name + nl, sizeof name - nl, "%s%s", sep, x->label);
            snprintf(label + ll, sizeof label - ll, "%s%s", sep, x->label);
        }
    }
    if (strlen(name) >= sizeof m->coef_name[k] || strlen(label) >= sizeof m->coef_label[k])
        return gmm_error(GMM_EINVAL, "formula: the coefficient name '%s' is too long (%zu bytes "
                                     "at most)",
                         name, sizeof m->coef_name[k] - 1);
    strcpy(m->coef_name[k], name);
    strcpy(m->coef_label[k], label);
    return GMM_OK;
}

gmm_status gmm_mdl_impl_design(gmm_mdl *m, const gmm_table *t, const gmm_formula *fm,
                               int intercept, size_t *pos)
{
    gmm_status s = GMM_OK;
    size_t nv = fm->nvar, n = t->nrow, at = SIZE_MAX;
    if (pos)
        *pos = SIZE_MAX;
    pos = pos ? pos : &at;
    /* log(y) ~ ...: the outcomes read by the caller, transformed */
    if (fm->response_expr &&
        (s = gmm_mdl_impl_expr_eval(fm->response_expr, t, fm->response_label, 1, m->y, pos)))
        return s;
    m->flev = gmm_calloc(nv ? nv : 1, sizeof *m->flev);
    unsigned char *code = gmm_malloc(fm->nfixed ? fm->nfixed * 64 : 1, 1);
    if (!m->flev || !code) {
        gmm_free(code);
        return gmm_error(GMM_ENOMEM, "out of memory for the design");
    }
    m->nflev = nv;
    for (size_t v = 0; v < nv && s == GMM_OK; v++)
        s = learn_var(m, t, fm, v, pos);
    term_codes(m, fm, intercept, code);
    size_t ncoef = intercept != 0;
    for (size_t j = 0; j < fm->nfixed && s == GMM_OK; j++) {
        size_t w = 1;
        for (size_t v = 0; v < nv; v++)
            if (fm->fixed[j].vars >> v & 1)
                w *= var_cols(m, fm, v, code[j * 64 + v]);
        ncoef += w;
    }
    ncoef += fm->noffset;
    m->ncoef = ncoef;
    m->noffset = fm->noffset;
    if (s == GMM_OK) {
        m->X = gmm_calloc((n ? n : 1) * (ncoef ? ncoef : 1), sizeof *m->X);
        m->coef_name = gmm_calloc(ncoef ? ncoef : 1, sizeof *m->coef_name);
        m->coef_label = gmm_calloc(ncoef ? ncoef : 1, sizeof *m->coef_label);
        if (!m->X || !m->coef_name || !m->coef_label)
            s = gmm_error(GMM_ENOMEM, "out of memory for the design (%zu rows x %zu "
                                      "coefficients)",
                          n, ncoef);
    }
    size_t k = 0;
    if (s == GMM_OK && intercept) {
        snprintf(m->coef_name[k], sizeof m->coef_name[0], "intercept");
        snprintf(m->coef_label[k++], sizeof m->coef_label[0], "(Intercept)");
    }
    for (size_t j = 0; j < fm->nfixed && s == GMM_OK; j++) {
        size_t w = 1;
        for (size_t v = 0; v < nv; v++)
            if (fm->fixed[j].vars >> v & 1)
                w *= var_cols(m, fm, v, code[j * 64 + v]);
        for (size_t c = 0; c < w && s == GMM_OK; c++)
            s = name_column(m, fm, j, code + j * 64, c, k++);
    }
    for (size_t o = 0; o < fm->noffset && s == GMM_OK; o++, k++) {
        snprintf(m->coef_label[k], sizeof m->coef_label[0], "%s", fm->offset[o].label);
        if (snprintf(m->coef_name[k], sizeof m->coef_name[0], "coef.%s", fm->offset[o].label) >=
            (int)sizeof m->coef_name[0])
            s = gmm_error(GMM_EINVAL, "formula: the term '%s' is too long",
                          fm->offset[o].label);
    }
    gmm_free(code);
    /* factor(g) beside g (a text column) or factor(g, ref = L): one name twice */
    for (size_t i = 0; s == GMM_OK && i < ncoef; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(m->coef_name[i], m->coef_name[j])) {
                s = gmm_error(GMM_EINVAL, "formula: the columns '%s' and '%s' would both be "
                                          "named '%s': write the variable one way",
                              m->coef_label[j], m->coef_label[i], m->coef_name[i]);
                break;
            }
    return s == GMM_OK ? fill_rows(m, t, fm, intercept, m->X, pos) : s;
}

const char *gmm_mdl_coef_label(const gmm_mdl *m, size_t k)
{
    return m->fm && m->coef_label && k < m->ncoef ? m->coef_label[k] : NULL;
}

size_t gmm_mdl_noffset(const gmm_mdl *m) { return m->noffset; }
