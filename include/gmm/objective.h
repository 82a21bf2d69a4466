/* objective.h -- what `fit` and `gradcheck` see of a model: a named parameter
 * vector and a function giving the log marginal likelihood and its gradient.
 * A problem (problem.h) builds one from its latent and likelihood; fit.h
 * optimises it.
 */
#ifndef GMM_OBJECTIVE_H
#define GMM_OBJECTIVE_H

#include <math.h>
#include <stddef.h>

#include "gmm/status.h"

/* SCALES.  Each parameter p has a domain and the unconstrained scale u on
 * which fit, gradcheck, and vi and hmc when they learn or sample the
 * hyperparameters, move it:
 *
 *   GMM_SCALE_IDENTITY  p real (a coefficient):      u = p
 *   GMM_SCALE_LOG       p > 0 (a variance):          u = log p,  dp/du = p
 *   GMM_SCALE_LOGIT     0 < p < 1 (bym2's phi):      u = log(p / (1 - p)),
 *                                                    dp/du = p (1 - p)
 *   GMM_SCALE_ATANH     -1 < p < 1 (a correlation):  u = atanh p,
 *                                                    dp/du = 1 - p^2
 *
 * so that every u is a point of the domain and u -> -inf or +inf reaches its
 * bounds (a fit whose maximum lies at phi -> 0 or 1 moves there instead of
 * meeting a refused trial point).  The model's values stay on the natural
 * scale p; the helpers below are the only place the maps are written. */
typedef enum {
    GMM_SCALE_IDENTITY = 0,
    GMM_SCALE_LOG = 1,
    GMM_SCALE_LOGIT = 2,
    GMM_SCALE_ATANH = 3
} gmm_scale;

typedef struct {
    size_t nparam;
    char **name;      /* nparam names, e.g. "0.matern32.lengthscale", "noise.variance" */
    double *value;    /* nparam current values (natural scale) */
    gmm_scale *scale; /* nparam: each one's domain and optimisation scale (above) */
    int *fixed;       /* nonzero: held during a fit (--fix) */
    /* log p(y | theta) into *f and, when grad != NULL, its gradient on the
     * natural scale of each parameter (all nparam, fixed ones included).
     * Returns GMM_OK, or a status (GMM_ENOTPD, GMM_EDOM) for a theta where the
     * model is not defined -- an ordinary outcome a line search handles. */
    gmm_status (*eval)(void *ctx, const double *theta, double *f, double *grad);
    void *ctx;
    /* Optional (NULL: none): M (nparam x nparam, row-major, natural scale)
     * an approximation of the information -d2 log p / dtheta2 at the theta
     * of the last successful eval, positive semi-definite and exact in
     * expectation at a maximum, from which a Newton-type search takes its
     * steps (fit.c, SCORING).  theta must be that eval's.  A status where it
     * is not available there. */
    gmm_status (*info)(void *ctx, const double *theta, double *M);
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

/* u of p (p inside its domain; a bound gives -inf or +inf). */
static inline double gmm_scale_to_u(gmm_scale s, double p)
{
    return s == GMM_SCALE_LOG     ? log(p)
           : s == GMM_SCALE_LOGIT ? log(p) - log1p(-p)
           : s == GMM_SCALE_ATANH ? atanh(p)
                                  : p;
}

/* p of u.  The logistic is evaluated on the side where exp does not
 * overflow; it rounds to 1 above u ~ 36.7 and to 0 below u ~ -745 (and exp
 * to 0 or inf): the caller tests gmm_scale_inside when that matters. */
static inline double gmm_scale_from_u(gmm_scale s, double u)
{
    if (s == GMM_SCALE_LOG)
        return exp(u);
    if (s == GMM_SCALE_LOGIT) {
        if (u >= 0.0)
            return 1.0 / (1.0 + exp(-u));
        double e = exp(u);
        return e / (1.0 + e);
    }
    if (s == GMM_SCALE_ATANH)
        return tanh(u);
    return u;
}

/* dp/du at p: the chain rule's factor, d/du = dp/du d/dp. */
static inline double gmm_scale_dp_du(gmm_scale s, double p)
{
    return s == GMM_SCALE_LOG     ? p
           : s == GMM_SCALE_LOGIT ? p * (1.0 - p)
           : s == GMM_SCALE_ATANH ? (1.0 - p) * (1.0 + p)
                                  : 1.0;
}

/* Nonzero when p is finite and inside the open domain of its scale. */
static inline int gmm_scale_inside(gmm_scale s, double p)
{
    if (!isfinite(p))
        return 0;
    return s == GMM_SCALE_LOG     ? p > 0.0
           : s == GMM_SCALE_LOGIT ? p > 0.0 && p < 1.0
           : s == GMM_SCALE_ATANH ? p > -1.0 && p < 1.0
                                  : 1;
}

/* The scale's name ("identity", "log", "logit", "atanh") and the domain in
 * words ("finite", "> 0", "in (0, 1)", "in (-1, 1)"), for messages. */
static inline const char *gmm_scale_name(gmm_scale s)
{
    return s == GMM_SCALE_LOG     ? "log"
           : s == GMM_SCALE_LOGIT ? "logit"
           : s == GMM_SCALE_ATANH ? "atanh"
                                  : "identity";
}
static inline const char *gmm_scale_domain(gmm_scale s)
{
    return s == GMM_SCALE_LOG     ? "> 0"
           : s == GMM_SCALE_LOGIT ? "in (0, 1)"
           : s == GMM_SCALE_ATANH ? "in (-1, 1)"
                                  : "finite";
}

/* Nonzero for a scale whose domain is bounded on both sides (logit,
 * atanh); *per_logit (may be NULL) receives the u units that one logit
 * unit is worth near a bound (1 - |p| ~ e^-u for the logit, 2 e^-2u for atanh), so
 * that thresholds written for the logit keep their meaning in p. */
static inline int gmm_scale_two_sided(gmm_scale s, double *per_logit)
{
    if (per_logit)
        *per_logit = s == GMM_SCALE_ATANH ? 0.5 : 1.0;
    return s == GMM_SCALE_LOGIT || s == GMM_SCALE_ATANH;
}

#endif
