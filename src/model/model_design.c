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
 * number), each once: *lv (allocated; its strings point into *store). */
static gmm_status factor_levels(const gmm_table *t, size_t c, level **lv, size_t *nlv,
                                char **store, int *isnum)
{
    size_t n = t->nrow, total = 0;
    for (size_t r = 0; r < n; r++)
        total += strlen(t->cell[r][c]) + 1;
    *store = gmm_malloc(total ? total : 1, 1);
    *lv = gmm_malloc(n ? n : 1, sizeof **lv);
    if (!*store || !*lv)
        return gmm_error(GMM_ENOMEM, "out of memory for the levels of '%s'", t->header[c]);
    char *p = *store;
    int numeric = 1;
    for (size_t r = 0; r < n; r++) {
        trim(t->cell[r][c], p, strlen(t->cell[r][c]) + 1);
        if (!*p)
            return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': empty factor level",
                                t->file, t->line[r], t->header[c]);
        (*lv)[r].s = p;
        numeric = numeric && is_number(p, &(*lv)[r].v);
        p += strlen(p) + 1;
    }
    *isnum = numeric;
    qsort(*lv, n, sizeof **lv, numeric ? numeric_cmp : text_cmp);
    size_t k = 0;
    for (size_t r = 0; r < n; r++)
        if (k == 0 || strcmp((*lv)[k - 1].s, (*lv)[r].s))
            (*lv)[k++] = (*lv)[r];
    *nlv = k;
    return GMM_OK;
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

gmm_status gmm_mdl_impl_design(gmm_mdl *m, const gmm_table *t, const gmm_formula *fm,
                               int intercept)
{
    gmm_status s = GMM_OK;
    size_t nf = fm->nfixed, n = t->nrow;
    size_t *col = gmm_calloc(nf ? nf : 1, sizeof *col);
    level **lv = gmm_calloc(nf ? nf : 1, sizeof *lv);
    size_t *nlv = gmm_calloc(nf ? nf : 1, sizeof *nlv);
    int *isnum = gmm_calloc(nf ? nf : 1, sizeof *isnum);
    char **store = gmm_calloc(nf ? nf : 1, sizeof *store);
    double *num = gmm_malloc(n ? n : 1, sizeof *num);
    if (!col || !lv || !nlv || !isnum || !store || !num) {
        s = gmm_error(GMM_ENOMEM, "out of memory for the design");
        goto done;
    }
    size_t ncoef = intercept != 0;
    for (size_t j = 0; j < nf; j++) {
        if ((s = gmm_table_column(t, fm->fixed[j].name, &col[j])) != GMM_OK)
            goto done;
        if (fm->fixed[j].factor) {
            if ((s = factor_levels(t, col[j], &lv[j], &nlv[j], &store[j], &isnum[j])) != GMM_OK)
                goto done;
            if (nlv[j] < 2) {
                s = gmm_error(GMM_EINVAL, "%s: factor(%s) has one level ('%s'): nothing to "
                                          "estimate",
                              t->file, fm->fixed[j].name, nlv[j] ? lv[j][0].s : "");
                goto done;
            }
            ncoef += nlv[j] - 1;
        } else {
            ncoef++;
        }
    }
    m->ncoef = ncoef;
    m->X = gmm_calloc((n ? n : 1) * (ncoef ? ncoef : 1), sizeof *m->X);
    m->coef_name = gmm_calloc(ncoef ? ncoef : 1, sizeof *m->coef_name);
    if (!m->X || !m->coef_name) {
        s = gmm_error(GMM_ENOMEM, "out of memory for the design (%zu rows x %zu coefficients)", n,
                      ncoef);
        goto done;
    }
    size_t k = 0;
    if (intercept) {
        snprintf(m->coef_name[k], sizeof m->coef_name[k], "intercept");
        for (size_t r = 0; r < n; r++)
            m->X[r * ncoef] = 1.0;
        k++;
    }
    for (size_t j = 0; j < nf; j++) {
        const char *name = fm->fixed[j].name;
        if (!fm->fixed[j].factor) {
            /* a covariate is needed on every row: predictions at rows with a
             * missing outcome use it too */
            if ((s = gmm_table_column_double(t, col[j], 0, num)) != GMM_OK ||
                (s = add_name(m, k, name, "")) != GMM_OK)
                goto done;
            for (size_t r = 0; r < n; r++)
                m->X[r * ncoef + k] = num[r];
            k++;
            continue;
        }
        char buf[256];
        for (size_t l = 1; l < nlv[j]; l++) {
            char lab[200];
            snprintf(lab, sizeof lab, "[%s]", lv[j][l].s);
            if ((s = add_name(m, k + l - 1, name, lab)) != GMM_OK)
                goto done;
        }
        for (size_t r = 0; r < n; r++) {
            const char *c = trim(t->cell[r][col[j]], buf, sizeof buf);
            /* the level's index by bisection in the sorted levels */
            size_t lo = 0, hi = nlv[j];
            level key = {c, 0.0};
            int numeric = isnum[j] && is_number(c, &key.v);
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int d = numeric ? numeric_cmp(&lv[j][mid], &key) : text_cmp(&lv[j][mid], &key);
                if (d < 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo > 0)
                m->X[r * ncoef + k + lo - 1] = 1.0;
        }
        k += nlv[j] - 1;
    }
done:
    for (size_t j = 0; lv && store && j < nf; j++) {
        gmm_free(lv[j]);
        gmm_free(store[j]);
    }
    gmm_free(col);
    gmm_free(lv);
    gmm_free(nlv);
    gmm_free(isnum);
    gmm_free(store);
    gmm_free(num);
    return s;
}
