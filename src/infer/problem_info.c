/* problem_info.c -- the average information of a Gaussian problem whose
 * prior is a sum of scale blocks (latent.h, gmm_latent_scale_blocks): the
 * objective's info (objective.h), from which fit takes scoring steps.
 *
 * With r = y - X beta, V = sigma^2 W^-1 + H Q^-1 H' the marginal covariance
 * of the observed rows (W their prior weights) and dV_k = dV / dtheta_k,
 * the average of the observed and the expected information (Gilmour,
 * Thompson and Cullis 1995, "AI-REML") is
 *
 *   M_jk = w_j' V^-1 w_k / 2,  w_k = dV_k V^-1 r,
 *
 * for two variances, X' V^-1 X for the coefficients, and 0 between the two
 * (their expectation).  Everything comes from the mode x^ of the last
 * evaluation: V^-1 r = W e / sigma^2, e = r - H x^; a block's variance
 * v_k gives w_k = H x^_k / v_k, x^_k the mode on its block and 0 elsewhere
 * (x^_k = v_k S_k^- H_k' V^-1 r); the noise gives w = e / sigma^2.  V^-1 w
 * is Woodbury's, D w - D H Sigma H' D w with D = W / sigma^2 and Sigma the
 * posterior covariance (conditioned on the constraints, as the prior is):
 * one solve with the Laplace factor per column.  No matrix beyond the
 * (variances + coefficients)^2 of M is formed. */
#include "gmm/problem.h"

#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/obsmap.h"
#include "problem_impl.h"

/* V^-1 w (nobs) into z; x (n) scratch. */
static gmm_status vinv(gmm_problem *p, const double *d, const double *w, double *z, double *x)
{
    const gmm_obsmap *m = &p->lobs.map;
    gmm_status st;
    memset(x, 0, p->n * sizeof *x);
    for (size_t i = 0; i < p->nobs; i++)
        gmm_obsmap_row_axpy(m, i, d[i] * w[i], x);
    if ((st = gmm_laplace_posterior_solve(p->lap, x)))
        return st;
    for (size_t i = 0; i < p->nobs; i++)
        z[i] = d[i] * (w[i] - gmm_obsmap_row_dot(m, i, x));
    return GMM_OK;
}

static gmm_status info(void *ctx, const double *theta, double *M)
{
    gmm_problem *p = ctx;
    gmm_status st;
    if (!p->lap || p->exact || p->sqrt_form)
        return gmm_error(GMM_EINVAL, "the average information needs the Laplace "
                                     "approximation's factor");
    /* column k of W (nobs each) is w of parameter k */
    size_t n = p->n, no = p->nobs, np = p->nparam;
    double s2 = theta[p->nl];
    double *W = p->iw, *d = p->iw + np * no, *z = d + no, *x = p->ix, *xk = p->ix + n;
    if ((st = p->sparse ? gmm_laplace_posterior_sparse(p->lap, x, NULL)
                        : gmm_laplace_posterior(p->lap, x, NULL)))
        return st;
    const gmm_obsmap *m = &p->lobs.map;
    for (size_t i = 0; i < no; i++) {
        double f = (p->oshift ? p->oshift[i] : 0.0) + gmm_obsmap_row_dot(m, i, x);
        d[i] = (p->owt ? p->owt[i] : 1.0) / s2;
        W[p->nl * no + i] = (p->oy[i] - f) / s2;
    }
    for (size_t j = 0; j < p->nl; j++) {
        for (size_t t = 0; t < n; t++)
            xk[t] = p->ipar[t] == j ? x[t] / theta[j] : 0.0;
        for (size_t i = 0; i < no; i++)
            W[j * no + i] = gmm_obsmap_row_dot(m, i, xk);
    }
    for (size_t k = 0; k < p->ncoef; k++)
        for (size_t i = 0; i < no; i++)
            W[(p->c0 + k) * no + i] = p->X[p->orow[i] * p->ncoef + k];
    memset(M, 0, np * np * sizeof *M);
    for (size_t b = 0; b < np; b++) {
        if ((st = vinv(p, d, W + b * no, z, x)))
            return st;
        int coef_b = b >= p->c0;
        for (size_t a = coef_b ? p->c0 : 0; a <= b; a++) {
            double s = 0.0;
            for (size_t i = 0; i < no; i++)
                s += W[a * no + i] * z[i];
            M[a * np + b] = M[b * np + a] = coef_b ? s : 0.5 * s;
        }
    }
    return GMM_OK;
}

gmm_status problem_info_enable(gmm_problem *p)
{
    p->obj.info = NULL;
    if (p->exact || !p->lik.type->conjugate || !p->lap || p->np != 1 ||
        !gmm_latent_scale_blocks(p->lat, NULL))
        return GMM_OK;
    size_t n = p->n, nl = p->nl;
    if (!p->ipar) {
        p->ipar = gmm_malloc(n ? n : 1, sizeof *p->ipar);
        p->ix = gmm_malloc(2 * (n ? n : 1), sizeof *p->ix);
        if (!p->ipar || !p->ix)
            return gmm_error(GMM_ENOMEM, "out of memory for the average information");
    }
    gmm_latent_scale_blocks(p->lat, p->ipar);
    /* a latent parameter of no block: no information */
    char *has = gmm_calloc(nl ? nl : 1, 1);
    if (!has)
        return gmm_error(GMM_ENOMEM, "out of memory for the average information");
    size_t nblock = 0;
    for (size_t t = 0; t < n; t++)
        if (!has[p->ipar[t]]) {
            has[p->ipar[t]] = 1;
            nblock++;
        }
    gmm_free(has);
    if (nblock != nl)
        return GMM_OK;
    if (!p->iw &&
        !(p->iw = gmm_malloc((p->nparam + 2) * (p->nobs ? p->nobs : 1), sizeof *p->iw)))
        return gmm_error(GMM_ENOMEM, "out of memory for the average information");
    p->obj.info = info;
    return GMM_OK;
}
