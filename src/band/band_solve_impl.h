/* band_solve_impl.h -- the inner step of back substitution, shared by
 * band_solve.c and band_solve_rev.c.  Private to src/band/. */
#ifndef GMM_BAND_SOLVE_IMPL_H
#define GMM_BAND_SOLVE_IMPL_H

#include <stddef.h>

/* The hot substitution loops are written once as always-inline functions of
 * the bandwidth l and instantiated for the bandwidths of state-space models
 * (2d - 1, d = 1..8): with l a constant the compiler unrolls the per-column
 * loops (measured: the marginal likelihood's solves take about half the
 * instructions), other bandwidths take the generic copy. */
#if defined(__GNUC__)
#define BAND_INLINE static inline __attribute__((always_inline))
#else
#define BAND_INLINE static inline
#endif
#define BAND_FIXED_BANDWIDTHS(F) F(1) F(3) F(5) F(7) F(9) F(11) F(13) F(15)

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

#endif
