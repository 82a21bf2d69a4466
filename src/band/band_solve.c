/* band_solve.c -- triangular solves with a banded lower-triangular L:
 * vector, dense block and banded right-hand sides (band.h section 2).
 *
 * Vector and block solves are substitutions down (L) or up (L^T) the stored
 * columns, one right-hand side at a time (O(n l) per column).
 *
 * SOLVE BY A BANDED RIGHT-HAND SIDE (paper appendix, Alg. 5).  X = op(L)^{-1} B
 * is dense in general, but the entries inside a band are exact entries of the
 * product when they are computed in the right order:
 *
 *   op = L:    L x_j = b_j with L^{-1} lower triangular, so x_j(i) = 0 for
 *              i < j - ku_B: X has B's upper bandwidth.  Forward substitution
 *              down column j, x(i) = (b(i) - sum_{i-l <= m < i} L(i,m) x(m)) /
 *              L(i,i), reads only rows above i of the same column, all of them
 *              inside X's band (rows j - ku_B .. i) or exact zeros.  Hence
 *              diagonals are produced from the top one (i - j = -ku_B) down to
 *              i - j = kl_X, each from those above it; Alg. 5's loop over k from
 *              -u to l is this order.
 *   op = L^T:  L^T x_j = b_j with L^{-T} upper triangular, so x_j(i) = 0 for
 *              i > j + kl_B: X has B's lower bandwidth.  Back substitution up
 *              column j, x(i) = (b(i) - sum_{i < m <= i+l} L(m,i) x(m)) / L(i,i),
 *              reads only rows below i, inside X's band (i .. j + kl_B) or
 *              zero.  Diagonals go from the bottom (i - j = kl_B) up to
 *              i - j = -ku_X.
 *
 * In both cases column j of X is a triangular solve with the diagonal block
 * L[r0..r1, r0..r1] (r0..r1 the rows of X's band that can be nonzero), done in
 * place on the contiguous stored column of X: O(l) per entry.
 */
#include "gmm/band.h"

#include <string.h>

#include "gmm/alloc.h"
#include "band_solve_blk.h"
#include "band_solve_impl.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* L must be a LOWER band. */
static gmm_status check_factor(const char *who, const gmm_band *L)
{
    if (L->kind != GMM_BAND_LOWER)
        return gmm_error(GMM_EDIM, "%s: L must be LOWER (kind %d given)", who, (int)L->kind);
    return GMM_OK;
}

/* x[r0..r1] <- L[r0..r1, r0..r1]^{-1} x[r0..r1], column by column so that L
 * is read down its contiguous stored columns.  Hand loops rather than dtbsv:
 * the segments are as short as X's band, where a BLAS call per column costs
 * more than the arithmetic.  Dividing by the reciprocal keeps the division
 * off the chain x(m) -> x(m+1) (it depends on L only). */
static void forward_segment(const gmm_band *L, size_t r0, size_t r1, double *x)
{
    for (size_t m = r0; m <= r1; m++) {
        const double *l = gmm_band_col(L, m);
        double inv = 1.0 / l[m];
        double xm = x[m] *= inv;
        size_t len = min_sz(r1, m + L->kl) - m;
        /* restrict: x is never inside L (spares the overlap tests) */
        double *restrict xs = x + m + 1;
        const double *restrict ls = l + m + 1;
        for (size_t i = 0; i < len; i++)
            xs[i] -= ls[i] * xm;
    }
}

/* x(i) = (x(i) - sum_{i < m <= m1} L(m,i) x(m)) / L(i,i), l = column i of
 * L (see band_dot_far for the order of the sum). */
BAND_INLINE void backward_row(const double *l, double *x, size_t i, size_t m1)
{
    double inv = 1.0 / l[i];
    /* band_dot_far(l, x, i + 2, m1) by its count, which unrolls when m1 -
     * i is a constant */
    size_t cnt = m1 >= i + 2 ? m1 - i - 1 : 0;
    double s = x[i] - band_dot_far_strided(l + i + 2, 1, x + i + 2, cnt);
    if (i + 1 <= m1)
        s -= l[i + 1] * x[i + 1];
    x[i] = s * inv;
}

/* x[r0..r1] <- L[r0..r1, r0..r1]^{-T} x[r0..r1], bottom row first. */
static void backward_segment(const gmm_band *L, size_t r0, size_t r1, double *x)
{
    for (size_t i = r1 + 1; i-- > r0;)
        backward_row(gmm_band_col(L, i), x, i, min_sz(r1, i + L->kl));
}

/* x <- L^{-T} x over all rows, L of bandwidth l (a constant in the
 * specialised copies: the rows above the last l have l terms): the
 * arithmetic of backward_segment, to the bit. */
BAND_INLINE void backward_all(const gmm_band *L, size_t l, double *x)
{
    size_t n = L->n, i1 = n > l ? n - l : 0;
    for (size_t i = n; i-- > i1;)
        backward_row(gmm_band_col(L, i), x, i, n - 1);
    for (size_t i = i1; i-- > 0;)
        backward_row(gmm_band_col(L, i), x, i, i + l);
}

/* One row of forward substitution by rows: x(i) = (x(i) - sum_m L(i,m) x(m))
 * / L(i,i) over m = i-len .. i-1, row[m * st] = L(i, m); xp = x(i-1) carried
 * in a register.  The far terms (x known for a while) go to band_dot_far's
 * partial sums, so the chain x(i-1) -> x(i) is a multiply-add and a
 * multiply.  Only scalar loads and stores of x: a vectorised column update
 * (x(m+1..m+l) -= L(m+1..,m) x(m)) would load 16 bytes across the 8-byte
 * stores of the previous column, defeating store forwarding every column. */
BAND_INLINE double forward_row(const double *row, size_t st, double *x, size_t i, size_t len,
                               double xp)
{
    double s = x[i];
    if (len >= 2)
        s -= band_dot_far_strided(row + (i - len) * st, st, x + (i - len), len - 1);
    if (len >= 1)
        s -= row[(i - 1) * st] * xp;
    double xi = s * (1.0 / row[i * st]);
    x[i] = xi;
    return xi;
}

/* x <- L^{-1} x over all rows, L of bandwidth l (a constant in the
 * specialised copies: the rows past the first l have l terms); when ld,
 * also log det(L L^T) (band_logdet_*). */
BAND_INLINE void forward_all(const gmm_band *L, size_t l, double *x, double *ld)
{
    size_t n = L->n, st = L->ld - 1, i0 = l < n ? l : n;
    const double *d0 = gmm_band_col(L, 0); /* entry (i, m) at d0[m * st + i] */
    band_logdet acc;
    band_logdet_init(&acc);
    double xp = 0.0;
    for (size_t i = 0; i < i0; i++) {
        xp = forward_row(d0 + i, st, x, i, i, xp);
        if (ld)
            band_logdet_add(&acc, d0[i * st + i]);
    }
    for (size_t i = i0; i < n; i++) {
        xp = forward_row(d0 + i, st, x, i, l, xp);
        if (ld)
            band_logdet_add(&acc, d0[i * st + i]);
    }
    if (ld)
        *ld = band_logdet_value(&acc);
}

/* Wide bands: the blocked substitutions (band_solve_blk.h), x86-64 baseline
 * and AVX2 copies. */
static void blk_forward_plain(const gmm_band *L, double *x, band_logdet *acc,
                              const size_t *reach)
{
    blk_forward(L->data + L->ku, L->ld - 1, L->n, L->kl, x, acc, reach);
}

static void blk_backward_plain(const gmm_band *L, double *x, const size_t *reach)
{
    blk_backward(L->data + L->ku, L->ld - 1, L->n, L->kl, x, reach);
}

#if BAND_AVX2
BAND_TARGET_AVX2 static void blk_forward_avx2(const gmm_band *L, double *x, band_logdet *acc,
                                              const size_t *reach)
{
    blk_forward(L->data + L->ku, L->ld - 1, L->n, L->kl, x, acc, reach);
}

BAND_TARGET_AVX2 static void blk_backward_avx2(const gmm_band *L, double *x,
                                               const size_t *reach)
{
    blk_backward(L->data + L->ku, L->ld - 1, L->n, L->kl, x, reach);
}
#endif

static void blk_solve(const gmm_band *L, gmm_trans trans, double *x, double *ld,
                      const size_t *reach)
{
    band_logdet acc;
    band_logdet_init(&acc);
#if BAND_AVX2
    if (band_cpu_has_avx2()) {
        if (trans == GMM_TRANS)
            blk_backward_avx2(L, x, reach);
        else
            blk_forward_avx2(L, x, ld ? &acc : NULL, reach);
    } else
#endif
    {
        if (trans == GMM_TRANS)
            blk_backward_plain(L, x, reach);
        else
            blk_forward_plain(L, x, ld ? &acc : NULL, reach);
    }
    if (ld)
        *ld = band_logdet_value(&acc);
}

/* x <- op(L)^{-1} x (and log det(L L^T) into *ld when ld, op = L only).  Not
 * CBLAS dtbsv: it spends a daxpy/ddot call per column, several times the
 * arithmetic of a column for the bandwidths of state-space models.  Wide
 * bands take the blocked substitutions (band_solve_blk.h; blk_use in
 * band_solve_impl.h says when); the comparison with dtbsv is in
 * docs/benchmarks.md.  reach (NULL: none) limits the blocked substitutions
 * to the ragged band's rows (band_solve_blk.h). */
static void tbsv(const gmm_band *L, gmm_trans trans, double *x, double *ld, const size_t *reach)
{
    if (L->n == 0) {
        if (ld)
            *ld = 0.0;
        return;
    }
    if (blk_use(L->n, L->kl, trans == GMM_TRANS)) {
        blk_solve(L, trans, x, ld, reach);
        return;
    }
    if (trans == GMM_TRANS) {
        switch (L->kl) {
#define FIXED(K)                                                                                   \
    case K:                                                                                        \
        backward_all(L, K, x);                                                                     \
        break;
            BAND_FIXED_BANDWIDTHS(FIXED)
#undef FIXED
        default:
            backward_segment(L, 0, L->n - 1, x);
        }
        return;
    }
    switch (L->kl) {
#define FIXED(K)                                                                                   \
    case K:                                                                                        \
        forward_all(L, K, x, ld);                                                                  \
        break;
        BAND_FIXED_BANDWIDTHS(FIXED)
#undef FIXED
    default:
        forward_all(L, L->kl, x, ld);
    }
}

gmm_status gmm_band_tri_solve_vec_logdet(const gmm_band *L, double *x, double *logdet)
{
    gmm_status st = check_factor("tri_solve_vec_logdet", L);
    if (st != GMM_OK)
        return st;
    if (!logdet)
        return gmm_error(GMM_EINVAL, "tri_solve_vec_logdet: NULL logdet");
    tbsv(L, GMM_NOTRANS, x, logdet, NULL);
    return GMM_OK;
}

gmm_status gmm_band_tri_solve_vec(const gmm_band *L, gmm_trans trans, double *x)
{
    gmm_status st = check_factor("tri_solve_vec", L);
    if (st != GMM_OK)
        return st;
    tbsv(L, trans, x, NULL, NULL);
    return GMM_OK;
}

gmm_status gmm_band_tri_reach(const gmm_band *L, size_t *reach)
{
    gmm_status st = check_factor("tri_reach", L);
    if (st != GMM_OK)
        return st;
    for (size_t j = 0; j < L->n; j++) {
        const double *c = gmm_band_col(L, j);
        size_t i = min_sz(L->n - 1, j + L->kl);
        while (i > j && c[i] == 0.0)
            i--;
        reach[j] = i;
    }
    return GMM_OK;
}

gmm_status gmm_band_tri_solve_vec_reach(const gmm_band *L, const size_t *reach, gmm_trans trans,
                                        double *x)
{
    gmm_status st = check_factor("tri_solve_vec_reach", L);
    if (st != GMM_OK)
        return st;
    tbsv(L, trans, x, NULL, reach);
    return GMM_OK;
}

gmm_status gmm_band_tri_solve_mat(const gmm_band *L, gmm_trans trans, size_t k, double *X,
                                  size_t ldx)
{
    gmm_status st = check_factor("tri_solve_mat", L);
    if (st != GMM_OK)
        return st;
    if (k > 0 && ldx < L->n)
        return gmm_error(GMM_EDIM, "tri_solve_mat: ldx = %zu < n = %zu", ldx, L->n);
    for (size_t c = 0; c < k; c++)
        tbsv(L, trans, X + c * ldx, NULL, NULL);
    return GMM_OK;
}

gmm_status gmm_band_tri_solve_band(const gmm_band *L, gmm_trans trans, const gmm_band *B,
                                   gmm_band *X)
{
    gmm_status st = check_factor("tri_solve_band", L);
    if (st != GMM_OK)
        return st;
    if (B->n != L->n || X->n != L->n)
        return gmm_error(GMM_EDIM, "tri_solve_band: n differs (L %zu, B %zu, X %zu)", L->n,
                         B->n, X->n);
    if (B->kind == GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "tri_solve_band: B must be GENERAL or LOWER, not SYMMETRIC"
                                   " (expand it with gmm_band_copy_band)");
    if (X->kind == GMM_BAND_SYMMETRIC ||
        (X->kind == GMM_BAND_LOWER && (trans == GMM_TRANS || B->ku != 0)))
        return gmm_error(GMM_EDIM, "tri_solve_band: X must be GENERAL (LOWER only for "
                                   "L^{-1} B with B lower), kind %d given",
                         (int)X->kind);
    if (trans == GMM_NOTRANS && X->ku < B->ku)
        return gmm_error(GMM_EDIM, "tri_solve_band: X->ku = %zu < B->ku = %zu (L^{-1} B keeps"
                                   " B's upper band)", X->ku, B->ku);
    if (trans == GMM_TRANS && X->kl < B->kl)
        return gmm_error(GMM_EDIM, "tri_solve_band: X->kl = %zu < B->kl = %zu (L^{-T} B keeps"
                                   " B's lower band)", X->kl, B->kl);
    if (X->n > 0 && (X->data == B->data || X->data == L->data))
        return gmm_error(GMM_EDIM, "tri_solve_band: X must not alias B or L");

    size_t n = L->n;
    for (size_t j = 0; j < n; j++) {
        double *x = gmm_band_col(X, j);
        size_t i0 = j >= X->ku ? j - X->ku : 0, i1 = min_sz(n - 1, j + X->kl);
        const double *b = gmm_band_col(B, j);
        size_t b0 = j >= B->ku ? j - B->ku : 0, b1 = min_sz(n - 1, j + B->kl);
        for (size_t i = i0; i <= i1; i++)
            x[i] = i >= b0 && i <= b1 ? b[i] : 0.0;
        /* Rows of X's band that can be nonzero (see the header comment). */
        if (trans == GMM_NOTRANS)
            forward_segment(L, b0, i1, x);
        else
            backward_segment(L, i0, b1, x);
    }
    return GMM_OK;
}
