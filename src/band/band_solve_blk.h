/* band_solve_blk.h -- the substitutions with L (forward) and L^T (back) for
 * wide bands, eight columns at a time.  Private to src/band/; included by
 * band_solve.c and band_solve_rev.c, which compile each kernel twice (x86-64
 * baseline and AVX2, band_simd.h) and dispatch.
 *
 * Column by column, the substitutions are a chain of l-long axpys (L x) or
 * dot products (L^T x) whose every step waits for the previous one, with a
 * store-forwarding stall per column where a vector load of x straddles the
 * previous column's stores.  By blocks of NB = 8 columns J = j0 .. j0+7
 * (j0 a multiple of 8):
 *
 *   L x = b:    the 8 x 8 triangle L(J, J) in registers, then the rows
 *               below, r = j0+8 .. j0+7+l (the block's parallelogram), four
 *               at a time: x(r) -= sum_{j in J} L(r, j) x(j) -- one load and
 *               one store of x per four rows and eight columns, each x(r)
 *               receiving the updates in the column order of the axpy form
 *               (the triangle rounds differently: blk_tri_forward).
 *   L^T x = b:  blocks from the bottom: the eight dot products of the
 *               block's columns with x below it, m = i0+8 .. i0+7+l, in
 *               four-lane partial sums (x loaded once for eight columns;
 *               the rows farthest from the block first, so the rows just
 *               solved are needed last), then the triangle L(I, I)^T
 *               bottom-up.  The sums are ordered differently from the
 *               column-by-column form (rounding differs at the ulp level;
 *               the backward error stays below (l + 3) eps,
 *               tests/band/test_band_solve.c).
 *
 * RAGGED BANDS.  With reach (gmm_band_tri_reach: the last nonzero row of
 * each column), the rows of a block's parallelogram below the last reach
 * of its eight columns -- exact zeros of L -- are skipped: the forward
 * substitution's updates there subtract zeros, the back substitution's
 * four-row groups and far rows there add zeros to sums that start at 0, so
 * the result is the same to the bit (up to the sign of a zero).  A graph
 * ordered by RCM leaves a third of its band's parallelogram rows below the
 * reach (influenza, Chicago).
 *
 * Four-lane GNU C vectors: the baseline copy does them as SSE2 pairs, the
 * AVX2 copy as one instruction; the same IEEE operations either way, so both
 * copies give the same bits.  x is stored in whole aligned four-row groups
 * wherever a later vector load reads it back (rows j0 + 4k): the loads then
 * forward from single stores.
 */
#ifndef GMM_BAND_SOLVE_BLK_H
#define GMM_BAND_SOLVE_BLK_H

#include <stddef.h>
#include <string.h>

#include "band_simd.h"
#include "band_solve_impl.h"

#define BLK_NB 8

typedef double blk_v4 __attribute__((vector_size(32)));

/* Loops over the eight columns of a block, unrolled (GCC and Clang read
 * this pragma; loop overhead was a third of the narrow bands' instructions). */
#if defined(__GNUC__)
#define BLK_UNROLL _Pragma("GCC unroll 8")
#else
#define BLK_UNROLL
#endif

/* (Pointers, not values: a 32-byte vector passed by value changes the ABI
 * between the two copies.) */
BAND_INLINE void blk_ld(blk_v4 *v, const double *p) { memcpy(v, p, sizeof *v); }
BAND_INLINE void blk_st(double *p, const blk_v4 *v) { memcpy(p, v, sizeof *v); }

static inline size_t blk_min(size_t a, size_t b) { return a < b ? a : b; }

/* Prefetching.  A block's eight columns are l + 1 consecutive cache lines
 * (8 (l + 1) doubles), read as eight interleaved short streams that the
 * hardware prefetchers do not follow; from memory (n l beyond the caches)
 * that loses against OpenBLAS's dtbsv, which streams one column at a time.
 * So each block prefetches the lines BLK_PF_DIST bytes ahead of its
 * own (the blocks are contiguous in memory, upwards for the forward
 * substitution and downwards for the back one): 4 lines with each of its
 * l / 4 row groups and 8 more before them (12 in the forward substitution,
 * whose first two groups come before the prefetching loop), never fewer
 * than the block's l + 1 lines, so the windows of successive blocks join.
 * 16 KB ahead is a few hundred nanoseconds of work at any l. */
#define BLK_PF_DIST 16384
BAND_INLINE void blk_pf4(const char *p, ptrdiff_t step)
{
    __builtin_prefetch(p);
    __builtin_prefetch(p + step);
    __builtin_prefetch(p + 2 * step);
    __builtin_prefetch(p + 3 * step);
}

/* Column j0 + k of a block holds rows up to j0 + k + l: of the four rows
 * j0 + d .. j0 + d + 3, the lanes past that are masked to zero (the slots
 * read there belong to the next columns, or to the unused end of the last
 * columns: inside the array as long as the rows are < n, and never used in
 * arithmetic). */
typedef long long blk_v4i __attribute__((vector_size(32)));

BAND_INLINE void blk_ld_masked(blk_v4 *v, const double *p, size_t d, size_t last)
{
    const blk_v4i lane = {0, 1, 2, 3};
    blk_v4i keep = lane <= (long long)last - (long long)d;
    blk_ld(v, p);
    *v = (blk_v4)((blk_v4i)*v & keep);
}
/* inv[k] = 1 / L(j0 + k, j0 + k): two four-lane divisions instead of eight
 * scalar ones (the divider's throughput, not its latency, limited the
 * narrow bands). */
BAND_INLINE void blk_recip(const double *c0, size_t st, size_t j0, double *inv)
{
    const double *d = c0 + j0; /* L(j0 + k, j0 + k) at d[k * (st + 1)] */
    size_t dd = st + 1;
    blk_v4 one = {1.0, 1.0, 1.0, 1.0};
    blk_v4 lo = one / (blk_v4){d[0], d[dd], d[2 * dd], d[3 * dd]};
    blk_v4 hi = one / (blk_v4){d[4 * dd], d[5 * dd], d[6 * dd], d[7 * dd]};
    memcpy(inv, &lo, sizeof lo);
    memcpy(inv + 4, &hi, sizeof hi);
}

/* The triangle of the block of columns j0 .. j0+7: xj <- L(J, J)^{-1} x(J),
 * stored back to x in two four-row groups.  The chain from one unknown to
 * the next is a multiply and a subtraction: y(kk) -= (L(kk, k) / L(k, k))
 * y(k) on the unscaled y, the quotients computed off the chain (they depend
 * on L only), and x(k) = y(k) / L(k, k) beside it. */
BAND_INLINE void blk_tri_forward(const double *c0, size_t st, size_t j0, double *x, double *xj,
                                 band_logdet *acc)
{
    double inv[BLK_NB], q[BLK_NB][BLK_NB], y[BLK_NB];
    blk_recip(c0, st, j0, inv);
    BLK_UNROLL
    for (size_t k = 0; k < BLK_NB; k++) {
        const double *c = c0 + k * st; /* column j0 + k */
        BLK_UNROLL
        for (size_t kk = k + 1; kk < BLK_NB; kk++)
            q[k][kk] = c[j0 + kk] * inv[k];
        y[k] = x[j0 + k];
    }
    BLK_UNROLL
    for (size_t k = 0; k < BLK_NB; k++) {
        BLK_UNROLL
        for (size_t kk = k + 1; kk < BLK_NB; kk++)
            y[kk] -= q[k][kk] * y[k];
        xj[k] = y[k] * inv[k];
        if (acc)
            band_logdet_add(acc, c0[k * st + j0 + k]);
    }
    blk_v4 lo = {xj[0], xj[1], xj[2], xj[3]}, hi = {xj[4], xj[5], xj[6], xj[7]};
    blk_st(x + j0, &lo);
    blk_st(x + j0 + 4, &hi);
}

/* x(r .. r+3) -= L(r .. r+3, J) xj, the lanes outside the band masked. */
BAND_INLINE void blk_group_forward(const double *c0, size_t st, size_t j0, size_t l, size_t r,
                                   const double *xj, double *x)
{
    blk_v4 v, lk;
    blk_ld(&v, x + r);
    if (r + 3 <= j0 + l)
        BLK_UNROLL
        for (size_t k = 0; k < BLK_NB; k++) {
            blk_ld(&lk, c0 + k * st + r);
            v -= lk * xj[k];
        }
    else
        BLK_UNROLL
        for (size_t k = 0; k < BLK_NB; k++) {
            blk_ld_masked(&lk, c0 + k * st + r, r - j0, k + l);
            v -= lk * xj[k];
        }
    blk_st(x + r, &v);
}

/* The last reach of columns j0 .. j0+7, or SIZE_MAX without reach. */
BAND_INLINE size_t blk_reach(const size_t *reach, size_t j0)
{
    if (!reach)
        return (size_t)-1;
    size_t r = reach[j0];
    for (size_t k = 1; k < BLK_NB; k++)
        r = reach[j0 + k] > r ? reach[j0 + k] : r;
    return r;
}

/* x <- L^{-1} x, L(i, j) at d0[j * st + i] with bandwidth l >= BLK_NB; with
 * acc, log det(L L^T) accumulated (band_logdet); reach NULL or as above.
 * Software-pipelined: the first two row groups below a block are the next
 * block's rows; they are updated first and the next block's triangle (a
 * chain of 8 dependent steps) is solved before the rest of the
 * parallelogram, so that the processor overlaps the two. */
BAND_INLINE void blk_forward(const double *d0, size_t st, size_t n, size_t l, double *x,
                             band_logdet *acc, const size_t *reach)
{
    size_t j0 = 0;
    double xj[BLK_NB], xn[BLK_NB];
    if (n >= BLK_NB)
        blk_tri_forward(d0, st, 0, x, xj, acc);
    for (; j0 + BLK_NB <= n; j0 += BLK_NB) {
        const double *c0 = d0 + j0 * st;
        /* The parallelogram, rows j0 + 8 .. j0 + 7 + l (< n), four at a
         * time; the next block's columns (8 (l + 1) doubles from its
         * diagonal) prefetched along the way. */
        size_t rlast = blk_min(blk_min(j0 + 7 + l, n - 1), blk_reach(reach, j0));
        size_t r = j0 + BLK_NB;
        size_t ngrp = rlast + 1 >= r + 4 ? (rlast + 1 - r) / 4 : 0, g = 0;
        int next = j0 + 2 * BLK_NB <= n;
        const char *pf = (const char *)(c0 + j0) + BLK_PF_DIST; /* block start + dist */
        blk_pf4(pf, 64);
        blk_pf4(pf + 256, 64);
        blk_pf4(pf + 512, 64);
        pf += 768;
        if (next) {
            blk_group_forward(c0, st, j0, l, r, xj, x);
            blk_group_forward(c0, st, j0, l, r + 4, xj, x);
            blk_tri_forward(c0 + BLK_NB * st, st, j0 + BLK_NB, x, xn, acc);
            g = 2;
            r += 8;
        }
        for (; g < ngrp; g++, r += 4, pf += 256) {
            blk_pf4(pf, 64);
            blk_group_forward(c0, st, j0, l, r, xj, x);
        }
        for (; r <= rlast; r++) { /* rows past n - 4 */
            double v = x[r];
            for (size_t k = r > j0 + l ? r - l - j0 : 0; k < BLK_NB; k++)
                v -= c0[k * st + r] * xj[k];
            x[r] = v;
        }
        if (next)
            memcpy(xj, xn, sizeof xj);
    }
    for (size_t j = j0; j < n; j++) { /* the last n mod 8 columns */
        const double *c = d0 + j * st;
        double dj = c[j], inv = 1.0 / dj;
        double xv = x[j] *= inv;
        if (acc)
            band_logdet_add(acc, dj);
        size_t e = blk_min(n - 1, j + l);
        for (size_t i = j + 1; i <= e; i++)
            x[i] -= c[i] * xv;
    }
}

/* x <- L^{-T} x, L and reach as in blk_forward (l >= BLK_NB). */
BAND_INLINE void blk_backward(const double *d0, size_t st, size_t n, size_t l, double *x,
                              const size_t *reach)
{
    size_t i0 = n - n % BLK_NB;
    for (size_t i = n; i-- > i0;) { /* the last n mod 8 rows */
        const double *c = d0 + i * st;
        size_t e = blk_min(n - 1, i + l);
        double inv = 1.0 / c[i];
        double t = x[i] - band_dot_far(c, x, i + 1, e);
        x[i] = t * inv;
    }
    while (i0 > 0) {
        i0 -= BLK_NB;
        const double *c0 = d0 + i0 * st;
        size_t m0 = i0 + BLK_NB, mlast = blk_min(i0 + 7 + l, n - 1);
        size_t ngrp = mlast + 1 >= m0 + 4 ? (mlast + 1 - m0) / 4 : 0, mv = m0 + 4 * ngrp;
        size_t rb = blk_reach(reach, i0);
        if (rb < mv) {
            /* the far rows and the groups below rb are zeros; the groups
             * that remain are those of the full band (the sums' order) */
            ngrp = rb >= m0 ? (rb - m0) / 4 + 1 : 0;
            mlast = mv - 1;
        }
        double far[BLK_NB] = {0};
        /* the far rows first: those past n - 4, then the four-row groups
         * from the bottom up (the masked ones first) */
        for (size_t m = mlast + 1; m-- > mv;) {
            double xm = x[m];
            for (size_t k = m > i0 + l ? m - l - i0 : 0; k < BLK_NB; k++)
                far[k] += c0[k * st + m] * xm;
        }
        blk_v4 a[BLK_NB], xv, lk;
        for (size_t k = 0; k < BLK_NB; k++)
            a[k] = (blk_v4){0.0, 0.0, 0.0, 0.0};
        const char *pf = (const char *)(c0 + i0) - BLK_PF_DIST - 64; /* downwards */
        blk_pf4(pf, -64);
        blk_pf4(pf - 256, -64);
        pf -= 512;
        for (size_t q = ngrp; q-- > 0; pf -= 256) {
            blk_pf4(pf, -64);
            size_t m = m0 + 4 * q;
            blk_ld(&xv, x + m);
            if (m + 3 <= i0 + l)
                BLK_UNROLL
                for (size_t k = 0; k < BLK_NB; k++) {
                    blk_ld(&lk, c0 + k * st + m);
                    a[k] += lk * xv;
                }
            else
                BLK_UNROLL
                for (size_t k = 0; k < BLK_NB; k++) {
                    blk_ld_masked(&lk, c0 + k * st + m, m - i0, k + l);
                    a[k] += lk * xv;
                }
        }
        /* the triangle, bottom-up and right-looking: once x(kk) is known it
         * is taken out of every row above, with L(kk, k) / L(k, k) computed
         * off the chain, so that the step from one unknown to the next is
         * a multiply and a subtraction */
        double xi[BLK_NB], t[BLK_NB], q[BLK_NB][BLK_NB], inv[BLK_NB];
        blk_recip(c0, st, i0, inv);
        BLK_UNROLL
        for (size_t k = 0; k < BLK_NB; k++) {
            const double *c = c0 + k * st; /* column i0 + k */
            BLK_UNROLL
            for (size_t kk = k + 1; kk < BLK_NB; kk++)
                q[k][kk] = c[i0 + kk] * inv[k];
            t[k] = (x[i0 + k] - (far[k] + ((a[k][0] + a[k][1]) + (a[k][2] + a[k][3])))) * inv[k];
        }
        BLK_UNROLL
        for (size_t kk = BLK_NB; kk-- > 0;) {
            xi[kk] = t[kk];
            BLK_UNROLL
            for (size_t k = 0; k < kk; k++)
                t[k] -= q[k][kk] * xi[kk];
        }
        blk_v4 lo = {xi[0], xi[1], xi[2], xi[3]}, hi = {xi[4], xi[5], xi[6], xi[7]};
        blk_st(x + i0, &lo);
        blk_st(x + i0 + 4, &hi);
    }
}

#endif
