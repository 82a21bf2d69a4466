/* formula.c -- the 'RESPONSE ~ TERMS' parser (formula.h): a recursive
 * descent over the text that keeps every token's offset for messages. */
#include "gmm/formula.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

typedef struct {
    const char *s;
    size_t at, len;
    gmm_formula *f;
} parser;

static void skip(parser *p)
{
    while (p->at < p->len && isspace((unsigned char)p->s[p->at]))
        p->at++;
}

static int name_start(int c) { return isalpha(c) || c == '_' || c == '.'; }
static int name_char(int c) { return isalnum(c) || c == '_' || c == '.'; }

static gmm_status fail(const parser *p, size_t pos, const char *what)
{
    (void)p;
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

/* A NAME at the cursor into *out (allocated), its offset in *pos. */
static gmm_status name(parser *p, const char *what, char **out, size_t *pos)
{
    skip(p);
    *pos = p->at;
    if (p->at >= p->len || !name_start((unsigned char)p->s[p->at])) {
        char msg[128];
        snprintf(msg, sizeof msg, "expected %s", what);
        return fail(p, p->at, msg);
    }
    size_t b = p->at;
    while (p->at < p->len && name_char((unsigned char)p->s[p->at]))
        p->at++;
    return (*out = copy(p->s + b, p->at - b)) ? GMM_OK : nomem();
}

static gmm_status expect(parser *p, char c)
{
    skip(p);
    if (p->at >= p->len || p->s[p->at] != c) {
        char msg[64];
        snprintf(msg, sizeof msg, "expected '%c'", c);
        return fail(p, p->at, msg);
    }
    p->at++;
    return GMM_OK;
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

/* The rest of f(: NAME ',' MODEL (',' KEY ['=' VALUE])* ')'. */
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
    }
}

static gmm_status add_fixed(parser *p, char *nm, size_t pos, int factor)
{
    gmm_formula *f = p->f;
    for (size_t k = 0; k < f->nfixed; k++)
        if (!strcmp(f->fixed[k].name, nm) && f->fixed[k].factor == factor) {
            gmm_free(nm);
            return fail(p, pos, "a term appears twice");
        }
    gmm_formula_fixed *x = gmm_realloc(f->fixed, f->nfixed + 1, sizeof *x);
    if (!x) {
        gmm_free(nm);
        return nomem();
    }
    f->fixed = x;
    f->fixed[f->nfixed++] = (gmm_formula_fixed){nm, factor, pos};
    return GMM_OK;
}

/* One term; minus: it followed a '-'. */
static gmm_status term(parser *p, int minus)
{
    skip(p);
    size_t pos = p->at;
    if (p->at < p->len && isdigit((unsigned char)p->s[p->at])) {
        size_t b = p->at;
        while (p->at < p->len && isalnum((unsigned char)p->s[p->at]))
            p->at++;
        size_t n = p->at - b;
        if (n == 1 && p->s[b] == '1') {
            p->f->intercept = !minus;
            return GMM_OK;
        }
        if (n == 1 && p->s[b] == '0' && !minus) {
            p->f->intercept = 0;
            return GMM_OK;
        }
        return fail(p, b, minus ? "only '1' may follow '-' (no intercept)"
                                : "a number term must be 1 (intercept) or 0 (none)");
    }
    if (minus)
        return fail(p, pos, "only '1' may follow '-' (no intercept)");
    char *nm = NULL;
    gmm_status st = name(p, "a term: 1, 0, NAME, factor(NAME) or f(NAME, MODEL, ...)", &nm,
                         &pos);
    if (st)
        return st;
    skip(p);
    int call = p->at < p->len && p->s[p->at] == '(';
    if (call && !strcmp(nm, "factor")) {
        gmm_free(nm);
        p->at++;
        if ((st = name(p, "a column name", &nm, &pos)))
            return st;
        if ((st = expect(p, ')'))) {
            gmm_free(nm);
            return st;
        }
        return add_fixed(p, nm, pos, 1);
    }
    if (call && !strcmp(nm, "f")) {
        gmm_free(nm);
        p->at++;
        return latent_term(p);
    }
    if (call) {
        gmm_free(nm);
        return fail(p, pos, "unknown function (terms are NAME, factor(NAME), f(NAME, MODEL, ...))");
    }
    return add_fixed(p, nm, pos, 0);
}

static gmm_status parse(parser *p)
{
    gmm_status st;
    gmm_formula *f = p->f;
    if ((st = name(p, "the response column", &f->response, &f->response_pos)) ||
        (st = expect(p, '~')))
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
            return fail(p, p->at, "expected '+' between terms");
        minus = p->s[p->at] == '-';
        p->at++;
    }
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
    for (size_t k = 0; k < f->nfixed; k++)
        gmm_free(f->fixed[k].name);
    gmm_free(f->fixed);
    for (size_t t = 0; t < f->nlatent; t++) {
        gmm_formula_latent *l = &f->latent[t];
        gmm_free(l->name);
        gmm_free(l->model);
        for (size_t a = 0; a < l->narg; a++) {
            gmm_free(l->arg[a].key);
            gmm_free(l->arg[a].value);
        }
        gmm_free(l->arg);
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
