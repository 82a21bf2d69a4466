/* formula_expr.c -- R's arithmetic in formulas (formula.h): the
 * expressions of I(), log(), exp(), sqrt(), poly(), offset() and a
 * transformed response, parsed with R's precedence, and their text as R
 * deparses it (the names of the design's columns). */
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

static int at_char(const parser *p, char c) { return p->at < p->len && p->s[p->at] == c; }

gmm_formula_expr *gmm_formula_impl_expr_node(gmm_formula_op op, size_t pos, gmm_formula_expr *a,
                              gmm_formula_expr *b)
{
    gmm_formula_expr *e = gmm_calloc(1, sizeof *e);
    if (e) {
        e->op = op;
        e->pos = pos;
        e->a = a;
        e->b = b;
    }
    return e;
}

void gmm_formula_impl_expr_free(gmm_formula_expr *e)
{
    if (!e)
        return;
    expr_free(e->a);
    expr_free(e->b);
    gmm_free(e->name);
    gmm_free(e);
}

/* ---- arithmetic ------------------------------------------------------------ */

static gmm_status unary(parser *p, gmm_formula_expr **out);

static const struct {
    const char *name;
    gmm_formula_op op;
} calls[] = {{"I", GMM_FX_I}, {"log", GMM_FX_LOG}, {"exp", GMM_FX_EXP}, {"sqrt", GMM_FX_SQRT}};

static gmm_status unknown_function(const parser *p, size_t pos, const char *nm)
{
    char msg[GMM_ERROR_MAX];
    snprintf(msg, sizeof msg,
             "unknown function '%s' (functions: factor(), poly(), I(), log(), exp(), sqrt(), "
             "offset(), f())",
             nm);
    return fail(p, pos, msg);
}

/* NUMBER | NAME | call | '(' sum ')' */
gmm_status gmm_formula_impl_expr_atom(parser *p, gmm_formula_expr **out)
{
    skip(p);
    size_t pos = p->at;
    const char *s = p->s + pos;
    *out = NULL;
    if (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) {
        char *end;
        double v = strtod(s, &end);
        if (!isfinite(v))
            return fail(p, pos, "a number too large");
        if (!(*out = node(GMM_FX_NUM, pos, NULL, NULL)))
            return nomem();
        (*out)->num = v;
        p->at += (size_t)(end - s);
        return GMM_OK;
    }
    gmm_status st;
    if (*s == '(') {
        p->at++;
        gmm_formula_expr *a = NULL;
        if ((st = sum(p, &a)) || (st = gmm_formula_impl_expect(p, ')'))) {
            expr_free(a);
            return st;
        }
        return (*out = node(GMM_FX_PAREN, pos, a, NULL)) ? GMM_OK : (expr_free(a), nomem());
    }
    char *nm = NULL;
    if ((st = gmm_formula_impl_name(p, "a number, a column or '('", &nm, &pos)))
        return st;
    skip(p);
    if (!at_char(p, '(')) {
        if (!(*out = node(GMM_FX_COL, pos, NULL, NULL))) {
            gmm_free(nm);
            return nomem();
        }
        (*out)->name = nm;
        return GMM_OK;
    }
    size_t k;
    for (k = 0; k < sizeof calls / sizeof calls[0] && strcmp(calls[k].name, nm); k++)
        ;
    if (k == sizeof calls / sizeof calls[0]) {
        st = unknown_function(p, pos, nm);
        gmm_free(nm);
        return st;
    }
    gmm_free(nm);
    p->at++;
    gmm_formula_expr *a = NULL;
    if ((st = sum(p, &a)) || (st = gmm_formula_impl_expect(p, ')'))) {
        expr_free(a);
        return st;
    }
    return (*out = node(calls[k].op, pos, a, NULL)) ? GMM_OK : (expr_free(a), nomem());
}

/* atom ['^' unary]: R's '^' binds tighter than unary minus (-x^2 is
 * -(x^2)) and to the right (2^-1) */
static gmm_status power(parser *p, gmm_formula_expr **out)
{
    gmm_status st = atom(p, out);
    skip(p);
    if (st || !at_char(p, '^'))
        return st;
    size_t pos = p->at++;
    gmm_formula_expr *b = NULL, *e;
    if ((st = unary(p, &b)) || !(e = node(GMM_FX_POW, pos, *out, b))) {
        expr_free(b);
        return st ? st : nomem();
    }
    *out = e;
    return GMM_OK;
}

static gmm_status unary(parser *p, gmm_formula_expr **out)
{
    skip(p);
    if (!at_char(p, '-'))
        return power(p, out);
    size_t pos = p->at++;
    gmm_formula_expr *a = NULL;
    gmm_status st = unary(p, &a);
    if (st || !(*out = node(GMM_FX_NEG, pos, a, NULL))) {
        expr_free(a);
        return st ? st : nomem();
    }
    return GMM_OK;
}

/* a chain of operands at one precedence: ops[0] -> op0, ops[1] -> op1 */
static gmm_status chain(parser *p, gmm_formula_expr **out, const char *ops, gmm_formula_op op0,
                        gmm_formula_op op1, gmm_status (*operand)(parser *, gmm_formula_expr **))
{
    gmm_status st = operand(p, out);
    for (;;) {
        skip(p);
        if (st || p->at >= p->len || !strchr(ops, p->s[p->at]) || !p->s[p->at])
            return st;
        gmm_formula_op op = p->s[p->at] == ops[0] ? op0 : op1;
        size_t pos = p->at++;
        gmm_formula_expr *b = NULL, *e;
        if ((st = operand(p, &b)) || !(e = node(op, pos, *out, b))) {
            expr_free(b);
            return st ? st : nomem();
        }
        *out = e;
    }
}

static gmm_status product(parser *p, gmm_formula_expr **out)
{
    return chain(p, out, "*/", GMM_FX_MUL, GMM_FX_DIV, unary);
}

gmm_status gmm_formula_impl_expr_sum(parser *p, gmm_formula_expr **out)
{
    return chain(p, out, "+-", GMM_FX_ADD, GMM_FX_SUB, product);
}

/* ---- R's text ---------------------------------------------------------------- */

/* v as R's deparse prints it: the fewest significant digits (at most 15)
 * that give v at 15, fixed notation unless scientific is narrower */
static void number_text(double v, char *buf, size_t size)
{
    char m[32];
    snprintf(m, sizeof m, "%.14e", fabs(v));
    int e10 = atoi(strchr(m, 'e') + 1), nsig = 15;
    for (char *d = strchr(m, 'e') - 1; nsig > 1 && *d == '0'; d--)
        nsig--;
    int neg = v < 0, rgt = nsig - 1 - e10 > 0 ? nsig - 1 - e10 : 0;
    int left = e10 >= 0 ? e10 + 1 : 1;
    int fixed_w = neg + left + (rgt ? rgt + 1 : 0);
    int sci_w = neg + (nsig > 1 ? nsig + 1 : 1) + (abs(e10) >= 100 ? 5 : 4);
    if (fixed_w <= sci_w)
        snprintf(buf, size, "%.*f", rgt, v);
    else
        snprintf(buf, size, "%.*e", nsig - 1, v);
}

typedef struct {
    char *buf;
    size_t size, at;
} text;

static void put(text *t, const char *s)
{
    size_t n = strlen(s);
    if (t->at + n >= t->size)
        n = t->at + 1 < t->size ? t->size - 1 - t->at : 0;
    memcpy(t->buf + t->at, s, n);
    t->at += n;
    t->buf[t->at] = '\0';
}

static void deparse(const gmm_formula_expr *e, text *t)
{
    static const char *const bin[] = {[GMM_FX_ADD] = " + ", [GMM_FX_SUB] = " - ",
                                      [GMM_FX_MUL] = " * ", [GMM_FX_DIV] = "/",
                                      [GMM_FX_POW] = "^"};
    char num[40];
    switch (e->op) {
    case GMM_FX_NUM:
        number_text(e->num, num, sizeof num);
        put(t, num);
        return;
    case GMM_FX_COL: put(t, e->name); return;
    case GMM_FX_NEG:
        put(t, "-");
        deparse(e->a, t);
        return;
    case GMM_FX_PAREN:
        put(t, "(");
        deparse(e->a, t);
        put(t, ")");
        return;
    case GMM_FX_ADD:
    case GMM_FX_SUB:
    case GMM_FX_MUL:
    case GMM_FX_DIV:
    case GMM_FX_POW:
        deparse(e->a, t);
        put(t, bin[e->op]);
        deparse(e->b, t);
        return;
    default:
        for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++)
            if (calls[k].op == e->op)
                put(t, calls[k].name);
        put(t, "(");
        deparse(e->a, t);
        put(t, ")");
    }
}

void gmm_formula_expr_text(const gmm_formula_expr *e, char *buf, size_t size)
{
    text t = {buf, size, 0};
    if (size)
        buf[0] = '\0';
    if (e && size)
        deparse(e, &t);
}

char *gmm_formula_impl_expr_label(const char *pre, const gmm_formula_expr *e, const char *post)
{
    char buf[512];
    text t = {buf, sizeof buf, 0};
    buf[0] = '\0';
    put(&t, pre);
    deparse(e, &t);
    put(&t, post);
    return gmm_strdup(buf);
}

gmm_status gmm_formula_impl_response(parser *p)
{
    gmm_formula *f = p->f;
    skip(p);
    f->response_pos = p->at;
    gmm_formula_expr *e = NULL;
    gmm_status st = sum(p, &e);
    if (st) {
        expr_free(e);
        return st;
    }
    if (e->op == GMM_FX_COL) {
        f->response = e->name;
        e->name = NULL;
        expr_free(e);
        return (f->response_label = gmm_strdup(f->response)) ? GMM_OK : nomem();
    }
    f->response_expr = e;
    /* the first column it reads: what the data must have */
    const gmm_formula_expr *c = e;
    const gmm_formula_expr *stack[64];
    size_t n = 0;
    stack[n++] = e;
    c = NULL;
    while (n && !c) {
        const gmm_formula_expr *x = stack[--n];
        if (x->op == GMM_FX_COL)
            c = x;
        if (x->b && n < 64)
            stack[n++] = x->b;
        if (x->a && n < 64)
            stack[n++] = x->a;
    }
    if (!c)
        return fail(p, f->response_pos, "the response must read a column");
    if (!(f->response = gmm_strdup(c->name)) || !(f->response_label = expr_label("", e, "")))
        return nomem();
    return GMM_OK;
}
