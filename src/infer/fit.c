/* fit.c -- L-BFGS maximum likelihood over an objective (fit.h).
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
 * SCORING.  Where the objective gives its information (objective.h, info),
 * each start first takes Newton steps on it (fit_scoring.c); L-BFGS runs
 * only where they stop short of their decrement test.
 *
 * L-BFGS.  liblbfgs's gradient test ||g|| <= epsilon max(1, ||u||) and a
 * relative-decrease test done here (stop when (f_{k-past} - f_k) <= delta
 * max(1, |f_k|)) end the search, as do its iteration limit and a line search
 * that fails; none of these is a claim about the answer.
 *
 * CONVERGED.  At the best point of the starts a test decides whether the
 * maximum is reached (fit_cert.c); the observed information's standard
 * errors and linear forms are fit_info.c's.
 */
#include "fit_impl.h"
#include "gmm/rng.h"

#include <lbfgs.h> /* the return codes */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

void gmm_fit_params_init(gmm_fit_params *p)
{
    memset(p, 0, sizeof *p);
    p->max_iterations = 500;
    p->epsilon = 1e-5;
    p->past = 3;
    p->delta = 1e-10;
    p->memory = 6;
    p->max_linesearch = 40;
    p->restarts = 1;
    p->jitter = 1.0;
    p->seed = 1;
}

gmm_status gmm_fit_params_check(const gmm_fit_params *p)
{
    if (!p)
        return gmm_error(GMM_EINVAL, "fit: no parameters");
    if (!(p->epsilon > 0.0) || !isfinite(p->epsilon))
        return gmm_error(GMM_EINVAL, "fit: epsilon must be finite and > 0, got %g", p->epsilon);
    if (!(p->delta >= 0.0) || !isfinite(p->delta))
        return gmm_error(GMM_EINVAL, "fit: delta must be finite and >= 0, got %g", p->delta);
    if (p->memory < 1 || p->memory > 1000)
        return gmm_error(GMM_EINVAL, "fit: memory must be in 1..1000, got %zu", p->memory);
    if (p->max_linesearch < 1 || p->max_linesearch > 10000)
        return gmm_error(GMM_EINVAL, "fit: max_linesearch must be in 1..10000, got %zu",
                         p->max_linesearch);
    if (p->max_iterations > 100000000)
        return gmm_error(GMM_EINVAL, "fit: max_iterations must be at most 1e8, got %zu",
                         p->max_iterations);
    if (p->past > 100000)
        return gmm_error(GMM_EINVAL, "fit: past must be at most 100000, got %zu", p->past);
    if (p->restarts < 1)
        return gmm_error(GMM_EINVAL, "fit: restarts must be >= 1, got %zu", p->restarts);
    if (!(p->jitter >= 0.0) || !isfinite(p->jitter))
        return gmm_error(GMM_EINVAL, "fit: jitter must be finite and >= 0, got %g", p->jitter);
    return GMM_OK;
}

/* ---- one run --------------------------------------------------------------- */

static int evaluate(void *ctx, const double *x, double *f, double *g, double step)
{
    run_ctx *c = ctx;
    if (fit_eval_min(c, x, f, g))
        return 1;
    if (step != 0.0) {
        /* Remember why: a fit that ends against the domain's edge says so. */
        c->domain_hit = 1;
        snprintf(c->domain_msg, sizeof c->domain_msg, "%s", gmm_error_message());
    }
    return 0;
}

static int accepted(void *ctx, const double *x, double f, double gnorm)
{
    run_ctx *c = ctx;
    return fit_report(c, x, f, gnorm, c->iter0 + c->lb.iter);
}

typedef struct {
    double loglik, grad_norm;
    size_t iterations, scoring;
    int converged, status;
    const char *message, *stop;
    double gain, noise;
    int domain;
    char domain_msg[GMM_ERROR_MAX];
} run_result;

/* One start from u (nfree, overwritten with the final point); sets
 * c->lb.start_failed when the objective fails at u.  GMM_OK, or liblbfgs's
 * own failures (infer_lbfgs_run). */
static gmm_status run_one(run_ctx *c, double *u, run_result *r)
{
    c->cancelled = c->domain_hit = 0;
    gmm_status st = infer_lbfgs_run(&c->lb, u, "fit");
    int ret = c->lb.ret;
    if (st != GMM_OK || c->lb.start_failed)
        return st;
    r->loglik = -c->lb.f0;
    r->grad_norm = infer_lbfgs_gnorm(&c->lb);
    r->iterations = c->lb.iter;
    r->status = ret;
    r->domain = 0;
    if (c->lb.stopped_delta)
        r->stop = "decrease";
    else if (c->cancelled)
        r->stop = "cancelled";
    else if (infer_lbfgs_converged(ret))
        r->stop = "gradient";
    else if (ret == LBFGSERR_MAXIMUMITERATION)
        r->stop = "max_iter";
    else if (c->domain_hit) {
        r->stop = "domain";
        r->domain = 1;
        snprintf(r->domain_msg, sizeof r->domain_msg, "%s", c->domain_msg);
    } else {
        r->stop = "line_search";
    }
    r->message = infer_lbfgs_message(ret);
    return GMM_OK;
}

gmm_status gmm_fit(gmm_objective *obj, const gmm_fit_params *params, gmm_fit_result *res)
{
    gmm_status st = GMM_OK;
    size_t np, nfree = 0;
    size_t *idx = NULL;
    double *theta = NULL, *grad = NULL, *u = NULL, *ubest = NULL;
    double *init = NULL;
    run_ctx c;
    memset(&c, 0, sizeof c); /* c.lb is freed on every path */

    if (!obj || !res || !obj->eval || (obj->nparam && (!obj->value || !obj->scale ||
                                                        !obj->fixed || !obj->name)))
        return gmm_error(GMM_EINVAL, "fit: incomplete objective");
    if ((st = gmm_fit_params_check(params)) != GMM_OK)
        return st;
    np = obj->nparam;
    for (size_t i = 0; i < np; i++) {
        if (!isfinite(obj->value[i]))
            return gmm_error(GMM_EINVAL, "fit: start value of '%s' is not finite", obj->name[i]);
        /* Only free parameters live on their optimisation scale; a fixed
         * one may sit on its boundary (a laplacian ridge of 0). */
        if (!obj->fixed[i] && !gmm_scale_inside(obj->scale[i], obj->value[i]))
            return gmm_error(GMM_EINVAL, "fit: start value of '%s' must be %s, got %g",
                             obj->name[i], gmm_scale_domain(obj->scale[i]), obj->value[i]);
        if (!obj->fixed[i])
            nfree++;
    }
    if (nfree > (size_t)(int)0x7fffffff)
        return gmm_error(GMM_EINVAL, "fit: too many free parameters (%zu)", nfree);

    memset(res, 0, sizeof *res);
    res->gain = res->noise = res->left_to = NAN;
    if (params->std_errors)
        for (size_t i = 0; i < np; i++)
            params->std_errors[i] = NAN;
    if (params->boundary)
        memset(params->boundary, 0, np * sizeof *params->boundary);
    idx = gmm_malloc(nfree, sizeof *idx);
    theta = gmm_malloc(np, sizeof *theta);
    grad = gmm_malloc(np, sizeof *grad);
    u = gmm_malloc(nfree, sizeof *u);
    ubest = gmm_malloc(nfree, sizeof *ubest);
    init = gmm_malloc(np, sizeof *init);
    if (!idx || !theta || !grad || !u || !ubest || !init) {
        st = gmm_error(GMM_ENOMEM, "fit: out of memory (%zu parameters)", np);
        goto done;
    }
    for (size_t i = 0, k = 0; i < np; i++)
        if (!obj->fixed[i])
            idx[k++] = i;
    memcpy(init, obj->value, np * sizeof *init);
    memcpy(theta, init, np * sizeof *theta);

    if (nfree == 0) {
        double ll;
        st = obj->eval(obj->ctx, theta, &ll, grad);
        if (st == GMM_OK && !isfinite(ll))
            st = gmm_error(GMM_EDOM, "objective value is not finite");
        if (st != GMM_OK) {
            char msg[GMM_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", gmm_error_message());
            st = gmm_error(st, "fit: starting point: %s", msg);
            goto done;
        }
        res->loglik = ll;
        res->evaluations = 1;
        res->converged = 1;
        res->lbfgs_status = LBFGS_ALREADY_MINIMIZED;
        res->message = "nothing to fit: every parameter is fixed";
        res->stop = res->lbfgs_stop = "fixed";
        goto done;
    }

    c.obj = obj;
    c.par = params;
    c.nfree = nfree;
    c.idx = idx;
    c.theta = theta;
    c.grad = grad;
    if ((st = infer_scale_init(&c.sc, obj, nfree, idx)) != GMM_OK)
        goto done;
    if ((st = infer_lbfgs_alloc(&c.lb, nfree, params->past)) != GMM_OK) {
        st = gmm_error(st, "fit: %s", gmm_error_message());
        goto done;
    }
    c.lb.memory = params->memory;
    c.lb.epsilon = params->epsilon;
    c.lb.max_iterations = params->max_iterations;
    c.lb.max_linesearch = params->max_linesearch;
    c.lb.delta = params->delta;
    c.lb.eval = evaluate;
    c.lb.accepted = accepted;
    c.lb.ctx = &c;

    gmm_rng rng;
    gmm_rng_seed(&rng, params->seed, 0);
    int have_best = 0;
    gmm_status first_fail = GMM_OK;
    char first_msg[GMM_ERROR_MAX] = "";
    for (size_t s = 0; s < params->restarts; s++) {
        infer_scale_u(&c.sc, init, u);
        for (size_t k = 0; k < nfree; k++) {
            size_t i = idx[k];
            double z = s == 0 ? 0.0 : params->jitter * gmm_rng_normal(&rng);
            /* log scale and the design basis: unit steps; else of the value's size */
            u[k] += obj->scale[i] != GMM_SCALE_IDENTITY || infer_scale_in_lin(&c.sc, k)
                        ? z
                        : z * fmax(1.0, fabs(u[k]));
        }
        c.start = s;
        c.evals = 0;
        c.fail_status = GMM_OK;
        run_result r;
        memset(&r, 0, sizeof r);
        c.lb.f0 = 0.0;
        size_t siters = 0;
        int sdone = 0;
        double sf = 0.0, sg = 0.0;
        if (obj->info && (st = fit_scoring(&c, u, &sf, &sg, &siters, &sdone)) != GMM_OK)
            goto done;
        if (sdone) {
            c.lb.start_failed = 0;
            r.loglik = -sf;
            r.grad_norm = sg;
            r.iterations = siters;
            r.status = LBFGS_SUCCESS;
            r.stop = "scoring";
            r.message = "scoring: a Newton step on the information would gain less than 1e-10";
        } else if (!c.cancelled) {
            c.iter0 = siters;
            st = run_one(&c, u, &r);
            c.iter0 = 0;
            r.iterations += siters;
        }
        r.scoring = siters;
        res->evaluations += c.evals;
        if (st != GMM_OK)
            goto done;
        if (c.cancelled) { /* the progress callback's, or the objective's stop */
            if (have_best && fit_map_theta(&c, ubest))
                memcpy(obj->value, theta, np * sizeof *theta);
            else
                memcpy(obj->value, init, np * sizeof *init);
            st = gmm_error(GMM_ECANCEL, "fit: cancelled");
            goto done;
        }
        if (c.lb.start_failed) {
            res->failed_starts++;
            if (first_fail == GMM_OK) {
                first_fail = c.fail_status != GMM_OK ? c.fail_status : GMM_EDOM;
                snprintf(first_msg, sizeof first_msg, "%s", c.lb.fail_msg);
            }
            continue;
        }
        if (!have_best || r.loglik > res->loglik) {
            have_best = 1;
            memcpy(ubest, u, nfree * sizeof *ubest);
            res->loglik = r.loglik;
            res->grad_norm = r.grad_norm;
            res->iterations = r.iterations;
            res->scoring_steps = r.scoring;
            res->best_start = s;
            res->lbfgs_status = r.status;
            res->lbfgs_stop = r.stop;
            res->message = r.message;
            res->domain_msg[0] = '\0';
            if (r.domain)
                snprintf(res->domain_msg, sizeof res->domain_msg, "%s", r.domain_msg);
        }
    }
    if (!have_best) {
        st = gmm_error(first_fail, "fit: starting point: %s", first_msg);
        goto done;
    }
    /* CONVERGED: the test at the best point, whatever stopped L-BFGS */
    size_t e0 = c.evals;
    c.evals = 0;
    st = fit_certify(&c, ubest, init, res);
    res->evaluations += c.evals;
    c.evals = e0;
    if (st == GMM_OK && c.cancelled)
        st = gmm_error(GMM_ECANCEL, "fit: cancelled during the test at the returned point");
    if (st != GMM_OK)
        goto done;
    memcpy(obj->value, theta, np * sizeof *theta);

done:
    gmm_free(idx);
    gmm_free(theta);
    gmm_free(grad);
    gmm_free(u);
    gmm_free(ubest);
    infer_lbfgs_free(&c.lb);
    infer_scale_free(&c.sc);
    gmm_free(init);
    return st;
}
