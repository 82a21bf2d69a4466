/* model_rules.c -- the description's consistency: fields that exclude or
 * need each other, the names of parameters held fixed, and the data's
 * outcomes against the likelihood.
 *
 * THE FIELDS (model.h: gmm_mdl_rule names each broken rule).  A kernel or
 * a graph with its precision, not both; edge_cols with a named length
 * requires that column (with a model file's values it is optional);
 * merge_tol for state-space models and a formula's kernel terms;
 * data.exposure for a likelihood whose per-row quantity (rowq) is
 * "exposure", data.trials for one whose rowq is "trials", at most one of
 * the two; likelihood NULL is "gaussian". */

#include "model_build.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/problem.h"
#include "gmm/ssm.h"
#include "gmm/stack.h"

/* Fields that exclude each other, said before anything is read. */
gmm_status gmm_mdl_impl_check_spec(const mdl_build *b, const gmm_lik *lik)
{
    const gmm_mdl_spec *o = b->s;
    const char *mp = o->values_name ? o->values_name : "<stdin>";
    /* the per-row quantity's column, under the name the family reads */
    const char *qname = o->desc.data.exposure ? "exposure" : o->desc.data.trials ? "trials" : NULL;
    int q_ok = !qname || (lik->type->rowq && !strcmp(lik->type->rowq, qname));
    if (o->values) {
        if (!q_ok || (o->desc.data.exposure && o->desc.data.trials))
            return gmm_error(
                GMM_EPARSE, "%s: \"data.%s\" given for the %s likelihood, which has none", mp,
                o->desc.data.trials && !q_ok ? "trials" : "exposure", lik->type->name);
        if (o->desc.precision && (!o->desc.data.node || !o->desc.data.y))
            return gmm_error(GMM_EPARSE,
                             "%s: a graph model needs \"data\": {\"node\": ..., \"y\": ...}", mp);
        return GMM_OK;
    }
    int g = o->desc.graph != NULL || b->edgeless;
    if (g && o->desc.kernel)
        return gmm_mdl_impl_usage_error(b, GMM_MDL_RULE_KERNEL_AND_GRAPH,
                                        "a kernel and a graph exclude each other");
    if (!g && (o->desc.precision || o->desc.data.node || o->desc.edge_cols[0]))
        return gmm_mdl_impl_usage_error(
            b, GMM_MDL_RULE_GRAPH_FIELDS,
            "a precision, a node column and edge columns need a graph");
    if (g && (!o->desc.precision || !o->desc.data.node || !o->desc.data.y))
        /* --y has no default for graphs: node files often carry coordinate
         * columns named x and y, and modelling one by accident is silent. */
        return gmm_mdl_impl_usage_error(b, GMM_MDL_RULE_GRAPH_NEEDS,
                                        "a graph needs a precision, a node column and a y column");
    if (g && (o->desc.data.x || o->desc.merge_tol > 0))
        return gmm_mdl_impl_usage_error(
            b, GMM_MDL_RULE_STATE_SPACE_FIELDS,
            "an x column and merge_tol apply to state-space models, not to a "
            "graph");
    if (o->desc.data.exposure && o->desc.data.trials)
        return gmm_mdl_impl_usage_error(b, GMM_MDL_RULE_EXPOSURE_AND_TRIALS,
                                        "an exposure and a trials column exclude each other");
    if (lik->type->conjugate && !o->desc.formula) {
        if (o->desc.data.exposure || o->no_intercept || !isnan(o->intercept))
            return gmm_mdl_impl_usage_error(
                b, GMM_MDL_RULE_NON_GAUSSIAN_FIELDS,
                "an exposure, an intercept and no_intercept apply to "
                "non-Gaussian likelihoods (Gaussian data are centred instead)");
    }
    if (!q_ok) {
        b->fail->usage = 1;
        b->fail->rule = GMM_MDL_RULE_ROW_COLUMN;
        return gmm_error(GMM_EINVAL, "%s: the %s likelihood has no %s", qname, lik->type->name,
                         qname);
    }
    if (!lik->type->conjugate) {
        if (!isnan(o->noise) || o->no_center)
            return gmm_mdl_impl_usage_error(
                b, GMM_MDL_RULE_GAUSSIAN_FIELDS,
                "noise and no_center apply to the Gaussian likelihood (the "
                "likelihood's own parameters are in its spec, e.g. "
                "'negbinomial(dispersion=2)')");
        if (o->no_intercept && !isnan(o->intercept))
            return gmm_mdl_impl_usage_error(b, GMM_MDL_RULE_INTERCEPT_AND_NONE,
                                            "an intercept and no_intercept exclude each other");
    }
    return GMM_OK;
}

/* "  name\n" for each of m's parameters, into fail->params. */
void gmm_mdl_impl_list_params(const mdl_build *b, const gmm_mdl *m)
{
    size_t len = 1;
    for (size_t k = 0; k < m->obj->nparam; k++)
        len += strlen(m->obj->name[k]) + 3;
    char *p = gmm_malloc(len, 1);
    if (!p)
        return;
    size_t at = 0;
    for (size_t k = 0; k < m->obj->nparam; k++)
        at += (size_t)sprintf(p + at, "  %s\n", m->obj->name[k]);
    p[at] = '\0';
    b->fail->params = p;
}

/* Hold the parameter `name` fixed. */
gmm_status gmm_mdl_impl_fix_param(const mdl_build *b, gmm_mdl *m, const char *fix)
{
    /* "noise.variance": the Gaussian variance's name before 0.2 */
    const char *name =
        !strcmp(fix, "noise.variance") && m->lik.type->conjugate ? "likelihood.variance" : fix;
    for (size_t i = 0; i < m->obj->nparam; i++)
        if (!strcmp(m->obj->name[i], name)) {
            m->obj->fixed[i] = 1;
            return GMM_OK;
        }
    b->fail->fix = 1;
    b->fail->usage = 1;
    gmm_mdl_impl_list_params(b, m);
    return gmm_error(GMM_EINVAL, "no parameter '%s'; the parameters are:", fix);
}

/* The outcomes against the likelihood, naming file, line and column. */
gmm_status gmm_mdl_impl_check_outcomes(gmm_mdl *m)
{
    gmm_status s = gmm_lik_check_data(&m->lik, m->y, m->e, m->nrow);
    if (s == GMM_OK)
        return GMM_OK;
    size_t r = gmm_error_index();
    if (r == GMM_NO_INDEX || r >= m->nrow)
        return s;
    char why[GMM_ERROR_MAX];
    snprintf(why, sizeof why, "%s", gmm_error_message());
    /* which column is at fault: the row's own check says */
    int fault = 0;
    gmm_lik_check_row(&m->lik, m->y[r], m->e ? m->e + r : NULL, &fault);
    const char *col = fault == 1 && m->ename ? m->ename : m->yname;
    return gmm_error_at(s, r, "%s:%zu: column '%s': %s", m->data_file, m->line[r], col, why);
}
