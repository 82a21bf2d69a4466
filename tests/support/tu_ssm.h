/* tu_ssm.h -- the state-space model with Gaussian noise as the regression
 * tests and benches knew it: theta = (kernel parameters, noise variance),
 * outcomes given at allocation.  Header-only (the benches link no test
 * support objects). */
#ifndef GMM_TU_SSM_H
#define GMM_TU_SSM_H

#include <stdlib.h>
#include <string.h>

#include "gmm/objective.h"
#include "gmm/ssm.h"

static inline gmm_status tu_ssm_alloc(const gmm_kernel *k, const double *x, const double *y,
                                      size_t n, const gmm_ssm_params *par, gmm_ssm **out)
{
    gmm_status st = gmm_ssm_alloc(k, x, n, par, out);
    if (st)
        return st;
    if (!y)
        return gmm_error(GMM_EINVAL, "tu_ssm_alloc: NULL y");
    if ((st = gmm_ssm_set_y(*out, y))) {
        gmm_ssm_free(*out);
        *out = NULL;
    }
    return st;
}

/* noise = th[kernel nparam]; g (kernel params + noise) or NULL */
static inline gmm_status tu_ssm_loglik(gmm_ssm *m, const double *th, double *ll, double *g)
{
    size_t np = gmm_ssm_nparam(m);
    return gmm_ssm_loglik(m, th, th[np], ll, g, g ? g + np : NULL);
}

static inline size_t tu_ssm_nparam(const gmm_ssm *m) { return gmm_ssm_nparam(m) + 1; }

static inline const char *tu_ssm_param_name(const gmm_ssm *m, size_t i)
{
    return i < gmm_ssm_nparam(m) ? gmm_ssm_param_name(m, i) : "likelihood.variance";
}

static inline gmm_status tu_ssm_predict(gmm_ssm *m, const double *th, const double *xq,
                                        size_t nq, double *mean, double *var)
{
    return gmm_ssm_predict(m, th, th[gmm_ssm_nparam(m)], xq, nq, mean, var);
}

static inline gmm_status tu_ssm_obj_eval(void *ctx, const double *th, double *f, double *g)
{
    return tu_ssm_loglik(ctx, th, f, g);
}

/* An objective over (kernel parameters, noise), all positive, none fixed,
 * starting at theta0; release with tu_ssm_objective_free. */
static inline gmm_status tu_ssm_objective(gmm_ssm *m, const double *theta0, gmm_objective *obj)
{
    size_t np = tu_ssm_nparam(m);
    memset(obj, 0, sizeof *obj); /* no design basis, no information */
    obj->nparam = np;
    obj->name = calloc(np, sizeof *obj->name);
    obj->value = calloc(np, sizeof *obj->value);
    obj->scale = calloc(np, sizeof *obj->scale);
    obj->fixed = calloc(np, sizeof *obj->fixed);
    if (!obj->name || !obj->value || !obj->scale || !obj->fixed)
        return GMM_ENOMEM;
    for (size_t i = 0; i < np; i++) {
        obj->name[i] = (char *)tu_ssm_param_name(m, i);
        obj->value[i] = theta0[i];
        obj->scale[i] = GMM_SCALE_LOG;
    }
    obj->eval = tu_ssm_obj_eval;
    obj->ctx = m;
    return GMM_OK;
}

static inline void tu_ssm_objective_free(gmm_objective *obj)
{
    free(obj->name);
    free(obj->value);
    free(obj->scale);
    free(obj->fixed);
}

#endif
