/* stack_predict.c -- new rows of a stacked latent (stack.h): the latents a
 * row at new covariate values reads and with which weights (interpolation
 * along a walk, the kernel's conditional at a new time), its components'
 * levels, and the extra variance a new level brings.
 *
 * NEW ROWS.  A level or a data value of the index reads its latent (w = 1).
 * A new IID level is its prior, eps ~ N(0, variance).  A new RW1/RW2 value
 * is the process's conditional law given the walk at the data's values
 * (Markov: given its neighbours alone): between two values, the Brownian
 * bridge (RW1; mean weights d2/d, d1/d, variance variance d1 d2 / d) or the
 * integrated Wiener bridge on the neighbours' states (x, x') (RW2); beyond
 * the last value by d, x + N(0, variance d) (RW1) and x + d x' + N(0,
 * variance d^3/3) (RW2), and before the first the same backwards (the
 * intrinsic walk's initial state is flat, so its reversal is the same
 * process).  A KERNEL's value between two data values reads the Markov
 * bridge of its states (x(t) | x_l, x_r has precision Q1^-1 + A2' Q2^-1 A2,
 * A_i = A(d_i), Q_i = Q(d_i), and f = H x(t)), beyond the last value the
 * prior dynamics (H A(d) x_last, variance H Q(d) H'), before the first the
 * stationary process's reversal (H Pinf A(d)' Pinf^-1 x_first, variance H
 * (Pinf - Pinf A' Pinf^-1 A Pinf) H'), and a value within its merge_tol of
 * a state (on either side) that state's reading, as a data value there was
 * merged into it.  A cyclic walk's value is first reduced onto its circle
 * (gmm_latent_stack_wrap), and one between the last value and the first
 * bridges the wrap-around interval. */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "../model_dense.h"
#include "stack_impl.h"

gmm_stack_model gmm_latent_stack_kind(const gmm_latent *l, size_t k)
{
    stack_impl *c = stack_impl_of(l);
    return c && k < c->ncomp ? c->comp[k].model : GMM_STACK_NO_MODEL;
}

/* The integrated Wiener process's unit-variance transition over d: F =
 * [1 d; 0 1] and the innovation's precision S^-1 (row-major 2 x 2). */
static void iw_step(double d, double F[4], double Si[4])
{
    F[0] = 1.0;
    F[1] = d;
    F[2] = 0.0;
    F[3] = 1.0;
    Si[0] = 12.0 / (d * d * d);
    Si[1] = Si[2] = -6.0 / (d * d);
    Si[3] = 4.0 / d;
}

/* RW2's state at t between a state z_l (d1 before) and z_r (d2 after):
 * z | z_l, z_r has precision P = S1^-1 + F2' S2^-1 F2 and mean P^-1 (S1^-1
 * F1 z_l + F2' S2^-1 z_r); x(t)'s weights on (x_l, x'_l, x_r, x'_r) into
 * wt, its unit variance (P^-1)_00 returned. */
static double iw_bridge(double d1, double d2, double wt[4])
{
    double F1[4], S1[4], F2[4], S2[4], P[4], B[4], C[4];
    iw_step(d1, F1, S1);
    iw_step(d2, F2, S2);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++) {
            double b = 0.0, cc = 0.0, p = S1[i * 2 + j];
            for (size_t t = 0; t < 2; t++) {
                b += S1[i * 2 + t] * F1[t * 2 + j];  /* S1^-1 F1 */
                cc += F2[t * 2 + i] * S2[t * 2 + j]; /* F2' S2^-1 */
                for (size_t u = 0; u < 2; u++)
                    p += F2[t * 2 + i] * S2[t * 2 + u] * F2[u * 2 + j];
            }
            B[i * 2 + j] = b;
            C[i * 2 + j] = cc;
            P[i * 2 + j] = p;
        }
    double det = P[0] * P[3] - P[1] * P[2];
    double r0[2] = {P[3] / det, -P[1] / det}; /* the first row of P^-1 */
    for (size_t j = 0; j < 2; j++) {
        wt[j] = r0[0] * B[j] + r0[1] * B[2 + j];
        wt[2 + j] = r0[0] * C[j] + r0[1] * C[2 + j];
    }
    return r0[0];
}

/* Component q's reading of value t: entries (local index, weight) appended
 * to li, lw (*ne of them) and the unit variance of eps returned. */
static double walk_row(const stack_comp *q, double t, size_t *li, double *lw, size_t *ne)
{
    int two = q->model == GMM_STACK_RW2;
    size_t m = q->m, s = two ? 2 : 1;
    if (q->cyclic)
        t = stack_wrap(q->val[0], q->period, t);
    size_t lo = stack_lower_bound(q->val, m, t);
    if (lo < m && q->val[lo] == t) {
        li[*ne] = s * lo;
        lw[(*ne)++] = 1.0;
        return 0.0;
    }
    if (!q->cyclic && (lo == 0 || lo == m)) {
        /* beyond an end: forwards from the last value, backwards from the
         * first (x - d x') */
        size_t j = lo == 0 ? 0 : m - 1;
        double d = lo == 0 ? q->val[0] - t : t - q->val[m - 1];
        li[*ne] = s * j;
        lw[(*ne)++] = 1.0;
        if (!two)
            return d;
        li[*ne] = s * j + 1;
        lw[(*ne)++] = lo == 0 ? -d : d;
        return d * d * d / 3.0;
    }
    /* a bridge; on a circle lo == m is the wrap-around interval (t >= t_0
     * after wrapping, so lo > 0) */
    size_t jl = lo - 1, jr = lo < m ? lo : 0;
    double d1 = t - q->val[jl], d2 = lo < m ? q->val[lo] - t : q->val[0] + q->period - t;
    if (!(d1 > 0.0) || !(d2 > 0.0)) {
        /* a value the wrap rounded onto the first one */
        li[*ne] = s * (d1 > 0.0 ? jr : jl);
        lw[(*ne)++] = 1.0;
        return 0.0;
    }
    if (!two) {
        li[*ne] = jl;
        lw[(*ne)++] = d2 / (d1 + d2);
        li[*ne] = jr;
        lw[(*ne)++] = d1 / (d1 + d2);
        return d1 * d2 / (d1 + d2);
    }
    double wt[4];
    double v = iw_bridge(d1, d2, wt);
    const size_t at[4] = {2 * jl, 2 * jl + 1, 2 * jr, 2 * jr + 1};
    for (size_t e = 0; e < 4; e++) {
        li[*ne] = at[e];
        lw[(*ne)++] = wt[e];
    }
    return v;
}

/* In-place lower Cholesky of the d x d row-major S (GMM_ENOTPD). */
static gmm_status small_chol(double *S, size_t d)
{
    for (size_t j = 0; j < d; j++) {
        double v = S[j * d + j];
        for (size_t t = 0; t < j; t++)
            v -= S[j * d + t] * S[j * d + t];
        if (!(v > 0.0))
            return gmm_error(GMM_ENOTPD, "a new row's state covariance is not positive "
                                         "definite");
        S[j * d + j] = sqrt(v);
        for (size_t i = j + 1; i < d; i++) {
            double u = S[i * d + j];
            for (size_t t = 0; t < j; t++)
                u -= S[i * d + t] * S[j * d + t];
            S[i * d + j] = u / S[j * d + j];
        }
    }
    return GMM_OK;
}

/* A KERNEL's reading of value t (stack.h, gmm_latent_stack_row): entries
 * (local index, weight) appended to li, lw, the variance of eps into *var.
 * All d x d algebra in the kernel's variable order, mapped to the band's by
 * gmm_ssm_state_var. */
static gmm_status kernel_row(stack_comp *q, const double *theta, double t, size_t *li,
                             double *lw, size_t *ne, double *var)
{
    gmm_status st;
    size_t d = q->d, m = q->m, lo = stack_lower_bound(q->val, m, t);
    *var = 0.0;
    /* a value on a state, or within merge_tol of one (the lower first, as
     * ssm_predict.c's snap), reads it */
    size_t on = lo < m && q->val[lo] == t                       ? lo
                : lo > 0 && t - q->val[lo - 1] <= q->merge_tol ? lo - 1
                : lo < m && q->val[lo] - t <= q->merge_tol     ? lo
                                                               : m;
    double *P = q->kscr, *A1 = P + d * d, *Q1 = A1 + d * d, *A2 = Q1 + d * d;
    double *Q2 = A2 + d * d, *T = Q2 + d * d, *H = T + d * d, *u = H + d, *v = u + d;
    double *wl = v + d, *wr = wl + d;
    if ((on == m || q->modulated) &&
        (st = gmm_kernel_stat(q->kern, theta, gmm_ssm_damp(q->ssm), q->kw, P, H)))
        return st;
    /* a demodulated kernel reads h(t - t_0) (kernel.h, DEMODULATION; t_0 the
     * first state's value, as the data rows: a state's own value on it) */
    if (q->modulated &&
        (st = gmm_kernel_obs(q->kern, q->kw, (on < m ? q->val[on] : t) - q->val[0], H)))
        return st;
    if (on < m) {
        for (size_t e = 0; e < q->nread; e++) {
            li[*ne] = q->lvl_off[on] + q->hidx[e];
            lw[(*ne)++] =
                q->modulated ? H[gmm_ssm_state_var(q->ssm, q->hidx[e])] : q->hval[e];
        }
        return GMM_OK;
    }
    for (size_t i = 0; i < d; i++)
        wl[i] = wr[i] = 0.0;
    size_t jl = lo > 0 ? lo - 1 : 0, jr = lo < m ? lo : m - 1;
    if (lo == m) {
        /* forwards from the last value: H A(d) x, variance H Q(d) H' */
        if ((st = gmm_kernel_disc(q->kern, q->kw, t - q->val[m - 1], A1, Q1)))
            return st;
        for (size_t j = 0; j < d; j++) {
            double a = 0.0, b = 0.0;
            for (size_t i = 0; i < d; i++) {
                a += H[i] * A1[i * d + j];
                b += H[i] * Q1[i * d + j];
            }
            wl[j] = a;
            *var += b * H[j];
        }
    } else if (lo == 0) {
        /* backwards from the first value, the stationary reversal: x(t) | x_0
         * has mean Pinf A' Pinf^-1 x_0 and covariance Pinf - Pinf A'
         * Pinf^-1 A Pinf; u = A Pinf H' */
        if ((st = gmm_kernel_disc(q->kern, q->kw, q->val[0] - t, A1, Q1)))
            return st;
        for (size_t i = 0; i < d; i++) {
            double a = 0.0;
            for (size_t j = 0; j < d; j++) {
                double ph = 0.0;
                for (size_t k = 0; k < d; k++)
                    ph += P[j * d + k] * H[k];
                a += A1[i * d + j] * ph;
            }
            u[i] = v[i] = a;
        }
        memcpy(T, P, d * d * sizeof *T);
        if ((st = small_chol(T, d)))
            return st;
        md_chol_solve(d, T, v); /* Pinf^-1 A Pinf H' */
        double hph = 0.0, uv = 0.0;
        for (size_t i = 0; i < d; i++) {
            wr[i] = v[i];
            uv += u[i] * v[i];
            for (size_t k = 0; k < d; k++)
                hph += H[i] * P[i * d + k] * H[k];
        }
        *var = hph - uv;
    } else {
        /* the bridge: precision P = Q1^-1 + A2' Q2^-1 A2; u = P^-1 H'; the
         * weights u' Q1^-1 A1 on x_l and u' A2' Q2^-1 on x_r, variance H u */
        double d1 = t - q->val[jl], d2 = q->val[jr] - t;
        if ((st = gmm_kernel_disc(q->kern, q->kw, d1, A1, Q1)) ||
            (st = gmm_kernel_disc(q->kern, q->kw, d2, A2, Q2)) || (st = small_chol(Q1, d)) ||
            (st = small_chol(Q2, d)))
            return st;
        for (size_t j = 0; j < d; j++) { /* column j of Q1^-1 and of Q2^-1 A2 */
            for (size_t i = 0; i < d; i++) {
                u[i] = i == j;
                v[i] = A2[i * d + j];
            }
            md_chol_solve(d, Q1, u);
            md_chol_solve(d, Q2, v);
            for (size_t i = 0; i < d; i++) {
                P[i * d + j] = u[i];
                T[i * d + j] = v[i];
            }
        }
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                double a = 0.0;
                for (size_t k = 0; k < d; k++)
                    a += A2[k * d + i] * T[k * d + j];
                P[i * d + j] += a;
            }
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < i; j++)
                P[i * d + j] = P[j * d + i] = 0.5 * (P[i * d + j] + P[j * d + i]);
        if ((st = small_chol(P, d)))
            return st;
        for (size_t i = 0; i < d; i++)
            u[i] = H[i];
        md_chol_solve(d, P, u);
        for (size_t i = 0; i < d; i++)
            v[i] = u[i];
        md_chol_solve(d, Q1, v); /* Q1^-1 u */
        for (size_t j = 0; j < d; j++) {
            double a = 0.0;
            for (size_t i = 0; i < d; i++)
                a += v[i] * A1[i * d + j];
            wl[j] = a;
        }
        for (size_t j = 0; j < d; j++) { /* wr = Q2^-1 A2 u */
            double b = 0.0;
            for (size_t i = 0; i < d; i++)
                b += T[j * d + i] * u[i];
            wr[j] = b;
            *var += H[j] * u[j];
        }
    }
    for (size_t p = 0; p < d; p++) {
        size_t kv = gmm_ssm_state_var(q->ssm, p);
        if (wl[kv] != 0.0 && lo > 0) {
            li[*ne] = q->lvl_off[jl] + p;
            lw[(*ne)++] = wl[kv];
        }
        if (wr[kv] != 0.0 && lo < m) {
            li[*ne] = q->lvl_off[jr] + p;
            lw[(*ne)++] = wr[kv];
        }
    }
    if (*var < 0.0)
        *var = 0.0;
    return GMM_OK;
}

/* A CORR component's reading of a new row: its level's k effects times z
 * (local indices), or a level the data do not have: its prior, *evar +=
 * z' Sigma z. */
static gmm_status corr_row(const stack_comp *q, const double *theta, const gmm_stack_at *at,
                           size_t *li, double *lw, size_t *ne, double *evar)
{
    size_t k = q->nread, m = q->n / k;
    *ne = 0;
    if (!at->z)
        return gmm_error(GMM_EINVAL, "a new row needs the coefficients of its %zu effects", k);
    for (size_t a = 0; a < k; a++)
        if (!isfinite(at->z[a]))
            return gmm_error(GMM_EINVAL, "coefficient %g of effect %zu is not finite", at->z[a],
                             a);
    if (at->level == GMM_NO_INDEX) {
        double S[GMM_STACK_CORR_MAX * GMM_STACK_CORR_MAX];
        stack_corr_sigma(q, theta, S);
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++)
                *evar += at->z[a] * S[a * k + b] * at->z[b];
        return GMM_OK;
    }
    if (at->level >= m)
        return gmm_error(GMM_EINVAL, "level %zu is not one of its %zu", at->level, m);
    for (size_t a = 0; a < k; a++) {
        li[*ne] = at->level * k + a;
        lw[(*ne)++] = at->z[a];
    }
    return GMM_OK;
}

size_t gmm_latent_stack_row_max(const gmm_latent *l)
{
    stack_impl *c = stack_impl_of(l);
    size_t r = 0;
    for (size_t k = 0; c && k < c->ncomp; k++)
        r += c->comp[k].model == GMM_STACK_KERNEL ? 2 * c->comp[k].d
             : c->comp[k].model == GMM_STACK_CORR ? c->comp[k].nread
                                                  : GMM_STACK_ROW_MAX;
    return r;
}

size_t gmm_latent_stack_nlevel(const gmm_latent *l, size_t k)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || k >= c->ncomp)
        return 0;
    const stack_comp *q = &c->comp[k];
    if (q->control != GMM_STACK_NO_MODEL || q->nrep)
        return 0; /* an interaction's latents are not levels of one column */
    return q->model == GMM_STACK_RW2 || q->model == GMM_STACK_KERNEL ? q->m : q->n;
}

gmm_status gmm_latent_stack_level(const gmm_latent *l, size_t k, size_t j, size_t *idx,
                                  double *w, size_t *nnz)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || !idx || !w || !nnz || k >= c->ncomp || j >= gmm_latent_stack_nlevel(l, k))
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_level: not a stacked latent, NULL or "
                                     "out of range");
    const stack_comp *q = &c->comp[k];
    *nnz = 0;
    if (q->model == GMM_STACK_KERNEL) {
        for (size_t e = 0; e < q->nread; e++) {
            idx[*nnz] = c->iperm[q->off + q->lvl_off[j] + q->hidx[e]];
            w[(*nnz)++] = q->hval[e];
        }
        return GMM_OK;
    }
    idx[0] = c->iperm[q->off + (q->model == GMM_STACK_RW2 ? 2 * j : j)];
    w[0] = 1.0;
    *nnz = 1;
    return GMM_OK;
}

gmm_status gmm_latent_stack_row(const gmm_latent *l, const double *theta, const gmm_stack_at *at,
                                size_t *idx, double *w, size_t *nnz, double *evar)
{
    return gmm_latent_stack_row_group(l, theta, at, NULL, idx, w, nnz, evar);
}

gmm_status gmm_latent_stack_row_group(const gmm_latent *l, const double *theta,
                                      const gmm_stack_at *at, const double *grp, size_t *idx,
                                      double *w, size_t *nnz, double *evar)
{
    stack_impl *c = stack_impl_of(l);
    if (!c || !theta || !at || !idx || !w || !nnz || !evar)
        return gmm_error(GMM_EINVAL, "gmm_latent_stack_row: not a stacked latent, or NULL");
    *nnz = 0;
    *evar = 0.0;
    for (size_t k = 0; k < c->ncomp; k++) {
        const stack_comp *q = &c->comp[k];
        size_t li[GMM_STACK_ROW_MAX], ne = 0;
        double lw[GMM_STACK_ROW_MAX], u = 0.0;
        if (q->model == GMM_STACK_KERNEL) {
            double ev;
            gmm_status st;
            if (!isfinite(at[k].value))
                return gmm_error_at(GMM_EINVAL, k, "'%s': index value %g is not finite",
                                    q->name, at[k].value);
            size_t *ki = idx + *nnz, ne2 = 0;
            double *kw = w + *nnz;
            if ((st = kernel_row(&c->comp[k], theta + q->par0, at[k].value, ki, kw, &ne2, &ev)))
                return gmm_error_at(st, k, "'%s': %s", q->name, gmm_error_message());
            for (size_t e = 0; e < ne2; e++)
                ki[e] = c->iperm[q->off + ki[e]];
            *nnz += ne2;
            *evar += ev;
            continue;
        }
        if (q->model == GMM_STACK_CORR) {
            gmm_status st = corr_row(q, theta + q->par0, &at[k], idx + *nnz, w + *nnz, &ne, evar);
            if (st)
                return gmm_error_at(st, k, "'%s': %s", q->name, gmm_error_message());
            for (size_t e = 0; e < ne; e++)
                idx[*nnz + e] = c->iperm[q->off + idx[*nnz + e]];
            *nnz += ne;
            continue;
        }
        if (q->control != GMM_STACK_NO_MODEL || q->nrep ||
            q->model == GMM_STACK_AR1 || q->model == GMM_STACK_SEASONAL) {
            gmm_status st = q->control != GMM_STACK_NO_MODEL || q->nrep
                                ? stack_kron_row(q, theta + q->par0, &at[k],
                                                 grp ? grp[2 * k] : NAN,
                                                 grp ? grp[2 * k + 1] : NAN, li, lw, &ne, evar)
                                : stack_ts_row(q, theta + q->par0, at[k].value, li, lw, &ne, evar);
            if (st)
                return gmm_error_at(st, k, "%s", gmm_error_message());
        } else if (q->model == GMM_STACK_RW1 || q->model == GMM_STACK_RW2) {
            if (!isfinite(at[k].value))
                return gmm_error_at(GMM_EINVAL, k, "'%s': index value %g is not finite",
                                    q->name, at[k].value);
            u = walk_row(q, at[k].value, li, lw, &ne);
        } else {
            /* BYM2's levels read b, at the node itself */
            size_t m = q->model == GMM_STACK_BYM2 ? q->n / 2 : q->n;
            if (at[k].level == GMM_NO_INDEX && q->model == GMM_STACK_IID) {
                u = 1.0;
            } else if (at[k].level >= m) {
                return gmm_error_at(GMM_EINVAL, k, "'%s': level %zu is not one of its %zu",
                                    q->name, at[k].level, m);
            } else {
                li[0] = at[k].level;
                lw[0] = 1.0;
                ne = 1;
            }
        }
        for (size_t e = 0; e < ne; e++) {
            idx[*nnz] = c->iperm[q->off + li[e]];
            w[(*nnz)++] = lw[e];
        }
        /* eps scales with the component's variance (not BYM2 or GRAPH:
         * their new levels are refused above) */
        *evar += u * theta[q->par0];
    }
    return GMM_OK;
}
