/* formula_bars.c -- lme4's random-effect terms in a formula (formula.h):
 * '(' EFFECTS '|' GROUP ')' and what it stands for, as lme4 reads it.
 *
 *   (1 | g)           one N(0, variance) intercept per level of g: f(g, iid)
 *   (x | g)           (1 + x | g): intercept and slope per level, correlated
 *   (1 + x + z | g)   three correlated effects per level
 *   (0 + x | g)       the slope alone ((x - 1 | g) the same)
 *   (x || g)          independent effects: (1 | g) + (0 + x | g)
 *   (1 | a:b)         grouped by the interaction: a level per observed (a, b)
 *   (1 | a/b)         nested: (1 | a) + (1 | b:a) (a/b/c: + (1 | c:b:a)),
 *                     the inner grouping named innermost first as lme4 does
 *   (0 + factor(f) | g)  one effect per level of f, correlated
 *
 * An intercept alone is model "iid" (the same model, names and output as
 * f(g, iid)); anything else is model "corr" (the stack's CORR component)
 * with its effects.  lme4 names a repeated grouping g, g.1, g.2 ... in
 * VarCorr: the terms' labels, in the order written. */
#include "formula_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

typedef struct {
    const char *s;
    size_t at, len;
} lex;

typedef struct {
    char *name;
    int factor;
    size_t pos;
} effect;

static void skip(lex *p)
{
    while (p->at < p->len && isspace((unsigned char)p->s[p->at]))
        p->at++;
}

static int name_start(int c) { return isalpha(c) || c == '_' || c == '.'; }
static int name_char(int c) { return isalnum(c) || c == '_' || c == '.'; }

static gmm_status fail(size_t pos, const char *what)
{
    return gmm_error_at(GMM_EPARSE, pos, "formula: %s", what);
}

static gmm_status nomem(void) { return gmm_error(GMM_ENOMEM, "formula: out of memory"); }

static char *copy(const char *s, size_t n)
{
    char *c = gmm_malloc(n + 1, 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = '\0';
    }
    return c;
}

/* The span of a NAME at the cursor (0 when none), moved past. */
static size_t name(lex *p)
{
    skip(p);
    size_t b = p->at;
    if (b >= p->len || !name_start((unsigned char)p->s[b]))
        return 0;
    while (p->at < p->len && name_char((unsigned char)p->s[p->at]))
        p->at++;
    return p->at - b;
}

/* The ')' that closes the '(' at open, and whether a '|' sits at its level. */
static size_t closing(const char *s, size_t len, size_t open, int *bar)
{
    int depth = 0;
    *bar = 0;
    for (size_t i = open; i < len; i++) {
        if (s[i] == '(')
            depth++;
        else if (s[i] == ')' && --depth == 0)
            return i;
        else if (s[i] == '|' && depth == 1)
            *bar = 1;
    }
    return len;
}

/* EFFECTS up to the bar: the slopes into ef (at most cap), *intercept. */
static gmm_status effects(lex *p, effect *ef, size_t cap, size_t *nef, int *intercept)
{
    int minus = 0;
    *intercept = 1;
    *nef = 0;
    skip(p);
    if (p->at < p->len && p->s[p->at] == '-') { /* (-1 + x | g) */
        minus = 1;
        p->at++;
    }
    for (;;) {
        skip(p);
        size_t b = p->at;
        if (b < p->len && (p->s[b] == '0' || p->s[b] == '1') &&
            (b + 1 >= p->len || !isalnum((unsigned char)p->s[b + 1]))) {
            if (p->s[b] == '0' && minus)
                return fail(b, "only '1' may follow '-' (no intercept)");
            *intercept = p->s[b] == '1' && !minus;
            p->at++;
        } else {
            if (minus)
                return fail(b, "only '1' may follow '-' (no intercept)");
            size_t n = name(p);
            if (!n)
                return fail(b, "expected an effect: 1, 0, NAME or factor(NAME)");
            int factor = 0;
            skip(p);
            if (n == 6 && !strncmp(p->s + b, "factor", 6) && p->at < p->len &&
                p->s[p->at] == '(') {
                p->at++;
                skip(p);
                b = p->at;
                if (!(n = name(p)))
                    return fail(p->at, "expected a column name");
                skip(p);
                if (p->at >= p->len || p->s[p->at] != ')')
                    return fail(p->at, "expected ')'");
                p->at++;
                factor = 1;
            } else if (p->at < p->len && p->s[p->at] == '(') {
                return fail(b, "unknown function (random effects are 1, 0, NAME or "
                               "factor(NAME))");
            }
            for (size_t k = 0; k < *nef; k++)
                if (strlen(ef[k].name) == n && !strncmp(ef[k].name, p->s + b, n))
                    return fail(b, "an effect appears twice");
            if (*nef == cap)
                return fail(b, "too many effects in one random-effect term");
            if (!(ef[*nef].name = copy(p->s + b, n)))
                return nomem();
            ef[*nef].factor = factor;
            ef[(*nef)++].pos = b;
        }
        skip(p);
        if (p->at < p->len && (p->s[p->at] == '+' || p->s[p->at] == '-')) {
            minus = p->s[p->at++] == '-';
            continue;
        }
        if (p->at < p->len && p->s[p->at] == '|')
            return GMM_OK;
        return fail(p->at, "expected '+', '-' or '|' in a random-effect term");
    }
}

/* One term: grouping g[0 .. ng-1] (pos: its first name), the intercept
 * and/or the slopes ef. */
static gmm_status emit(gmm_formula *f, const lex *p, const size_t *gb, const size_t *gl,
                       size_t ng, int intercept, const effect *ef, size_t nef, size_t open)
{
    gmm_formula_latent *t = gmm_realloc(f->latent, f->nlatent + 1, sizeof *t);
    if (!t)
        return nomem();
    f->latent = t;
    t += f->nlatent++;
    memset(t, 0, sizeof *t);
    t->bar = 1;
    t->pos = gb[0];
    t->model_pos = open;
    size_t len = 0;
    for (size_t k = 0; k < ng; k++)
        len += gl[k] + 1;
    t->group = gmm_calloc(ng, sizeof *t->group);
    t->name = gmm_malloc(len, 1);
    t->neffect = (size_t)intercept + nef;
    t->effect = gmm_calloc(t->neffect, sizeof *t->effect);
    t->effect_factor = gmm_calloc(t->neffect, sizeof *t->effect_factor);
    t->effect_pos = gmm_calloc(t->neffect, sizeof *t->effect_pos);
    int only = intercept && !nef;
    t->model = copy(only ? "iid" : "corr", only ? 3 : 4);
    if (!t->group || !t->name || !t->effect || !t->effect_factor || !t->effect_pos || !t->model)
        return nomem();
    t->ngroup = ng;
    size_t at = 0;
    for (size_t k = 0; k < ng; k++) {
        if (!(t->group[k] = copy(p->s + gb[k], gl[k])))
            return nomem();
        memcpy(t->name + at, p->s + gb[k], gl[k]);
        at += gl[k];
        t->name[at++] = k + 1 < ng ? ':' : '\0';
    }
    size_t e = 0;
    if (intercept) {
        t->effect_pos[e] = open;
        if (!(t->effect[e++] = copy("(Intercept)", 11)))
            return nomem();
    }
    for (size_t k = 0; k < nef; k++, e++) {
        t->effect_factor[e] = ef[k].factor;
        t->effect_pos[e] = ef[k].pos;
        if (!(t->effect[e] = copy(ef[k].name, strlen(ef[k].name))))
            return nomem();
    }
    /* lme4's label: the grouping, numbered when it repeats */
    size_t seen = 0;
    for (size_t k = 0; k + 1 < f->nlatent; k++)
        seen += !strcmp(f->latent[k].name, t->name);
    char num[24] = "";
    if (seen)
        snprintf(num, sizeof num, ".%zu", seen);
    if (!(t->label = gmm_malloc(strlen(t->name) + strlen(num) + 1, 1)))
        return nomem();
    sprintf(t->label, "%s%s", t->name, num);
    return GMM_OK;
}

#define MAXEFF 16
#define MAXGRP 8

gmm_status gmm_formula_impl_bars(const char *text, size_t len, size_t *at, gmm_formula *f,
                                 int *matched)
{
    size_t open = *at;
    int bar;
    size_t close = closing(text, len, open, &bar);
    *matched = bar;
    if (!bar)
        return GMM_OK;
    if (close >= len)
        return fail(open, "unbalanced '('");
    lex p = {text, open + 1, close};
    effect ef[MAXEFF];
    size_t nef = 0, gb[MAXGRP], gl[MAXGRP], ng = 0, nest[MAXGRP], nnest = 0;
    int intercept;
    gmm_status st = effects(&p, ef, MAXEFF, &nef, &intercept);
    if (st)
        goto done;
    if (!intercept && !nef) {
        st = fail(open, "a random-effect term needs an effect (1, or a column)");
        goto done;
    }
    p.at++; /* the '|' */
    int indep = p.at < p.len && text[p.at] == '|';
    p.at += indep;
    /* GROUP: NAME (':' NAME)* ('/' NAME (':' NAME)*)*; nest[j] the names
     * in the first j + 1 groups of the nesting */
    for (;;) {
        skip(&p);
        size_t b = p.at, n = name(&p);
        if (!n) {
            st = fail(b, "expected the grouping column after '|'");
            goto done;
        }
        if (ng == MAXGRP) {
            st = fail(b, "too many factors in one grouping");
            goto done;
        }
        gb[ng] = b;
        gl[ng++] = n;
        skip(&p);
        if (p.at < p.len && text[p.at] == ':') {
            p.at++;
            continue;
        }
        nest[nnest++] = ng;
        if (p.at < p.len && text[p.at] == '/') {
            p.at++;
            continue;
        }
        if (p.at < p.len) {
            st = fail(p.at, "expected ')' after the grouping");
            goto done;
        }
        break;
    }
    for (size_t j = 0; j < nnest && !st; j++) {
        /* lme4 names a/b's inner grouping b:a: the segments innermost
         * first, each as written */
        size_t ob[MAXGRP], ol[MAXGRP], no = 0;
        for (size_t q = j + 1; q-- > 0;)
            for (size_t i = q ? nest[q - 1] : 0; i < nest[q]; i++, no++) {
                ob[no] = gb[i];
                ol[no] = gl[i];
            }
        if (!indep) {
            st = emit(f, &p, ob, ol, no, intercept, ef, nef, open);
            continue;
        }
        if (intercept)
            st = emit(f, &p, ob, ol, no, 1, NULL, 0, open);
        for (size_t k = 0; k < nef && !st; k++)
            st = emit(f, &p, ob, ol, no, 0, &ef[k], 1, open);
    }
    *at = close + 1;
done:
    for (size_t k = 0; k < nef; k++)
        gmm_free(ef[k].name);
    return st;
}

void gmm_formula_impl_bars_free(gmm_formula_latent *t)
{
    if (!t)
        return;
    for (size_t k = 0; t->effect && k < t->neffect; k++)
        gmm_free(t->effect[k]);
    for (size_t k = 0; t->group && k < t->ngroup; k++)
        gmm_free(t->group[k]);
    gmm_free(t->effect);
    gmm_free(t->effect_factor);
    gmm_free(t->effect_pos);
    gmm_free(t->group);
    gmm_free(t->label);
}
