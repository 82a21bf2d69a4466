/* formula_fixed.c -- the fixed part of R's formula language (formula.h):
 * variables (NAME, factor(), poly(), I(), log(), exp(), sqrt(); the
 * arithmetic is formula_expr.c's), their interactions (':' and '*'), the
 * removal of terms ('- term') and offset(), with R's labels.
 *
 * TERMS AS R KEEPS THEM.  A term is the set of its variables (a bit per
 * variable, numbered in order of first appearance, as terms.formula does);
 * a:b and b:a are one term.  a*b expands to a + b + a:b: the terms of the
 * left, those of the right, then each left one joined with each right one,
 * a term already there left out.  At the end the terms are ordered by
 * their number of variables, stably (main effects, then two-way
 * interactions, ...).  A term written twice (x + x) is an error, as is the
 * removal of a term the model does not have; a repetition that '*' makes
 * (a + a*b) is R's and silent. */
#include "formula_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"

#define skip gmm_formula_impl_skip
#define fail gmm_formula_impl_fail
#define nomem gmm_formula_impl_nomem
#define node gmm_formula_impl_expr_node
#define expr_free gmm_formula_impl_expr_free
#define sum gmm_formula_impl_expr_sum
#define atom gmm_formula_impl_expr_atom
#define expr_label gmm_formula_impl_expr_label

typedef unsigned long long bits;

static int at_char(const parser *p, char c) { return p->at < p->len && p->s[p->at] == c; }

/* ---- variables ---------------------------------------------------------------- */

/* v's index in p->f->var (adding it when new; takes v's allocations) */
static gmm_status add_var(parser *p, gmm_formula_var *v, size_t *index)
{
    gmm_formula *f = p->f;
    for (size_t k = 0; k < f->nvar; k++)
        if (!strcmp(f->var[k].label, v->label)) {
            gmm_free(v->label);
            gmm_free(v->name);
            gmm_free(v->ref);
            expr_free(v->e);
            *index = k;
            return GMM_OK;
        }
    gmm_status st = GMM_OK;
    gmm_formula_var *nv = NULL;
    if (f->nvar == 64)
        st = fail(p, v->pos, "more than 64 variables in the fixed terms");
    else if (!(nv = gmm_realloc(f->var, f->nvar + 1, sizeof *nv)))
        st = nomem();
    if (st) {
        gmm_free(v->label);
        gmm_free(v->name);
        gmm_free(v->ref);
        expr_free(v->e);
        return st;
    }
    f->var = nv;
    *index = f->nvar;
    f->var[f->nvar++] = *v;
    return GMM_OK;
}

/* factor(NAME [, ref = LEVEL]): the rest after '(' */
static gmm_status factor_var(parser *p, gmm_formula_var *v)
{
    gmm_status st;
    v->kind = GMM_FV_FACTOR;
    if ((st = gmm_formula_impl_name(p, "a column name", &v->name, &v->pos)))
        return st;
    skip(p);
    if (at_char(p, ',')) {
        p->at++;
        char *key = NULL;
        size_t kpos;
        if ((st = gmm_formula_impl_name(p, "ref = LEVEL", &key, &kpos)))
            return st;
        int ok = !strcmp(key, "ref");
        gmm_free(key);
        if (!ok)
            return fail(p, kpos, "factor() takes one key: ref = LEVEL (the reference level)");
        if ((st = gmm_formula_impl_expect(p, '=')))
            return st;
        skip(p);
        size_t b = p->at, e;
        v->ref_pos = b;
        if (at_char(p, '"') || at_char(p, '\'')) {
            char q = p->s[p->at++];
            for (e = ++b; e < p->len && p->s[e] != q; e++)
                ;
            if (e >= p->len)
                return fail(p, b - 1, "unterminated quote");
            v->ref_pos = b;
            p->at = e + 1;
        } else {
            for (e = b; e < p->len && (gmm_formula_impl_name_char((unsigned char)p->s[e]) ||
                                       p->s[e] == '-' || p->s[e] == '+');
                 e++)
                ;
            if (e == b)
                return fail(p, b, "expected a level after 'ref ='");
            p->at = e;
        }
        if (!(v->ref = gmm_malloc(e - b + 1, 1)))
            return nomem();
        memcpy(v->ref, p->s + b, e - b);
        v->ref[e - b] = '\0';
    }
    if ((st = gmm_formula_impl_expect(p, ')')))
        return st;
    char buf[512];
    if (v->ref)
        snprintf(buf, sizeof buf, "factor(%s, ref = \"%s\")", v->name, v->ref);
    else
        snprintf(buf, sizeof buf, "factor(%s)", v->name);
    return (v->label = gmm_strdup(buf)) ? GMM_OK : nomem();
}

/* poly(EXPR, DEGREE): the rest after '(' */
static gmm_status poly_var(parser *p, gmm_formula_var *v)
{
    gmm_status st;
    v->kind = GMM_FV_POLY;
    if ((st = sum(p, &v->e)) || (st = gmm_formula_impl_expect(p, ',')))
        return st;
    skip(p);
    size_t b = p->at;
    char *end;
    long k = strtol(p->s + b, &end, 10);
    if (end == p->s + b || k < 1 || k > 20 || !isdigit((unsigned char)p->s[b]))
        return fail(p, b, "poly(x, DEGREE) needs a whole DEGREE from 1 to 20");
    p->at = (size_t)(end - p->s);
    if ((st = gmm_formula_impl_expect(p, ')')))
        return st;
    v->degree = (int)k;
    char post[32];
    snprintf(post, sizeof post, ", %d)", v->degree);
    return (v->label = expr_label("poly(", v->e, post)) ? GMM_OK : nomem();
}

/* One variable at the cursor: its index into *index. */
static gmm_status variable(parser *p, size_t *index, size_t *pos)
{
    skip(p);
    gmm_formula_var v = {0};
    v.pos = p->at;
    size_t at0 = p->at;
    char *nm = NULL;
    gmm_status st = gmm_formula_impl_name(
        p, "a term: 1, 0, NAME, factor(NAME), a function of columns or f(NAME, MODEL, ...)", &nm,
        &v.pos);
    if (st)
        return st;
    skip(p);
    if (!at_char(p, '(')) {
        if (!strcmp(nm, ".")) {
            gmm_free(nm);
            return fail(p, v.pos, "'.' (every other column) is not supported: name the columns");
        }
        v.kind = GMM_FV_NUMERIC;
        v.name = nm;
        if (!(v.label = gmm_strdup(nm)) || !(v.e = node(GMM_FX_COL, v.pos, NULL, NULL))) {
            gmm_free(nm);
            gmm_free(v.label);
            return nomem();
        }
        if (!(v.e->name = gmm_strdup(nm)))
            st = nomem();
    } else if (!strcmp(nm, "factor") || !strcmp(nm, "poly")) {
        p->at++;
        /* factor(NAME)'s offset: its column's, as messages about the column want */
        st = !strcmp(nm, "factor") ? factor_var(p, &v) : poly_var(p, &v);
        if (v.kind == GMM_FV_POLY)
            v.pos = at0;
        gmm_free(nm);
    } else {
        /* I(), log(), ...: an expression from the function's name */
        gmm_free(nm);
        p->at = at0;
        v.kind = GMM_FV_NUMERIC;
        if (!(st = atom(p, &v.e)) && !(v.label = expr_label("", v.e, "")))
            st = nomem();
    }
    if (st) {
        gmm_free(v.label);
        gmm_free(v.name);
        gmm_free(v.ref);
        expr_free(v.e);
        return st;
    }
    *pos = v.pos;
    return add_var(p, &v, index);
}

/* ---- terms ------------------------------------------------------------------------- */

typedef struct {
    bits *t;
    size_t n;
    size_t pos; /* offset of the cross's first character */
} term_list;

static int list_has(const term_list *l, bits b)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->t[k] == b)
            return 1;
    return 0;
}

static gmm_status list_add(term_list *l, bits b)
{
    if (list_has(l, b))
        return GMM_OK;
    bits *t = gmm_realloc(l->t, l->n + 1, sizeof *t);
    if (!t)
        return nomem();
    l->t = t;
    l->t[l->n++] = b;
    return GMM_OK;
}

/* var (':' var)* */
static gmm_status interaction(parser *p, bits *out, size_t *pos)
{
    *out = 0;
    for (;;) {
        size_t v = 0, at = 0;
        gmm_status st = variable(p, &v, &at);
        if (!*out)
            *pos = at;
        if (st)
            return st;
        *out |= 1ULL << v;
        skip(p);
        if (!at_char(p, ':'))
            return GMM_OK;
        p->at++;
    }
}

/* inter ('*' inter)*: the terms into l, each once, in R's order */
static gmm_status cross(parser *p, term_list *l)
{
    bits b;
    size_t at = 0;
    gmm_status st = interaction(p, &b, &l->pos);
    if (st || (st = list_add(l, b)))
        return st;
    for (;;) {
        skip(p);
        if (!at_char(p, '*'))
            return GMM_OK;
        p->at++;
        if ((st = interaction(p, &b, &at)))
            return st;
        size_t n = l->n;
        if ((st = list_add(l, b)))
            return st;
        for (size_t k = 0; k < n; k++)
            if ((st = list_add(l, l->t[k] | b)))
                return st;
    }
}

static gmm_status add_offset(parser *p, size_t pos)
{
    gmm_formula *f = p->f;
    gmm_formula_expr *e = NULL;
    gmm_status st;
    if ((st = gmm_formula_impl_expect(p, '(')) || (st = sum(p, &e)) ||
        (st = gmm_formula_impl_expect(p, ')'))) {
        expr_free(e);
        return st;
    }
    gmm_formula_offset *o = gmm_realloc(f->offset, f->noffset + 1, sizeof *o);
    char *label = expr_label("offset(", e, ")");
    if (!o || !label) {
        if (o)
            f->offset = o;
        expr_free(e);
        gmm_free(label);
        return nomem();
    }
    f->offset = o;
    f->offset[f->noffset++] = (gmm_formula_offset){label, e, pos};
    return GMM_OK;
}

static size_t popcount(bits b)
{
    size_t n = 0;
    for (; b; b &= b - 1)
        n++;
    return n;
}

gmm_status gmm_formula_impl_fixed_term(parser *p, int minus)
{
    gmm_formula *f = p->f;
    skip(p);
    size_t pos = p->at;
    if (p->at < p->len && isdigit((unsigned char)p->s[p->at])) {
        size_t b = p->at;
        while (p->at < p->len && isalnum((unsigned char)p->s[p->at]))
            p->at++;
        size_t n = p->at - b;
        if (n == 1 && p->s[b] == '1') {
            f->intercept = !minus;
            return GMM_OK;
        }
        if (n == 1 && p->s[b] == '0' && !minus) {
            f->intercept = 0;
            return GMM_OK;
        }
        return fail(p, b, minus ? "only '1' or a term may follow '-'"
                                : "a number term must be 1 (intercept) or 0 (none)");
    }
    size_t save = p->at;
    char *nm = NULL;
    size_t npos;
    if (!minus && !gmm_formula_impl_name(p, "", &nm, &npos)) {
        skip(p);
        int off = !strcmp(nm, "offset") && at_char(p, '(');
        gmm_free(nm);
        if (off)
            return add_offset(p, pos);
    }
    p->at = save;
    term_list l = {NULL, 0, pos};
    gmm_status st = cross(p, &l);
    /* a term of one variable is where that variable is (factor(x): x) */
    if (!st && l.n == 1 && popcount(l.t[0]) == 1)
        pos = l.pos;
    for (size_t k = 0; !st && k < l.n; k++) {
        size_t j;
        for (j = 0; j < f->nfixed && f->fixed[j].vars != l.t[k]; j++)
            ;
        if (minus) {
            if (j == f->nfixed) {
                st = fail(p, pos, "'-' removes a term the model does not have");
                break;
            }
            memmove(f->fixed + j, f->fixed + j + 1, (f->nfixed - j - 1) * sizeof *f->fixed);
            f->nfixed--;
            continue;
        }
        if (j < f->nfixed) {
            if (l.n == 1 && !f->fixed[j].crossed)
                st = fail(p, pos, "a term appears twice");
            continue;
        }
        gmm_formula_fixed *x = gmm_realloc(f->fixed, f->nfixed + 1, sizeof *x);
        if (!x) {
            st = nomem();
            break;
        }
        f->fixed = x;
        f->fixed[f->nfixed++] = (gmm_formula_fixed){NULL, 0, pos, l.t[k], popcount(l.t[k]),
                                                   l.n > 1};
    }
    gmm_free(l.t);
    return st;
}

/* the columns e reads into f->column, each once */
static gmm_status add_columns(gmm_formula *f, const gmm_formula_expr *e)
{
    if (!e)
        return GMM_OK;
    if (e->op == GMM_FX_COL) {
        for (size_t k = 0; k < f->ncolumn; k++)
            if (!strcmp(f->column[k], e->name))
                return GMM_OK;
        char **c = gmm_realloc(f->column, f->ncolumn + 1, sizeof *c);
        if (!c)
            return nomem();
        f->column = c;
        return (c[f->ncolumn] = gmm_strdup(e->name)) ? (f->ncolumn++, GMM_OK) : nomem();
    }
    gmm_status st = add_columns(f, e->a);
    return st ? st : add_columns(f, e->b);
}

gmm_status gmm_formula_impl_fixed_finish(parser *p)
{
    gmm_formula *f = p->f;
    gmm_status st = GMM_OK;
    for (size_t v = 0; v < f->nvar && !st; v++) {
        gmm_formula_expr col = {GMM_FX_COL, 0.0, f->var[v].name, 0, NULL, NULL};
        st = add_columns(f, f->var[v].kind == GMM_FV_FACTOR ? &col : f->var[v].e);
    }
    for (size_t k = 0; k < f->noffset && !st; k++)
        st = add_columns(f, f->offset[k].e);
    if (st)
        return st;
    /* stable by the number of variables */
    for (size_t i = 1; i < f->nfixed; i++) {
        gmm_formula_fixed x = f->fixed[i];
        size_t j = i;
        for (; j > 0 && f->fixed[j - 1].order > x.order; j--)
            f->fixed[j] = f->fixed[j - 1];
        f->fixed[j] = x;
    }
    for (size_t k = 0; k < f->nfixed; k++) {
        gmm_formula_fixed *t = &f->fixed[k];
        char buf[512] = "";
        for (size_t v = 0, at = 0; v < f->nvar; v++)
            if (t->vars >> v & 1 && at < sizeof buf)
                at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", at ? ":" : "",
                                       f->var[v].label);
        if (t->order == 1) {
            const gmm_formula_var *v = &f->var[popcount((t->vars & -t->vars) - 1)];
            if (v->name && !v->ref) {
                t->factor = v->kind == GMM_FV_FACTOR;
                snprintf(buf, sizeof buf, "%s", v->name);
            }
        }
        if (!(t->name = gmm_strdup(buf)))
            return nomem();
    }
    return GMM_OK;
}

void gmm_formula_impl_fixed_free(gmm_formula *f)
{
    for (size_t k = 0; k < f->nfixed; k++)
        gmm_free(f->fixed[k].name);
    gmm_free(f->fixed);
    for (size_t k = 0; k < f->nvar; k++) {
        gmm_free(f->var[k].label);
        gmm_free(f->var[k].name);
        gmm_free(f->var[k].ref);
        expr_free(f->var[k].e);
    }
    gmm_free(f->var);
    for (size_t k = 0; k < f->noffset; k++) {
        gmm_free(f->offset[k].label);
        expr_free(f->offset[k].e);
    }
    gmm_free(f->offset);
    for (size_t k = 0; k < f->ncolumn; k++)
        gmm_free(f->column[k]);
    gmm_free(f->column);
    expr_free(f->response_expr);
    gmm_free(f->response_label);
}
