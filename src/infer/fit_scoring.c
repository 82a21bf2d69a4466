/* fit_scoring.c -- SCORING: Newton steps on the objective's information
 * (objective.h, info) before L-BFGS.
 *
 * Where the objective gives an approximation M of its information (the
 * average information of a Gaussian model of variance blocks:
 * problem_info.c), the step on the optimisation scale u is M_u^-1 dloglik/du,
 * M_u = J' M J with J = dtheta/du (the gradient's part of d2/du2 is left
 * out: it vanishes at a maximum), halved until loglik rises, its largest
 * move on a log or logit scale at most SCORE_MAXSTEP.  Such steps reach a
 * variance-component maximum in a handful of iterations where L-BFGS, its
 * curvature learnt from the gradients alone, takes dozens along the valley
 * the variances' common scale makes.  The search stops when the decrement
 * g' M_u^-1 g / 2 is at most SCORE_GAIN -- then fit goes straight to its
 * test at the returned point (fit_cert.c), which uses the Hessian, not M,
 * and decides "converged" -- or when M is not available or not definite,
 * or no halved step raises loglik: then L-BFGS goes on from the best point.
 * Near the maximum loglik's differences are lost in its rounding (1e-7 at
 * 1e5 nats) long before the decrement reaches SCORE_GAIN: a step whose
 * decrement is at most SCORE_TRUST is taken whole, and the search ends
 * (short) when the decrement stops falling.  A step that gains less than
 * SCORE_POOR of the model's prediction also ends it short: a variance
 * heading for 0, where M_u vanishes with the gradient, is L-BFGS's and
 * the test's (which holds it at the bound).
 *
 * BOUNDS.  A variance whose maximum is at 0 is not reached by such steps:
 * its u falls by the cap at every step while M_u vanishes with its
 * gradient, so that the decrement stays put and the others barely move.
 * Two steps in a row cut to a falling variance's cap without the
 * decrement halving end the search short (L-BFGS and the test, which
 * holds the variance at its bound, take over).  The search takes at most
 * the fit's max_iterations steps too. */
#include "fit_impl.h"

#include <math.h>
#include <string.h>

#include "gmm/alloc.h"

#define SCORE_ITER 100
#define SCORE_GAIN 1e-10
#define SCORE_HALVINGS 30
#define SCORE_MAXSTEP 3.0
#define SCORE_TRUST 1e-6
#define SCORE_POOR 1e-3

static double norm(const double *g, size_t n)
{
    double s = 0.0;
    for (size_t k = 0; k < n; k++)
        s += g[k] * g[k];
    return sqrt(s);
}

/* M_u = J' M_free J into Mu (nfree x nfree) at theta (c->theta); J's rows
 * in Jr, M_free J in Tw (nfree x nfree each). */
static void info_u(run_ctx *c, const double *M, double *Jr, double *Tw, double *Mu)
{
    const gmm_objective *o = c->obj;
    size_t nf = c->nfree, np = o->nparam;
    memset(Jr, 0, nf * nf * sizeof *Jr);
    for (size_t k = 0; k < nf; k++) {
        size_t i = c->idx[k];
        if (!infer_scale_in_lin(&c->sc, k))
            Jr[k * nf + k] = gmm_scale_dp_du(o->scale[i], c->theta[i]);
    }
    for (size_t j = 0; j < c->sc.lin; j++) /* beta_{lin_idx[j]} = v'u */
        infer_scale_row(&c->sc, j, Jr + c->sc.lin_at[j] * nf);
    for (size_t k = 0; k < nf; k++) /* T = M_free J into Tw */
        for (size_t b = 0; b < nf; b++) {
            double s = 0.0;
            for (size_t l = 0; l < nf; l++)
                s += M[c->idx[k] * np + c->idx[l]] * Jr[l * nf + b];
            Tw[k * nf + b] = s;
        }
    for (size_t a = 0; a < nf; a++) /* J' T */
        for (size_t b = 0; b <= a; b++) {
            double s = 0.0;
            for (size_t k = 0; k < nf; k++)
                s += Jr[k * nf + a] * Tw[k * nf + b];
            Mu[a * nf + b] = Mu[b * nf + a] = s;
        }
}

gmm_status fit_scoring(run_ctx *c, double *u, double *fu, double *gnorm, size_t *iters,
                       int *done)
{
    const gmm_objective *o = c->obj;
    size_t nf = c->nfree, np = o->nparam;
    *iters = 0;
    *done = 0;
    double *M = gmm_malloc(np * np + 3 * nf * nf + 5 * nf, sizeof *M);
    size_t *act = gmm_malloc(nf, sizeof *act);
    if (!M || !act) {
        gmm_free(M);
        gmm_free(act);
        return gmm_error(GMM_ENOMEM, "fit: out of memory for the scoring steps");
    }
    double *Jr = M + np * np, *Tw = Jr + nf * nf, *Mu = Tw + nf * nf, *g = Mu + nf * nf,
           *dir = g + nf, *ut = dir + nf, *gt = ut + nf;
    for (size_t k = 0; k < nf; k++)
        act[k] = k;
    double f, ft, dec_last = INFINITY;
    size_t limit = c->par->max_iterations && c->par->max_iterations < SCORE_ITER
                       ? c->par->max_iterations
                       : SCORE_ITER;
    int capped_down = 0; /* the last step was cut to a falling variance's cap */
    if (!fit_eval_min(c, u, &f, g))
        goto out; /* the start fails: L-BFGS says so */
    while (*iters < limit && !c->cancelled) {
        size_t bad;
        fit_map_theta(c, u);
        if (o->info(o->ctx, c->theta, M) != GMM_OK) {
            gmm_error_clear();
            break;
        }
        info_u(c, M, Jr, Tw, Mu);
        if (!fit_chol(Mu, nf, &bad))
            break;
        double dec = fit_newton_dir(nf, act, nf, Mu, g, gt, dir); /* gt: scratch */
        if (!isfinite(dec))
            break;
        if (dec <= SCORE_GAIN) {
            *done = 1;
            break;
        }
        int trust = dec <= SCORE_TRUST;
        if (trust && !(dec < dec_last))
            break;
        double big = 0.0;
        size_t kbig = 0;
        for (size_t k = 0; k < nf; k++)
            if (o->scale[c->idx[k]] != GMM_SCALE_IDENTITY && !infer_scale_in_lin(&c->sc, k) &&
                fabs(dir[k]) > big) {
                big = fabs(dir[k]);
                kbig = k;
            }
        double t = big > SCORE_MAXSTEP ? SCORE_MAXSTEP / big : 1.0;
        /* a variance heading for 0 (BOUNDS) */
        int down = t < 1.0 && dir[kbig] < 0.0;
        if (down && capped_down && dec > 0.5 * dec_last)
            break;
        capped_down = down;
        dec_last = dec;
        int ok = 0;
        for (size_t h = 0; h < SCORE_HALVINGS && !c->cancelled; h++, t *= 0.5) {
            for (size_t k = 0; k < nf; k++)
                ut[k] = u[k] + t * dir[k];
            if (fit_eval_min(c, ut, &ft, gt) && (trust || ft <= f)) {
                ok = 1;
                break;
            }
        }
        if (!ok)
            break;
        /* a step gaining under SCORE_POOR of what M predicts: M is a poor
         * model here (a variance on its way to 0, where M_u vanishes with
         * the gradient and the decrement stays put) */
        int poor = !trust && f - ft < SCORE_POOR * dec * t * (2.0 - t);
        memcpy(u, ut, nf * sizeof *u);
        memcpy(g, gt, nf * sizeof *g);
        f = ft;
        ++*iters;
        if (poor)
            break;
        fit_report(c, u, f, norm(g, nf), *iters);
    }
    *fu = f;
    *gnorm = norm(g, nf);
out:
    gmm_free(M);
    gmm_free(act);
    gmm_error_clear();
    return GMM_OK;
}
