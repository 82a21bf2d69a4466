/* fit_info.c -- the observed information at a model's values (fit.h):
 * the standard errors and the variances of linear forms of the estimates,
 * from the Hessian of -loglik on the optimisation scale (fit_cert.c's
 * differences), carried to the parameters' own scale by the delta method. */
#include "fit_impl.h"

#include <math.h>
#include <string.h>

#include "gmm/alloc.h"

/* lincomb's var[r] = a_r' C a_r from L (H = L L' over all nf free
 * variables, at c->theta), C H^-1 carried to the parameters' scale: the
 * gradient of a_r'theta in u -- a_i dp/du at a free variable of its own, a
 * coefficient of the design basis its row of s R^-1 -- through L^-1.  v, z:
 * nf doubles each. */
static void lincomb_from(run_ctx *c, size_t nf, const double *L, const double *A, size_t nrow,
                         double *v, double *z, double *var)
{
    const gmm_objective *o = c->obj;
    size_t np = o->nparam;
    for (size_t r = 0; r < nrow; r++) {
        const double *a = A + r * np;
        memset(z, 0, nf * sizeof *z);
        for (size_t k = 0; k < nf; k++) {
            size_t i = c->idx[k];
            if (!infer_scale_in_lin(&c->sc, k))
                z[k] = a[i] * gmm_scale_dp_du(o->scale[i], c->theta[i]);
        }
        for (size_t j = 0; j < c->sc.lin; j++) {
            double w = a[o->lin_idx[j]];
            if (w == 0.0)
                continue;
            infer_scale_row(&c->sc, j, v);
            for (size_t k = 0; k < nf; k++)
                z[k] += w * v[k];
        }
        double v2 = 0.0;
        for (size_t k = 0; k < nf; k++) { /* z = L^-1 g in place */
            double x = z[k];
            for (size_t t = 0; t < k; t++)
                x -= L[k * nf + t] * z[t];
            z[k] = x / L[k * nf + k];
            v2 += z[k] * z[k];
        }
        var[r] = v2;
    }
}

/* The observed information at obj->value, factored, then the standard
 * errors (A NULL: into out, nparam) or the variances of A's nrow rows
 * (into out, nrow). */
static gmm_status observed_info(gmm_objective *obj, const double *A, size_t nrow, double *out)
{
    size_t np = obj->nparam, nf = 0;
    for (size_t i = 0; i < np; i++)
        nf += !obj->fixed[i];
    for (size_t i = 0; i < (A ? nrow : np); i++)
        out[i] = A ? 0.0 : NAN;
    if (nf == 0)
        return GMM_OK;
    run_ctx c;
    memset(&c, 0, sizeof c);
    gmm_fit_params par;
    gmm_fit_params_init(&par);
    size_t *idx = gmm_malloc(nf, sizeof *idx), *act = gmm_malloc(nf, sizeof *act);
    double *theta = gmm_malloc(np, sizeof *theta), *grad = gmm_malloc(np, sizeof *grad);
    double *u0 = gmm_malloc(nf, sizeof *u0), *H = gmm_malloc(nf * nf + 5 * nf, sizeof *H);
    gmm_status st = GMM_OK;
    if (!idx || !act || !theta || !grad || !u0 || !H) {
        st = gmm_error(GMM_ENOMEM, "fit: out of memory for the Hessian of %zu parameters", nf);
        goto done;
    }
    memcpy(theta, obj->value, np * sizeof *theta);
    for (size_t i = 0, k = 0; i < np; i++)
        if (!obj->fixed[i]) {
            act[k] = k;
            idx[k++] = i;
        }
    c.obj = obj;
    c.par = &par;
    c.nfree = nf;
    c.idx = idx;
    c.theta = theta;
    c.grad = grad;
    if ((st = infer_scale_init(&c.sc, obj, nf, idx)) != GMM_OK)
        goto done;
    infer_scale_u(&c.sc, obj->value, u0);
    double *wu = H + nf * nf, *gp = wu + nf, *gm = gp + nf, *z = gm + nf, *v = z + nf;
    int pd = 0;
    size_t bad = 0;
    /* the Hessian of -loglik on the optimisation scale: its inverse is the
     * covariance of the estimates there */
    if (!fit_hessian_chol(&c, u0, act, nf, CERT_STEP, H, wu, gp, gm, &pd, &bad)) {
        st = c.fail_status ? c.fail_status
                           : gmm_error(GMM_EDOM, "fit: the objective fails near its values");
        goto done;
    }
    if (!pd) {
        st = gmm_error(GMM_ENOTPD, "the observed information is not positive definite: the "
                                   "fit is not at a maximum ('%s')",
                       obj->name[idx[bad]]);
        goto done;
    }
    memcpy(theta, obj->value, np * sizeof *theta);
    if (A)
        lincomb_from(&c, nf, H, A, nrow, v, wu, out);
    else
        fit_std_errors_from(&c, act, nf, H, v, z, out);
done:
    gmm_free(idx);
    gmm_free(act);
    gmm_free(theta);
    gmm_free(grad);
    gmm_free(u0);
    gmm_free(H);
    infer_scale_free(&c.sc);
    return st;
}

gmm_status gmm_fit_std_errors(gmm_objective *obj, double *se)
{
    if (!obj || !obj->eval || !se)
        return gmm_error(GMM_EINVAL, "fit: NULL argument to gmm_fit_std_errors");
    return observed_info(obj, NULL, 0, se);
}

gmm_status gmm_fit_lincomb_var(gmm_objective *obj, const double *A, size_t nrow, double *var)
{
    if (!obj || !obj->eval || (nrow && (!A || !var)))
        return gmm_error(GMM_EINVAL, "fit: NULL argument to gmm_fit_lincomb_var");
    return observed_info(obj, A, nrow, var);
}
