/* formula_impl.h -- the parts of the formula parser (formula.h) in files of
 * their own.  Private to src/mdl/. */
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

#endif
