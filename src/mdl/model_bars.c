/* model_bars.c -- lme4's random-effect terms (formula_bars.c) given their
 * meaning with the data: the grouping column of an interaction a:b, and a
 * correlated term's effects (the stack's CORR component, stack.h) with
 * each row's coefficients.
 *
 * EFFECTS.  "(Intercept)" reads 1; a column NAME its number; factor(NAME),
 * or a NAME whose column holds text (as R reads it into a factor), one
 * effect per level (sorted as R's factor() sorts them: numerically when
 * every level is a number), named NAME<level> as R's model.matrix names
 * them, the first level dropped when the term has an intercept or an
 * earlier factor (treatment contrasts, R's rule), reading 1 on rows of that
 * level and 0 elsewhere. */
#include "model_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/stack.h"

gmm_status gmm_mdl_impl_group_columns(const gmm_formula *fm, gmm_table *t)
{
    for (size_t k = 0; fm && k < fm->nlatent; k++) {
        const gmm_formula_latent *l = &fm->latent[k];
        size_t c, col[8], out;
        if (l->ngroup < 2 || gmm_table_column(t, l->name, &c) == GMM_OK)
            continue;
        if (l->ngroup > 8)
            return gmm_error(GMM_EINVAL, "formula: too many factors in '%s'", l->name);
        for (size_t g = 0; g < l->ngroup; g++) {
            gmm_status s = gmm_table_column(t, l->group[g], &col[g]);
            if (s != GMM_OK)
                return s;
        }
        gmm_status s = gmm_table_join_column(t, l->name, col, l->ngroup, &out);
        if (s != GMM_OK)
            return s;
    }
    return GMM_OK;
}

void gmm_mdl_impl_formula_columns(const gmm_formula *fm, int factors,
                                  void (*fn)(const char *col, void *ctx), void *ctx)
{
    for (size_t k = 0; fm && k < fm->nlatent; k++) {
        const gmm_formula_latent *l = &fm->latent[k];
        if (factors && l->ngroup >= 2)
            for (size_t g = 0; g < l->ngroup; g++)
                fn(l->group[g], ctx);
        else
            fn(l->name, ctx);
    }
    for (size_t k = 0; fm && k < fm->ncolumn; k++)
        fn(fm->column[k], ctx);
    for (size_t k = 0; fm && k < fm->nlatent; k++) {
        const gmm_formula_latent *l = &fm->latent[k];
        for (size_t e = 0; e < l->neffect; e++)
            if (strcmp(l->effect[e], "(Intercept)"))
                fn(l->effect[e], ctx);
        const char *g = gmm_formula_arg_find(l, "group", NULL);
        const char *r = gmm_formula_arg_find(l, "replicate", NULL);
        if (g && *g)
            fn(g, ctx);
        if (r && *r)
            fn(r, ctx);
    }
}

static void count_one(const char *col, void *ctx)
{
    (void)col;
    (*(size_t *)ctx)++;
}

size_t gmm_mdl_impl_key_ncol(const gmm_formula *fm)
{
    size_t n = 0;
    gmm_mdl_impl_formula_columns(fm, 0, count_one, &n);
    return n;
}

typedef struct {
    const gmm_table *t;
    size_t *col, nc;
    gmm_status s;
} key_ctx;

static void key_one(const char *name, void *ctx)
{
    key_ctx *k = ctx;
    if (k->s == GMM_OK)
        k->s = gmm_table_column(k->t, name, &k->col[k->nc++]);
}

gmm_status gmm_mdl_impl_key_columns(const gmm_formula *fm, const gmm_table *t, size_t *col,
                                    size_t cap, size_t *nc)
{
    *nc = 0;
    if (gmm_mdl_impl_key_ncol(fm) > cap)
        return gmm_error(GMM_EINVAL, "more than %zu formula columns", cap);
    key_ctx k = {t, col, 0, GMM_OK};
    gmm_mdl_impl_formula_columns(fm, 0, key_one, &k);
    *nc = k.nc;
    return k.s;
}

void gmm_mdl_impl_corr_free(mdl_corr *c)
{
    if (!c)
        return;
    for (size_t a = 0; a < c->k; a++) {
        gmm_free(c->name[a]);
        gmm_free(c->level[a]);
    }
    memset(c, 0, sizeof *c);
}

/* One more effect named a b (b may be NULL) on column col (NULL: the
 * intercept), a factor's level lv (copied; NULL: a number).  0 when full
 * or out of memory. */
static int add_effect(mdl_corr *c, const char *a, const char *b, const char *col,
                      const char *lv)
{
    if (c->k == GMM_STACK_CORR_MAX)
        return 0;
    size_t len = strlen(a) + (b ? strlen(b) : 0) + 1;
    if (!(c->name[c->k] = gmm_malloc(len, 1)))
        return 0;
    snprintf(c->name[c->k], len, "%s%s", a, b ? b : "");
    c->col[c->k] = col;
    c->level[c->k] = lv ? gmm_strdup(lv) : NULL;
    if (lv && !c->level[c->k]) {
        gmm_free(c->name[c->k]);
        return 0;
    }
    c->k++;
    return 1;
}

static void levels_clear(gmm_mdl_levels *lv)
{
    gmm_free(lv->store);
    gmm_free(lv->s);
    gmm_free(lv->v);
    memset(lv, 0, sizeof *lv);
}

gmm_status gmm_mdl_impl_corr_effects(const mdl_build *b, const gmm_formula_latent *t,
                                     const gmm_table *data, mdl_corr *c)
{
    gmm_mdl_levels lv = {0};
    memset(c, 0, sizeof *c);
    int icpt = t->neffect && !strcmp(t->effect[0], "(Intercept)"), seen_factor = 0;
    for (size_t e = 0; e < t->neffect; e++) {
        size_t col;
        if (icpt && e == 0) {
            if (!add_effect(c, "(Intercept)", NULL, NULL, NULL))
                goto room;
            continue;
        }
        if (gmm_table_column(data, t->effect[e], &col) != GMM_OK)
            return gmm_mdl_impl_formula_error(b, t->effect_pos[e], "%s", gmm_error_message());
        if (!t->effect_factor[e] && !gmm_mdl_impl_text_column(data, col)) {
            if (!add_effect(c, t->effect[e], NULL, t->effect[e], NULL))
                goto room;
            continue;
        }
        levels_clear(&lv);
        gmm_status s = gmm_mdl_impl_factor_levels(data, col, &lv);
        if (s != GMM_OK) {
            levels_clear(&lv);
            gmm_mdl_impl_corr_free(c);
            return s;
        }
        /* treatment contrasts after an intercept or an earlier factor (R's
         * model.matrix: ~ 0 + x + f codes f by all its levels) */
        int drop = icpt || seen_factor;
        seen_factor = 1;
        for (size_t j = drop ? 1 : 0; j < lv.n; j++)
            if (!add_effect(c, t->effect[e], lv.s[j], t->effect[e], lv.s[j]))
                goto room;
    }
    levels_clear(&lv);
    return GMM_OK;
room:
    levels_clear(&lv);
    gmm_mdl_impl_corr_free(c);
    return gmm_mdl_impl_formula_error(b, t->model_pos,
                                      "formula: a random-effect term has at most %d correlated "
                                      "effects",
                                      GMM_STACK_CORR_MAX);
}

gmm_status gmm_mdl_impl_corr_rows(const mdl_corr *c, const gmm_table *t, double *z)
{
    size_t n = t->nrow, k = c->k;
    double *x = gmm_malloc(n ? n : 1, sizeof *x);
    gmm_status s = x ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t a = 0; a < k && s == GMM_OK; a++) {
        size_t col = 0;
        if (c->col[a] && (s = gmm_table_column(t, c->col[a], &col)) != GMM_OK)
            break;
        if (c->col[a] && !c->level[a] && (s = gmm_table_column_double(t, col, 0, x)) != GMM_OK)
            break;
        for (size_t r = 0; r < n; r++)
            z[r * k + a] = !c->col[a]   ? 1.0
                           : c->level[a] ? (double)!strcmp(t->cell[r][col], c->level[a])
                                         : x[r];
    }
    gmm_free(x);
    return s;
}

/* The index of parameter `name` of the objective (nparam: none). */
static size_t param_at(const gmm_objective *o, const char *name)
{
    size_t i = 0;
    while (i < o->nparam && strcmp(o->name[i], name))
        i++;
    return i;
}

void gmm_mdl_varcorr_free(gmm_mdl_varcorr *v)
{
    if (!v)
        return;
    gmm_free(v->row);
    gmm_free(v->corr);
    memset(v, 0, sizeof *v);
}

gmm_status gmm_mdl_varcorr_get(const gmm_mdl *m, gmm_mdl_varcorr *out)
{
    memset(out, 0, sizeof *out);
    const gmm_formula *fm = m->fm;
    const gmm_objective *o = m->obj;
    size_t nrow = 1, ncorr = 1, nbar = 0;
    for (size_t k = 0; fm && k < fm->nlatent; k++)
        if (fm->latent[k].bar) {
            size_t e = m->scorr && m->scorr[k].k ? m->scorr[k].k : 1;
            nrow += e;
            ncorr += e * e;
            nbar++;
        }
    if (!nbar || !o)
        return GMM_OK;
    out->row = gmm_calloc(nrow, sizeof *out->row);
    out->corr = gmm_calloc(ncorr, sizeof *out->corr);
    if (!out->row || !out->corr) {
        gmm_mdl_varcorr_free(out);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    double *cr = out->corr, S[GMM_STACK_CORR_MAX * GMM_STACK_CORR_MAX];
    char name[160];
    for (size_t k = 0; k < fm->nlatent; k++) {
        const gmm_formula_latent *t = &fm->latent[k];
        const mdl_corr *c = m->scorr ? &m->scorr[k] : NULL;
        if (!t->bar)
            continue;
        if (!c || !c->k) { /* an intercept alone: f.LABEL.variance */
            snprintf(name, sizeof name, "f.%s.variance", t->label);
            size_t i = param_at(o, name);
            out->row[out->n++] = (gmm_model_varcorr){
                t->label, "(Intercept)", i < o->nparam ? sqrt(o->value[i]) : NAN, 0, NULL};
            continue;
        }
        snprintf(name, sizeof name, "f.%s.variance.%s", t->label, c->name[0]);
        size_t i = param_at(o, name);
        gmm_status s;
        if (i == o->nparam || !m->stack ||
            (s = gmm_latent_stack_sigma(m->lat, k, o->value + i, S)) != GMM_OK) {
            gmm_mdl_varcorr_free(out);
            return i == o->nparam || !m->stack
                       ? gmm_error(GMM_EINVAL, "varcorr: no parameter '%s'", name)
                       : s;
        }
        for (size_t a = 0; a < c->k; a++) {
            double sa = sqrt(S[a * c->k + a]);
            for (size_t b = 0; b < a; b++)
                cr[b] = S[a * c->k + b] / (sa * sqrt(S[b * c->k + b]));
            out->row[out->n++] = (gmm_model_varcorr){t->label, c->name[a], sa, a, cr};
            cr += a;
        }
    }
    size_t i = param_at(o, "likelihood.variance");
    if (m->lik.type->conjugate && i < o->nparam)
        out->row[out->n++] = (gmm_model_varcorr){"Residual", "", sqrt(o->value[i]), 0, NULL};
    return GMM_OK;
}
