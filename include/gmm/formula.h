/* formula.h -- a model as an analyst writes it, 'RESPONSE ~ TERMS':
 *
 *   formula := NAME '~' ['-'] term (('+' | '-') term)*
 *   term    := '1' | '0' | NAME | 'factor' '(' NAME ')'
 *            | 'f' '(' NAME ',' MODEL (',' KEY ['=' VALUE ['fixed']])* ')'
 *   MODEL   := NAME | QUOTED          VALUE := QUOTED | text up to ',' or ')'
 *
 * NAME is a column of the data, [A-Za-z_.][A-Za-z0-9_.]*; QUOTED is text in
 * single or double quotes (no escapes).  '1' asks for the intercept (present
 * by default), '0' and '-1' drop it; '-' may only precede '1'.  A NAME is a
 * numeric covariate; factor(NAME) a categorical column; f(NAME, MODEL, ...)
 * a latent component indexed by column NAME; a KEY without '=' VALUE is a
 * flag (f(w, rw2, cyclic)), its value "".  The word 'fixed' after a value
 * (f(g, iid, variance=0.5 fixed)) marks it: the value is not part of it
 * (a bare value's blanks before the word are dropped too), and the model
 * layer holds the parameter so given at it.  The parser knows no model
 * names: the model layer (model.h) checks MODEL and the keys, using the
 * positions below to point at the offending character.
 *
 * R's other formula operators are errors that say so, at the operator:
 * ':' and '*' (interactions), '/' and %in% (nesting), '^', '|' (lme4's
 * (1 | g): f(g, iid) is suggested), '.', parentheses and a second '~'.  The
 * response may not be a term too (y ~ y, factor(y), f(y, ...)): an error
 * at the term's first use.
 */
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

/* Parse text into *out (freed with gmm_formula_free; NULL on failure).
 * Errors: GMM_EPARSE with gmm_error_index() the offset of the offending
 * character (strlen(text) when the text ends too early) and a message that
 * does not repeat it ("expected '~' after the response", "a term appears
 * twice: 'x'"); GMM_EINVAL (NULL), GMM_ENOMEM.  O(strlen(text)). */
gmm_status gmm_formula_parse(const char *text, gmm_formula **out);
void gmm_formula_free(gmm_formula *f); /* NULL-safe */

/* The value of key `key` of latent term t (NULL when not given, "" for a
 * flag); *pos (may be NULL) its offset. */
const char *gmm_formula_arg_find(const gmm_formula_latent *t, const char *key, size_t *pos);

#endif
