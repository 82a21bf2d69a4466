/* specstub.c -- see specstub.h (temporary, test-only). */
#include "support/specstub.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t i, leaf;
} ps;

static void skip(ps *p)
{
    while (isspace((unsigned char)p->s[p->i]))
        p->i++;
}

static gmm_spec_node *spec(ps *p);

static char *name(ps *p)
{
    skip(p);
    size_t b = p->i;
    if (!(isalpha((unsigned char)p->s[b]) || p->s[b] == '_'))
        return NULL;
    while (isalnum((unsigned char)p->s[p->i]) || p->s[p->i] == '_' || p->s[p->i] == '-')
        p->i++;
    char *r = malloc(p->i - b + 1);
    memcpy(r, p->s + b, p->i - b);
    r[p->i - b] = '\0';
    return r;
}

static gmm_spec_node *factor(ps *p)
{
    skip(p);
    if (p->s[p->i] == '(') {
        p->i++;
        gmm_spec_node *n = spec(p);
        skip(p);
        if (!n || p->s[p->i] != ')') {
            tu_spec_free(n);
            return NULL;
        }
        p->i++;
        return n;
    }
    gmm_spec_node *n = calloc(1, sizeof *n);
    n->type = GMM_SPEC_FACTOR;
    n->pos = p->i;
    n->name = name(p);
    n->index = p->leaf++;
    if (!n->name) {
        tu_spec_free(n);
        return NULL;
    }
    skip(p);
    if (p->s[p->i] != '(')
        return n;
    p->i++;
    skip(p);
    if (p->s[p->i] == ')') {
        p->i++;
        return n;
    }
    for (;;) {
        skip(p);
        size_t pos = p->i;
        char *k = name(p);
        skip(p);
        if (!k || p->s[p->i] != '=') {
            free(k);
            tu_spec_free(n);
            return NULL;
        }
        p->i++;
        char *end;
        double v = strtod(p->s + p->i, &end);
        if (end == p->s + p->i) {
            free(k);
            tu_spec_free(n);
            return NULL;
        }
        p->i = (size_t)(end - p->s);
        n->arg = realloc(n->arg, (n->narg + 1) * sizeof *n->arg);
        n->arg[n->narg].key = k;
        n->arg[n->narg].value = v;
        n->arg[n->narg].pos = pos;
        n->narg++;
        skip(p);
        if (p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->s[p->i] == ')') {
            p->i++;
            return n;
        }
        tu_spec_free(n);
        return NULL;
    }
}

static gmm_spec_node *list(ps *p, gmm_spec_type type, char op)
{
    size_t pos = (skip(p), p->i);
    gmm_spec_node *first = type == GMM_SPEC_SUM ? list(p, GMM_SPEC_PRODUCT, '*') : factor(p);
    if (!first)
        return NULL;
    skip(p);
    if (p->s[p->i] != op)
        return first;
    gmm_spec_node *n = calloc(1, sizeof *n);
    n->type = type;
    n->pos = pos;
    n->child = malloc(sizeof *n->child);
    n->child[n->nchild++] = first;
    while ((skip(p), p->s[p->i] == op)) {
        p->i++;
        gmm_spec_node *c = type == GMM_SPEC_SUM ? list(p, GMM_SPEC_PRODUCT, '*') : factor(p);
        if (!c) {
            tu_spec_free(n);
            return NULL;
        }
        n->child = realloc(n->child, (n->nchild + 1) * sizeof *n->child);
        n->child[n->nchild++] = c;
    }
    return n;
}

static gmm_spec_node *spec(ps *p) { return list(p, GMM_SPEC_SUM, '+'); }

gmm_spec_node *tu_spec_parse(const char *text)
{
    ps p = {text, 0, 0};
    gmm_spec_node *n = spec(&p);
    skip(&p);
    if (n && p.s[p.i] != '\0') {
        tu_spec_free(n);
        return NULL;
    }
    return n;
}

void tu_spec_free(gmm_spec_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nchild; i++)
        tu_spec_free(n->child[i]);
    free(n->child);
    free(n->name);
    for (size_t i = 0; i < n->narg; i++)
        free(n->arg[i].key);
    free(n->arg);
    free(n);
}
