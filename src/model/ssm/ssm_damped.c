/* ssm_damped.c -- the damped blocks of a state-space model (ssm.h, DAMPED
 * BLOCKS): which blocks hold terms of damped zero-noise factors only, their
 * stationary variance, and the reverse mode through it.
 *
 * Such a block has A = rho I and Q = (1 - rho^2) Pinf with Pinf = p I on it
 * (kernel.h, gmm_kernel_var_damped; rho the damping's, not a parameter), so
 * its prior precision is R / p with R free of theta: a gradient in theta
 * reaches it through p alone.  That lets a caller whose posterior holds the
 * block beside other latents (a stacked latent) take the block's part of
 * Fisher's identity from E[x_b' Q_b x_b], which the identity tr(P Sigma) = n
 * gives from first-order quantities, instead of chaining Q_b's entries
 * (~ 1 / (p damp dt)) whose products with Sigma cancel to eps / (damp dt). */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/ssm.h"

#include "ssm_impl.h"

/* Structure checks: relative to the block's own entries. */
#define DAMPED_TOL 1e-10

size_t gmm_ssm_nblocks(const gmm_ssm *m) { return m ? m->nb : 0; }

size_t gmm_ssm_var_block(const gmm_ssm *m, size_t p)
{
    size_t b = 0;
    while (b + 1 < m->nb && m->boff[b + 1] <= p)
        b++;
    return b;
}

/* The damped blocks' flags (m->dblk, nb), found once: the structure is
 * the kernel's, the same at every theta (kernel.h, gmm_kernel_var_damped),
 * checked here at the first theta -- Pinf = p I, and every interval's A =
 * rho I and Q = q I on each such block -- as a guard on that claim. */
static gmm_status damped_structure(gmm_ssm *m)
{
    gmm_status st;
    size_t d = m->d;
    int *kd = gmm_malloc(d, sizeof *kd), *flag = gmm_malloc(m->nb ? m->nb : 1, sizeof *flag);
    double *A = gmm_malloc(2 * d * d, sizeof *A), *Q = A ? A + d * d : NULL;
    if (!kd || !flag || !A) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the damped blocks");
        goto done;
    }
    if ((st = gmm_kernel_var_damped(m->k, kd)))
        goto done;
    for (size_t b = 0; b < m->nb; b++) {
        const size_t *idx = m->perm + m->boff[b];
        size_t s = m->boff[b + 1] - m->boff[b];
        int all = 1;
        for (size_t i = 0; i < s; i++)
            all = all && kd[idx[i]];
        flag[b] = all;
        double p = m->P[idx[0] * d + idx[0]];
        for (size_t i = 0; all && i < s; i++)
            for (size_t j = 0; j < s; j++)
                if (fabs(m->P[idx[i] * d + idx[j]] - (i == j ? p : 0.0)) > DAMPED_TOL * p) {
                    st = gmm_error(GMM_EINVAL, "internal: a damped block's stationary "
                                               "covariance is not a multiple of the identity");
                    goto done;
                }
    }
    for (size_t g = 0; g < m->ng; g++) {
        if ((st = gmm_kernel_disc(m->k, m->kw, m->gdt[g], A, Q)))
            goto done;
        for (size_t b = 0; b < m->nb; b++) {
            if (!flag[b])
                continue;
            const size_t *idx = m->perm + m->boff[b];
            size_t s = m->boff[b + 1] - m->boff[b];
            /* Q = q I with q = (1 - rho^2) p: the kernel forms 1 - rho^2 without
             * its cancellation, so the product is only a coarse check */
            double rho = A[idx[0] * d + idx[0]], q = Q[idx[0] * d + idx[0]];
            int ok = fabs(q - (1.0 - rho * rho) * m->P[idx[0] * d + idx[0]]) <= 1e-4 * q;
            for (size_t i = 0; i < s && ok; i++)
                for (size_t j = 0; j < s && ok; j++)
                    ok = fabs(A[idx[i] * d + idx[j]] - (i == j ? rho : 0.0)) <= DAMPED_TOL &&
                         fabs(Q[idx[i] * d + idx[j]] - (i == j ? q : 0.0)) <= DAMPED_TOL * q;
            if (!ok) {
                st = gmm_error(GMM_EINVAL, "internal: a damped block's transition is not a "
                                           "damped identity");
                goto done;
            }
        }
    }
    m->dblk = flag;
    flag = NULL;
done:
    gmm_free(kd);
    gmm_free(flag);
    gmm_free(A);
    return st;
}

gmm_status gmm_ssm_damped_blocks(gmm_ssm *m, const double *theta, int *damped, double *pvar)
{
    gmm_status st;
    if (!m || !theta || !damped || !pvar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_damped_blocks: NULL argument");
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = ssm_pinf(m, theta)) || (!m->dblk && (st = damped_structure(m))))
        return st;
    for (size_t b = 0; b < m->nb; b++) {
        size_t i0 = m->perm[m->boff[b]];
        damped[b] = m->dblk[b];
        pvar[b] = m->P[i0 * m->d + i0];
    }
    return GMM_OK;
}

gmm_status gmm_ssm_damped_rev(gmm_ssm *m, const double *theta, const double *pbar,
                              double *thetabar)
{
    gmm_status st;
    if (!m || !theta || !pbar || !thetabar)
        return gmm_error(GMM_EINVAL, "gmm_ssm_damped_rev: NULL argument");
    size_t d = m->d;
    m->prior_ok = 0;
    m->lblocks = 0;
    if ((st = ssm_pinf(m, theta)))
        return st;
    double *Pb = m->T;
    memset(Pb, 0, d * d * sizeof *Pb);
    /* dPinf = dp I on the block: pbar spread over its diagonal */
    for (size_t b = 0; b < m->nb; b++) {
        const size_t *idx = m->perm + m->boff[b];
        size_t s = m->boff[b + 1] - m->boff[b];
        for (size_t i = 0; i < s; i++)
            Pb[idx[i] * d + idx[i]] = pbar[b] / (double)s;
    }
    return gmm_kernel_rev(m->k, m->kw, NULL, NULL, Pb, thetabar);
}
