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
    /* Optional (lin_n 0: none): the scale optimisers and finite differences
     * take for lin_n parameters that enter through a design (coefficients
     * beta, parameters lin_idx[0 .. lin_n)): u = R beta / lin_s, beta = lin_s
     * R^-1 u, R (lin_n x lin_n, upper, row-major) from the QR of their
     * design's observed rows, lin_s = sqrt(observed rows).  In u the design
     * has orthogonal columns of unit mean square: u is on the scale of the
     * linear predictor whatever the covariates' location and scale.  Only
     * valid while none of lin_idx is fixed (fit.h). */
    size_t lin_n;
    const size_t *lin_idx;
    const double *lin_R;
    double lin_s;
} gmm_objective;

#endif
