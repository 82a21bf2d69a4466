/* fit_eval.c -- one evaluation of a fit's objective on the optimisation
 * scale (fit_impl.h), shared by the runs (fit.c, fit_scoring.c), the test
 * at the returned point (fit_cert.c) and the observed information
 * (fit_info.c); and the report of an accepted iterate. */
#include "fit_impl.h"

#include <math.h>

/* theta's free entries from u; 0 (and fail_status set) when a variable
 * leaves its domain in floating point (exp overflowing or underflowing, the
 * logistic rounding to 1). */
int fit_map_theta(run_ctx *c, const double *u)
{
    if (infer_scale_theta(&c->sc, u, c->theta))
        return 1;
    c->fail_status = gmm_error_status();
    return 0;
}

/* -loglik and its gradient on the optimisation scale; 0 on a domain failure
 * (status recorded in fail_status when the objective gave one). */
int fit_eval_min(run_ctx *c, const double *u, double *f, double *g)
{
    double ll = 0.0;
    if (c->cancelled) /* a line search's further trials: not evaluated */
        return 0;
    c->evals++;
    if (!fit_map_theta(c, u))
        return 0;
    gmm_status st = c->obj->eval(c->obj->ctx, c->theta, &ll, c->grad);
    if (st != GMM_OK) {
        c->fail_status = st;
        c->cancelled |= st == GMM_ECANCEL; /* the caller's stop (problem.h), not a domain */
        return 0;
    }
    if (!isfinite(ll)) {
        c->fail_status = gmm_error(GMM_EDOM, "objective value is not finite");
        return 0;
    }
    infer_scale_grad(&c->sc, c->theta, c->grad, -1.0, g);
    for (size_t k = 0; k < c->nfree; k++)
        if (!isfinite(g[k])) {
            c->fail_status = gmm_error(GMM_EDOM, "gradient of '%s' is not finite",
                                       c->obj->name[c->idx[k]]);
            return 0;
        }
    *f = -ll;
    return 1;
}

int fit_report(run_ctx *c, const double *u, double f, double gnorm, size_t iter)
{
    if (c->cancelled)
        return 1;
    if (!c->par->progress)
        return 0;
    gmm_fit_progress p;
    fit_map_theta(c, u); /* u was evaluated: it maps inside the domain */
    p.start = c->start;
    p.iteration = iter;
    p.evaluations = c->evals;
    p.loglik = -f;
    p.grad_norm = gnorm;
    p.value = c->theta;
    if (c->par->progress(c->par->user, &p))
        c->cancelled = 1;
    return c->cancelled;
}
