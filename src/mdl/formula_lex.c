/* formula_lex.c -- the tokens of formulas (formula_impl.h): blanks, NAMEs,
 * an expected character, and the parse errors that point at the offending
 * character; shared by formula.c and formula_fixed.c. */
#include "formula_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

#define skip(...) gmm_formula_impl_skip(__VA_ARGS__)
#define name_start(...) gmm_formula_impl_name_start(__VA_ARGS__)
#define name_char(...) gmm_formula_impl_name_char(__VA_ARGS__)
#define fail(...) gmm_formula_impl_fail(__VA_ARGS__)
#define nomem(...) gmm_formula_impl_nomem(__VA_ARGS__)
#define copy(...) gmm_formula_impl_copy(__VA_ARGS__)

void gmm_formula_impl_skip(parser *p)
{
    while (p->at < p->len && isspace((unsigned char)p->s[p->at]))
        p->at++;
}

int gmm_formula_impl_name_start(int c) { return isalpha(c) || c == '_' || c == '.'; }
int gmm_formula_impl_name_char(int c) { return isalnum(c) || c == '_' || c == '.'; }

gmm_status gmm_formula_impl_fail(const parser *p, size_t pos, const char *what)
{
    (void)p;
    return gmm_error_at(GMM_EPARSE, pos, "formula: %s", what);
}

gmm_status gmm_formula_impl_nomem(void) { return gmm_error(GMM_ENOMEM, "formula: out of memory"); }

char *gmm_formula_impl_copy(const char *s, size_t n)
{
    char *c = gmm_malloc(n + 1, 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = '\0';
    }
    return c;
}

/* A NAME at the cursor into *out (allocated), its offset in *pos. */
gmm_status gmm_formula_impl_name(parser *p, const char *what, char **out, size_t *pos)
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

gmm_status gmm_formula_impl_expect(parser *p, char c)
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
