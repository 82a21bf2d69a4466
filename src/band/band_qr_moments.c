/* band_qr_moments.c -- the moments of the rows of a fold from its tape
 * (band.h section 6, gmm_band_chol_rows_moments; ROW MOMENTS below), and the
 * block products its callers apply to them. */
#include "gmm/band.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "band_qr_impl.h"

/* ROW MOMENTS (gmm_band_chol_rows_moments).  Write every row of the fold as
 * a linear form in x (R's rows R_j x; the input rows a_i'x).  Under x ~
 * N(mu, (R'R)^-1) with R mu = z, R x has mean z and covariance I: once
 * final, R's rows are independent with unit variance; a row reduced to
 * zero is the constant 0.  A call's fold maps the rows before it to the
 * rows after it orthogonally (TAPE), so the moments before follow from
 * those after by the inverse map (UNFOLD) -- no product with the rows' own
 * (possibly huge) entries, no difference of nearly equal covariances.
 * Each row's covariance is kept as I - D D' (D: lanes 0 .. r - 1 of its
 * slot, the mean in lane r): a row reduced to zero is a unit lane, a final
 * R row an empty one, and R's rows J that a block pivots on (deposited by
 * earlier calls) carry theirs from the later blocks: blocks are undone
 * from the last to the first, J's D compressed to |J| lanes by an LQ
 * factorisation between them.  A block's input rows then have
 *
 *   E[a a'] - I = -D_a D_a' + m_a m_a',
 *   E[a e_J'] = -D_a D_J' + m_a m_J',    e_J = F_J x_J (R's rows J as the
 *                                         block found them: TAPE),
 *   E[a x_J'] = E[a e_J'] F_J^-T.
 *
 * Cost: the fold's reflections once more on r + 1 lanes (r = |J| + rows
 * reduced to zero), and O((m + |J|)^2 r) per block for the products. */

/* a . b over lw lanes (a multiple of 4). */
BAND_INLINE double dot_lanes(const double *restrict a, const double *restrict b, size_t lw)
{
    v4d acc = {0.0, 0.0, 0.0, 0.0}, x, y;
    for (size_t l = 0; l < lw; l += 4) {
        ld4(&x, a + l);
        ld4(&y, b + l);
        acc += x * y;
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* W (p x p, row-major, lower triangular) with W W' = Z, Z the p x p Gram
 * matrix (lower triangle read, in W) of rows whose entries are at most 1 in
 * size: W = L' diag(sqrt(dg)) from Z = L' diag(dg) L'' (L' unit lower
 * triangular: one division per column on the critical path, the square
 * roots independent), a pivot at or below 8 eps p (Z singular up to
 * rounding) giving a zero column.  Returns the smallest nonzero |pivot|:
 * below LDL_PIVOT_MIN the caller redoes W by lanes_lq. */
BAND_INLINE double gram_ldl(double *restrict W, size_t p, double *restrict dg)
{
    /* W: Z's lower triangle in, U = L' diag(dg) built in place (column j
     * done before j + 1); Lu (after dg): L' itself */
    double tiny = 8.0 * DBL_EPSILON * (double)p, *Lu = dg + p, dmin = INFINITY;
    for (size_t j = 0; j < p; j++) {
        double djj = W[j * p + j];
        for (size_t k = 0; k < j; k++)
            djj -= W[j * p + k] * Lu[j * p + k];
        int keep = djj > tiny;
        dmin = djj != 0.0 && fabs(djj) < dmin ? fabs(djj) : dmin;
        double id = keep ? 1.0 / djj : 0.0;
        dg[j] = keep ? djj : 0.0;
        for (size_t i = j + 1; i < p; i++) {
            double t = W[i * p + j];
            for (size_t k = 0; k < j; k++)
                t -= W[i * p + k] * Lu[j * p + k];
            W[i * p + j] = keep ? t : 0.0;
            Lu[i * p + j] = t * id;
        }
    }
    for (size_t j = 0; j < p; j++) {
        double sq = sqrt(dg[j]);
        W[j * p + j] = sq;
        for (size_t i = j + 1; i < p; i++)
            W[i * p + j] = Lu[i * p + j] * sq;
        for (size_t k = j + 1; k < p; k++)
            W[j * p + k] = 0.0;
    }
    return dmin;
}

/* The same W from the lanes themselves: an LQ factorisation D = [W 0] Q
 * (D the lanes 0 .. r - 1 of the nf rows of S, stride lw; lane r, the
 * mean, left out) by Householder reflections from the right, in T (nf x
 * lw) and u (lw).  Orthogonal: W W' keeps D D' to rounding relative to D's
 * entries (at most 1 in size) however near singular D D' is.  The Gram
 * route did not when a pivot was small: on a test's ill-conditioned random
 * chain (test_marglik, shape 10) the row moments came out 1e-9 off, and
 * which way the unfold summed its products decided whether they passed;
 * with this fallback 1.3e-13 either way.  About twice gram_ldl's time, so
 * only there (the CO2 model: 1 block of 600). */
#define LDL_PIVOT_MIN 1e-6
BAND_INLINE void lanes_lq(const double *restrict S, size_t lw, size_t r, size_t nf,
                          double *restrict W, double *restrict T, double *restrict u)
{
    v4d a, b, z = {0.0, 0.0, 0.0, 0.0};
    for (size_t c = 0; c < nf; c++) {
        memcpy(T + c * lw, S + c * lw, lw * sizeof *T);
        T[c * lw + r] = 0.0;
    }
    for (size_t c = 0; c < nf && c < r; c++) {
        double *tc = T + c * lw, nrm2 = 0.0;
        for (size_t l = c; l < r; l++)
            nrm2 += tc[l] * tc[l];
        if (!(nrm2 > 0.0))
            continue;
        double nrm = sqrt(nrm2), a0 = tc[c], beta = a0 >= 0.0 ? -nrm : nrm;
        double den = nrm2 - a0 * beta; /* |u|^2 / 2, no cancellation */
        for (size_t l = 0; l < lw; l += 4)
            st4(u + l, &z);
        for (size_t l = c; l < r; l++)
            u[l] = tc[l];
        u[c] = a0 - beta;
        for (size_t c2 = c + 1; c2 < nf; c2++) {
            double *t2 = T + c2 * lw;
            v4d acc = z;
            for (size_t l = 0; l < lw; l += 4) {
                ld4(&a, u + l);
                ld4(&b, t2 + l);
                acc += a * b;
            }
            double dd = ((acc[0] + acc[1]) + (acc[2] + acc[3])) / den;
            for (size_t l = 0; l < lw; l += 4) {
                ld4(&a, u + l);
                ld4(&b, t2 + l);
                b -= dd * a;
                st4(t2 + l, &b);
            }
        }
        tc[c] = beta;
    }
    for (size_t c = 0; c < nf; c++)
        for (size_t c2 = 0; c2 < nf; c2++)
            W[c * nf + c2] = c2 <= c && c2 < r ? T[c * lw + c2] : 0.0;
}

/* A TA x TB tile of moment_gram (TA, TB <= 2) on 4 NV lanes (NV a
 * constant; 0: any lw).  Two sums per pair (even and odd vectors), named
 * rather than an array, which GCC would keep in memory: the chains are
 * about nt NV / 2 long. */
BAND_INLINE void gram_tile(const size_t NV, const size_t TA, const size_t TB,
                           const double *restrict a, const double *restrict b, size_t lw,
                           size_t r, size_t stride, size_t nt, double *restrict out, size_t ldo)
{
    v4d z = {0.0, 0.0, 0.0, 0.0};
    v4d e00 = z, o00 = z, e01 = z, o01 = z, e10 = z, o10 = z, e11 = z, o11 = z;
    double r00 = 0.0, r01 = 0.0, r10 = 0.0, r11 = 0.0;
    const size_t nv = NV ? NV : lw / 4;
    for (size_t t = 0; t < nt; t++, a += stride, b += stride) {
        for (size_t v = 0; v < nv; v += 2) {
            v4d x0, x1 = z, y0, y1 = z;
            ld4(&x0, a + 4 * v);
            ld4(&y0, b + 4 * v);
            if (TA > 1)
                ld4(&x1, a + lw + 4 * v);
            if (TB > 1)
                ld4(&y1, b + lw + 4 * v);
            e00 += x0 * y0;
            if (TB > 1)
                e01 += x0 * y1;
            if (TA > 1)
                e10 += x1 * y0;
            if (TA > 1 && TB > 1)
                e11 += x1 * y1;
            if (v + 1 < nv) {
                ld4(&x0, a + 4 * v + 4);
                ld4(&y0, b + 4 * v + 4);
                if (TA > 1)
                    ld4(&x1, a + lw + 4 * v + 4);
                if (TB > 1)
                    ld4(&y1, b + lw + 4 * v + 4);
                o00 += x0 * y0;
                if (TB > 1)
                    o01 += x0 * y1;
                if (TA > 1)
                    o10 += x1 * y0;
                if (TA > 1 && TB > 1)
                    o11 += x1 * y1;
            }
        }
        r00 += a[r] * b[r];
        if (TB > 1)
            r01 += a[r] * b[lw + r];
        if (TA > 1)
            r10 += a[lw + r] * b[r];
        if (TA > 1 && TB > 1)
            r11 += a[lw + r] * b[lw + r];
    }
#define GRAM_OUT(o, e, od, rr)                                                                   \
    do {                                                                                         \
        v4d s_ = (e) + (od);                                                                     \
        (o) += 2.0 * (rr) - ((s_[0] + s_[1]) + (s_[2] + s_[3]));                                \
    } while (0)
    GRAM_OUT(out[0], e00, o00, r00);
    if (TB > 1)
        GRAM_OUT(out[1], e01, o01, r01);
    if (TA > 1)
        GRAM_OUT(out[ldo], e10, o10, r10);
    if (TA > 1 && TB > 1)
        GRAM_OUT(out[ldo + 1], e11, o11, r11);
#undef GRAM_OUT
}

BAND_INLINE void gram_nv(const size_t NV, const double *restrict a, size_t na,
                         const double *restrict b, size_t nb, size_t lw, size_t r,
                         size_t stride, size_t nt, double *restrict out, size_t ldo)
{
    for (size_t i = 0; i < na; i += 2)
        for (size_t k = 0; k < nb; k += 2) {
            const double *ai = a + i * lw, *bk = b + k * lw;
            double *o = out + i * ldo + k;
            int ta = na - i >= 2, tb = nb - k >= 2;
            if (ta && tb)
                gram_tile(NV, 2, 2, ai, bk, lw, r, stride, nt, o, ldo);
            else if (ta)
                gram_tile(NV, 2, 1, ai, bk, lw, r, stride, nt, o, ldo);
            else if (tb)
                gram_tile(NV, 1, 2, ai, bk, lw, r, stride, nt, o, ldo);
            else
                gram_tile(NV, 1, 1, ai, bk, lw, r, stride, nt, o, ldo);
        }
}

BAND_INLINE void moment_gram(const double *restrict a, size_t na, const double *restrict b,
                             size_t nb, size_t lw, size_t r, size_t stride, size_t nt,
                             double *restrict out, size_t ldo)
{
    switch (lw) {
    case 4:
        gram_nv(1, a, na, b, nb, lw, r, stride, nt, out, ldo);
        break;
    case 8:
        gram_nv(2, a, na, b, nb, lw, r, stride, nt, out, ldo);
        break;
    case 12:
        gram_nv(3, a, na, b, nb, lw, r, stride, nt, out, ldo);
        break;
    case 16:
        gram_nv(4, a, na, b, nb, lw, r, stride, nt, out, ldo);
        break;
    default:
        gram_nv(0, a, na, b, nb, lw, r, stride, nt, out, ldo);
    }
}

/* lanes_mix on 4 NV lanes (NV a constant: each output row in
 * registers -- named sums, not an array, which GCC would keep in memory;
 * 0: any lw, a vector at a time). */
BAND_INLINE void lanes_mix_nv(const size_t NV, size_t lw, size_t no, const double *restrict M,
                              size_t ldm, const double *restrict a, size_t na,
                              const double *restrict N, size_t ldn, const double *restrict b,
                              size_t nb, double *restrict out)
{
#define MIX_TERM(c, p)                                                                           \
    do {                                                                                         \
        v4d t_;                                                                                  \
        ld4(&t_, (p));                                                                           \
        s0 += (c) * t_;                                                                          \
        if (NV > 1) {                                                                            \
            ld4(&t_, (p) + 4);                                                                   \
            s1 += (c) * t_;                                                                      \
        }                                                                                        \
        if (NV > 2) {                                                                            \
            ld4(&t_, (p) + 8);                                                                   \
            s2 += (c) * t_;                                                                      \
        }                                                                                        \
        if (NV > 3) {                                                                            \
            ld4(&t_, (p) + 12);                                                                  \
            s3 += (c) * t_;                                                                      \
        }                                                                                        \
    } while (0)
    for (size_t i = 0; i < no; i++)
        for (size_t q = 0; q < (NV ? 1 : lw / 4); q++) {
            v4d s0 = {0.0, 0.0, 0.0, 0.0}, s1 = s0, s2 = s0, s3 = s0;
            double *o = out + i * lw + 4 * q;
            for (size_t j = 0; j < na; j++)
                MIX_TERM(M[i * ldm + j], a + j * lw + 4 * q);
            for (size_t j = 0; N && j < nb; j++)
                MIX_TERM(N[i * ldn + j], b + j * lw + 4 * q);
            st4(o, &s0);
            if (NV > 1)
                st4(o + 4, &s1);
            if (NV > 2)
                st4(o + 8, &s2);
            if (NV > 3)
                st4(o + 12, &s3);
        }
#undef MIX_TERM
}

BAND_INLINE void lanes_mix(size_t lw, size_t no, const double *restrict M, size_t ldm,
                           const double *restrict a, size_t na, const double *restrict N,
                           size_t ldn, const double *restrict b, size_t nb,
                           double *restrict out)
{
    switch (lw) {
    case 4:
        lanes_mix_nv(1, lw, no, M, ldm, a, na, N, ldn, b, nb, out);
        break;
    case 8:
        lanes_mix_nv(2, lw, no, M, ldm, a, na, N, ldn, b, nb, out);
        break;
    case 12:
        lanes_mix_nv(3, lw, no, M, ldm, a, na, N, ldn, b, nb, out);
        break;
    case 16:
        lanes_mix_nv(4, lw, no, M, ldm, a, na, N, ldn, b, nb, out);
        break;
    default:
        lanes_mix_nv(0, lw, no, M, ldm, a, na, N, ldn, b, nb, out);
    }
}

/* The two on the diagonal blocks of a block-diagonal map (band.h), one
 * body for both copies. */
BAND_INLINE void gram_blocks(size_t lw, size_t r, size_t nblk, const size_t *boff,
                             const double *a, const double *b, size_t stride, size_t nt,
                             double *out, size_t ldo)
{
    for (size_t k = 0; k < nblk; k++) {
        size_t o = boff[k], s = boff[k + 1] - o;
        moment_gram(a + o * lw, s, b + o * lw, s, lw, r, stride, nt, out + o * ldo + o, ldo);
    }
}

BAND_INLINE void mix_blocks(size_t lw, size_t nblk, const size_t *boff, const double *M,
                            size_t ldm, const double *a, const double *N, size_t ldn,
                            const double *b, double *out)
{
    for (size_t k = 0; k < nblk; k++) {
        size_t o = boff[k], s = boff[k + 1] - o;
        lanes_mix(lw, s, M + o * ldm + o, ldm, a + o * lw, s, N ? N + o * ldn + o : NULL, ldn,
                  b ? b + o * lw : NULL, s, out + o * lw);
    }
}

static void gram_blocks_plain(size_t lw, size_t r, size_t nblk, const size_t *boff,
                              const double *a, const double *b, size_t stride, size_t nt,
                              double *out, size_t ldo)
{
    gram_blocks(lw, r, nblk, boff, a, b, stride, nt, out, ldo);
}

static void mix_blocks_plain(size_t lw, size_t nblk, const size_t *boff, const double *M,
                             size_t ldm, const double *a, const double *N, size_t ldn,
                             const double *b, double *out)
{
    mix_blocks(lw, nblk, boff, M, ldm, a, N, ldn, b, out);
}

#if BAND_AVX2
BAND_TARGET_AVX2 static void gram_blocks_avx2(size_t lw, size_t r, size_t nblk,
                                              const size_t *boff, const double *a,
                                              const double *b, size_t stride, size_t nt,
                                              double *out, size_t ldo)
{
    gram_blocks(lw, r, nblk, boff, a, b, stride, nt, out, ldo);
}

BAND_TARGET_AVX2 static void mix_blocks_avx2(size_t lw, size_t nblk, const size_t *boff,
                                             const double *M, size_t ldm, const double *a,
                                             const double *N, size_t ldn, const double *b,
                                             double *out)
{
    mix_blocks(lw, nblk, boff, M, ldm, a, N, ldn, b, out);
}
#endif

void gmm_band_moment_gram_blocks(const gmm_band_block_moments *bm, size_t nblk,
                                 const size_t *boff, const double *a, const double *b,
                                 size_t stride, size_t nt, double *out, size_t ldo)
{
#if BAND_AVX2
    if (band_cpu_has_avx2()) {
        gram_blocks_avx2(bm->lw, bm->r, nblk, boff, a, b, stride, nt, out, ldo);
        return;
    }
#endif
    gram_blocks_plain(bm->lw, bm->r, nblk, boff, a, b, stride, nt, out, ldo);
}

void gmm_band_lanes_mix_blocks(size_t lw, size_t nblk, const size_t *boff, const double *M,
                               size_t ldm, const double *a, const double *N, size_t ldn,
                               const double *b, double *out)
{
#if BAND_AVX2
    if (band_cpu_has_avx2()) {
        mix_blocks_avx2(lw, nblk, boff, M, ldm, a, N, ldn, b, out);
        return;
    }
#endif
    mix_blocks_plain(lw, nblk, boff, M, ldm, a, N, ldn, b, out);
}

/* X = F^-1 S_J (nj x lw, by back substitution on whole rows: x_J = F^-1
 * e_J, so x_c's lanes are those combinations of J's) and W (nf x nf) with
 * W W' = D D' for the nf filled rows (the next state), from the unfolded
 * rows S (R's rows c0 .. at 0 ..; lw lanes, the mean in lane r, lanes past
 * r zero). */
BAND_INLINE void block_moments(const double *restrict S, size_t lw, size_t r, size_t nj,
                               size_t nf, const double *restrict F, double *restrict X,
                               double *restrict W, double *restrict T)
{
    for (size_t c = 0; c < nf; c++)
        for (size_t c2 = 0; c2 <= c; c2++) {
            const double *a = S + c * lw, *b = S + c2 * lw;
            W[c * nf + c2] = dot_lanes(a, b, lw) - a[r] * b[r];
        }
    if (gram_ldl(W, nf, T) < LDL_PIVOT_MIN)
        lanes_lq(S, lw, r, nf, W, T, T + nf * lw);
    for (size_t c = nj; c-- > 0;) {
        double *xc = X + c * lw, id = 1.0 / F[c * nj + c];
        v4d acc, t;
        for (size_t l = 0; l < lw; l += 4) {
            ld4(&acc, S + c * lw + l);
            for (size_t c2 = c + 1; c2 < nj; c2++) {
                ld4(&t, X + c2 * lw + l);
                acc -= F[c * nj + c2] * t;
            }
            acc *= id;
            st4(xc + l, &acc);
        }
    }
}

static void block_moments_plain(const double *S, size_t lw, size_t r, size_t nj, size_t nf,
                                const double *F, double *X, double *W, double *T)
{
    block_moments(S, lw, r, nj, nf, F, X, W, T);
}

#if BAND_AVX2
BAND_TARGET_AVX2 static void block_moments_avx2(const double *S, size_t lw, size_t r,
                                                size_t nj, size_t nf, const double *F,
                                                double *X, double *W, double *T)
{
    block_moments(S, lw, r, nj, nf, F, X, W, T);
}
#endif

gmm_status gmm_band_chol_rows_moments(const gmm_band_tape *tape, const double *z, size_t n,
                                      gmm_band_moments_fn fn, void *ctx, gmm_band_tape *work)
{
    gmm_status st;
    if (!tape || !z || !fn || !work)
        return gmm_error(GMM_EINVAL, "band_chol_rows_moments: NULL argument");
    /* the blocks from the last (tape->last) back through their links; the
     * state takes at most span rows of span + 1 (the span is the tape's) */
    if (tape->len == 0)
        return GMM_OK;
    tape_block tl = {0};
    if ((st = gmm_band_tape_block_at(tape, tape->last, &tl)))
        return st;
    if (tl.next != tape->len)
        return gmm_error(GMM_EINVAL, "band_chol_rows_moments: the tape's last block is not "
                                     "at its end");
    size_t fmax = tl.span, sbase = fmax * (fmax + 1);
    if (grow_buf(work, sbase))
        return gmm_error(GMM_ENOMEM, "band_chol_rows_moments: out of memory");
    /* the state: R's rows slo .. shi - 1 still to be folded by the blocks
     * after (those b + 1 found filled), rs lanes of D and the mean */
    size_t slo = 0, shi = 0, rs = 0, c0next = SIZE_MAX;
    for (size_t pos = tape->last, b = 0; pos != SIZE_MAX; b++) {
        tape_block tb = {0};
        if ((st = gmm_band_tape_block_at(tape, pos, &tb)))
            return st;
        if (tb.c0 > c0next || tb.span != fmax)
            return gmm_error(GMM_EINVAL, "band_chol_rows_moments: block at %zu starts at column "
                                         "%zu, after the block after it (%zu)",
                             pos, tb.c0, c0next);
        c0next = tb.c0;
        pos = tb.prev;
        if (pos != SIZE_MAX) /* the block before, while this one is undone: the tape streams backwards */
            for (size_t q = pos; q < tb.dest; q += 8)
                __builtin_prefetch(tape->data + q);
        const double *dest = tape->data + tb.dest;
        size_t c0 = tb.c0, m = tb.m, nj = tb.nj, nf = tb.fill, hiR = tb.cend, nz = 0;
        if (c0 + nf > hiR)
            hiR = c0 + nf;
        if (shi > hiR)
            hiR = shi;
        if (hiR > n)
            return gmm_error(GMM_EDIM, "band_chol_rows_moments: rows up to %zu of %zu", hiR, n);
        /* a row still to be folded beyond the span the block looked at for
         * filled rows must be its own deposit (else an earlier block filled
         * it, and leaving the state it would be lost): the block's deposits
         * are distinct rows, so counting those in the range suffices */
        size_t jlo = c0 + tb.span > slo ? c0 + tb.span : slo, nin = 0;
        for (size_t i = 0; i < m; i++) {
            nz += dest[i] < 0.0;
            nin += dest[i] >= (double)jlo && dest[i] < (double)shi;
        }
        if (jlo < shi && nin != shi - jlo)
            return gmm_error(GMM_EINVAL, "band_chol_rows_moments: an R row from %zu to %zu was "
                                         "filled more than %zu columns after block %zu's first",
                             jlo, shi - 1, tb.span, b);
        size_t nR = hiR - c0, r = rs + nz, lw = (r + 4) / 4 * 4;
        size_t need = (nR + m) * lw + nj * lw + nf * nf + (nf + 1) * lw + nf * nf + nf;
        if (grow_buf(work, sbase + need + ALIGN_SLACK))
            return gmm_error(GMM_ENOMEM, "band_chol_rows_moments: out of memory");
        double *state = work->data, *S = align_lines(work->data + sbase);
        double *X = S + (nR + m) * lw, *W = X + nj * lw, *T = W + nf * nf;
        memset(S, 0, (nR + m) * lw * sizeof *S);
        for (size_t j = c0; j < hiR; j++) {
            double *row = S + (j - c0) * lw;
            if (j >= slo && j < shi) {
                const double *sr = state + (j - slo) * (rs + 1);
                memcpy(row, sr, rs * sizeof *row);
                row[r] = sr[rs];
            } else {
                row[r] = z[j]; /* final: mean z_j, unit variance */
            }
        }
        for (size_t i = 0, zi = rs; i < m; i++)
            if (dest[i] < 0.0)
                S[(nR + i) * lw + zi++] = 1.0; /* reduced to zero */
        const double *body = tape->data + tb.body;
        gmm_band_tape_unfold(body, tb.blen, c0, nR, S, lw, lw);
#if BAND_AVX2
        if (band_cpu_has_avx2())
            block_moments_avx2(S, lw, r, nj, nf, tb.F, X, W, T);
        else
#endif
            block_moments_plain(S, lw, r, nj, nf, tb.F, X, W, T);
        gmm_band_block_moments bm = {c0, m, nj, lw, r, S + nR * lw, X};
        if ((st = fn(ctx, b, &bm)))
            return st;
        /* the next state: the filled rows, D = W (nf lanes), their means */
        for (size_t j = 0; j < nf; j++) {
            double *sr = state + j * (nf + 1);
            memcpy(sr, W + j * nf, nf * sizeof *sr);
            sr[nf] = S[j * lw + r];
        }
        slo = c0;
        shi = c0 + nf;
        rs = nf;
    }
    return GMM_OK;
}
