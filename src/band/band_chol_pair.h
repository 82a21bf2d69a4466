/* band_chol_pair.h -- one step of the unblocked banded Cholesky
 * (band_chol.c), included twice there: as chol_pair with plain loops (any
 * bandwidth, any position) and as chol_pair_unrolled with every loop
 * unrolled (CHOL_UNROLL), for the fixed-bandwidth copies away from the end of
 * the band.  One text, so the two cannot drift apart; both perform the same
 * operations in the same order, so their results are identical.
 *
 * Before inclusion: CHOL_PAIR names the step, CHOL_UNROLL precedes each
 * loop.  No include guard. */

/* Columns (j, j+1), whose last rows are e0 and e1 (e0 <= e1 <= e0 + 1).
 * Returns 0, or 1 / 2 when the pivot of column j / j+1 is not acceptable
 * (its value in *bad).  Away from the end of the band e0 = j + bw and
 * e1 = j + 1 + bw, so with bw a compile-time constant every loop has a
 * constant trip count. */
BAND_INLINE int CHOL_PAIR(double *a, size_t j, size_t e0, size_t e1, size_t s, double *bad)
{
    double *restrict c0 = a + j * s; /* c0[i] = A(i, j)   */
    double *restrict c1 = c0 + s;    /* c1[i] = A(i, j+1) */
    double d0 = c0[j];
    if (!pivot_ok(d0)) {
        *bad = d0;
        return 1;
    }
    double r0 = 1.0 / d0;
    double f = c0[j + 1] * r0;
    CHOL_UNROLL
    for (size_t i = j + 1; i <= e0; i++)
        c1[i] -= c0[i] * f;
    double d1 = c1[j + 1];
    if (!pivot_ok(d1)) {
        *bad = d1;
        return 2;
    }
    double r1 = 1.0 / d1;
    CHOL_UNROLL
    for (size_t q = j + 2; q <= e1; q++) {
        double *restrict cq = a + q * s;
        double f0 = q <= e0 ? c0[q] * r0 : 0.0; /* row q may lie past column j's band */
        double f1 = c1[q] * r1;
        size_t i = q;
        CHOL_UNROLL
        for (; i <= e0; i++)
            cq[i] -= c0[i] * f0 + c1[i] * f1;
        if (i <= e1) /* row j+1+bw: in column j+1's band only */
            cq[i] -= c1[i] * f1;
    }
    double s0 = sqrt(d0), s1 = sqrt(d1), i0 = 1.0 / s0, i1 = 1.0 / s1;
    c0[j] = s0;
    c1[j + 1] = s1;
    CHOL_UNROLL
    for (size_t i = j + 1; i <= e0; i++)
        c0[i] *= i0;
    CHOL_UNROLL
    for (size_t i = j + 2; i <= e1; i++)
        c1[i] *= i1;
    return 0;
}

