/* fit.c -- L-BFGS maximum likelihood over an objective (see fit.h for the
 * choices: log scale, domain failures, stopping tests). */
#include "gmm/fit.h"
#include "gmm/rng.h"
#include "infer_impl.h"

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

/* ---- one L-BFGS run ---------------------------------------------------- */

typedef struct {
    gmm_objective *obj;
    const gmm_fit_params *par;
    size_t nfree;
    const size_t *idx;   /* free variable k is parameter idx[k] */
    double *theta;       /* nparam, natural scale (fixed entries preset) */
    double *grad;        /* nparam, objective's gradient */
    infer_lbfgs lb;      /* the run, its anchor (the last accepted iterate) */
    size_t start, evals;
    int cancelled;
    int domain_hit;      /* a trial point was refused by the objective ... */
    char domain_msg[GMM_ERROR_MAX]; /* ... with this message (the last one) */
    gmm_status fail_status;
} run_ctx;

/* theta's free entries from u; 0 (and fail_status set) when a variable
 * leaves its domain in floating point (exp overflowing or underflowing, the
 * logistic rounding to 1). */
static int map_theta(run_ctx *c, const double *u)
{
    for (size_t k = 0; k < c->nfree; k++) {
        size_t i = c->idx[k];
        gmm_scale s = c->obj->scale[i];
        double p = gmm_scale_from_u(s, u[k]);
        if (!gmm_scale_inside(s, p)) {
            c->fail_status = gmm_error(GMM_EDOM, "%s = %g (u = %g on its %s scale) must be %s",
                                       c->obj->name[i], p, u[k], gmm_scale_name(s),
                                       gmm_scale_domain(s));
            return 0;
        }
        c->theta[i] = p;
    }
    return 1;
}

/* -loglik and its gradient on the optimisation scale; 0 on a domain failure
 * (status recorded in fail_status when the objective gave one). */
static int eval_min(run_ctx *c, const double *u, double *f, double *g)
{
    double ll = 0.0;
    c->evals++;
    if (!map_theta(c, u))
        return 0;
    gmm_status st = c->obj->eval(c->obj->ctx, c->theta, &ll, c->grad);
    if (st != GMM_OK) {
        c->fail_status = st;
        return 0;
    }
    if (!isfinite(ll)) {
        c->fail_status = gmm_error(GMM_EDOM, "objective value is not finite");
        return 0;
    }
    for (size_t k = 0; k < c->nfree; k++) {
        size_t i = c->idx[k];
        double gk = -c->grad[i] * gmm_scale_dp_du(c->obj->scale[i], c->theta[i]);
        if (!isfinite(gk)) {
            c->fail_status = gmm_error(GMM_EDOM, "gradient of '%s' is not finite",
                                       c->obj->name[i]);
            return 0;
        }
        g[k] = gk;
    }
    *f = -ll;
    return 1;
}

static int evaluate(void *ctx, const double *x, double *f, double *g, double step)
{
    run_ctx *c = ctx;
    if (eval_min(c, x, f, g))
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
    if (!c->par->progress)
        return 0;
    gmm_fit_progress p;
    map_theta(c, x); /* x was evaluated: it maps inside the domain */
    p.start = c->start;
    p.iteration = c->lb.iter;
    p.evaluations = c->evals;
    p.loglik = -f;
    p.grad_norm = gnorm;
    p.value = c->theta;
    if (c->par->progress(c->par->user, &p)) {
        c->cancelled = 1;
        return 1;
    }
    return 0;
}

/* A line search that stops on rounding near the optimum is common here: at
 * long lengthscales the state-space loglik is rough at ~1e-7 relative (the
 * band holds entries ~ (lengthscale/dt)^(2 nu)), so liblbfgs cannot see a
 * decrease although the gradient is not yet below epsilon.  Whether such a
 * stop is at the maximum is decided by the Newton decrement
 * g' H^{-1} g / 2 -- the loglik a Newton step would still gain -- with H
 * from central differences of the analytic gradient (2 nfree evaluations,
 * once per stop; H is nfree x nfree, the number of parameters).  Below
 * NEWTON_GAIN nats the fit is converged for every statistical purpose. */
#define NEWTON_GAIN 1e-6
#define NEWTON_STEP 1e-4

/* When the Newton decrement is above NEWTON_GAIN, or H is not positive
 * definite, the stop may still be at the objective's resolution: on a long
 * count series at a lengthscale of ~500 the Laplace loglik's rounding noise
 * is 1e-5 to 6e-5 (|f| ~ 1e4) and its gradient's 1e-3 to 1e-2, so the
 * differences of H at NEWTON_STEP (gradient noise / 1e-4) swamp the
 * curvature and liblbfgs cannot see a decrease of a few 1e-6.  Then the
 * decrement is computed again with H from steps of NOISE_HSTEP (its
 * truncation, O(h^2) relative, does not matter for a size), the noise s of
 * loglik measured once by ECnoise along the Newton direction, and the stop
 * counts as converged at the noise level when the decrement is at most
 * NOISE_GAIN s: a trial point's loglik is compared with the anchor's, a
 * difference of sd sqrt(2) s, so a gain below 4 s (2.8 sd) is one no line
 * search can see.  Costs 2 nfree + 8 evaluations, once per stop. */
#define NOISE_HSTEP 1e-2
#define NOISE_STEP 1e-6
#define NOISE_GAIN 4.0

/* The Newton decrement at the anchor (u0, g0) into *gain, H from central
 * differences of the gradient at steps of step max(1, |u0_k|); the Newton
 * direction H^{-1} g0 into dir (nfree) unless NULL.  0 when it cannot be
 * computed (an evaluation failed, H not positive definite, no memory). */
/* H (nf x nf, with 3 nf doubles of workspace after it) = the Hessian of
 * -loglik at u0 from central differences of the gradient at steps of step
 * max(1, |u0_k|), symmetrised, and then its lower Cholesky factor in
 * place.  0 when an evaluation fails or H is not positive definite. */
static int hessian_chol(run_ctx *c, const double *u0, double step, double *H)
{
    size_t nf = c->nfree;
    double *u = H + nf * nf, *gp = u + nf, *gm = gp + nf;
    double f;
    for (size_t k = 0; k < nf; k++) {
        double h = step * fmax(1.0, fabs(u0[k]));
        memcpy(u, u0, nf * sizeof *u);
        u[k] = u0[k] + h;
        if (!eval_min(c, u, &f, gp))
            return 0;
        u[k] = u0[k] - h;
        if (!eval_min(c, u, &f, gm))
            return 0;
        for (size_t i = 0; i < nf; i++)
            H[i * nf + k] = (gp[i] - gm[i]) / (2.0 * h);
    }
    /* Symmetrise, then an in-place Cholesky of the small dense H. */
    for (size_t i = 0; i < nf; i++)
        for (size_t k = 0; k < i; k++)
            H[i * nf + k] = H[k * nf + i] = 0.5 * (H[i * nf + k] + H[k * nf + i]);
    for (size_t j = 0; j < nf; j++) {
        double d = H[j * nf + j];
        for (size_t k = 0; k < j; k++)
            d -= H[j * nf + k] * H[j * nf + k];
        if (!(d > 0.0) || !isfinite(d))
            return 0;
        d = sqrt(d);
        H[j * nf + j] = d;
        for (size_t i = j + 1; i < nf; i++) {
            double v = H[i * nf + j];
            for (size_t k = 0; k < j; k++)
                v -= H[i * nf + k] * H[j * nf + k];
            H[i * nf + j] = v / d;
        }
    }
    return 1;
}

static int newton_gain(run_ctx *c, double step, double *gain, double *dir)
{
    size_t nf = c->nfree;
    const double *g0 = c->lb.g0;
    int ok = 0;
    double *H = gmm_malloc(nf * nf + 3 * nf, sizeof *H);
    if (!H)
        return 0;
    double *u = H + nf * nf;
    if (!hessian_chol(c, c->lb.u0, step, H))
        goto done;
    /* gain = |L^{-1} g|^2 / 2 (f is -loglik, so this is in loglik units). */
    double g2 = 0.0;
    for (size_t i = 0; i < nf; i++) {
        double v = g0[i];
        for (size_t k = 0; k < i; k++)
            v -= H[i * nf + k] * u[k];
        u[i] = v / H[i * nf + i];
        g2 += u[i] * u[i];
    }
    *gain = 0.5 * g2;
    if (dir) /* L' dir = L^{-1} g0, held in u */
        for (size_t i = nf; i-- > 0;) {
            double v = u[i];
            for (size_t k = i + 1; k < nf; k++)
                v -= H[k * nf + i] * dir[k];
            dir[i] = v / H[i * nf + i];
        }
    ok = 1;
done:
    gmm_free(H);
    return ok;
}

/* ECnoise (infer_impl.h) of f at the anchor along dir (nfree, not 0):
 * 8 evaluations at steps of NOISE_STEP max(1, |u0|_inf) along dir / |dir|.
 * 0 when an evaluation fails or no memory. */
static int anchor_noise(run_ctx *c, const double *dir, double *noise)
{
    size_t nf = c->nfree;
    const double *u0 = c->lb.u0;
    double dn = 0.0, scale = 1.0, f[9];
    for (size_t k = 0; k < nf; k++) {
        dn += dir[k] * dir[k];
        scale = fmax(scale, fabs(u0[k]));
    }
    dn = sqrt(dn);
    double *u = gmm_malloc(2 * nf, sizeof *u);
    if (!u || !(dn > 0.0) || !isfinite(dn)) {
        gmm_free(u);
        return 0;
    }
    double *g = u + nf;
    f[4] = c->lb.f0;
    for (int j = -4; j <= 4; j++) {
        for (size_t k = 0; j && k < nf; k++)
            u[k] = u0[k] + j * NOISE_STEP * scale * dir[k] / dn;
        if (j && !eval_min(c, u, &f[j + 4], g)) {
            gmm_free(u);
            return 0;
        }
    }
    gmm_free(u);
    *noise = infer_ecnoise(f);
    return 1;
}

typedef struct {
    double loglik, grad_norm;
    size_t iterations;
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
    r->noise = r->gain = NAN;
    if (c->lb.stopped_delta) {
        r->converged = 1;
        r->message = "converged: relative decrease of the objective below delta";
        r->stop = "decrease";
    } else if (c->cancelled) {
        r->converged = 0;
        r->message = "cancelled";
        r->stop = "cancelled";
    } else {
        r->converged = infer_lbfgs_converged(ret);
        r->message = infer_lbfgs_message(ret);
        r->stop = r->converged                         ? "gradient"
                  : ret == LBFGSERR_MAXIMUMITERATION ? "max_iter"
                                                      : "line_search";
        double gain, noise, *dir = NULL;
        if (r->converged || !infer_lbfgs_line_search_stop(ret)) {
            /* stopped by a test of its own */
        } else if (newton_gain(c, NEWTON_STEP, &gain, NULL) && gain <= NEWTON_GAIN) {
            r->converged = 1;
            r->gain = gain;
            r->message = "converged: the line search stopped on rounding where a Newton step "
                         "would gain less than 1e-6 in loglik";
            r->stop = "newton";
        } else if ((dir = gmm_malloc(c->nfree, sizeof *dir)) &&
                   newton_gain(c, NOISE_HSTEP, &gain, dir) && anchor_noise(c, dir, &noise) &&
                   gain <= NOISE_GAIN * noise) {
            r->converged = 1;
            r->gain = gain;
            r->noise = noise;
            r->message = "converged at the noise level: the line search stopped where a Newton "
                         "step would gain less than 4 times the loglik's rounding noise";
            r->stop = "noise";
        } else if (c->domain_hit) {
            r->message = "stopped at the edge of the model's domain: the objective refused "
                         "the trial points beyond it";
            r->stop = "domain";
            r->domain = 1;
            snprintf(r->domain_msg, sizeof r->domain_msg, "%s", c->domain_msg);
        }
        gmm_free(dir);
    }
    return GMM_OK;
}

gmm_status gmm_fit(gmm_objective *obj, const gmm_fit_params *params, gmm_fit_result *res)
{
    gmm_status st = GMM_OK;
    size_t np, nfree = 0;
    size_t *idx = NULL;
    double *theta = NULL, *grad = NULL, *u = NULL;
    double *init = NULL, *best = NULL;
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
    idx = gmm_malloc(nfree, sizeof *idx);
    theta = gmm_malloc(np, sizeof *theta);
    grad = gmm_malloc(np, sizeof *grad);
    u = gmm_malloc(nfree, sizeof *u);
    init = gmm_malloc(np, sizeof *init);
    best = gmm_malloc(np, sizeof *best);
    if (!idx || !theta || !grad || !u || !init || !best) {
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
        res->stop = "fixed";
        res->gain = res->noise = NAN;
        goto done;
    }

    c.obj = obj;
    c.par = params;
    c.nfree = nfree;
    c.idx = idx;
    c.theta = theta;
    c.grad = grad;
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
        for (size_t k = 0; k < nfree; k++) {
            size_t i = idx[k];
            double v = init[i];
            double z = s == 0 ? 0.0 : params->jitter * gmm_rng_normal(&rng);
            u[k] = obj->scale[i] == GMM_SCALE_IDENTITY ? v + z * fmax(1.0, fabs(v))
                                                       : gmm_scale_to_u(obj->scale[i], v) + z;
        }
        c.start = s;
        c.evals = 0;
        c.fail_status = GMM_OK;
        run_result r;
        memset(&r, 0, sizeof r);
        c.lb.f0 = 0.0;
        st = run_one(&c, u, &r);
        res->evaluations += c.evals;
        if (st != GMM_OK)
            goto done;
        if (c.lb.start_failed) {
            res->failed_starts++;
            if (first_fail == GMM_OK) {
                first_fail = c.fail_status != GMM_OK ? c.fail_status : GMM_EDOM;
                snprintf(first_msg, sizeof first_msg, "%s", c.lb.fail_msg);
            }
            continue;
        }
        if (!c.cancelled && (!have_best || r.loglik > res->loglik)) {
            have_best = 1;
            map_theta(&c, u);
            memcpy(best, theta, np * sizeof *best);
            res->loglik = r.loglik;
            res->grad_norm = r.grad_norm;
            res->iterations = r.iterations;
            res->best_start = s;
            res->converged = r.converged;
            res->lbfgs_status = r.status;
            res->message = r.message;
            res->stop = r.stop;
            res->gain = r.gain;
            res->noise = r.noise;
            res->domain_msg[0] = '\0';
            if (r.domain)
                snprintf(res->domain_msg, sizeof res->domain_msg, "%s", r.domain_msg);
        }
        if (c.cancelled) {
            memcpy(obj->value, have_best ? best : init, np * sizeof *best);
            st = gmm_error(GMM_ECANCEL, "fit: cancelled by the progress callback");
            goto done;
        }
    }
    if (!have_best) {
        st = gmm_error(first_fail, "fit: starting point: %s", first_msg);
        goto done;
    }
    memcpy(obj->value, best, np * sizeof *best);

done:
    gmm_free(idx);
    gmm_free(theta);
    gmm_free(grad);
    gmm_free(u);
    infer_lbfgs_free(&c.lb);
    gmm_free(init);
    gmm_free(best);
    return st;
}

gmm_status gmm_fit_std_errors(gmm_objective *obj, double *se)
{
    if (!obj || !obj->eval || !se)
        return gmm_error(GMM_EINVAL, "fit: NULL argument to gmm_fit_std_errors");
    size_t np = obj->nparam, nf = 0;
    for (size_t i = 0; i < np; i++) {
        se[i] = NAN;
        nf += !obj->fixed[i];
    }
    if (nf == 0)
        return GMM_OK;
    run_ctx c;
    memset(&c, 0, sizeof c);
    size_t *idx = gmm_malloc(nf, sizeof *idx);
    double *theta = gmm_malloc(np, sizeof *theta), *grad = gmm_malloc(np, sizeof *grad);
    double *u0 = gmm_malloc(nf, sizeof *u0), *H = gmm_malloc(nf * nf + 3 * nf, sizeof *H);
    gmm_status st = GMM_OK;
    if (!idx || !theta || !grad || !u0 || !H) {
        st = gmm_error(GMM_ENOMEM, "fit: out of memory for the Hessian of %zu parameters", nf);
        goto done;
    }
    memcpy(theta, obj->value, np * sizeof *theta);
    for (size_t i = 0, k = 0; i < np; i++)
        if (!obj->fixed[i]) {
            idx[k] = i;
            u0[k++] = gmm_scale_to_u(obj->scale[i], obj->value[i]);
        }
    c.obj = obj;
    c.nfree = nf;
    c.idx = idx;
    c.theta = theta;
    c.grad = grad;
    /* the Hessian of -loglik on the optimisation scale: its inverse is the
     * covariance of the estimates there, and the block of the coefficients
     * does not depend on how the others are parameterised */
    if (!hessian_chol(&c, u0, NEWTON_STEP, H)) {
        st = c.fail_status ? c.fail_status
                           : gmm_error(GMM_ENOTPD, "the observed information is not positive "
                                                   "definite: the fit is not at a maximum");
        goto done;
    }
    double *z = H + nf * nf;
    for (size_t k = 0; k < nf; k++) {
        /* z = L^{-1} e_k: the variance is |z|^2, the diagonal of H^{-1} */
        double v2 = 0.0;
        for (size_t i = 0; i < nf; i++) {
            double v = i == k ? 1.0 : 0.0;
            for (size_t j = k; j < i; j++)
                v -= H[i * nf + j] * z[j];
            z[i] = i < k ? 0.0 : v / H[i * nf + i];
            v2 += z[i] * z[i];
        }
        size_t i = idx[k];
        se[i] = sqrt(v2) * gmm_scale_dp_du(obj->scale[i], obj->value[i]);
    }
done:
    gmm_free(idx);
    gmm_free(theta);
    gmm_free(grad);
    gmm_free(u0);
    gmm_free(H);
    return st;
}
