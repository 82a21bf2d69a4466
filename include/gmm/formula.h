/* formula.h -- a model as an analyst writes it, 'RESPONSE ~ TERMS': the
 * parsed terms with the offset of every token, so that the model layer
 * (model.h), which gives the terms their meaning, can point at the
 * offending character.  The grammar's choices: src/mdl/formula.c. */
#ifndef GMM_FORMULA_H
#define GMM_FORMULA_H

#include <stddef.h>

#include "gmm/status.h"

/* A fixed term: a covariate or a factor, in the order written. */
typedef struct {
    char *name;
    int factor;      /* nonzero: factor(NAME) */
    size_t pos;      /* offset of the column name in the text */
} gmm_formula_fixed;

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
    char *response;
    size_t response_pos;
    int intercept;            /* 1 unless '0' or '-1' */
    size_t nfixed;
    gmm_formula_fixed *fixed;
    size_t nlatent;
    gmm_formula_latent *latent;
} gmm_formula;

/* Parse text into *out (freed with gmm_formula_free; NULL on failure):
 *
 *   formula := NAME '~' ['-'] term (('+' | '-') term)*
 *   term    := '1' | '0' | NAME | 'factor' '(' NAME ')'
 *            | 'f' '(' NAME ',' MODEL (',' KEY ['=' VALUE ['fixed']])* ')'
 *            | '(' effects ('|' | '||') group ('/' group)* ')'   (lme4's)
 *   effects := effect (('+' | '-') effect)*   effect := '1' | '0' | NAME
 *            | 'factor' '(' NAME ')'          group := NAME (':' NAME)*
 *   MODEL   := NAME | QUOTED          VALUE := QUOTED | text up to ',' or ')'
 *
 * NAME [A-Za-z_.][A-Za-z0-9_.]*, QUOTED in single or double quotes (no
 * escapes); model names and keys are not checked here.  Errors:
 * GMM_EPARSE with gmm_error_index() the offset of the offending character
 * (strlen(text) when the text ends too early) and a message that does not
 * repeat it ("expected '~' after the response", "a term appears twice:
 * 'x'"); GMM_EINVAL (NULL), GMM_ENOMEM.  O(strlen(text)). */
gmm_status gmm_formula_parse(const char *text, gmm_formula **out);
void gmm_formula_free(gmm_formula *f); /* NULL-safe */

/* The value of key `key` of latent term t (NULL when not given, "" for a
 * flag); *pos (may be NULL) its offset. */
const char *gmm_formula_arg_find(const gmm_formula_latent *t, const char *key, size_t *pos);

#endif
