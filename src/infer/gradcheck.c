/* gradcheck.c -- analytic gradient versus GSL's central differences, one
 * parameter at a time, on the scale fit optimises (see gradcheck.h). */
#include "gmm/gradcheck.h"

#include <gsl/gsl_deriv.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

void gmm_gradcheck_params_init(gmm_gradcheck_params *p)
{
    p->step = 1e-4;
    p->rel_tol = 1e-6;
    p->abs_tol = 1e-6;
}

gmm_status gmm_gradcheck_params_check(const gmm_gradcheck_params *p)
{
    if (!p)
        return gmm_error(GMM_EINVAL, "gradcheck: no parameters");
    if (!(p->step > 0.0 && p->step < 1.0))
        return gmm_error(GMM_EINVAL, "gradcheck: step must be in (0, 1), got %g", p->step);
    if (!(p->rel_tol >= 0.0) || !isfinite(p->rel_tol))
        return gmm_error(GMM_EINVAL, "gradcheck: rel_tol must be finite and >= 0, got %g",
                         p->rel_tol);
    if (!(p->abs_tol >= 0.0) || !isfinite(p->abs_tol))
        return gmm_error(GMM_EINVAL, "gradcheck: abs_tol must be finite and >= 0, got %g",
                         p->abs_tol);
    return GMM_OK;
}

/* loglik as a function of one parameter's u, for gsl_deriv_central. */
typedef struct {
    const gmm_objective *obj;
    double *theta;
    size_t i;
    gmm_status failed;     /* first failure of the objective */
    double fail_at;        /* natural-scale value where it failed */
    char msg[GMM_ERROR_MAX];
} one_dim;

static double loglik_of_u(double u, void *ctx)
{
    one_dim *c = ctx;
    double ll = NAN, save = c->theta[c->i];
    double p = c->obj->positive[c->i] ? exp(u) : u;
    c->theta[c->i] = p;
    gmm_status st = c->obj->eval(c->obj->ctx, c->theta, &ll, NULL);
    c->theta[c->i] = save;
    if (st == GMM_OK && !isfinite(ll))
        st = gmm_error(GMM_EDOM, "log-likelihood is not finite");
    if (st != GMM_OK && c->failed == GMM_OK) {
        c->failed = st;
        c->fail_at = p;
        snprintf(c->msg, sizeof c->msg, "%s", gmm_error_message());
    }
    return st == GMM_OK ? ll : NAN;
}

void gmm_gradcheck_result_free(gmm_gradcheck_result *res)
{
    if (!res)
        return;
    gmm_free(res->row);
    res->row = NULL;
    res->nparam = res->nfail = 0;
}

gmm_status gmm_gradcheck(const gmm_objective *obj, const gmm_gradcheck_params *params,
                         gmm_gradcheck_result *res)
{
    gmm_status st;
    size_t np;
    double *theta = NULL, *grad = NULL;
    gmm_gradcheck_row *row = NULL;

    if (!obj || !res || !obj->eval || (obj->nparam && (!obj->value || !obj->positive ||
                                                        !obj->name)))
        return gmm_error(GMM_EINVAL, "gradcheck: incomplete objective");
    if ((st = gmm_gradcheck_params_check(params)) != GMM_OK)
        return st;
    memset(res, 0, sizeof *res);
    np = obj->nparam;
    for (size_t i = 0; i < np; i++) {
        if (!isfinite(obj->value[i]))
            return gmm_error(GMM_EINVAL, "gradcheck: '%s' is not finite", obj->name[i]);
        if (obj->positive[i] && obj->value[i] < 0.0)
            return gmm_error(GMM_EINVAL, "gradcheck: '%s' must be >= 0, got %g", obj->name[i],
                             obj->value[i]);
    }

    theta = gmm_malloc(np, sizeof *theta);
    grad = gmm_malloc(np, sizeof *grad);
    row = gmm_calloc(np, sizeof *row);
    if (!theta || !grad || !row) {
        st = gmm_error(GMM_ENOMEM, "gradcheck: out of memory");
        goto fail;
    }
    memcpy(theta, obj->value, np * sizeof *theta);
    double ll;
    if ((st = obj->eval(obj->ctx, theta, &ll, grad)) != GMM_OK) {
        char msg[GMM_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", gmm_error_message());
        st = gmm_error(st, "gradcheck: at the given parameters: %s", msg);
        goto fail;
    }

    size_t nfail = 0, first = 0;
    for (size_t i = 0; i < np; i++) {
        double p = theta[i];
        int pos = obj->positive[i];
        gmm_gradcheck_row *r = &row[i];
        r->name = obj->name[i];
        r->value = p;
        r->analytic = grad[i];
        if (pos && p == 0.0) {
            /* On the boundary of its domain (a fixed ridge of 0): no central
             * difference exists; the row is reported as not checked. */
            r->numeric = r->fd_error = r->rel_error = NAN;
            r->ok = 1;
            continue;
        }
        double u = pos ? log(p) : p;
        double h = params->step * (pos ? 1.0 : fmax(1.0, fabs(p)));
        double jac = pos ? p : 1.0; /* dp/du */
        one_dim c = {obj, theta, i, GMM_OK, 0.0, ""};
        gsl_function F = {loglik_of_u, &c};
        double fd_u = NAN, err_u = NAN;
        gsl_deriv_central(&F, u, h, &fd_u, &err_u);
        if (c.failed != GMM_OK) {
            st = gmm_error(c.failed, "gradcheck: '%s' at %.17g: %s", obj->name[i], c.fail_at,
                           c.msg);
            goto fail;
        }
        double a_u = grad[i] * jac, diff = fabs(a_u - fd_u);
        double big = fmax(fabs(a_u), fabs(fd_u));
        r->numeric = fd_u / jac;
        r->fd_error = err_u / jac;
        r->rel_error = big > 0.0 ? diff / big : 0.0;
        r->ok = isfinite(a_u) && diff <= params->rel_tol * big + params->abs_tol + err_u;
        if (!r->ok && nfail++ == 0)
            first = i;
    }
    res->loglik = ll;
    res->nparam = np;
    res->nfail = nfail;
    res->row = row;
    row = NULL;
    st = GMM_OK;
    if (nfail > 0)
        st = gmm_error(GMM_ECHECK,
                       "gradcheck: %zu of %zu gradients disagree with finite differences: first "
                       "'%s' (analytic %.6g, finite difference %.6g)",
                       nfail, np, res->row[first].name, res->row[first].analytic,
                       res->row[first].numeric);
fail:
    gmm_free(theta);
    gmm_free(grad);
    gmm_free(row);
    return st;
}
