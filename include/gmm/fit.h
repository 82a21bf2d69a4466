/* fit.h -- maximum-likelihood fitting of an objective (objective.h) with
 * L-BFGS.
 *
 * The optimiser is liblbfgs (Naoaki Okazaki's C port of Nocedal's L-BFGS,
 * Debian's liblbfgs-dev): a small, well-kept library whose default line
 * search is More & Thuente's (1994), which brackets and interpolates with
 * cubics and so needs few evaluations per iteration -- each evaluation here
 * is a whole marginal likelihood with its gradient.  We use it rather than GSL
 * multimin (whose BFGS keeps a dense n x n inverse Hessian and whose line
 * search is cruder) or a hand-rolled quasi-Newton method.
 *
 * VARIABLES.  Free parameters (obj->fixed[i] == 0) are optimised; fixed ones
 * are held at obj->value[i].  Each is optimised on its scale
 * (objective.h, SCALES): u = log(p) for a positive parameter, u = logit(p)
 * for one in (0, 1), u = p for a coefficient (or the design basis below),
 * with d(-loglik)/du = -(dp/du) dloglik/dp.
 *
 * DOMAIN FAILURES.  An evaluation that returns a status (GMM_ENOTPD, GMM_EDOM,
 * or any non-finite value or gradient, or a variable that leaves its domain
 * in floating point: exp overflowing, the logistic rounding to 1) at a
 * line-search trial point is an ordinary outcome.  Returning +inf or NaN
 * would break More-Thuente's cubic interpolation (it computes (f_x - f_t) /
 * (t - x) and sqrt of a difference of their ratios), so the trial
 * is reported as the mirror image of the linear model at the start of the
 * line search: with x0, f0, g0 the last accepted iterate and s the direction,
 * f = f0 + |g0.s| * step and g = -g0.  That value is above f0 (so the trial is
 * rejected and the minimiser bracketed between the best point and the trial)
 * and its interpolating cubic puts the next trial at about 0.14 of the failed
 * step: a backtracking step that keeps More-Thuente's bookkeeping finite.  A
 * failing STARTING point cannot be handled so: that start is skipped (see
 * restarts), and gmm_fit fails only when every start fails.
 *
 * SCALE OF THE COEFFICIENTS.  Where the objective names a design basis
 * (objective.h, lin_*: the QR of the coefficients' observed design rows),
 * the coefficients are optimised as u = R beta / s: orthogonal directions of
 * unit mean square on the linear predictor's scale, so that shifting or
 * rescaling a covariate changes neither the path nor the answer (a calendar
 * year beside the intercept, a covariate in units of 1e-12).
 *
 * L-BFGS.  liblbfgs's gradient test ||g|| <= epsilon max(1, ||u||) and a
 * relative-decrease test done here (stop when (f_{k-past} - f_k) <= delta
 * max(1, |f_k|)) end the search, as do its iteration limit and a line search
 * that fails; none of these is a claim about the answer.
 *
 * CONVERGED.  At the best point of the starts a test decides (fit.c,
 * certify): the Newton decrement g' H^-1 g / 2 -- the loglik a Newton step
 * would still gain -- is at most 1e-8, H the Hessian of -loglik on the u
 * scale from central differences of the exact gradient (2 nfree
 * evaluations), positive definite; where it is not yet, Newton steps (halved
 * until loglik rises) are taken and the test repeated, at most 20 times.
 * Where the objective is too rough at the differences' scale for that, the
 * point is converged at the noise level when the decrement (H from wider
 * differences) is at most 4 times loglik's rounding noise, measured by
 * ECnoise along the Newton direction: no line search can see a gain that
 * small.  Before the test, a log-scale parameter more than 1e6 below its
 * start, or a logit-scale one within 1e-6 of 0 or 1, whose loglik does not
 * fall when it is moved 1e3 further towards its bound (a logit one: or that
 * still rises towards it from 1e3 inside, its value rounding near the
 * bound) has its maximum at the bound -- a boundary, held there and named
 * (params->boundary), the point moved to the probe where that is higher --
 * and where a variance's loglik rises there by more than 1e-3 relative the
 * likelihood has no maximum at all (stop "unbounded"; the point reached is
 * returned).  A difference step that leaves the objective's domain ends the
 * test not converged (stop "domain").  res->stop names the outcome,
 * res->gain the decrement (NAN where H is not definite), res->left_param
 * the parameter a Newton step would move most in standard errors.  The
 * standard errors (params->std_errors) come from the same H.
 */
#ifndef GMM_FIT_H
#define GMM_FIT_H

#include <stddef.h>
#include <stdint.h>

#include "gmm/objective.h"
#include "gmm/status.h"

/* What the progress callback sees after each accepted L-BFGS iteration. */
typedef struct {
    size_t start;        /* 0-based index of the current start (restart) */
    size_t iteration;    /* 1-based iteration within this start */
    size_t evaluations;  /* objective evaluations in this start so far */
    double loglik;       /* at the new iterate */
    double grad_norm;    /* Euclidean norm of dloglik/du over the free
                          * variables, u the optimisation scale (log p for
                          * positive parameters, logit p in (0, 1)) */
    const double *value; /* nparam current parameter values, natural scale */
} gmm_fit_progress;

/* Nonzero return cancels the fit (gmm_fit returns GMM_ECANCEL). */
typedef int (*gmm_fit_progress_fn)(void *user, const gmm_fit_progress *p);

typedef struct {
    size_t max_iterations; /* per start; 0 = no limit.  Default 500. */
    double epsilon;        /* gradient test (above), > 0.  Default 1e-5. */
    size_t past;           /* iterations back for the decrease test; 0 = off.
                            * Default 3. */
    double delta;          /* relative decrease for that test, >= 0.
                            * Default 1e-10. */
    size_t memory;         /* L-BFGS corrections kept, >= 1.  Default 6. */
    size_t max_linesearch; /* evaluations per line search, >= 1.  Default 40. */
    size_t restarts;       /* starts, >= 1: the first from obj->value, the
                            * others jittered from it.  Default 1. */
    double jitter;         /* standard deviation of the jitter of a restart:
                            * on u = log p or logit p (objective.h, SCALES),
                            * in units of max(1, |p|) for coefficients;
                            * >= 0.  Default 1. */
    uint64_t seed;         /* PRNG seed of the jitter.  Default 1. */
    gmm_fit_progress_fn progress; /* may be NULL */
    void *user;            /* passed to progress */
    double *std_errors;    /* output, may be NULL: nparam standard errors at
                            * the returned point (gmm_fit_std_errors' from
                            * the test's Hessian), NAN for fixed parameters,
                            * boundary ones and where H is not definite */
    int *boundary;         /* output, may be NULL: nparam flags, 1 for a
                            * parameter whose maximum is at a bound of its
                            * domain (a variance at 0, a logit parameter at
                            * 0 or 1), 2 for a variance towards whose 0 the
                            * likelihood grows without bound (CONVERGED) */
} gmm_fit_params;

/* Defaults above. */
void gmm_fit_params_init(gmm_fit_params *p);
/* GMM_EINVAL naming the bad field ("fit: epsilon must be > 0, got -1"). */
gmm_status gmm_fit_params_check(const gmm_fit_params *p);

typedef struct {
    double loglik;         /* at the returned point */
    double grad_norm;      /* |dloglik/du| there (u the optimisation scale) */
    size_t iterations;     /* L-BFGS iterations of the start that gave the
                            * best point */
    size_t evaluations;    /* over all starts and the test */
    size_t best_start;     /* its index */
    size_t failed_starts;  /* starts skipped because the objective failed at
                            * the starting point */
    size_t newton_steps;   /* Newton steps the test took (CONVERGED) */
    int converged;         /* the test at the returned point holds */
    int lbfgs_status;      /* liblbfgs's return code for the best start */
    const char *message;   /* static description of the outcome */
    const char *stop;      /* static: the test's outcome: "newton" (the
                            * decrement at most 1e-8), "noise" (at most 4
                            * times loglik's rounding noise) -- converged --
                            * or "not_maximum" (a Newton step would still
                            * gain), "not_definite" (H not positive
                            * definite), "domain" (a difference step left
                            * the domain), "unbounded" (the likelihood grows
                            * without bound as a variance goes to 0);
                            * "fixed" (no free parameter) */
    const char *lbfgs_stop; /* static: what ended L-BFGS before the test:
                            * "gradient", "decrease", "max_iter",
                            * "line_search", "domain" */
    double gain;           /* the Newton decrement g'H^-1 g / 2 at the
                            * returned point (NAN where H is not definite) */
    double noise;          /* loglik's measured rounding noise (sd) where it
                            * was measured, else NAN */
    size_t nboundary;      /* parameters at 0 (params->boundary) */
    int unbounded;         /* stop "unbounded" */
    const char *left_param; /* not converged: the parameter a Newton step
                            * moves most (or the first whose curvature is not
                            * positive); NULL otherwise */
    double left_to;        /* where that step takes it (natural scale), or NAN */
    char domain_msg[GMM_ERROR_MAX]; /* when L-BFGS stopped against the edge of
                            * the objective's domain (trial points refused):
                            * the objective's last refusal; else "" */
} gmm_fit_result;

/* Maximise obj->eval over the free parameters.  On GMM_OK obj->value holds
 * the best point found (fixed entries unchanged) and *res describes it.
 * Ownership: obj and its arrays stay the caller's; obj->value is overwritten.
 * Cost: per start, (iterations x ~1-3) objective evaluations plus
 * O(memory x nfree) per iteration.
 * Errors: GMM_EINVAL (bad params, see _check; an object without eval; a
 * free parameter whose start value is outside its domain -- not > 0, not in
 * (0, 1); a non-finite start value), GMM_ENOMEM, GMM_ECANCEL (the progress
 * callback asked to stop; obj->value and *res then hold the best point of
 * the finished starts, or the start values if none finished), or, when the
 * objective fails at every starting point, the first start's status with its
 * message prefixed "fit: starting point: ".  No free parameter: the
 * objective is evaluated once and res reports converged with 0 iterations. */
gmm_status gmm_fit(gmm_objective *obj, const gmm_fit_params *params, gmm_fit_result *res);

/* Standard errors at obj->value (a maximum): the observed information H,
 * the Hessian of -loglik over the free parameters on their optimisation
 * scale (objective.h) from central differences of the exact gradient (2
 * nfree evaluations), and se[k] = sqrt((H^-1)_kk) dp/du -- the delta method
 * back to the parameter's own scale (dp/du = p on the log scale, p (1 - p)
 * on the logit scale).  se:
 * nparam entries, NAN for fixed parameters.  Errors: GMM_ENOTPD (H not
 * positive definite: not at a maximum, or a parameter not identified), the
 * objective's status at a difference point, GMM_ENOMEM (nfree^2 doubles). */
gmm_status gmm_fit_std_errors(gmm_objective *obj, double *se);

#endif
