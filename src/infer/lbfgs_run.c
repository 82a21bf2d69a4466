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

int infer_lbfgs_line_search_stop(int ret)
{
    return ret == LBFGSERR_ROUNDING_ERROR || ret == LBFGSERR_MINIMUMSTEP ||
           ret == LBFGSERR_MAXIMUMLINESEARCH || ret == LBFGSERR_WIDTHTOOSMALL ||
           ret == LBFGSERR_INCREASEGRADIENT || ret == LBFGSERR_OUTOFINTERVAL;
}

double infer_lbfgs_unorm(const infer_lbfgs *d)
{
    double un = 0.0;
    for (size_t k = 0; k < d->n; k++)
        un += d->u0[k] * d->u0[k];
    return sqrt(un);
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

/* ---- the gradient-only polish (infer_impl.h) ------------------------------
 *
 * Direction: the two-loop recursion of L-BFGS over the polish's own pairs
 * (s, y), H0 = s'y / y'y of the newest (the identity before the first),
 * reset to steepest descent when it is not a descent direction.  Step: the
 * curvature condition of the strong Wolfe conditions alone, |g(t)'d| <=
 * POLISH_C2 |g(0)'d|, from t = 1 by secant steps on phi'(t) = g(t)'d
 * inside a bracket [lo, hi] (kept in its middle 80%), at most POLISH_LS
 * trials; a refused trial shrinks the bracket (hi = t).  Without f's
 * sufficient-decrease test this is a root finder for g along d, which is
 * what a minimiser is once f's decrease is below f's resolution.  The
 * gradient's own rounding ends it: POLISH_STALL iterations without
 * halving the smallest |g| seen.
 */
#define POLISH_C2 0.5
#define POLISH_LS 20
#define POLISH_STALL 10

static double dot(size_t n, const double *a, const double *b)
{
    double s = 0.0;
    for (size_t k = 0; k < n; k++)
        s += a[k] * b[k];
    return s;
}

/* One gradient-only line search from (x, g) along dir, phi0 = g'dir < 0:
 * the accepted point in (xt, gt, *ft), *t its step; 0 when none found. */
static int polish_search(infer_lbfgs *d, const double *x, const double *dir, double phi0,
                         double *xt, double *gt, double *ft, double *t_out)
{
    size_t n = d->n;
    double lo = 0.0, plo = phi0, hi = INFINITY, phi = 0.0, t = 1.0;
    for (int ls = 0; ls < POLISH_LS; ls++) {
        for (size_t k = 0; k < n; k++)
            xt[k] = x[k] + t * dir[k];
        double tn;
        if (!d->eval(d->ctx, xt, ft, gt, t)) {
            hi = t;
            tn = 0.5 * (lo + hi);
        } else {
            double pt = dot(n, gt, dir);
            if (fabs(pt) <= POLISH_C2 * -phi0) {
                *t_out = t;
                return 1;
            }
            if (pt < 0.0) {
                lo = t;
                plo = pt;
            } else {
                hi = t;
                phi = pt;
            }
            if (isinf(hi)) /* the secant through (0, phi0), (t, pt), at most 10 t */
                tn = pt > phi0 ? fmin(t * phi0 / (phi0 - pt), 10.0 * t) : 10.0 * t;
            else
                tn = lo + (hi - lo) * (-plo / (phi - plo));
        }
        if (!isinf(hi))
            tn = fmin(fmax(tn, lo + 0.1 * (hi - lo)), hi - 0.1 * (hi - lo));
        if (!(tn > 0.0) || !isfinite(tn))
            return 0;
        t = tn;
    }
    return 0;
}

gmm_status infer_lbfgs_polish(infer_lbfgs *d, double gtol, double ftol, size_t max_iter,
                              size_t *iters)
{
    size_t n = d->n, m = d->memory ? d->memory : 6, np = 0, newest = 0, it = 0;
    double *buf = gmm_malloc(2 * m * n + 2 * m + 5 * n, sizeof *buf);
    if (iters)
        *iters = 0;
    if (!buf)
        return gmm_error(GMM_ENOMEM, "out of memory for the gradient polish (%zu variables)", n);
    double *S = buf, *Y = S + m * n, *rho = Y + m * n, *alpha = rho + m;
    double *x = alpha + m, *g = x + n, *dir = g + n, *xt = dir + n, *gt = xt + n;
    size_t best_it = 0;
    memcpy(x, d->u0, n * sizeof *x);
    memcpy(g, d->g0, n * sizeof *g);
    double f = d->f0, gn = sqrt(dot(n, g, g)), best = gn;
    while (it < max_iter && gn > gtol) {
        /* dir = -H g by the two-loop recursion, newest pair first */
        memcpy(dir, g, n * sizeof *dir);
        for (size_t j = 0; j < np; j++) {
            size_t i = (newest + m - j) % m;
            alpha[i] = rho[i] * dot(n, S + i * n, dir);
            for (size_t k = 0; k < n; k++)
                dir[k] -= alpha[i] * Y[i * n + k];
        }
        double gamma = np ? 1.0 / (rho[newest] * dot(n, Y + newest * n, Y + newest * n)) : 1.0;
        for (size_t k = 0; k < n; k++)
            dir[k] *= gamma;
        for (size_t j = np; j-- > 0;) {
            size_t i = (newest + m - j) % m;
            double beta = rho[i] * dot(n, Y + i * n, dir);
            for (size_t k = 0; k < n; k++)
                dir[k] += (alpha[i] - beta) * S[i * n + k];
        }
        for (size_t k = 0; k < n; k++)
            dir[k] = -dir[k];
        double phi0 = dot(n, g, dir);
        if (!(phi0 < 0.0)) {
            np = 0;
            for (size_t k = 0; k < n; k++)
                dir[k] = -g[k];
            phi0 = -gn * gn;
        }
        double ft, t;
        if (!polish_search(d, x, dir, phi0, xt, gt, &ft, &t))
            break;
        double sy = 0.0, yy = 0.0;
        for (size_t k = 0; k < n; k++) {
            double s = xt[k] - x[k], y = gt[k] - g[k];
            sy += s * y;
            yy += y * y;
        }
        if (sy > 0.0 && yy > 0.0) {
            newest = np ? (newest + 1) % m : 0;
            for (size_t k = 0; k < n; k++) {
                S[newest * n + k] = xt[k] - x[k];
                Y[newest * n + k] = gt[k] - g[k];
            }
            rho[newest] = 1.0 / sy;
            np += np < m;
        }
        memcpy(x, xt, n * sizeof *x);
        memcpy(g, gt, n * sizeof *g);
        f = ft;
        gn = sqrt(dot(n, g, g));
        it++;
        if (gn <= 0.5 * best) {
            best = gn;
            best_it = it;
        }
        if (d->accepted && d->accepted(d->ctx, x, f, gn)) {
            d->stopped = 1;
            break;
        }
        if (it - best_it >= POLISH_STALL)
            break;
    }
    if (it && f <= d->f0 + ftol) {
        memcpy(d->u0, x, n * sizeof *x);
        memcpy(d->g0, g, n * sizeof *g);
        d->f0 = f;
    }
    if (iters)
        *iters = it;
    gmm_free(buf);
    return GMM_OK;
}
