/* problem_coef.c -- theta's likelihood parameters and the fixed effects:
 * the offsets X beta, their adjoint and the coefficients' basis (problem.h).
 *
 * COEFFICIENTS.  The coefficients beta of the design X are parameters of
 * the marginal likelihood (maximum likelihood, as lme4), not latents: the
 * latent's band and its Markov structure stay as they are, and each
 * coefficient enters f_r = X_r beta + (H x)_r through the offsets below.
 * A Gaussian model without covariates has its data centred by the caller
 * instead (no coefficient). */
#include "gmm/problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/laplace.h"
#include "infer_impl.h"
#include "problem_impl.h"

gmm_status gmm_problem_lik_at(const gmm_problem *p, const double *theta, gmm_lik *out)
{
    if (!p || !theta || !out)
        return gmm_error(GMM_EINVAL, "gmm_problem_lik_at: NULL argument");
    gmm_lik l = *p->lik0;
    for (size_t k = 0; k < p->np; k++) {
        double v = theta[p->nl + k];
        if (!isfinite(v) || !(v > 0.0))
            return gmm_error_at(GMM_EDOM, p->nl + k, "%s = %g must be positive and finite",
                                p->obj.name[p->nl + k], v);
        l.par[k] = v;
    }
    *out = l;
    return GMM_OK;
}

void gmm_problem_offsets(const gmm_problem *p, const double *theta, double *off)
{
    const double *beta = theta + p->c0;
    for (size_t r = 0; r < p->nrows; r++) {
        const double *xr = p->X + r * p->ncoef;
        double s = 0.0;
        for (size_t k = 0; k < p->ncoef; k++)
            s += xr[k] * beta[k];
        off[r] = s;
    }
}

void gmm_problem_offsets_rev(const gmm_problem *p, const double *offbar, double *thetabar)
{
    double *bb = thetabar + p->c0;
    for (size_t r = 0; r < p->nrows; r++) {
        const double *xr = p->X + r * p->ncoef;
        for (size_t k = 0; k < p->ncoef; k++)
            bb[k] += xr[k] * offbar[r];
    }
}

size_t gmm_problem_ncoef(const gmm_problem *p) { return p->ncoef; }

/* Householder QR of the observed rows' columns in order, skipping those
 * whose remainder after the kept columns' reflections has norm <= tol
 * times the column's own norm (LINPACK's dqrdc2, R's lm, without its
 * moving of such columns to the end: they are dropped).  A is nobs x nu,
 * column-major, overwritten. */
gmm_status gmm_problem_coef_basis(gmm_problem *p, double tol, int *aliased)
{
    if (!p)
        return gmm_error(GMM_EINVAL, "gmm_problem_coef_basis: NULL argument");
    if (!(tol >= 0.0 && tol < 1.0))
        return gmm_error(GMM_EINVAL, "gmm_problem_coef_basis: tol %g outside [0, 1)", tol);
    size_t nc = p->ncoef, no = p->nobs, nu = 0;
    for (size_t k = 0; k < nc; k++) {
        if (aliased)
            aliased[k] = 0;
        nu += !p->obj.fixed[p->c0 + k];
    }
    gmm_free(p->lin_idx);
    gmm_free(p->lin_R);
    p->lin_idx = NULL;
    p->lin_R = NULL;
    p->obj.lin_n = 0;
    p->obj.lin_idx = NULL;
    p->obj.lin_R = NULL;
    p->obj.lin_s = 1.0;
    if (!nu || !no)
        return GMM_OK;
    double *A = gmm_malloc(no * nu, sizeof *A), *v = gmm_malloc(no, sizeof *v);
    size_t *col = gmm_malloc(nu, sizeof *col);
    p->lin_idx = gmm_malloc(nu, sizeof *p->lin_idx);
    p->lin_R = gmm_calloc(nu * nu, sizeof *p->lin_R);
    gmm_status st = GMM_OK;
    if (!A || !v || !col || !p->lin_idx || !p->lin_R) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the design's QR (%zu x %zu)", no, nu);
        goto done;
    }
    for (size_t k = 0, j = 0; k < nc; k++) {
        if (p->obj.fixed[p->c0 + k])
            continue;
        col[j] = k;
        for (size_t r = 0, i = 0; r < p->nrows; r++)
            if (!isnan(p->y[r]))
                A[j * no + i++] = p->X[r * nc + k];
        j++;
    }
    /* each column divided by its largest |entry| (R's column scaled back
     * below), so that the norms neither overflow nor underflow whatever the
     * covariate's units */
    double *cscale = gmm_malloc(nu, sizeof *cscale);
    if (!cscale) {
        st = gmm_error(GMM_ENOMEM, "out of memory for the design's QR");
        goto done;
    }
    for (size_t j = 0; j < nu; j++) {
        double mx = 0.0, *a = A + j * no;
        for (size_t i = 0; i < no; i++)
            mx = fmax(mx, fabs(a[i]));
        cscale[j] = mx > 0.0 ? mx : 1.0;
        for (size_t i = 0; i < no; i++)
            a[i] /= cscale[j];
    }
    size_t rank = 0;
    for (size_t j = 0; j < nu; j++) {
        double *a = A + j * no, n0 = 0.0, nr = 0.0;
        for (size_t i = 0; i < no; i++)
            n0 += a[i] * a[i];
        for (size_t i = rank; i < no; i++)
            nr += a[i] * a[i];
        n0 = sqrt(n0);
        nr = sqrt(nr);
        if (!(nr > tol * n0) || rank == no) {
            size_t k = col[j];
            p->obj.fixed[p->c0 + k] = 1;
            p->obj.value[p->c0 + k] = 0.0;
            if (aliased)
                aliased[k] = 1;
            continue;
        }
        /* the reflection H = I - 2 v v' / v'v taking a[rank ..] to (-s |a|, 0 ...) */
        double alpha = a[rank] >= 0.0 ? -nr : nr;
        for (size_t i = rank; i < no; i++)
            v[i] = a[i];
        v[rank] -= alpha;
        double vv = 0.0;
        for (size_t i = rank; i < no; i++)
            vv += v[i] * v[i];
        for (size_t jj = j; jj < nu; jj++) {
            double *b = A + jj * no, d = 0.0;
            for (size_t i = rank; i < no; i++)
                d += v[i] * b[i];
            d *= 2.0 / vv;
            for (size_t i = rank; i < no; i++)
                b[i] -= d * v[i];
        }
        /* R's column: the entries above and at the diagonal, scaled back */
        p->lin_idx[rank] = p->c0 + col[j];
        for (size_t i = 0; i <= rank; i++)
            p->lin_R[i * nu + rank] = a[i] * cscale[j];
        rank++;
    }
    /* compact R to rank x rank */
    for (size_t i = 0; i < rank; i++)
        for (size_t k = 0; k < rank; k++)
            p->lin_R[i * rank + k] = p->lin_R[i * nu + k];
    p->obj.lin_n = rank;
    p->obj.lin_idx = p->lin_idx;
    p->obj.lin_R = p->lin_R;
    p->obj.lin_s = sqrt((double)no);
    gmm_free(cscale);
done:
    gmm_free(A);
    gmm_free(v);
    gmm_free(col);
    return st;
}

int gmm_problem_offset_constant(const gmm_problem *p, const double *theta, double *b)
{
    if (b)
        *b = p->ncoef ? theta[p->c0] : 0.0;
    return p->const_off;
}
