/* band_solve_impl.h -- inner steps of the substitutions (partial-sum dot
 * products) and a log-determinant accumulator, shared by band_solve.c and
 * band_solve_rev.c.  Private to src/band/. */
#ifndef GMM_BAND_SOLVE_IMPL_H
#define GMM_BAND_SOLVE_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The hot substitution loops are written once as always-inline functions of
 * the bandwidth l and instantiated for the bandwidths of state-space models
 * (2d - 1, d = 1..8): with l a constant the compiler unrolls the per-column
 * loops, which roughly halves the instructions of the marginal likelihood's
 * solves; other bandwidths take the generic copy. */
#if defined(__GNUC__)
#define BAND_INLINE static inline __attribute__((always_inline))
#else
#define BAND_INLINE static inline
#endif
#define BAND_FIXED_BANDWIDTHS(F) F(1) F(3) F(5) F(7) F(9) F(11) F(13) F(15)
/* When the vector solves take the blocked substitutions of
 * band_solve_blk.h (which need l >= 8) instead of the column-by-column
 * loops: with L^T from l = 8 at any n; with L from l = 8 once L no longer
 * fits a cache (n (l + 1) > 2^19 doubles, 4 MB), and from l = 12 at any n --
 * in cache the unrolled fixed-bandwidth rows of forward_all still win at
 * l = 9 and 11 (tests/bench/bench_band.c, BENCH_OPS=tri_solve). */
#define BLK_MIN_L 8
#define BLK_MIN_L_CACHED 12
#define BLK_CACHED_DOUBLES ((size_t)1 << 19)
static inline int blk_use(size_t n, size_t l, int trans)
{
    return l >= BLK_MIN_L && (trans || l >= BLK_MIN_L_CACHED || n * (l + 1) > BLK_CACHED_DOUBLES);
}

/* sum_{m = m0..e} l[m] x[m] (0 when m0 > e) in four partial sums.  Back
 * substitution x(i) = (b(i) - sum_{m > i} L(m,i) x(m)) / L(i,i) calls it
 * with m0 = i + 2 and adds the term of x(i+1) -- the one produced last --
 * itself: the critical path from x(i+1) to x(i) is then one multiply-add
 * and one multiply (by the reciprocal, computed off the path), not a chain
 * of l dependent additions and a division. */
BAND_INLINE double band_dot_far(const double *l, const double *x, size_t m0, size_t e)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    size_t m = m0;
    for (; m + 3 <= e; m += 4) {
        a0 += l[m] * x[m];
        a1 += l[m + 1] * x[m + 1];
        a2 += l[m + 2] * x[m + 2];
        a3 += l[m + 3] * x[m + 3];
    }
    for (; m <= e; m++)
        a0 += l[m] * x[m];
    return (a0 + a1) + (a2 + a3);
}

/* sum_{m < cnt} l[m * st] x[m]: band_dot_far along a row of a band (stride
 * st = ld - 1 between its entries). */
BAND_INLINE double band_dot_far_strided(const double *l, size_t st, const double *x, size_t cnt)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    size_t m = 0;
    for (; m + 4 <= cnt; m += 4) {
        a0 += l[m * st] * x[m];
        a1 += l[(m + 1) * st] * x[m + 1];
        a2 += l[(m + 2) * st] * x[m + 2];
        a3 += l[(m + 3) * st] * x[m + 3];
    }
    for (; m < cnt; m++)
        a0 += l[m * st] * x[m];
    return (a0 + a1) + (a2 + a3);
}

/* log of a product of many positive numbers without a log per factor: the
 * factors' binary exponents are summed as integers and their mantissas (in
 * [1, 2)) multiplied, renormalised every 32 factors (a product of 32 stays
 * below 2^32); one log at the end.  A factor that is not a positive normal
 * number (subnormal, zero, negative, inf, NaN) goes through log() itself, so
 * the result is what a sum of logs would give (-inf, NaN) in those cases.
 * Used for log det(L L^T) = 2 sum log L(i,i): the relative rounding of the
 * mantissa product is about sqrt(n) eps, an absolute error of the same size
 * in the log-determinant. */
typedef struct {
    double mant, slow;
    int64_t expo;
    unsigned count;
} band_logdet;

BAND_INLINE void band_logdet_init(band_logdet *a)
{
    a->mant = 1.0;
    a->slow = 0.0;
    a->expo = 0;
    a->count = 0;
}

/* v = mantissa * 2^exponent with the mantissa in [1, 2); 0 unless v is a
 * positive normal number. */
BAND_INLINE int band_split(double v, double *mant, int64_t *expo)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    uint64_t e = (b >> 52) & 0x7ff;
    if ((b >> 63) || e == 0 || e == 0x7ff)
        return 0;
    *expo = (int64_t)e - 1023;
    b = (b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
    memcpy(mant, &b, sizeof b);
    return 1;
}

BAND_INLINE void band_logdet_add(band_logdet *a, double v)
{
    double mv;
    int64_t ev;
    if (!band_split(v, &mv, &ev)) {
        a->slow += log(v);
        return;
    }
    a->mant *= mv;
    a->expo += ev;
    if (++a->count == 32) {
        double mm = 1.0;
        int64_t em = 0;
        band_split(a->mant, &mm, &em); /* in [1, 2^32): always normal */
        a->mant = mm;
        a->expo += em;
        a->count = 0;
    }
}

/* 2 (log(mantissa product) + exponent sum log 2 + the slow logs). */
BAND_INLINE double band_logdet_value(const band_logdet *a)
{
    return 2.0 * (log(a->mant) + (double)a->expo * 0.69314718055994530942 + a->slow);
}

#endif
