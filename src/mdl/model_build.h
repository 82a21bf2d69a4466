/* model_build.h -- what the files that build a model (model.c and those it
 * calls, listed in model_impl.h) share: the build under way and the steps
 * each of them takes. */
#ifndef GMM_MODEL_BUILD_H
#define GMM_MODEL_BUILD_H

#include "model_impl.h"

/* What one build works with: the description, where a failure is told. */
typedef struct {
    const gmm_mdl_spec *s;
    gmm_mdl_failure *fail;
    /* a formula's f() spec: its text within the formula, which errors in
     * it point into (ftext NULL: no formula) */
    const char *ftext, *fspec;
    size_t fbase;
    int edgeless;       /* f(NAME, iid): a graph of the levels alone */
    int default_kernel; /* the description named no latent: GMM_MDL_DEFAULT_KERNEL */
} mdl_build;

/* ---- what a build tells (model_build_msg.c) ------------------------------- */

/* A report to the spec's callback (dropped without one). */
void gmm_mdl_impl_report(const mdl_build *b, gmm_mdl_report kind, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A contradictory description, rule r broken: GMM_EINVAL with usage set. */
gmm_status gmm_mdl_impl_usage_error(const mdl_build *b, gmm_mdl_rule r, const char *msg);
/* A spec error under KEY, at the library's error index: status s. */
gmm_status gmm_mdl_impl_spec_error(const mdl_build *b, const char *key, const char *text,
                                   gmm_status s);
/* GMM_EPARSE at offset pos of the formula, with the caret there. */
gmm_status gmm_mdl_impl_formula_error(const mdl_build *b, size_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* gmm_spec_parse, its error told under key. */
gmm_status gmm_mdl_impl_parse_spec(const mdl_build *b, const char *key, const char *text,
                                   gmm_spec_node **out);

/* ---- the description's consistency (model_rules.c) ------------------------ */

/* Fields that exclude each other, said before anything is read. */
gmm_status gmm_mdl_impl_check_spec(const mdl_build *b, const gmm_lik *lik);
/* "  name\n" for each of m's parameters, into fail->params. */
void gmm_mdl_impl_list_params(const mdl_build *b, const gmm_mdl *m);
/* Hold the parameter `fix` fixed (a usage error listing the parameters when
 * m has none of that name). */
gmm_status gmm_mdl_impl_fix_param(const mdl_build *b, gmm_mdl *m, const char *fix);
/* The outcomes against the likelihood, naming file, line and column. */
gmm_status gmm_mdl_impl_check_outcomes(gmm_mdl *m);

/* ---- the formula's meaning (model_formula_terms.c) ------------------------ */

/* Parse the spec's formula into m->fm and fill *d: the spec with the
 * latent, its column and the response from the formula. */
gmm_status gmm_mdl_impl_apply_formula(mdl_build *b, gmm_mdl *m, gmm_mdl_spec *d);
/* The keyword terms' start values and 'fixed' flags on the objective
 * (from_file: start values stay the file's). */
gmm_status gmm_mdl_impl_term_values(const mdl_build *b, gmm_mdl *m, int from_file);
/* A walk's cyclic flag and period (rw1, rw2). */
gmm_status gmm_mdl_impl_term_cyclic(const mdl_build *b, const gmm_formula_latent *t, int *cyclic,
                                    double *period);
/* A keyword term's group=, control=, replicate= and (seasonal) period=
 * into st (control, season) and the columns' names (NULL: absent). */
gmm_status gmm_mdl_impl_term_group(const mdl_build *b, const gmm_formula_latent *t,
                                   gmm_stack_term *st, const char **group,
                                   const char **replicate);

/* ---- the latent (model_latent_build.c) ------------------------------------ */

/* model_factor.c: the band or the sparse factorisation for m's latent, as
 * the description asks or (auto) from their predicted costs: m->sparse;
 * with spec.verbose the choice, its reason and both predictions reported.
 * GMM_EINVAL when the sparse one is asked for a latent without a sparse
 * prior; the analysis' errors. */
gmm_status gmm_mdl_impl_choose_factor(const mdl_build *b, gmm_mdl *m);

gmm_status gmm_mdl_impl_build_ssm(const mdl_build *b, gmm_mdl *m);
gmm_status gmm_mdl_impl_build_graph(const mdl_build *b, gmm_mdl *m, gmm_table *data, int strict);
gmm_status gmm_mdl_impl_build_stack(mdl_build *b, gmm_mdl *m, const gmm_table *data);
/* model_bars.c: the effects of bar term t over data into *c (see
 * model_impl.h's mdl_corr); errors point at the effect. */
gmm_status gmm_mdl_impl_corr_effects(const mdl_build *b, const gmm_formula_latent *t,
                                     const gmm_table *data, mdl_corr *c);

/* ---- rows with missing values (model_na.c) -------------------------------- */

/* Drop from t the rows with a missing value in a column the model uses (the
 * formula's covariates, factors and latent terms' columns, x or node; the
 * weights where the outcome is observed), as R's na.omit: *dropped their
 * number.  GMM_ENOMEM. */
gmm_status gmm_mdl_impl_omit_missing(gmm_mdl *m, const gmm_model_desc *d, gmm_table *t,
                                     size_t *dropped);

/* ---- the problem (model_problem.c) ----------------------------------------- */

/* The problem and objective of m's latent, likelihood and data, with the
 * Gaussian noise and the intercept's start (NAN: the defaults). */
gmm_status gmm_mdl_impl_build_problem(const mdl_build *b, gmm_mdl *m, double noise,
                                      double intercept, int verbose);
/* The coefficients' scale for the optimisers: the design's QR over the free
 * coefficients, aliased columns held at 0 (from_file: the file's nulls). */
gmm_status gmm_mdl_impl_coef_basis(const mdl_build *b, gmm_mdl *m, int from_file);

/* ---- a model file's values (model_values.c) ------------------------------- */

/* The path a model file records for an input: absolute, so the model works
 * from any directory and wherever it is moved ("-" stays "-"); allocated. */
char *gmm_mdl_impl_record_path(const char *path);
/* The value of parameter `name` in a model file: 1 and *v, or 0. */
int gmm_mdl_impl_model_value(const gmm_model *mf, const char *name, double *v);
/* Every parameter's value from the model file mf (named mp in messages). */
gmm_status gmm_mdl_impl_take_values(const mdl_build *b, gmm_mdl *m, const gmm_model *mf,
                                    const char *mp);

#endif
