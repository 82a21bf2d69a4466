/* band_qr_fold.c -- the Cholesky factor of M^T M from a block of rows of M
 * at once (band.h section 6, gmm_band_chol_add_rows): Householder
 * reflections with row pivoting (BLOCK FOLD), optionally recorded on a tape
 * (band_qr_impl.h, TAPE) for the reverse (band_qr_unfold.c) and the row
 * moments (band_qr_moments.c).  Compiled with the Makefile's NO_LDP: its
 * short row copies must stay inline loops. */
#include "gmm/band.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "band_qr_impl.h"

/* Below this, squares of the entries lose precision (DBL_MIN / eps). */
#define SAFMIN (DBL_MIN / DBL_EPSILON)

/* BLOCK FOLD (gmm_band_chol_add_rows).  The rows live in Y (row i at Y + i
 * cap, column j at slot j - base), each copied in when the sweep reaches its
 * first column.  Rows lo .. na - 1 are active: zero left of column j and, by
 * the band, right of j + kl.  At column j one Householder reflection zeroes
 * column j of the active rows against a pivot row:
 *   - R's row j (column j of L) when it is nonempty: every active row stays;
 *   - else the first active row, which then becomes R's row j (a deposit)
 *     and leaves the block.
 * ROW PIVOTING: first the row with the largest entry in column j is swapped
 * into the pivot (a row permutation of M: M^T M does not change).  Without
 * it a pivot much smaller than an incoming row makes the reflection a near
 * swap computed as y - (y - p): a small row comes out with the absolute
 * error of the large one (eps x 1e10 for a transition row at dt/l = 1e-4,
 * enough to put the state-space loglik off by 1e-4).  With it, as for Givens
 * rotations, each row keeps an error relative to its own size (Powell and
 * Reid; Cox and Higham, IMA J. Numer. Anal. 18, 1998).
 * The reflection H = I - t u u', u = [p - |(p, x)|; x] (x the column below
 * the pivot p; u_0 by Parlett's cancellation-free formula when p > 0, so the
 * new diagonal is positive), is applied to slots j .. j + kl of the pivot
 * and the active rows.  When |x|^2 is out of the range where squaring is
 * exact enough, u is scaled by |p| first (H does not change); below 1e-146
 * |p|, x is dropped (it perturbs M^T M far below rounding).  One square
 * root and one division per column instead of one per row and column. */

/* What a reflection did besides reflecting, for the tape (TAPE below): the
 * row swapped into the pivot (SIZE_MAX: none) and whether the pivot was
 * negated. */
typedef struct {
    size_t imax;
    int neg;
} refl_info;

/* The reflection's scalars for column j, after pivoting (the pivot p and
 * the active rows i0 .. i1 - 1 at slot r, nl slots each, x[i] = row i's
 * entry in column j): 1 with alpha = p[0] >= 0, sigma = |x|^2 and the
 * scale sc of u; 0 when there is nothing to reflect, *changed saying
 * whether the rows were modified all the same (a swap, or a negligible x
 * dropped). */
/* The first largest |entry| of the column -- the pivot's alpha, then x[i0
 * .. i1) -- by four chains over the rows merged at the end (the pivot
 * first on ties): its row (SIZE_MAX: the pivot), |entry| and entry, and
 * the column's norm nu = |(alpha, x)|, which pivoting does not change. */
BAND_INLINE size_t pivot_search(double alpha, const double *restrict x, size_t i0, size_t i1,
                                double *amax, double *xa_out, double *nu_out)
{
    /* chain c: amax, its entry, its key (0: the pivot, else 1 + the row),
     * the sum of squares */
#define PIV_STEP(am, xv, ky, ss, idx)                                                            \
    do {                                                                                         \
        double v_ = x[idx], av_ = fabs(v_);                                                      \
        int gt_ = av_ > am;                                                                      \
        ky = gt_ ? (idx) + 1 : ky;                                                               \
        xv = gt_ ? v_ : xv;                                                                      \
        am = gt_ ? av_ : am;                                                                     \
        ss += v_ * v_;                                                                           \
    } while (0)
#define PIV_MERGE(am, xv, ky, bm, xb, kb)                                                        \
    do {                                                                                         \
        int tb_ = bm > am || (bm == am && kb < ky);                                              \
        ky = tb_ ? kb : ky;                                                                      \
        xv = tb_ ? xb : xv;                                                                      \
        am = tb_ ? bm : am;                                                                      \
    } while (0)
    double am0 = fabs(alpha), am1 = -1.0, am2 = -1.0, am3 = -1.0;
    double xv0 = alpha, xv1 = 0.0, xv2 = 0.0, xv3 = 0.0;
    double ss0 = alpha * alpha, ss1 = 0.0, ss2 = 0.0, ss3 = 0.0;
    size_t k0 = 0, k1 = 0, k2 = 0, k3 = 0, i = i0;
    for (; i + 3 < i1; i += 4) {
        PIV_STEP(am0, xv0, k0, ss0, i);
        PIV_STEP(am1, xv1, k1, ss1, i + 1);
        PIV_STEP(am2, xv2, k2, ss2, i + 2);
        PIV_STEP(am3, xv3, k3, ss3, i + 3);
    }
    if (i < i1)
        PIV_STEP(am0, xv0, k0, ss0, i);
    if (i + 1 < i1)
        PIV_STEP(am1, xv1, k1, ss1, i + 1);
    if (i + 2 < i1)
        PIV_STEP(am2, xv2, k2, ss2, i + 2);
    PIV_MERGE(am0, xv0, k0, am2, xv2, k2);
    PIV_MERGE(am1, xv1, k1, am3, xv3, k3);
    PIV_MERGE(am0, xv0, k0, am1, xv1, k1);
#undef PIV_STEP
#undef PIV_MERGE
    *amax = am0;
    *xa_out = xv0;
    *nu_out = sqrt((ss0 + ss1) + (ss2 + ss3));
    return k0 ? k0 - 1 : SIZE_MAX;
}

BAND_INLINE int reflect_setup(double *restrict p, double *restrict Y, size_t cap, size_t i0,
                              size_t i1, size_t r, size_t nl, double *restrict x,
                              double *alpha_out, double *sigma_out, double *sc_out,
                              double *nu_out, int *changed, refl_info *info)
{
    /* A column's reflection is a chain of dependent operations, and that
     * chain is what bounds the fold's speed (the arithmetic is a fraction
     * of the machine's).  So: the first largest |entry| (the pivot's own
     * first) by four chains over the rows merged at the end; the swap and
     * the sign without branches (both data-dependent, mispredicted); the
     * norm nu = |(alpha, x)| -- which the swap does not change -- from the
     * entries as they come, its square root overlapping the search; and
     * sigma (the squares but the pivot's, after the swap) by four chains. */
    double alpha = p[0], amax, xa, nu;
    size_t imax = pivot_search(alpha, x, i0, i1, &amax, &xa, &nu);
    size_t i;
    *changed = 0;
    info->imax = SIZE_MAX;
    info->neg = 0;
    if (amax == 0.0)
        return 0;
    {
        /* row pivoting: the largest entry becomes the pivot (a swap of p
         * with itself when it is the largest), made nonnegative (a row's
         * sign is free: M^T M does not see it).  Both stores carry the same
         * value when the rows coincide, so their order does not matter. */
        int none = imax == SIZE_MAX;
        double sg = xa < 0.0 ? -1.0 : 1.0, sy = none ? sg : 1.0, dummy;
        double *y = none ? p : Y + imax * cap + r;
        size_t s = 0;
        for (; s + 4 <= nl; s += 4) {
            v4d a, b;
            ld4(&a, p + s);
            ld4(&b, y + s);
            a *= sy;
            b *= sg;
            st4(y + s, &a);
            st4(p + s, &b);
        }
        for (; s < nl; s++) {
            double a = p[s] * sy, b = y[s] * sg;
            y[s] = a;
            p[s] = b;
        }
        *(none ? &dummy : x + imax) = alpha;
        alpha = fabs(xa);
        *changed = !none;
        info->imax = imax;
        info->neg = xa < 0.0;
    }
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, sc = 1.0;
    for (i = i0; i + 3 < i1; i += 4) {
        s0 += x[i] * x[i];
        s1 += x[i + 1] * x[i + 1];
        s2 += x[i + 2] * x[i + 2];
        s3 += x[i + 3] * x[i + 3];
    }
    if (i < i1)
        s0 += x[i] * x[i];
    if (i + 1 < i1)
        s1 += x[i + 1] * x[i + 1];
    if (i + 2 < i1)
        s2 += x[i + 2] * x[i + 2];
    double sigma = (s0 + s1) + (s2 + s3);
    if (!(sigma >= SAFMIN && alpha * alpha + sigma <= 0.25 * DBL_MAX)) {
        int any = 0;
        for (i = i0; i < i1; i++)
            any |= x[i] != 0.0;
        if (!any)
            return 0;
        sc = alpha; /* the largest entry, after the pivoting */
        double inv = 1.0 / sc;
        alpha = 1.0;
        sigma = 0.0;
        for (i = i0; i < i1; i++) {
            x[i] *= inv;
            sigma += x[i] * x[i];
        }
        if (sigma < SAFMIN) { /* |x| < 1e-146 |pivot|: negligible */
            for (i = i0; i < i1; i++)
                Y[i * cap + r] = 0.0;
            *changed = 1;
            return 0;
        }
        nu = sqrt(alpha * alpha + sigma);
    }
    *alpha_out = alpha;
    *sigma_out = sigma;
    *sc_out = sc;
    *nu_out = nu;
    return 1;
}

/* u = [u0; x], u0 = alpha - nu = -sigma / (alpha + nu) (Parlett), nu =
 * |(alpha, x)|; H = I - t u u' with t = 2 / |u|^2 = (alpha + nu) / (nu
 * sigma): the two divisions are independent of each other. */
#define REFLECT_SCALARS(alpha, sigma, u0, t, nu)                                                 \
    double g_ = alpha + nu, is_ = 1.0 / sigma;                                                \
    double u0 = -sigma / g_, t = g_ / nu * is_

/* A reflection's u0, t and x (the rest of u) into a tape record (TAPE).
 * Up to TAPE_XRUN entries as a fixed run of vectors: a loop's exit on k,
 * which changes from column to column, is mispredicted.  So up to
 * TAPE_XRUN doubles past x's k are read (x has the slack; slots not yet
 * holding a row may be stale or, before the rows arrive, never written:
 * copied, never used) and written (the fold keeps the room; the record's
 * trailer is written after). */
#define TAPE_XRUN 16
_Static_assert(TAPE_XRUN == 16, "tape_put's run is four vectors");
BAND_INLINE void tape_put(double *restrict rec, double u0, double t, const double *restrict x,
                          size_t k)
{
    rec[0] = u0;
    rec[1] = t;
    if (k <= TAPE_XRUN) {
        v4d a, b, c, d;
        ld4(&a, x);
        ld4(&b, x + 4);
        ld4(&c, x + 8);
        ld4(&d, x + 12);
        st4(rec + 2, &a);
        st4(rec + 6, &b);
        st4(rec + 10, &c);
        st4(rec + 14, &d);
        return;
    }
    for (size_t s = 0; s < k; s++)
        rec[2 + s] = x[s];
}

/* The same for any width: slots 0 .. mm, dot: mm + 1 doubles. */
BAND_INLINE int reflect_any(double *restrict p, double *restrict Y, size_t cap, size_t i0,
                            size_t i1, size_t r, size_t mm, double *restrict x,
                            double *restrict dot, refl_info *info, double *restrict rec)
{
    double alpha, sigma, sc, nu;
    int changed;
    if (!reflect_setup(p, Y, cap, i0, i1, r, mm + 1, x, &alpha, &sigma, &sc, &nu, &changed, info))
        return changed;
    for (size_t s = 0; s <= mm; s++)
        dot[s] = 0.0;
    for (size_t i = i0; i < i1; i++) {
        const double *y = Y + i * cap + r;
        double xi = x[i];
        for (size_t s = 0; s <= mm; s++)
            dot[s] += xi * y[s];
    }
    REFLECT_SCALARS(alpha, sigma, u0, t, nu);
    if (rec)
        tape_put(rec, u0, t, x + i0, i1 - i0);
    for (size_t s = 0; s <= mm; s++) {
        dot[s] = (u0 * p[s] + dot[s]) * t;
        p[s] -= dot[s] * u0;
    }
    for (size_t i = i0; i < i1; i++) {
        double *y = Y + i * cap + r, xi = x[i];
        for (size_t s = 0; s <= mm; s++)
            y[s] -= dot[s] * xi;
        x[i] = y[1];
    }
    p[0] = sc * nu;
    return 2;
}

/* Column j against pivot p on 4 NV slots (NV a constant: unrolled): 2
 * when reflected (x then holds the rows' column j + 1), else as
 * reflect_setup's *changed.  reflect_any's result without moving any row
 * before reflecting: the swapped rows are read where they are (the new
 * pivot from row imax, row imax's part from the old pivot) and the results
 * written to where the swap would have put them, so no store is read back
 * on the column's chain of dependent operations (pivoting swaps nearly
 * every column).  The rare columns with nothing to reflect, or whose x
 * needs scaling, take reflect_any itself (nothing has been modified when
 * they do; dot: 4 NV doubles).  p and Y may be read through one pointer
 * (the selects), so neither is restrict. */
BAND_INLINE int reflect_lanes(const size_t NV, double *p, double *Y, size_t cap, size_t i0,
                              size_t i1, size_t r, double *restrict x, double *restrict dot,
                              refl_info *info, double *restrict rec)
{
    double alpha = p[0], amax, xa, nu;
    size_t imax = pivot_search(alpha, x, i0, i1, &amax, &xa, &nu);
    double an = fabs(xa), s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t i = i0;
    /* row i's entry after the swap: the old pivot's at imax */
#define XS(k) ((k) == imax ? alpha : x[k])
    for (; i + 3 < i1; i += 4) {
        double a0 = XS(i), a1 = XS(i + 1), a2 = XS(i + 2), a3 = XS(i + 3);
        s0 += a0 * a0;
        s1 += a1 * a1;
        s2 += a2 * a2;
        s3 += a3 * a3;
    }
    for (; i < i1; i++) {
        double a0 = XS(i);
        s0 += a0 * a0;
    }
    double sigma = (s0 + s1) + (s2 + s3);
    if (!(amax > 0.0 && sigma >= SAFMIN && an * an + sigma <= 0.25 * DBL_MAX))
        return reflect_any(p, Y, cap, i0, i1, r, 4 * NV - 1, x, dot, info, rec);
    int none = imax == SIZE_MAX;
    double sg = xa < 0.0 ? -1.0 : 1.0, dummy;
    const double *ps = none ? p : Y + imax * cap + r; /* the new pivot, before its sign */
    v4d d[4] = {{0.0}}, e[4] = {{0.0}}, pn[4], a, b;
    for (i = i0; i + 1 < i1; i += 2) {
        const double *y0 = i == imax ? p : Y + i * cap + r;
        const double *y1 = i + 1 == imax ? p : Y + (i + 1) * cap + r;
        double x0 = XS(i), x1 = XS(i + 1);
        for (size_t v = 0; v < NV; v++) {
            ld4(&a, y0 + 4 * v);
            ld4(&b, y1 + 4 * v);
            d[v] += x0 * a;
            e[v] += x1 * b;
        }
    }
    if (i < i1) {
        const double *y0 = i == imax ? p : Y + i * cap + r;
        double x0 = XS(i);
        for (size_t v = 0; v < NV; v++) {
            ld4(&a, y0 + 4 * v);
            d[v] += x0 * a;
        }
    }
    for (size_t v = 0; v < NV; v++)
        d[v] += e[v];
    REFLECT_SCALARS(an, sigma, u0, t, nu);
    *(none ? &dummy : x + imax) = alpha; /* x as the swap leaves it (the tape's) */
    if (rec)
        tape_put(rec, u0, t, x + i0, i1 - i0);
    for (size_t v = 0; v < NV; v++) {
        ld4(&a, ps + 4 * v);
        a *= sg;
        d[v] = (u0 * a + d[v]) * t;
        pn[v] = a - d[v] * u0;
    }
    pn[0][0] = nu;
    /* every row read before the pivot is written (row imax reads p) */
    for (i = i0; i < i1; i++) {
        const double *src = i == imax ? p : Y + i * cap + r;
        double *y = Y + i * cap + r, xi = x[i];
        for (size_t v = 0; v < NV; v++) {
            ld4(&a, src + 4 * v);
            a -= d[v] * xi;
            st4(y + 4 * v, &a);
            if (v == 0)
                x[i] = a[1];
        }
    }
    for (size_t v = 0; v < NV; v++)
        st4(p + 4 * v, &pn[v]);
#undef XS
    info->imax = imax;
    info->neg = xa < 0.0;
    return 2;
}

/* Column j against pivot p (nl >= mm + 1 slots addressable): the vector
 * kernel for nl <= 16, else the loop. */
BAND_INLINE int reflect(size_t nl, double *restrict p, double *restrict Y, size_t cap,
                        size_t i0, size_t i1, size_t r, size_t mm, double *restrict x,
                        double *restrict dot, refl_info *info, double *restrict rec)
{
    switch (nl) {
    case 4:
        return reflect_lanes(1, p, Y, cap, i0, i1, r, x, dot, info, rec);
    case 8:
        return reflect_lanes(2, p, Y, cap, i0, i1, r, x, dot, info, rec);
    case 12:
        return reflect_lanes(3, p, Y, cap, i0, i1, r, x, dot, info, rec);
    case 16:
        return reflect_lanes(4, p, Y, cap, i0, i1, r, x, dot, info, rec);
    default:
        return reflect_any(p, Y, cap, i0, i1, r, mm, x, dot, info, rec);
    }
}

/* Window width: kl + 1 rounded up to whole vectors (the slots past kl of a
 * row are zero and stay zero: the pivot is zero-padded there too). */
static size_t lanes(size_t kl) { return (kl + 4) / 4 * 4; }

/* Room for one more record of up to k doubles on the tape (TAPE): 0, or 1
 * when it cannot grow. */
static int tape_room(gmm_band_tape *tp, size_t k) { return grow_buf(tp, tp->len + k); }

/* Close a record opened at rec (TAPE). */
static inline void tape_close(gmm_band_tape *tp, double *rec, size_t j, unsigned code, size_t lo,
                              size_t na, const refl_info *info)
{
    uint64_t imax1 = info->imax == SIZE_MAX ? 0 : (uint64_t)info->imax + 1;
    code |= info->neg ? TAPE_NEG : 0u;
    put_u64(rec, (uint64_t)j);
    put_u64(rec + 1, (uint64_t)code | (uint64_t)lo << 8 | (uint64_t)na << 24 | imax1 << 40);
    size_t i0 = (code & TAPE_DEPKIND) ? lo + 1 : lo;
    size_t len = 3 + ((code & TAPE_REFL) ? 2 + na - i0 : 0);
    put_u64(rec + len - 1, (uint64_t)len);
    tp->len += len;
}

/* Row y's slots r .. cap - 1 moved to 0 .., the rest zeroed; and v (w
 * entries) into slots r .., the rest zeroed.  Inline vector loops: these
 * run for every row and window move, too short for a library call (the
 * Makefile keeps GCC from turning them back into one). */
BAND_INLINE void slide_row(double *y, size_t r, size_t cap)
{
    v4d a, z = {0.0, 0.0, 0.0, 0.0};
    size_t s = 0;
    for (; s + r + 4 <= cap; s += 4) { /* forward: each load precedes the stores over it */
        ld4(&a, y + s + r);
        st4(y + s, &a);
    }
    for (; s + r < cap; s++)
        y[s] = y[s + r];
    for (; s + 4 <= cap; s += 4)
        st4(y + s, &z);
    for (; s < cap; s++)
        y[s] = 0.0;
}

BAND_INLINE void load_row(double *restrict y, size_t r, const double *restrict v, size_t w,
                          size_t cap)
{
    v4d a, z = {0.0, 0.0, 0.0, 0.0};
    size_t s = 0;
    for (; s + 4 <= w; s += 4) {
        ld4(&a, v + s);
        st4(y + r + s, &a);
    }
    for (; s < w; s++)
        y[r + s] = v[s];
    for (s += r; s + 4 <= cap; s += 4)
        st4(y + s, &z);
    for (; s < cap; s++)
        y[s] = 0.0;
}

/* The fold; tp NULL (a constant in the plain copies: no recording) or the
 * tape the block's reflections are appended to.  0, or 1 when the tape
 * cannot grow. */
BAND_INLINE int fold_rows(double *restrict Ld, size_t ld, size_t n, size_t kl, size_t m,
                          const size_t *first, const double *V, size_t ldv,
                          double *restrict Y, double *restrict x, double *restrict dot,
                          gmm_band_tape *tp, size_t doff)
{
    size_t nl = lanes(kl), cap = 3 * nl;
    size_t lo = 0, na = 0, j = first[0], base = j, hi = 0; /* hi: rows zero from column hi */
    double pad[16];
    while (lo < m) {
        if (lo < na && j >= hi)
            lo = na; /* the active rows are zero: drop them */
        if (lo == na) {
            if (na == m)
                break;
            j = first[na]; /* >= j: rows come in order of first column */
        }
        size_t r = j - base;
        if (r + nl > cap || lo == na) {
            /* the active rows live in slots r .. cap - 1 */
            for (size_t i = lo; i < na; i++)
                slide_row(Y + i * cap, r, cap);
            base = j;
            r = 0;
        }
        for (; na < m && first[na] <= j; na++) {
            double *y = Y + na * cap;
            const double *v = V + na * ldv;
            size_t w = j + kl + 1 < n ? kl + 1 : n - j, last = w;
            x[na] = v[0];
            load_row(y, r, v, w, cap);
            while (last > 0 && v[last - 1] == 0.0)
                last--;
            if (first[na] + last > hi)
                hi = first[na] + last;
        }
        size_t mm = n - 1 - j < kl ? n - 1 - j : kl;
        double *Lc = Ld + j * ld, *rec = NULL;
        refl_info info;
        if (tp) {
            if (tape_room(tp, 5 + (na - lo > TAPE_XRUN ? na - lo : TAPE_XRUN)))
                return 1;
            rec = tp->data + tp->len;
        }
        if (Lc[0] != 0.0) {
            size_t q = mm;
            while (q > 0 && Lc[q] == 0.0)
                q--;
            int changed;
            if (nl == mm + 1 || nl > 16) {
                changed = reflect(nl, Lc, Y, cap, lo, na, r, mm, x, dot, &info, rec ? rec + 2 : NULL);
            } else { /* a short column, or kl + 1 not a whole number of vectors */
                memcpy(pad, Lc, (mm + 1) * sizeof *pad);
                for (size_t s = mm + 1; s < nl; s++)
                    pad[s] = 0.0;
                changed = reflect(nl, pad, Y, cap, lo, na, r, mm, x, dot, &info,
                                  rec ? rec + 2 : NULL);
                memcpy(Lc, pad, (mm + 1) * sizeof *pad);
            }
            if (changed && j + q + 1 > hi)
                hi = j + q + 1;
            if (changed != 2)
                for (size_t i = lo; i < na; i++)
                    x[i] = Y[i * cap + r + 1];
            if (rec && (changed || info.neg))
                tape_close(tp, rec, j, changed == 2 ? TAPE_REFL : 0u, lo, na, &info);
        } else {
            double *pv = Y + lo * cap + r;
            size_t slot = lo;
            int done = reflect(nl, pv, Y, cap, lo + 1, na, r, mm, x, dot, &info,
                               rec ? rec + 2 : NULL);
            int refl = done == 2;
            unsigned code = TAPE_DEPKIND | (refl ? TAPE_REFL : 0u);
            if (pv[0] != 0.0) {
                double sg = pv[0] < 0.0 ? -1.0 : 1.0;
                for (size_t s = 0; s <= mm; s++)
                    Lc[s] = sg * pv[s];
                lo++;
                code |= TAPE_DEP | (sg < 0.0 ? TAPE_DEPNEG : 0u);
                if (tp)
                    tp->data[doff + slot] = (double)j; /* its deposit (TAPE) */
            } else {
                done = 0;
            }
            if (done != 2)
                for (size_t i = lo; i < na; i++)
                    x[i] = Y[i * cap + r + 1];
            if (rec && (code & (TAPE_DEP | TAPE_REFL) || info.imax != SIZE_MAX || info.neg))
                tape_close(tp, rec, j, code, slot, na, &info);
        }
        j++;
    }
    return 0;
}

static int fold_rows_plain(double *Ld, size_t ld, size_t n, size_t kl, size_t m,
                           const size_t *first, const double *V, size_t ldv, double *Y,
                           double *x, double *dot)
{
    return fold_rows(Ld, ld, n, kl, m, first, V, ldv, Y, x, dot, NULL, 0);
}

static int fold_rows_plain_tape(double *Ld, size_t ld, size_t n, size_t kl, size_t m,
                                const size_t *first, const double *V, size_t ldv, double *Y,
                                double *x, double *dot, gmm_band_tape *tp, size_t doff)
{
    return fold_rows(Ld, ld, n, kl, m, first, V, ldv, Y, x, dot, tp, doff);
}

#if BAND_AVX2
BAND_TARGET_AVX2 static int fold_rows_avx2(double *Ld, size_t ld, size_t n, size_t kl, size_t m,
                                           const size_t *first, const double *V, size_t ldv,
                                           double *Y, double *x, double *dot)
{
    return fold_rows(Ld, ld, n, kl, m, first, V, ldv, Y, x, dot, NULL, 0);
}

BAND_TARGET_AVX2 static int fold_rows_avx2_tape(double *Ld, size_t ld, size_t n, size_t kl,
                                                size_t m, const size_t *first, const double *V,
                                                size_t ldv, double *Y, double *x, double *dot,
                                                gmm_band_tape *tp, size_t doff)
{
    return fold_rows(Ld, ld, n, kl, m, first, V, ldv, Y, x, dot, tp, doff);
}
#endif

size_t gmm_band_chol_add_rows_work(size_t m, size_t kl)
{
    return (3 * m + 1) * lanes(kl) + m + TAPE_XRUN + ALIGN_SLACK; /* x: tape_put's run */
}

static gmm_status add_rows(gmm_band *L, size_t m, const size_t *first, const double *V,
                           size_t ldv, double *work, gmm_band_tape *tp)
{
    if (!L || (m > 0 && (!first || !V)))
        return gmm_error(GMM_EINVAL, "band_chol_add_rows: NULL argument");
    if (L->kind != GMM_BAND_LOWER || L->ku != 0)
        return gmm_error(GMM_EDIM, "band_chol_add_rows: L must be LOWER");
    size_t n = L->n, kl = L->kl;
    if (m == 0 && !tp)
        return GMM_OK;
    if (m > TAPE_MAXROWS && tp)
        return gmm_error(GMM_EDIM, "band_chol_add_rows: %zu rows in one block", m);
    if (ldv < kl + 1)
        return gmm_error(GMM_EDIM, "band_chol_add_rows: row stride %zu < bandwidth + 1 = %zu",
                         ldv, kl + 1);
    for (size_t i = 0; i < m; i++) {
        const double *v = V + i * ldv;
        if (first[i] >= n || (i > 0 && first[i] < first[i - 1]))
            return gmm_error_at(GMM_EDIM, i,
                                "band_chol_add_rows: row %zu starts at column %zu (of %zu; "
                                "first columns must be nondecreasing)",
                                i, first[i], n);
        if (!all_finite(v, kl + 1))
            for (size_t s = 0; s <= kl; s++)
                if (!isfinite(v[s]))
                    return gmm_error_at(GMM_EDOM, i,
                                        "band_chol_add_rows: row %zu, column %zu is not finite",
                                        i, first[i] + s);
        for (size_t s = n - first[i]; s <= kl; s++)
            if (v[s] != 0.0)
                return gmm_error_at(GMM_EDIM, i,
                                    "band_chol_add_rows: row %zu has an entry in column %zu "
                                    "of %zu",
                                    i, first[i] + s, n);
    }
    size_t hpos = 0, c0 = m ? first[0] : 0, nj = 0, fill = 0;
    if (tp) {
        /* J: R's rows from c0 on that earlier calls filled (at most 2 (kl +
         * 1) of them), cut to the longest run whose entries stay inside
         * its own columns (so x_J = F_J^-1 R_J x: TAPE); F_J as they are */
        size_t reach = c0, run = 0;
        if (tp->len == 0)
            tp->reach = 0; /* a new factorisation */
        for (size_t a = 0; c0 + a < tp->reach && a < 2 * (kl + 1); a++)
            if (L->data[(c0 + a) * L->ld] != 0.0)
                fill = a + 1; /* past the last filled row (empty ones between) */
        while (run < fill && L->data[(c0 + run) * L->ld] != 0.0)
            run++;
        for (size_t a = 0; a < run; a++) {
            const double *col = L->data + (c0 + a) * L->ld;
            size_t last = n - 1 - (c0 + a) < kl ? n - 1 - (c0 + a) : kl;
            while (last > 0 && col[last] == 0.0)
                last--;
            if (c0 + a + last + 1 > reach)
                reach = c0 + a + last + 1;
            if (reach <= c0 + a + 1)
                nj = a + 1; /* rows c0 .. c0 + a reach no further than c0 + a */
        }
        if (tape_room(tp, TAPE_HDR + nj * nj + m))
            return gmm_error(GMM_ENOMEM, "band_chol_add_rows: out of memory for the tape");
        hpos = tp->len;
        double *F = tp->data + hpos + TAPE_HDR;
        for (size_t i = 0; i < nj; i++) {
            const double *col = L->data + (c0 + i) * L->ld;
            for (size_t c = 0; c < i; c++)
                F[i * nj + c] = 0.0;
            for (size_t c = i; c < nj; c++)
                F[i * nj + c] = c - i > kl ? 0.0 : col[c - i];
        }
        for (size_t i = 0; i < m; i++)
            F[nj * nj + i] = -1.0; /* deposits, filled in by the fold */
        tp->len += TAPE_HDR + nj * nj + m;
    }
    int bad = 0;
    if (m > 0) {
        size_t nl = lanes(kl);
        double *buf = work;
        if (!buf && !(buf = gmm_malloc(gmm_band_chol_add_rows_work(m, kl), sizeof *buf)))
            return gmm_error(GMM_ENOMEM, "band_chol_add_rows: out of memory");
        double *Y = align_lines(buf), *dot = Y + m * 3 * nl, *x = dot + nl;
        for (size_t i = m; i < m + TAPE_XRUN; i++)
            x[i] = 0.0; /* tape_put reads them: defined */
#if BAND_AVX2
        if (band_cpu_has_avx2())
            bad = tp ? fold_rows_avx2_tape(L->data, L->ld, n, kl, m, first, V, ldv, Y, x, dot, tp,
                                           hpos + TAPE_HDR + nj * nj)
                     : fold_rows_avx2(L->data, L->ld, n, kl, m, first, V, ldv, Y, x, dot);
        else
#endif
            bad = tp ? fold_rows_plain_tape(L->data, L->ld, n, kl, m, first, V, ldv, Y, x, dot, tp,
                                            hpos + TAPE_HDR + nj * nj)
                     : fold_rows_plain(L->data, L->ld, n, kl, m, first, V, ldv, Y, x, dot);
        if (!work)
            gmm_free(buf);
    }
    if (bad)
        return gmm_error(GMM_ENOMEM, "band_chol_add_rows: out of memory for the tape");
    if (tp) {
        size_t b0 = hpos + TAPE_HDR + nj * nj + m, body = tp->len - b0, cend = c0;
        if (body > 0) { /* the last record's column */
            const double *last = tp->data + tp->len;
            cend = (size_t)get_u64(last - get_u64(last - 1)) + 1;
        }
        double *h = tp->data + hpos;
        h[0] = (double)c0;
        h[1] = (double)m;
        h[2] = (double)cend;
        h[3] = (double)body;
        h[4] = (double)nj;
        h[5] = (double)fill;
        h[6] = (double)(2 * (kl + 1));
        h[7] = hpos > 0 ? (double)tp->last : -1.0;
        tp->last = hpos;
        tp->reach = cend > tp->reach ? cend : tp->reach;
    }
    return GMM_OK;
}

gmm_status gmm_band_chol_add_rows(gmm_band *L, size_t m, const size_t *first, const double *V,
                                  size_t ldv, double *work)
{
    return add_rows(L, m, first, V, ldv, work, NULL);
}

gmm_status gmm_band_chol_add_rows_tape(gmm_band *L, size_t m, const size_t *first,
                                       const double *V, size_t ldv, double *work,
                                       gmm_band_tape *tape)
{
    if (!tape)
        return gmm_error(GMM_EINVAL, "band_chol_add_rows_tape: NULL tape");
    return add_rows(L, m, first, V, ldv, work, tape);
}
