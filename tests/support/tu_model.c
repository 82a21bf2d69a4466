/* tu_model.c -- see tu_model.h. */
#include "support/tu_model.h"

#include <check.h>
#include <math.h>

#include "gmm/spec.h"
#include "gmm/status.h"

gmm_kernel *tu_kernel_of(const char *text)
{
    gmm_spec_node *s = NULL;
    ck_assert_msg(gmm_spec_parse(text, &s) == GMM_OK, "parse %s: %s", text, gmm_error_message());
    gmm_kernel *k = NULL;
    gmm_status st = gmm_kernel_from_spec(s, &k);
    ck_assert_msg(st == GMM_OK, "%s: %s", text, gmm_error_message());
    gmm_spec_free(s);
    return k;
}

gmm_lik tu_lik_of(const char *text, double unset)
{
    gmm_lik l;
    ck_assert_msg(gmm_lik_parse(text, &l) == GMM_OK, "'%s': %s", text, gmm_error_message());
    for (size_t k = 0; !isnan(unset) && k < l.type->nparam; k++)
        if (isnan(l.par[k]))
            l.par[k] = unset;
    return l;
}

void tu_graph_count_spec(gmm_mdl_spec *s, const char *nodes, const char *edges,
                         const char *precision)
{
    gmm_mdl_spec_init(s);
    s->desc.data.file = nodes;
    s->desc.graph = edges;
    s->desc.precision = precision;
    s->desc.data.node = "node";
    s->desc.data.y = "count";
    s->desc.likelihood = "poisson";
}
