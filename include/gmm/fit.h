/* fit.h -- maximum-likelihood fitting of an objective (objective.h) with
 * L-BFGS (liblbfgs) on each parameter's unconstrained scale, restarts, and a
 * Newton-decrement test of the answer with standard errors from the same
 * Hessian.  The choices and the test: src/infer/fit.c.
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
    double epsilon;        /* gradient test ||g|| <= epsilon max(1, ||u||),
                            * > 0.  Default 1e-5. */
    size_t past;           /* stop when (f_{k-past} - f_k) <= delta
                            * max(1, |f_k|); 0 = off.  Default 3. */
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
                            * likelihood grows without bound (fit.c,
                            * CONVERGED) */
} gmm_fit_params;

/* Defaults above. */
void gmm_fit_params_init(gmm_fit_params *p);
/* GMM_EINVAL naming the bad field ("fit: epsilon must be > 0, got -1"). */
gmm_status gmm_fit_params_check(const gmm_fit_params *p);

typedef struct {
    double loglik;         /* at the returned point */
    double grad_norm;      /* |dloglik/du| there (u the optimisation scale) */
    size_t iterations;     /* scoring and L-BFGS iterations of the start
                            * that gave the best point */
    size_t scoring_steps;  /* of them, scoring steps (fit.c, SCORING) */
    size_t evaluations;    /* over all starts and the test */
    size_t best_start;     /* its index */
    size_t failed_starts;  /* starts skipped because the objective failed at
                            * the starting point */
    size_t newton_steps;   /* Newton steps the test took (fit.c,
                            * CONVERGED) */
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
    const char *lbfgs_stop; /* static: what ended the search before the
                            * test: "scoring" (the scoring steps' decrement,
                            * fit.c, SCORING; no L-BFGS), or L-BFGS's
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
 * objective is evaluated once and res reports converged with 0 iterations.
 * DOMAIN FAILURES: a status (GMM_ENOTPD, GMM_EDOM), a non-finite value or
 * gradient, or a parameter leaving its domain in floating point at a
 * line-search trial point is an ordinary outcome: the trial is rejected and
 * the step shortened (fit.c); a start that fails so is skipped. */
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
/* The variances var[r] = a_r' C a_r of nrow linear combinations of the
 * parameters at obj->value, C the covariance gmm_fit_std_errors' errors
 * are the diagonal of (H^-1 carried to the parameters' scale by the delta
 * method): A is nrow x nparam, row-major; entries at fixed parameters
 * count for nothing (they carry no error).  2 nfree evaluations, then
 * O(nrow nfree^2).  Errors as gmm_fit_std_errors. */
gmm_status gmm_fit_lincomb_var(gmm_objective *obj, const double *A, size_t nrow, double *var);

#endif
