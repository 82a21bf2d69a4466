/* tu_dense_gp.h -- the dense GP of a kernel as a reference for the
 * state-space model: y drawn from N(0, K + noise I) and the exact gradient
 * of log N(y | 0, K + noise I), by plain loops in long double (no BLAS: the
 * same bits under every OpenBLAS kernel).  Header-only (the benches link no
 * test support objects).  O(n^3). */
#ifndef GMM_TU_DENSE_GP_H
#define GMM_TU_DENSE_GP_H

#include <math.h>
#include <stdlib.h>

#include "gmm/kernel.h"

/* L (n x n, row-major, lower) = chol(K + noise I), K(i, j) = k(x_i - x_j)
 * damped at rate damp (gmm_kernel_cov).  0, or -1 when not positive
 * definite. */
static inline int tu_dense_chol(const gmm_kernel *k, const double *th, double noise,
                                double damp, const double *x, size_t n, long double *L)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            long double v = gmm_kernel_cov(k, th, damp, x[i] - x[j]) + (i == j ? noise : 0.0);
            for (size_t p = 0; p < j; p++)
                v -= L[i * n + p] * L[j * n + p];
            if (i == j) {
                if (!(v > 0))
                    return -1;
                L[i * n + i] = sqrtl(v);
            } else {
                L[i * n + j] = v / L[j * n + j];
            }
        }
    return 0;
}

/* y = chol(K + noise I) z for the n standard normals z.  0 or -1. */
static inline int tu_dense_draw(const gmm_kernel *k, const double *th, double noise, double damp,
                                const double *x, size_t n, const double *z, double *y)
{
    long double *L = malloc(n * n * sizeof *L);
    int bad = !L || tu_dense_chol(k, th, noise, damp, x, n, L);
    for (size_t i = 0; i < n && !bad; i++) {
        long double v = 0;
        for (size_t j = 0; j <= i; j++)
            v += L[i * n + j] * z[j];
        y[i] = (double)v;
    }
    free(L);
    return bad ? -1 : 0;
}

/* The gradient of log N(y | 0, K + noise I) in (kernel parameters, noise)
 * into g (nparam + 1): 1/2 alpha' dK_j alpha - 1/2 tr((K + noise I)^-1
 * dK_j), alpha = (K + noise I)^-1 y, dK_j from gmm_kernel_cov_grad (the
 * noise's dK: I); the log likelihood into *ll (may be NULL).  K + noise I
 * has a condition number below 1 + n variance / noise, so this is good to
 * ~1e-12 relative however close the inputs.  0 or -1. */
static inline int tu_dense_grad(const gmm_kernel *k, const double *th, double noise, double damp,
                                const double *x, const double *y, size_t n, double *g,
                                double *ll)
{
    size_t np = gmm_kernel_nparam(k);
    long double *L = malloc(n * n * sizeof *L), *Ki = malloc(n * n * sizeof *Ki);
    long double *a = malloc(n * sizeof *a), *col = malloc(n * sizeof *col);
    long double *G = calloc(np + 1, sizeof *G);
    double *dk = malloc((np + 1) * sizeof *dk);
    int bad = !L || !Ki || !a || !col || !G || !dk || tu_dense_chol(k, th, noise, damp, x, n, L);
    long double q = 0, ld = 0;
    for (size_t c = 0; c <= n && !bad; c++) { /* columns of the inverse, then alpha */
        for (size_t i = 0; i < n; i++) {
            long double t = c < n ? (long double)(i == c) : (long double)y[i];
            for (size_t p = 0; p < i; p++)
                t -= L[i * n + p] * col[p];
            col[i] = t / L[i * n + i];
            if (c == n) {
                q += col[i] * col[i];
                ld += 2 * logl(L[i * n + i]);
            }
        }
        for (size_t i = n; i-- > 0;) {
            long double t = col[i];
            for (size_t p = i + 1; p < n; p++)
                t -= L[p * n + i] * col[p];
            col[i] = t / L[i * n + i];
        }
        for (size_t i = 0; i < n; i++) {
            if (c < n)
                Ki[i * n + c] = col[i];
            else
                a[i] = col[i];
        }
    }
    for (size_t i = 0; i < n && !bad; i++)
        for (size_t j = 0; j < n; j++) {
            gmm_kernel_cov_grad(k, th, damp, x[i] - x[j], dk);
            long double w = 0.5L * (a[i] * a[j] - Ki[i * n + j]);
            for (size_t p = 0; p < np; p++)
                G[p] += w * dk[p];
            if (i == j)
                G[np] += w;
        }
    for (size_t p = 0; p <= np && !bad; p++)
        g[p] = (double)G[p];
    if (ll && !bad)
        *ll = (double)(-0.5L * q - 0.5L * ld) - 0.5 * (double)n * log(6.283185307179586);
    free(dk);
    free(G);
    free(col);
    free(a);
    free(Ki);
    free(L);
    return bad ? -1 : 0;
}

#endif
