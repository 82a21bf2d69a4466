/* band_qr.c -- the Cholesky factor of M^T M from the rows of M (band.h
 * section 6): row-sequential Givens QR into a banded factor, one row at a
 * time (below) or a block of rows by Householder reflections (BLOCK FOLD).
 *
 * Column j of L (slots L(j..j+kl, j)) is row j of R = L^T.  A row v arrives
 * as a window r over columns j .. j + kl (everything right of the window is
 * zero, everything left already eliminated).  At column j:
 *   - r[0] == 0: nothing to eliminate; slide on.
 *   - R's row j is empty (L(j,j) == 0: no earlier row reached column j): r
 *     becomes that row (negated if needed, so the diagonal is positive --
 *     a sign change of a column of the orthogonal factor).  Done.
 *   - else rotate (R row j, r) so that r[0] becomes 0 and L(j,j) =
 *     hypot(L(j,j), r[0]) > 0; r picks up fill from R's row j, all inside
 *     columns j+1 .. j+kl, i.e. inside the next window.
 * A row whose window empties (it was in the span of the rows before it)
 * stops early.  L L^T + v v^T is invariant under each rotation, and a
 * deposit just adds v v^T to it.
 */
#include "gmm/band.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "band_simd.h"

/* Whether v[0 .. k) are all finite, branch-free (vectorised by the
 * compiler): an exponent of all ones (infinite or NaN) carries into bit 63
 * when one more unit of the exponent is added. */
static int all_finite(const double *v, size_t k)
{
    uint64_t bad = 0;
    for (size_t s = 0; s < k; s++) {
        uint64_t b;
        memcpy(&b, v + s, sizeof b);
        bad |= (b & 0x7ff0000000000000u) + 0x0010000000000000u;
    }
    return !(bad >> 63);
}

/* Work buffers of rows of whole vectors start on a cache line (64 bytes),
 * so that with row strides of whole vectors no vector load splits two
 * lines: one that does costs more than one that does not, and
 * malloc's large blocks start 16 bytes into a page (measured: the CO2 loglik
 * + gradient 3% slower with the unfold's rows 48 bytes into a line, by heap
 * layout alone).  Buffers carry ALIGN_SLACK doubles for it. */
#define ALIGN_SLACK 8
static inline double *align_lines(double *p)
{
    uintptr_t a = (uintptr_t)p;
    return (double *)(void *)(p + ((64 - (a & 63)) & 63) / sizeof *p);
}

/* Below this, squares of the entries lose precision (DBL_MIN / eps). */
#define SAFMIN (DBL_MIN / DBL_EPSILON)

gmm_status gmm_band_chol_add_row(gmm_band *L, size_t j0, size_t w, const double *v, double *work)
{
    if (!L || (w > 0 && !v))
        return gmm_error(GMM_EINVAL, "band_chol_add_row: NULL argument");
    if (L->kind != GMM_BAND_LOWER || L->ku != 0)
        return gmm_error(GMM_EDIM, "band_chol_add_row: L must be LOWER");
    size_t n = L->n, kl = L->kl, ld = L->ld;
    if (w > kl + 1 || j0 > n || w > n - j0)
        return gmm_error(GMM_EDIM,
                         "band_chol_add_row: row over columns %zu..%zu does not fit a band of "
                         "width %zu in %zu columns",
                         j0, j0 + w - 1, kl + 1, n);
    for (size_t s = 0; s < w; s++)
        if (!isfinite(v[s]))
            return gmm_error_at(GMM_EDOM, j0 + s,
                                "band_chol_add_row: entry in column %zu is not finite", j0 + s);
    /* The window for column j is r = buf + (j - base), kl + 1 slots; when it
     * would run off the end of buf it is moved back to the start (amortised
     * O(1) per column). */
    size_t cap = 4 * (kl + 1);
    double *buf = work;
    if (!buf && !(buf = gmm_malloc(cap, sizeof *buf)))
        return gmm_error(GMM_ENOMEM, "band_chol_add_row: out of memory");
    memcpy(buf, v, w * sizeof *buf);
    for (size_t s = w; s < cap; s++)
        buf[s] = 0.0;
    size_t base = j0;
    /* hi: slots from hi on (relative to column j) are zero */
    size_t hi = w;
    for (size_t j = j0; j < n && hi > 0; j++, hi--) {
        if (j - base + kl + 1 > cap) {
            /* slots from cap on were never written: zero */
            size_t off = j - base, live = cap - off;
            memmove(buf, buf + off, live * sizeof *buf);
            for (size_t s = live; s < cap; s++)
                buf[s] = 0.0;
            base = j;
        }
        double *r = buf + (j - base);
        double a = r[0];
        if (a == 0.0)
            continue;
        size_t m = n - 1 - j < kl ? n - 1 - j : kl; /* last slot of column j */
        double *c = L->data + j * ld;               /* c[s] = L(j + s, j) */
        double d = c[0];
        if (d == 0.0) {
            double sg = a < 0.0 ? -1.0 : 1.0;
            for (size_t s = 0; s <= m; s++)
                c[s] = sg * r[s];
            break;
        }
        double h = sqrt(d * d + a * a);
        if (!(h <= DBL_MAX) || h < DBL_MIN)
            h = hypot(d, a); /* |d| or |a| beyond 1e154 or below 1e-154 */
        double ih = 1.0 / h, cs = d * ih, sn = a * ih;
        c[0] = h;
        for (size_t s = 1; s <= m; s++) {
            double x = c[s], y = r[s];
            c[s] = cs * x + sn * y;
            r[s] = cs * y - sn * x;
        }
        if (m + 1 > hi)
            hi = m + 1;
    }
    if (!work)
        gmm_free(buf);
    return GMM_OK;
}

gmm_status gmm_band_chol_rows_check(const gmm_band *L)
{
    if (!L)
        return gmm_error(GMM_EINVAL, "band_chol_rows_check: NULL argument");
    if (L->kind != GMM_BAND_LOWER || L->ku != 0)
        return gmm_error(GMM_EDIM, "band_chol_rows_check: L must be LOWER");
    for (size_t j = 0; j < L->n; j++) {
        const double *c = L->data + j * L->ld;
        if (!(c[0] >= DBL_MIN && c[0] <= DBL_MAX))
            return gmm_error_at(GMM_ENOTPD, j,
                                "square-root factor: column %zu has diagonal %g (the rows do "
                                "not determine it: M^T M is singular there)",
                                j, c[0]);
        size_t m = L->n - 1 - j < L->kl ? L->n - 1 - j : L->kl;
        if (!all_finite(c + 1, m))
            return gmm_error_at(GMM_ENOTPD, j, "square-root factor: column %zu is not finite",
                                j);
    }
    return GMM_OK;
}

/* ---- a block of rows at once ------------------------------------------------------ */

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
 * measured: the state-space loglik off by 1e-4).  With it, as for Givens
 * rotations, each row keeps an error relative to its own size (Powell and
 * Reid; Cox and Higham, IMA J. Numer. Anal. 18, 1998).
 * The reflection H = I - t u u', u = [p - |(p, x)|; x] (x the column below
 * the pivot p; u_0 by Parlett's cancellation-free formula when p > 0, so the
 * new diagonal is positive), is applied to slots j .. j + kl of the pivot
 * and the active rows.  When |x|^2 is out of the range where squaring is
 * exact enough, u is scaled by |p| first (H does not change); below 1e-146
 * |p|, x is dropped (it perturbs M^T M far below rounding).  One square
 * root and one division per column instead of one per row and column. */

/* Four lanes of the window at once (GNU C vectors: SSE2 pairs in the
 * baseline copy, AVX2 in the other -- the same operations either way). */
typedef double v4d __attribute__((vector_size(32)));
BAND_INLINE void ld4(v4d *v, const double *p) { memcpy(v, p, sizeof *v); }
BAND_INLINE void st4(double *p, const v4d *v) { memcpy(p, v, sizeof *v); }

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

/* TAPE (gmm_band_chol_add_rows_tape).  The call appends one block: a header
 * [c0, m, cend, body length, nj, fill, span, prev] (integers as doubles;
 * prev: the position of the block before, -1 for the first; tape->last is
 * this block's), c0 = first[0] and
 * R's rows c0 .. cend - 1 the ones its reflections touched; F_J (nj x nj,
 * row-major, upper triangular): R's rows c0 .. c0 + nj - 1 as the call
 * found them -- J (for ROW MOMENTS), the longest run of rows from c0 that
 * earlier calls had filled with entries inside those columns only; (in the
 * header) fill: R's rows c0 .. c0 + fill - 1 span those that earlier calls
 * had filled within span = 2 (kl + 1) columns (some may be empty);
 * for each of its m rows the R row it was deposited as (-1: reduced to
 * zero); then one record per column j where anything happened:
 *   [j, w, (u0, t, x_i0 .. x_na-1 when reflected), length]
 * j, w and length are 64-bit integers stored in the doubles' bits; w =
 * code | 2^8 lo | 2^24 na | 2^40 (1 + the block row swapped into the pivot,
 * 0 for none), code: TAPE_DEPKIND (the pivot was block row lo -- R's row j
 * empty -- and the rows reflected against it lo + 1 .. na - 1; else R's row
 * j against lo .. na - 1), TAPE_NEG (the pivot negated after the swap),
 * TAPE_REFL, TAPE_DEP (block row lo became R's row j, times -1 with
 * TAPE_DEPNEG).  x are the rows' entries of u (scaled as reflected).  Each
 * record ends with its length, so the replay walks backwards. */
#define TAPE_DEPKIND 1u
#define TAPE_NEG 2u
#define TAPE_REFL 4u
#define TAPE_DEP 8u
#define TAPE_DEPNEG 16u
#define TAPE_MAXROWS 65535u
#define TAPE_HDR 8

static inline void put_u64(double *p, uint64_t v) { memcpy(p, &v, sizeof v); }
static inline uint64_t get_u64(const double *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A record's fields (TAPE). */
typedef struct {
    size_t j, lo, na, i0, imax1, len;
    unsigned code;
} tape_rec;

static inline tape_rec tape_read(const double *rec)
{
    tape_rec t;
    uint64_t w = get_u64(rec + 1);
    t.j = (size_t)get_u64(rec);
    t.code = (unsigned)(w & 0xffu);
    t.lo = (size_t)((w >> 8) & 0xffffu);
    t.na = (size_t)((w >> 24) & 0xffffu);
    t.imax1 = (size_t)((w >> 40) & 0xffffu);
    t.i0 = (t.code & TAPE_DEPKIND) ? t.lo + 1 : t.lo;
    t.len = 3 + ((t.code & TAPE_REFL) ? 2 + t.na - t.i0 : 0);
    return t;
}

/* A growable buffer (the tape's type) with room for need doubles: 0, or 1
 * when it cannot grow (its contents kept either way). */
static int grow_buf(gmm_band_tape *b, size_t need)
{
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? 2 * b->cap : 1024;
    while (cap < need)
        cap *= 2;
    double *d = gmm_realloc(b->data, cap, sizeof *d);
    if (!d)
        return 1;
    b->data = d;
    b->cap = cap;
    return 0;
}

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

/* The block at pos (TAPE): fields, body and trailer positions. */
typedef struct {
    size_t c0, m, cend, nj, fill, span, prev, body, blen, dest, next;
    const double *F;
} tape_block;

static gmm_status tape_block_at(const gmm_band_tape *tape, size_t pos, tape_block *tb)
{
    if (!tape || !tape->data || pos + TAPE_HDR > tape->len)
        return gmm_error(GMM_EINVAL, "band_tape: no block at %zu", pos);
    const double *h = tape->data + pos;
    tb->c0 = (size_t)h[0];
    tb->m = (size_t)h[1];
    tb->cend = (size_t)h[2];
    tb->blen = (size_t)h[3];
    tb->nj = (size_t)h[4];
    tb->fill = (size_t)h[5];
    tb->span = (size_t)h[6];
    tb->prev = h[7] < 0.0 ? SIZE_MAX : (size_t)h[7];
    tb->F = h + TAPE_HDR;
    tb->dest = pos + TAPE_HDR + tb->nj * tb->nj;
    tb->body = tb->dest + tb->m;
    tb->next = tb->body + tb->blen;
    if (tb->next > tape->len)
        return gmm_error(GMM_EINVAL, "band_tape: block at %zu is cut short", pos);
    return GMM_OK;
}

gmm_status gmm_band_tape_block(const gmm_band_tape *tape, size_t pos, size_t *c0, size_t *m,
                               size_t *cend, size_t *next, size_t *dest)
{
    tape_block tb = {0};
    gmm_status st = tape_block_at(tape, pos, &tb);
    if (st)
        return st;
    *c0 = tb.c0;
    *m = tb.m;
    *cend = tb.cend;
    *next = tb.next;
    if (dest) {
        const double *d = tape->data + tb.dest;
        for (size_t i = 0; i < tb.m; i++)
            dest[i] = d[i] < 0.0 ? SIZE_MAX : (size_t)d[i];
    }
    return GMM_OK;
}

/* UNFOLD: the block's records from the last to the first, each undone in
 * reverse order (the deposit, the reflection -- H = I - t u u' is its own
 * inverse --, the negation, the swap) on w lanes of the rows of S: R's row j
 * at S + (j - c0) lds, block row i at S + (nR + i) lds. */
/* Lanes 4 NV (NV a constant, unrolled; 0: any w, by groups of 4). */
BAND_INLINE void unfold_nv(const size_t NV, const double *restrict body, size_t blen, size_t c0,
                           size_t nR, double *restrict S, size_t lds, size_t w)
{
    const size_t nv = NV ? NV : w / 4;
    size_t q = blen;
    while (q > 0) {
        const double *rec = body + q - get_u64(body + q - 1);
        tape_rec tr = tape_read(rec);
        q -= tr.len;
        unsigned code = tr.code;
        size_t i0 = tr.i0, i1 = tr.na;
        double *Rj = S + (tr.j - c0) * lds, *Y = S + nR * lds;
        double *p = (code & TAPE_DEPKIND) ? Y + tr.lo * lds : Rj;
        v4d a;
        if (code & TAPE_DEP) { /* block row lo was deposited as R's row j */
            double sg = (code & TAPE_DEPNEG) ? -1.0 : 1.0;
            v4d z = {0.0, 0.0, 0.0, 0.0};
            for (size_t v = 0; v < nv; v++) {
                ld4(&a, Rj + 4 * v);
                a *= sg;
                st4(p + 4 * v, &a);
                st4(Rj + 4 * v, &z);
            }
        }
        if (code & TAPE_REFL) {
            double u0 = rec[2], t = rec[3];
            const double *x = rec + 4 - i0;
            for (size_t v0 = 0; v0 < nv; v0 += 4) {
                size_t nb = NV ? NV : (nv - v0 < 4 ? nv - v0 : 4);
                v4d d[4] = {{0.0}};
                for (size_t i = i0; i < i1; i++)
                    for (size_t v = 0; v < nb; v++) {
                        ld4(&a, Y + i * lds + 4 * (v0 + v));
                        d[v] += x[i] * a;
                    }
                for (size_t v = 0; v < nb; v++) {
                    ld4(&a, p + 4 * (v0 + v));
                    d[v] = (u0 * a + d[v]) * t;
                    a -= d[v] * u0;
                    st4(p + 4 * (v0 + v), &a);
                }
                for (size_t i = i0; i < i1; i++)
                    for (size_t v = 0; v < nb; v++) {
                        double *y = Y + i * lds + 4 * (v0 + v);
                        ld4(&a, y);
                        a -= d[v] * x[i];
                        st4(y, &a);
                    }
                if (NV)
                    break;
            }
        }
        /* the sign and the swap without branches (data-dependent: they
         * would be mispredicted); a swap of p with itself does nothing */
        double sg = (code & TAPE_NEG) ? -1.0 : 1.0;
        double *ys = tr.imax1 ? Y + (tr.imax1 - 1) * lds : p;
        for (size_t v = 0; v < nv; v++) {
            v4d b;
            ld4(&a, p + 4 * v);
            ld4(&b, ys + 4 * v);
            a *= sg;
            st4(p + 4 * v, &b);
            st4(ys + 4 * v, &a);
        }
    }
}

BAND_INLINE void unfold(const double *restrict body, size_t blen, size_t c0, size_t nR,
                        double *restrict S, size_t lds, size_t w)
{
    switch (w) {
    case 4:
        unfold_nv(1, body, blen, c0, nR, S, lds, w);
        break;
    case 8:
        unfold_nv(2, body, blen, c0, nR, S, lds, w);
        break;
    case 12:
        unfold_nv(3, body, blen, c0, nR, S, lds, w);
        break;
    case 16:
        unfold_nv(4, body, blen, c0, nR, S, lds, w);
        break;
    default:
        unfold_nv(0, body, blen, c0, nR, S, lds, w);
    }
}

static void unfold_plain(const double *body, size_t blen, size_t c0, size_t nR, double *S,
                         size_t lds, size_t w)
{
    unfold(body, blen, c0, nR, S, lds, w);
}

#if BAND_AVX2
BAND_TARGET_AVX2 static void unfold_avx2(const double *body, size_t blen, size_t c0, size_t nR,
                                         double *S, size_t lds, size_t w)
{
    unfold(body, blen, c0, nR, S, lds, w);
}
#endif

gmm_status gmm_band_chol_rows_unfold(const gmm_band_tape *tape, size_t pos, size_t nR,
                                     double *S, size_t lds, size_t w)
{
    tape_block tb = {0};
    gmm_status st = tape_block_at(tape, pos, &tb);
    if (st)
        return st;
    if (!S || w % 4 != 0 || lds < w || nR < tb.cend - tb.c0)
        return gmm_error(GMM_EDIM, "band_chol_rows_unfold: %zu R rows for columns %zu..%zu, "
                                   "%zu lanes (a multiple of 4) with stride %zu",
                         nR, tb.c0, tb.cend, w, lds);
    const double *body = tape->data + tb.body;
#if BAND_AVX2
    if (band_cpu_has_avx2())
        unfold_avx2(body, tb.blen, tb.c0, nR, S, lds, w);
    else
#endif
        unfold_plain(body, tb.blen, tb.c0, nR, S, lds, w);
    return GMM_OK;
}

/* ---- row moments ---------------------------------------------------------------- */

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
    if ((st = tape_block_at(tape, tape->last, &tl)))
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
        if ((st = tape_block_at(tape, pos, &tb)))
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
#if BAND_AVX2
        if (band_cpu_has_avx2()) {
            unfold_avx2(body, tb.blen, c0, nR, S, lw, lw);
            block_moments_avx2(S, lw, r, nj, nf, tb.F, X, W, T);
        } else
#endif
        {
            unfold_plain(body, tb.blen, c0, nR, S, lw, lw);
            block_moments_plain(S, lw, r, nj, nf, tb.F, X, W, T);
        }
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
