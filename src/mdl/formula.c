/* formula.c -- the 'RESPONSE ~ TERMS' parser (formula.h): a recursive
 * descent over the text that keeps every token's offset for messages.
 *
 * TERMS.  f(NAME, MODEL, ...) is a latent component indexed by column
 * NAME; the fixed terms (covariates, factors, their interactions and
 * functions, offset()) are formula_fixed.c's.  '1' asks for the intercept
 * (present by default), '0' and '-1' drop it.  A KEY without '=' VALUE is
 * a flag (f(w, rw2, cyclic)), its value "".  The word 'fixed' after a value (f(g, iid, variance=0.5
 * fixed)) marks it: the word is not part of the value (a bare value's
 * blanks before it are dropped too), and the model layer holds the
 * parameter so given at it.  The parser knows no model names: the model
 * layer (model.h) checks MODEL and the keys, with the offsets kept here.
 *
 * WHAT IS REFUSED.  R's other formula operators are errors that say so, at
 * the operator: ':' and '*' next to an f() term, '/' and %in% (nesting),
 * '^' outside I(), '|' outside a parenthesis (lme4's (1 | g), read by
 * formula_bars.c), '.', other parentheses and a second '~'.  The response
 * may not be a term too (y ~ y, factor(y), f(y, ...)): an error at the
 * term's first use. */
#include "formula_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

/* the token helpers (formula_lex.c) */
#define skip(...) gmm_formula_impl_skip(__VA_ARGS__)
#define name_start(...) gmm_formula_impl_name_start(__VA_ARGS__)
#define name_char(...) gmm_formula_impl_name_char(__VA_ARGS__)
#define fail(...) gmm_formula_impl_fail(__VA_ARGS__)
#define nomem(...) gmm_formula_impl_nomem(__VA_ARGS__)
#define copy(...) gmm_formula_impl_copy(__VA_ARGS__)
#define name(...) gmm_formula_impl_name(__VA_ARGS__)
#define expect(...) gmm_formula_impl_expect(__VA_ARGS__)

/* An operator of R's formulas that this grammar lacks, at the cursor: fail
 * there with what it is (and, for '|', what to write instead); GMM_OK when
 * the cursor is at none of them. */
static gmm_status unsupported(parser *p)
{
    size_t at = p->at;
    const char *s = p->s + at;
    if (at >= p->len)
        return GMM_OK;
    switch (*s) {
    case ':':
    case '*':
        return fail(p, at, "interactions (':' and '*') join variables (NAME, factor(), I(), "
                           "...), not f() terms");
    case '/': return fail(p, at, "nesting ('/' and '%in%') is not supported");
    case '^':
        return fail(p, at, "crossing to a degree ('^') is not supported (a power of a covariate "
                           "is I(x^2))");
    case '~': return fail(p, at, "a formula has one '~'");
    case '|': {
        /* y ~ 1 | g: name the group in the suggestion when it is a NAME */
        size_t b = at + 1, e;
        while (b < p->len && isspace((unsigned char)p->s[b]))
            b++;
        for (e = b; e < p->len && name_char((unsigned char)p->s[e]); e++)
            ;
        char msg[GMM_ERROR_MAX];
        if (e > b && name_start((unsigned char)p->s[b]))
            snprintf(msg, sizeof msg,
                     "random-effect bars ('|') go in parentheses (a random intercept per "
                     "level of %.*s is (1 | %.*s))",
                     (int)(e - b), p->s + b, (int)(e - b), p->s + b);
        else
            snprintf(msg, sizeof msg, "random-effect bars ('|') go in parentheses (a random "
                                      "intercept per level of a column G is (1 | G))");
        return fail(p, at, msg);
    }
    default:
        if (!strncmp(s, "%in%", 4))
            return fail(p, at, "nesting ('/' and '%in%') is not supported");
        return GMM_OK;
    }
}

/* A '(' where a term starts that is not lme4's (1 | g) (formula_bars.c):
 * the '^' it precedes, else the '(' itself. */
static gmm_status parenthesis(parser *p)
{
    size_t open = p->at;
    int depth = 0;
    for (size_t i = open; i < p->len; i++) {
        char c = p->s[i];
        if (c == '(')
            depth++;
        else if (c == ')' && --depth == 0) {
            p->at = i + 1;
            skip(p);
            if (p->at < p->len && p->s[p->at] == '^')
                return unsupported(p);
            break;
        } else if (c == '|' && depth == 1) {
            p->at = i;
            return unsupported(p);
        }
    }
    return fail(p, open, "parentheses around terms are not supported (join the terms with '+')");
}

/* QUOTED, or (bare) a NAME or text up to ',' or ')' trimmed. */
static gmm_status value(parser *p, int bare_name, char **out, size_t *pos, int *quoted)
{
    skip(p);
    *quoted = 0;
    if (p->at < p->len && (p->s[p->at] == '\'' || p->s[p->at] == '"')) {
        char q = p->s[p->at];
        size_t b = ++p->at;
        while (p->at < p->len && p->s[p->at] != q)
            p->at++;
        if (p->at >= p->len)
            return fail(p, b - 1, "unterminated quote");
        *pos = b;
        *quoted = 1;
        *out = copy(p->s + b, p->at - b);
        p->at++;
        return *out ? GMM_OK : nomem();
    }
    if (bare_name)
        return name(p, "a model name or a quoted spec", out, pos);
    size_t b = p->at, e;
    while (p->at < p->len && p->s[p->at] != ',' && p->s[p->at] != ')')
        p->at++;
    for (e = p->at; e > b && isspace((unsigned char)p->s[e - 1]); e--)
        ;
    *pos = b;
    if (e == b)
        return fail(p, b, "expected a value");
    return (*out = copy(p->s + b, e - b)) ? GMM_OK : nomem();
}

/* VALUE 'fixed' (f(g, iid, variance=0.5 fixed)): the word after a value,
 * before ',' or ')', marks it held; a bare value has taken it in (value()
 * reads up to ',' or ')'), a quoted one is followed by it. */
static void fixed_marker(parser *p, gmm_formula_arg *a, int quoted)
{
    static const char word[] = "fixed";
    size_t wl = sizeof word - 1;
    if (quoted) {
        skip(p);
        size_t e = p->at + wl;
        if (p->len - p->at < wl || strncmp(p->s + p->at, word, wl) ||
            (e < p->len && name_char((unsigned char)p->s[e])))
            return;
        a->fixed = 1;
        a->fixed_pos = p->at;
        p->at = e;
        return;
    }
    size_t n = strlen(a->value), b;
    if (n <= wl || strcmp(a->value + n - wl, word) ||
        !isspace((unsigned char)a->value[n - wl - 1]))
        return;
    for (b = n - wl; b > 0 && isspace((unsigned char)a->value[b - 1]); b--)
        ;
    a->fixed = 1;
    a->fixed_pos = a->vpos + n - wl;
    a->value[b] = '\0';
}

/* The rest of f(: NAME ',' MODEL (',' KEY ['=' VALUE ['fixed']])* ')'. */
static gmm_status latent_term(parser *p)
{
    gmm_formula *f = p->f;
    gmm_formula_latent *t = gmm_realloc(f->latent, f->nlatent + 1, sizeof *t);
    if (!t)
        return nomem();
    f->latent = t;
    t += f->nlatent++;
    memset(t, 0, sizeof *t);
    gmm_status st;
    if ((st = name(p, "the column that indexes the term", &t->name, &t->pos)) ||
        (st = expect(p, ',')) ||
        (st = value(p, 1, &t->model, &t->model_pos, &t->quoted)))
        return st;
    for (;;) {
        skip(p);
        if (p->at < p->len && p->s[p->at] == ')') {
            p->at++;
            return GMM_OK;
        }
        if ((st = expect(p, ',')))
            return fail(p, p->at, "expected ',' or ')'");
        gmm_formula_arg *a = gmm_realloc(t->arg, t->narg + 1, sizeof *a);
        if (!a)
            return nomem();
        t->arg = a;
        a += t->narg++;
        memset(a, 0, sizeof *a);
        int q;
        if ((st = name(p, "KEY=VALUE", &a->key, &a->pos)))
            return st;
        for (size_t k = 0; k + 1 < t->narg; k++)
            if (!strcmp(t->arg[k].key, a->key))
                return fail(p, a->pos, "key given twice");
        skip(p);
        if (p->at < p->len && (p->s[p->at] == ',' || p->s[p->at] == ')')) {
            /* a bare KEY: a flag (f(w, rw2, cyclic)) */
            a->vpos = a->pos;
            if (!(a->value = copy("", 0)))
                return nomem();
            a->flag = 1;
            continue;
        }
        if ((st = expect(p, '=')) || (st = value(p, 0, &a->value, &a->vpos, &q)))
            return st;
        fixed_marker(p, a, q);
    }
}

/* One term; minus: it followed a '-'. */
static gmm_status term(parser *p, int minus)
{
    skip(p);
    size_t at = p->at;
    if (!minus && p->at < p->len && p->s[p->at] == '(') {
        int bar;
        gmm_status sb = gmm_formula_impl_bars(p->s, p->len, &p->at, p->f, &bar);
        return bar ? sb : parenthesis(p);
    }
    if (!minus && p->len - at > 1 && p->s[at] == 'f') {
        size_t e = at + 1;
        while (e < p->len && isspace((unsigned char)p->s[e]))
            e++;
        if (e < p->len && p->s[e] == '(') {
            p->at = e + 1;
            return latent_term(p);
        }
    }
    gmm_status st = gmm_formula_impl_fixed_term(p, minus);
    if (st)
        return st;
    /* f(g, iid) * x, x^2: R's operators this grammar lacks, at the operator */
    skip(p);
    return unsupported(p);
}

static gmm_status parse(parser *p)
{
    gmm_status st;
    if ((st = gmm_formula_impl_response(p)) || (st = expect(p, '~')))
        return st == GMM_EPARSE && !strchr(p->s, '~')
                   ? fail(p, p->at, "expected 'RESPONSE ~ TERMS'")
                   : st;
    skip(p);
    int minus = 0;
    if (p->at < p->len && p->s[p->at] == '-') {
        minus = 1;
        p->at++;
    }
    for (;;) {
        if ((st = term(p, minus)))
            return st;
        skip(p);
        if (p->at >= p->len)
            return GMM_OK;
        if (p->s[p->at] != '+' && p->s[p->at] != '-')
            return (st = unsupported(p)) ? st : fail(p, p->at, "expected '+' between terms");
        minus = p->s[p->at] == '-';
        p->at++;
    }
}

/* The response used as a term: its first use in the text, named.  A model
 * of y given y (or indexed by y) fits it exactly and says nothing. */
static gmm_status response_term(const parser *p)
{
    const gmm_formula *f = p->f;
    size_t first = p->len, kind = 0, k0 = 0;
    for (size_t k = 0; k < f->nfixed; k++)
        if (!strcmp(f->fixed[k].name, f->response) && f->fixed[k].pos < first) {
            first = f->fixed[k].pos;
            kind = f->fixed[k].factor ? 2 : 1;
            k0 = k;
        }
    for (size_t k = 0; k < f->nlatent; k++)
        if (!strcmp(f->latent[k].name, f->response) && f->latent[k].pos < first) {
            first = f->latent[k].pos;
            kind = 3;
            k0 = k;
        }
    char msg[GMM_ERROR_MAX];
    switch (kind) {
    case 0: return GMM_OK;
    case 1:
        snprintf(msg, sizeof msg, "the response '%s' cannot also be a covariate", f->response);
        break;
    case 2:
        snprintf(msg, sizeof msg, "the response '%s' cannot also be a factor (factor(%s))",
                 f->response, f->response);
        break;
    default:
        snprintf(msg, sizeof msg,
                 "the response '%s' cannot also index a latent term (f(%s, %s%s%s))",
                 f->response, f->response, f->latent[k0].quoted ? "'" : "",
                 f->latent[k0].model, f->latent[k0].quoted ? "'" : "");
    }
    return fail(p, first, msg);
}

gmm_status gmm_formula_parse(const char *text, gmm_formula **out)
{
    if (!text || !out)
        return gmm_error(GMM_EINVAL, "formula: NULL argument");
    *out = NULL;
    gmm_formula *f = gmm_calloc(1, sizeof *f);
    if (!f)
        return nomem();
    f->intercept = 1;
    parser p = {text, 0, strlen(text), f};
    gmm_status st = parse(&p);
    if (!st)
        st = gmm_formula_impl_fixed_finish(&p);
    if (!st)
        st = response_term(&p);
    if (st) {
        gmm_formula_free(f);
        return st;
    }
    *out = f;
    return GMM_OK;
}

void gmm_formula_free(gmm_formula *f)
{
    if (!f)
        return;
    gmm_free(f->response);
    gmm_formula_impl_fixed_free(f);
    for (size_t t = 0; t < f->nlatent; t++) {
        gmm_formula_latent *l = &f->latent[t];
        gmm_free(l->name);
        gmm_free(l->model);
        for (size_t a = 0; a < l->narg; a++) {
            gmm_free(l->arg[a].key);
            gmm_free(l->arg[a].value);
        }
        gmm_free(l->arg);
        gmm_formula_impl_bars_free(l);
    }
    gmm_free(f->latent);
    gmm_free(f);
}

const char *gmm_formula_arg_find(const gmm_formula_latent *t, const char *key, size_t *pos)
{
    for (size_t a = 0; a < t->narg; a++)
        if (!strcmp(t->arg[a].key, key)) {
            if (pos)
                *pos = t->arg[a].vpos;
            return t->arg[a].value;
        }
    return NULL;
}
