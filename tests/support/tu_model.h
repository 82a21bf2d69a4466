/* tu_model.h -- kernels and likelihoods from their text, for the suites: a
 * text that does not parse or build fails the test through Check's
 * ck_assert (naming the text and the library's message). */
#ifndef GMM_TU_MODEL_H
#define GMM_TU_MODEL_H

#include "gmm/kernel.h"
#include "gmm/likelihood.h"
#include "gmm/model.h"

/* The kernel of a spec text (gmm_spec_parse, gmm_kernel_from_spec); the
 * caller gmm_kernel_free()s it. */
gmm_kernel *tu_kernel_of(const char *text);

/* The likelihood of a text (gmm_lik_parse); each parameter the text leaves
 * unset (NAN) gets `unset`, unless `unset` is NAN itself (then all stay as
 * parsed). */
gmm_lik tu_lik_of(const char *text, double unset);

/* s initialised (gmm_mdl_spec_init) as a Poisson model of the column
 * "count" on the graph `edges`, its nodes in the column "node" of `nodes`,
 * with the graph precision `precision`; the strings are not copied. */
void tu_graph_count_spec(gmm_mdl_spec *s, const char *nodes, const char *edges,
                         const char *precision);

#endif
