/* fit_cert.c -- the test at the point a fit returns (fit.h, "converged"):
 * whether the maximum is reached there, what is left where it is not, the
 * parameters at a bound, and the standard errors from the same Hessian.
 *
 * CONVERGED.  At the best point of the starts a test decides: the Newton
 * decrement g' H^-1 g / 2 -- the loglik a Newton step would still gain --
 * is at most 1e-8, H the Hessian of -loglik on the u
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
#include "fit_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

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
int fit_hessian_chol(run_ctx *c, const double *u0, const size_t *act, size_t na, double step,
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
        if (!fit_eval_min(c, wu, &f, gp))
            return 0;
        wu[k] = u0[k] - h;
        if (!fit_eval_min(c, wu, &f, gm))
            return 0;
        for (size_t b = 0; b < na; b++)
            H[b * na + a] = (gp[act[b]] - gm[act[b]]) / (2.0 * h);
    }
    for (size_t i = 0; i < na; i++)
        for (size_t k = 0; k < i; k++)
            H[i * na + k] = H[k * na + i] = 0.5 * (H[i * na + k] + H[k * na + i]);
    size_t j;
    if (fit_chol(H, na, &j))
        *pd = 1;
    else
        *bad = act[j];
    return 1;
}

int fit_chol(double *H, size_t na, size_t *bad)
{
    for (size_t j = 0; j < na; j++) {
        double d = H[j * na + j];
        for (size_t k = 0; k < j; k++)
            d -= H[j * na + k] * H[j * na + k];
        if (!(d > 0.0) || !isfinite(d)) {
            *bad = j;
            return 0;
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
    return 1;
}

double fit_newton_dir(size_t nf, const size_t *act, size_t na, const double *L, const double *g,
                      double *z, double *dir)
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
        if (j && !fit_eval_min(c, wu, &f[j + 4], wg))
            return 0;
    }
    *noise = infer_ecnoise(f);
    return 1;
}

/* se (nparam) at the free variables act[0 .. na) from L (H = L L', on the
 * u scale, at c->theta): var of a'u = |L^-1 a|^2, a = e_k or, for a
 * coefficient of the design basis, its row of s R^-1; positive parameters
 * by the delta method.  v: nfree, z: na doubles. */
void fit_std_errors_from(run_ctx *c, const size_t *act, size_t na, const double *L, double *v,
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
        if (!fit_hessian_chol(c, u, act, nc, CERT_STEP, H, wu, gp, gm, &pd, &bad) || !pd)
            break;
        fit_newton_dir(nf, act, nc, H, g, z, dir);
        int moved = 0;
        for (double t = 1.0; t > 1e-6 && !moved; t *= 0.5) {
            double ft;
            for (size_t k = 0; k < nf; k++)
                ut[k] = u[k] + t * dir[k];
            if (fit_eval_min(c, ut, &ft, gt) && ft < *f) {
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
    if (!fit_eval_min(c, wu, &fp, gt) || -fp < -f0 - BOUND_TOL * fmax(1.0, fabs(f0)))
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
gmm_status fit_certify(run_ctx *c, double *u, const double *init, gmm_fit_result *res)
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
    if (!fit_eval_min(c, u, &f, g)) {
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
                up = fit_eval_min(c, wu, &fp, gt) &&
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
                if (-g[k] * to >= 0.0 && fit_eval_min(c, wu, &fi, gt) && -fi < -f0 - tol)
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
        if (!fit_map_theta(c, u)) /* the point reached, not the last probe */
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
        if (!fit_hessian_chol(c, u, act, na, CERT_STEP, H, wu, gp, gm, &pd, &bad)) {
            pd = 0;
            edge = 1; /* a difference step left the objective's domain */
            break;
        }
        if (!pd && corr_boundary(c, u, f0, bad, act, &na, wu, gt, res))
            continue;
        if (!pd)
            break;
        h_at_u = 1;
        dec = fit_newton_dir(nf, act, na, H, g, z, dir);
        if (dec <= CERT_GAIN || it == CERT_ITER)
            break;
        /* the Newton step, halved until loglik rises */
        int moved = 0;
        for (double t = 1.0; t > 1e-10 && !moved; t *= 0.5) {
            for (size_t k = 0; k < nf; k++)
                ut[k] = u[k] + t * dir[k];
            if (fit_eval_min(c, ut, &f, gt) && f < f0) {
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
        if (fit_hessian_chol(c, u1, act, na, NOISE_HSTEP, H, wu, gp, gm, &pd2, &bad2) && pd2) {
            dec2 = fit_newton_dir(nf, act, na, H, g, z, dir);
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
            if (pd && fit_hessian_chol(c, u, act, na, CERT_STEP, H, wu, gp, gm, &pd, &bad) && pd) {
                h_at_u = 1;
                fit_newton_dir(nf, act, na, H, g, z, dir);
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
                if (fit_map_theta(c, u)) {
                    for (size_t i = 0; i < np; i++)
                        se[i] = NAN;
                    fit_std_errors_from(c, act, na, H, wu, z, se);
                    memcpy(th0, c->theta, np * sizeof *th0);
                }
                for (size_t k = 0; k < nf; k++)
                    ut[k] = u[k] + dir[k];
                if (fit_map_theta(c, ut)) {
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
        if (na && !h_at_u && !fit_hessian_chol(c, u, act, na, CERT_STEP, H, wu, gp, gm, &pd3, &bad3))
            pd3 = 0;
        if (na && pd3 && fit_map_theta(c, u))
            fit_std_errors_from(c, act, na, H, wu, z, se);
    }
    if (!fit_map_theta(c, u))
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
