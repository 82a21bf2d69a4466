/* specstub.h -- TEMPORARY test scaffolding: a minimal parser for kernel spec
 * strings producing gmm_spec_node trees (include/gmm/spec.h), used by the
 * model tests until the real gmm_spec_parse (branch io) lands on main.  No
 * error reporting beyond NULL; test-only, never linked into the tool. */
#ifndef GMM_TESTS_SPECSTUB_H
#define GMM_TESTS_SPECSTUB_H

#include "gmm/spec.h"

gmm_spec_node *tu_spec_parse(const char *text);
void tu_spec_free(gmm_spec_node *n);

#endif
