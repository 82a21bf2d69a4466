/* gradcheck.h -- compare an objective's analytic gradient with finite
 * differences, parameter by parameter, as CmdStan's `diagnose` does: the
 * check users run on their own data (`gmm-infer gradcheck`).
 *
 * For each parameter p (free and fixed alike) the derivative is taken on the
 * scale `fit` optimises (objective.h, SCALES): u = log p for positive
 * parameters, u = logit p for those in (0, 1), u = p otherwise, so that
 * every difference point lies inside the domain, however near a bound p is.
 * The finite difference fd is the 5-point central rule (GSL's), with an
 * error bound fd_error: its truncation estimate plus three standard
 * deviations of f's own rounding noise carried through the rule -- the noise
 * measured first from 8 extra evaluations at u +- 1e-6 k (Moré and Wild's
 * ECnoise), since a likelihood from a banded factorisation is far noisier
 * than eps |f| (CO2 fit: 6e-9 at |f| = 957) -- after one step refinement
 * that balances the two terms; then, where its bound is smaller and it
 * agrees, the rule with its own truncation estimate (the difference from
 * the rule at twice the step) at steps 1, 4, 16, .. times the initial one.
 * With a = analytic, f = loglik and, on the
 * u scale,
 *
 *     tol = rel_tol * max(|a|, |fd|, |f|, 1),
 *
 * each row gets one of three verdicts:
 *
 *   fail          |a - fd| > tol + fd_error: the derivative lies within
 *                 fd_error of fd, so a is certainly more than tol from it;
 *   inconclusive  not failed, but fd_error > max(tol, 1e-3 max(|a|, |fd|)):
 *                 the difference does not resolve the gradient to three
 *                 digits, so a wrong gradient could pass (a noisy
 *                 objective's fd_error can exceed the gradient itself:
 *                 0.38 against 0.005 on a 1e4-point Poisson fit), and the
 *                 check says it cannot tell;
 *   ok            neither: a is within tol + 2 fd_error <= 3 max(tol, 1e-3
 *                 max(|a|, |fd|)) of the true derivative.
 *
 * The row's allowed is tol + fd_error (fail is abs_error > allowed; the
 * same tests hold on p's scale: every side divided by dp/du > 0).  Why
 * 1e-3 |a| and not tol alone: the 5-point rule's error bound is GSL's
 * conservative truncation estimate (on smooth models ~1e-5 |a|, often 100
 * times the actual error), so tol = 1e-6 |f| is below it on ordinary
 * models whose differences agree to 1e-7; a bug -- a missing term, a
 * wrong factor -- moves a by far more than 1e-3 of itself, and smaller
 * discrepancies beyond allowed still fail.  Why not a larger fraction:
 * ok is a claim that the digits were compared.  The smallest rel_tol at
 * which fd_error <= tol is fd_error / max(|a|, |fd|, |f|, 1) (needed_tol).
 * rel_tol is thus a
 * tolerance relative to max(|a|, |fd|, |f|, 1), not to |a| alone: rel_error
 * may be far above it in a row that passes, where the gradient is tiny
 * against |f|.  The |f| term is the objective's scale: on
 * the log scale dloglik/du is a sum of terms of the size of loglik's (one
 * per observation), which cancel at an optimum, so a gradient there is
 * judged against |f| and not against itself: a gradient of 2e-4 on a
 * loglik of -957 is zero, and an error of 1e-4 relative in an entry larger
 * than |f| / 100 still fails.  Values are reported on the natural scale
 * (dloglik/dp = (dloglik/du) / (dp/du)).
 */
#ifndef GMM_GRADCHECK_H
#define GMM_GRADCHECK_H

#include <stddef.h>

#include "gmm/objective.h"
#include "gmm/status.h"

/* The fraction of max(|a|, |fd|) that fd_error may reach in a decided row
 * (above). */
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
    double allowed;    /* tol + fd_error (above), natural scale: the row
                        * fails when abs_error > allowed */
    double noise;      /* measured rounding noise of loglik along p (sd) */
    double rel_error;  /* |analytic - numeric| / max(|analytic|, |numeric|);
                        * 0 when both are 0 */
    double needed_tol; /* the smallest rel_tol at which fd_error <= tol: with
                        * it an inconclusive row is decided */
    int ok;            /* verdict ok (above); 1 also for a skipped row */
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
