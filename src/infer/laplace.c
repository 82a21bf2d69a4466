/* laplace.c -- the Laplace approximation's workspace and what its two
 * algorithms share (laplace.h): the observations, log p at x, the
 * stopping test and the line search; and the Newton iterations and the
 * gradient's row terms of the two assembled forms, band (laplace_newton.c)
 * and sparse (laplace_sparse.c), which differ only in P's storage
 * (laplace_form).  The square-root form is in laplace_sqrt.c.
 *
 * MODEL (Rasmussen & Williams, Algorithms 3.1 and 5.1; Rue, Martino &
 * Chopin 2009).
 *
 *   x ~ N(0, Q^-1),  f_i = b + s_i + h_i' x[o_i .. o_i + width),
 *   y_i ~ p(y_i | f_i, phi)   (likelihood.h; e_i the exposure)
 *
 * Newton iterations to the mode x^ of Psi(x) = sum_i log p(y_i | f_i) -
 * x'Qx/2, each a banded Cholesky of P = Q + H'WH (W = diag of -d2 log p;
 * or a smoother on a square root of Q: laplace_sqrt.c), with backtracking
 * on Psi so they converge from any start for a log-concave likelihood; for
 * one that is not (studentt: W < 0 at outlying rows), a step where P is
 * indefinite takes its direction from P with W clamped at 0, and the line
 * search keeps Psi increasing (laplace_newton.c, NEWTON); then
 *
 *   log q(y) = sum_i log p(y_i | f^_i) - x^'Q x^/2 + log|Q|/2 - log|P|/2
 *
 * and its exact gradient in Q, b, phi and the coefficients h_i, including
 * the dependence through the mode (laplace_newton.c, GRADIENT: third
 * derivatives times the marginal variances s_i = h_i' Sigma h_i from the
 * Takahashi inverse subset of P, and one more banded solve). */
#include "gmm/laplace.h"

#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/constr.h"
#include "laplace_impl.h"

void gmm_laplace_params_init(gmm_laplace_params *p)
{
    p->max_iter = 200;
    p->tol = 1e-12;
    p->stop = NULL;
    p->stop_user = NULL;
    p->cold = 0;
}

void gmm_laplace_free(gmm_laplace *w)
{
    if (!w)
        return;
    gmm_band_free(w->L);
    gmm_factor_free(w->fQ);
    gmm_band_free(w->S);
    gmm_band_free(w->SQ);
    double *v[] = {w->x, w->xt, w->gr, w->dx, w->tmp, w->z, w->f, w->g, w->w, w->t, w->s,
                   w->yt, w->u, w->sh, w->dpar, w->cwork, w->wfac};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        gmm_free(v[i]);
    gmm_constr_free(w->con);
    gmm_sparse_free(w->P);
    gmm_sparse_free(w->SP);
    gmm_sparse_free(w->Qpat);
    gmm_sparse_free(w->SQs);
    gmm_factor_free(w->fP);
    gmm_factor_free(w->fQs);
    gmm_free(w->qpos);
    gmm_free(w->hptr);
    gmm_free(w->hpos);
    gmm_free(w->hent);
    gmm_free(w->hlat);
    gmm_free(w);
}

gmm_status gmm_laplace_constrain(gmm_laplace *w, size_t k, const double *A, const size_t *pin)
{
    if (!w || (k && (!A || !pin)))
        return gmm_error(GMM_EINVAL, "laplace: NULL argument");
    w->known = LAPLACE_KNOWS_NOTHING;
    gmm_constr_free(w->con);
    w->con = NULL;
    if (k && !(w->con = gmm_constr_alloc(w->n, k, A, pin)))
        return gmm_error_status();
    return GMM_OK;
}

void gmm_laplace_set_weights(gmm_laplace *w, const double *wt) { w->wt = wt; }

gmm_laplace *laplace_alloc_vectors(size_t n, size_t maxobs, size_t width)
{
    gmm_laplace *w = gmm_calloc(1, sizeof *w);
    if (!w) {
        gmm_error(GMM_ENOMEM, "laplace: out of memory");
        return NULL;
    }
    w->n = n;
    w->maxobs = maxobs;
    w->width = width;
    size_t no = maxobs ? maxobs : 1;
    double **v[] = {&w->x, &w->xt, &w->gr, &w->dx, &w->tmp, &w->z};
    int ok = 1;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        ok = (*v[i] = gmm_calloc(n, sizeof(double))) && ok;
    double **o[] = {&w->f, &w->g, &w->w, &w->t, &w->s, &w->yt, &w->u};
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
        ok = (*o[i] = gmm_calloc(no, sizeof(double))) && ok;
    if (!ok) {
        gmm_laplace_free(w);
        gmm_error(GMM_ENOMEM, "laplace: out of memory for a workspace of %zu latents", n);
        return NULL;
    }
    return w;
}

double laplace_psi_from_qx(gmm_laplace *w, const double *x, double sum)
{
    double q = 0.0;
    for (size_t j = 0; j < w->n; j++)
        q += x[j] * w->tmp[j];
    return sum - 0.5 * q;
}

gmm_laplace *gmm_laplace_alloc(size_t n, size_t kl, size_t cov_kl, size_t maxobs, size_t width)
{
    /* n = 0 (no latent: a GLM): width 0, the mode is the empty vector */
    if (n == 0 ? width != 0 : cov_kl < kl || width == 0 || width > kl + 1) {
        gmm_error(GMM_EINVAL, "laplace: bad workspace shape (n %zu, kl %zu, cov_kl %zu, width %zu)",
                  n, kl, cov_kl, width);
        return NULL;
    }
    gmm_laplace *w = laplace_alloc_vectors(n, maxobs, width);
    if (!w)
        return NULL;
    w->kl = kl;
    w->ckl = cov_kl;
    w->L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
    w->fQ = gmm_factor_band_alloc(n, kl);
    w->S = gmm_band_alloc(n, cov_kl, 0, GMM_BAND_SYMMETRIC);
    w->SQ = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    w->cwork = gmm_malloc(gmm_band_chol_work_size(kl), sizeof *w->cwork);
    if (!(w->L && w->fQ && w->S && w->SQ && w->cwork)) {
        gmm_laplace_free(w);
        gmm_error(GMM_ENOMEM, "laplace: out of memory for a workspace of %zu latents, bandwidth "
                              "%zu",
                  n, cov_kl);
        return NULL;
    }
    return w;
}

size_t gmm_laplace_iterations(const gmm_laplace *w) { return w->iter; }

/* The linear predictors f_i = b + s_i + h_i'x of all rows into f. */
static void lin_pred(const gmm_laplace *w, const double *x, double *f)
{
    const gmm_laplace_obs *ob = w->obs;
    size_t nobs = ob->map.nrows;
    const size_t *off = ob->map.offset;
    const double *coef = ob->map.coef;
    for (size_t i = 0; i < nobs; i++)
        f[i] = w->b + (ob->shift ? ob->shift[i] : 0.0);
    if (!ob->map.rowptr) { /* dense windows */
        size_t wd = ob->map.width;
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
        size_t lo = gmm_obsmap_row_lo(&ob->map, i), hi = gmm_obsmap_row_hi(&ob->map, i);
        const double *xo = x + off[i];
        for (size_t k = lo; k < hi; k++)
            f[i] += coef[k] * xo[gmm_obsmap_row_pos(&ob->map, k, lo)];
    }
}

/* sum log p at x; f, g, w, t at x on the way, and with keep (the mode:
 * Newton's last evaluation) the rows' dpar for the gradients, which then
 * need not evaluate the rows again. */
double laplace_lik_sum(gmm_laplace *w, const double *x, int keep)
{
    const gmm_laplace_obs *ob = w->obs;
    size_t np = w->lik->type->nparam;
    double sum = 0.0, out[4];
    w->dpar_ok = keep && np;
    lin_pred(w, x, w->f);
    for (size_t i = 0; i < ob->map.nrows; i++) {
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
int laplace_newton_done(double dec, double Psi, double tol, double *best, int *stall)
{
    *stall = dec > 0.25 * *best ? *stall + 1 : 0;
    *best = fmin(*best, dec);
    return dec <= tol * fmax(1.0, fabs(Psi)) ||
           (*stall >= 3 && dec <= 1e-6 * fmax(1.0, fabs(Psi)));
}

/* The backtracking line search of both Newton forms along w->dx from w->x
 * (n each), where Psi is *Psi and the Newton decrement dec, at iteration
 * it (< max_iter, else GMM_ENOCONV): steps 1, 1/2, ... (60 at most) until
 * Psi rises by 1e-4 step dec.  Found: w->x and w->xt are swapped (x the
 * accepted point), *step and *Psi are its step and value, *final = 0.
 * None: x stays, obj->restore runs, and *final = 1 when dec is below
 * rounding (1e-6 max(1, |Psi|)): as good as it gets.  Errors: GMM_ENOCONV
 * (it at max_iter, or no step and dec above that), and obj->value's. */
gmm_status laplace_line_search(gmm_laplace *w, const ls_objective *obj, double dec, size_t it,
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

/* Check obs (nobs rows of width, offsets into the latent) against w's
 * workspace and b, then make obs, lik and b w's problem (borrowed, as the
 * evaluations' are).  Errors: GMM_EDIM (more rows or another width than the
 * workspace's, a row reading past the latent), GMM_EDOM (b not finite). */
gmm_status laplace_set_obs(gmm_laplace *w, const gmm_laplace_obs *obs, const gmm_lik *lik,
                          double b)
{
    if (obs->map.nrows > w->maxobs || (obs->map.nrows && obs->map.width != w->width))
        return gmm_error(GMM_EDIM, "laplace: %zu observations of width %zu, workspace for %zu "
                                   "of width %zu",
                         obs->map.nrows, obs->map.width, w->maxobs, w->width);
    for (size_t i = 0; i < obs->map.nrows; i++)
        if (obs->map.offset[i] + obs->map.width > w->n)
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

/* The line search's objective for the assembled forms: their psi() at the
 * trial point, and at x again after a failed search. */
static gmm_status form_psi_value(gmm_laplace *w, void *ctx, double step, double *Pt)
{
    const laplace_form *form = ctx;
    (void)step;
    *Pt = form->psi(w, w->xt, 0);
    return GMM_OK;
}

static void form_psi_restore(gmm_laplace *w, void *ctx, double *Psi)
{
    const laplace_form *form = ctx;
    *Psi = form->psi(w, w->x, 1);
}

static int has_negative_w(const gmm_laplace *w)
{
    for (size_t i = 0; i < w->obs->map.nrows; i++)
        if (w->w[i] < 0.0)
            return 1;
    return 0;
}

gmm_status laplace_stop(const gmm_laplace_params *par, size_t it)
{
    if (par->stop && par->stop(par->stop_user))
        return gmm_error(GMM_ECANCEL, "Laplace: cancelled at Newton step %zu", it);
    return GMM_OK;
}

/* COLD START.  From x = 0 Newton spends its first steps finding the
 * scale of the data: on a lattice of Poisson counts most of its
 * factorisations go there (docs/benchmarks.md).  The start is instead the
 * mode of an independent model: each latent alone under its prior's
 * diagonal Q(j, j), and row r's curvature counted m_r times (m_r its
 * nonzero coefficients: by Cauchy-Schwarz, diag(sum_r m_r c_rj^2 w_r) >=
 * H'WH, so rows shared between latents do not make each claim all of the
 * row), found by that model's Newton steps (each latent's step at most 1
 * in f's units, at most COLD_SWEEPS of them), projected onto A x = 0 under
 * constraints.  Only for log-concave likelihoods, whose mode is unique, so
 * that the start changes the mode found only by rounding, and not the
 * Gaussian's (one Newton step from anywhere); only where a factorisation
 * is dear against the start's sweeps over the rows (COLD_DEAR: its flops
 * against n + nnz(H), about what one sweep's row evaluations cost in
 * flops; a state-space series of small bandwidth loses more to the sweeps
 * than it saves); and kept only where it raises Psi above Psi(0)
 * (otherwise x = 0, as before).  Reads and writes w->x, w->xt (the
 * trial), w->gr and w->dx (scratch); on return *Psi, w's row quantities
 * and w->tmp are those of w->x. */
/* COLD_SWEEPS: a lattice's start settles (steps below 1e-3) in fewer;
 * where rows share several latents (a space-time stack) the damped sweeps
 * creep, and more of them cost more than the Newton steps they save. */
#define COLD_SWEEPS 6
#define COLD_DEAR 300.0

static void cold_start(gmm_laplace *w, const laplace_form *form, double *Psi)
{
    const gmm_obsmap *m = &w->obs->map;
    size_t n = w->n;
    double *x = w->xt, *num = w->gr, *den = w->dx;
    memset(x, 0, n * sizeof *x);
    for (int sweep = 0; sweep < COLD_SWEEPS; sweep++) {
        for (size_t j = 0; j < n; j++) {
            den[j] = form->qdiag(w, j);
            num[j] = -den[j] * x[j];
        }
        for (size_t i = 0; i < m->nrows; i++) {
            size_t lo = gmm_obsmap_row_lo(m, i), hi = gmm_obsmap_row_hi(m, i), mr = 0;
            if (!(w->w[i] >= 0.0) || !isfinite(w->g[i])) {
                *Psi = form->psi(w, w->x, 0); /* x = 0 kept, its row quantities again */
                return;
            }
            for (size_t k = lo; k < hi; k++)
                mr += m->coef[k] != 0.0;
            gmm_obsmap_row_axpy(m, i, w->g[i], num);
            for (size_t k = lo; k < hi; k++)
                den[m->offset[i] + gmm_obsmap_row_pos(m, k, lo)] +=
                    (double)mr * m->coef[k] * m->coef[k] * w->w[i];
        }
        double big = 0.0;
        for (size_t j = 0; j < n; j++) {
            if (!(den[j] > 0.0))
                continue;
            double d = fmax(-1.0, fmin(1.0, num[j] / den[j]));
            x[j] += d;
            big = fmax(big, fabs(d));
        }
        (void)laplace_lik_sum(w, x, 0);
        if (big <= 1e-3) /* a start: Newton does the rest */
            break;
    }
    if (w->con && gmm_constr_project(w->con, x) != GMM_OK) {
        /* dependent constraints (the factorisation will say so) or no
         * memory: the start is only a start, x = 0 kept */
        gmm_error_clear();
        *Psi = form->psi(w, w->x, 0);
        return;
    }
    double P1 = form->psi(w, x, 0);
    if (isfinite(P1) && P1 > *Psi) {
        w->xt = w->x;
        w->x = x;
        *Psi = P1;
    } else {
        *Psi = form->psi(w, w->x, 0); /* back to x = 0 */
    }
}

gmm_status laplace_newton_run(gmm_laplace *w, const laplace_form *form, const double *x0,
                              int warm, const gmm_laplace_params *par, double tau,
                              double logdet_q, double *logq)
{
    gmm_status st;
    const gmm_laplace_obs *obs = w->obs;
    int cold = !x0 && !(warm && w->known != LAPLACE_KNOWS_NOTHING);
    if (x0)
        memcpy(w->x, x0, w->n * sizeof *w->x);
    else if (cold)
        memset(w->x, 0, w->n * sizeof *w->x);
    w->known = LAPLACE_KNOWS_NOTHING;

    double Psi = form->psi(w, w->x, 0);
    if (!isfinite(Psi))
        return gmm_error(GMM_EDOM, "Laplace: log density not finite at the starting point");
    if (cold && par->cold >= 0 && !w->lik->type->not_log_concave &&
        !w->lik->type->conjugate && obs->map.nrows &&
        (par->cold > 0 ||
         form->flops(w) >= COLD_DEAR * (double)(w->n + gmm_obsmap_nnz(&obs->map))))
        cold_start(w, form, &Psi);
    int final = 0, stall = 0;
    size_t it = 0, nobs = obs->map.nrows;
    double best = INFINITY;
    const ls_objective psi_ls = {form_psi_value, form_psi_restore, (void *)form};
    /* P = Q + H'WH changes with x only through the curvatures W: where they
     * are the ones this run's last (unclamped) factor was made with -- a
     * Gaussian's, at every step -- that factor is P's, and refactoring
     * would repeat it to the bit.  So a Gaussian costs one factorisation,
     * not three (the step, the test of the mode, the factor there). */
    int have = 0;
    if (nobs > w->wfac_cap) {
        gmm_free(w->wfac);
        if (!(w->wfac = gmm_malloc(nobs, sizeof *w->wfac)))
            return gmm_error(GMM_ENOMEM, "Laplace: out of memory for %zu rows", nobs);
        w->wfac_cap = nobs;
    }
    for (;;) {
        if (final && !logq)
            break;
        if ((st = laplace_stop(par, it)))
            return st;
        /* gradient H'g - Qx, the Newton direction P^-1 grad (in dx below) */
        if (!final) {
            for (size_t j = 0; j < w->n; j++)
                w->gr[j] = -w->tmp[j];
            for (size_t i = 0; i < obs->map.nrows; i++)
                gmm_obsmap_row_axpy(&obs->map, i, w->g[i], w->gr);
            memcpy(w->dx, w->gr, w->n * sizeof *w->dx);
        }
        int solved = 0;
        if (!(have && !memcmp(w->wfac, w->w, nobs * sizeof *w->w))) {
            int clamp = 0;
            st = form->factor(w, 0, tau);
            if (st == GMM_ENOTPD && final) {
                size_t row = gmm_error_index();
                return gmm_error_at(GMM_ENOTPD, row,
                                    "Laplace: Q + H'WH not positive definite at the mode (row "
                                    "%zu): the likelihood's negative curvature makes it a "
                                    "saddle",
                                    row);
            }
            if (st == GMM_ENOTPD && has_negative_w(w)) {
                st = form->factor(w, 1, tau); /* still an ascent direction for the line search */
                clamp = 1;
            }
            if (st == GMM_OK && w->con && !final && form->constrain_solve) {
                st = form->constrain_solve(w, tau, w->dx); /* one block of solves */
                solved = 1;
            } else if (st == GMM_OK && w->con) {
                st = form->constrain(w, tau);
            }
            if (st)
                return st;
            if ((have = !clamp))
                memcpy(w->wfac, w->w, nobs * sizeof *w->w);
        }
        if (final)
            break;
        if (!solved && (st = form->solve(w, w->dx))) /* with constraints, the step keeps A x = 0 */
            return st;
        double dec = 0.0;
        for (size_t j = 0; j < w->n; j++)
            dec += w->gr[j] * w->dx[j];
        if (!isfinite(dec))
            return gmm_error(GMM_EDOM, "Laplace: Newton step not finite at iteration %zu", it);
        if (laplace_newton_done(dec, Psi, par->tol, &best, &stall)) {
            /* one more full step: quadratic convergence makes the mode (and
             * so the gradient) exact to rounding */
            for (size_t j = 0; j < w->n; j++)
                w->x[j] += w->dx[j];
            if (logq && !isfinite(Psi = form->psi(w, w->x, 1)))
                return gmm_error(GMM_EDOM, "Laplace: log density not finite at the mode");
            final = 1;
            it++;
            continue;
        }
        double step;
        if ((st = laplace_line_search(w, &psi_ls, dec, it, par->max_iter, &Psi, &step, &final)))
            return st;
        if (final)
            continue;
        it++;
    }
    w->iter = it;
    if (!logq) {
        w->known = LAPLACE_KNOWS_MODE;
        return GMM_OK;
    }
    /* the last psi() was at x: its sum and Qx */
    double ldp = form->logdet(w), sum = w->lsum, q = 0.0;
    for (size_t j = 0; j < w->n; j++)
        q += w->x[j] * w->tmp[j];
    if (w->con)
        ldp += gmm_constr_logdet(w->con);
    double lq = sum - 0.5 * q + 0.5 * logdet_q - 0.5 * ldp;
    if (!isfinite(lq))
        return gmm_error(GMM_EDOM, "Laplace: log marginal likelihood not finite");
    *logq = w->logq = lq;
    w->psi = sum - 0.5 * q;
    w->known = LAPLACE_KNOWS_FIT;
    return GMM_OK;
}

gmm_status laplace_grad_z(gmm_laplace *w, const laplace_form *form)
{
    const gmm_laplace_obs *ob = w->obs;
    memset(w->z, 0, w->n * sizeof *w->z);
    for (size_t i = 0; i < ob->map.nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(&ob->map, i), hi = gmm_obsmap_row_hi(&ob->map, i),
               o = ob->map.offset[i];
        const double *h = ob->map.coef;
        double s = 0.0;
        for (size_t a = lo; a < hi; a++) {
            if (h[a] == 0.0)
                continue;
            for (size_t c = lo; c < hi; c++)
                if (h[c] != 0.0)
                    s += h[a] * h[c] * form->sigma(w, i, a, c);
        }
        w->s[i] = s;
        for (size_t a = lo; a < hi; a++)
            w->z[o + gmm_obsmap_row_pos(&ob->map, a, lo)] += 0.5 * s * w->t[i] * h[a];
    }
    return form->solve(w, w->z);
}

void laplace_grad_rows(gmm_laplace *w, const laplace_form *form, double *bbar, double *parbar,
                       double *coefbar, double *shiftbar)
{
    const gmm_laplace_obs *ob = w->obs;
    size_t np = w->lik->type->nparam;
    double out[4], dpar[3 * GMM_LIK_MAXPARAM];
    const double *dp = dpar;
    for (size_t i = 0; i < ob->map.nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(&ob->map, i), hi = gmm_obsmap_row_hi(&ob->map, i),
               o = ob->map.offset[i];
        const double *h = ob->map.coef;
        double u = 0.0;
        for (size_t a = lo; a < hi; a++)
            u += h[a] * w->z[o + gmm_obsmap_row_pos(&ob->map, a, lo)];
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
                size_t ia = o + gmm_obsmap_row_pos(&ob->map, a, lo);
                double sh = 0.0;
                for (size_t c = lo; c < hi; c++)
                    if (h[c] != 0.0)
                        sh += form->sigma(w, i, a, c) * h[c];
                coefbar[a] += ci * w->x[ia] + w->g[i] * w->z[ia] - w->w[i] * sh;
            }
        }
    }
}

double laplace_lik_value(const gmm_laplace *w, const double *x)
{
    const gmm_laplace_obs *ob = w->obs;
    double sum = 0.0, out[4];
    for (size_t i = 0; i < ob->map.nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(&ob->map, i), hi = gmm_obsmap_row_hi(&ob->map, i);
        const double *xo = x + ob->map.offset[i];
        double f = w->b + (ob->shift ? ob->shift[i] : 0.0);
        for (size_t k = lo; k < hi; k++)
            f += ob->map.coef[k] * xo[gmm_obsmap_row_pos(&ob->map, k, lo)];
        row_eval(w, i, f, out, NULL);
        sum += out[0];
    }
    return sum;
}
