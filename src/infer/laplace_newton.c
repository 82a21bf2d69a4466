/* laplace_newton.c -- the Laplace approximation by Newton on the assembled
 * precision P = Q + H'WH, its gradient, draws and posterior (laplace.h).
 *
 * NEWTON.  For a likelihood that is not log-concave (studentt) W = -d2 is
 * negative at outlying rows, and P = Q + H'WH may be indefinite away from
 * the mode.  Each iteration tries the exact Newton matrix P; when its
 * Cholesky fails, it takes the direction from P with W's negative entries
 * set to 0 (positive definite since Q is, so an ascent direction), and the
 * backtracking line search on Psi does the rest -- as GPML's infLaplace
 * (W clamped at 0, a line search on Psi) and R-INLA do.  Near a mode where
 * P is positive definite the steps are exact Newton again, so convergence
 * stays quadratic.  At the mode P must be positive definite (a maximum of
 * Psi; else GMM_ENOTPD): log|P| and the gradient below use the true W,
 * negative entries included, and hold for any positive definite P.
 *
 * GRADIENT.  With g_i, w_i = -d2_i, t_i = d3_i the derivatives of log p in
 * f_i at the mode, Sigma = P^-1, s_i = h_i' Sigma_oo h_i, the total
 * derivative of log q in any parameter a is its explicit derivative at
 * fixed x^ (the mode condition H'g = Q x^ removes x^'s effect on the first
 * two terms) plus the effect of x^ on -log|P|/2 through W:
 *
 *   explicit:  sum_i dlogp_i - x'dQ x/2 + [tr(Q^-1 dQ)/2] - tr(Sigma dP)/2,
 *              dP = dQ + sum_i (dw_i h_i h_i' + w_i (dh_i h_i' + h_i dh_i')),
 *              dw_i = dw_i/dphi - t_i (db + dh_i' x^) at fixed x^;
 *   implicit:  r' dx^/da,  r = H'(s o t)/2,  dx^/da = P^-1 d(H'g - Q x)/da,
 *              so it is z' d(H'g - Qx)/da with z = P^-1 r (one more solve).
 *
 * Collected per input (u_i = h_i' z_o, c_i = g_i + s_i t_i / 2 - w_i u_i):
 *
 *   Qbar  = -x x'/2 - Sigma/2 - (z x' + x z')/2  [+ Q^-1/2]
 *   bbar  = sum_i c_i
 *   phibar = sum_i dlogp_i/dphi + (s_i/2) dd2_i/dphi + u_i dd1_i/dphi
 *   hbar_i = c_i x_o + g_i z_o - w_i Sigma_oo h_i
 *
 * CONSTRAINTS A x = 0 (gmm_laplace_constrain).  Newton on the subspace:
 * each step is Sigma_c grad, Sigma_c = V (V'PV)^-1 V' the conditioned
 * covariance (constr.h: kriging, and pins that keep the factorised matrix
 * definite when P is singular off the subspace), so the mode satisfies
 * H'g - Qx = A'lambda.  log|P| becomes log det(V'PV) + log det(AA') (the
 * last term cancels against the caller's prior normaliser), and in the
 * gradient Sigma and P^-1 become Sigma_c (the mode moves inside the
 * subspace, where the gradient of the first two terms vanishes).
 */
#include "gmm/laplace.h"

#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"
#include "laplace_impl.h"

/* Psi(x) = sum log p - x'Qx/2; f, g, w, t and lsum at x on the way (keep:
 * lik_sum's); Qx in tmp. */
static double psi(gmm_laplace *w, const double *x, int keep)
{
    double sum = w->lsum = laplace_lik_sum(w, x, keep);
    gmm_band_gemv(GMM_NOTRANS, 1.0, w->Q, x, 0.0, w->tmp);
    return laplace_psi_from_qx(w, x, sum);
}

/* P = Q + H'WH, formed in L's storage, and its Cholesky factor L there;
 * with clamp, W's negative entries are taken as 0, which keeps P positive
 * definite; with constraints, tau at their pins (constr.h). */
static gmm_status factor_p(gmm_laplace *w, int clamp, double tau)
{
    const gmm_laplace_obs *ob = w->obs;
    gmm_band *P = w->L;
    gmm_status st = gmm_band_copy(P, w->Q); /* SYMMETRIC until factorised */
    if (st)
        return st;
    if (w->con)
        gmm_constr_pin(w->con, tau, P);
    if (!ob->map.rowptr) { /* dense windows */
        size_t nobs = ob->map.nrows, wd = ob->map.width;
        const size_t *off = ob->map.offset;
        const double *wv = w->w;
        for (size_t i = 0; i < nobs; i++) {
            const double *h = ob->map.coef + i * wd;
            double wi = clamp ? fmax(wv[i], 0.0) : wv[i];
            for (size_t a = 0; wi != 0.0 && a < wd; a++) {
                if (h[a] == 0.0)
                    continue;
                double *col = gmm_band_col(P, off[i] + a) + off[i], c = wi * h[a];
                for (size_t b2 = a; b2 < wd; b2++)
                    col[b2] += c * h[b2];
            }
        }
    }
    for (size_t i = 0; ob->map.rowptr && i < ob->map.nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(&ob->map, i), hi = gmm_obsmap_row_hi(&ob->map, i),
               o = ob->map.offset[i];
        const double *h = ob->map.coef;
        double wi = clamp ? fmax(w->w[i], 0.0) : w->w[i];
        if (wi == 0.0)
            continue;
        for (size_t a = lo; a < hi; a++) {
            if (h[a] == 0.0)
                continue;
            size_t ia = o + gmm_obsmap_row_pos(&ob->map, a, lo);
            double *col = gmm_band_col(P, ia), c = wi * h[a];
            for (size_t b2 = a; b2 < hi; b2++)
                col[o + gmm_obsmap_row_pos(&ob->map, b2, lo)] += c * h[b2];
        }
    }
    st = gmm_band_chol_decomp_work(P, w->L, w->cwork);
    if (st == GMM_ENOTPD) {
        size_t row = gmm_error_index();
        return gmm_error_at(GMM_ENOTPD, row,
                            "Laplace: posterior precision Q + H'WH not positive definite at "
                            "row %zu",
                            row);
    }
    return st;
}

/* v <- P^-1 v, or Sigma_c v under constraints (constr.h). */
static gmm_status p_solve(gmm_laplace *w, double *v)
{
    gmm_status st;
    if (w->con)
        return gmm_constr_solve(w->con, w->L, v);
    if ((st = gmm_band_tri_solve_vec(w->L, GMM_NOTRANS, v)))
        return st;
    return gmm_band_tri_solve_vec(w->L, GMM_TRANS, v);
}

static gmm_status band_constrain(gmm_laplace *w, double tau)
{
    return gmm_constr_factor(w->con, w->L, tau);
}

static double band_logdet(const gmm_laplace *w) { return gmm_band_chol_logdet(w->L); }

/* Sigma(ia, ic) from the band of Sigma (gmm_laplace_grad's S) */
static double band_sigma(const gmm_laplace *w, size_t i, size_t a, size_t c)
{
    const gmm_obsmap *m = &w->obs->map;
    size_t lo = gmm_obsmap_row_lo(m, i), o = m->offset[i];
    return gmm_band_get(w->S, o + gmm_obsmap_row_pos(m, a, lo), o + gmm_obsmap_row_pos(m, c, lo));
}

static double band_qdiag(const gmm_laplace *w, size_t j) { return gmm_band_get(w->Q, j, j); }

static double band_flops(const gmm_laplace *w) { return (double)w->n * (double)(w->kl * w->kl); }

static const laplace_form band_form = {psi,        factor_p,   band_constrain, NULL,       p_solve,
                                       band_logdet, band_qdiag, band_flops,     band_sigma};

/* gmm_laplace_eval, or with logq NULL gmm_laplace_mode: the Newton
 * iterations alone, stopping at the last step's x (no factor of P there,
 * no log q). */
/* What one Newton run is asked: the prior Q (logdet_q its log-determinant,
 * NAN: factor Q here), the observations with lik and b, where to start (x0,
 * or with warm the last mode, or 0 or the cold start) and the settings
 * (NULL: defaults). */
typedef struct {
    const gmm_band *Q;
    double logdet_q;
    const gmm_laplace_obs *obs;
    const gmm_lik *lik;
    double b;
    const double *x0;
    int warm;
    const gmm_laplace_params *par;
} newton_problem;

static gmm_status newton(gmm_laplace *w, const newton_problem *pb, double *logq)
{
    const gmm_band *Q = pb->Q;
    const gmm_laplace_obs *obs = pb->obs;
    const double *x0 = pb->x0;
    const gmm_laplace_params *par = pb->par;
    double logdet_q = pb->logdet_q;
    gmm_status st;
    gmm_laplace_params dflt;
    if (!w || !Q || !obs || !pb->lik)
        return gmm_error(GMM_EINVAL, "laplace: NULL argument");
    if (w->fP)
        return gmm_error(GMM_EINVAL, "laplace: a sparse workspace takes gmm_laplace_eval_sparse");
    if (w->known == LAPLACE_KNOWS_FIT)
        w->known = LAPLACE_KNOWS_MODE;
    if (!par) {
        gmm_laplace_params_init(&dflt);
        par = &dflt;
    }
    if (Q->n != w->n || Q->kl != w->kl || Q->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "laplace: Q is %zu x %zu with bandwidth %zu, workspace for "
                                   "%zu and %zu",
                         Q->n, Q->n, Q->kl, w->n, w->kl);
    if ((st = laplace_set_obs(w, obs, pb->lik, pb->b)))
        return st;
    w->Q = Q;
    w->sm = NULL;
    double tau = w->con ? gmm_constr_tau(w->con, Q) : 0.0;
    if (logq && w->con && isnan(logdet_q))
        return gmm_error(GMM_EINVAL, "laplace: constraints need the prior's log-determinant on "
                                     "the constrained subspace");
    w->logdet_here = logq && isnan(logdet_q);
    if (w->logdet_here) {
        if ((st = gmm_factor_decomp(w->fQ, Q)) != GMM_OK) {
            size_t row = gmm_error_index();
            return st == GMM_ENOTPD
                       ? gmm_error_at(st, row, "prior precision not positive definite (row %zu)",
                                      row)
                       : st;
        }
        logdet_q = gmm_factor_logdet(w->fQ);
    }
    return laplace_newton_run(w, &band_form, x0, pb->warm, par, tau, logdet_q, logq);
}

gmm_status gmm_laplace_eval(gmm_laplace *w, const gmm_band *Q, double logdet_q,
                            const gmm_laplace_obs *obs, const gmm_lik *lik, double b,
                            const double *x0, int warm, const gmm_laplace_params *par,
                            double *logq)
{
    if (!logq)
        return gmm_error(GMM_EINVAL, "laplace: NULL argument");
    const newton_problem pb = {Q, logdet_q, obs, lik, b, x0, warm, par};
    return newton(w, &pb, logq);
}

gmm_status gmm_laplace_mode(gmm_laplace *w, const gmm_band *Q, const gmm_laplace_obs *obs,
                            const gmm_lik *lik, double b, const double *x0, int warm,
                            const gmm_laplace_params *par)
{
    const newton_problem pb = {Q, NAN, obs, lik, b, x0, warm, par};
    return newton(w, &pb, NULL);
}

gmm_status gmm_laplace_grad(gmm_laplace *w, gmm_band *Qbar, double *bbar, double *parbar,
                            double *coefbar, double *shiftbar)
{
    gmm_status st;
    if (!w || w->known != LAPLACE_KNOWS_FIT || w->sm || w->fP)
        return gmm_error(GMM_EINVAL, "laplace: no successful evaluation on the assembled "
                                     "precision to differentiate");
    size_t n = w->n;
    if (Qbar && (Qbar->n != n || Qbar->kl < w->kl || Qbar->kind != GMM_BAND_SYMMETRIC))
        return gmm_error(GMM_EDIM, "laplace: Qbar must be SYMMETRIC %zu x %zu with bandwidth >= "
                                   "%zu",
                         n, n, w->kl);
    if ((st = gmm_band_chol_selinv(w->L, w->S)))
        return st;
    if (w->con)
        gmm_constr_band(w->con, w->S);
    /* s_i, r = H'(s o t)/2, z = P^-1 r */
    if ((st = laplace_grad_z(w, &band_form)))
        return st;
    if (Qbar) {
        if ((st = gmm_band_outer(-0.5, 1, w->x, n, w->x, n, Qbar)) ||
            (st = gmm_band_outer(-1.0, 1, w->z, n, w->x, n, Qbar)))
            return st;
        if ((st = gmm_band_axpy(-0.5, 2.0, w->S, Qbar)))
            return st;
        if (w->logdet_here) {
            if ((st = gmm_factor_selinv(w->fQ, w->SQ)))
                return st;
            if ((st = gmm_band_axpy(0.5, 2.0, w->SQ, Qbar)))
                return st;
        }
    }
    laplace_grad_rows(w, &band_form, bbar, parbar, coefbar, shiftbar);
    return GMM_OK;
}

gmm_status gmm_laplace_posterior(gmm_laplace *w, double *mode, gmm_band *cov)
{
    if (!w || w->known != LAPLACE_KNOWS_FIT)
        return gmm_error(GMM_EINVAL, "laplace: no successful evaluation");
    if (mode)
        memcpy(mode, w->x, w->n * sizeof *mode);
    if (cov && w->sm)
        return gmm_error(GMM_EINVAL, "laplace: the square-root form's covariance is its "
                                     "smoother's");
    if (cov && w->fP)
        return gmm_error(GMM_EINVAL, "laplace: the sparse form's covariance is "
                                     "gmm_laplace_posterior_sparse's");
    if (cov) {
        if (cov->n != w->n || cov->kl < w->kl || cov->kind != GMM_BAND_SYMMETRIC)
            return gmm_error(GMM_EDIM, "laplace: cov must be SYMMETRIC %zu x %zu with bandwidth "
                                       ">= %zu",
                             w->n, w->n, w->kl);
        gmm_status st = gmm_band_chol_selinv(w->L, cov);
        if (st == GMM_OK && w->con)
            gmm_constr_band(w->con, cov);
        return st;
    }
    return GMM_OK;
}

gmm_status gmm_laplace_draw(gmm_laplace *w, const double *z, double *x, double *logw)
{
    gmm_status st;
    if (!w || w->known != LAPLACE_KNOWS_FIT || w->sm || !z || !x)
        return gmm_error(GMM_EINVAL, "laplace: no successful evaluation on the assembled "
                                     "precision to draw from");
    if (w->fP)
        return laplace_sparse_draw(w, z, x, logw);
    if (w->con)
        return gmm_error(GMM_EINVAL, "laplace: drawing from a posterior under linear "
                                     "constraints is not supported");
    /* cov(L^-T z) = L^-T L^-1 = P^-1 */
    double zz = 0.0;
    for (size_t j = 0; j < w->n; j++)
        zz += z[j] * z[j];
    if (x != z)
        memcpy(x, z, w->n * sizeof *x);
    if ((st = gmm_band_tri_solve_vec(w->L, GMM_TRANS, x)))
        return st;
    for (size_t j = 0; j < w->n; j++)
        x[j] += w->x[j];
    if (!logw)
        return GMM_OK;
    /* log p(y, x) - log q(y) - log q(x): the determinants cancel, leaving
     * Psi(x) - Psi(x^) + (x - x^)'P(x - x^)/2 with the last term z'z/2 */
    double sum = laplace_lik_value(w, x), qx = 0.0;
    gmm_band_gemv(GMM_NOTRANS, 1.0, w->Q, x, 0.0, w->xt);
    for (size_t j = 0; j < w->n; j++)
        qx += x[j] * w->xt[j];
    *logw = sum - 0.5 * qx - w->psi + 0.5 * zz;
    return GMM_OK;
}

gmm_status gmm_laplace_posterior_solve(gmm_laplace *w, double *v)
{
    if (!w || w->known != LAPLACE_KNOWS_FIT || w->sm || !v)
        return gmm_error(GMM_EINVAL, "laplace: no successful evaluation on the assembled "
                                     "precision to solve with");
    return w->fP ? laplace_sparse_solve(w, v) : p_solve(w, v);
}

const gmm_band *gmm_laplace_chol(const gmm_laplace *w)
{
    return w && w->known == LAPLACE_KNOWS_FIT && !w->sm && !w->con ? w->L : NULL;
}

const double *gmm_laplace_weights(const gmm_laplace *w)
{
    /* the last factor_p, unclamped, was at the mode's weights */
    return gmm_laplace_chol(w) || gmm_laplace_factor(w) ? w->w : NULL;
}
