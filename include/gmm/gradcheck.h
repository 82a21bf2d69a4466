/* gradcheck.h -- compare an objective's analytic gradient with finite
 * differences, parameter by parameter, as CmdStan's `diagnose` does: the
 * check users run on their own data (`gmm-infer gradcheck`).  Each row gets
 * a verdict (fail, inconclusive, ok; VERDICTS below); values are reported
 * on the natural scale.
 */
#ifndef GMM_GRADCHECK_H
#define GMM_GRADCHECK_H

#include <stddef.h>

#include "gmm/objective.h"
#include "gmm/status.h"

/* VERDICTS.  With a = analytic, fd = numeric, f = loglik, on the scale fit
 * optimises (objective.h, SCALES) and tol = rel_tol max(|a|, |fd|, |f|, 1):
 *   fail          |a - fd| > tol + fd_error (= allowed): a is certainly more
 *                 than tol from the derivative;
 *   inconclusive  not failed, but fd_error > max(tol, GMM_GRADCHECK_RESOLVE
 *                 max(|a|, |fd|)): the difference does not resolve the
 *                 gradient to three digits, so a wrong one could pass;
 *   ok            neither: a is within tol + 2 fd_error of the derivative.
 * fd_error is the difference's truncation estimate plus three standard
 * deviations of f's measured rounding noise (the method: gradcheck.c). */

/* The fraction of max(|a|, |fd|) that fd_error may reach in a decided row. */
#define GMM_GRADCHECK_RESOLVE 1e-3

typedef struct {
    double step;    /* initial step on the u scale, times max(1, |p|) for
                     * parameters on the identity scale; in (0, 1).
                     * Default 1e-3 (~ eps^(1/5), the 5-point rule's step for
                     * a smooth f on a unit scale). */
    double rel_tol; /* >= 0.  Default 1e-6 (CmdStan's `error`). */
} gmm_gradcheck_params;

void gmm_gradcheck_params_init(gmm_gradcheck_params *p);
/* GMM_EINVAL naming the bad field. */
gmm_status gmm_gradcheck_params_check(const gmm_gradcheck_params *p);

typedef struct {
    const char *name;  /* borrowed from the objective */
    double value;      /* natural scale */
    double analytic;   /* dloglik/dp, natural scale */
    double numeric;    /* finite difference, natural scale; NAN when the
                        * parameter sits on the boundary of its domain (a
                        * positive parameter equal to 0, one in (0, 1) equal
                        * to 0 or 1: not checked, ok) */
    double fd_error;   /* error bound of numeric, natural scale */
    double abs_error;  /* |analytic - numeric|, natural scale */
    double allowed;    /* tol + fd_error (VERDICTS), natural scale: the row
                        * fails when abs_error > allowed */
    double noise;      /* measured rounding noise of loglik along p (sd) */
    double rel_error;  /* |analytic - numeric| / max(|analytic|, |numeric|);
                        * 0 when both are 0 */
    double needed_tol; /* the smallest rel_tol at which fd_error <= tol: with
                        * it an inconclusive row is decided */
    int ok;            /* verdict ok; 1 also for a skipped row */
    int inconclusive;  /* verdict inconclusive (ok is then 0) */
} gmm_gradcheck_row;

typedef struct {
    double loglik;          /* at obj->value */
    size_t nparam, nfail, ninconclusive;
    gmm_gradcheck_row *row; /* nparam rows, in the objective's order; owned */
} gmm_gradcheck_result;

/* Check obj's gradient at obj->value (unchanged on return).  Fills *res
 * (free with gmm_gradcheck_result_free, also after GMM_ECHECK and
 * GMM_EINCONCLUSIVE).  Returns GMM_OK when every row is ok, GMM_ECHECK
 * ("gradcheck: 2 of 5 gradients disagree: first '1.matern32.lengthscale'
 * ...") when some fail, else GMM_EINCONCLUSIVE ("gradcheck: 1 of 5
 * gradients inconclusive: ... first 'x' ...; a tolerance >= 0.00025 would
 * decide") when some are inconclusive, GMM_EINVAL
 * for bad params or a parameter outside its closed domain (< 0; > 1 for one
 * in (0, 1)), GMM_ENOMEM, or the objective's
 * status when it fails at obj->value or at a difference point (message
 * prefixed "gradcheck: '<name>' at <value>: "); on those errors *res holds
 * nothing to free.  Cost: 1 + 12 to 16 nparam objective evaluations. */
gmm_status gmm_gradcheck(const gmm_objective *obj, const gmm_gradcheck_params *params,
                         gmm_gradcheck_result *res);
void gmm_gradcheck_result_free(gmm_gradcheck_result *res);

#endif
