/* stack_ts.c -- INLA's time-series components of the stacked latent
 * (stack.h): AR1 and SEASONAL, on integer positions.
 *
 * POSITIONS.  The index values must be integers (as INLA's ar1 and
 * seasonal are on the index 1..n); the latents are the positions min..max,
 * x_j at value min + j, so a gap in the data is a latent without data (the
 * chain runs through it), not a shorter step.  A value that is not an
 * integer is refused with its row.
 *
 * AR1.  x_0 ~ N(0, v), x_j = rho x_{j-1} + e_j, e_j ~ N(0, v (1 - rho^2)):
 * stationary with marginal variance v ("<name>.variance") and lag-one
 * correlation rho ("<name>.rho", in (-1, 1)).  Q = 1/(v (1 - rho^2)) times
 * the tridiagonal with diagonal (1, 1 + rho^2, ..., 1 + rho^2, 1) and
 * off-diagonal -rho, as three groups: M_0 = I, M_1 = the interior diagonal,
 * M_2 = the off-diagonal ones, c = a (1, rho^2, -rho), a = 1/(v (1 -
 * rho^2)).  Proper; at least 2 positions.
 *
 * SEASONAL (season length m).  The sum of every m consecutive values is
 * N(0, v): Q = S'S / v, S the (n - m + 1) x n matrix of the windows' sums.
 * Bandwidth m - 1.  Intrinsic: its null space (dimension m - 1) holds the
 * m-periodic sequences whose period sums to 0, spanned by N_j = 1{pos = j
 * mod m} - 1{pos = m - 1 mod m}, j < m - 1.  The constraints are A = N'
 * (x orthogonal to the null space: the sums of x over the residue classes
 * mod m are equal), pinned at positions 0 .. m - 2 (N_S = I).  INLA's
 * constr = TRUE is the single sum-to-zero; the other m - 2 directions of
 * its null space INLA leaves to its diagonal jitter, here they are
 * constrained so the prior is proper on its subspace.  At least m + 1
 * positions (2 m would identify a season; m + 1 keeps the rank n - m + 1
 * >= 2). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "stack_impl.h"

gmm_status stack_positions(const char *name, const char *what, const double *value,
                           size_t nrows, size_t *pos, double *vmin, size_t *npos)
{
    double lo = INFINITY, hi = -INFINITY;
    if (!value)
        return gmm_error(GMM_EINVAL, "'%s': %s needs the index values", name, what);
    for (size_t r = 0; r < nrows; r++) {
        if (!isfinite(value[r]) || value[r] != floor(value[r]) || fabs(value[r]) > 1e15)
            return gmm_error_at(GMM_EINVAL, r, "row %zu: '%s' %s value %g is not an integer", r,
                                name, what, value[r]);
        lo = value[r] < lo ? value[r] : lo;
        hi = value[r] > hi ? value[r] : hi;
    }
    if (nrows == 0)
        lo = hi = 0.0;
    for (size_t r = 0; r < nrows; r++)
        pos[r] = (size_t)(value[r] - lo);
    *vmin = lo;
    *npos = (size_t)(hi - lo) + 1;
    return GMM_OK;
}

void stack_ar1_coef(double v, double rho, double *cg, double *dv, double *drho)
{
    double q = 1.0 - rho * rho, a = 1.0 / (v * q);
    cg[0] = a;
    cg[1] = rho * rho * a;
    cg[2] = -rho * a;
    for (int g = 0; g < 3; g++)
        dv[g] = -cg[g] / v;
    drho[0] = 2.0 * rho * a / q;
    drho[1] = 2.0 * rho * a / q;
    drho[2] = -a * (1.0 + rho * rho) / q;
}

static gmm_status build_ar1(stack_comp *c, size_t n)
{
    gmm_status st;
    if (n < 2)
        return gmm_error(GMM_EINVAL, "'%s': ar1 needs at least 2 positions, got %zu", c->name,
                         n);
    if ((st = stack_comp_arrays(c, 3 * n, 0, 0)))
        return st;
    for (size_t j = 0; j < n; j++) {
        stack_comp_slot(c, j, j, 1.0, 0);
        if (j > 0 && j + 1 < n)
            stack_comp_slot(c, j, j, 1.0, 1);
        if (j > 0)
            stack_comp_slot(c, j, j - 1, 1.0, 2);
    }
    return GMM_OK;
}

/* log det(N'N) for SEASONAL's basis: N'N = diag(cnt_j) + cnt_{m-1} 1 1'
 * (j < m - 1), whose determinant is prod cnt_j (1 + cnt_{m-1} sum 1/cnt_j)
 * (the matrix determinant lemma). */
static double season_ldnn(const size_t *cnt, size_t m)
{
    double ld = 0.0, s = 0.0;
    for (size_t j = 0; j + 1 < m; j++) {
        ld += log((double)cnt[j]);
        s += 1.0 / (double)cnt[j];
    }
    return ld + log1p((double)cnt[m - 1] * s);
}

static gmm_status build_seasonal(stack_comp *c, size_t n, size_t m)
{
    gmm_status st;
    if (m < 2)
        return gmm_error(GMM_EINVAL, "'%s': seasonal needs a season length of 2 or more, got "
                                     "%zu",
                         c->name, m);
    if (n < m + 1)
        return gmm_error(GMM_EINVAL, "'%s': seasonal of length %zu needs at least %zu "
                                     "positions, got %zu",
                         c->name, m, m + 1, n);
    size_t *cnt = gmm_calloc(m, sizeof *cnt);
    if (!cnt)
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    for (size_t j = 0; j < n; j++)
        cnt[j % m]++;
    size_t nent = 0;
    for (size_t j = 0; j + 1 < m; j++)
        nent += cnt[j] + cnt[m - 1];
    if ((st = stack_comp_arrays(c, n * m, m - 1, nent)))
        goto done;
    /* (S'S)_ij = the number of windows covering both i and j: windows start
     * at s = 0 .. n - m, so for i >= j, i - j < m, it is the count of s in
     * [max(0, i - m + 1), min(j, n - m)] */
    for (size_t i = 0; i < n; i++)
        for (size_t j = i >= m - 1 ? i - m + 1 : 0; j <= i; j++) {
            size_t lo = i >= m - 1 ? i - m + 1 : 0, hi = j < n - m ? j : n - m;
            if (hi >= lo)
                stack_comp_slot(c, i, j, (double)(hi - lo + 1), 0);
        }
    size_t e = 0;
    c->ncon = m - 1;
    for (size_t k = 0; k + 1 < m; k++) {
        c->con_start[k] = c->null_start[k] = e;
        c->con_pin[k] = k;
        for (size_t j = 0; j < n; j++)
            if (j % m == k || j % m == m - 1) {
                double v = j % m == k ? 1.0 : -1.0;
                c->con_latent[e] = c->null_latent[e] = j;
                c->con_value[e] = c->null_value[e] = v;
                e++;
            }
    }
    c->con_start[m - 1] = c->null_start[m - 1] = e;
    c->ldaa = season_ldnn(cnt, m);
    c->ldconst = 2.0 * c->ldaa; /* AN = N'N, det N_S = 1 */
done:
    gmm_free(cnt);
    return st;
}

gmm_status stack_ts_build(stack_comp *c, const gmm_stack_term *t, size_t nrows)
{
    gmm_status st;
    int ar = t->model == GMM_STACK_AR1;
    size_t n;
    if ((st = stack_positions(c->name, ar ? "ar1 index" : "seasonal index", t->value, nrows,
                              c->row_loc, &c->pos0, &n)))
        return st;
    c->n = n;
    c->season = t->season;
    /* the positions' values: the levels predict --terms lists */
    if (!(c->val = gmm_malloc(n, sizeof *c->val)))
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    for (size_t j = 0; j < n; j++)
        c->val[j] = c->pos0 + (double)j;
    c->m = n;
    if (ar) {
        if (!(c->start[1] > -1.0 && c->start[1] < 1.0))
            return gmm_error(GMM_EINVAL, "'%s': rho %g must be in (-1, 1)", c->name,
                             c->start[1]);
        return build_ar1(c, n);
    }
    return build_seasonal(c, n, t->season);
}

gmm_status stack_ts_coef(const stack_comp *c, const double *theta, double *cg, double *dc)
{
    double v = theta[0];
    memset(cg, 0, STACK_NGROUP * sizeof *cg);
    memset(dc, 0, STACK_NPAR * STACK_NGROUP * sizeof *dc);
    if (c->model == GMM_STACK_SEASONAL) {
        cg[0] = 1.0 / v;
        dc[0] = -1.0 / (v * v);
        return GMM_OK;
    }
    double rho = theta[1], dv[3], dr[3];
    if (!(rho > -1.0 && rho < 1.0))
        return gmm_error_at(GMM_EDOM, c->par0 + 1, "%s = %g must be in (-1, 1)", c->pname[1],
                            rho);
    stack_ar1_coef(v, rho, cg, dv, dr);
    for (int g = 0; g < 3; g++) {
        dc[g * STACK_NPAR] = dv[g];
        dc[g * STACK_NPAR + 1] = dr[g];
    }
    return GMM_OK;
}

/* NEW ROWS (stack_predict.c).  A position within min..max reads its
 * latent.  AR1 beyond the ends by h positions: rho^h x_edge + N(0, v (1 -
 * rho^{2h})) (forwards; backwards the same, the stationary chain being
 * reversible).  SEASONAL beyond its positions is refused (a forecast would
 * need the last m - 1 values' recursion). */
gmm_status stack_ts_row(const stack_comp *q, const double *theta, double t, size_t *li,
                        double *lw, size_t *ne, double *evar)
{
    if (!isfinite(t) || t != floor(t))
        return gmm_error(GMM_EINVAL, "'%s': index value %g is not an integer", q->name, t);
    double p = t - q->pos0, last = (double)(q->n - 1);
    if (p >= 0.0 && p <= last) {
        li[*ne] = (size_t)p;
        lw[(*ne)++] = 1.0;
        return GMM_OK;
    }
    if (q->model != GMM_STACK_AR1)
        return gmm_error(GMM_EINVAL, "'%s': seasonal value %g is outside the fitted %g .. %g",
                         q->name, t, q->pos0, q->pos0 + last);
    double h = p < 0.0 ? -p : p - last, rh = pow(theta[1], h);
    li[*ne] = p < 0.0 ? 0 : q->n - 1;
    lw[(*ne)++] = rh;
    *evar += theta[0] * (1.0 - rh * rh);
    return GMM_OK;
}
