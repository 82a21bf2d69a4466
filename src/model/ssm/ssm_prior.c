/* ssm_prior.c -- per parameter value, the state-space model's d x d
 * blocks, the band of the prior precision, the marginal likelihood
 * (marglik.h) and its reverse mode chained to the kernel parameters.
 *
 * The prior precision (SYMMETRIC band, lower bandwidth 2d - 1, or d - 1 + s
 * when the kernel's state splits into independent blocks of at most s
 * variables, each state's variables then listed block by block: see BLOCKS in
 * ssm.c; gmm_ssm_bandwidth reports it) has diagonal
 * blocks Pinf^-1 + A_1' Q_1^-1 A_1, Q_k^-1 + A_{k+1}' Q_{k+1}^-1 A_{k+1},
 * Q_{K-1}^-1 and sub-diagonal blocks -Q_k^-1 A_k; log|Q_prior| = -log|Pinf|
 * - sum_k log|Q_k| from the d x d blocks.  (A_k, Q_k) are computed once per
 * distinct interval: intervals that differ by less than dt_ulps rounding
 * units of max|x| (below the resolution of the inputs themselves) share one.
 *
 * The prior precision is assembled directly in the marginal likelihood's
 * band (gmm_marglik_prior_band; see STATE COLUMNS) and its gradient read
 * where the reverse sweep leaves it (gmm_marglik_grad_view): no band of our
 * own, no copy, no zeroing.
 *
 * Two reverse modes: the square-root form's gradient by Fisher's identity
 * from the posterior moments of the prior's whitened rows (ROWS GRADIENT,
 * below), and the Cholesky's and gmm_ssm_prior_rev's chain through the
 * precision's entries (REVERSE SWEEP), whose rounding grows like
 * (l/dt)^(2 nu).
 *
 * REVERSE SWEEP (ssm_grad).  gmm_marglik_grad_view gives Qbar on the STORED
 * entries of the prior precision band (band.h convention).  Per state k the
 * diagonal block D_k has full symmetric gradient Gd_k (stored diagonal as
 * is, stored off-diagonal halved into both triangles); the sub-diagonal
 * block B_k = -W_k A_k (W = Q^-1) is stored whole, so its gradient Gb_k is
 * the stored values.  With D_k = W_k + A_{k+1}' W_{k+1} A_{k+1}, and sums
 * over the intervals of one cached group g (S1 = sum Gd_k over intervals
 * ending at k, S2 = sum Gd_{k-1}, S3 = sum Gb_k):
 *
 *   Wbar_g = S1 + A S2 A' - S3 A',      Abar_g = 2 W A S2 - W S3,
 *   Qbar_g = -W Wbar_g W - c count_g W      (the last from c log|Q_prior|),
 *   Pbar   = -W0 Gd_0 W0 - c W0,      W0 = Pinf^-1,
 *
 * (c = 1/2 in the marginal likelihood, the caller's logdetbar in
 * gmm_ssm_prior_rev), then the kernel's reverse mode per group
 * (gmm_kernel_rev).  Forward saves:
 * per group A, W, W A, A' W A; W0.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/marglik.h"
#include "gmm/ssm.h"
#include "../model_dense.h"

#include "ssm_impl.h"

/* the slack keeps a grid built as i * (limit) from tripping on rounding */
#define SPACING_SLACK (1.0 - 1e-9)

/* Refuses spacings below the accuracy limit of the factorisations allowed
 * (the square-root form's unless the Cholesky is forced or chol_limit is
 * set: gmm_ssm_prior's caller factorises Q itself).  A gradient shares the
 * limit of its log likelihood (docs/accuracy.md, Gradients). */
gmm_status ssm_check_spacing(gmm_ssm *m, const double *theta, int chol_limit)
{
    size_t j;
    double dt = m->ng ? m->gdt[0] : INFINITY;
    if (!m->par.check_spacing || m->ng == 0)
        return GMM_OK;
    int rows = m->par.factor != GMM_SSM_FACTOR_CHOL && !chol_limit;
    double lim = gmm_kernel_spacing_limit(m->k, theta, rows, &j);
    if (dt >= lim * SPACING_SLACK)
        return GMM_OK;
    return gmm_error(GMM_EDOM,
                     "inputs x = %.15g and %.15g are only %g apart, below the accuracy limit %g "
                     "at %s = %g: the state-space %s would not be accurate there. Merge inputs "
                     "closer than that (a merge tolerance of %g coarsens them), or keep %s below "
                     "%g",
                     m->t[m->imin], m->t[m->imin + 1], dt, lim, gmm_kernel_param_name(m->k, j),
                     theta[j], rows ? "likelihood" : "Cholesky factorisation", lim,
                     gmm_kernel_param_name(m->k, j), dt * theta[j] / lim);
}

/* CHOICE OF FACTORISATION (ssm.h, FACTORISATION).  The bound on the
 * Cholesky's rounding: eps sum_i P_ii Pinf_ii over the states, P the
 * assembled posterior precision -- a stored entry's rounding, eps P_ii,
 * moves log det P by up to eps P_ii Sigma_ii, and the posterior variance
 * Sigma_ii is at most the prior's. */
double ssm_chol_rounding_bound(const gmm_ssm *m, double obs_prec)
{
    size_t d = m->d;
    double s = 0.0, h = 0.0;
    for (size_t p = 0; p < d; p++) {
        size_t v = m->perm[p];
        double pv = m->P[v * d + v], t = m->W0[v * d + v];
        for (size_t g = 0; g < m->ng; g++)
            t += (double)m->gcount[g] * (blk(m, g, B_W)[v * d + v] + blk(m, g, B_AWA)[v * d + v]);
        s += t * pv;
        h += m->Hp[p] * m->Hp[p] * pv;
    }
    s += obs_prec * h;
    return DBL_EPSILON * s;
}

/* grad: a gradient follows, and the Cholesky's (chained through the
 * precision's entries, ssm.h GRADIENT) carries rounding up to ~10 times its
 * bound: it is taken only below GMM_SSM_CHOL_GRAD_TOL. */
static int choose_rows(gmm_ssm *m, const double *theta, int grad)
{
    m->bound = ssm_chol_rounding_bound(m, (double)m->nobs / m->noise);
    if (m->par.factor != GMM_SSM_FACTOR_AUTO)
        return m->par.factor == GMM_SSM_FACTOR_ROWS;
    double tol = grad ? GMM_SSM_CHOL_GRAD_TOL : GMM_SSM_CHOL_TOL * fmax(1.0, (double)m->nobs);
    return ssm_rows_rule(m, theta, tol);
}

int ssm_rows_rule(gmm_ssm *m, const double *theta, double tol)
{
    double dt = m->ng ? m->gdt[0] : INFINITY;
    return gmm_kernel_damped(m->k) ||
           dt < gmm_kernel_spacing_limit(m->k, theta, 0, NULL) * SPACING_SLACK ||
           m->bound > tol;
}

/* The square root's rows of one interval group (g < ng: -C A then C, SQUARE
 * ROOT) or C0's (g = ng, CA NULL), each at its width from its first column
 * and zero-padded to kl + 1: what the readers below copy. */
static void rows_template(gmm_ssm *m, size_t g, const double *C, const double *CA)
{
    size_t d = m->d, ld = m->kl + 1;
    double *T = m->rtpl + g * d * ld;
    for (size_t p = 0; p < d; p++) {
        double *v = T + p * ld;
        size_t w = 0;
        for (size_t q = m->rowstart[p]; CA && q < d; q++)
            v[w++] = -CA[p * d + q];
        for (size_t q = 0; q <= p; q++)
            v[w++] = C[p * d + q];
        for (; w < ld; w++)
            v[w] = 0.0;
    }
}

/* One interval group: A, W = Q^-1, W A, A' W A and log|Q| block by block
 * (BLOCKS).  Q (d x d) is scratch. */
static gmm_status group_forward(gmm_ssm *m, size_t g, double *Q)
{
    gmm_status st;
    size_t d = m->d;
    double *A = blk(m, g, B_A);
    if ((st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], A, Q)))
        return st;
    double ld = 0.0;
    for (size_t b = 0; b < m->nb; b++) {
        const size_t *idx = m->perm + m->boff[b];
        size_t s = m->boff[b + 1] - m->boff[b], ss = s * s;
        double *Lb = m->bs, *Wb = Lb + ss, *Ab = Wb + ss, *WAb = Ab + ss, *AWAb = WAb + ss;
        double *X = AWAb + ss;
        ssm_gather(d, Q, idx, s, Lb);
        if (md_chol(s, Lb))
            return gmm_error(GMM_ENOTPD,
                             "transition noise Q(dt = %g) is not positive definite at these "
                             "parameters",
                             m->gdt[g]);
        ld += md_chol_logdet(s, Lb);
        md_chol_inverse(s, Lb, Wb, X); /* leaves X = Lb^-1 */
        ssm_gather(d, A, idx, s, Ab);
        md_gemm(s, 0, 0, 1.0, Wb, Ab, 0.0, WAb);
        md_gemm(s, 1, 0, 1.0, Ab, WAb, 0.0, AWAb);
        md_symmetrise(s, AWAb);
        ssm_scatter(d, blk(m, g, B_W), idx, s, Wb);
        ssm_scatter(d, blk(m, g, B_WA), idx, s, WAb);
        ssm_scatter(d, blk(m, g, B_AWA), idx, s, AWAb);
        /* C and C A for the square root, in band order (block b sits at
         * positions boff[b] ..) */
        double *C = blk(m, g, B_C), *CA = blk(m, g, B_CA);
        double *AB = blk(m, g, B_AB), *LB = blk(m, g, B_L);
        size_t o = m->boff[b];
        md_mul(s, s, s, X, Ab, WAb); /* C A, reusing WAb */
        for (size_t i = 0; i < s; i++)
            for (size_t j = 0; j < s; j++) {
                C[(o + i) * d + o + j] = j <= i ? X[i * s + j] : 0.0;
                CA[(o + i) * d + o + j] = WAb[i * s + j];
                AB[(o + i) * d + o + j] = Ab[i * s + j];
                LB[(o + i) * d + o + j] = j <= i ? Lb[i * s + j] : 0.0;
            }
    }
    m->ldQ[g] = ld;
    rows_template(m, g, blk(m, g, B_C), blk(m, g, B_CA));
    return GMM_OK;
}

/* STATE COLUMNS.  State k owns band columns kd .. kd + d - 1; slot s of its
 * column j (s = 0 .. kl) is entry (kd + j + s, kd + j) of the precision:
 * the lower part of the diagonal block D_k for s < d - j, then column j of
 * the sub-diagonal block B_{k+1} = -W_{k+1} A_{k+1} (rows of state k + 1)
 * for d - j <= s < 2d - j, then structural zeros.  D_k = W_k + A_{k+1}'
 * W_{k+1} A_{k+1} depends only on the groups of the intervals before and
 * after state k: key_before (ng for state 0, whose W is Pinf^-1) and
 * key_after (ng for the last state, which has no interval after it). */
static size_t key_before(const gmm_ssm *m, size_t k) { return k == 0 ? m->ng : m->ig[k - 1]; }
static size_t key_after(const gmm_ssm *m, size_t k) { return k + 1 < m->K ? m->ig[k] : m->ng; }

/* The d columns (stride kl + 1) of a state with interval groups g1, g2, in
 * band order (BLOCKS).  Entries of B beyond the band are zero by the block
 * structure; one that is not would be lost, so it is an error. */
static gmm_status state_template(const gmm_ssm *m, size_t g1, size_t g2, double *t)
{
    size_t d = m->d, ld = m->kl + 1;
    const size_t *P = m->perm;
    const double *W = g1 < m->ng ? blk(m, g1, B_W) : m->W0;
    const double *AWA = g2 < m->ng ? blk(m, g2, B_AWA) : NULL;
    const double *WA = g2 < m->ng ? blk(m, g2, B_WA) : NULL;
    for (size_t j = 0; j < d; j++) {
        double *c = t + j * ld;
        size_t s = 0, pj = P[j];
        for (size_t i = j; i < d; i++, s++)
            c[s] = W[P[i] * d + pj] + (AWA ? AWA[P[i] * d + pj] : 0.0);
        for (size_t i = 0; i < d && WA; i++, s++) {
            double v = -WA[P[i] * d + pj];
            if (s < ld)
                c[s] = v;
            else if (v != 0.0)
                return gmm_error(GMM_EINVAL, "internal: the kernel's declared block structure "
                                             "does not hold (W A(%zu,%zu) = %g)",
                                 P[i], pj, -v);
        }
        for (; s < ld; s++)
            c[s] = 0.0;
    }
    return GMM_OK;
}

/* The time-varying observation rows of a demodulated kernel (X: d scratch). */
static gmm_status modulated_rows(gmm_ssm *m, double *X)
{
    gmm_status st;
    size_t d = m->d, last = SIZE_MAX;
    for (size_t o = 0; o < m->nobs; o++) {
        size_t sk = m->obs_off[o] / d;
        if (sk != last && (st = gmm_kernel_obs(m->k, m->kw, m->t[sk] - m->t[0], X)))
            return st;
        last = sk;
        for (size_t p = 0; p < d; p++)
            m->Hobs[o * d + p] = X[m->perm[p]];
    }
    return GMM_OK;
}

/* SQUARE ROOT.  The prior precision is G'G for the rows
 *   C0 x_0                      (d rows, C0 = chol(Pinf)^-1),
 *   C_k (x_{k+1} - A_k x_k)     (d rows per interval, C_k = chol(Q_k)^-1),
 * each in band order and block by block (C_k, A_k block-diagonal): row p of
 * interval k reads positions rowstart[p] .. d - 1 of state k (-C A) and
 * rowstart[p] .. p of state k + 1 (C), a width d + p + 1 - rowstart[p] <=
 * kl + 1, starting at column k d + rowstart[p] -- nondecreasing in (k, p).
 * gmm_marglik_eval_rows folds them with the observations into L;
 * gmm_ssm_prior_rows hands them out (ssm_rows.c, with the reverse mode). */
size_t ssm_prior_row(void *ctx, size_t i, size_t *first, double *v)
{
    ssm_cursor *c = ctx;
    const gmm_ssm *m = c->m;
    size_t d = m->d, ld = m->kl + 1;
    if (i < d) {
        *first = 0;
        memcpy(v, m->rtpl + (m->ng * d + i) * ld, (i + 1) * sizeof *v);
        return i + 1;
    }
    if (i != c->next) {
        c->k = i / d - 1;
        c->p = i % d;
    }
    size_t k = c->k, p = c->p, r0 = m->rowstart[p], w = d - r0 + p + 1;
    c->next = i + 1;
    if (++c->p == d) {
        c->p = 0;
        c->k++;
    }
    memcpy(v, m->rtpl + (m->ig[k] * d + p) * ld, w * sizeof *v);
    *first = k * d + r0;
    return w;
}

/* gmm_prior_rows' rows: row i to the end of its segment (the interval's d
 * rows, or C0's), at most cap, from the templates in one copy. */
static size_t ssm_prior_rows_at(void *ctx, size_t i, size_t cap, size_t *first, size_t *width,
                                double *v, size_t ldv)
{
    const ssm_cursor *c = ctx;
    const gmm_ssm *m = c->m;
    size_t d = m->d, ld = m->kl + 1, k = i / d, p = i % d, nr = d - p < cap ? d - p : cap;
    const double *T = m->rtpl + ((k == 0 ? m->ng : m->ig[k - 1]) * d + p) * ld;
    size_t base = k == 0 ? 0 : (k - 1) * d;
    for (size_t t = 0; t < nr; t++) {
        size_t q = p + t, r0 = k == 0 ? 0 : m->rowstart[q];
        first[t] = base + r0;
        width[t] = k == 0 ? q + 1 : d - r0 + q + 1;
    }
    if (ldv == ld) {
        memcpy(v, T, nr * ld * sizeof *v);
    } else {
        for (size_t t = 0; t < nr; t++) {
            size_t w = ld < ldv ? ld : ldv;
            memcpy(v + t * ldv, T + t * ld, w * sizeof *v);
            for (; w < ldv; w++)
                v[t * ldv + w] = 0.0;
        }
    }
    return nr;
}

/* Each interval's transition rows start a segment of the fold (marglik.h):
 * a block's row moments then belong to whole intervals (ROWS GRADIENT). */
static int ssm_block_start(void *ctx, size_t i)
{
    const ssm_cursor *c = ctx;
    return i >= c->m->d && i % c->m->d == 0;
}

/* The d x d blocks at theta (kernel parameters): Pinf and its inverse
 * factor, every interval group's A, W, W A, A' W A, C, C A, and log|Q_prior|
 * from them.  chol_limit: the spacing limit is the Cholesky's. */
static gmm_status prior_blocks(gmm_ssm *m, const double *theta, int chol_limit, double *logdet)
{
    gmm_status st = ssm_check_spacing(m, theta, chol_limit);
    return st ? st : ssm_blocks(m, theta, logdet);
}

gmm_status ssm_blocks(gmm_ssm *m, const double *theta, double *logdet)
{
    gmm_status st;
    if ((st = ssm_pinf(m, theta)))
        return st;
    double *L = m->T;
    for (size_t g = 0; g < m->ng; g++)
        if ((st = group_forward(m, g, L)))
            return st;
    double ld = -m->ldP;
    for (size_t g = 0; g < m->ng; g++)
        ld -= (double)m->gcount[g] * m->ldQ[g];
    *logdet = ld;
    return GMM_OK;
}

gmm_status ssm_pinf(gmm_ssm *m, const double *theta)
{
    gmm_status st;
    size_t d = m->d, dd = d * d;
    if ((st = gmm_kernel_stat(m->k, theta, m->damp, m->kw, m->P, m->H)))
        return st;
    for (size_t p = 0; p < d; p++)
        m->Hp[p] = m->H[m->perm[p]];
    /* Pinf factorised in band order, where the inverse of its factor is C0,
     * the first rows of the square root (SQUARE ROOT); W0 = Pinf^-1 goes
     * back to kernel order. */
    double *L = m->T, *X = m->T + dd, *Wp = m->T + 2 * dd;
    ssm_gather(d, m->P, m->perm, d, L);
    if (md_chol(d, L))
        return gmm_error(GMM_ENOTPD,
                         "stationary covariance Pinf is not positive definite at these "
                         "parameters (a periodic harmonic with zero weight? use fewer harmonics)");
    m->ldP = md_chol_logdet(d, L);
    md_chol_inverse(d, L, Wp, X); /* leaves X = L^-1 */
    ssm_scatter(d, m->W0, m->perm, d, Wp);
    memcpy(m->C0, X, dd * sizeof *X);
    rows_template(m, m->ng, m->C0, NULL);
    for (size_t i = 0; i < d; i++) /* lower: ROWS GRADIENT takes whole blocks */
        for (size_t j = 0; j < d; j++)
            m->L0[i * d + j] = j <= i ? L[i * d + j] : 0.0;
    return GMM_OK;
}

/* The prior precision into Q (every stored slot): each state's columns
 * from a template, rebuilt only when the state's pair of intervals changes
 * -- once for a regular grid. */
static gmm_status assemble(gmm_ssm *m, gmm_band *Q)
{
    gmm_status st;
    size_t d = m->d, ld = m->kl + 1, key1 = SIZE_MAX, key2 = SIZE_MAX;
    for (size_t k = 0; k < m->K; k++) {
        size_t g1 = key_before(m, k), g2 = key_after(m, k);
        if (g1 != key1 || g2 != key2) {
            if ((st = state_template(m, g1, g2, m->tpl)))
                return st;
            key1 = g1;
            key2 = g2;
        }
        if ((st = gmm_band_cols_set(Q, k * d, d, m->tpl, ld)))
            return st;
    }
    return GMM_OK;
}

gmm_status ssm_fold(gmm_ssm *m, double logdet, int record, double *loglik)
{
    ssm_cursor cur = {m, SIZE_MAX, 0, 0};
    gmm_prior_rows G = {m->N, ssm_prior_row, &cur, ssm_block_start, ssm_prior_rows_at};
    gmm_marglik_rows_record(m->mw, record);
    return gmm_marglik_eval_rows(&G, &m->obs, m->noise, logdet, m->mw, loglik);
}

gmm_status ssm_forward(gmm_ssm *m, const double *theta, double noise, double *loglik, int grad)
{
    gmm_status st;
    double logdet;
    if (!m->ydata)
        return gmm_error(GMM_EINVAL, "state-space model: no outcomes set (gmm_ssm_set_y)");
    if (!(noise > 0.0) || !isfinite(noise))
        return gmm_error(GMM_EDOM, "likelihood.variance = %g must be positive and finite", noise);
    m->noise = noise;
    if ((st = prior_blocks(m, theta, 0, &logdet)))
        return st;
    m->rows = choose_rows(m, theta, grad);
    if (m->modulated && (st = modulated_rows(m, m->T)))
        return st;
    if (m->rows)
        return ssm_fold(m, logdet, grad, loglik);
    /* Assembled in the marginal likelihood's own band: no copy of Q there */
    gmm_band *Q = gmm_marglik_prior_band(m->mw);
    if ((st = assemble(m, Q)))
        return st;
    return gmm_marglik_eval(Q, &m->obs, noise, &logdet, m->mw, loglik);
}

gmm_status gmm_ssm_prior(gmm_ssm *m, const double *theta, gmm_band *Q, double *logdet)
{
    gmm_status st;
    double ld;
    if (!m || !theta || !Q)
        return gmm_error(GMM_EINVAL, "gmm_ssm_prior: NULL argument");
    if (Q->n != m->N || Q->kl != m->kl || Q->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gmm_ssm_prior: Q must be SYMMETRIC %zu x %zu with bandwidth "
                                   "%zu",
                         m->N, m->N, m->kl);
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = prior_blocks(m, theta, 1, &ld)) || (st = assemble(m, Q)))
        return st;
    if (logdet)
        *logdet = ld;
    m->prior_ok = 1;
    return GMM_OK;
}

gmm_status gmm_ssm_obs_rows(gmm_ssm *m, const double *theta, double *coef)
{
    gmm_status st;
    size_t d = m->d;
    if (!m || !theta || !coef)
        return gmm_error(GMM_EINVAL, "gmm_ssm_obs_rows: NULL argument");
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = ssm_pinf(m, theta)))
        return st;
    for (size_t r = 0; r < m->n; r++) {
        double *c = coef + r * d;
        if (!m->modulated) {
            memcpy(c, m->Hp, d * sizeof *c);
            continue;
        }
        if ((st = gmm_kernel_obs(m->k, m->kw, m->t[m->row_state[r]] - m->t[0], m->T)))
            return st;
        for (size_t p = 0; p < d; p++)
            c[p] = m->T[m->perm[p]];
    }
    return GMM_OK;
}

gmm_status gmm_ssm_obs_rows_rev(gmm_ssm *m, const double *theta, const double *coefbar,
                                double *thetabar)
{
    gmm_status st;
    size_t d = m->d;
    if (!m || !theta || !coefbar || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_obs_rows_rev: NULL argument");
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = ssm_pinf(m, theta)))
        return st;
    if (!m->modulated) {
        /* h is the kernel's H (band order): one reverse call with the sum */
        double *Hk = m->T;
        md_zero(d, Hk);
        for (size_t r = 0; r < m->n; r++)
            for (size_t p = 0; p < d; p++)
                Hk[m->perm[p]] += coefbar[r * d + p];
        return gmm_kernel_obs_rev(m->k, m->kw, 0.0, Hk, thetabar);
    }
    for (size_t r = 0; r < m->n; r++) {
        double *Hk = m->T;
        for (size_t p = 0; p < d; p++)
            Hk[m->perm[p]] = coefbar[r * d + p];
        if ((st = gmm_kernel_obs_rev(m->k, m->kw, m->t[m->row_state[r]] - m->t[0], Hk,
                                     thetabar)))
            return st;
    }
    return GMM_OK;
}

/* ---- reverse ------------------------------------------------------------------ */

/* Gradient through the time-varying observation rows (Fisher's identity):
 * dlogp/dh_r = [(y_r - h_r' mu_s) mu_s - Sigma_ss h_r] / noise for row r
 * reading state s, mu and Sigma the posterior mean and covariance. */
static gmm_status obs_grad(gmm_ssm *m, double *grad)
{
    gmm_status st;
    size_t d = m->d;
    double noise = m->noise, *Hb = m->T, *Sh = m->T + d, *Hk = m->T + 2 * d;
    if ((st = gmm_marglik_posterior(m->mw, m->mu, m->cov)))
        return st;
    for (size_t o = 0; o < m->nobs;) {
        size_t sk = m->obs_off[o] / d, b = sk * d;
        const double *h = m->Hobs + o * d, *mu = m->mu + b;
        for (size_t i = 0; i < d; i++) {
            double v = 0.0;
            for (size_t j = 0; j < d; j++)
                v += gmm_band_get(m->cov, b + i, b + j) * h[j];
            Sh[i] = v;
        }
        md_zero(d, Hb);
        for (; o < m->nobs && m->obs_off[o] == b; o++) {
            double r = m->obs_y[o] - md_dot(d, h, mu);
            for (size_t i = 0; i < d; i++)
                Hb[i] += (r * mu[i] - Sh[i]) / noise;
        }
        for (size_t p = 0; p < d; p++) /* band order -> kernel order */
            Hk[m->perm[p]] = Hb[p];
        if ((st = gmm_kernel_obs_rev(m->k, m->kw, m->t[sk] - m->t[0], Hk, grad)))
            return st;
    }
    return GMM_OK;
}

/* Add a run of summed state columns (template layout, groups g1, g2) into
 * the group sums: its D part, as a full symmetric gradient (stored
 * off-diagonals halved into both triangles), to S1[g1] (Pbar0 for the first
 * state) and S2[g2]; its B part to S3[g2]. */
static void flush_run(gmm_ssm *m, size_t g1, size_t g2, const double *run, double *Pbar0)
{
    size_t d = m->d, ld = m->kl + 1;
    const size_t *P = m->perm;
    double *S1 = g1 < m->ng ? blk(m, g1, B_S1) : Pbar0;
    double *S2 = g2 < m->ng ? blk(m, g2, B_S2) : NULL;
    double *S3 = g2 < m->ng ? blk(m, g2, B_S3) : NULL;
    for (size_t j = 0; j < d; j++) {
        const double *c = run + j * ld;
        size_t pj = P[j];
        S1[pj * d + pj] += c[0];
        if (S2)
            S2[pj * d + pj] += c[0];
        for (size_t i = j + 1; i < d; i++) {
            double v = 0.5 * c[i - j];
            size_t pi = P[i];
            S1[pi * d + pj] += v;
            S1[pj * d + pi] += v;
            if (S2) {
                S2[pi * d + pj] += v;
                S2[pj * d + pi] += v;
            }
        }
        /* B entries beyond the band are structurally zero (BLOCKS): no
         * gradient to pass on */
        for (size_t i = 0; S3 && i < d && d - j + i < ld; i++)
            S3[P[i] * d + pj] += c[d - j + i];
    }
}

/* One interval group's gradient (formulas in the file comment) block by
 * block, then the kernel's reverse mode.  Abar, Qbar: d x d scratch. */
static gmm_status group_grad(gmm_ssm *m, size_t g, double ldbar, double *Qbar, double *Abar,
                             double *grad)
{
    gmm_status st;
    size_t d = m->d;
    md_zero(d * d, Abar);
    md_zero(d * d, Qbar);
    for (size_t b = 0; b < m->nb; b++) {
        const size_t *idx = m->perm + m->boff[b];
        size_t s = m->boff[b + 1] - m->boff[b], ss = s * s;
        double *A = m->bs, *W = A + ss, *WA = W + ss, *S1 = WA + ss, *S2 = S1 + ss;
        double *S3 = S2 + ss, *G = S3 + ss, *Wb = G + ss, *Ab = Wb + ss, *T = Ab + ss;
        ssm_gather(d, blk(m, g, B_A), idx, s, A);
        ssm_gather(d, blk(m, g, B_W), idx, s, W);
        ssm_gather(d, blk(m, g, B_WA), idx, s, WA);
        ssm_gather(d, blk(m, g, B_S1), idx, s, S1);
        ssm_gather(d, blk(m, g, B_S2), idx, s, S2);
        ssm_gather(d, blk(m, g, B_S3), idx, s, S3);
        /* Wbar = S1 + A S2 A' - S3 A' */
        md_gemm(s, 0, 0, 1.0, A, S2, 0.0, G);
        memcpy(Wb, S1, ss * sizeof *Wb);
        md_gemm(s, 0, 1, 1.0, G, A, 1.0, Wb);
        md_gemm(s, 0, 1, -1.0, S3, A, 1.0, Wb);
        /* Abar = 2 W A S2 - W S3 */
        md_gemm(s, 0, 0, 2.0, WA, S2, 0.0, Ab);
        md_gemm(s, 0, 0, -1.0, W, S3, 1.0, Ab);
        /* Qbar = -W Wbar W - ldbar count W (into G) */
        md_gemm(s, 0, 0, 1.0, W, Wb, 0.0, T);
        md_gemm(s, 0, 0, -1.0, T, W, 0.0, G);
        md_axpy(ss, -ldbar * (double)m->gcount[g], W, G);
        ssm_scatter(d, Abar, idx, s, Ab);
        ssm_scatter(d, Qbar, idx, s, G);
    }
    if ((st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], NULL, NULL)))
        return st;
    return gmm_kernel_rev(m->k, m->kw, Abar, Qbar, NULL, grad);
}

/* thetabar += the chain of Qb (dlogp/dQ_prior on the stored slots) and of
 * ldbar * d log|Q_prior| through the blocks to the kernel parameters. */
static gmm_status prior_rev(gmm_ssm *m, const gmm_band *Qb, double ldbar, double *grad)
{
    gmm_status st;
    size_t d = m->d, dd = d * d, K = m->K, ld = m->kl + 1;
    for (size_t g = 0; g < m->ng; g++) {
        md_zero(dd, blk(m, g, B_S1));
        md_zero(dd, blk(m, g, B_S2));
        md_zero(dd, blk(m, g, B_S3));
    }
    double *G = m->T, *Pbar = m->T + dd, *Wbar = m->T + 2 * dd, *Abar = m->T + 3 * dd;
    double *run = m->tpl;
    md_zero(dd, Pbar);
    /* Sum the state columns over runs of states with the same pair of
     * groups (one run for the interior of a regular grid), so the per-state
     * work is one vector addition of the columns. */
    size_t key1 = SIZE_MAX, key2 = SIZE_MAX;
    for (size_t k = 0; k < K; k++) {
        size_t g1 = key_before(m, k), g2 = key_after(m, k);
        if (g1 != key1 || g2 != key2) {
            if (k > 0)
                flush_run(m, key1, key2, run, Pbar);
            md_zero(d * ld, run);
            key1 = g1;
            key2 = g2;
        }
        if ((st = gmm_band_cols_acc(Qb, k * d, d, run, ld)))
            return st;
    }
    flush_run(m, key1, key2, run, Pbar);
    for (size_t g = 0; g < m->ng; g++)
        if ((st = group_grad(m, g, ldbar, Wbar, Abar, grad)))
            return st;
    /* Pinf: W0 = Pinf^-1 gives -W0 Gd_0 W0; ldbar log|Q_prior| gives -ldbar W0 */
    md_gemm(d, 0, 0, 1.0, m->W0, Pbar, 0.0, G);
    md_gemm(d, 0, 0, -1.0, G, m->W0, 0.0, Pbar);
    md_axpy(dd, -ldbar, m->W0, Pbar);
    return gmm_kernel_rev(m->k, m->kw, NULL, NULL, Pbar, grad);
}

gmm_status gmm_ssm_prior_rev(gmm_ssm *m, const gmm_band *Qbar, double logdetbar,
                             double *thetabar)
{
    if (!m || !Qbar || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_prior_rev: NULL argument");
    if (!m->prior_ok)
        return gmm_error(GMM_EINVAL, "gmm_ssm_prior_rev: no gmm_ssm_prior before");
    if (Qbar->n != m->N || Qbar->kl < m->kl || Qbar->kind != GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gmm_ssm_prior_rev: Qbar must be SYMMETRIC %zu x %zu with "
                                   "bandwidth >= %zu",
                         m->N, m->N, m->kl);
    if (Qbar->kl != m->kl) {
        /* the column template reads exactly kl + 1 slots per column */
        return gmm_error(GMM_EDIM, "gmm_ssm_prior_rev: Qbar's bandwidth %zu is not the model's "
                                   "%zu",
                         Qbar->kl, m->kl);
    }
    return prior_rev(m, Qbar, logdetbar, thetabar);
}

/* ROWS GRADIENT (the square-root form).  By Fisher's identity dlogp/dtheta
 * = E[d log p(x, y | theta)/dtheta] under the posterior, and in the rows
 * of the square root the prior term of interval k is
 *
 *   -1/2 log|Q_k| - 1/2 |v|^2,   v = C (x_{k+1} - A x_k),  C = chol(Q_k)^-1,
 *
 * (x held fixed), so with the row moments of marglik.h -- S = E[v v'] - I
 * and E[v x_k'] summed over the intervals of a group -- the group's
 * full-matrix gradients are
 *
 *   Qbar = 1/2 C' S C,      Abar = C' E[v x_k'],
 *
 * and Pbar = 1/2 C0' S_0 C0 for the first d rows (v = C0 x_0).  Every
 * factor is whitened: S and E[v x_k'] are of order 1 and computed from the
 * fold's orthogonal map (marglik.c, ROW MOMENTS), C' S C multiplies
 * C's huge entries into Qbar, but gmm_kernel_rev takes sum Qbar .* dQ with
 * dQ as small, so nothing cancels.  The old chain -- dlogp/dQ_prior =
 * -(Sigma + mu mu')/2 through W = Q^-1, W A, A'WA -- formed S as C (Sigma_
 * {k+1,k+1} - A Sigma_{k,k+1} - ...) C', a difference of entries of Sigma
 * each rounded to eps |Sigma|, amplified by |C|^2 ~ (l/dt)^(2 nu)
 * (tests/bench/bench_ssm_accuracy.c, Table 4).  Both are block-diagonal
 * (BLOCKS): only the entries within p's block are gathered. */
/* xn = A x + L v on lanes (d rows each, lw lanes): A (NULL: none, x
 * unread) and L = chol(Q) or chol(Pinf), band order, block-diagonal (L
 * lower, zero above its diagonal), so block by block.  Products with L's
 * small entries, never a solve with C = L^-1's large ones. */
static void lanes_next_state(const gmm_ssm *m, const double *A, const double *L,
                             const double *x, const double *v, size_t lw, double *xn)
{
    if (A)
        gmm_band_lanes_mix_blocks(lw, m->nb, m->boff, A, m->d, x, L, m->d, v, xn);
    else
        gmm_band_lanes_mix_blocks(lw, m->nb, m->boff, L, m->d, v, NULL, 0, NULL, xn);
}

static gmm_status rows_moments_cb(void *ctx, const gmm_rows_moments *mo)
{
    gmm_ssm *m = ctx;
    const gmm_band_block_moments *bm = &mo->lanes;
    size_t d = m->d, dd = d * d, lw = bm->lw, k0 = mo->row0 / d, nk = mo->nrows / d;
    size_t sd = d * lw; /* one interval's rows, or one state's lanes */
    /* a block holds the rows of whole intervals k0 - 1 .. (the first d rows:
     * v = C0 x_0, "interval -1"), merged (marglik.c, segment_fits); J is the
     * state the first of them leaves, and each later one's state follows
     * from the rows before it: x_{k+1} = A x_k + C^-1 v_k (lanes are linear
     * in the rows, and no two of these rows are the same) */
    if (mo->row0 % d != 0 || mo->nrows % d != 0 || nk == 0 ||
        (k0 > 0 && (mo->col0 > (k0 - 1) * d || mo->col0 + mo->ncols < k0 * d)))
        return gmm_error(GMM_EINVAL, "internal: the row moments of intervals from %zu are not "
                                     "whole intervals",
                         k0);
    if (m->xlcap < nk * sd) {
        double *b = gmm_realloc(m->xl, nk * sd, sizeof *b);
        if (!b)
            return gmm_error(GMM_ENOMEM, "out of memory for the row moments");
        m->xl = b;
        m->xlcap = nk * sd;
    }
    /* every interval's state x_k as lanes, xl + t sd (x_0's slot unused for
     * k0 = 0): J's for the first, then chol(Pinf) v for k = 0, else
     * A x_{k-1} + chol(Q) v */
    if (k0 > 0)
        memcpy(m->xl, bm->xj + ((k0 - 1) * d - mo->col0) * lw, sd * sizeof *m->xl);
    for (size_t t = 0; t + 1 < nk; t++) {
        size_t k = k0 + t;
        const double *v = bm->rows + t * sd;
        if (k == 0) {
            lanes_next_state(m, NULL, m->L0, NULL, v, lw, m->xl + sd);
        } else {
            size_t g = m->ig[k - 1];
            lanes_next_state(m, blk(m, g, B_AB), blk(m, g, B_L), m->xl + t * sd, v, lw,
                             m->xl + (t + 1) * sd);
        }
    }
    /* summed over each run of intervals of one group ("interval -1" alone),
     * within each block (BLOCKS): S = E[v v'] - I whole, E = E[v x_k'] */
    size_t t = 0;
    if (k0 == 0) {
        gmm_band_moment_gram_blocks(bm, m->nb, m->boff, bm->rows, bm->rows, sd, 1,
                                    m->T + 3 * dd, d);
        t = 1;
    }
    while (t < nk) {
        size_t g = m->ig[k0 + t - 1], t1 = t + 1;
        while (t1 < nk && m->ig[k0 + t1 - 1] == g)
            t1++;
        const double *v = bm->rows + t * sd, *xk = m->xl + t * sd;
        gmm_band_moment_gram_blocks(bm, m->nb, m->boff, v, v, sd, t1 - t, blk(m, g, B_S1), d);
        gmm_band_moment_gram_blocks(bm, m->nb, m->boff, v, xk, sd, t1 - t, blk(m, g, B_S2), d);
        t = t1;
    }
    return GMM_OK;
}

/* out (kernel order) += scale C' X (band order, C and X block-diagonal: the
 * product by blocks). */
static void blocks_ct_x(const gmm_ssm *m, const double *C, const double *X, double scale,
                        double *out)
{
    size_t d = m->d;
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) {
            if (m->rowstart[i] != m->rowstart[j])
                continue;
            double t = 0.0;
            for (size_t l = m->rowstart[i]; l < d && m->rowstart[l] == m->rowstart[i]; l++)
                t += C[l * d + i] * X[l * d + j];
            out[m->perm[i] * d + m->perm[j]] += scale * t;
        }
}

/* out (kernel order) += 1/2 C' S C (band order, C and S block-diagonal). */
static void whitened_to_kernel(const gmm_ssm *m, const double *C, const double *S,
                               double *T, double *out)
{
    md_gemm(m->d, 0, 0, 1.0, S, C, 0.0, T); /* S C */
    blocks_ct_x(m, C, T, 0.5, out);
}

/* Zero the row moments' sums: per group S1, S2, and S0 (m->T + 3 d^2). */
static void moments_zero(gmm_ssm *m)
{
    size_t dd = m->d * m->d;
    for (size_t g = 0; g < m->ng; g++) {
        md_zero(dd, blk(m, g, B_S1));
        md_zero(dd, blk(m, g, B_S2));
    }
    md_zero(dd, m->T + 3 * dd);
}

gmm_status ssm_rows_moments(gmm_ssm *m, double *noisebar)
{
    moments_zero(m);
    return gmm_marglik_rows_moments(m->mw, rows_moments_cb, m, noisebar);
}

/* grad += the chain of the summed row moments (S1, S2 per group, S0) to
 * the kernel parameters: Qbar = C' S C / 2, Abar = C' E, Pbar = C0' S0 C0 /
 * 2 through gmm_kernel_rev. */
gmm_status ssm_rows_chain(gmm_ssm *m, double *grad)
{
    gmm_status st;
    size_t dd = m->d * m->d;
    double *Qb = m->T, *Ab = m->T + dd, *Tm = m->T + 2 * dd, *S0 = m->T + 3 * dd;
    for (size_t g = 0; g < m->ng; g++) {
        const double *C = blk(m, g, B_C), *E = blk(m, g, B_S2);
        md_zero(dd, Qb);
        md_zero(dd, Ab);
        whitened_to_kernel(m, C, blk(m, g, B_S1), Tm, Qb);
        blocks_ct_x(m, C, E, 1.0, Ab); /* Abar = C' E */
        if ((st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], NULL, NULL)) ||
            (st = gmm_kernel_rev(m->k, m->kw, Ab, Qb, NULL, grad)))
            return st;
    }
    md_zero(dd, Qb);
    whitened_to_kernel(m, m->C0, S0, Tm, Qb);
    return gmm_kernel_rev(m->k, m->kw, NULL, NULL, Qb, grad);
}

static gmm_status rows_grad(gmm_ssm *m, double *grad, double *noisebar)
{
    gmm_status st;
    double nb = 0.0;
    if ((st = ssm_rows_moments(m, &nb)))
        return st;
    if (noisebar)
        *noisebar = nb;
    return ssm_rows_chain(m, grad);
}

gmm_status gmm_ssm_prior_rows_rev_moments(gmm_ssm *m, const double *Svv, const double *Svx,
                                          double *thetabar)
{
    gmm_status st;
    double ld;
    if (!m || !Svv || !Svx || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_prior_rows_rev_moments: NULL argument");
    if (!m->rready)
        return gmm_error(GMM_EINVAL, "gmm_ssm_prior_rows_rev_moments: no successful "
                                     "gmm_ssm_prior_rows before");
    size_t d = m->d, dd = d * d;
    /* C and C0 at the rows' theta (other calls may have moved the blocks;
     * the same theta gives the same blocks, so G stays valid) */
    m->prior_ok = 0;
    if ((st = ssm_blocks(m, m->rtheta, &ld)))
        return st;
    moments_zero(m);
    double *S0 = m->T + 3 * dd;
    for (size_t i = 0; i < dd; i++)
        S0[i] = Svv[i] - (i % (d + 1) == 0 ? 1.0 : 0.0);
    for (size_t k = 0; k + 1 < m->K; k++) {
        size_t g = m->ig[k];
        const double *sv = Svv + (k + 1) * dd, *sx = Svx + (k + 1) * dd;
        double *S1 = blk(m, g, B_S1), *S2 = blk(m, g, B_S2);
        for (size_t i = 0; i < dd; i++) {
            S1[i] += sv[i] - (i % (d + 1) == 0 ? 1.0 : 0.0);
            S2[i] += sx[i];
        }
    }
    return ssm_rows_chain(m, thetabar);
}

static gmm_status ssm_grad(gmm_ssm *m, double *grad, double *noisebar)
{
    gmm_status st;
    const gmm_band *Qb;
    double nb = 0.0;
    if (m->rows) {
        for (size_t i = 0; i < m->np; i++)
            grad[i] = 0.0;
        if ((st = rows_grad(m, grad, noisebar)))
            return st;
        return m->modulated ? obs_grad(m, grad) : GMM_OK;
    }
    if ((st = gmm_marglik_grad_view(m->mw, &Qb, &nb)))
        return st;
    for (size_t i = 0; i < m->np; i++)
        grad[i] = 0.0;
    if (noisebar)
        *noisebar = nb;
    if ((st = prior_rev(m, Qb, 0.5, grad)))
        return st;
    return m->modulated ? obs_grad(m, grad) : GMM_OK;
}

gmm_status gmm_ssm_loglik(gmm_ssm *m, const double *theta, double noise, double *loglik,
                          double *grad, double *noisebar)
{
    if (!m || !theta || !loglik)
        return gmm_error(GMM_EINVAL, "gmm_ssm_loglik: NULL argument");
    m->prior_ok = 0;
    m->lblocks = 0;
    gmm_status st = ssm_forward(m, theta, noise, loglik, grad != NULL || noisebar != NULL);
    if (st || (!grad && !noisebar))
        return st;
    if (!grad)
        return gmm_error(GMM_EINVAL, "gmm_ssm_loglik: noisebar without grad");
    return ssm_grad(m, grad, noisebar);
}
