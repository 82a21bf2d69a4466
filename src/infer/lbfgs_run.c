/* lbfgs_run.c -- one liblbfgs run with the anchor, the mirrored refusals,
 * the decrease test and the return codes that fit and vi share
 * (infer_impl.h). */
#include <lbfgs.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "infer_impl.h"

gmm_status infer_lbfgs_alloc(infer_lbfgs *d, size_t n, size_t past)
{
    memset(d, 0, sizeof *d);
    if (n > (size_t)0x7fffffff)
        return gmm_error(GMM_EINVAL, "too many variables for L-BFGS (%zu)", n);
    d->n = n;
    d->past = past;
    d->u0 = gmm_malloc(n ? n : 1, sizeof *d->u0);
    d->g0 = gmm_malloc(n ? n : 1, sizeof *d->g0);
    d->pf = gmm_malloc(past + 1, sizeof *d->pf);
    if (!d->u0 || !d->g0 || !d->pf) {
        infer_lbfgs_free(d);
        return gmm_error(GMM_ENOMEM, "out of memory for L-BFGS (%zu variables)", n);
    }
    return GMM_OK;
}

void infer_lbfgs_free(infer_lbfgs *d)
{
    gmm_free(d->u0);
    gmm_free(d->g0);
    gmm_free(d->pf);
    d->u0 = d->g0 = d->pf = NULL;
}

/* The mirror of the linear model from the anchor (see infer_impl.h). */
static double mirror_trial(const infer_lbfgs *d, const double *x, double step, double *g)
{
    double dg = 0.0;
    for (size_t k = 0; k < d->n; k++) {
        double s = (x[k] - d->u0[k]) / step;
        dg += d->g0[k] * s;
        g[k] = -d->g0[k];
    }
    return d->f0 + fabs(dg) * step + (dg == 0.0 ? 1.0 : 0.0);
}

static lbfgsfloatval_t evaluate(void *instance, const lbfgsfloatval_t *x, lbfgsfloatval_t *g,
                                const int n, const lbfgsfloatval_t step)
{
    infer_lbfgs *d = instance;
    size_t nu = (size_t)n;
    double f;
    if (d->eval(d->ctx, x, &f, g, step)) {
        if (step == 0.0) { /* the starting point: the first anchor */
            memcpy(d->u0, x, nu * sizeof *x);
            memcpy(d->g0, g, nu * sizeof *g);
            d->f0 = f;
            d->pf[0] = f;
        }
        return f;
    }
    if (step == 0.0) {
        /* No line search to steer: a zero gradient makes liblbfgs stop at
         * once ("already minimised"); the run is then discarded. */
        d->start_failed = 1;
        snprintf(d->fail_msg, sizeof d->fail_msg, "%s", gmm_error_message());
        memset(g, 0, nu * sizeof *g);
        return 0.0;
    }
    return mirror_trial(d, x, step, g); /* rejected */
}

static int progress(void *instance, const lbfgsfloatval_t *x, const lbfgsfloatval_t *g,
                    const lbfgsfloatval_t fx, const lbfgsfloatval_t xnorm,
                    const lbfgsfloatval_t gnorm, const lbfgsfloatval_t step, int n, int k,
                    int ls)
{
    infer_lbfgs *d = instance;
    size_t nu = (size_t)n;
    (void)xnorm;
    (void)step;
    (void)ls;
    memcpy(d->u0, x, nu * sizeof *x);
    memcpy(d->g0, g, nu * sizeof *g);
    d->f0 = fx;
    d->iter = (size_t)k;
    if (d->accepted && d->accepted(d->ctx, x, fx, gnorm)) {
        d->stopped = 1;
        return 1;
    }
    if (d->past > 0) {
        /* pf[k % past] holds f from `past` iterations back (pf[0] = f at the
         * start), as in liblbfgs, but scaled by max(1, |f|) not f. */
        size_t slot = d->iter % d->past;
        if (d->iter >= d->past && d->pf[slot] - fx <= d->delta * fmax(1.0, fabs(fx))) {
            d->stopped_delta = 1;
            return 1;
        }
        d->pf[slot] = fx;
    }
    if (d->after && d->after(d->ctx, x)) {
        d->stopped = 1;
        return 1;
    }
    return 0;
}

gmm_status infer_lbfgs_run(infer_lbfgs *d, double *x, const char *who)
{
    lbfgs_parameter_t lp;
    lbfgs_parameter_init(&lp);
    lp.m = (int)d->memory;
    lp.epsilon = d->epsilon;
    lp.max_iterations = (int)d->max_iterations;
    lp.max_linesearch = (int)d->max_linesearch;
    d->iter = 0;
    d->start_failed = d->stopped_delta = d->stopped = 0;
    d->fail_msg[0] = '\0';
    double fx = 0.0;
    d->ret = lbfgs((int)d->n, x, &fx, evaluate, progress, d, &lp);
    if (d->ret == LBFGSERR_OUTOFMEMORY)
        return gmm_error(GMM_ENOMEM, "%s: out of memory in liblbfgs", who);
    if (d->ret <= LBFGSERR_INVALID_ORTHANTWISE_END && d->ret >= LBFGSERR_INVALID_N)
        return gmm_error(GMM_EINVAL, "%s: liblbfgs rejected its parameters (code %d)", who,
                         d->ret);
    if (!d->start_failed)
        memcpy(x, d->u0, d->n * sizeof *x);
    return GMM_OK;
}

double infer_lbfgs_gnorm(const infer_lbfgs *d)
{
    double gn = 0.0;
    for (size_t k = 0; k < d->n; k++)
        gn += d->g0[k] * d->g0[k];
    return sqrt(gn);
}

int infer_lbfgs_converged(int ret)
{
    return ret == LBFGS_SUCCESS || ret == LBFGS_ALREADY_MINIMIZED;
}

const char *infer_lbfgs_message(int ret)
{
    switch (ret) {
    case LBFGS_SUCCESS: return "converged: gradient norm below epsilon";
    case LBFGS_ALREADY_MINIMIZED: return "converged: the starting point is a stationary point";
    case LBFGSERR_MAXIMUMITERATION: return "stopped: maximum number of iterations reached";
    case LBFGSERR_ROUNDING_ERROR:
        return "line search failed: rounding errors prevent further progress";
    case LBFGSERR_MINIMUMSTEP: return "line search failed: step below the minimum";
    case LBFGSERR_MAXIMUMSTEP: return "line search failed: step above the maximum";
    case LBFGSERR_MAXIMUMLINESEARCH:
        return "line search failed: maximum number of evaluations reached";
    case LBFGSERR_WIDTHTOOSMALL: return "line search failed: interval of uncertainty too small";
    case LBFGSERR_INCREASEGRADIENT:
        return "line search failed: the search direction is not a descent direction";
    case LBFGSERR_OUTOFINTERVAL: return "line search failed: step out of the interval";
    case LBFGSERR_OUTOFMEMORY: return "out of memory in liblbfgs";
    default: return "stopped by liblbfgs";
    }
}
