/* gradcheck.h -- compare an objective's analytic gradient with finite
 * differences, parameter by parameter, as CmdStan's `diagnose` does: the
 * check users run on their own data (`gmm-infer gradcheck`).
 *
 * For each parameter p (free and fixed alike) the derivative is taken on the
 * scale `fit` optimises: u = log p for positive parameters, u = p otherwise.
 * The finite difference is GSL's gsl_deriv_central (a 5-point central rule
 * whose step is refined from the initial one by balancing its round-off and
 * truncation estimates), which also returns an error estimate fd_error.
 * Parameter p passes when, on the u scale,
 *
 *     |a - fd| <= rel_tol * max(|a|, |fd|) + abs_tol + fd_error
 *
 * (a = analytic).  Defaults rel_tol = 1e-6 (CmdStan's `error`), abs_tol =
 * 1e-6 (a change of 1e-6 in loglik per unit change of log p: what matters
 * near an optimum, where relative errors mean nothing).  Values are reported
 * on the natural scale (dloglik/dp = (dloglik/du) / p for positive ones).
 */
#ifndef GMM_GRADCHECK_H
#define GMM_GRADCHECK_H

#include <stddef.h>

#include "gmm/objective.h"
#include "gmm/status.h"

typedef struct {
    double step;    /* initial step on the u scale, times max(1, |p|) for
                     * parameters that are not positive; in (0, 1).
                     * Default 1e-4. */
    double rel_tol; /* >= 0.  Default 1e-6. */
    double abs_tol; /* >= 0.  Default 1e-6. */
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
                        * positive parameter equal to 0: not checked, ok) */
    double fd_error;   /* GSL's error estimate of numeric, natural scale */
    double rel_error;  /* |analytic - numeric| / max(|analytic|, |numeric|);
                        * 0 when both are 0 */
    int ok;            /* passes the test above */
} gmm_gradcheck_row;

typedef struct {
    double loglik;          /* at obj->value */
    size_t nparam, nfail;
    gmm_gradcheck_row *row; /* nparam rows, in the objective's order; owned */
} gmm_gradcheck_result;

/* Check obj's gradient at obj->value (unchanged on return).  Fills *res
 * (free with gmm_gradcheck_result_free, also after GMM_ECHECK).  Returns
 * GMM_OK when every row passes, GMM_ECHECK ("gradcheck: 2 of 5 gradients
 * disagree: first '1.matern32.lengthscale' ...") when some do not, GMM_EINVAL
 * for bad params or a positive parameter <= 0, GMM_ENOMEM, or the objective's
 * status when it fails at obj->value or at a difference point (message
 * prefixed "gradcheck: '<name>' at <value>: "); on those errors *res holds
 * nothing to free.  Cost: 1 + about 8 nparam objective evaluations. */
gmm_status gmm_gradcheck(const gmm_objective *obj, const gmm_gradcheck_params *params,
                         gmm_gradcheck_result *res);
void gmm_gradcheck_result_free(gmm_gradcheck_result *res);

#endif
