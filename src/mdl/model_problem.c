/* model_problem.c -- the problem (problem.h) a built model evaluates: the
 * latent and the likelihood joined with the data, the parameters named after
 * the formula's terms, and the coefficients' scale. */

#include "model_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/problem.h"
#include "gmm/stack.h"

/* A formula's latent parameters named after their term: the latent's
 * "LEAF.KIND.PARAM" becomes "f.NAME.PARAM" for a model named by a keyword
 * (f(g, iid): "f.g.variance"), "f.NAME.KIND.PARAM" for a spec
 * (f(t, 'matern32 + periodic'): "f.t.matern32.lengthscale",
 * "f.t.periodic.period"), a kind that recurs in a sum numbered from its
 * second leaf on ("f.t.matern32.2.variance").  Latent parameters i0..i1-1
 * of term t, their names read from character skip on (a stack's graph
 * precision is named "f.NAME.LEAF.KIND.PARAM" by the latent). */
static gmm_status rename_leaves(gmm_mdl *m, const gmm_formula_latent *t, size_t i0, size_t i1,
                                size_t skip)
{
    for (size_t i = i0; i < i1; i++) {
        const char *orig = gmm_latent_param_name(m->lat, i) + skip;
        const char *k0 = strchr(orig, '.'), *p0 = k0 ? strchr(k0 + 1, '.') : NULL;
        if (!p0)
            return gmm_error(GMM_EINVAL, "latent parameter '%s' is not LEAF.KIND.PARAM", orig);
        size_t klen = (size_t)(p0 - k0 - 1);
        unsigned long leaf = strtoul(orig, NULL, 10);
        /* this leaf's rank among the leaves of its kind */
        size_t rank = 1;
        unsigned long last = leaf;
        for (size_t j = i0; j < i; j++) {
            const char *o2 = gmm_latent_param_name(m->lat, j) + skip, *k2 = strchr(o2, '.');
            unsigned long l2 = strtoul(o2, NULL, 10);
            if (l2 != leaf && l2 != last && !strncmp(k2 + 1, k0 + 1, klen) &&
                k2[klen + 1] == '.') {
                rank++;
                last = l2;
            }
        }
        char suffix[24] = "";
        if (rank > 1)
            snprintf(suffix, sizeof suffix, ".%zu", rank);
        char name[64];
        int len = !t->quoted && !strcmp(t->model, "iid")
                      ? snprintf(name, sizeof name, "f.%s%s", t->name, p0)
                      : snprintf(name, sizeof name, "f.%s.%.*s%s%s", t->name, (int)klen, k0 + 1,
                                 suffix, p0);
        if (len < 0 || (size_t)len >= sizeof name)
            return gmm_error(GMM_EINVAL,
                             "formula: the parameter name '%s' is too long (%zu "
                             "bytes at most)",
                             name, sizeof name - 1);
        strcpy(m->obj->name[i], name);
    }
    return GMM_OK;
}

/* The formula's names for the latent's parameters (rename_leaves): the
 * one f() term's, or a stack's graph precisions' and kernels' (its other components are
 * named f.NAME.variance, f.NAME.phi by the latent).  The shorthand options
 * keep the latent's names. */
static gmm_status term_names(gmm_mdl *m)
{
    if (!m->fm)
        return GMM_OK;
    if (!m->stack)
        return m->fm->nlatent == 1
                   ? rename_leaves(m, &m->fm->latent[0], 0, gmm_latent_nparam(m->lat), 0)
                   : GMM_OK;
    /* a stack's components hold their parameters one after another */
    size_t i0 = 0;
    for (size_t k = 0; k < m->fm->nlatent; k++) {
        const gmm_formula_latent *t = &m->fm->latent[k];
        int mk = gmm_mdl_impl_term_model(t);
        size_t np = m->sgmrf[k]   ? m->sgmrf[k]->nparam
                    : m->skern[k] ? gmm_kernel_nparam(m->skern[k])
                    : mk >= 0 && gmm_mdl_impl_term_kind(mk) == GMM_STACK_BYM2 ? 2
                    : m->scorr && m->scorr[k].k ? m->scorr[k].k * (m->scorr[k].k + 1) / 2
                                                : 1;
        gmm_status s;
        if ((m->sgmrf[k] || m->skern[k]) &&
            (s = rename_leaves(m, t, i0, i0 + np, strlen(t->name) + 3)) != GMM_OK)
            return s;
        i0 += np;
    }
    return GMM_OK;
}

/* Likelihood defaults, the problem, the objective; starting values.
 * verbose: report the defaults chosen and the model's summary. */
gmm_status gmm_mdl_impl_build_problem(const mdl_build *b, gmm_mdl *m, double noise,
                                      double intercept, int verbose)
{
    gmm_status s;
    if ((s = gmm_mdl_impl_check_outcomes(m)) != GMM_OK)
        return s;
    if (!isnan(noise))
        m->lik.par[0] = noise; /* Gaussian only: checked by the caller */
    int defaulted[GMM_LIK_MAXPARAM];
    for (size_t k = 0; k < m->lik.type->nparam; k++)
        defaulted[k] = isnan(m->lik.par[k]);
    if ((s = gmm_lik_fill_defaults(&m->lik, m->y, m->nrow)) != GMM_OK)
        return s;
    for (size_t k = 0; verbose && k < m->lik.type->nparam; k++)
        if (defaulted[k]) {
            char name[64];
            gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO, "default %s = %.6g",
                                gmm_lik_param_name(&m->lik, k, name), m->lik.par[k]);
        }
    int has_b = m->ncoef > 0 && !strcmp(m->coef_name[0], "intercept");
    double b0 = intercept;
    if (has_b && isnan(b0) &&
        (s = gmm_lik_default_intercept(&m->lik, m->y, m->e, m->nrow, &b0)) != GMM_OK)
        return s;
    if (has_b && verbose && isnan(intercept))
        gmm_mdl_impl_report(b, GMM_MDL_REPORT_INFO, "default intercept = %.6g", b0);
    /* covariates and factor levels start at 0 */
    size_t nc = m->ncoef ? m->ncoef : 1;
    double *start = gmm_calloc(nc, sizeof *start);
    const char **names = gmm_calloc(nc, sizeof *names);
    if (!start || !names) {
        gmm_free(start);
        gmm_free((void *)names);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < m->ncoef; k++)
        names[k] = m->coef_name[k];
    if (has_b)
        start[0] = b0;
    /* offset() terms: columns whose coefficient is 1, held */
    for (size_t k = m->ncoef - m->noffset; k < m->ncoef; k++)
        start[k] = 1.0;
    gmm_problem_design d = {m->ncoef, m->X, names, start, 1};
    m->factor = b->s->desc.factor;
    s = gmm_mdl_impl_choose_factor(b, m);
    if (s == GMM_OK)
        s = m->sparse ? gmm_problem_alloc_sparse(m->lat, &m->lik, m->y, m->e, &d, &m->prob)
                      : gmm_problem_alloc_design(m->lat, &m->lik, m->y, m->e, &d, &m->prob);
    if (s == GMM_OK && m->wt)
        s = gmm_problem_set_weights(m->prob, m->wt);
    gmm_free(start);
    gmm_free((void *)names);
    if (s != GMM_OK) {
        if (s == GMM_EINVAL && gmm_error_index() < m->nrow)
            return gmm_mdl_impl_check_outcomes(m);
        return s;
    }
    m->obj = gmm_problem_objective(m->prob);
    for (size_t k = m->ncoef - m->noffset; k < m->ncoef; k++)
        m->obj->fixed[m->obj->nparam - m->ncoef + k] = 1;
    if ((s = term_names(m)) != GMM_OK)
        return s;
    if (verbose)
        gmm_mdl_impl_report(
            b, GMM_MDL_REPORT_SUMMARY,
            "%s latent model: %zu latent variables, bandwidth %zu; likelihood %s (%s); %zu "
            "coefficient(s)",
            gmm_latent_family(m->lat), gmm_latent_dim(m->lat), gmm_latent_bandwidth(m->lat),
            m->lik.type->name,
            m->lik.type->conjugate && !m->sparse ? "exact marginal likelihood"
                                                   : "Laplace approximation",
            m->ncoef);
    return GMM_OK;
}

/* The coefficients' scale for the optimisers (problem.h): the design's QR
 * over the free coefficients; a column in the span of those before it is
 * dropped -- held at 0, written as null -- and named, as R's lm and lme4
 * do ("fixed-effect model matrix is rank deficient so dropping 1 column /
 * coefficient"); a model file's null is such a column already. */
gmm_status gmm_mdl_impl_coef_basis(const mdl_build *b, gmm_mdl *m, int from_file)
{
    size_t nc = m->ncoef, c0 = m->obj->nparam - nc;
    gmm_free(m->aliased);
    gmm_free(m->desc_value);
    m->desc_value = gmm_malloc(m->obj->nparam, sizeof *m->desc_value);
    if (!(m->aliased = gmm_calloc(nc, sizeof *m->aliased)) || !m->desc_value)
        return gmm_error(GMM_ENOMEM, "out of memory");
    int *drop = gmm_calloc(nc, sizeof *drop);
    double *keep = gmm_malloc(nc ? nc : 1, sizeof *keep);
    if (!drop || !keep) {
        gmm_free(drop);
        gmm_free(keep);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    memcpy(keep, m->obj->value + c0, nc * sizeof *keep);
    gmm_status s = gmm_problem_coef_basis(m->prob, GMM_ALIAS_TOL, drop);
    size_t nd = 0;
    char names[768] = "";
    for (size_t k = 0; s == GMM_OK && k < nc; k++) {
        double v;
        if (from_file && gmm_mdl_impl_model_value(b->s->values, m->obj->name[c0 + k], &v) &&
            isnan(v))
            m->aliased[k] = 1;
        if (!drop[k])
            continue;
        if (from_file && !m->aliased[k]) {
            /* estimated by the model but aliased in these data: held at its value (the QR
             * left it out of the basis), never set to 0 */
            m->obj->value[c0 + k] = keep[k];
            gmm_mdl_impl_report(
                b, GMM_MDL_REPORT_WARNING,
                "warning: the column of %s is aliased in these data: held at the model's "
                "value %.6g",
                m->obj->name[c0 + k], keep[k]);
            continue;
        }
        m->aliased[k] = 1;
        size_t len = strlen(names);
        if (len < sizeof names - 80)
            snprintf(names + len, sizeof names - len, "%s%s", nd ? ", " : "",
                     m->obj->name[c0 + k]);
        nd++;
    }
    if (nd && !from_file)
        gmm_mdl_impl_report(
            b, GMM_MDL_REPORT_WARNING,
            "warning: fixed-effect model matrix is rank deficient so dropping %zu column%s "
            "(not estimated): %s",
            nd, nd > 1 ? "s" : "", names);
    gmm_free(drop);
    gmm_free(keep);
    return s;
}
