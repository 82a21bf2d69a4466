/* ssm_rows.c -- the square root of the state-space prior precision (ssm.h,
 * SQUARE ROOT): the rows G with Q_prior = G'G, and their reverse mode in
 * theta.  The forward blocks are ssm_prior.c's (group_forward: C = chol(Q)^-1
 * and C A per interval group, C0 = chol(Pinf)^-1), the row reader its
 * ssm_prior_row.
 *
 * LAYOUT.  Q_prior = G'G for the N rows, in band order (ssm.c, BLOCKS),
 *
 *   rows 0 .. d - 1:          C0 x_0,                 C0 = chol(Pinf)^-1,
 *   rows (k + 1) d + p:       row p of C_k (x_{k+1} - A_k x_k),
 *                             C_k = chol(Q_k)^-1  (k = 0 .. K - 2),
 *
 * chol the lower Cholesky factor of each block, so C0, C_k and C_k A_k are
 * block-diagonal.  Row p < d has its p + 1 entries C0(p, 0 .. p) from column
 * 0; row (k + 1) d + p, with o the first position of p's block, has d - o + p
 * + 1 <= kl + 1 entries from column k d + o: -(C_k A_k)(p, o .. d - 1), then
 * C_k(p, 0 .. p) (entries off p's block are written, as zeros).  First
 * columns are nondecreasing (marglik.h's gmm_prior_rows contract).
 *
 * REVERSE (gmm_ssm_prior_rows_rev, c = sum Gbar . G + ldbar log|Q_prior|).
 * Row p < d holds C0(p, 0 .. p); row (k + 1) d + p holds -(C A)_g(p, o ..
 * d - 1) then C_g(p, 0 .. p), g the group of interval k (ssm.h).  One pass
 * over the rows sums the entries' adjoints into C0bar and, per group, Cbar
 * and (C A)bar (band order).  Then per group and block (BLOCKS: everything
 * below is block-diagonal, off-block entries are structural zeros whose
 * adjoints are dropped), with L = chol(Q_g), C = L^-1:
 *
 *   Abar  = C' (C A)bar,                 from C A = C A,
 *   Cbar += (C A)bar A',                 the same product,
 *   Lbar  = -C' tril(Cbar) C'            from dC = -C dL C (dL, dC lower:
 *                                        only tril(Cbar) and tril(Lbar) count),
 *   Qbar  = chol_rev(L, Lbar) - ldbar count_g C'C
 *
 * (md_chol_rev, Murray 2016; the last term from log|Q_prior| = -log|Pinf| -
 * sum_k log|Q_k|, d log|Q|/dQ = Q^-1 = C'C), and likewise Pbar =
 * chol_rev(L0, -C0' tril(C0bar) C0') - ldbar C0'C0.  Abar, Qbar go to kernel
 * order and through gmm_kernel_rev after gmm_kernel_disc at the group's dt,
 * Pbar through gmm_kernel_rev after gmm_kernel_stat.
 *
 * Forward saves: theta only.  The reverse sweep recomputes A, Q and their
 * block Cholesky factors from the kernel (the same O(d^3) per group as the
 * sweep itself), so it holds whatever runs on the model in between and
 * leaves the blocks that G reads untouched.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/ssm.h"
#include "../model_dense.h"

#include "ssm_impl.h"

/* The reverse mode's workspace (ssm_impl.h), once. */
static gmm_status rows_alloc(gmm_ssm *m)
{
    if (m->rbuf)
        return GMM_OK;
    size_t dd = m->d * m->d, gd = m->ng * dd;
    m->rbuf = gmm_calloc(2 * gd + dd + (m->np ? m->np : 1), sizeof *m->rbuf);
    if (!m->rbuf)
        return gmm_error(GMM_ENOMEM, "out of memory for the square root's workspace (%zu "
                                     "intervals of %zu x %zu)",
                         m->ng, m->d, m->d);
    m->rCb = m->rbuf;
    m->rCAb = m->rCb + gd;
    m->rC0b = m->rCAb + gd;
    m->rtheta = m->rC0b + dd;
    return GMM_OK;
}

gmm_status gmm_ssm_prior_rows(gmm_ssm *m, const double *theta, gmm_prior_rows *G,
                              double *logdet)
{
    gmm_status st;
    double ld;
    if (!m || !theta || !G)
        return gmm_error(GMM_EINVAL, "gmm_ssm_prior_rows: NULL argument");
    m->rready = 0;
    if ((st = rows_alloc(m)))
        return st;
    m->prior_ok = 0; /* the blocks and the kernel's workspace move to theta */
    m->lblocks = 0;
    if ((st = ssm_blocks(m, theta, &ld)))
        return st;
    memcpy(m->rtheta, theta, m->np * sizeof *theta);
    m->rcur.m = m;
    m->rcur.next = SIZE_MAX;
    m->rcur.k = m->rcur.p = 0;
    G->nrows = m->N;
    G->row = ssm_prior_row;
    G->ctx = &m->rcur;
    G->block_start = NULL; /* the fold's segments are the likelihood's own (ssm_prior.c) */
    G->rows = NULL;
    if (logdet)
        *logdet = ld;
    m->rready = 1;
    return GMM_OK;
}

/* The adjoints of the rows' entries summed into C0bar and per group into
 * Cbar, (C A)bar (band order; off-block entries collected too, and never
 * read). */
static void gather_rows(gmm_ssm *m, const double *Gbar)
{
    size_t d = m->d, dd = d * d, ld = m->kl + 1;
    md_zero(m->ng * dd, m->rCb);
    md_zero(m->ng * dd, m->rCAb);
    md_zero(dd, m->rC0b);
    for (size_t p = 0; p < d; p++)
        for (size_t q = 0; q <= p; q++)
            m->rC0b[p * d + q] += Gbar[p * ld + q];
    for (size_t k = 0; k + 1 < m->K; k++) {
        size_t g = m->ig[k];
        double *Cb = m->rCb + g * dd, *CAb = m->rCAb + g * dd;
        for (size_t p = 0; p < d; p++) {
            const double *gb = Gbar + ((k + 1) * d + p) * ld;
            size_t w = 0;
            for (size_t q = m->rowstart[p]; q < d; q++)
                CAb[p * d + q] -= gb[w++];
            for (size_t q = 0; q <= p; q++)
                Cb[p * d + q] += gb[w++];
        }
    }
}

/* Block b (s x s at band positions o ..) of a band-order d x d matrix, with
 * its strict upper triangle zeroed when lower. */
static void band_block(const gmm_ssm *m, size_t b, const double *M, int lower, double *out)
{
    size_t d = m->d, o = m->boff[b], s = m->boff[b + 1] - o;
    for (size_t i = 0; i < s; i++)
        for (size_t j = 0; j < s; j++)
            out[i * s + j] = lower && j > i ? 0.0 : M[(o + i) * d + o + j];
}

/* One block's chain (REVERSE): from Q (kernel order, block b gathered), the
 * adjoint Cbar (s x s, overwritten) and, for a transition, A and (C A)bar
 * (kernel order / s x s; NULL for Pinf), add Qbar (and Abar) of the block
 * into the kernel-order Qbar_k (and Abar_k); wld = ldbar count.  Returns
 * nonzero when the block of Q is not positive definite. */
static int block_rev(gmm_ssm *m, size_t b, const double *Q, const double *A, double *Cb,
                     const double *CAb, double wld, double *Qbar_k, double *Abar_k)
{
    size_t d = m->d, o = m->boff[b], s = m->boff[b + 1] - o, ss = s * s;
    const size_t *idx = m->perm + o;
    /* bs holds 10 smax^2: L, W = C'C, C, A, Qbar, then T, Abar (2 s^2 of
     * md_chol_rev's scratch once Abar is scattered) */
    double *L = m->bs, *W = L + ss, *C = W + ss, *Ab = C + ss, *Qb = Ab + ss;
    double *T = Qb + ss, *Abar = T + ss;
    ssm_gather(d, Q, idx, s, L);
    if (md_chol(s, L))
        return 1;
    md_chol_inverse(s, L, W, C); /* C = L^-1, W = C'C */
    if (A) {
        ssm_gather(d, A, idx, s, Ab);
        md_gemm(s, 1, 0, 1.0, C, CAb, 0.0, Abar); /* Abar = C' (C A)bar */
        for (size_t i = 0; i < s; i++)
            for (size_t j = 0; j < s; j++)
                Abar_k[idx[i] * d + idx[j]] += Abar[i * s + j];
        md_gemm(s, 0, 1, 1.0, CAb, Ab, 1.0, Cb); /* Cbar += (C A)bar A' */
    }
    for (size_t i = 0; i < s; i++) /* tril(Cbar) */
        for (size_t j = i + 1; j < s; j++)
            Cb[i * s + j] = 0.0;
    md_gemm(s, 1, 0, 1.0, C, Cb, 0.0, T);  /* T = C' Cbar */
    md_gemm(s, 0, 1, -1.0, T, C, 0.0, Cb); /* Lbar = -C' Cbar C' */
    md_zero(ss, Qb);
    md_chol_rev(s, L, Cb, Qb, T);
    md_axpy(ss, -wld, W, Qb);
    for (size_t i = 0; i < s; i++)
        for (size_t j = 0; j < s; j++)
            Qbar_k[idx[i] * d + idx[j]] += Qb[i * s + j];
    return 0;
}

gmm_status gmm_ssm_prior_rows_rev(gmm_ssm *m, const double *Gbar, double logdetbar,
                                  double *thetabar)
{
    gmm_status st;
    if (!m || !Gbar || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_prior_rows_rev: NULL argument");
    if (!m->rready)
        return gmm_error(GMM_EINVAL, "gmm_ssm_prior_rows_rev: no successful "
                                     "gmm_ssm_prior_rows before");
    size_t d = m->d, dd = d * d, smax = 0;
    for (size_t b = 0; b < m->nb; b++)
        if (m->boff[b + 1] - m->boff[b] > smax)
            smax = m->boff[b + 1] - m->boff[b];
    gather_rows(m, Gbar);
    /* T (4 d^2): Q or Pinf, A, Qbar or Pbar, Abar, all kernel order; the
     * per-block adjoints in bs after its 7 smax^2 (band_block's copies) */
    double *Q = m->T, *A = Q + dd, *Qbar = A + dd, *Abar = Qbar + dd;
    double *Cb = m->bs + 7 * smax * smax, *CAb = Cb + smax * smax;
    m->prior_ok = 0; /* the kernel's workspace moves */
    m->lblocks = 0;
    if ((st = gmm_kernel_stat(m->k, m->rtheta, m->damp, m->kw, Q, NULL)))
        return st;
    md_zero(dd, Qbar);
    for (size_t b = 0; b < m->nb; b++) {
        band_block(m, b, m->rC0b, 1, Cb);
        if (block_rev(m, b, Q, NULL, Cb, NULL, logdetbar, Qbar, NULL))
            return gmm_error(GMM_ENOTPD, "stationary covariance Pinf is not positive definite "
                                        "at these parameters");
    }
    if ((st = gmm_kernel_rev(m->k, m->kw, NULL, NULL, Qbar, thetabar)))
        return st;
    for (size_t g = 0; g < m->ng; g++) {
        if ((st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], A, Q)))
            return st;
        md_zero(dd, Qbar);
        md_zero(dd, Abar);
        double wld = logdetbar * (double)m->gcount[g];
        for (size_t b = 0; b < m->nb; b++) {
            band_block(m, b, m->rCb + g * dd, 1, Cb);
            band_block(m, b, m->rCAb + g * dd, 0, CAb);
            if (block_rev(m, b, Q, A, Cb, CAb, wld, Qbar, Abar))
                return gmm_error(GMM_ENOTPD, "transition noise Q(dt = %g) is not positive "
                                             "definite at these parameters",
                                 m->gdt[g]);
        }
        if ((st = gmm_kernel_rev(m->k, m->kw, Abar, Qbar, NULL, thetabar)))
            return st;
    }
    return GMM_OK;
}
