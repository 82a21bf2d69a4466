/* stack_corr.c -- the CORR component of a stacked latent (stack.h): k
 * correlated effects per level of a grouping factor, lme4's (1 + x | g).
 *
 * MODEL.  u_g ~ N(0, Sigma) independently per level g, Sigma k x k
 * unstructured; the latents level by level (u_{g,0} .. u_{g,k-1} at g k ..
 * g k + k - 1), so the component's precision is block diagonal with blocks
 * Sigma^-1 (bandwidth k - 1 on its own).  Data row r reads
 * sum_a z_{r,a} u_{g(r),a}, z_r the row's covariates (1 for an intercept).
 *
 * PARAMETERS (so that the band stays and the boundary is reachable: a
 * variance tends to 0, a correlation to +-1).  First the k variances
 * "<name>.variance.<effect>" (domain (0, inf)), then k (k - 1) / 2
 * correlations in lme4's order (row a = 1 .. k - 1, column b = 0 .. a - 1;
 * domain (-1, 1)): for k = 2 the correlation itself,
 * "<name>.cor.<effect 0>.<effect 1>"; for k >= 3 the canonical partial
 * correlations (Lewandowski, Kurowicka & Joe 2009, the onion/CPC
 * construction), "<name>.pcor.<effect b>.<effect a>", z_ab the correlation
 * of effects a and b given effects 0 .. b - 1, any values in (-1, 1)
 * giving a valid correlation matrix R = L L' with L lower triangular:
 *
 *     L_a0 = z_a0,  L_ab = z_ab sqrt(1 - sum_{m<b} L_am^2)  (0 < b < a),
 *     L_aa = sqrt(1 - sum_{m<a} L_am^2),
 *
 * and Sigma = D R D, D = diag(sqrt(variance)).
 *
 * GROUPS.  Q = sum_g c_g M_g with one group per entry (a, b), a >= b, of
 * Sigma^-1 = D^-1 L^-T L^-1 D^-1: M_g holds 1 at (g k + a, g k + b) for
 * every level.  dc/dtheta_p = -Sigma^-1 (dSigma/dtheta_p) Sigma^-1, with
 * dSigma/dv_a from D and dSigma/dz = D (dL L' + L dL') D, dL by forward
 * differentiation of the construction above (only row a of L moves). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "stack_impl.h"

#define KM GMM_STACK_CORR_MAX

static size_t tri(size_t a, size_t b) { return a * (a + 1) / 2 + b; }

static char *joined(const char *a, const char *b, const char *c, const char *d)
{
    size_t len = strlen(a) + strlen(b) + strlen(c) + (d ? strlen(d) + 1 : 0) + 3;
    char *s = gmm_malloc(len, 1);
    if (s) {
        if (d)
            snprintf(s, len, "%s.%s.%s.%s", a, b, c, d);
        else
            snprintf(s, len, "%s.%s.%s", a, b, c);
    }
    return s;
}

gmm_status stack_corr_build(stack_comp *c, const gmm_stack_term *t, size_t nrows)
{
    gmm_status st;
    size_t k = t->neffect;
    if ((st = stack_comp_common(c, t, nrows)))
        return st;
    if (k < 1 || k > KM || !t->z || !t->effect)
        return gmm_error(GMM_EINVAL, "'%s': a correlated term needs 1 to %d effects, their "
                                     "coefficients and names (%zu given)",
                         c->name, KM, k);
    for (size_t r = 0; r < nrows; r++) {
        if (!t->level || t->level[r] >= t->nlevel)
            return gmm_error_at(GMM_EINVAL, r, "row %zu: '%s' level out of range (%zu levels)",
                                r, c->name, t->nlevel);
        for (size_t a = 0; a < k; a++)
            if (!isfinite(t->z[r * k + a]))
                return gmm_error_at(GMM_EINVAL, r, "row %zu: '%s' coefficient of %s is not "
                                                   "finite",
                                    r, c->name, t->effect[a]);
        c->row_loc[r] = t->level[r] * k;
    }
    c->n = t->nlevel * k;
    c->nread = k;
    c->npar = k * (k + 1) / 2;
    gmm_free(c->hidx);
    gmm_free(c->hval);
    c->hidx = gmm_malloc(k, sizeof *c->hidx);
    c->hval = gmm_malloc(k, sizeof *c->hval);
    c->zrow = gmm_malloc(nrows * k + 1, sizeof *c->zrow);
    c->gname = gmm_calloc(c->npar, sizeof *c->gname);
    c->gstart = gmm_malloc(c->npar, sizeof *c->gstart);
    if (!c->hidx || !c->hval || !c->zrow || !c->gname || !c->gstart)
        return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    for (size_t a = 0; a < k; a++) {
        c->hidx[a] = a;
        c->hval[a] = 1.0;
    }
    memcpy(c->zrow, t->z, nrows * k * sizeof *c->zrow);
    for (size_t a = 0; a < k; a++) {
        c->gstart[a] = c->start[0];
        if (!(c->gname[a] = joined(c->name, "variance", t->effect[a], NULL)))
            return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
    }
    for (size_t a = 1, p = k; a < k; a++)
        for (size_t b = 0; b < a; b++, p++) {
            c->gstart[p] = 0.0;
            if (!(c->gname[p] = joined(c->name, k == 2 ? "cor" : "pcor", t->effect[b],
                                       t->effect[a])))
                return gmm_error(GMM_ENOMEM, "out of memory for '%s'", c->name);
        }
    if ((st = stack_comp_arrays(c, t->nlevel * c->npar, 0, 0)))
        return st;
    for (size_t g = 0; g < t->nlevel; g++)
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b <= a; b++)
                stack_comp_slot(c, g * k + a, g * k + b, 1.0, tri(a, b));
    return GMM_OK;
}

/* L of the CPC construction from z (k x k row-major, lower triangle), and,
 * with p0 < k (k - 1) / 2, dL/dz_p0 into dL. */
static void cpc_chol(size_t k, const double *z, double *L, size_t p0, double *dL)
{
    memset(L, 0, k * k * sizeof *L);
    if (dL)
        memset(dL, 0, k * k * sizeof *dL);
    L[0] = 1.0;
    for (size_t a = 1, p = 0; a < k; a++) {
        double s = 1.0, ds = 0.0; /* 1 - sum_{m<b} L_am^2 and its derivative */
        for (size_t b = 0; b < a; b++, p++) {
            double rs = sqrt(s), zz = z[p];
            L[a * k + b] = zz * rs;
            if (dL)
                dL[a * k + b] = (p == p0 ? rs : 0.0) + (rs > 0.0 ? zz * ds / (2.0 * rs) : 0.0);
            s -= L[a * k + b] * L[a * k + b];
            ds -= 2.0 * L[a * k + b] * (dL ? dL[a * k + b] : 0.0);
        }
        L[a * k + a] = sqrt(s);
        if (dL)
            dL[a * k + a] = s > 0.0 ? ds / (2.0 * sqrt(s)) : 0.0;
    }
}

void stack_corr_sigma(const stack_comp *c, const double *theta, double *Sigma)
{
    size_t k = c->nread;
    double L[KM * KM];
    cpc_chol(k, theta + k, L, SIZE_MAX, NULL);
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            double r = 0.0;
            for (size_t m = 0; m < k; m++)
                r += L[a * k + m] * L[b * k + m];
            Sigma[a * k + b] = sqrt(theta[a] * theta[b]) * r;
        }
}

/* X = A B (k x k, row-major). */
static void mul(size_t k, const double *A, const double *B, double *X)
{
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++) {
            double s = 0.0;
            for (size_t m = 0; m < k; m++)
                s += A[i * k + m] * B[m * k + j];
            X[i * k + j] = s;
        }
}

gmm_status stack_corr_coef(const stack_comp *c, const double *theta, double *cg, double *dc)
{
    size_t k = c->nread, np = c->npar;
    const double *v = theta, *z = theta + k;
    double L[KM * KM], Li[KM * KM], Si[KM * KM], R[KM * KM], sd[KM];
    double dL[KM * KM], dS[KM * KM], T[KM * KM], U[KM * KM];
    memset(cg, 0, STACK_NGROUP * sizeof *cg);
    memset(dc, 0, STACK_NPAR * STACK_NGROUP * sizeof *dc);
    for (size_t a = 0; a < k; a++) {
        if (!isfinite(v[a]) || !(v[a] > 0.0))
            return gmm_error_at(GMM_EDOM, c->par0 + a, "%s = %g must be positive", c->gname[a],
                                v[a]);
        sd[a] = sqrt(v[a]);
    }
    for (size_t p = 0; p + k < np; p++)
        if (!(z[p] > -1.0 && z[p] < 1.0))
            return gmm_error_at(GMM_EDOM, c->par0 + k + p, "%s = %g must be in (-1, 1)",
                                c->gname[k + p], z[p]);
    cpc_chol(k, z, L, SIZE_MAX, NULL);
    /* Li = L^-1 (forward substitution, column by column) */
    memset(Li, 0, k * k * sizeof *Li);
    for (size_t j = 0; j < k; j++)
        for (size_t i = j; i < k; i++) {
            double s = i == j ? 1.0 : 0.0;
            for (size_t m = j; m < i; m++)
                s -= L[i * k + m] * Li[m * k + j];
            Li[i * k + j] = s / L[i * k + i];
        }
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            double s = 0.0, r = 0.0;
            for (size_t m = 0; m < k; m++) {
                s += Li[m * k + a] * Li[m * k + b];
                r += L[a * k + m] * L[b * k + m];
            }
            Si[a * k + b] = s / (sd[a] * sd[b]);
            R[a * k + b] = r;
        }
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b <= a; b++)
            cg[tri(a, b)] = Si[a * k + b];
    for (size_t p = 0; p < np; p++) {
        memset(dS, 0, k * k * sizeof *dS);
        if (p < k) { /* dSigma/dv_p: row and column p of D R D */
            for (size_t b = 0; b < k; b++) {
                double e = b == p ? 1.0 : R[p * k + b] * sd[b] / (2.0 * sd[p]);
                dS[p * k + b] += e;
                dS[b * k + p] += b == p ? 0.0 : e;
            }
        } else { /* D (dL L' + L dL') D */
            cpc_chol(k, z, L, p - k, dL);
            for (size_t a = 0; a < k; a++)
                for (size_t b = 0; b < k; b++) {
                    double s = 0.0;
                    for (size_t m = 0; m < k; m++)
                        s += dL[a * k + m] * L[b * k + m] + L[a * k + m] * dL[b * k + m];
                    dS[a * k + b] = sd[a] * s * sd[b];
                }
        }
        mul(k, Si, dS, T);
        mul(k, T, Si, U);
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b <= a; b++)
                dc[tri(a, b) * STACK_NPAR + p] = -U[a * k + b];
    }
    return GMM_OK;
}
