/* band_qr.c -- the Cholesky factor of M^T M from the rows of M (band.h
 * section 6): row-sequential Givens QR into a banded factor, one row at a
 * time (below); a block of rows by Householder reflections is
 * band_qr_fold.c (BLOCK FOLD).
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

#include "band_qr_impl.h"

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
