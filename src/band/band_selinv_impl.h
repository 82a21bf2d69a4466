/* band_selinv_impl.h -- a kernel shared by band_selinv.c and
 * band_selinv_rev.c.  Private to src/band/. */
#ifndef GMM_BAND_SELINV_IMPL_H
#define GMM_BAND_SELINV_IMPL_H

#include <stddef.h>

/* x . y over m entries with four partial sums: a single-accumulator loop is
 * bound by the latency of its add chain (it cannot be vectorised without
 * reassociation), and these short dots are a large share of the work. */
static inline double selinv_dot(const double *x, const double *y, size_t m)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t t = 0;
    for (; t + 4 <= m; t += 4) {
        s0 += x[t] * y[t];
        s1 += x[t + 1] * y[t + 1];
        s2 += x[t + 2] * y[t + 2];
        s3 += x[t + 3] * y[t + 3];
    }
    for (; t < m; t++)
        s0 += x[t] * y[t];
    return (s0 + s1) + (s2 + s3);
}

#endif
