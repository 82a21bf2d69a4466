/* model_dense.h -- tiny row-major dense helpers for the d x d blocks of the
 * model layer (d is a state dimension: a handful to a few dozen).  Private to
 * src/model/.  Nothing here is ever n x n. */
#ifndef GMM_MODEL_DENSE_H
#define GMM_MODEL_DENSE_H

#include <math.h>
#include <stddef.h>
#include <string.h>

/* C = A B (m x k times k x n). */
static inline void md_mul(size_t m, size_t k, size_t n, const double *A, const double *B,
                          double *C)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t l = 0; l < k; l++)
                s += A[i * k + l] * B[l * n + j];
            C[i * n + j] = s;
        }
}

/* C = alpha op(A) op(B) + beta C for square d x d, ta/tb nonzero =
 * transpose.  C must not alias A or B.  Row-oriented loops (i, l, j) so the
 * inner loop runs along rows of B and C. */
static inline void md_gemm(size_t d, int ta, int tb, double alpha, const double *A,
                           const double *B, double beta, double *C)
{
    /* beta == 0 writes C instead of zeroing it first (a memset call per row
     * of a handful of doubles cost more than the row's arithmetic) */
    for (size_t i = 0; i < d; i++) {
        double *c = C + i * d;
        if (beta != 0.0 && beta != 1.0)
            for (size_t j = 0; j < d; j++)
                c[j] *= beta;
        if (!tb) {
            for (size_t l = 0; l < d; l++) {
                double a = alpha * (ta ? A[l * d + i] : A[i * d + l]);
                const double *b = B + l * d;
                if (l == 0 && beta == 0.0)
                    for (size_t j = 0; j < d; j++)
                        c[j] = a * b[j];
                else
                    for (size_t j = 0; j < d; j++)
                        c[j] += a * b[j];
            }
        } else {
            for (size_t j = 0; j < d; j++) {
                const double *b = B + j * d;
                double s = 0.0;
                if (ta)
                    for (size_t l = 0; l < d; l++)
                        s += A[l * d + i] * b[l];
                else
                    for (size_t l = 0; l < d; l++)
                        s += A[i * d + l] * b[l];
                c[j] = beta == 0.0 ? alpha * s : c[j] + alpha * s;
            }
        }
    }
}

/* sum_ij A(i,j) B(i,j) over m entries. */
static inline double md_dot(size_t m, const double *A, const double *B)
{
    double s = 0.0;
    for (size_t i = 0; i < m; i++)
        s += A[i] * B[i];
    return s;
}

static inline void md_axpy(size_t m, double a, const double *x, double *y)
{
    for (size_t i = 0; i < m; i++)
        y[i] += a * x[i];
}

static inline void md_zero(size_t m, double *x) { memset(x, 0, m * sizeof *x); }

/* A <- (A + A^T)/2. */
static inline void md_symmetrise(size_t d, double *A)
{
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < i; j++) {
            double s = 0.5 * (A[i * d + j] + A[j * d + i]);
            A[i * d + j] = A[j * d + i] = s;
        }
}

/* Kronecker product C = X (x) Y, X dx x dx, Y dy x dy, C (dx dy)^2. */
static inline void md_kron(size_t dx, const double *X, size_t dy, const double *Y, double *C)
{
    size_t d = dx * dy;
    for (size_t a = 0; a < dx; a++)
        for (size_t b = 0; b < dx; b++)
            for (size_t c = 0; c < dy; c++)
                for (size_t e = 0; e < dy; e++)
                    C[(a * dy + c) * d + b * dy + e] = X[a * dx + b] * Y[c * dy + e];
}

/* C += alpha X (x) Y. */
static inline void md_kron_acc(double alpha, size_t dx, const double *X, size_t dy,
                               const double *Y, double *C)
{
    size_t d = dx * dy;
    for (size_t a = 0; a < dx; a++)
        for (size_t b = 0; b < dx; b++)
            for (size_t c = 0; c < dy; c++)
                for (size_t e = 0; e < dy; e++)
                    C[(a * dy + c) * d + b * dy + e] += alpha * X[a * dx + b] * Y[c * dy + e];
}

/* Reverse of C = X (x) Y: Xbar += contraction of Cbar with Y (when Xbar),
 * Ybar += contraction of Cbar with X (when Ybar). */
static inline void md_kron_rev(size_t dx, const double *X, size_t dy, const double *Y,
                               const double *Cbar, double *Xbar, double *Ybar)
{
    size_t d = dx * dy;
    for (size_t a = 0; a < dx; a++)
        for (size_t b = 0; b < dx; b++)
            for (size_t c = 0; c < dy; c++)
                for (size_t e = 0; e < dy; e++) {
                    double g = Cbar[(a * dy + c) * d + b * dy + e];
                    if (Xbar)
                        Xbar[a * dx + b] += g * Y[c * dy + e];
                    if (Ybar)
                        Ybar[c * dy + e] += g * X[a * dx + b];
                }
}

/* In-place Cholesky of a symmetric positive definite d x d A (lower factor in
 * the lower triangle, upper triangle zeroed).  Returns 0, or i + 1 for the
 * first non-positive (or non-finite) pivot i. */
static inline size_t md_chol(size_t d, double *A)
{
    for (size_t j = 0; j < d; j++) {
        double s = A[j * d + j];
        for (size_t l = 0; l < j; l++)
            s -= A[j * d + l] * A[j * d + l];
        if (!(s > 0.0) || !isfinite(s))
            return j + 1;
        double ljj = sqrt(s);
        A[j * d + j] = ljj;
        for (size_t i = j + 1; i < d; i++) {
            double t = A[i * d + j];
            for (size_t l = 0; l < j; l++)
                t -= A[i * d + l] * A[j * d + l];
            A[i * d + j] = t / ljj;
        }
        for (size_t i = 0; i < j; i++)
            A[i * d + j] = 0.0;
    }
    return 0;
}

/* b <- L^-1 b, L d x d lower (as left by md_chol). */
static inline void md_lower_solve(size_t d, const double *L, double *b)
{
    for (size_t i = 0; i < d; i++) {
        for (size_t t = 0; t < i; t++)
            b[i] -= L[i * d + t] * b[t];
        b[i] /= L[i * d + i];
    }
}

/* b <- (L L^T)^-1 b, L the lower factor of md_chol. */
static inline void md_chol_solve(size_t d, const double *L, double *b)
{
    md_lower_solve(d, L, b);
    for (size_t i = d; i-- > 0;) {
        for (size_t t = i + 1; t < d; t++)
            b[i] -= L[t * d + i] * b[t];
        b[i] /= L[i * d + i];
    }
}

/* W = (L L^T)^{-1} from the lower factor L (as left by md_chol); X is d*d
 * scratch.  O(d^3). */
static inline void md_chol_inverse(size_t d, const double *L, double *W, double *X)
{
    /* X = L^{-1}, lower triangular, column by column */
    md_zero(d * d, X);
    for (size_t j = 0; j < d; j++) {
        X[j * d + j] = 1.0 / L[j * d + j];
        for (size_t i = j + 1; i < d; i++) {
            double s = 0.0;
            for (size_t l = j; l < i; l++)
                s -= L[i * d + l] * X[l * d + j];
            X[i * d + j] = s / L[i * d + i];
        }
    }
    /* W = X^T X */
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0.0;
            for (size_t l = i; l < d; l++)
                s += X[l * d + i] * X[l * d + j];
            W[i * d + j] = W[j * d + i] = s;
        }
}

/* Reverse mode of L = chol(Q) (md_chol): Qbar (d x d) += the full-matrix
 * gradient of a symmetric Q (kernel.h's convention) given Lbar = dc/dL (only
 * its lower triangle is read).  Murray (2016), "Differentiation of the
 * Cholesky decomposition", eq. 10, in its symmetric form: with Phi(M) the
 * lower triangle of M with the diagonal halved,
 *
 *     Qbar = L^-T sym(Phi(L^T Lbar)) L^-1,   sym(P) = (P + P^T)/2,
 *
 * from dQ = dL L^T + L dL^T: L^-1 dL = Phi(L^-1 dQ L^-T), so dc = tr(Lbar^T
 * dL) = <Phi(L^T Lbar), L^-1 dQ L^-T>, and dQ is symmetric.  sym(Phi(M))
 * is M/2 on and below the diagonal, mirrored above.  X: 2 d^2 scratch.
 * O(d^3). */
static inline void md_chol_rev(size_t d, const double *L, const double *Lbar, double *Qbar,
                               double *X)
{
    double *P = X, *Y = X + d * d;
    /* P = sym(Phi(L^T Lbar)): (L^T Lbar)(i, j) = sum_{l >= i} L(l, i) Lbar(l, j), j <= i */
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0.0;
            for (size_t l = i; l < d; l++)
                s += L[l * d + i] * Lbar[l * d + j];
            P[i * d + j] = P[j * d + i] = 0.5 * s;
        }
    /* Y = L^-T P (back substitution, column by column), then P = L^-T Y^T =
     * L^-T P L^-1 (P symmetric) */
    for (int pass = 0; pass < 2; pass++) {
        const double *B = pass ? Y : P;
        double *Z = pass ? P : Y;
        for (size_t c = 0; c < d; c++)
            for (size_t i = d; i-- > 0;) {
                double s = pass ? B[c * d + i] : B[i * d + c];
                for (size_t l = i + 1; l < d; l++)
                    s -= L[l * d + i] * Z[l * d + c];
                Z[i * d + c] = s / L[i * d + i];
            }
    }
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++)
            Qbar[i * d + j] += 0.5 * (P[i * d + j] + P[j * d + i]);
}

/* log det(L L^T) = 2 sum log L_ii. */
static inline double md_chol_logdet(size_t d, const double *L)
{
    double s = 0.0;
    for (size_t i = 0; i < d; i++)
        s += log(L[i * d + i]);
    return 2.0 * s;
}

#endif
