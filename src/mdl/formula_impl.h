/* formula_impl.h -- the parser's state and what the parser's files share:
 * formula.c (the formula, f() terms), formula_bars.c (lme4's bar terms),
 * formula_fixed.c (the fixed terms: R's variables and interactions),
 * formula_expr.c (R's arithmetic) and formula_lex.c (tokens).  Private to
 * src/mdl/. */
#ifndef GMM_FORMULA_IMPL_H
#define GMM_FORMULA_IMPL_H

#include "gmm/formula.h"

/* lme4's (EFFECTS | GROUP) at text[*at] == '(' (formula_bars.c): when the
 * parenthesis holds a '|' at its own level, *matched is set, the terms it
 * stands for are appended to f->latent and *at moves past its ')'; else
 * *matched is 0 and *at is unchanged.  Errors as gmm_formula_parse. */
gmm_status gmm_formula_impl_bars(const char *text, size_t len, size_t *at, gmm_formula *f,
                                 int *matched);
/* What a bar term owns beyond an f() term's (NULL-safe). */
void gmm_formula_impl_bars_free(gmm_formula_latent *t);

typedef struct {
    const char *s;
    size_t at, len;
    gmm_formula *f;
} parser;

/* formula_lex.c: blanks skipped; GMM_EPARSE "formula: WHAT" at pos;
 * GMM_ENOMEM; n bytes of s (allocated, NULL: out of memory); a NAME at the
 * cursor (allocated; its offset in *pos); the character c expected; NAME's
 * characters. */
void gmm_formula_impl_skip(parser *p);
gmm_status gmm_formula_impl_fail(const parser *p, size_t pos, const char *what);
gmm_status gmm_formula_impl_nomem(void);
gmm_status gmm_formula_impl_name(parser *p, const char *what, char **out, size_t *pos);
gmm_status gmm_formula_impl_expect(parser *p, char c);
char *gmm_formula_impl_copy(const char *s, size_t n);
int gmm_formula_impl_name_start(int c);
int gmm_formula_impl_name_char(int c);

/* formula_expr.c: an expression node (NULL: out of memory), freed with its
 * operands (NULL-safe); R's arithmetic at the cursor (sum: + - * / ^ and
 * unary minus; atom: a NUMBER, NAME, call or parenthesis); pre, e's R text
 * and post (allocated; NULL: out of memory); the response at the cursor (a
 * NAME or an expression). */
gmm_formula_expr *gmm_formula_impl_expr_node(gmm_formula_op op, size_t pos, gmm_formula_expr *a,
                                             gmm_formula_expr *b);
void gmm_formula_impl_expr_free(gmm_formula_expr *e);
gmm_status gmm_formula_impl_expr_sum(parser *p, gmm_formula_expr **out);
gmm_status gmm_formula_impl_expr_atom(parser *p, gmm_formula_expr **out);
char *gmm_formula_impl_expr_label(const char *pre, const gmm_formula_expr *e, const char *post);
gmm_status gmm_formula_impl_response(parser *p);

/* formula_fixed.c: one fixed term at the cursor (the intercept's '1' and
 * '0', a cross of variables, offset()) added to p->f, or with minus removed
 * from it. */
gmm_status gmm_formula_impl_fixed_term(parser *p, int minus);
/* R's order of the fixed terms (by their number of variables, stable) and
 * their name and factor fields; called once the text is parsed. */
gmm_status gmm_formula_impl_fixed_finish(parser *p);
void gmm_formula_impl_fixed_free(gmm_formula *f);

#endif
