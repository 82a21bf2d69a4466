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

/* ---- one run --------------------------------------------------------------- */

typedef struct {
    gmm_objective *obj;
    const gmm_fit_params *par;
    size_t nfree;
    const size_t *idx;   /* free variable k is parameter idx[k] */
    double *theta;       /* nparam, natural scale (fixed entries preset) */
    double *grad;        /* nparam, objective's gradient */
    infer_scale sc;      /* u, the optimisation scale (infer_impl.h) */
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
    if (infer_scale_theta(&c->sc, u, c->theta))
        return 1;
    c->fail_status = gmm_error_status();
    return 0;
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

/* ---- the certificate (CONVERGED above) ------------------------------------ */

/* The Newton decrement g' H^-1 g / 2 -- the loglik a Newton step would still
 * gain -- at most CERT_GAIN nats, H the Hessian of -loglik on the u scale from
 * central differences of the exact gradient at steps of CERT_STEP max(1,
 * |u_k|) (2 nfree evaluations), positive definite.  Where it is larger, a
 * Newton step (halved until loglik rises) is taken and the test repeated, at
 * most CERT_ITER times.  Where no such step raises loglik, or H is not
 * positive definite at CERT_STEP, the objective may be rough at that scale
 * (a long count series at long lengthscales: loglik's rounding noise 1e-5
 * to 6e-5 at |f| ~ 1e4, its gradient's 1e-2, swamping differences at 1e-4):
 * H is taken again at NOISE_HSTEP (its truncation, O(h^2) relative, does
 * not matter for a size), loglik's noise s measured once by ECnoise along
 * the Newton direction (8 evaluations), and the point counts as converged
 * at the noise level when the decrement is at most NOISE_GAIN s: a trial
 * point's loglik is compared with the anchor's, a difference of sd
 * sqrt(2) s, so a gain below 4 s (2.8 sd) is one no line search can see. */
#define CERT_GAIN 1e-8
#define CERT_STEP 1e-4
#define CERT_ITER 20
#define NOISE_HSTEP 1e-2
#define NOISE_STEP 1e-6
#define NOISE_GAIN 4.0
/* A log-scale parameter CERT_BOUND_DROP (log 1e6) or more below its start,
 * or a logit-scale one within 1e-6 of 0 or 1 (|logit| > log 1e6), is probed
 * BOUND_PROBE (log 1e3) further towards its bound: when loglik does not
 * fall there by more than BOUND_TOL max(1, |loglik|), its maximum is at the
 * bound (a boundary, as lme4's singular fit) and it is held for the test of
 * the others; when loglik rises by more than BOUND_UNBOUNDED nats, the
 * likelihood grows without bound towards it. */
#define CERT_BOUND_DROP 13.815510557964274
/* A correlation within 2e-4 of +-1 (|atanh| > log(1e4) / 2) whose Hessian
 * is not definite is probed towards its bound (corr_boundary). */
#define CERT_CORR_DROP 9.210340371976184
#define BOUND_PROBE 6.907755278982137
#define BOUND_TOL 1e-9
#define BOUND_UNBOUNDED 1e-3

/* H (na x na, then 3 na doubles of workspace) = the Hessian of -loglik over
 * the active free variables act[0 .. na) at u0 from central differences of
 * the gradient at steps of step max(1, |u0_k|), symmetrised, then its lower
 * Cholesky factor in place.  *pd 0 when it is not positive definite (the
 * failing pivot's variable in *bad).  0 when an evaluation fails. */
static int hessian_chol(run_ctx *c, const double *u0, const size_t *act, size_t na, double step,
                        double *H, double *wu, double *gp, double *gm, int *pd, size_t *bad)
{
    size_t nf = c->nfree;
    double f;
    *pd = 0;
    for (size_t a = 0; a < na; a++) {
        size_t k = act[a];
        double h = step * fmax(1.0, fabs(u0[k]));
        memcpy(wu, u0, nf * sizeof *wu);
        wu[k] = u0[k] + h;
        if (!eval_min(c, wu, &f, gp))
            return 0;
        wu[k] = u0[k] - h;
        if (!eval_min(c, wu, &f, gm))
            return 0;
        for (size_t b = 0; b < na; b++)
            H[b * na + a] = (gp[act[b]] - gm[act[b]]) / (2.0 * h);
    }
    for (size_t i = 0; i < na; i++)
        for (size_t k = 0; k < i; k++)
            H[i * na + k] = H[k * na + i] = 0.5 * (H[i * na + k] + H[k * na + i]);
    for (size_t j = 0; j < na; j++) {
        double d = H[j * na + j];
        for (size_t k = 0; k < j; k++)
            d -= H[j * na + k] * H[j * na + k];
        if (!(d > 0.0) || !isfinite(d)) {
            *bad = act[j];
            return 1;
        }
        d = sqrt(d);
        H[j * na + j] = d;
        for (size_t i = j + 1; i < na; i++) {
            double v = H[i * na + j];
            for (size_t k = 0; k < j; k++)
                v -= H[i * na + k] * H[j * na + k];
            H[i * na + j] = v / d;
        }
    }
    *pd = 1;
    return 1;
}

/* With L (na x na, lower) from hessian_chol and g (nfree): the decrement
 * |L^-1 g_act|^2 / 2 returned; the Newton step -H^-1 g_act into dir (nfree,
 * 0 off the active set); z: na doubles. */
static double newton_dir(size_t nf, const size_t *act, size_t na, const double *L,
                         const double *g, double *z, double *dir)
{
    double g2 = 0.0;
    for (size_t i = 0; i < na; i++) {
        double v = g[act[i]];
        for (size_t k = 0; k < i; k++)
            v -= L[i * na + k] * z[k];
        z[i] = v / L[i * na + i];
        g2 += z[i] * z[i];
    }
    memset(dir, 0, nf * sizeof *dir);
    for (size_t i = na; i-- > 0;) {
        double v = z[i];
        for (size_t k = i + 1; k < na; k++)
            v -= L[k * na + i] * dir[act[k]];
        dir[act[i]] = v / L[i * na + i];
    }
    for (size_t i = 0; i < na; i++)
        dir[act[i]] = -dir[act[i]];
    return 0.5 * g2;
}

/* ECnoise (infer_impl.h) of f at u0 along dir (not 0): 8 evaluations at
 * steps of NOISE_STEP max(1, |u0|_inf) along dir / |dir|.  0 when an
 * evaluation fails. */
static int noise_along(run_ctx *c, const double *u0, double f0, const double *dir, double *wu,
                       double *wg, double *noise)
{
    size_t nf = c->nfree;
    double dn = 0.0, scale = 1.0, f[9];
    for (size_t k = 0; k < nf; k++) {
        dn += dir[k] * dir[k];
        scale = fmax(scale, fabs(u0[k]));
    }
    dn = sqrt(dn);
    if (!(dn > 0.0) || !isfinite(dn))
        return 0;
    f[4] = f0;
    for (int j = -4; j <= 4; j++) {
        for (size_t k = 0; j && k < nf; k++)
            wu[k] = u0[k] + j * NOISE_STEP * scale * dir[k] / dn;
        if (j && !eval_min(c, wu, &f[j + 4], wg))
            return 0;
    }
    *noise = infer_ecnoise(f);
    return 1;
}

/* se (nparam) at the free variables act[0 .. na) from L (H = L L', on the
 * u scale, at c->theta): var of a'u = |L^-1 a|^2, a = e_k or, for a
 * coefficient of the design basis, its row of s R^-1; positive parameters
 * by the delta method.  v: nfree, z: na doubles. */
static void std_errors_from(run_ctx *c, const size_t *act, size_t na, const double *L, double *v,
                            double *z, double *se)
{
    for (size_t b = 0; b < na; b++) {
        size_t k = act[b], i = c->idx[k];
        if (infer_scale_in_lin(&c->sc, k))
            continue;
        double v2 = 0.0;
        for (size_t a = 0; a < na; a++) { /* z = L^-1 e_b */
            double x = a == b ? 1.0 : 0.0;
            for (size_t t = b; t < a; t++)
                x -= L[a * na + t] * z[t];
            z[a] = a < b ? 0.0 : x / L[a * na + a];
            v2 += z[a] * z[a];
        }
        se[i] = sqrt(v2) * gmm_scale_dp_du(c->obj->scale[i], c->theta[i]);
    }
    for (size_t j = 0; j < c->sc.lin; j++) {
        infer_scale_row(&c->sc, j, v);
        double v2 = 0.0;
        for (size_t a = 0; a < na; a++) {
            double x = v[act[a]];
            for (size_t t = 0; t < a; t++)
                x -= L[a * na + t] * z[t];
            z[a] = x / L[a * na + a];
            v2 += z[a] * z[a];
        }
        se[c->obj->lin_idx[j]] = sqrt(v2);
    }
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

/* At a boundary probe (u, *f, g), the coefficients (identity-scale free
 * variables) re-fitted by at most 3 Newton steps: a variance taken to its
 * limit leaves the likelihood unbounded only as the coefficients follow (the
 * intercept absorbs a constraint's direction), which a probe with them held
 * cannot see.  u, *f and g move where loglik rises.  ws: nf + 2 nf^2 + 8 nf
 * doubles (H's room).  Nonzero when it ran. */
static int coef_newton(run_ctx *c, double *u, double *f, double *g, double *ut, double *H)
{
    size_t nf = c->nfree, nc = 0;
    size_t *act = gmm_malloc(nf ? nf : 1, sizeof *act);
    double *w = gmm_malloc(6 * nf + 1, sizeof *w);
    if (!act || !w) {
        gmm_free(act);
        gmm_free(w);
        return 0;
    }
    for (size_t k = 0; k < nf; k++)
        if (c->obj->scale[c->idx[k]] == GMM_SCALE_IDENTITY)
            act[nc++] = k;
    double *wu = w, *gp = wu + nf, *gm = gp + nf, *z = gm + nf, *dir = z + nf, *gt = dir + nf;
    for (int it = 0; nc && it < 3; it++) {
        int pd = 0;
        size_t bad;
        if (!hessian_chol(c, u, act, nc, CERT_STEP, H, wu, gp, gm, &pd, &bad) || !pd)
            break;
        newton_dir(nf, act, nc, H, g, z, dir);
        int moved = 0;
        for (double t = 1.0; t > 1e-6 && !moved; t *= 0.5) {
            double ft;
            for (size_t k = 0; k < nf; k++)
                ut[k] = u[k] + t * dir[k];
            if (eval_min(c, ut, &ft, gt) && ft < *f) {
                memcpy(u, ut, nf * sizeof *u);
                memcpy(g, gt, nf * sizeof *g);
                *f = ft;
                moved = 1;
            }
        }
        if (!moved)
            break;
    }
    gmm_free(act);
    gmm_free(w);
    return nc > 0;
}

/* A correlation (atanh scale) that leaves H not definite (bad) within 2e-4
 * of +-1: at a singular fit (lme4's correlation of +-1, one effect's
 * variance ~0) loglik is flat in it near the bound, so the search stops
 * short.  Its maximum is at the bound when loglik does not fall as it moves
 * BOUND_PROBE further (at most to the scale's edge, opt_scale.c); then it is
 * held, named a boundary (c->par->boundary) and dropped from act.  1 when
 * so. */
static int corr_boundary(run_ctx *c, const double *u, double f0, size_t bad, size_t *act,
                         size_t *na, double *wu, double *gt, gmm_fit_result *res)
{
    size_t i = c->idx[bad], nf = c->nfree;
    double per, fp;
    if (c->obj->scale[i] != GMM_SCALE_ATANH || !gmm_scale_two_sided(GMM_SCALE_ATANH, &per) ||
        !(fabs(u[bad]) > per * CERT_CORR_DROP))
        return 0;
    double to = u[bad] < 0.0 ? -1.0 : 1.0;
    memcpy(wu, u, nf * sizeof *wu);
    wu[bad] = to * fmin(fabs(u[bad]) + per * BOUND_PROBE, per * INFER_LOGIT_MAX);
    if (!eval_min(c, wu, &fp, gt) || -fp < -f0 - BOUND_TOL * fmax(1.0, fabs(f0)))
        return 0;
    if (c->par->boundary)
        c->par->boundary[i] = 1;
    res->nboundary++;
    size_t b = 0;
    for (size_t a = 0; a < *na; a++)
        if (act[a] != bad)
            act[b++] = act[a];
    *na = b;
    return 1;
}

/* The test at the best point u (nfree; moved by the Newton steps it takes)
 * with f0 = -loglik there.  Sets res's converged, stop, message, gain, noise,
 * newton_steps, boundary, unbounded, left_param, left_to; the standard
 * errors into params->std_errors when given. */
static gmm_status certify(run_ctx *c, double *u, const double *init, gmm_fit_result *res)
{
    size_t nf = c->nfree, np = c->obj->nparam;
    gmm_status st = GMM_OK;
    double *buf = gmm_malloc(nf * nf + 10 * nf + 1, sizeof *buf);
    size_t *act = gmm_malloc(nf ? nf : 1, sizeof *act);
    if (!buf || !act) {
        st = gmm_error(GMM_ENOMEM, "fit: out of memory for the Hessian of %zu parameters", nf);
        goto done;
    }
    double *H = buf, *g = H + nf * nf, *wu = g + nf, *gp = wu + nf, *gm = gp + nf;
    double *dir = gm + nf, *z = dir + nf, *ut = z + nf, *gt = ut + nf, *u1 = gt + nf;
    double f, f0;
    res->gain = res->noise = NAN;
    res->unbounded = 0;
    res->left_param = NULL;
    res->left_to = NAN;
    if (!eval_min(c, u, &f, g)) {
        st = c->fail_status ? c->fail_status : gmm_error(GMM_EDOM, "fit: the best point fails");
        goto done;
    }
    f0 = f;
    res->grad_norm = 0.0;
    for (size_t k = 0; k < nf; k++)
        res->grad_norm += g[k] * g[k];
    res->grad_norm = sqrt(res->grad_norm);
    /* boundaries: a variance that went to 0 is held there */
    size_t na = 0;
    for (size_t k = 0; k < nf; k++) {
        size_t i = c->idx[k];
        int low = 0;
        gmm_scale sc = c->obj->scale[i];
        /* towards which bound: -1 (log: 0; logit: 0; atanh: -1), +1 (logit,
         * atanh: 1), 0 none */
        int to = 0;
        double per;
        int two = gmm_scale_two_sided(sc, &per);
        if (sc == GMM_SCALE_LOG && init[i] > 0.0 && u[k] < log(init[i]) - CERT_BOUND_DROP)
            to = -1;
        else if (two && fabs(u[k]) > per * CERT_BOUND_DROP)
            to = u[k] < 0.0 ? -1 : 1;
        if (to) {
            double fp, fi, tol = BOUND_TOL * fmax(1.0, fabs(f0));
            memcpy(wu, u, nf * sizeof *wu);
            /* 1e3 and then 1e6 further: where the others have not yet
             * settled to the limit, the nearer probe can still fall */
            int up = 0;
            for (int r = 1; r <= 2 && !up; r++) {
                memcpy(wu, u, nf * sizeof *wu);
                wu[k] = u[k] + to * r * BOUND_PROBE;
                up = eval_min(c, wu, &fp, gt) &&
                     (-fp >= -f0 - tol || (sc == GMM_SCALE_LOG && coef_newton(c, wu, &fp, gt, ut, H))) &&
                     -fp >= -f0 - tol;
            }
            if (up) {
                low = 1;
                /* only a variance can take the likelihood to infinity (a bounded
                 * parameter's limit is a model) */
                if (sc == GMM_SCALE_LOG && -fp > -f0 + BOUND_UNBOUNDED)
                    low = 2;
                /* the probe is higher: the point moves there (a variance; a logit
                 * or atanh parameter's value has lost its digits that far out) */
                if (sc == GMM_SCALE_LOG && -fp > -f0) {
                    memcpy(u, wu, nf * sizeof *u);
                    f0 = fp;
                    memcpy(g, gt, nf * sizeof *g);
                }
            } else if (two) {
                /* a logit parameter's natural value rounds near its bound
                 * (1 - p from p loses digits: loglik ~1e-4 off at 1 - 1e-10),
                 * so the far side is read from inside: loglik still rising
                 * towards the bound and lower BOUND_PROBE inwards */
                wu[k] = u[k] - to * per * BOUND_PROBE;
                if (-g[k] * to >= 0.0 && eval_min(c, wu, &fi, gt) && -fi < -f0 - tol)
                    low = 1;
            }
        }
        if (low) {
            if (c->par->boundary)
                c->par->boundary[i] = low;
            res->nboundary++;
            res->unbounded = res->unbounded || low == 2;
        } else {
            act[na++] = k;
        }
    }
    if (res->unbounded) {
        res->converged = 0;
        res->stop = "unbounded";
        res->message = "the likelihood grows without bound as a variance goes to 0: no maximum";
        if (!map_theta(c, u)) /* the point reached, not the last probe */
            st = c->fail_status;
        res->loglik = -f0;
        goto done;
    }
    int pd = 0, h_at_u = 0, edge = 0;
    size_t bad = 0;
    double dec = 0.0;
    for (size_t it = 0;; it++) {
        if (!na) {
            pd = 1;
            dec = 0.0;
            break;
        }
        if (!hessian_chol(c, u, act, na, CERT_STEP, H, wu, gp, gm, &pd, &bad)) {
            pd = 0;
            edge = 1; /* a difference step left the objective's domain */
            break;
        }
        if (!pd && corr_boundary(c, u, f0, bad, act, &na, wu, gt, res))
            continue;
        if (!pd)
            break;
        h_at_u = 1;
        dec = newton_dir(nf, act, na, H, g, z, dir);
        if (dec <= CERT_GAIN || it == CERT_ITER)
            break;
        /* the Newton step, halved until loglik rises */
        int moved = 0;
        for (double t = 1.0; t > 1e-10 && !moved; t *= 0.5) {
            for (size_t k = 0; k < nf; k++)
                ut[k] = u[k] + t * dir[k];
            if (eval_min(c, ut, &f, gt) && f < f0) {
                memcpy(u, ut, nf * sizeof *u);
                memcpy(g, gt, nf * sizeof *g);
                f0 = f;
                moved = 1;
                h_at_u = 0;
            }
        }
        if (!moved)
            break;
        res->newton_steps++;
    }
    res->gain = pd ? dec : NAN;
    if (edge) {
        res->stop = "domain";
        res->message = "not converged: the objective is not defined a difference step away "
                       "(the edge of the model's domain)";
        if (!res->domain_msg[0])
            snprintf(res->domain_msg, sizeof res->domain_msg, "%s", gmm_error_message());
    } else if (pd && dec <= CERT_GAIN) {
        res->converged = 1;
        res->stop = "newton";
        res->message = "converged: a Newton step would raise loglik by less than 1e-8";
    } else {
        /* H at the rough scale, the noise along its Newton direction */
        int pd2 = 0;
        size_t bad2 = 0;
        double dec2 = NAN, noise;
        memcpy(u1, u, nf * sizeof *u1);
        h_at_u = 0;
        if (hessian_chol(c, u1, act, na, NOISE_HSTEP, H, wu, gp, gm, &pd2, &bad2) && pd2) {
            dec2 = newton_dir(nf, act, na, H, g, z, dir);
            if (noise_along(c, u1, f0, dir, wu, gt, &noise)) {
                res->noise = noise;
                if (dec2 <= NOISE_GAIN * noise) {
                    res->converged = 1;
                    res->gain = dec2;
                    res->stop = "noise";
                    res->message = "converged at the noise level: a Newton step would raise "
                                   "loglik by less than 4 times its rounding noise";
                    pd = 1;
                }
            }
        }
        if (!res->converged) {
            /* the Newton direction at CERT_STEP for the report */
            if (pd && hessian_chol(c, u, act, na, CERT_STEP, H, wu, gp, gm, &pd, &bad) && pd) {
                h_at_u = 1;
                newton_dir(nf, act, na, H, g, z, dir);
            }
            res->stop = pd ? "not_maximum" : "not_definite";
            res->message = pd ? "not converged: a Newton step would still raise loglik"
                              : "not converged: the Hessian of loglik is not negative definite "
                                "here";
            if (!pd) {
                res->left_param = c->obj->name[c->idx[bad]];
            } else {
                /* the parameter a Newton step moves most in its standard errors
                 * (scale-free, whatever its scale or basis) */
                double *se = gmm_malloc(2 * np, sizeof *se), best = -1.0;
                if (!se) {
                    st = gmm_error(GMM_ENOMEM, "fit: out of memory");
                    goto done;
                }
                double *th0 = se + np;
                size_t imax = c->idx[act[0]];
                for (size_t i = 0; i < np; i++)
                    th0[i] = NAN;
                if (map_theta(c, u)) {
                    for (size_t i = 0; i < np; i++)
                        se[i] = NAN;
                    std_errors_from(c, act, na, H, wu, z, se);
                    memcpy(th0, c->theta, np * sizeof *th0);
                }
                for (size_t k = 0; k < nf; k++)
                    ut[k] = u[k] + dir[k];
                if (map_theta(c, ut)) {
                    for (size_t a = 0; a < na; a++) {
                        size_t i = c->idx[act[a]];
                        double d = fabs(c->theta[i] - th0[i]) / se[i];
                        if (d > best) {
                            best = d;
                            imax = i;
                        }
                    }
                    res->left_param = c->obj->name[imax];
                    res->left_to = c->theta[imax];
                }
                gmm_free(se);
            }
        }
    }
    /* standard errors from H at CERT_STEP at the returned point */
    if (c->par->std_errors) {
        double *se = c->par->std_errors;
        for (size_t i = 0; i < np; i++)
            se[i] = NAN;
        int pd3 = h_at_u;
        size_t bad3 = 0;
        if (na && !h_at_u && !hessian_chol(c, u, act, na, CERT_STEP, H, wu, gp, gm, &pd3, &bad3))
            pd3 = 0;
        if (na && pd3 && map_theta(c, u))
            std_errors_from(c, act, na, H, wu, z, se);
    }
    if (!map_theta(c, u))
        st = gmm_error(GMM_EDOM, "fit: the best point left the range of doubles");
    res->loglik = -f0;
    res->grad_norm = 0.0; /* at the point returned */
    for (size_t k = 0; k < nf; k++)
        res->grad_norm += g[k] * g[k];
    res->grad_norm = sqrt(res->grad_norm);
done:
    gmm_free(buf);
    gmm_free(act);
    return st;
}

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
            memcpy(ubest, u, nfree * sizeof *ubest);
            res->loglik = r.loglik;
            res->grad_norm = r.grad_norm;
            res->iterations = r.iterations;
            res->best_start = s;
            res->lbfgs_status = r.status;
            res->lbfgs_stop = r.stop;
            res->message = r.message;
            res->domain_msg[0] = '\0';
            if (r.domain)
                snprintf(res->domain_msg, sizeof res->domain_msg, "%s", r.domain_msg);
        }
        if (c.cancelled) {
            if (have_best && map_theta(&c, ubest))
                memcpy(obj->value, theta, np * sizeof *theta);
            else
                memcpy(obj->value, init, np * sizeof *init);
            st = gmm_error(GMM_ECANCEL, "fit: cancelled by the progress callback");
            goto done;
        }
    }
    if (!have_best) {
        st = gmm_error(first_fail, "fit: starting point: %s", first_msg);
        goto done;
    }
    /* CONVERGED: the test at the best point, whatever stopped L-BFGS */
    size_t e0 = c.evals;
    c.evals = 0;
    st = certify(&c, ubest, init, res);
    res->evaluations += c.evals;
    c.evals = e0;
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

/* lincomb's var[r] = a_r' C a_r from L (H = L L' over all nf free
 * variables, at c->theta), C H^-1 carried to the parameters' scale: the
 * gradient of a_r'theta in u -- a_i dp/du at a free variable of its own, a
 * coefficient of the design basis its row of s R^-1 -- through L^-1.  v, z:
 * nf doubles each. */
static void lincomb_from(run_ctx *c, size_t nf, const double *L, const double *A, size_t nrow,
                         double *v, double *z, double *var)
{
    const gmm_objective *o = c->obj;
    size_t np = o->nparam;
    for (size_t r = 0; r < nrow; r++) {
        const double *a = A + r * np;
        memset(z, 0, nf * sizeof *z);
        for (size_t k = 0; k < nf; k++) {
            size_t i = c->idx[k];
            if (!infer_scale_in_lin(&c->sc, k))
                z[k] = a[i] * gmm_scale_dp_du(o->scale[i], c->theta[i]);
        }
        for (size_t j = 0; j < c->sc.lin; j++) {
            double w = a[o->lin_idx[j]];
            if (w == 0.0)
                continue;
            infer_scale_row(&c->sc, j, v);
            for (size_t k = 0; k < nf; k++)
                z[k] += w * v[k];
        }
        double v2 = 0.0;
        for (size_t k = 0; k < nf; k++) { /* z = L^-1 g in place */
            double x = z[k];
            for (size_t t = 0; t < k; t++)
                x -= L[k * nf + t] * z[t];
            z[k] = x / L[k * nf + k];
            v2 += z[k] * z[k];
        }
        var[r] = v2;
    }
}

/* The observed information at obj->value, factored, then the standard
 * errors (A NULL: into out, nparam) or the variances of A's nrow rows
 * (into out, nrow). */
static gmm_status observed_info(gmm_objective *obj, const double *A, size_t nrow, double *out)
{
    size_t np = obj->nparam, nf = 0;
    for (size_t i = 0; i < np; i++)
        nf += !obj->fixed[i];
    for (size_t i = 0; i < (A ? nrow : np); i++)
        out[i] = A ? 0.0 : NAN;
    if (nf == 0)
        return GMM_OK;
    run_ctx c;
    memset(&c, 0, sizeof c);
    gmm_fit_params par;
    gmm_fit_params_init(&par);
    size_t *idx = gmm_malloc(nf, sizeof *idx), *act = gmm_malloc(nf, sizeof *act);
    double *theta = gmm_malloc(np, sizeof *theta), *grad = gmm_malloc(np, sizeof *grad);
    double *u0 = gmm_malloc(nf, sizeof *u0), *H = gmm_malloc(nf * nf + 5 * nf, sizeof *H);
    gmm_status st = GMM_OK;
    if (!idx || !act || !theta || !grad || !u0 || !H) {
        st = gmm_error(GMM_ENOMEM, "fit: out of memory for the Hessian of %zu parameters", nf);
        goto done;
    }
    memcpy(theta, obj->value, np * sizeof *theta);
    for (size_t i = 0, k = 0; i < np; i++)
        if (!obj->fixed[i]) {
            act[k] = k;
            idx[k++] = i;
        }
    c.obj = obj;
    c.par = &par;
    c.nfree = nf;
    c.idx = idx;
    c.theta = theta;
    c.grad = grad;
    if ((st = infer_scale_init(&c.sc, obj, nf, idx)) != GMM_OK)
        goto done;
    infer_scale_u(&c.sc, obj->value, u0);
    double *wu = H + nf * nf, *gp = wu + nf, *gm = gp + nf, *z = gm + nf, *v = z + nf;
    int pd = 0;
    size_t bad = 0;
    /* the Hessian of -loglik on the optimisation scale: its inverse is the
     * covariance of the estimates there */
    if (!hessian_chol(&c, u0, act, nf, CERT_STEP, H, wu, gp, gm, &pd, &bad)) {
        st = c.fail_status ? c.fail_status
                           : gmm_error(GMM_EDOM, "fit: the objective fails near its values");
        goto done;
    }
    if (!pd) {
        st = gmm_error(GMM_ENOTPD, "the observed information is not positive definite: the "
                                   "fit is not at a maximum ('%s')",
                       obj->name[idx[bad]]);
        goto done;
    }
    memcpy(theta, obj->value, np * sizeof *theta);
    if (A)
        lincomb_from(&c, nf, H, A, nrow, v, wu, out);
    else
        std_errors_from(&c, act, nf, H, v, z, out);
done:
    gmm_free(idx);
    gmm_free(act);
    gmm_free(theta);
    gmm_free(grad);
    gmm_free(u0);
    gmm_free(H);
    infer_scale_free(&c.sc);
    return st;
}

gmm_status gmm_fit_std_errors(gmm_objective *obj, double *se)
{
    if (!obj || !obj->eval || !se)
        return gmm_error(GMM_EINVAL, "fit: NULL argument to gmm_fit_std_errors");
    return observed_info(obj, NULL, 0, se);
}

gmm_status gmm_fit_lincomb_var(gmm_objective *obj, const double *A, size_t nrow, double *var)
{
    if (!obj || !obj->eval || (nrow && (!A || !var)))
        return gmm_error(GMM_EINVAL, "fit: NULL argument to gmm_fit_lincomb_var");
    return observed_info(obj, A, nrow, var);
}
