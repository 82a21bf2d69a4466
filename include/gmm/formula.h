/* formula.h -- a model as an analyst writes it, 'RESPONSE ~ TERMS': the
 * parsed terms with the offset of every token, so that the model layer
 * (model.h), which gives the terms their meaning, can point at the
 * offending character.  The grammar's choices: src/mdl/formula.c. */
#ifndef GMM_FORMULA_H
#define GMM_FORMULA_H

#include <stddef.h>

#include "gmm/status.h"

/* An expression over numeric columns and constants (I(), log(), exp(),
 * sqrt(), poly()'s and offset()'s argument, a transformed response), as
 * parsed: a PAREN node keeps the parentheses written (R deparses them). */
typedef enum {
    GMM_FX_NUM, GMM_FX_COL, GMM_FX_NEG, GMM_FX_PAREN,
    GMM_FX_ADD, GMM_FX_SUB, GMM_FX_MUL, GMM_FX_DIV, GMM_FX_POW,
    GMM_FX_I, GMM_FX_LOG, GMM_FX_EXP, GMM_FX_SQRT
} gmm_formula_op;

typedef struct gmm_formula_expr {
    gmm_formula_op op;
    double num;                     /* GMM_FX_NUM */
    char *name;                     /* GMM_FX_COL: the column */
    size_t pos;                     /* offset of the token (a call's name) */
    struct gmm_formula_expr *a, *b; /* operands (unary and calls: a) */
} gmm_formula_expr;

/* A variable of the fixed terms (R's "variables" of a terms object), each
 * once, numbered in order of first appearance: a numeric expression, a
 * factor or orthogonal polynomials. */
typedef enum { GMM_FV_NUMERIC, GMM_FV_FACTOR, GMM_FV_POLY } gmm_formula_vkind;

typedef struct {
    gmm_formula_vkind kind;
    char *label;           /* R's deparsed text: "x", "factor(g)", "I(x^2)",
                            * "log(x + 1)", "poly(x, 2)" */
    char *name;            /* FACTOR: the column; NUMERIC: the column of a bare
                            * NAME, else NULL */
    char *ref;             /* FACTOR: factor(g, ref = "B")'s level, or NULL */
    size_t ref_pos;
    int degree;            /* POLY */
    gmm_formula_expr *e;   /* NUMERIC and POLY: the values */
    size_t pos;            /* offset of the variable's first character */
} gmm_formula_var;

/* A fixed term: a set of variables (an interaction when more than one), in
 * R's order -- by the number of variables, then as written, duplicates and
 * terms removed by '- term' left out.  name and factor describe a term of
 * one variable that is a column (NAME or factor(NAME)); otherwise name is
 * the term's label. */
typedef struct {
    char *name;
    int factor;      /* nonzero: factor(NAME) */
    size_t pos;      /* offset of the term's first character */
    unsigned long long vars; /* bit v: variable v is in the term */
    size_t order;    /* the number of variables */
    int crossed;     /* made by '*' (a*b's a, b and a:b) */
} gmm_formula_fixed;

/* A term offset(EXPR): a known shift of the linear predictor. */
typedef struct {
    char *label;     /* "offset(log(e))" */
    gmm_formula_expr *e;
    size_t pos;
} gmm_formula_offset;

typedef struct {
    char *key, *value;
    size_t pos, vpos; /* offsets of the key and of the value's first character
                       * (inside the quotes when quoted; a flag's: the key's) */
    int flag;         /* nonzero: KEY alone, value "" */
    int fixed;        /* nonzero: KEY=VALUE fixed */
    size_t fixed_pos; /* offset of the word 'fixed' (when fixed) */
} gmm_formula_arg;

/* A latent term f(NAME, MODEL, KEY=VALUE, ...). */
typedef struct {
    char *name;
    size_t pos;
    char *model;       /* the MODEL text, without quotes */
    size_t model_pos;  /* offset of its first character (inside the quotes) */
    int quoted;
    size_t narg;
    gmm_formula_arg *arg;
    /* lme4's (EFFECTS | GROUP) (formula_bars.c) sets bar: model "iid" for
     * an intercept alone (the same as f(GROUP, iid)), else "corr" with the
     * neffect effects in order, the intercept first, named "(Intercept)" or
     * by their column (factor: factor(NAME), one effect per level),
     * effect_pos their offsets.  name is the grouping column, or for an
     * interaction a:b the factors group[0 .. ngroup-1] joined by ':' (a
     * column the model layer derives); label lme4's name for the group,
     * the name with ".1", ".2" ... for a repeated grouping. */
    int bar;
    size_t neffect;
    char **effect;
    int *effect_factor;
    size_t *effect_pos;
    size_t ngroup;
    char **group;
    char *label;
} gmm_formula_latent;

typedef struct {
    char *response;           /* the response's column (its first column when
                               * transformed) */
    size_t response_pos;
    gmm_formula_expr *response_expr; /* log(y) ~ ...: the transform, NULL for a NAME */
    char *response_label;     /* R's text of the response ("log(y)") */
    int intercept;            /* 1 unless '0' or '-1' */
    size_t nfixed;
    gmm_formula_fixed *fixed;
    size_t nvar;              /* at most 64 */
    gmm_formula_var *var;
    size_t noffset;
    gmm_formula_offset *offset;
    size_t ncolumn;           /* the columns the fixed terms and offsets read,
                               * each once, in order of first use */
    char **column;
    size_t nlatent;
    gmm_formula_latent *latent;
} gmm_formula;

/* Parse text into *out (freed with gmm_formula_free; NULL on failure):
 *
 *   formula := response '~' ['-'] term (('+' | '-') term)*
 *   response:= NAME | expr
 *   term    := '1' | '0' | cross | 'offset' '(' expr ')'
 *            | 'f' '(' NAME ',' MODEL (',' KEY ['=' VALUE ['fixed']])* ')'
 *            | '(' effects ('|' | '||') group ('/' group)* ')'   (lme4's)
 *   effects := effect (('+' | '-') effect)*   effect := '1' | '0' | NAME
 *            | 'factor' '(' NAME ')'          group := NAME (':' NAME)*
 *   cross   := inter ('*' inter)*       a*b = a + b + a:b
 *   inter   := var (':' var)*
 *   var     := NAME | 'factor' '(' NAME [',' 'ref' '=' (QUOTED | NAME | NUMBER)] ')'
 *            | 'poly' '(' expr ',' INTEGER ')' | call
 *   call    := ('I' | 'log' | 'exp' | 'sqrt') '(' expr ')'
 *   expr    := R's arithmetic: + - * / ^ unary minus, parentheses, NUMBER,
 *              NAME, call
 *   MODEL   := NAME | QUOTED          VALUE := QUOTED | text up to ',' or ')'
 *
 * '-' before a term removes it ('- 1' the intercept, '- a:b', '- a*b' its
 * three terms).
 * NAME [A-Za-z_.][A-Za-z0-9_.]*, QUOTED in single or double quotes (no
 * escapes); model names and keys are not checked here.  Errors:
 * GMM_EPARSE with gmm_error_index() the offset of the offending character
 * (strlen(text) when the text ends too early) and a message that does not
 * repeat it ("expected '~' after the response", "a term appears twice:
 * 'x'"); GMM_EINVAL (NULL), GMM_ENOMEM.  O(strlen(text)). */
gmm_status gmm_formula_parse(const char *text, gmm_formula **out);
void gmm_formula_free(gmm_formula *f); /* NULL-safe */

/* R's deparsed text of e into buf (size bytes; truncated): spaces around
 * + - *, none around / and ^, numbers to 15 significant digits as R
 * prints them ("1e+05", "0.5"). */
void gmm_formula_expr_text(const gmm_formula_expr *e, char *buf, size_t size);

/* The value of key `key` of latent term t (NULL when not given, "" for a
 * flag); *pos (may be NULL) its offset. */
const char *gmm_formula_arg_find(const gmm_formula_latent *t, const char *key, size_t *pos);

#endif
