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
            /* the row lives in slots j - base .. cap - 1 (< j - base + kl) */
            size_t live = cap - (j - base);
            memmove(buf, buf + (j - base), live * sizeof *buf);
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
        for (size_t s = 1; s <= m; s++)
            if (!isfinite(c[s]))
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
/* Nonzero when the active rows changed beyond column j (they may then
 * hold fill from the pivot). */
BAND_INLINE int reflect(double *restrict pv, double *restrict Y, size_t cap, size_t i0,
                         size_t i1, size_t r, size_t mm, double *restrict x,
                         double *restrict dot)
{
    double alpha = pv[0], sigma = 0.0, amax = fabs(alpha);
    size_t imax = SIZE_MAX;
    for (size_t i = i0; i < i1; i++) {
        x[i] = Y[i * cap + r];
        sigma += x[i] * x[i];
        if (fabs(x[i]) > amax) {
            amax = fabs(x[i]);
            imax = i;
        }
    }
    if (imax != SIZE_MAX) { /* row pivoting: the largest entry becomes the pivot */
        double *y = Y + imax * cap + r;
        for (size_t s = 0; s <= mm; s++) {
            double t = y[s];
            y[s] = pv[s];
            pv[s] = t;
        }
        x[imax] = alpha;
        alpha = pv[0];
        sigma = 0.0;
        for (size_t i = i0; i < i1; i++)
            sigma += x[i] * x[i];
    }
    double nrm2 = alpha * alpha + sigma, sc = 1.0;
    if (!(sigma >= SAFMIN && nrm2 <= 0.25 * DBL_MAX)) {
        int any = 0;
        for (size_t i = i0; i < i1; i++)
            any |= x[i] != 0.0;
        if (!any)
            return 0;
        sc = amax; /* = |alpha| after the pivoting */
        double inv = 1.0 / sc;
        alpha *= inv;
        sigma = 0.0;
        for (size_t i = i0; i < i1; i++) {
            x[i] *= inv;
            sigma += x[i] * x[i];
        }
        if (sigma < SAFMIN) { /* |x| < 1e-146 |pivot|: negligible */
            for (size_t i = i0; i < i1; i++)
                Y[i * cap + r] = 0.0;
            return imax != SIZE_MAX;
        }
        nrm2 = alpha * alpha + sigma;
    }
    double norm = sqrt(nrm2);
    double u0 = alpha > 0.0 ? -sigma / (alpha + norm) : alpha - norm;
    double t = 2.0 / (u0 * u0 + sigma);
    for (size_t s = 0; s <= mm; s++)
        dot[s] = u0 * pv[s];
    for (size_t i = i0; i < i1; i++) {
        const double *y = Y + i * cap + r;
        double xi = x[i];
        for (size_t s = 0; s <= mm; s++)
            dot[s] += xi * y[s];
    }
    for (size_t s = 0; s <= mm; s++) {
        dot[s] *= t;
        pv[s] -= dot[s] * u0;
    }
    for (size_t i = i0; i < i1; i++) {
        double *y = Y + i * cap + r, xi = x[i];
        for (size_t s = 0; s <= mm; s++)
            y[s] -= dot[s] * xi;
        y[0] = 0.0;
    }
    pv[0] = sc * norm;
    return 1;
}

BAND_INLINE void fold_rows(double *restrict Ld, size_t ld, size_t n, size_t kl, size_t m,
                           const size_t *first, const double *V, size_t ldv,
                           double *restrict Y, size_t cap, double *restrict x,
                           double *restrict dot)
{
    size_t lo = 0, na = 0, j = first[0], base = j, hi = 0; /* hi: rows zero from column hi */
    while (lo < m) {
        if (lo < na && j >= hi)
            lo = na; /* the active rows are zero: drop them */
        if (lo == na) {
            if (na == m)
                break;
            j = first[na]; /* >= j: rows come in order of first column */
        }
        size_t r = j - base;
        if (r + kl + 1 > cap || lo == na) {
            /* the active rows live in slots r .. cap - 1 (< r + kl) */
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
            size_t last = 0;
            memset(y + r, 0, (cap - r) * sizeof *y);
            for (size_t s = 0; s <= kl && j + s < n; s++) {
                y[r + s] = v[s];
                if (v[s] != 0.0)
                    last = s + 1;
            }
            if (first[na] + last > hi)
                hi = first[na] + last;
        }
        size_t mm = n - 1 - j < kl ? n - 1 - j : kl;
        double *Lc = Ld + j * ld;
        if (Lc[0] != 0.0) {
            size_t q = mm;
            while (q > 0 && Lc[q] == 0.0)
                q--;
            if (reflect(Lc, Y, cap, lo, na, r, mm, x, dot) && j + q + 1 > hi)
                hi = j + q + 1;
        } else {
            double *pv = Y + lo * cap + r;
            (void)reflect(pv, Y, cap, lo + 1, na, r, mm, x, dot);
            if (pv[0] != 0.0) {
                double sg = pv[0] < 0.0 ? -1.0 : 1.0;
                for (size_t s = 0; s <= mm; s++)
                    Lc[s] = sg * pv[s];
                lo++;
            }
        }
        j++;
    }
}

static void fold_rows_plain(double *Ld, size_t ld, size_t n, size_t kl, size_t m,
                            const size_t *first, const double *V, size_t ldv, double *Y,
                            size_t cap, double *x, double *dot)
{
    fold_rows(Ld, ld, n, kl, m, first, V, ldv, Y, cap, x, dot);
}

#if BAND_AVX2
BAND_TARGET_AVX2 static void fold_rows_avx2(double *Ld, size_t ld, size_t n, size_t kl, size_t m,
                                            const size_t *first, const double *V, size_t ldv,
                                            double *Y, size_t cap, double *x, double *dot)
{
    fold_rows(Ld, ld, n, kl, m, first, V, ldv, Y, cap, x, dot);
}
#endif

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
        double nan_if_bad = 0.0;
        for (size_t s = 0; s <= kl; s++)
            nan_if_bad += v[s] * 0.0; /* NaN for an infinite or NaN entry */
        if (nan_if_bad != 0.0 || isnan(nan_if_bad))
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
    size_t cap = 3 * (kl + 1);
    double *buf = work;
    if (!buf && !(buf = gmm_malloc(m * cap + kl + 1 + m, sizeof *buf)))
        return gmm_error(GMM_ENOMEM, "band_chol_add_rows: out of memory");
    double *Y = buf, *dot = buf + m * cap, *x = dot + kl + 1;
#if BAND_AVX2
    if (band_cpu_has_avx2())
        fold_rows_avx2(L->data, L->ld, n, kl, m, first, V, ldv, Y, cap, x, dot);
    else
#endif
        fold_rows_plain(L->data, L->ld, n, kl, m, first, V, ldv, Y, cap, x, dot);
    if (!work)
        gmm_free(buf);
    return GMM_OK;
}
