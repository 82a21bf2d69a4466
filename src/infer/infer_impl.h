/* infer_impl.h -- what the optimisers of src/infer/ share.  Private. */
#ifndef GMM_INFER_IMPL_H
#define GMM_INFER_IMPL_H

#include <stddef.h>

#include "gmm/objective.h"
#include "gmm/status.h"

/* ---- one L-BFGS run (lbfgs_run.c), for fit and vi ------------------------
 *
 * liblbfgs minimises f over x (n) with the caller's evaluation and hooks;
 * the driver keeps what both optimisers need around it:
 *
 *  - the anchor (u0, g0, f0): the last accepted iterate, where every line
 *    search starts; a trial point the objective refuses (eval returns 0 at
 *    step > 0) is reported as the mirror of the linear model from the
 *    anchor -- above f0, so the trial is rejected, with slope -g0.s > 0,
 *    so the cubic backtracks (fit.h);
 *  - a refused starting point (step 0): the run stops at once (a zero
 *    gradient makes liblbfgs return "already minimised"), start_failed set
 *    and the objective's reason in fail_msg;
 *  - the decrease test: stop, stopped_delta set, when f fell by at most
 *    delta max(1, |f|) over `past` iterations (as liblbfgs's own, which
 *    divides by f instead);
 *  - after the run, x is the anchor (liblbfgs reverts x after a failed line
 *    search but leaves its f at the last trial). */
typedef struct {
    /* set by the caller */
    size_t memory, max_iterations, max_linesearch; /* max_iterations 0: none */
    double epsilon;                                /* liblbfgs's gradient test */
    size_t past;                                   /* 0: no decrease test */
    double delta;
    /* f and g (n) at x: 1, or 0 when the objective refuses x (its reason in
     * gmm_error's record).  step: 0 at the start, else a line-search trial. */
    int (*eval)(void *ctx, const double *x, double *f, double *g, double step);
    /* At every accepted iterate (iter set), before the decrease test:
     * nonzero stops the run (the caller's ctx says why).  May be NULL. */
    int (*accepted)(void *ctx, const double *x, double f, double gnorm);
    /* After a decrease test that did not stop: nonzero stops.  May be NULL. */
    int (*after)(void *ctx, const double *x);
    void *ctx;
    /* the run (infer_lbfgs_alloc sizes them; infer_lbfgs_run sets them) */
    size_t n;
    double *u0, *g0, f0;  /* the anchor: n, n */
    double *pf;           /* past + 1 values of f for the decrease test */
    size_t iter;          /* accepted iterations of this run */
    int ret;              /* liblbfgs's return code */
    int start_failed, stopped_delta, stopped; /* stopped: by a hook */
    char fail_msg[GMM_ERROR_MAX];
} infer_lbfgs;

/* Size d for n variables (n <= INT_MAX) and d->past; d's settings and
 * hooks are the caller's to fill.  GMM_ENOMEM, GMM_EINVAL (n too large). */
gmm_status infer_lbfgs_alloc(infer_lbfgs *d, size_t n, size_t past);
void infer_lbfgs_free(infer_lbfgs *d);

/* One run from x (n; overwritten with the anchor at the end, unless the
 * start failed).  GMM_OK whatever liblbfgs's return (in d->ret), except
 * its own failures: GMM_ENOMEM ("WHO: out of memory in liblbfgs") and
 * GMM_EINVAL ("WHO: liblbfgs rejected its parameters"). */
gmm_status infer_lbfgs_run(infer_lbfgs *d, double *x, const char *who);

/* After a run that stopped on f (the decrease test, or a line search that
 * could not see a decrease through f's rounding): continue from the anchor
 * with a quasi-Newton iteration that reads only gradients, until |g| <=
 * gtol, for at most max_iter iterations or until |g| stops falling.
 * Near a minimum f's differences are lost in its rounding long before its
 * gradient's are (lbfgs_run.c), so this reaches the stationary point that
 * f's own tests cannot.  The anchor (u0, g0, f0) moves to the polished
 * point only when f there is not above f0 by more than ftol (a step that
 * climbed: the anchor is kept).  Evaluations are trials (step 1).  Returns
 * GMM_ENOMEM (2 memory n doubles), else GMM_OK; *iters gets the accepted
 * iterations (may be NULL). */
gmm_status infer_lbfgs_polish(infer_lbfgs *d, double gtol, double ftol, size_t max_iter,
                              size_t *iters);

/* |g0|, the gradient norm at the anchor. */
double infer_lbfgs_gnorm(const infer_lbfgs *d);

/* |u0|, the norm of the anchor (liblbfgs's gradient test is |g| <=
 * epsilon max(1, |u|)). */
double infer_lbfgs_unorm(const infer_lbfgs *d);

/* liblbfgs's return code: a line search that ended without a step
 * (rounding, the step's or the evaluations' limits). */
int infer_lbfgs_line_search_stop(int ret);

/* liblbfgs's return code: converged (success or already minimised). */
int infer_lbfgs_converged(int ret);

/* A static description of how a liblbfgs run ended (its return code). */
const char *infer_lbfgs_message(int ret);

/* ---- the optimisation scale (opt_scale.c), for fit and vi -----------------
 *
 * The free parameters idx[0 .. nfree) of an objective as u, each on its
 * own scale (objective.h: identity, log, logit), except the coefficients of
 * the objective's design basis (lin_*), whose block is u = R beta / s --
 * used when every one of them is free (lin > 0). */
typedef struct {
    const gmm_objective *obj;
    size_t nfree;
    const size_t *idx;
    size_t lin;           /* coefficients in the basis (0: not used) */
    size_t *lin_at;       /* lin: the free variable of lin_idx[j] */
    double *lin_w;        /* lin doubles of workspace */
    unsigned char *in_lin; /* nfree flags */
} infer_scale;

gmm_status infer_scale_init(infer_scale *s, const gmm_objective *obj, size_t nfree,
                            const size_t *idx); /* GMM_ENOMEM */
void infer_scale_free(infer_scale *s);
/* A logit-scale parameter is moved within |u| <= INFER_LOGIT_MAX: p within
 * 2e-9 of 0 or 1, where a model reading 1 - p from p (bym2's phi) still has
 * 7 of its digits; further out its log likelihood is rounding (1e-4 at 1 -
 * 1e-11), so a maximum there is the bound's (fit_cert.c, CONVERGED). */
#define INFER_LOGIT_MAX 20.0

/* theta's free entries from u; 0 (a GMM_EDOM error recorded, naming the
 * parameter) when one leaves its domain in floating point, or a logit one
 * leaves |u| <= INFER_LOGIT_MAX (an atanh one half of that). */
int infer_scale_theta(infer_scale *s, const double *u, double *theta);
/* u from theta's free entries. */
void infer_scale_u(const infer_scale *s, const double *theta, double *u);
/* g (nfree) = sign d/du of the objective whose natural-scale gradient is
 * grad (nparam) at theta. */
void infer_scale_grad(infer_scale *s, const double *theta, const double *grad, double sign,
                      double *g);
/* Free variable k is a coefficient of the basis. */
int infer_scale_in_lin(const infer_scale *s, size_t k);
/* v (nfree) with beta_{lin_idx[j]} = v'u: row j of s R^-1 on the basis's
 * variables, 0 elsewhere. */
void infer_scale_row(infer_scale *s, size_t j, double *v);

/* ---- the noise of an objective (gradcheck.c) -----------------------------
 *
 * Moré and Wild's ECnoise (SIAM J. Sci. Comput. 33(3), 2011): the standard
 * deviation of f's rounding noise from f at u + k delta, k = -4..4, along
 * one direction (f[k + 4]; delta small enough that f's smooth part is
 * negligible in 4th differences: 1e-6 on a unit scale).  f is overwritten.
 * A banded likelihood is far noisier than eps |f| (gradcheck.h), so both
 * gradcheck's error bounds and fit's noise stop (fit.h) measure it. */
double infer_ecnoise(double f[9]);

#endif
