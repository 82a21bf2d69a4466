/* opt_scale.c -- the scale on which fit and vi move an objective's free
 * parameters (infer_impl.h): each parameter's own (objective.h: identity,
 * log, logit), except the coefficients of the objective's design basis
 * (lin_*), whose block is u = R beta / s, used when all of them are free. */
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "infer_impl.h"

gmm_status infer_scale_init(infer_scale *s, const gmm_objective *obj, size_t nfree,
                            const size_t *idx)
{
    memset(s, 0, sizeof *s);
    s->obj = obj;
    s->nfree = nfree;
    s->idx = idx;
    if (!obj->lin_n || !obj->lin_idx || !obj->lin_R || !(obj->lin_s > 0.0))
        return GMM_OK;
    s->lin_at = gmm_malloc(obj->lin_n, sizeof *s->lin_at);
    s->lin_w = gmm_malloc(obj->lin_n, sizeof *s->lin_w);
    s->in_lin = gmm_calloc(nfree ? nfree : 1, 1);
    if (!s->lin_at || !s->lin_w || !s->in_lin) {
        infer_scale_free(s);
        return gmm_error(GMM_ENOMEM, "out of memory (%zu coefficients)", obj->lin_n);
    }
    for (size_t j = 0; j < obj->lin_n; j++) {
        size_t i = obj->lin_idx[j], k = 0;
        if (i >= obj->nparam || obj->fixed[i] || obj->scale[i] != GMM_SCALE_IDENTITY)
            return GMM_OK; /* the basis does not apply: raw coefficients */
        while (k < nfree && idx[k] != i)
            k++;
        if (k == nfree || !(obj->lin_R[j * obj->lin_n + j] != 0.0))
            return GMM_OK;
        s->lin_at[j] = k;
    }
    for (size_t j = 0; j < obj->lin_n; j++)
        s->in_lin[s->lin_at[j]] = 1;
    s->lin = obj->lin_n;
    return GMM_OK;
}

void infer_scale_free(infer_scale *s)
{
    gmm_free(s->lin_at);
    gmm_free(s->lin_w);
    gmm_free(s->in_lin);
    memset(s, 0, sizeof *s);
}

int infer_scale_in_lin(const infer_scale *s, size_t k) { return s->lin && s->in_lin[k]; }

int infer_scale_theta(infer_scale *s, const double *u, double *theta)
{
    const gmm_objective *o = s->obj;
    for (size_t k = 0; k < s->nfree; k++) {
        size_t i = s->idx[k];
        gmm_scale sc = o->scale[i];
        double p = gmm_scale_from_u(sc, u[k]);
        double per;
        if (gmm_scale_two_sided(sc, &per) && fabs(u[k]) > per * INFER_LOGIT_MAX) {
            gmm_error(GMM_EDOM, "%s = %.17g is within %.2g of its bound, where 1 - %s keeps "
                      "too few digits (|%s| > %g)", o->name[i], p,
                      1.0 - gmm_scale_from_u(sc, per * INFER_LOGIT_MAX), o->name[i],
                      gmm_scale_name(sc), per * INFER_LOGIT_MAX);
            return 0;
        }
        if (!gmm_scale_inside(sc, p)) {
            gmm_error(GMM_EDOM, "%s = %g (u = %g on its %s scale) must be %s", o->name[i], p,
                      u[k], gmm_scale_name(sc), gmm_scale_domain(sc));
            return 0;
        }
        theta[i] = p;
    }
    size_t m = s->lin;
    const double *R = o->lin_R;
    for (size_t j = m; j-- > 0;) { /* beta = s R^-1 u on the block */
        double x = u[s->lin_at[j]];
        for (size_t k = j + 1; k < m; k++)
            x -= R[j * m + k] * s->lin_w[k];
        s->lin_w[j] = x / R[j * m + j];
    }
    for (size_t j = 0; j < m; j++) {
        double b = o->lin_s * s->lin_w[j];
        if (!isfinite(b)) {
            gmm_error(GMM_EDOM, "%s = %g left the range of doubles", o->name[o->lin_idx[j]], b);
            return 0;
        }
        theta[o->lin_idx[j]] = b;
    }
    return 1;
}

void infer_scale_u(const infer_scale *s, const double *theta, double *u)
{
    const gmm_objective *o = s->obj;
    for (size_t k = 0; k < s->nfree; k++) {
        size_t i = s->idx[k];
        u[k] = gmm_scale_to_u(o->scale[i], theta[i]);
    }
    size_t m = s->lin;
    const double *R = o->lin_R;
    for (size_t j = 0; j < m; j++) { /* u = R beta / s */
        double x = 0.0;
        for (size_t k = j; k < m; k++)
            x += R[j * m + k] * theta[o->lin_idx[k]];
        u[s->lin_at[j]] = x / o->lin_s;
    }
}

void infer_scale_grad(infer_scale *s, const double *theta, const double *grad, double sign,
                      double *g)
{
    const gmm_objective *o = s->obj;
    for (size_t k = 0; k < s->nfree; k++) {
        size_t i = s->idx[k];
        g[k] = sign * grad[i] * gmm_scale_dp_du(o->scale[i], theta[i]);
    }
    size_t m = s->lin;
    const double *R = o->lin_R;
    for (size_t j = 0; j < m; j++) { /* d/du = s R^-T d/dbeta */
        double x = sign * grad[o->lin_idx[j]];
        for (size_t k = 0; k < j; k++)
            x -= R[k * m + j] * s->lin_w[k];
        s->lin_w[j] = x / R[j * m + j];
    }
    for (size_t j = 0; j < m; j++)
        g[s->lin_at[j]] = o->lin_s * s->lin_w[j];
}

void infer_scale_row(infer_scale *s, size_t j, double *v)
{
    const gmm_objective *o = s->obj;
    size_t m = s->lin;
    const double *R = o->lin_R;
    for (size_t k = 0; k < m; k++) { /* x = R^-T e_j: beta_j = s x'u */
        double x = k == j ? 1.0 : 0.0;
        for (size_t t = 0; t < k; t++)
            x -= R[t * m + k] * s->lin_w[t];
        s->lin_w[k] = x / R[k * m + k];
    }
    memset(v, 0, s->nfree * sizeof *v);
    for (size_t k = 0; k < m; k++)
        v[s->lin_at[k]] = o->lin_s * s->lin_w[k];
}
