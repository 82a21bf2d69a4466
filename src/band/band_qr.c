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

/* Whole vectors when nl is (whatever the copy): no scalar store is then
 * read back by a vector load (a store-forwarding stall). */
BAND_INLINE void swap_slots(size_t nl, double *restrict p, double *restrict y)
{
    size_t s = 0;
    for (; s + 4 <= nl; s += 4) {
        v4d a, b;
        ld4(&a, p + s);
        ld4(&b, y + s);
        st4(p + s, &b);
        st4(y + s, &a);
    }
    for (; s < nl; s++) {
        double t = y[s];
        y[s] = p[s];
        p[s] = t;
    }
}

BAND_INLINE void negate_slots(size_t nl, double *p)
{
    size_t s = 0;
    for (; s + 4 <= nl; s += 4) {
        v4d a;
        ld4(&a, p + s);
        a = -a;
        st4(p + s, &a);
    }
    for (; s < nl; s++)
        p[s] = -p[s];
}

/* The reflection's scalars for column j, after pivoting (the pivot p and
 * the active rows i0 .. i1 - 1 at slot r, nl slots each, x[i] = row i's
 * entry in column j): 1 with alpha = p[0] >= 0, sigma = |x|^2 and the
 * scale sc of u; 0 when there is nothing to reflect, *changed saying
 * whether the rows were modified all the same (a swap, or a negligible x
 * dropped). */
BAND_INLINE int reflect_setup(double *restrict p, double *restrict Y, size_t cap, size_t i0,
                              size_t i1, size_t r, size_t nl, double *restrict x,
                              double *alpha_out, double *sigma_out, double *sc_out,
                              int *changed)
{
    double alpha = p[0], amax = fabs(alpha);
    size_t imax = SIZE_MAX;
    for (size_t i = i0; i < i1; i++) {
        double ax = fabs(x[i]);
        imax = ax > amax ? i : imax;
        amax = ax > amax ? ax : amax;
    }
    *changed = 0;
    if (amax == 0.0)
        return 0;
    if (imax != SIZE_MAX) { /* row pivoting: the largest entry becomes the pivot */
        double *y = Y + imax * cap + r;
        swap_slots(nl, p, y);
        x[imax] = alpha;
        alpha = p[0];
        *changed = 1;
    }
    if (alpha < 0.0) { /* a row's sign is free: M^T M does not see it */
        negate_slots(nl, p);
        alpha = -alpha;
    }
    double s0 = 0.0, s1 = 0.0, sc = 1.0;
    size_t i = i0;
    for (; i + 1 < i1; i += 2) {
        s0 += x[i] * x[i];
        s1 += x[i + 1] * x[i + 1];
    }
    if (i < i1)
        s0 += x[i] * x[i];
    double sigma = s0 + s1;
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
    }
    *alpha_out = alpha;
    *sigma_out = sigma;
    *sc_out = sc;
    return 1;
}

/* u = [u0; x], u0 = alpha - nu = -sigma / (alpha + nu) (Parlett), nu =
 * |(alpha, x)|; H = I - t u u' with t = 2 / |u|^2 = (alpha + nu) / (nu
 * sigma): the two divisions are independent of each other. */
#define REFLECT_SCALARS(alpha, sigma, u0, t, nu)                                                 \
    double nu = sqrt(alpha * alpha + sigma), g_ = alpha + nu, is_ = 1.0 / sigma;              \
    double u0 = -sigma / g_, t = g_ / nu * is_

/* Slots 0 .. 4 NV - 1 of the pivot and the rows (NV a constant: unrolled).
 * 2 when reflected (x then holds the rows' column j + 1), else as
 * reflect_setup's *changed. */
BAND_INLINE int reflect_lanes(const size_t NV, double *restrict p, double *restrict Y,
                              size_t cap, size_t i0, size_t i1, size_t r,
                              double *restrict x)
{
    double alpha, sigma, sc;
    int changed;
    if (!reflect_setup(p, Y, cap, i0, i1, r, 4 * NV, x, &alpha, &sigma, &sc, &changed))
        return changed;
    v4d d[4] = {{0.0}}, a;
    for (size_t i = i0; i < i1; i++) {
        const double *y = Y + i * cap + r;
        for (size_t v = 0; v < NV; v++) {
            ld4(&a, y + 4 * v);
            d[v] += x[i] * a;
        }
    }
    REFLECT_SCALARS(alpha, sigma, u0, t, nu);
    for (size_t v = 0; v < NV; v++) {
        ld4(&a, p + 4 * v);
        d[v] = (u0 * a + d[v]) * t;
        a -= d[v] * u0;
        if (v == 0)
            a[0] = sc * nu;
        st4(p + 4 * v, &a);
    }
    /* Slot 0 of the rows (column j, now zero) is never read again; their
     * slot 1 goes to x for column j + 1 straight from the register (a load
     * from Y would straddle two vector stores: no store forwarding). */
    for (size_t i = i0; i < i1; i++) {
        double *y = Y + i * cap + r, xi = x[i];
        for (size_t v = 0; v < NV; v++) {
            ld4(&a, y + 4 * v);
            a -= d[v] * xi;
            st4(y + 4 * v, &a);
            if (v == 0)
                x[i] = a[1];
        }
    }
    return 2;
}

/* The same for any width: slots 0 .. mm, dot: mm + 1 doubles. */
BAND_INLINE int reflect_any(double *restrict p, double *restrict Y, size_t cap, size_t i0,
                            size_t i1, size_t r, size_t mm, double *restrict x,
                            double *restrict dot)
{
    double alpha, sigma, sc;
    int changed;
    if (!reflect_setup(p, Y, cap, i0, i1, r, mm + 1, x, &alpha, &sigma, &sc, &changed))
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

/* Column j against pivot p (nl >= mm + 1 slots addressable): the vector
 * kernel for nl <= 16, else the loop. */
BAND_INLINE int reflect(size_t nl, double *restrict p, double *restrict Y, size_t cap,
                        size_t i0, size_t i1, size_t r, size_t mm, double *restrict x,
                        double *restrict dot)
{
    switch (nl) {
    case 4:
        return reflect_lanes(1, p, Y, cap, i0, i1, r, x);
    case 8:
        return reflect_lanes(2, p, Y, cap, i0, i1, r, x);
    case 12:
        return reflect_lanes(3, p, Y, cap, i0, i1, r, x);
    case 16:
        return reflect_lanes(4, p, Y, cap, i0, i1, r, x);
    default:
        return reflect_any(p, Y, cap, i0, i1, r, mm, x, dot);
    }
}

/* Window width: kl + 1 rounded up to whole vectors (the slots past kl of a
 * row are zero and stay zero: the pivot is zero-padded there too). */
static size_t lanes(size_t kl) { return (kl + 4) / 4 * 4; }

BAND_INLINE void fold_rows(double *restrict Ld, size_t ld, size_t n, size_t kl, size_t m,
                           const size_t *first, const double *V, size_t ldv,
                           double *restrict Y, double *restrict x, double *restrict dot)
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
            for (size_t i = lo; i < na; i++) {
                double *y = Y + i * cap;
                memmove(y, y + r, (cap - r) * sizeof *y);
                memset(y + cap - r, 0, r * sizeof *y);
            }
            base = j;
            r = 0;
        }
        for (; na < m && first[na] <= j; na++) {
            double *y = Y + na * cap;
            const double *v = V + na * ldv;
            size_t w = j + kl + 1 < n ? kl + 1 : n - j, last = w;
            x[na] = v[0];
            memcpy(y + r, v, w * sizeof *y);
            memset(y + r + w, 0, (cap - r - w) * sizeof *y);
            while (last > 0 && v[last - 1] == 0.0)
                last--;
            if (first[na] + last > hi)
                hi = first[na] + last;
        }
        size_t mm = n - 1 - j < kl ? n - 1 - j : kl;
        double *Lc = Ld + j * ld;
        if (Lc[0] != 0.0) {
            size_t q = mm;
            while (q > 0 && Lc[q] == 0.0)
                q--;
            int changed;
            if (nl == mm + 1 || nl > 16) {
                changed = reflect(nl, Lc, Y, cap, lo, na, r, mm, x, dot);
            } else { /* a short column, or kl + 1 not a whole number of vectors */
                memcpy(pad, Lc, (mm + 1) * sizeof *pad);
                for (size_t s = mm + 1; s < nl; s++)
                    pad[s] = 0.0;
                changed = reflect(nl, pad, Y, cap, lo, na, r, mm, x, dot);
                memcpy(Lc, pad, (mm + 1) * sizeof *pad);
            }
            if (changed && j + q + 1 > hi)
                hi = j + q + 1;
            if (changed != 2)
                for (size_t i = lo; i < na; i++)
                    x[i] = Y[i * cap + r + 1];
        } else {
            double *pv = Y + lo * cap + r;
            int done = reflect(nl, pv, Y, cap, lo + 1, na, r, mm, x, dot);
            if (pv[0] != 0.0) {
                double sg = pv[0] < 0.0 ? -1.0 : 1.0;
                for (size_t s = 0; s <= mm; s++)
                    Lc[s] = sg * pv[s];
                lo++;
            } else {
                done = 0;
            }
            if (done != 2)
                for (size_t i = lo; i < na; i++)
                    x[i] = Y[i * cap + r + 1];
        }
        j++;
    }
}

static void fold_rows_plain(double *Ld, size_t ld, size_t n, size_t kl, size_t m,
                            const size_t *first, const double *V, size_t ldv, double *Y,
                            double *x, double *dot)
{
    fold_rows(Ld, ld, n, kl, m, first, V, ldv, Y, x, dot);
}

#if BAND_AVX2
BAND_TARGET_AVX2 static void fold_rows_avx2(double *Ld, size_t ld, size_t n, size_t kl, size_t m,
                                            const size_t *first, const double *V, size_t ldv,
                                            double *Y, double *x, double *dot)
{
    fold_rows(Ld, ld, n, kl, m, first, V, ldv, Y, x, dot);
}
#endif

size_t gmm_band_chol_add_rows_work(size_t m, size_t kl) { return (3 * m + 1) * lanes(kl) + m; }

gmm_status gmm_band_chol_add_rows(gmm_band *L, size_t m, const size_t *first, const double *V,
                                  size_t ldv, double *work)
{
    if (!L || (m > 0 && (!first || !V)))
        return gmm_error(GMM_EINVAL, "band_chol_add_rows: NULL argument");
    if (L->kind != GMM_BAND_LOWER || L->ku != 0)
        return gmm_error(GMM_EDIM, "band_chol_add_rows: L must be LOWER");
    size_t n = L->n, kl = L->kl;
    if (m == 0)
        return GMM_OK;
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
    size_t nl = lanes(kl);
    double *buf = work;
    if (!buf && !(buf = gmm_malloc(gmm_band_chol_add_rows_work(m, kl), sizeof *buf)))
        return gmm_error(GMM_ENOMEM, "band_chol_add_rows: out of memory");
    double *Y = buf, *dot = buf + m * 3 * nl, *x = dot + nl;
#if BAND_AVX2
    if (band_cpu_has_avx2())
        fold_rows_avx2(L->data, L->ld, n, kl, m, first, V, ldv, Y, x, dot);
    else
#endif
        fold_rows_plain(L->data, L->ld, n, kl, m, first, V, ldv, Y, x, dot);
    if (!work)
        gmm_free(buf);
    return GMM_OK;
}
