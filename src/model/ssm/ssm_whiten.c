/* ssm_whiten.c -- the innovations form of the state-space prior (ssm.h,
 * WHITENING): x = W v, u = W' g and the reverse mode of x in theta.
 *
 * FORWARD.  In band order (BLOCKS), per interval k with group g = ig[k],
 *
 *   x_0 = L0 v_0,   x_{k+1} = A_g x_k + L_g v_{k+1},
 *
 * L0 = chol(Pinf), L_g = chol(Q_g), A_g, L_g block-diagonal: row p of a
 * state reads the positions of its own block, so a state costs sum over
 * blocks of 3 s^2 / 2 flops, O(kl) per variable.  W^-1 is block lower
 * bidiagonal (the square root's rows, ssm_rows.c), and W W' = Q_prior^-1
 * exactly whatever the spacing: no inverse of a Q_k and no Cholesky of the
 * assembled precision, hence no spacing limit (chol(Q_k) of a tiny Q_k is
 * accurate: the kernels form Q_k without the cancellation of Pinf - A Pinf
 * A').
 *
 * ADJOINT (whiten_t, and the reverse sweep).  With lam_k = dc/dx_k for c =
 * g . x (all later states included),
 *
 *   lam_{K-1} = g_{K-1},  lam_k = g_k + A_k' lam_{k+1},
 *   u_{k+1} = L_k' lam_{k+1},  u_0 = L0' lam_0.
 *
 * REVERSE (whiten_rev, c = xbar . W(theta) v).  The same recursion with g =
 * xbar gives the full-matrix gradients
 *
 *   Abar_g = sum_{k in g} lam_{k+1} x_k',   Lbar_g = sum_{k in g} lam_{k+1} v_{k+1}',
 *   L0bar = lam_0 v_0'
 *
 * (on the blocks; Lbar on their lower triangles), x from a forward pass.
 * Then Qbar_g from Lbar_g by the Cholesky's reverse mode (md_chol_rev,
 * Murray 2016), Pbar from L0bar likewise, and gmm_kernel_rev per group
 * (after gmm_kernel_disc at its dt) and once for Pbar, after gmm_kernel_stat
 * at the setup's theta.  Forward saves: per group A and L in band order, L0,
 * theta; whiten its v and x and whiten_t every lam_k, which whiten_rev reuses
 * when called for them (v, xbar NULL) instead of running the recursions
 * again.
 */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/ssm.h"
#include "../model_dense.h"

#include "ssm_impl.h"

/* The whitening workspace (ssm_impl.h), once. */
static gmm_status whiten_alloc(gmm_ssm *m)
{
    if (m->wbuf)
        return GMM_OK;
    size_t d = m->d, dd = d * d, gd = m->ng * dd;
    m->wbuf = gmm_calloc(4 * gd + 2 * dd + 4 * m->N + 2 * d + (m->np ? m->np : 1),
                         sizeof *m->wbuf);
    if (!m->wbuf)
        return gmm_error(GMM_ENOMEM, "out of memory for the whitening workspace (%zu intervals "
                                     "of %zu x %zu)",
                         m->ng, d, d);
    m->wA = m->wbuf;
    m->wL = m->wA + gd;
    m->wAb = m->wL + gd;
    m->wLb = m->wAb + gd;
    m->wL0 = m->wLb + gd;
    m->wL0b = m->wL0 + dd;
    m->wx = m->wL0b + dd;
    m->wsv = m->wx + m->N;
    m->wsx = m->wsv + m->N;
    m->wslam = m->wsx + m->N;
    m->wlam = m->wslam + m->N;
    m->wtheta = m->wlam + 2 * d;
    return GMM_OK;
}

/* out (band order, d x d) gets block b of M (kernel order): positions o ..
 * o + s - 1 hold variables perm[o ..]; chol: its lower Cholesky factor
 * (nonzero return: not positive definite).  bs scratch. */
static int block_to_band(const gmm_ssm *m, size_t b, const double *M, int chol, double *out)
{
    size_t d = m->d, o = m->boff[b], s = m->boff[b + 1] - o;
    double *B = m->bs;
    ssm_gather(d, M, m->perm + o, s, B);
    if (chol && md_chol(s, B))
        return 1;
    for (size_t i = 0; i < s; i++)
        memcpy(out + (o + i) * d + o, B + i * s, s * sizeof *B);
    return 0;
}

gmm_status gmm_ssm_whiten_setup(gmm_ssm *m, const double *theta)
{
    gmm_status st;
    if (!m || !theta)
        return gmm_error(GMM_EINVAL, "gmm_ssm_whiten_setup: NULL argument");
    if ((st = whiten_alloc(m)))
        return st;
    size_t d = m->d, dd = d * d;
    double *A = m->T, *Q = m->T + dd;
    m->wready = 0;
    m->wsx_ok = m->wslam_ok = 0;
    m->prior_ok = 0; /* the kernel's workspace moves to theta */
    m->lblocks = 0;
    if ((st = gmm_kernel_stat(m->k, theta, m->damp, m->kw, Q, NULL)))
        return st;
    for (size_t b = 0; b < m->nb; b++)
        if (block_to_band(m, b, Q, 1, m->wL0))
            return gmm_error(GMM_ENOTPD, "stationary covariance Pinf is not positive definite "
                                        "at these parameters");
    for (size_t g = 0; g < m->ng; g++) {
        if ((st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], A, Q)))
            return st;
        for (size_t b = 0; b < m->nb; b++) {
            block_to_band(m, b, A, 0, m->wA + g * dd);
            if (block_to_band(m, b, Q, 1, m->wL + g * dd))
                return gmm_error(GMM_ENOTPD, "transition noise Q(dt = %g) is not positive "
                                             "definite at these parameters",
                                 m->gdt[g]);
        }
    }
    memcpy(m->wtheta, theta, m->np * sizeof *theta);
    m->wready = 1;
    return GMM_OK;
}

static gmm_status ready(const gmm_ssm *m, const char *fn)
{
    if (!m || !m->wready)
        return gmm_error(GMM_EINVAL, "%s: no successful gmm_ssm_whiten_setup before", fn);
    return GMM_OK;
}

/* x = W v (FORWARD).  Rows of a block from the last down, so that v may be x:
 * row p of state k reads v_k at positions <= p only. */
static void whiten_apply(const gmm_ssm *m, const double *v, double *x)
{
    size_t d = m->d, dd = d * d;
    for (size_t k = 0; k < m->K; k++) {
        const double *A = k ? m->wA + m->ig[k - 1] * dd : NULL;
        const double *L = k ? m->wL + m->ig[k - 1] * dd : m->wL0;
        const double *vk = v + k * d, *xp = k ? x + (k - 1) * d : NULL;
        double *xk = x + k * d;
        for (size_t b = 0; b < m->nb; b++) {
            size_t o = m->boff[b], e = m->boff[b + 1];
            for (size_t p = e; p-- > o;) {
                double s = 0.0;
                for (size_t q = o; q <= p; q++)
                    s += L[p * d + q] * vk[q];
                for (size_t q = o; A && q < e; q++)
                    s += A[p * d + q] * xp[q];
                xk[p] = s;
            }
        }
    }
}

/* y = M' z (+ y when acc) on the blocks, M d x d band order; lower: M is
 * lower triangular within each block. */
static void block_tmv(const gmm_ssm *m, const double *M, int lower, const double *z, double *y,
                      int acc)
{
    size_t d = m->d;
    for (size_t b = 0; b < m->nb; b++) {
        size_t o = m->boff[b], e = m->boff[b + 1];
        for (size_t q = o; q < e; q++) {
            double s = acc ? y[q] : 0.0;
            for (size_t p = lower ? q : o; p < e; p++)
                s += M[p * d + q] * z[p];
            y[q] = s;
        }
    }
}

/* M += a b' on the blocks (lower: on their lower triangles). */
static void block_outer(const gmm_ssm *m, const double *a, const double *bv, int lower,
                        double *M)
{
    size_t d = m->d;
    for (size_t b = 0; b < m->nb; b++) {
        size_t o = m->boff[b], e = m->boff[b + 1];
        for (size_t p = o; p < e; p++)
            for (size_t q = o; q < (lower ? p + 1 : e); q++)
                M[p * d + q] += a[p] * bv[q];
    }
}

gmm_status gmm_ssm_whiten(gmm_ssm *m, const double *v, double *x)
{
    gmm_status st = ready(m, "gmm_ssm_whiten");
    if (st)
        return st;
    if (!v || !x)
        return gmm_error(GMM_EINVAL, "gmm_ssm_whiten: NULL argument");
    /* v saved first: it may be x */
    memcpy(m->wsv, v, m->N * sizeof *v);
    whiten_apply(m, m->wsv, m->wsx);
    memcpy(x, m->wsx, m->N * sizeof *x);
    m->wsx_ok = 1;
    return GMM_OK;
}

gmm_status gmm_ssm_unwhiten(gmm_ssm *m, const double *x, double *v)
{
    gmm_status st = ready(m, "gmm_ssm_unwhiten");
    if (st)
        return st;
    if (!x || !v || x == v)
        return gmm_error(GMM_EINVAL, "gmm_ssm_unwhiten: NULL or aliased argument");
    size_t d = m->d, dd = d * d;
    /* v_k = L^-1 (x_k - A x_{k-1}), forward substitution block by block */
    for (size_t k = 0; k < m->K; k++) {
        const double *A = k ? m->wA + m->ig[k - 1] * dd : NULL;
        const double *L = k ? m->wL + m->ig[k - 1] * dd : m->wL0;
        const double *xk = x + k * d, *xp = k ? x + (k - 1) * d : NULL;
        double *vk = v + k * d;
        for (size_t b = 0; b < m->nb; b++) {
            size_t o = m->boff[b], e = m->boff[b + 1];
            for (size_t p = o; p < e; p++) {
                double r = xk[p];
                for (size_t q = o; A && q < e; q++)
                    r -= A[p * d + q] * xp[q];
                for (size_t q = o; q < p; q++)
                    r -= L[p * d + q] * vk[q];
                vk[p] = r / L[p * d + p];
            }
        }
    }
    return GMM_OK;
}

gmm_status gmm_ssm_whiten_t(gmm_ssm *m, const double *g, double *u)
{
    gmm_status st = ready(m, "gmm_ssm_whiten_t");
    if (st)
        return st;
    if (!g || !u)
        return gmm_error(GMM_EINVAL, "gmm_ssm_whiten_t: NULL argument");
    size_t d = m->d, dd = d * d;
    /* lam_k (read from g_k before u_k overwrites it), kept for whiten_rev */
    for (size_t k = m->K; k-- > 0;) {
        double *lam = m->wslam + k * d;
        memcpy(lam, g + k * d, d * sizeof *lam);
        if (k + 1 < m->K)
            block_tmv(m, m->wA + m->ig[k] * dd, 0, lam + d, lam, 1);
        block_tmv(m, k ? m->wL + m->ig[k - 1] * dd : m->wL0, 1, lam, u + k * d, 0);
    }
    m->wslam_ok = 1;
    return GMM_OK;
}

gmm_status gmm_ssm_whiten_rev(gmm_ssm *m, const double *v, const double *xbar,
                              double *thetabar)
{
    gmm_status st = ready(m, "gmm_ssm_whiten_rev");
    if (st)
        return st;
    if (!thetabar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_whiten_rev: NULL argument");
    if (!v && !m->wsx_ok)
        return gmm_error(GMM_EINVAL, "gmm_ssm_whiten_rev: v NULL without a gmm_ssm_whiten "
                                     "since the setup");
    if (!xbar && !m->wslam_ok)
        return gmm_error(GMM_EINVAL, "gmm_ssm_whiten_rev: xbar NULL without a gmm_ssm_whiten_t "
                                     "since the setup");
    size_t d = m->d, dd = d * d, K = m->K;
    double *x = m->wsx, *lam = m->wlam, *nxt = m->wlam + d;
    if (v) {
        x = m->wx;
        whiten_apply(m, v, x);
    } else {
        v = m->wsv;
    }
    md_zero(m->ng * dd, m->wAb);
    md_zero(m->ng * dd, m->wLb);
    md_zero(dd, m->wL0b);
    /* backward sweep (REVERSE): lk = lam_k, from xbar or as whiten_t left it */
    const double *lk = m->wslam + (K - 1) * d;
    if (xbar) {
        memcpy(lam, xbar + (K - 1) * d, d * sizeof *lam);
        lk = lam;
    }
    for (size_t k = K - 1; k > 0; k--) {
        size_t g = m->ig[k - 1];
        block_outer(m, lk, x + (k - 1) * d, 0, m->wAb + g * dd);
        block_outer(m, lk, v + k * d, 1, m->wLb + g * dd);
        if (xbar) {
            memcpy(nxt, xbar + (k - 1) * d, d * sizeof *nxt);
            block_tmv(m, m->wA + g * dd, 0, lam, nxt, 1);
            memcpy(lam, nxt, d * sizeof *lam);
        } else {
            lk = m->wslam + (k - 1) * d;
        }
    }
    block_outer(m, lk, v, 1, m->wL0b);

    /* to the kernel parameters, block by block: Abar and Qbar in kernel order */
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = gmm_kernel_stat(m->k, m->wtheta, m->damp, m->kw, NULL, NULL)))
        return st;
    double *Abar = m->T, *Qbar = m->T + dd;
    for (size_t g = 0; g <= m->ng; g++) {
        /* g == ng: Pinf */
        const double *L = g < m->ng ? m->wL + g * dd : m->wL0;
        const double *Lb = g < m->ng ? m->wLb + g * dd : m->wL0b;
        md_zero(dd, Abar);
        md_zero(dd, Qbar);
        for (size_t b = 0; b < m->nb; b++) {
            size_t o = m->boff[b], s = m->boff[b + 1] - o, ss = s * s;
            const size_t *idx = m->perm + o;
            double *Lk = m->bs, *Lkb = Lk + ss, *Qk = Lkb + ss, *X = Qk + ss;
            for (size_t i = 0; i < s; i++) {
                memcpy(Lk + i * s, L + (o + i) * d + o, s * sizeof *Lk);
                memcpy(Lkb + i * s, Lb + (o + i) * d + o, s * sizeof *Lkb);
            }
            md_zero(ss, Qk);
            md_chol_rev(s, Lk, Lkb, Qk, X);
            ssm_scatter(d, Qbar, idx, s, Qk);
            if (g < m->ng) {
                const double *Ab = m->wAb + g * dd;
                for (size_t i = 0; i < s; i++)
                    for (size_t j = 0; j < s; j++)
                        Abar[idx[i] * d + idx[j]] = Ab[(o + i) * d + o + j];
            }
        }
        if (g == m->ng)
            st = gmm_kernel_rev(m->k, m->kw, NULL, NULL, Qbar, thetabar);
        else if (!(st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], NULL, NULL)))
            st = gmm_kernel_rev(m->k, m->kw, Abar, Qbar, NULL, thetabar);
        if (st)
            return st;
    }
    return GMM_OK;
}
