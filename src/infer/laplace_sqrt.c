/* laplace_sqrt.c -- the Laplace approximation in the square-root form:
 * Newton steps through the smoother of the latent's rows (laplace.h). */
#include "gmm/laplace.h"

#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"
#include "laplace_impl.h"

/* SQUARE-ROOT FORM (gmm_laplace_eval_sqrt).  The Newton step from x is the
 * posterior mean of the Gaussian problem with working data yt_i = h_i'x +
 * g_i / w_i and noise variances 1 / w_i (x_new = P^-1 H'W yt, P = Q +
 * H'WH), which the smoother solves from its rows.  With ML that problem's
 * log likelihood in the smoother's scaling, log N(W^1/2 yt; 0, W^1/2 H
 * Q^-1 H' W^1/2 + I), and x_new = mu,
 *
 *   -2 ML - nobs log 2 pi = log|P| - log|Q| + mu'Q mu + (yt - H mu)'W(yt - H mu)
 *
 * (the minimum over mu of the quadratic), and at the mode (yt - H x^ = W^-1
 * g) the Laplace approximation is
 *
 *   log q = sum log p(y_i | f^_i) + ML + nobs log(2 pi) / 2 + sum g_i^2 / (2 w_i):
 *
 * no log-determinant or quadratic form of the assembled P or Q.  Away from
 * the mode by delta = mu - x this is Psi's quadratic model at mu (off by
 * O(|delta|^3)) minus the log-determinant term at x's W, off by
 * r'delta + O(|delta|^2), r = H'(s o t)/2 below.  A start that is the mode
 * already (the assembled precision's, or a warm start, whose step from
 * there is below ACCEPT_DEC) keeps its smoothing, recorded, with that
 * first-order term added: what is left is O(decrement), below rounding,
 * and the gradient's O(|delta|) moves it by ~sqrt(ACCEPT_DEC) relative.
 * Otherwise Newton steps, and the step below tol is taken with a final
 * recorded smoothing there (leaving out r'delta showed as noise of 2e-11
 * relative in a fit's log q).
 *
 * WHY.  The log-determinants and quadratic forms of gmm_laplace_eval's
 * Cholesky lose digits as eps cond(P) when Q's entries dwarf the
 * information (state-space inputs close relative to a lengthscale); the
 * smoother's as eps sqrt(cond P) or better.
 *
 * QUADRATIC FORMS.  Psi's x'Qx through the whitening map rounds like eps
 * |x|^2 |C|^2 (C the square root's large blocks, ~ (l/dt)^(nu + 1/2)),
 * which stalls the line search of a smooth Matern-5/2 at dt/l 1e-6.  The
 * smoothing's own equation (Q + H'WH) mu = H'W yt gives Q mu = H'(g - W H
 * (mu - x)) in the observations' terms, and Q x follows each step x +
 * s (mu - x) as Q x + s (Q mu - Q x): known exactly from x = 0 and after
 * any full step, so x'Qx, the trials' and the decrement's quadratic forms
 * are sums of O(1) products.  Before that (a warm start's first damped
 * steps) the decrement's and the trials' go through the whitening map,
 * and the start's x'Qx is (x - dx)'Q mu + dx'Q dx with its first step dx,
 * the whitened part O(dx^2) (at a kept start, below rounding).  The
 * gradient: the smoother's own at fixed working data (Fisher's identity:
 * -(Sigma + mu mu')/2 + Q^-1/2 in Q, as laplace_grad's explicit part),
 * plus the implicit term through zeta = P^-1 H'(s o t)/2 from the
 * smoother's adjoint, with the likelihood's parts as in gmm_laplace_grad. */

/* A start whose Newton decrement is below ACCEPT_DEC max(1, |Psi|) is the
 * mode (above): 1e-18, where the assembled precision's converged mode gives
 * 1e-23 .. 1e-21 relative (bench_laplace's series, n = 1e3 .. 1e5). */
#define ACCEPT_DEC 1e-18

/* The working data at the current f, g, w: yt_i = f_i - b - shift_i + g_i / w_i. */
static gmm_status working_data(gmm_laplace *w)
{
    for (size_t i = 0; i < w->obs->map.nrows; i++) {
        if (!(w->w[i] > 0.0) || !isfinite(w->w[i]))
            return gmm_error_at(GMM_EDOM, i,
                                "Laplace (square-root form): the likelihood's curvature at "
                                "observation %zu is %g, not positive (a likelihood that is not "
                                "log-concave there needs the Cholesky factorisation of the "
                                "assembled precision)",
                                i, -w->w[i]);
        w->yt[i] = w->f[i] - w->b - (w->obs->shift ? w->obs->shift[i] : 0.0) + w->g[i] / w->w[i];
    }
    return GMM_OK;
}

/* The square-root form's line search objective: qm and qx are Q mu and Q x
 * (n each, the caller's; QUADRATIC FORMS), track whether qx is known; sum
 * is sum log p at the last point evaluated. */
typedef struct {
    const double *qm, *qx;
    int track;
    double sum;
} sqrt_ls;

static gmm_status sqrt_value(gmm_laplace *w, void *ctx, double step, double *Pt)
{
    sqrt_ls *c = ctx;
    const double *qm = c->qm, *qx = c->qx;
    c->sum = laplace_lik_sum(w, w->xt, 0);
    if (step == 1.0 || c->track) { /* Q xt = Q x + step (Q mu - Q x) */
        double qq = 0.0;
        for (size_t j = 0; j < w->n; j++)
            qq += w->xt[j] * (step == 1.0 ? qm[j] : qx[j] + step * (qm[j] - qx[j]));
        *Pt = c->sum - 0.5 * qq;
        return GMM_OK;
    }
    double q;
    gmm_status st = w->sm->quad(w->sm->ctx, w->xt, &q);
    if (st)
        return st;
    *Pt = c->sum - 0.5 * q;
    return GMM_OK;
}

static void sqrt_restore(gmm_laplace *w, void *ctx, double *Psi)
{
    (void)Psi;
    ((sqrt_ls *)ctx)->sum = laplace_lik_sum(w, w->x, 1); /* f, g, w, t back at x, the mode */
}

gmm_status gmm_laplace_eval_sqrt(gmm_laplace *w, const gmm_laplace_smoother *sm,
                                 const gmm_laplace_obs *obs, const gmm_lik *lik, double b,
                                 const double *x0, int warm, const gmm_laplace_params *par,
                                 double *logq)
{
    gmm_status st = GMM_OK;
    gmm_laplace_params dflt;
    if (!w || !sm || !sm->smooth || !sm->quad || !sm->var || !sm->adjoint || !obs || !lik ||
        !logq)
        return gmm_error(GMM_EINVAL, "laplace: NULL argument");
    if (w->known == LAPLACE_KNOWS_FIT)
        w->known = LAPLACE_KNOWS_MODE;
    if (!par) {
        gmm_laplace_params_init(&dflt);
        par = &dflt;
    }
    if ((st = laplace_set_obs(w, obs, lik, b)))
        return st;
    w->Q = NULL;
    w->sm = sm;
    w->logdet_here = 0;
    int started = x0 || (warm && w->known != LAPLACE_KNOWS_NOTHING);
    if (x0)
        memcpy(w->x, x0, w->n * sizeof *w->x);
    else if (!started)
        memset(w->x, 0, w->n * sizeof *w->x);
    w->known = LAPLACE_KNOWS_NOTHING;

    /* the smoother's first call fixes theta for its quadratic form; it
     * records when the start may be the mode (accept, below).  Qx (in gr)
     * is known from x = 0 on, and after any step (QUADRATIC FORMS); from
     * another start, x'Qx = (x - dx)'Q mu + dx'Q dx with the first step
     * dx = mu - x (below) */
    int recorded = started, track = !started, have_psi = track;
    double *qx = w->gr, *qm = w->tmp;
    /* a start given is usually the mode, kept (accept below): its rows' dpar
     * kept too */
    double sum = laplace_lik_sum(w, w->x, started), ml = 0.0, q = 0.0, Psi = sum;
    w->sqrt_end = LAPLACE_SQRT_STEPPED;
    if (track)
        memset(qx, 0, w->n * sizeof *qx);
    if ((st = working_data(w)) ||
        (st = sm->smooth(sm->ctx, w->yt, w->w, recorded, &ml, w->dx)))
        return st;
    int final = 0, stall = 0, have_step = 1, accept = 0;
    size_t it = 0;
    double best = INFINITY;
    for (;;) {
        if ((st = laplace_stop(par, it)))
            return st;
        if (!have_step || final) {
            if ((st = working_data(w)) ||
                (st = sm->smooth(sm->ctx, w->yt, w->w, final, &ml, w->dx)))
                return st;
            recorded = final;
        }
        have_step = 0;
        if (final)
            break;
        /* direction dx = mu - x; Q mu = H'(g - W H dx) (QUADRATIC FORMS);
         * decrement dx'P dx */
        double dec = 0.0, qxx = 0.0;
        for (size_t j = 0; j < w->n; j++) {
            w->dx[j] -= w->x[j];
            qm[j] = 0.0;
        }
        for (size_t i = 0; i < obs->map.nrows; i++) {
            double e = gmm_obsmap_row_dot(&obs->map, i, w->dx), r;
            dec += w->w[i] * e * e;
            r = w->g[i] - w->w[i] * e;
            size_t lo = gmm_obsmap_row_lo(&obs->map, i), hi = gmm_obsmap_row_hi(&obs->map, i);
            for (size_t k = lo; k < hi; k++)
                qm[obs->map.offset[i] + gmm_obsmap_row_pos(&obs->map, k, lo)] +=
                    obs->map.coef[k] * r;
        }
        if (track) {
            for (size_t j = 0; j < w->n; j++)
                qxx += w->dx[j] * (qm[j] - qx[j]);
        } else if ((st = sm->quad(sm->ctx, w->dx, &qxx))) {
            return st;
        }
        if (!have_psi) {
            for (size_t j = 0; j < w->n; j++)
                q += (w->x[j] - w->dx[j]) * qm[j];
            Psi = sum - 0.5 * (q + qxx);
            have_psi = 1;
        }
        if (it == 0 && !isfinite(Psi))
            return gmm_error(GMM_EDOM, "Laplace: log density not finite at the starting point");
        dec += qxx;
        if (!isfinite(dec))
            return gmm_error(GMM_EDOM, "Laplace: Newton step not finite at iteration %zu", it);
        if (recorded && dec <= ACCEPT_DEC * fmax(1.0, fabs(Psi))) {
            accept = 1;
            break;
        }
        if (laplace_newton_done(dec, Psi, par->tol, &best, &stall)) {
            for (size_t j = 0; j < w->n; j++)
                w->x[j] += w->dx[j];
            sum = laplace_lik_sum(w, w->x, 1);
            if (!isfinite(sum))
                return gmm_error(GMM_EDOM, "Laplace: log density not finite at the mode");
            final = 1;
            it++;
            continue;
        }
        double step;
        sqrt_ls ctx = {qm, qx, track, 0.0};
        const ls_objective obj = {sqrt_value, sqrt_restore, &ctx};
        st = laplace_line_search(w, &obj, dec, it, par->max_iter, &Psi, &step, &final);
        sum = ctx.sum;
        if (st)
            return st;
        if (final)
            continue;
        for (size_t j = 0; j < w->n; j++)
            qx[j] = step == 1.0 ? qm[j] : qx[j] + step * (qm[j] - qx[j]);
        track = track || step == 1.0;
        it++;
    }
    const double log2pi = 1.8378770664093454836;
    double gw = 0.0, corr = 0.0;
    for (size_t i = 0; i < obs->map.nrows; i++)
        gw += w->g[i] * w->g[i] / w->w[i];
    if (accept) {
        /* log|P| at x's W, not the mode's: its first-order term r'(mu - x) */
        if ((st = sm->var(sm->ctx, w->s)))
            return st;
        w->sqrt_end = LAPLACE_SQRT_KEPT_START_VAR_READY;
        for (size_t i = 0; i < obs->map.nrows; i++)
            corr += 0.5 * w->s[i] * w->t[i] * gmm_obsmap_row_dot(&obs->map, i, w->dx);
    }
    double lq = sum + ml + 0.5 * (double)obs->map.nrows * log2pi + 0.5 * gw + corr;
    if (!isfinite(lq))
        return gmm_error(GMM_EDOM, "Laplace: log marginal likelihood not finite");
    *logq = w->logq = lq;
    w->iter = it;
    w->known = LAPLACE_KNOWS_FIT;
    return GMM_OK;
}

gmm_status gmm_laplace_grad_sqrt(gmm_laplace *w, double *bbar, double *parbar, double *coefbar,
                                 double *shiftbar)
{
    gmm_status st;
    if (!w || w->known != LAPLACE_KNOWS_FIT || !w->sm)
        return gmm_error(GMM_EINVAL, "laplace: no successful square-root evaluation to "
                                     "differentiate");
    if (coefbar && !w->sm->rowcov)
        return gmm_error(GMM_EINVAL, "laplace: the smoother gives no gradient in the rows' "
                                     "coefficients");
    const gmm_laplace_obs *ob = w->obs;
    const gmm_laplace_smoother *sm = w->sm;
    /* var starts the smoother's gradient, which the adjoint completes:
     * once per gradient */
    if (w->sqrt_end != LAPLACE_SQRT_KEPT_START_VAR_READY && (st = sm->var(sm->ctx, w->s)))
        return st;
    if (w->sqrt_end == LAPLACE_SQRT_KEPT_START_VAR_READY)
        w->sqrt_end = LAPLACE_SQRT_KEPT_START;
    for (size_t i = 0; i < ob->map.nrows; i++)
        w->yt[i] = 0.5 * w->s[i] * w->t[i];
    if ((st = sm->adjoint(sm->ctx, w->yt, w->u)))
        return st;
    /* the coefficients' gradient, as gmm_laplace_grad's: zeta from the
     * adjoint, Sigma h_i from the smoother (w->z and w->sh: the assembled
     * form's scratch, free here) */
    if (coefbar) {
        if (!w->sh && !(w->sh = gmm_malloc(w->maxobs * w->width + 1, sizeof *w->sh)))
            return gmm_error(GMM_ENOMEM, "laplace: out of memory for the coefficients' gradient");
        if ((st = sm->rowcov(sm->ctx, w->z, w->sh)))
            return st;
    }
    size_t np = w->lik->type->nparam;
    double out[4], dpar[3 * GMM_LIK_MAXPARAM];
    const double *dp = dpar;
    for (size_t i = 0; i < ob->map.nrows; i++) {
        /* a kept start: g and dlogp/dphi at the mode's f_i + e_i to first
         * order, as log q's r'delta (SQUARE-ROOT FORM) */
        double e = w->sqrt_end != LAPLACE_SQRT_STEPPED ? gmm_obsmap_row_dot(&ob->map, i, w->dx) : 0.0;
        double u = w->u[i], ci = w->g[i] - w->w[i] * e + 0.5 * w->s[i] * w->t[i] - w->w[i] * u;
        if (bbar)
            *bbar += ci;
        if (shiftbar)
            shiftbar[i] += ci;
        if (parbar && np) {
            if (w->dpar_ok)
                dp = w->dpar + 3 * np * i;
            else
                row_eval(w, i, w->f[i], out, dpar);
            for (size_t k = 0; k < np; k++)
                parbar[k] += dp[3 * k] + e * dp[3 * k + 1] + 0.5 * w->s[i] * dp[3 * k + 2] +
                             u * dp[3 * k + 1];
        }
        if (coefbar) {
            /* at the mode x + dx of a kept start, to first order (as ci) */
            double gi = w->g[i] - w->w[i] * e;
            size_t lo = gmm_obsmap_row_lo(&ob->map, i), hi = gmm_obsmap_row_hi(&ob->map, i);
            for (size_t k = lo; k < hi; k++) {
                size_t ia = ob->map.offset[i] + gmm_obsmap_row_pos(&ob->map, k, lo);
                double xm = w->x[ia] + (w->sqrt_end != LAPLACE_SQRT_STEPPED ? w->dx[ia] : 0.0);
                coefbar[k] += ci * xm + gi * w->z[ia] - w->w[i] * w->sh[k];
            }
        }
    }
    return GMM_OK;
}
