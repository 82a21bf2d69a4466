/* spec.c -- recursive-descent parser for the spec grammar of spec.h.
 *
 * One function per rule (parse_sum, parse_product, parse_factor); each skips
 * leading blanks and records where its node starts.  A rule that sees a
 * single operand returns it unwrapped, so "a" is one FACTOR rather than a
 * SUM of a PRODUCT of a FACTOR.  A parenthesised operand of the same type is
 * spliced into its parent ("a + (b + c)" is one SUM of three): that keeps
 * the leaves in text order, so leaf numbers and parameter names do not
 * depend on redundant parentheses.  "(a + b) * c" keeps its SUM inside the
 * PRODUCT, of course.
 *
 * Errors: the offset of the first offending character goes to
 * gmm_error_index(); messages do not repeat it (the caret does).
 */
#include "gmm/spec.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"

/* Deeper nesting is refused rather than risking the stack on hostile input. */
#define MAX_DEPTH 64

typedef struct {
    const char *s;
    size_t i;       /* next character */
    size_t nleaf;   /* leaves numbered so far */
    int depth;
} parser;

static int is_name_start(int c) { return isalpha(c) || c == '_'; }
static int is_name_char(int c) { return isalnum(c) || c == '_' || c == '-'; }

static void skip_blanks(parser *p)
{
    while (p->s[p->i] && isspace((unsigned char)p->s[p->i]))
        p->i++;
}

/* The character at the cursor, for messages ("')'", "end of spec"). */
static gmm_status unexpected(parser *p, const char *want)
{
    unsigned char c = (unsigned char)p->s[p->i];
    if (!c)
        return gmm_error_at(GMM_EPARSE, p->i, "unexpected end of spec: expected %s", want);
    if (is_name_start(c)) {
        size_t n = 1;
        while (is_name_char((unsigned char)p->s[p->i + n]))
            n++;
        return gmm_error_at(GMM_EPARSE, p->i, "unexpected '%.*s': expected %s",
                            (int)(n > 40 ? 40 : n), p->s + p->i, want);
    }
    if (isprint(c))
        return gmm_error_at(GMM_EPARSE, p->i, "unexpected '%c': expected %s", c, want);
    return gmm_error_at(GMM_EPARSE, p->i, "unexpected byte 0x%02X: expected %s", c, want);
}

static gmm_status oom(parser *p)
{
    return gmm_error_at(GMM_ENOMEM, p->i, "out of memory parsing a spec");
}

static char *copy_name(const char *s, size_t n)
{
    char *d = gmm_malloc(n + 1, 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

void gmm_spec_free(gmm_spec_node *node)
{
    if (!node)
        return;
    for (size_t k = 0; k < node->nchild; k++)
        gmm_spec_free(node->child[k]);
    gmm_free(node->child);
    for (size_t k = 0; k < node->narg; k++)
        gmm_free(node->arg[k].key);
    gmm_free(node->arg);
    gmm_free(node->name);
    gmm_free(node);
}

/* Append child to parent (SUM/PRODUCT), splicing in the children of a child
 * of the same type.  Takes ownership of child in every case. */
static gmm_status adopt(parser *p, gmm_spec_node *parent, gmm_spec_node *child)
{
    size_t add = child->type == parent->type ? child->nchild : 1;
    gmm_spec_node **c = gmm_realloc(parent->child, parent->nchild + add, sizeof *c);
    if (!c) {
        gmm_spec_free(child);
        return oom(p);
    }
    parent->child = c;
    if (child->type == parent->type) {
        memcpy(c + parent->nchild, child->child, add * sizeof *c);
        child->nchild = 0;
        gmm_spec_free(child);
    } else {
        c[parent->nchild] = child;
    }
    parent->nchild += add;
    return GMM_OK;
}

static gmm_status parse_sum(parser *p, gmm_spec_node **out);

/* NUMBER after "KEY=": the whole token up to ',', ')', a blank or the end
 * must be one finite strtod number. */
static gmm_status parse_number(parser *p, double *v)
{
    size_t start = p->i, n = 0;
    while (p->s[start + n] && p->s[start + n] != ',' && p->s[start + n] != ')' &&
           p->s[start + n] != '(' && !isspace((unsigned char)p->s[start + n]))
        n++;
    if (!n)
        return unexpected(p, "a number");
    char *tok = copy_name(p->s + start, n);
    if (!tok)
        return oom(p);
    char *end;
    double x = strtod(tok, &end);
    gmm_status st = GMM_OK;
    /* Overflow gives +-HUGE_VAL (caught here); underflow to a subnormal or
     * zero is a usable value. */
    if (end != tok + n)
        st = gmm_error_at(GMM_EPARSE, start, "number '%.40s' is not valid", tok);
    else if (!isfinite(x))
        st = gmm_error_at(GMM_EPARSE, start, "number '%.40s' is not finite", tok);
    gmm_free(tok);
    if (st != GMM_OK)
        return st;
    *v = x;
    p->i = start + n;
    return GMM_OK;
}

/* The argument list after NAME '(' (the '(' already consumed). */
static gmm_status parse_args(parser *p, gmm_spec_node *f)
{
    skip_blanks(p);
    if (p->s[p->i] == ')') {
        p->i++;
        return GMM_OK;
    }
    for (;;) {
        skip_blanks(p);
        size_t kpos = p->i;
        if (!is_name_start((unsigned char)p->s[kpos]))
            return unexpected(p, f->narg ? "a parameter name after ','"
                                         : "a parameter name or ')'");
        size_t n = 1;
        while (is_name_char((unsigned char)p->s[kpos + n]))
            n++;
        for (size_t k = 0; k < f->narg; k++)
            if (strlen(f->arg[k].key) == n && !strncmp(f->arg[k].key, p->s + kpos, n))
                return gmm_error_at(GMM_EPARSE, kpos, "parameter '%s' given twice in '%s'",
                                    f->arg[k].key, f->name);
        gmm_spec_arg *a = gmm_realloc(f->arg, f->narg + 1, sizeof *a);
        if (!a)
            return oom(p);
        f->arg = a;
        a = &f->arg[f->narg];
        a->key = copy_name(p->s + kpos, n);
        a->value = 0.0;
        a->pos = kpos;
        if (!a->key)
            return oom(p);
        f->narg++;
        p->i = kpos + n;
        skip_blanks(p);
        if (p->s[p->i] != '=') {
            if (!p->s[p->i])
                return gmm_error_at(GMM_EPARSE, p->i,
                                    "unexpected end of spec: expected '=' after '%s'", a->key);
            return gmm_error_at(GMM_EPARSE, p->i, "expected '=' after '%s'", a->key);
        }
        p->i++;
        skip_blanks(p);
        if (!p->s[p->i] || p->s[p->i] == ',' || p->s[p->i] == ')') {
            if (!p->s[p->i])
                return gmm_error_at(GMM_EPARSE, p->i,
                                    "unexpected end of spec: expected a number after '%s='",
                                    a->key);
            return gmm_error_at(GMM_EPARSE, p->i, "expected a number after '%s='", a->key);
        }
        gmm_status st = parse_number(p, &a->value);
        if (st != GMM_OK)
            return st;
        skip_blanks(p);
        if (p->s[p->i] == ')') {
            p->i++;
            return GMM_OK;
        }
        if (p->s[p->i] != ',')
            return unexpected(p, "',' or ')'");
        p->i++;
    }
}

static gmm_status parse_factor(parser *p, gmm_spec_node **out)
{
    skip_blanks(p);
    size_t start = p->i;
    unsigned char c = (unsigned char)p->s[start];
    if (c == '(') {
        if (p->depth >= MAX_DEPTH)
            return gmm_error_at(GMM_EPARSE, start, "parentheses nested more than %d deep",
                                MAX_DEPTH);
        p->depth++;
        p->i++;
        gmm_status st = parse_sum(p, out);
        p->depth--;
        if (st != GMM_OK)
            return st;
        skip_blanks(p);
        if (p->s[p->i] != ')') {
            gmm_spec_free(*out);
            *out = NULL;
            return unexpected(p, "')'");
        }
        p->i++;
        return GMM_OK;
    }
    if (!is_name_start(c))
        return unexpected(p, "a kernel name");
    size_t n = 1;
    while (is_name_char((unsigned char)p->s[start + n]))
        n++;
    gmm_status st = GMM_OK;
    gmm_spec_node *f = gmm_calloc(1, sizeof *f);
    if (!f)
        return oom(p);
    f->type = GMM_SPEC_FACTOR;
    f->pos = start;
    f->index = p->nleaf++;
    f->name = copy_name(p->s + start, n);
    if (!f->name) {
        st = oom(p);
        goto done;
    }
    p->i = start + n;
    skip_blanks(p);
    if (p->s[p->i] == '(') {
        p->i++;
        st = parse_args(p, f);
    }
done:
    if (st != GMM_OK) {
        gmm_spec_free(f);
        return st;
    }
    *out = f;
    return GMM_OK;
}

/* term := factor ('*' factor)*  when op is '*'; spec := term ('+' term)*
 * when op is '+'.  One routine for both levels. */
static gmm_status parse_level(parser *p, char op, gmm_spec_node **out)
{
    skip_blanks(p);
    size_t start = p->i;
    gmm_spec_node *first = NULL, *node = NULL;
    gmm_status st = op == '*' ? parse_factor(p, &first) : parse_level(p, '*', &first);
    if (st != GMM_OK)
        return st;
    skip_blanks(p);
    if (p->s[p->i] != op) {
        *out = first;
        return GMM_OK;
    }
    node = gmm_calloc(1, sizeof *node);
    if (!node) {
        gmm_spec_free(first);
        return oom(p);
    }
    node->type = op == '*' ? GMM_SPEC_PRODUCT : GMM_SPEC_SUM;
    node->pos = start;
    st = adopt(p, node, first);
    while (st == GMM_OK) {
        skip_blanks(p);
        if (p->s[p->i] != op)
            break;
        p->i++;
        gmm_spec_node *next = NULL;
        st = op == '*' ? parse_factor(p, &next) : parse_level(p, '*', &next);
        if (st == GMM_OK)
            st = adopt(p, node, next);
    }
    if (st != GMM_OK) {
        gmm_spec_free(node);
        return st;
    }
    *out = node;
    return GMM_OK;
}

static gmm_status parse_sum(parser *p, gmm_spec_node **out) { return parse_level(p, '+', out); }

gmm_status gmm_spec_parse(const char *text, gmm_spec_node **out)
{
    if (!text || !out)
        return gmm_error(GMM_EINVAL, "gmm_spec_parse: NULL argument");
    *out = NULL;
    parser p = {text, 0, 0, 0};
    gmm_spec_node *root = NULL;
    gmm_status st = parse_sum(&p, &root);
    if (st != GMM_OK)
        return st;
    skip_blanks(&p);
    if (p.s[p.i]) {
        if (p.s[p.i] == ')')
            st = gmm_error_at(GMM_EPARSE, p.i, "unexpected ')'");
        else
            st = unexpected(&p, "'+', '*' or the end of the spec");
        gmm_spec_free(root);
        return st;
    }
    *out = root;
    return GMM_OK;
}

size_t gmm_spec_nleaves(const gmm_spec_node *node)
{
    if (!node)
        return 0;
    if (node->type == GMM_SPEC_FACTOR)
        return 1;
    size_t n = 0;
    for (size_t k = 0; k < node->nchild; k++)
        n += gmm_spec_nleaves(node->child[k]);
    return n;
}

void gmm_spec_caret(const char *text, size_t pos, char *buf, size_t bufsize)
{
    if (!buf || !bufsize)
        return;
    if (!text)
        text = "";
    size_t len = strlen(text), k = 0;
    if (pos > len)
        pos = len;
    /* "  TEXT\n  ", a blank per character before pos, and the caret.
     * Control characters and tabs in TEXT would shift the caret, so they
     * are shown as blanks; a UTF-8 sequence is one character. */
    size_t pad = 0;
    for (size_t i = 0; i < pos; i++)
        pad += ((unsigned char)text[i] & 0xC0) != 0x80;
    size_t need = 2 + len + 1 + 2 + pad + 1;
    for (size_t i = 0; i < need && k + 1 < bufsize; i++) {
        char c = ' ';
        if (i >= 2 && i < 2 + len)
            c = iscntrl((unsigned char)text[i - 2]) ? ' ' : text[i - 2];
        else if (i == 2 + len)
            c = '\n';
        else if (i == need - 1)
            c = '^';
        buf[k++] = c;
    }
    buf[k] = '\0';
}

/* An appending snprintf over (buf, size) that keeps counting past the end. */
typedef struct {
    char *buf;
    size_t size, len;
} strbuf;

static void sb_printf(strbuf *sb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void sb_printf(strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = sb->len < sb->size ? sb->size - sb->len : 0;
    int n = vsnprintf(room ? sb->buf + sb->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb->len += (size_t)n;
}

/* "<index>.<name>." prefix match: the key part of names[k], or NULL. */
static const char *param_key(const gmm_spec_node *f, const char *full)
{
    char prefix[160];
    int n = snprintf(prefix, sizeof prefix, "%zu.%s.", f->index, f->name);
    if (n <= 0 || (size_t)n >= sizeof prefix || strncmp(full, prefix, (size_t)n))
        return NULL;
    return full + n;
}

static void format_node(const gmm_spec_node *node, size_t nparam, char *const *names,
                        const double *values, strbuf *sb, int parent_type)
{
    if (node->type != GMM_SPEC_FACTOR) {
        /* A sum inside a product needs parentheses. */
        int paren = node->type == GMM_SPEC_SUM && parent_type == GMM_SPEC_PRODUCT;
        if (paren)
            sb_printf(sb, "(");
        for (size_t c = 0; c < node->nchild; c++) {
            if (c)
                sb_printf(sb, node->type == GMM_SPEC_SUM ? " + " : " * ");
            format_node(node->child[c], nparam, names, values, sb, (int)node->type);
        }
        if (paren)
            sb_printf(sb, ")");
        return;
    }
    size_t nout = 0;
    sb_printf(sb, "%s", node->name);
    for (size_t a = 0; a < node->narg; a++) {
        double v = node->arg[a].value;
        for (size_t k = 0; k < nparam; k++) {
            const char *key = param_key(node, names[k]);
            if (key && !strcmp(key, node->arg[a].key))
                v = values[k];
        }
        sb_printf(sb, "%s%s=%.17g", nout++ ? ", " : "(", node->arg[a].key, v);
    }
    for (size_t k = 0; k < nparam; k++) {
        const char *key = param_key(node, names[k]);
        int given = 0;
        for (size_t a = 0; key && a < node->narg; a++)
            given |= !strcmp(key, node->arg[a].key);
        if (key && !given)
            sb_printf(sb, "%s%s=%.17g", nout++ ? ", " : "(", key, values[k]);
    }
    if (nout)
        sb_printf(sb, ")");
}

size_t gmm_spec_format(const gmm_spec_node *node, size_t nparam, char *const *names,
                       const double *values, char *buf, size_t size)
{
    strbuf sb = {buf, size, 0};
    if (size)
        buf[0] = '\0';
    format_node(node, nparam, names, values, &sb, -1);
    return sb.len;
}
