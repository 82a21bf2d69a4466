/* band_prod.c -- band-band and band-vector products and the band-restricted
 * outer product (band.h sections 4 and 5).
 *
 * Band-vector products are CBLAS dgbmv (GENERAL, LOWER) and dsbmv (SYMMETRIC)
 * on the LAPACK band layout, except a SYMMETRIC matrix of small bandwidth
 * (sbmv_small).  The band-band product visits each stored entry
 * of C once and takes the dot product of a row of op(A) with a column of
 * op(B) over the indices where both are inside their bands: O(n w l), w C's
 * width.
 */
#include "gmm/band.h"

#include <cblas.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "band_prod_impl.h"
#include "band_simd.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* op(A) as a band: its bandwidths and, for entry (p, m), the index
 * off(p) + m * stride into A->data.
 *   op = A:   A(p,m)  at data[ku + p + m (ld - 1)]     (walk along a row)
 *   op = A^T: A(m,p)  at data[p (ld - 1) + ku + m]     (walk down a column)
 * Used for rows of the left factor; for columns of the right factor the roles
 * of the two cases swap (see col_of). */
typedef struct {
    const double *data;
    size_t kl, ku; /* bandwidths of op(A) */
    size_t a_ku, step;
    int t;
} opband;

static opband make_op(const gmm_band *A, gmm_trans t)
{
    opband o;
    o.data = A->data;
    o.t = t == GMM_TRANS;
    o.kl = o.t ? A->ku : A->kl;
    o.ku = o.t ? A->kl : A->ku;
    o.a_ku = A->ku;
    o.step = A->ld - 1;
    return o;
}

/* Entry (p, m) of op(A) is data[base + m * stride] along row p. */
static void row_of(const opband *o, size_t p, size_t *base, size_t *stride)
{
    if (o->t) {
        *base = p * o->step + o->a_ku;
        *stride = 1;
    } else {
        *base = o->a_ku + p;
        *stride = o->step;
    }
}

/* Entry (m, q) of op(A) is data[base + m * stride] down column q. */
static void col_of(const opband *o, size_t q, size_t *base, size_t *stride)
{
    if (o->t) {
        *base = o->a_ku + q;
        *stride = o->step;
    } else {
        *base = q * o->step + o->a_ku;
        *stride = 1;
    }
}

void gmm_band_gemm_kernel(gmm_trans ta, const gmm_band *A, gmm_trans tb, const gmm_band *B,
                          int accumulate, gmm_band *C)
{
    opband a = make_op(A, ta), b = make_op(B, tb);
    size_t n = C->n;
    for (size_t q = 0; q < n; q++) {
        double *c = gmm_band_col(C, q);
        size_t p0 = q >= C->ku ? q - C->ku : 0, p1 = min_sz(n - 1, q + C->kl);
        size_t bb, bs;
        col_of(&b, q, &bb, &bs);
        for (size_t p = p0; p <= p1; p++) {
            /* m inside row p of op(A) and column q of op(B). */
            size_t m0 = max_sz(p >= a.kl ? p - a.kl : 0, q >= b.ku ? q - b.ku : 0);
            size_t m1 = min_sz(min_sz(p + a.ku, q + b.kl), n - 1);
            size_t ab, as;
            row_of(&a, p, &ab, &as);
            double s = 0.0;
            for (size_t m = m0; m <= m1; m++)
                s += a.data[ab + m * as] * b.data[bb + m * bs];
            c[p] = accumulate ? c[p] + s : s;
        }
    }
}

gmm_status gmm_band_gemm(gmm_trans ta, const gmm_band *A, gmm_trans tb, const gmm_band *B,
                         gmm_band *C)
{
    if (A->n != C->n || B->n != C->n)
        return gmm_error(GMM_EDIM, "gemm: n differs (A %zu, B %zu, C %zu)", A->n, B->n, C->n);
    if (A->kind == GMM_BAND_SYMMETRIC || B->kind == GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "gemm: A and B must be GENERAL or LOWER (expand a "
                                   "SYMMETRIC operand with gmm_band_copy_band)");
    opband a = make_op(A, ta), b = make_op(B, tb);
    if (C->kind == GMM_BAND_SYMMETRIC || (C->kind == GMM_BAND_LOWER && a.ku + b.ku != 0))
        return gmm_error(GMM_EDIM, "gemm: C must be GENERAL, or LOWER when op(A) op(B) is "
                                   "lower (upper bandwidths %zu + %zu)", a.ku, b.ku);
    if (C->n > 0 && (C->data == A->data || C->data == B->data))
        return gmm_error(GMM_EDIM, "gemm: C must not alias A or B");

    gmm_band_gemm_kernel(ta, A, tb, B, 0, C);
    return GMM_OK;
}

/* Up to this bandwidth a SYMMETRIC gemv is sbmv_small's: OpenBLAS's dsbmv
 * makes a dot and an axpy call per column, whose overheads dominate at the
 * bandwidths of state-space priors; from l ~ 16 on dsbmv's kernels win
 * (tests/bench/bench_band.c re-tunes the crossover). */
#define SBMV_SMALL_KL 12

/* y += alpha A x, A SYMMETRIC n x n with bandwidth kl (data, ld), by rows:
 * row i's entries right of the diagonal are column i's stored ones
 * (contiguous), those left of it row i of the columns before (stride ld -
 * 1).  Two partial sums per row and no store read back by the next row, so
 * the rows overlap in the pipeline (a column sweep would chain each y_j
 * through kl stores and loads). */
BAND_INLINE void sbmv_rows(size_t n, size_t kl, double alpha, const double *data, size_t ld,
                           const double *x, double *y)
{
    size_t st = ld - 1;
    for (size_t i = 0; i < n; i++) {
        const double *c = data + i * ld;
        size_t kd = min_sz(kl, i), ku = min_sz(kl, n - 1 - i);
        double lo = 0.0, up = c[0] * x[i];
        for (size_t k = 1; k <= kd; k++)
            lo += c[-(ptrdiff_t)(k * st)] * x[i - k];
        for (size_t k = 1; k <= ku; k++)
            up += c[k] * x[i + k];
        y[i] += alpha * (lo + up);
    }
}

static void sbmv_small(size_t n, size_t kl, double alpha, const double *data, size_t ld,
                       const double *x, double *y)
{
    switch (kl) {
#define FIXED(K)                                                                                   \
    case K:                                                                                        \
        sbmv_rows(n, K, alpha, data, ld, x, y);                                                    \
        break;
        FIXED(1) FIXED(2) FIXED(3) FIXED(4) FIXED(5)
#undef FIXED
    default:
        sbmv_rows(n, kl, alpha, data, ld, x, y);
    }
}

gmm_status gmm_band_gemv(gmm_trans ta, double alpha, const gmm_band *A, const double *x,
                         double beta, double *y)
{
    if (A->n > INT_MAX)
        return gmm_error(GMM_EDIM, "gemv: n = %zu too large for CBLAS", A->n);
    if (A->n > 0 && x == y)
        return gmm_error(GMM_EDIM, "gemv: x and y must not alias");
    int n = (int)A->n;
    if (n == 0)
        return GMM_OK;
    /* beta = 0 must overwrite y even when it holds NaN or Inf. */
    if (beta == 0.0) {
        memset(y, 0, A->n * sizeof *y);
        beta = 1.0;
    }
    if (A->kind == GMM_BAND_SYMMETRIC && A->kl <= SBMV_SMALL_KL) {
        if (beta != 1.0)
            for (size_t i = 0; i < A->n; i++)
                y[i] *= beta;
        sbmv_small(A->n, A->kl, alpha, A->data, A->ld, x, y);
    } else if (A->kind == GMM_BAND_SYMMETRIC) {
        cblas_dsbmv(CblasColMajor, CblasLower, n, (int)A->kl, alpha, A->data, (int)A->ld, x, 1,
                    beta, y, 1);
    } else {
        cblas_dgbmv(CblasColMajor, ta == GMM_TRANS ? CblasTrans : CblasNoTrans, n, n,
                    (int)A->kl, (int)A->ku, alpha, A->data, (int)A->ld, x, 1, beta, y, 1);
    }
    return GMM_OK;
}

gmm_status gmm_band_outer(double alpha, size_t k, const double *M, size_t ldm, const double *V,
                          size_t ldv, gmm_band *O)
{
    size_t n = O->n;
    if (k > 0 && (ldm < n || ldv < n))
        return gmm_error(GMM_EDIM, "outer: leading dimension < n = %zu (ldm %zu, ldv %zu)", n,
                         ldm, ldv);
    int sym = O->kind == GMM_BAND_SYMMETRIC;
    for (size_t c = 0; c < k; c++) {
        const double *mc = M + c * ldm, *vc = V + c * ldv;
        for (size_t j = 0; j < n; j++) {
            double *o = gmm_band_col(O, j);
            size_t i0 = j >= O->ku ? j - O->ku : 0, i1 = min_sz(n - 1, j + O->kl);
            double vj = alpha * vc[j];
            for (size_t i = i0; i <= i1; i++)
                o[i] += mc[i] * vj;
            /* The stored (i, j), i > j, also stands for (j, i). */
            if (sym) {
                double mj = alpha * mc[j];
                for (size_t i = j + 1; i <= i1; i++)
                    o[i] += vc[i] * mj;
            }
        }
    }
    return GMM_OK;
}
