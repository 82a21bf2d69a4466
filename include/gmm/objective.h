/* objective.h -- what `fit` and `gradcheck` see of a model: a named parameter
 * vector and a function giving the log marginal likelihood and its gradient.
 * State-space models (ssm.h) and graph GMRFs (gmrf.h) each build one; fit.h
 * optimises any of them.
 */
#ifndef GMM_OBJECTIVE_H
#define GMM_OBJECTIVE_H

#include <stddef.h>

#include "gmm/status.h"

typedef struct {
    size_t nparam;
    char **name;      /* nparam names, e.g. "0.matern32.lengthscale", "noise.variance" */
    double *value;    /* nparam current values (natural scale) */
    int *positive;    /* nonzero: must stay > 0 (fit optimises its log) */
    int *fixed;       /* nonzero: held during a fit (--fix) */
    /* log p(y | theta) into *f and, when grad != NULL, its gradient on the
     * natural scale of each parameter (all nparam, fixed ones included).
     * Returns GMM_OK, or a status (GMM_ENOTPD, GMM_EDOM) for a theta where the
     * model is not defined -- an ordinary outcome a line search handles. */
    gmm_status (*eval)(void *ctx, const double *theta, double *f, double *grad);
    void *ctx;
} gmm_objective;

#endif
