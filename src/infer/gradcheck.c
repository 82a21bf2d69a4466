/* gradcheck.c -- analytic gradient versus central differences, one parameter
 * at a time, on the scale fit optimises, judged against the difference's own
 * error bound and the objective's scale (see gradcheck.h).
 *
 * Why not GSL's gsl_deriv_central: its round-off estimate assumes f is exact
 * to eps |f|.  A marginal likelihood from a banded factorisation is not: on
 * the CO2 fit (n = 2016, |f| = 957) its evaluations scatter by 6e-9, about
 * 3e4 eps |f|, so GSL's round-off estimate is 3e4 times too small, its step
 * refinement mistakes the noise for truncation and shrinks the step into the
 * noise (the period's derivative -270.87084 came out as -270.86828 with an
 * error estimate of 1e-4; a least-squares slope over 200 points gives
 * -270.8708376).  Here the noise is measured first (Moré and Wild's ECnoise,
 * SIAM J. Sci. Comput. 33(3), 2011) and enters the round-off term.
 *
 * For each parameter p (free and fixed alike) the derivative is taken on the
 * scale `fit` optimises (objective.h, SCALES): u = log p for positive
 * parameters, u = logit p for those in (0, 1), u = p otherwise, so that
 * every difference point lies inside the domain, however near a bound p is.
 * The finite difference fd is the 5-point central rule (GSL's), with an
 * error bound fd_error: its truncation estimate plus three standard
 * deviations of f's own rounding noise carried through the rule -- the noise
 * measured first from 8 extra evaluations at u +- 1e-6 k (Moré and Wild's
 * ECnoise), since a likelihood from a banded factorisation is far noisier
 * than eps |f| (CO2 fit: 6e-9 at |f| = 957) -- after one step refinement
 * that balances the two terms; then, where its bound is smaller and it
 * agrees, the rule with its own truncation estimate (the difference from
 * the rule at twice the step) at steps 1, 4, 16, .. times the initial one.
 * Verdicts: gradcheck.h, VERDICTS.
 *
 * The row's allowed is tol + fd_error (fail is abs_error > allowed; the
 * same tests hold on p's scale: every side divided by dp/du > 0).  Why
 * 1e-3 |a| and not tol alone: the 5-point rule's error bound is GSL's
 * conservative truncation estimate (on smooth models ~1e-5 |a|, often 100
 * times the actual error), so tol = 1e-6 |f| is below it on ordinary
 * models whose differences agree to 1e-7; a bug -- a missing term, a
 * wrong factor -- moves a by far more than 1e-3 of itself, and smaller
 * discrepancies beyond allowed still fail.  Why not a larger fraction:
 * ok is a claim that the digits were compared.  The smallest rel_tol at
 * which fd_error <= tol is fd_error / max(|a|, |fd|, |f|, 1) (needed_tol).
 * rel_tol is thus a
 * tolerance relative to max(|a|, |fd|, |f|, 1), not to |a| alone: rel_error
 * may be far above it in a row that passes, where the gradient is tiny
 * against |f|.  The |f| term is the objective's scale: on
 * the log scale dloglik/du is a sum of terms of the size of loglik's (one
 * per observation), which cancel at an optimum, so a gradient there is
 * judged against |f| and not against itself: a gradient of 2e-4 on a
 * loglik of -957 is zero, and an error of 1e-4 relative in an entry larger
 * than |f| / 100 still fails.  Values are reported on the natural scale
 * (dloglik/dp = (dloglik/du) / (dp/du)).
 */
#include "gmm/gradcheck.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "infer_impl.h"

void gmm_gradcheck_params_init(gmm_gradcheck_params *p)
{
    p->step = 1e-3;
    p->rel_tol = 1e-6;
}

gmm_status gmm_gradcheck_params_check(const gmm_gradcheck_params *p)
{
    if (!p)
        return gmm_error(GMM_EINVAL, "gradcheck: no parameters");
    if (!(p->step > 0.0 && p->step < 1.0))
        return gmm_error(GMM_EINVAL, "gradcheck: step must be in (0, 1), got %g", p->step);
    if (!(p->rel_tol >= 0.0) || !isfinite(p->rel_tol))
        return gmm_error(GMM_EINVAL, "gradcheck: rel_tol must be finite and >= 0, got %g",
                         p->rel_tol);
    return GMM_OK;
}

/* loglik as a function of one parameter's u. */
typedef struct {
    const gmm_objective *obj;
    double *theta;
    size_t i;
    gmm_status failed;     /* first failure of the objective */
    double fail_at;        /* natural-scale value where it failed */
    char msg[GMM_ERROR_MAX];
} one_dim;

static double loglik_of_u(one_dim *c, double u)
{
    double ll = NAN, save = c->theta[c->i];
    double p = gmm_scale_from_u(c->obj->scale[c->i], u);
    if (c->failed != GMM_OK)
        return NAN;
    c->theta[c->i] = p;
    gmm_status st = c->obj->eval(c->obj->ctx, c->theta, &ll, NULL);
    c->theta[c->i] = save;
    if (st == GMM_OK && !isfinite(ll))
        st = gmm_error(GMM_EDOM, "log-likelihood is not finite");
    if (st != GMM_OK) {
        c->failed = st;
        c->fail_at = p;
        snprintf(c->msg, sizeof c->msg, "%s", gmm_error_message());
    }
    return st == GMM_OK ? ll : NAN;
}

/* ECnoise (infer_impl.h): the k-th differences of independent noise of
 * variance s^2 have variance s^2 (2k)! / (k!)^2, while a smooth f's are
 * about f^(k) delta^k, negligible at delta = 1e-6 u-units for k >= 4.  The
 * largest of the estimates from k = 4, 5, 6 is taken (9 points give 5, 4
 * and 3 differences: each estimate is good to a factor of about 2).  Never
 * below the representation error eps |f[4]| / 2. */
double infer_ecnoise(double f[9])
{
    double s = 0.0, gamma = 1.0, f0 = f[4]; /* gamma = (k!)^2 / (2k)! */
    for (int k = 1; k <= 6; k++) {
        for (int j = 0; j < 9 - k; j++) /* one more order of differences */
            f[j] = f[j + 1] - f[j];
        gamma *= (double)k * k / ((2.0 * k - 1.0) * (2.0 * k));
        if (k >= 4) {
            double ss = 0.0;
            for (int j = 0; j < 9 - k; j++)
                ss += f[j] * f[j];
            s = fmax(s, sqrt(gamma * ss / (9 - k)));
        }
    }
    return fmax(s, 0.5 * DBL_EPSILON * fabs(f0));
}

/* The noise of f along u at u (f0 = f(u)), from 8 more evaluations. */
static double noise_level(one_dim *c, double u, double f0, double delta)
{
    double f[9];
    for (int k = -4; k <= 4; k++)
        f[k + 4] = k ? loglik_of_u(c, u + k * delta) : f0;
    return infer_ecnoise(f);
}

/* The 5-point central difference from f(u +- h), f(u +- h/2) (GSL's rule):
 * r3 = (f(u+h) - f(u-h)) / 2h, r5 = (4 D(h/2) - r3) / 3.  Its error bound is
 * GSL's truncation estimate |r5 - r3| (the error of r3, O(h^2): a
 * conservative bound for r5's O(h^4)) plus three standard deviations of the
 * noise s carried into r5 (sqrt(65/18) s / h) and the rounding of u + h. */
typedef struct {
    double h, d, trunc, round;
    double r3; /* the 3-point rule at h */
} central;

static central central_diff(one_dim *c, double u, double h, double s)
{
    double fp1 = loglik_of_u(c, u + h), fm1 = loglik_of_u(c, u - h);
    double fph = loglik_of_u(c, u + 0.5 * h), fmh = loglik_of_u(c, u - 0.5 * h);
    double r3 = (fp1 - fm1) / (2.0 * h);
    double r5 = (4.0 * (fph - fmh) / h - r3) / 3.0;
    central r = {h, r5, fabs(r5 - r3), 0.0, r3};
    r.round = 3.0 * sqrt(65.0 / 18.0) * s / h +
              fmax(fabs(r3), fabs(r5)) * DBL_EPSILON * (fabs(u) / h + 1.0);
    return r;
}

/* The same 5-point rule with the bound of its own error: |r5(2h) - r5(h)|
 * (r5(2h) from f(u +- 2h) and the 3-point rule at h), about the error of
 * r5(2h), 16 times r5(h)'s where the h^4 term leads (plus the two's noise,
 * which round bounds as well). */
static central central_diff4(one_dim *c, double u, double h, double s)
{
    central r = central_diff(c, u, h, s);
    double fp2 = loglik_of_u(c, u + 2.0 * h), fm2 = loglik_of_u(c, u - 2.0 * h);
    double r5w = (4.0 * r.r3 - (fp2 - fm2) / (4.0 * h)) / 3.0;
    r.trunc = fabs(r5w - r.d);
    return r;
}

/* The derivative of f along u with its error bound: ECnoise for the noise,
 * the 5-point rule at h0, then once at the step that balances the bound's
 * two terms (truncation ~ h^2, noise ~ 1/h: h0 (round / 2 trunc)^(1/3),
 * within [h0 / 1000, hmax]), kept when its bound is smaller and it agrees
 * with the first within 4 of the first's bounds (GSL's acceptance test).
 * That bound takes the 3-point rule's error for the 5-point rule's (a step
 * that balances it is far below the 5-point rule's best); the sharper
 * central_diff4 then goes at h0, 4 h0, 16 h0, .. up to hmax / 2 (its
 * truncation ~ h^4 against the noise ~ 1/h; at small steps its estimate
 * is the noise's, so no balance formula finds the step), each kept when
 * its bound is smaller and it agrees with the best so far within that
 * one's bound. */
static central derivative(one_dim *c, double u, double f0, double unit, double h0,
                          double *noise)
{
    double s = noise_level(c, u, f0, 1e-6 * unit), hmax = 0.1 * unit;
    central r0 = central_diff(c, u, h0, s), best = r0;
    *noise = s;
    if (c->failed != GMM_OK || !(r0.trunc > 0.0 && r0.round > 0.0))
        return r0;
    double h1 = h0 * cbrt(r0.round / (2.0 * r0.trunc));
    h1 = fmin(fmax(h1, 1e-3 * h0), hmax);
    if (fabs(h1 - h0) > 0.1 * h0) {
        central r1 = central_diff(c, u, h1, s);
        if (c->failed != GMM_OK)
            return r0;
        if (r1.trunc + r1.round < r0.trunc + r0.round &&
            fabs(r1.d - r0.d) < 4.0 * (r0.trunc + r0.round))
            best = r1;
    }
    for (double h = h0; h <= 0.5 * hmax; h *= 4.0) {
        central q = central_diff4(c, u, h, s);
        double bound = best.trunc + best.round;
        if (c->failed != GMM_OK)
            return best;
        if (q.trunc + q.round < bound && fabs(q.d - best.d) < bound)
            best = q;
    }
    return best;
}

void gmm_gradcheck_result_free(gmm_gradcheck_result *res)
{
    if (!res)
        return;
    gmm_free(res->row);
    res->row = NULL;
    res->nparam = res->nfail = res->ninconclusive = 0;
}

gmm_status gmm_gradcheck(const gmm_objective *obj, const gmm_gradcheck_params *params,
                         gmm_gradcheck_result *res)
{
    gmm_status st;
    size_t np;
    double *theta = NULL, *grad = NULL;
    gmm_gradcheck_row *row = NULL;

    if (!obj || !res || !obj->eval || (obj->nparam && (!obj->value || !obj->scale ||
                                                        !obj->name)))
        return gmm_error(GMM_EINVAL, "gradcheck: incomplete objective");
    if ((st = gmm_gradcheck_params_check(params)) != GMM_OK)
        return st;
    memset(res, 0, sizeof *res);
    np = obj->nparam;
    for (size_t i = 0; i < np; i++) {
        if (!isfinite(obj->value[i]))
            return gmm_error(GMM_EINVAL, "gradcheck: '%s' is not finite", obj->name[i]);
        gmm_scale sc = obj->scale[i];
        if (sc == GMM_SCALE_ATANH ? fabs(obj->value[i]) > 1.0
                                  : (sc != GMM_SCALE_IDENTITY && obj->value[i] < 0.0) ||
                                        (sc == GMM_SCALE_LOGIT && obj->value[i] > 1.0))
            return gmm_error(GMM_EINVAL, "gradcheck: '%s' must be %s, got %g", obj->name[i],
                             sc == GMM_SCALE_LOGIT   ? "in [0, 1]"
                             : sc == GMM_SCALE_ATANH ? "in [-1, 1]"
                                                     : ">= 0",
                             obj->value[i]);
    }

    theta = gmm_malloc(np, sizeof *theta);
    grad = gmm_malloc(np, sizeof *grad);
    row = gmm_calloc(np, sizeof *row);
    if (!theta || !grad || !row) {
        st = gmm_error(GMM_ENOMEM, "gradcheck: out of memory");
        goto fail;
    }
    memcpy(theta, obj->value, np * sizeof *theta);
    double ll;
    if ((st = obj->eval(obj->ctx, theta, &ll, grad)) != GMM_OK) {
        char msg[GMM_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", gmm_error_message());
        st = gmm_error(st, "gradcheck: at the given parameters: %s", msg);
        goto fail;
    }

    size_t nfail = 0, first = 0, ninc = 0, first_inc = 0;
    for (size_t i = 0; i < np; i++) {
        double p = theta[i];
        gmm_scale sc = obj->scale[i];
        gmm_gradcheck_row *r = &row[i];
        r->name = obj->name[i];
        r->value = p;
        r->analytic = grad[i];
        if (!gmm_scale_inside(sc, p)) {
            /* On the boundary of its domain (a fixed ridge of 0): no central
             * difference exists; the row is reported as not checked. */
            r->numeric = r->fd_error = r->abs_error = r->rel_error = r->allowed = r->noise =
                r->needed_tol = NAN;
            r->ok = 1;
            continue;
        }
        /* on the scale fit optimises: steps in u keep p inside its domain
         * however close to a bound it is (a logit step of 0.1 at phi = 1e-9
         * moves phi by 10%, not below 0) */
        double u = gmm_scale_to_u(sc, p);
        double unit = sc == GMM_SCALE_IDENTITY ? fmax(1.0, fabs(p)) : 1.0; /* u per step */
        double jac = gmm_scale_dp_du(sc, p);                               /* dp/du */
        one_dim c = {obj, theta, i, GMM_OK, 0.0, ""};
        double noise;
        central d = derivative(&c, u, ll, unit, params->step * unit, &noise);
        if (c.failed != GMM_OK) {
            st = gmm_error(c.failed, "gradcheck: '%s' at %.17g: %s", obj->name[i], c.fail_at,
                           c.msg);
            goto fail;
        }
        double a_u = grad[i] * jac, fd_u = d.d, err_u = d.trunc + d.round;
        double diff = fabs(a_u - fd_u), big = fmax(fabs(a_u), fabs(fd_u));
        double scale = fmax(big, fmax(fabs(ll), 1.0));
        double tol = params->rel_tol * scale, allowed = tol + err_u;
        r->numeric = fd_u / jac;
        r->fd_error = err_u / jac;
        /* divided by the same jac > 0: the verdicts hold on p's scale */
        r->abs_error = diff / jac;
        r->allowed = allowed / jac;
        r->noise = noise;
        r->rel_error = big > 0.0 ? diff / big : 0.0;
        r->needed_tol = err_u / scale;
        int fails = !isfinite(a_u) || !(diff <= allowed);
        r->inconclusive = !fails && !(err_u <= fmax(tol, GMM_GRADCHECK_RESOLVE * big));
        r->ok = !fails && !r->inconclusive;
        if (fails && nfail++ == 0)
            first = i;
        if (r->inconclusive && ninc++ == 0)
            first_inc = i;
    }
    res->loglik = ll;
    res->nparam = np;
    res->nfail = nfail;
    res->ninconclusive = ninc;
    res->row = row;
    row = NULL;
    st = GMM_OK;
    if (nfail == 0 && ninc > 0) {
        const gmm_gradcheck_row *w = &res->row[first_inc];
        st = gmm_error(GMM_EINCONCLUSIVE,
                       "gradcheck: %zu of %zu gradients inconclusive: the finite difference's "
                       "error bound is above the tolerance and 1e-3 of the gradient: first '%s' "
                       "(analytic %.6g, finite "
                       "difference %.6g +- %.2g); a tolerance >= %.2g would decide",
                       ninc, np, w->name, w->analytic, w->numeric, w->fd_error, w->needed_tol);
    }
    if (nfail > 0)
        st = gmm_error(GMM_ECHECK,
                       "gradcheck: %zu of %zu gradients disagree with finite differences: first "
                       "'%s' (analytic %.6g, finite difference %.6g +- %.2g)",
                       nfail, np, res->row[first].name, res->row[first].analytic,
                       res->row[first].numeric, res->row[first].allowed);
fail:
    gmm_free(theta);
    gmm_free(grad);
    gmm_free(row);
    return st;
}
