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
 * for one in (0, 1), u = p for a coefficient, with d(-loglik)/du =
 * -(dp/du) dloglik/dp.
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
 * STOPPING.  liblbfgs's gradient test ||g|| <= epsilon max(1, ||u||) (g, u
 * over the free variables on the optimisation scale), and a relative-decrease
 * test done here rather than by liblbfgs's `past`/`delta` (which divides by
 * f, wrong when -loglik < 0): stop when (f_{k-past} - f_k) <= delta
 * max(1, |f_k|).  Both count as converged, as does liblbfgs's
 * "already minimised".  Any other stop (iteration limit, line-search failure)
 * is a result with converged = 0, not an error -- except a line-search
 * stop (rounding: the objective is rough at long lengthscales) where the
 * Newton decrement g' H^{-1} g / 2, H from central differences of the
 * gradient, is below 1e-6 in loglik: that point is a maximum for every
 * statistical purpose and counts as converged (costs 2 nfree evaluations).
 * Failing that, the stop is at the objective's own resolution when the
 * decrement (H from wider differences) is at most 4 times loglik's rounding
 * noise, measured by ECnoise along the Newton direction: no line search can
 * see a gain that small, and this also counts as converged ("noise"; 2 nfree
 * + 8 more evaluations).  res->stop names the test that stopped the fit.
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
} gmm_fit_params;

/* Defaults above. */
void gmm_fit_params_init(gmm_fit_params *p);
/* GMM_EINVAL naming the bad field ("fit: epsilon must be > 0, got -1"). */
gmm_status gmm_fit_params_check(const gmm_fit_params *p);

typedef struct {
    double loglik;         /* at the best point */
    double grad_norm;      /* as in gmm_fit_progress, at the best point */
    size_t iterations;     /* of the start that gave the best point */
    size_t evaluations;    /* over all starts */
    size_t best_start;     /* its index */
    size_t failed_starts;  /* starts skipped because the objective failed at
                            * the starting point */
    int converged;         /* the best start met a stopping test (above) */
    int lbfgs_status;      /* liblbfgs's return code for the best start */
    const char *message;   /* static description of how the best start
                            * stopped ("converged: gradient norm below
                            * epsilon", "line search failed: rounding
                            * errors prevent progress", ...) */
    const char *stop;      /* static name of the test that stopped the best
                            * start: "gradient" (liblbfgs's gradient test or
                            * a stationary start), "decrease", "newton",
                            * "noise" (converged), "max_iter", "line_search",
                            * "domain" (not converged), "fixed" (no free
                            * parameter) */
    double gain;           /* the Newton decrement of a "newton" or "noise"
                            * stop, else NAN */
    double noise;          /* the loglik's measured rounding noise (sd) of a
                            * "noise" stop, else NAN */
    char domain_msg[GMM_ERROR_MAX]; /* when the best start stopped against the
                            * edge of the objective's domain (trial points
                            * refused, e.g. below a kernel's accuracy limit):
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
