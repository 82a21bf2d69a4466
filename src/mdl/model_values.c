/* model_values.c -- what a model file holds for a model: the paths it
 * records, and every parameter's value taken back by name when a model is
 * rebuilt from its file or resumed from another result. */
/* realpath (XSI) */
#define _XOPEN_SOURCE 700

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

/* The path a model file records for an input: absolute, so the model works
 * from any directory and wherever it is moved ("-" stays "-"). */
char *gmm_mdl_impl_record_path(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return gmm_strdup(path);
    char *abs = realpath(path, NULL); /* malloc'ed by libc */
    char *r = gmm_strdup(abs ? abs : path);
    free(abs);
    return r;
}

/* The value of parameter `name` in a model file; format 1 files name the
 * Gaussian variance "noise.variance". */
int gmm_mdl_impl_model_value(const gmm_model *mf, const char *name, double *v)
{
    size_t k;
    if (gmm_model_param_index(mf, name, &k) == GMM_OK ||
        (!strcmp(name, "likelihood.variance") &&
         gmm_model_param_index(mf, "noise.variance", &k) == GMM_OK)) {
        *v = mf->param_value[k];
        return 1;
    }
    return 0;
}

/* Every parameter from the file, each in its domain, and no key the model
 * does not have (a typo or another model's file). */
gmm_status gmm_mdl_impl_take_values(const mdl_build *b, gmm_mdl *m, const gmm_model *mf,
                                    const char *mp)
{
    size_t nl = gmm_latent_nparam(m->lat);
    for (size_t i = 0; i < m->obj->nparam; i++) {
        /* a formula's latent parameter may be under the spec's own name
         * ("0.iid.variance"), as formula models were written before their
         * terms named them */
        if (!gmm_mdl_impl_model_value(mf, m->obj->name[i], &m->obj->value[i]) &&
            !(i < nl &&
              gmm_mdl_impl_model_value(mf, gmm_latent_param_name(m->lat, i), &m->obj->value[i]))) {
            /* a Gaussian formula's intercept was its data's centre before
             * it was estimated: the same model at the same value */
            if (!(m->lik.type->conjugate && m->fm && mf->has_center &&
                  !strcmp(m->obj->name[i], "intercept")))
                return gmm_error(GMM_EPARSE, "%s: \"parameters\" has no value for '%s'", mp,
                                 m->obj->name[i]);
            m->obj->value[i] = mf->center;
        }
        size_t c0 = m->obj->nparam - gmm_problem_ncoef(m->prob);
        if (i >= c0 && isnan(m->obj->value[i])) {
            /* null: a column the fit's QR dropped, held at 0 */
            m->obj->value[i] = 0.0;
            m->obj->fixed[i] = 1;
            continue;
        }
        gmm_scale sc = m->obj->scale[i];
        if (!gmm_scale_inside(sc, m->obj->value[i]) &&
            !(m->obj->value[i] == 0.0 && i < gmm_latent_nparam(m->lat) &&
              gmm_latent_param_zero_ok(m->lat, i)))
            return gmm_error(GMM_EPARSE,
                             "%s: parameter '%s' = %g is out of its domain (it must be %s)", mp,
                             m->obj->name[i], m->obj->value[i],
                             sc == GMM_SCALE_LOG ? "positive" : gmm_scale_domain(sc));
    }
    for (size_t k = 0; k < mf->nparam; k++) {
        const char *key = mf->param_name[k];
        size_t i;
        for (i = 0; i < m->obj->nparam; i++)
            if (!strcmp(key, m->obj->name[i]) ||
                (i < nl && !strcmp(key, gmm_latent_param_name(m->lat, i))) ||
                (!strcmp(key, "noise.variance") &&
                 !strcmp(m->obj->name[i], "likelihood.variance")))
                break;
        if (i == m->obj->nparam) {
            gmm_mdl_impl_list_params(b, m);
            return gmm_error(GMM_EPARSE,
                             "%s: unknown parameter '%s' in \"parameters\"; the model's are:", mp,
                             key);
        }
    }
    return GMM_OK;
}

gmm_status gmm_mdl_take_params(gmm_mdl *m, const gmm_model *src, const char *src_name)
{
    gmm_objective *obj = m->obj;
    for (size_t k = 0; k < obj->nparam; k++) {
        size_t j;
        if (gmm_model_param_index(src, obj->name[k], &j) != GMM_OK)
            return gmm_error(GMM_EINVAL, "%s: no value for '%s': not a result of this model",
                             src_name, obj->name[k]);
        double v = src->param_value[j];
        if (isnan(v)) { /* a coefficient not estimated: held at 0 (its column aliased) */
            if (k < obj->nparam - m->ncoef)
                return gmm_error(GMM_EINVAL, "%s: '%s' is null: not a result of this model",
                                 src_name, obj->name[k]);
            v = 0.0;
            obj->fixed[k] = 1;
        }
        obj->value[k] = v;
    }
    return GMM_OK;
}
