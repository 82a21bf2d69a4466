/* laplace.c -- the Laplace approximation in banded form (laplace.h).
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

struct gmm_laplace {
    size_t n, kl, ckl, maxobs, width;
    size_t nconst;        /* the likelihood's row constants (obs->cst) */
    gmm_band *L, *LQ, *S, *SQ;
    double *x, *xt, *gr, *dx, *tmp, *z;   /* n each */
    double *f, *g, *w, *t, *s;            /* maxobs each */
    double *yt, *u;                       /* maxobs each: working data, adjoint (sqrt) */
    double *sh;                           /* maxobs x width: Sigma h_i (sqrt, coefbar) */
    double *dpar;         /* maxobs x 3 GMM_LIK_MAXPARAM, allocated by the first evaluation
                           * with a parametrised likelihood: the rows' dpar (gmm_lik_eval)
                           * at the mode, for the gradients */
    int dpar_ok;          /* dpar holds the last lik_sum's rows */
    double *cwork;                        /* the band Cholesky's panels */
    const gmm_laplace_smoother *sm;       /* the square-root form's, or NULL */
    const gmm_laplace_obs *obs;
    const gmm_lik *lik;
    const gmm_band *Q;
    double b, logq, psi;  /* psi: Psi at the mode */
    double lsum;          /* sum log p at psi()'s last x */
    size_t iter;
    int valid, have_mode, logdet_here;
    int accepted;     /* the square-root form kept its start: dx = mu - x */
    int sready;       /* s and the smoother's gradient started (var) for grad_sqrt */
    gmm_constr *con;  /* constraints A x = 0 (NULL: none) */
};

void gmm_laplace_params_init(gmm_laplace_params *p)
{
    p->max_iter = 200;
    p->tol = 1e-12;
}

void gmm_laplace_free(gmm_laplace *w)
{
    if (!w)
        return;
    gmm_band_free(w->L);
    gmm_band_free(w->LQ);
    gmm_band_free(w->S);
    gmm_band_free(w->SQ);
    double *v[] = {w->x, w->xt, w->gr, w->dx, w->tmp, w->z, w->f, w->g, w->w, w->t, w->s,
                   w->yt, w->u, w->sh, w->dpar, w->cwork};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        gmm_free(v[i]);
    gmm_constr_free(w->con);
    gmm_free(w);
}

gmm_status gmm_laplace_constrain(gmm_laplace *w, size_t k, const double *A, const size_t *pin)
{
    if (!w || (k && (!A || !pin)))
        return gmm_error(GMM_EINVAL, "laplace: NULL argument");
    w->valid = 0;
    w->have_mode = 0;
    gmm_constr_free(w->con);
    w->con = NULL;
    if (k && !(w->con = gmm_constr_alloc(w->n, k, A, pin)))
        return gmm_error_status();
    return GMM_OK;
}

gmm_laplace *gmm_laplace_alloc(size_t n, size_t kl, size_t cov_kl, size_t maxobs, size_t width)
{
    if (n == 0 || cov_kl < kl || width == 0 || width > kl + 1) {
        gmm_error(GMM_EINVAL, "laplace: bad workspace shape (n %zu, kl %zu, cov_kl %zu, width %zu)",
                  n, kl, cov_kl, width);
        return NULL;
    }
    gmm_laplace *w = gmm_calloc(1, sizeof *w);
    if (!w) {
        gmm_error(GMM_ENOMEM, "laplace: out of memory");
        return NULL;
    }
    w->n = n;
    w->kl = kl;
    w->ckl = cov_kl;
    w->maxobs = maxobs;
    w->width = width;
    size_t no = maxobs ? maxobs : 1;
    w->L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
    w->LQ = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
    w->S = gmm_band_alloc(n, cov_kl, 0, GMM_BAND_SYMMETRIC);
    w->SQ = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    w->cwork = gmm_malloc(gmm_band_chol_work_size(kl), sizeof *w->cwork);
    double **v[] = {&w->x, &w->xt, &w->gr, &w->dx, &w->tmp, &w->z};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        *v[i] = gmm_calloc(n, sizeof(double));
    double **o[] = {&w->f, &w->g, &w->w, &w->t, &w->s, &w->yt, &w->u};
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
        *o[i] = gmm_calloc(no, sizeof(double));
    int ok = w->L && w->LQ && w->S && w->SQ && w->cwork;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        ok = ok && *v[i];
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
        ok = ok && *o[i];
    if (!ok) {
        gmm_laplace_free(w);
        gmm_error(GMM_ENOMEM, "laplace: out of memory for a workspace of %zu latents, bandwidth "
                              "%zu",
                  n, cov_kl);
        return NULL;
    }
    return w;
}

size_t gmm_laplace_iterations(const gmm_laplace *w) { return w->iter; }

/* Row i's entries k in [row_lo, row_hi) of coef, the k-th reading latent
 * offset[i] + row_pos (dense windows: position k - lo). */
static size_t row_lo(const gmm_laplace_obs *ob, size_t i)
{
    return ob->rowptr ? ob->rowptr[i] : i * ob->width;
}
static size_t row_hi(const gmm_laplace_obs *ob, size_t i)
{
    return ob->rowptr ? ob->rowptr[i + 1] : (i + 1) * ob->width;
}
static size_t row_pos(const gmm_laplace_obs *ob, size_t k, size_t lo)
{
    return ob->pos ? ob->pos[k] : k - lo;
}

/* h_i'v over row i's entries (dense windows or sparse rows). */
static double row_dot(const gmm_laplace_obs *ob, size_t i, const double *v)
{
    size_t lo = row_lo(ob, i), hi = row_hi(ob, i);
    const double *vo = v + ob->offset[i];
    double s = 0.0;
    for (size_t k = lo; k < hi; k++)
        s += ob->coef[k] * vo[row_pos(ob, k, lo)];
    return s;
}

/* log p(y_i | f) and its derivatives (gmm_lik_eval), from the row's
 * constants when the caller gave them. */
static void row_eval(const gmm_laplace *w, size_t i, double f, double out[4], double *dpar)
{
    const gmm_laplace_obs *ob = w->obs;
    double e = ob->e ? ob->e[i] : 1.0;
    if (ob->cst)
        gmm_lik_eval_const(w->lik, ob->y[i], e, ob->cst + i * w->nconst, f, out, dpar);
    else
        gmm_lik_eval(w->lik, ob->y[i], e, f, out, dpar);
}

/* The linear predictors f_i = b + s_i + h_i'x of all rows into f. */
static void lin_pred(const gmm_laplace *w, const double *x, double *f)
{
    const gmm_laplace_obs *ob = w->obs;
    size_t nobs = ob->nobs;
    const size_t *off = ob->offset;
    const double *coef = ob->coef;
    for (size_t i = 0; i < nobs; i++)
        f[i] = w->b + (ob->shift ? ob->shift[i] : 0.0);
    if (!ob->rowptr) { /* dense windows */
        size_t wd = ob->width;
        for (size_t i = 0; i < nobs; i++) {
            const double *h = coef + i * wd, *xo = x + off[i];
            double fi = f[i];
            for (size_t k = 0; k < wd; k++)
                fi += h[k] * xo[k];
            f[i] = fi;
        }
        return;
    }
    for (size_t i = 0; i < nobs; i++) {
        size_t lo = row_lo(ob, i), hi = row_hi(ob, i);
        const double *xo = x + off[i];
        for (size_t k = lo; k < hi; k++)
            f[i] += coef[k] * xo[row_pos(ob, k, lo)];
    }
}

/* sum log p at x; f, g, w, t at x on the way, and with keep (the mode:
 * Newton's last evaluation) the rows' dpar for the gradients, which then
 * need not evaluate the rows again. */
static double lik_sum(gmm_laplace *w, const double *x, int keep)
{
    const gmm_laplace_obs *ob = w->obs;
    size_t np = w->lik->type->nparam;
    double sum = 0.0, out[4];
    w->dpar_ok = keep && np;
    lin_pred(w, x, w->f);
    for (size_t i = 0; i < ob->nobs; i++) {
        row_eval(w, i, w->f[i], out, w->dpar_ok ? w->dpar + 3 * np * i : NULL);
        w->g[i] = out[1];
        w->w[i] = -out[2];
        w->t[i] = out[3];
        sum += out[0];
    }
    return sum;
}

/* Newton's stopping test on the decrement dec at Psi (both forms): below
 * tol max(1, |Psi|), or stalled.  Newton converges quadratically near the
 * mode, so a decrement that stops falling (3 steps above a quarter of the
 * best, *stall counting them) has hit the rounding of the gradient
 * (ill-conditioned Q), where further steps only move x in the noise. */
static int newton_done(double dec, double Psi, double tol, double *best, int *stall)
{
    *stall = dec > 0.25 * *best ? *stall + 1 : 0;
    *best = fmin(*best, dec);
    return dec <= tol * fmax(1.0, fabs(Psi)) ||
           (*stall >= 3 && dec <= 1e-6 * fmax(1.0, fabs(Psi)));
}

/* Psi(x) = sum log p - x'Qx/2; f, g, w, t and lsum at x on the way (keep:
 * lik_sum's); Qx in tmp. */
static double psi(gmm_laplace *w, const double *x, int keep)
{
    double sum = w->lsum = lik_sum(w, x, keep);
    gmm_band_gemv(GMM_NOTRANS, 1.0, w->Q, x, 0.0, w->tmp);
    double q = 0.0;
    for (size_t j = 0; j < w->n; j++)
        q += x[j] * w->tmp[j];
    return sum - 0.5 * q;
}

/* What a Newton form's line search evaluates: value() puts Psi at the
 * trial point w->xt = w->x + step w->dx (filled in already) into *Pt,
 * leaving f, g, w and t there; restore() re-evaluates them at w->x after a
 * failed search and may update *Psi.  ctx is the form's own. */
typedef struct {
    gmm_status (*value)(gmm_laplace *w, void *ctx, double step, double *Pt);
    void (*restore)(gmm_laplace *w, void *ctx, double *Psi);
    void *ctx;
} ls_objective;

/* The backtracking line search of both Newton forms along w->dx from w->x
 * (n each), where Psi is *Psi and the Newton decrement dec, at iteration
 * it (< max_iter, else GMM_ENOCONV): steps 1, 1/2, ... (60 at most) until
 * Psi rises by 1e-4 step dec.  Found: w->x and w->xt are swapped (x the
 * accepted point), *step and *Psi are its step and value, *final = 0.
 * None: x stays, obj->restore runs, and *final = 1 when dec is below
 * rounding (1e-6 max(1, |Psi|)): as good as it gets.  Errors: GMM_ENOCONV
 * (it at max_iter, or no step and dec above that), and obj->value's. */
static gmm_status line_search(gmm_laplace *w, const ls_objective *obj, double dec, size_t it,
                              size_t max_iter, double *Psi, double *step, int *final)
{
    if (it >= max_iter)
        return gmm_error(GMM_ENOCONV, "Laplace: no convergence in %zu Newton iterations "
                                      "(decrement %g)",
                         it, dec);
    double t = 1.0, Pt = -INFINITY;
    int ok = 0;
    *final = 0;
    for (int ls = 0; ls < 60; ls++, t *= 0.5) {
        for (size_t j = 0; j < w->n; j++)
            w->xt[j] = w->x[j] + t * w->dx[j];
        gmm_status st = obj->value(w, obj->ctx, t, &Pt);
        if (st)
            return st;
        if (isfinite(Pt) && Pt >= *Psi + 1e-4 * t * dec) {
            ok = 1;
            break;
        }
    }
    *step = t;
    if (!ok) {
        obj->restore(w, obj->ctx, Psi);
        if (dec <= 1e-6 * fmax(1.0, fabs(*Psi))) {
            *final = 1;
            return GMM_OK;
        }
        return gmm_error(GMM_ENOCONV, "Laplace: line search failed at iteration %zu "
                                      "(decrement %g)",
                         it, dec);
    }
    double *tx = w->x;
    w->x = w->xt;
    w->xt = tx;
    *Psi = Pt;
    return GMM_OK;
}

/* The assembled form's line search objective: psi() itself. */
static gmm_status psi_value(gmm_laplace *w, void *ctx, double step, double *Pt)
{
    (void)ctx;
    (void)step;
    *Pt = psi(w, w->xt, 0);
    return GMM_OK;
}

/* the last trial overwrote f, g, w, t (and Qx, lsum): restore them at x,
 * the mode unless the search fails */
static void psi_restore(gmm_laplace *w, void *ctx, double *Psi)
{
    (void)ctx;
    *Psi = psi(w, w->x, 1);
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
    if (!ob->rowptr) { /* dense windows */
        size_t nobs = ob->nobs, wd = ob->width;
        const size_t *off = ob->offset;
        const double *wv = w->w;
        for (size_t i = 0; i < nobs; i++) {
            const double *h = ob->coef + i * wd;
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
    for (size_t i = 0; ob->rowptr && i < ob->nobs; i++) {
        size_t lo = row_lo(ob, i), hi = row_hi(ob, i), o = ob->offset[i];
        const double *h = ob->coef;
        double wi = clamp ? fmax(w->w[i], 0.0) : w->w[i];
        if (wi == 0.0)
            continue;
        for (size_t a = lo; a < hi; a++) {
            if (h[a] == 0.0)
                continue;
            size_t ia = o + row_pos(ob, a, lo);
            double *col = gmm_band_col(P, ia), c = wi * h[a];
            for (size_t b2 = a; b2 < hi; b2++)
                col[o + row_pos(ob, b2, lo)] += c * h[b2];
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

static int has_negative_w(const gmm_laplace *w)
{
    for (size_t i = 0; i < w->obs->nobs; i++)
        if (w->w[i] < 0.0)
            return 1;
    return 0;
}

/* Check obs (nobs rows of width, offsets into the latent) against w's
 * workspace and b, then make obs, lik and b w's problem (borrowed, as the
 * evaluations' are).  Errors: GMM_EDIM (more rows or another width than the
 * workspace's, a row reading past the latent), GMM_EDOM (b not finite). */
static gmm_status set_obs(gmm_laplace *w, const gmm_laplace_obs *obs, const gmm_lik *lik,
                          double b)
{
    if (obs->nobs > w->maxobs || (obs->nobs && obs->width != w->width))
        return gmm_error(GMM_EDIM, "laplace: %zu observations of width %zu, workspace for %zu "
                                   "of width %zu",
                         obs->nobs, obs->width, w->maxobs, w->width);
    for (size_t i = 0; i < obs->nobs; i++)
        if (obs->offset[i] + obs->width > w->n)
            return gmm_error_at(GMM_EDIM, i, "laplace: observation %zu reads past the latent", i);
    if (!isfinite(b))
        return gmm_error(GMM_EDOM, "intercept = %g is not finite", b);
    if (lik->type->nparam && !w->dpar &&
        !(w->dpar = gmm_malloc(w->maxobs ? 3 * GMM_LIK_MAXPARAM * w->maxobs : 1,
                               sizeof *w->dpar)))
        return gmm_error(GMM_ENOMEM, "laplace: out of memory for %zu observations' "
                                     "derivatives", w->maxobs);
    w->obs = obs;
    w->lik = lik;
    w->nconst = gmm_lik_nconst(lik);
    w->b = b;
    w->dpar_ok = 0;
    return GMM_OK;
}

/* gmm_laplace_eval, or with logq NULL gmm_laplace_mode: the Newton
 * iterations alone, stopping at the last step's x (no factor of P there,
 * no log q). */
static gmm_status newton(gmm_laplace *w, const gmm_band *Q, double logdet_q,
                         const gmm_laplace_obs *obs, const gmm_lik *lik, double b,
                         const double *x0, int warm, const gmm_laplace_params *par,
                         double *logq)
{
    gmm_status st;
    gmm_laplace_params dflt;
    if (!w || !Q || !obs || !lik)
        return gmm_error(GMM_EINVAL, "laplace: NULL argument");
    w->valid = 0;
    if (!par) {
        gmm_laplace_params_init(&dflt);
        par = &dflt;
    }
    if (Q->n != w->n || Q->kl != w->kl || Q->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "laplace: Q is %zu x %zu with bandwidth %zu, workspace for "
                                   "%zu and %zu",
                         Q->n, Q->n, Q->kl, w->n, w->kl);
    if ((st = set_obs(w, obs, lik, b)))
        return st;
    w->Q = Q;
    w->sm = NULL;
    double tau = w->con ? gmm_constr_tau(w->con, Q) : 0.0;
    if (logq && w->con && isnan(logdet_q))
        return gmm_error(GMM_EINVAL, "laplace: constraints need the prior's log-determinant on "
                                     "the constrained subspace");
    w->logdet_here = logq && isnan(logdet_q);
    if (w->logdet_here) {
        if ((st = gmm_band_chol_decomp_work(Q, w->LQ, w->cwork)) != GMM_OK) {
            size_t row = gmm_error_index();
            return st == GMM_ENOTPD
                       ? gmm_error_at(st, row, "prior precision not positive definite (row %zu)",
                                      row)
                       : st;
        }
        logdet_q = gmm_band_chol_logdet(w->LQ);
    }
    if (x0)
        memcpy(w->x, x0, w->n * sizeof *w->x);
    else if (!(warm && w->have_mode))
        memset(w->x, 0, w->n * sizeof *w->x);
    w->have_mode = 0;

    double Psi = psi(w, w->x, 0);
    if (!isfinite(Psi))
        return gmm_error(GMM_EDOM, "Laplace: log density not finite at the starting point");
    int final = 0, stall = 0;
    size_t it = 0;
    double best = INFINITY;
    const ls_objective psi_ls = {psi_value, psi_restore, NULL};
    for (;;) {
        if (final && !logq)
            break;
        st = factor_p(w, 0, tau);
        if (st == GMM_ENOTPD && final) {
            size_t row = gmm_error_index();
            return gmm_error_at(GMM_ENOTPD, row,
                                "Laplace: Q + H'WH not positive definite at the mode (row %zu): "
                                "the likelihood's negative curvature makes it a saddle",
                                row);
        }
        if (st == GMM_ENOTPD && has_negative_w(w))
            st = factor_p(w, 1, tau); /* still an ascent direction for the line search */
        if (st == GMM_OK && w->con)
            st = gmm_constr_factor(w->con, w->L, tau);
        if (st)
            return st;
        if (final)
            break;
        /* gradient H'g - Qx, Newton direction P^-1 grad */
        for (size_t j = 0; j < w->n; j++)
            w->gr[j] = -w->tmp[j];
        for (size_t i = 0; i < obs->nobs; i++) {
            size_t lo = row_lo(obs, i), hi = row_hi(obs, i);
            for (size_t k = lo; k < hi; k++)
                w->gr[obs->offset[i] + row_pos(obs, k, lo)] += w->g[i] * obs->coef[k];
        }
        memcpy(w->dx, w->gr, w->n * sizeof *w->dx);
        if ((st = p_solve(w, w->dx))) /* with constraints, the step keeps A x = 0 */
            return st;
        double dec = 0.0;
        for (size_t j = 0; j < w->n; j++)
            dec += w->gr[j] * w->dx[j];
        if (!isfinite(dec))
            return gmm_error(GMM_EDOM, "Laplace: Newton step not finite at iteration %zu", it);
        if (newton_done(dec, Psi, par->tol, &best, &stall)) {
            /* one more full step: quadratic convergence makes the mode (and
             * so the gradient) exact to rounding */
            for (size_t j = 0; j < w->n; j++)
                w->x[j] += w->dx[j];
            if (logq && !isfinite(Psi = psi(w, w->x, 1)))
                return gmm_error(GMM_EDOM, "Laplace: log density not finite at the mode");
            final = 1;
            it++;
            continue;
        }
        double step;
        if ((st = line_search(w, &psi_ls, dec, it, par->max_iter, &Psi, &step, &final)))
            return st;
        if (final)
            continue;
        it++;
    }
    w->iter = it;
    if (!logq) {
        w->have_mode = 1;
        return GMM_OK;
    }
    /* the last psi() was at x: its sum and Qx */
    double ldp = gmm_band_chol_logdet(w->L), sum = w->lsum, q = 0.0;
    for (size_t j = 0; j < w->n; j++)
        q += w->x[j] * w->tmp[j];
    if (w->con)
        ldp += gmm_constr_logdet(w->con);
    double lq = sum - 0.5 * q + 0.5 * logdet_q - 0.5 * ldp;
    if (!isfinite(lq))
        return gmm_error(GMM_EDOM, "Laplace: log marginal likelihood not finite");
    *logq = w->logq = lq;
    w->psi = sum - 0.5 * q;
    w->valid = 1;
    w->have_mode = 1;
    return GMM_OK;
}

gmm_status gmm_laplace_eval(gmm_laplace *w, const gmm_band *Q, double logdet_q,
                            const gmm_laplace_obs *obs, const gmm_lik *lik, double b,
                            const double *x0, int warm, const gmm_laplace_params *par,
                            double *logq)
{
    if (!logq)
        return gmm_error(GMM_EINVAL, "laplace: NULL argument");
    return newton(w, Q, logdet_q, obs, lik, b, x0, warm, par, logq);
}

gmm_status gmm_laplace_mode(gmm_laplace *w, const gmm_band *Q, const gmm_laplace_obs *obs,
                            const gmm_lik *lik, double b, const double *x0, int warm,
                            const gmm_laplace_params *par)
{
    return newton(w, Q, NAN, obs, lik, b, x0, warm, par, NULL);
}

gmm_status gmm_laplace_grad(gmm_laplace *w, gmm_band *Qbar, double *bbar, double *parbar,
                            double *coefbar, double *shiftbar)
{
    gmm_status st;
    if (!w || !w->valid || w->sm)
        return gmm_error(GMM_EINVAL, "laplace: no successful evaluation on the assembled "
                                     "precision to differentiate");
    const gmm_laplace_obs *ob = w->obs;
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
    memset(w->z, 0, n * sizeof *w->z);
    for (size_t i = 0; i < ob->nobs; i++) {
        size_t lo = row_lo(ob, i), hi = row_hi(ob, i), o = ob->offset[i];
        const double *h = ob->coef;
        double s = 0.0;
        for (size_t a = lo; a < hi; a++) {
            if (h[a] == 0.0)
                continue;
            size_t ia = o + row_pos(ob, a, lo);
            for (size_t c = lo; c < hi; c++)
                if (h[c] != 0.0)
                    s += h[a] * h[c] * gmm_band_get(w->S, ia, o + row_pos(ob, c, lo));
        }
        w->s[i] = s;
        for (size_t a = lo; a < hi; a++)
            w->z[o + row_pos(ob, a, lo)] += 0.5 * s * w->t[i] * h[a];
    }
    if ((st = p_solve(w, w->z)))
        return st;
    if (Qbar) {
        if ((st = gmm_band_outer(-0.5, 1, w->x, n, w->x, n, Qbar)) ||
            (st = gmm_band_outer(-1.0, 1, w->z, n, w->x, n, Qbar)))
            return st;
        if ((st = gmm_band_axpy(-0.5, 2.0, w->S, Qbar)))
            return st;
        if (w->logdet_here) {
            if ((st = gmm_band_chol_selinv(w->LQ, w->SQ)))
                return st;
            if ((st = gmm_band_axpy(0.5, 2.0, w->SQ, Qbar)))
                return st;
        }
    }
    size_t np = w->lik->type->nparam;
    double out[4], dpar[3 * GMM_LIK_MAXPARAM];
    const double *dp = dpar;
    for (size_t i = 0; i < ob->nobs; i++) {
        size_t lo = row_lo(ob, i), hi = row_hi(ob, i), o = ob->offset[i];
        const double *h = ob->coef;
        double u = 0.0;
        for (size_t a = lo; a < hi; a++)
            u += h[a] * w->z[o + row_pos(ob, a, lo)];
        double ci = w->g[i] + 0.5 * w->s[i] * w->t[i] - w->w[i] * u;
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
                parbar[k] += dp[3 * k] + 0.5 * w->s[i] * dp[3 * k + 2] + u * dp[3 * k + 1];
        }
        if (coefbar) {
            for (size_t a = lo; a < hi; a++) {
                size_t ia = o + row_pos(ob, a, lo);
                double sh = 0.0;
                for (size_t c = lo; c < hi; c++)
                    if (h[c] != 0.0)
                        sh += gmm_band_get(w->S, ia, o + row_pos(ob, c, lo)) * h[c];
                coefbar[a] += ci * w->x[ia] + w->g[i] * w->z[ia] - w->w[i] * sh;
            }
        }
    }
    return GMM_OK;
}

gmm_status gmm_laplace_posterior(gmm_laplace *w, double *mode, gmm_band *cov)
{
    if (!w || !w->valid)
        return gmm_error(GMM_EINVAL, "laplace: no successful evaluation");
    if (mode)
        memcpy(mode, w->x, w->n * sizeof *mode);
    if (cov && w->sm)
        return gmm_error(GMM_EINVAL, "laplace: the square-root form's covariance is its "
                                     "smoother's");
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
    if (!w || !w->valid || w->sm || !z || !x)
        return gmm_error(GMM_EINVAL, "laplace: no successful evaluation on the assembled "
                                     "precision to draw from");
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
    const gmm_laplace_obs *ob = w->obs;
    double sum = 0.0, qx = 0.0, out[4];
    for (size_t i = 0; i < ob->nobs; i++) {
        size_t lo = row_lo(ob, i), hi = row_hi(ob, i);
        const double *xo = x + ob->offset[i];
        double f = w->b + (ob->shift ? ob->shift[i] : 0.0);
        for (size_t k = lo; k < hi; k++)
            f += ob->coef[k] * xo[row_pos(ob, k, lo)];
        row_eval(w, i, f, out, NULL);
        sum += out[0];
    }
    gmm_band_gemv(GMM_NOTRANS, 1.0, w->Q, x, 0.0, w->xt);
    for (size_t j = 0; j < w->n; j++)
        qx += x[j] * w->xt[j];
    *logw = sum - 0.5 * qx - w->psi + 0.5 * zz;
    return GMM_OK;
}

gmm_status gmm_laplace_posterior_solve(gmm_laplace *w, double *v)
{
    if (!w || !w->valid || w->sm || !v)
        return gmm_error(GMM_EINVAL, "laplace: no successful evaluation on the assembled "
                                     "precision to solve with");
    return p_solve(w, v);
}

const gmm_band *gmm_laplace_chol(const gmm_laplace *w)
{
    return w && w->valid && !w->sm && !w->con ? w->L : NULL;
}

const double *gmm_laplace_weights(const gmm_laplace *w)
{
    /* the last factor_p, unclamped, was at the mode's weights */
    return gmm_laplace_chol(w) ? w->w : NULL;
}

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
    for (size_t i = 0; i < w->obs->nobs; i++) {
        if (!(w->w[i] > 0.0) || !isfinite(w->w[i]))
            return gmm_error_at(GMM_EDOM, i,
                                "Laplace (square-root form): the likelihood's curvature at "
                                "observation %zu is %g, not positive (a likelihood that is not "
                                "log-concave there needs the assembled precision: --factor "
                                "cholesky)",
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
    c->sum = lik_sum(w, w->xt, 0);
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
    ((sqrt_ls *)ctx)->sum = lik_sum(w, w->x, 1); /* f, g, w, t back at x, the mode */
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
    w->valid = 0;
    if (!par) {
        gmm_laplace_params_init(&dflt);
        par = &dflt;
    }
    if ((st = set_obs(w, obs, lik, b)))
        return st;
    w->Q = NULL;
    w->sm = sm;
    w->logdet_here = 0;
    int started = x0 || (warm && w->have_mode);
    if (x0)
        memcpy(w->x, x0, w->n * sizeof *w->x);
    else if (!started)
        memset(w->x, 0, w->n * sizeof *w->x);
    w->have_mode = 0;

    /* the smoother's first call fixes theta for its quadratic form; it
     * records when the start may be the mode (accept, below).  Qx (in gr)
     * is known from x = 0 on, and after any step (QUADRATIC FORMS); from
     * another start, x'Qx = (x - dx)'Q mu + dx'Q dx with the first step
     * dx = mu - x (below) */
    int recorded = started, track = !started, have_psi = track;
    double *qx = w->gr, *qm = w->tmp;
    /* a start given is usually the mode, kept (accept below): its rows' dpar
     * kept too */
    double sum = lik_sum(w, w->x, started), ml = 0.0, q = 0.0, Psi = sum;
    w->accepted = w->sready = 0;
    if (track)
        memset(qx, 0, w->n * sizeof *qx);
    if ((st = working_data(w)) ||
        (st = sm->smooth(sm->ctx, w->yt, w->w, recorded, &ml, w->dx)))
        return st;
    int final = 0, stall = 0, have_step = 1, accept = 0;
    size_t it = 0;
    double best = INFINITY;
    for (;;) {
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
        for (size_t i = 0; i < obs->nobs; i++) {
            double e = row_dot(obs, i, w->dx), r;
            dec += w->w[i] * e * e;
            r = w->g[i] - w->w[i] * e;
            size_t lo = row_lo(obs, i), hi = row_hi(obs, i);
            for (size_t k = lo; k < hi; k++)
                qm[obs->offset[i] + row_pos(obs, k, lo)] += obs->coef[k] * r;
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
        if (newton_done(dec, Psi, par->tol, &best, &stall)) {
            for (size_t j = 0; j < w->n; j++)
                w->x[j] += w->dx[j];
            sum = lik_sum(w, w->x, 1);
            if (!isfinite(sum))
                return gmm_error(GMM_EDOM, "Laplace: log density not finite at the mode");
            final = 1;
            it++;
            continue;
        }
        double step;
        sqrt_ls ctx = {qm, qx, track, 0.0};
        const ls_objective obj = {sqrt_value, sqrt_restore, &ctx};
        st = line_search(w, &obj, dec, it, par->max_iter, &Psi, &step, &final);
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
    for (size_t i = 0; i < obs->nobs; i++)
        gw += w->g[i] * w->g[i] / w->w[i];
    if (accept) {
        /* log|P| at x's W, not the mode's: its first-order term r'(mu - x) */
        if ((st = sm->var(sm->ctx, w->s)))
            return st;
        w->accepted = w->sready = 1;
        for (size_t i = 0; i < obs->nobs; i++)
            corr += 0.5 * w->s[i] * w->t[i] * row_dot(obs, i, w->dx);
    }
    double lq = sum + ml + 0.5 * (double)obs->nobs * log2pi + 0.5 * gw + corr;
    if (!isfinite(lq))
        return gmm_error(GMM_EDOM, "Laplace: log marginal likelihood not finite");
    *logq = w->logq = lq;
    w->iter = it;
    w->valid = 1;
    w->have_mode = 1;
    return GMM_OK;
}

gmm_status gmm_laplace_grad_sqrt(gmm_laplace *w, double *bbar, double *parbar, double *coefbar,
                                 double *shiftbar)
{
    gmm_status st;
    if (!w || !w->valid || !w->sm)
        return gmm_error(GMM_EINVAL, "laplace: no successful square-root evaluation to "
                                     "differentiate");
    if (coefbar && !w->sm->rowcov)
        return gmm_error(GMM_EINVAL, "laplace: the smoother gives no gradient in the rows' "
                                     "coefficients");
    const gmm_laplace_obs *ob = w->obs;
    const gmm_laplace_smoother *sm = w->sm;
    /* var starts the smoother's gradient, which the adjoint completes:
     * once per gradient */
    if (!w->sready && (st = sm->var(sm->ctx, w->s)))
        return st;
    w->sready = 0;
    for (size_t i = 0; i < ob->nobs; i++)
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
    for (size_t i = 0; i < ob->nobs; i++) {
        /* a kept start: g and dlogp/dphi at the mode's f_i + e_i to first
         * order, as log q's r'delta (SQUARE-ROOT FORM) */
        double e = w->accepted ? row_dot(ob, i, w->dx) : 0.0;
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
            size_t lo = row_lo(ob, i), hi = row_hi(ob, i);
            for (size_t k = lo; k < hi; k++) {
                size_t ia = ob->offset[i] + row_pos(ob, k, lo);
                double xm = w->x[ia] + (w->accepted ? w->dx[ia] : 0.0);
                coefbar[k] += ci * xm + gi * w->z[ia] - w->w[i] * w->sh[k];
            }
        }
    }
    return GMM_OK;
}
