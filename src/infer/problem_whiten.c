/* problem_whiten.c -- the whitened log joint of the latents at a fixed
 * theta, under the prior's metric or the Laplace one (problem.h). */
#include "gmm/problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/laplace.h"
#include "infer_impl.h"
#include "problem_impl.h"

void gmm_problem_set_metric(gmm_problem *p, gmm_metric m)
{
    p->metric = m;
    p->wready = 0;
}

gmm_metric gmm_problem_metric(const gmm_problem *p) { return p->metric; }

void gmm_problem_set_stop(gmm_problem *p, int (*stop)(void *user), void *user)
{
    p->lpar.stop = stop;
    p->lpar.stop_user = user;
}

/* The Laplace fit at theta, kept for the map: Q, chol(Q + H'WH), the mode. */
static gmm_status laplace_map_setup(gmm_problem *p, const double *theta)
{
    gmm_status st;
    double f;
    if (!p->lap && (st = problem_laplace_alloc(p)))
        return st;
    if (!p->wxh) {
        size_t kl = gmm_latent_bandwidth(p->lat);
        /* the sparse path borrows the Laplace form's factor instead */
        p->wfac = p->sparse ? NULL : gmm_factor_band_alloc(p->n, kl);
        p->wxh = gmm_malloc(3 * p->n + p->nobs, sizeof *p->wxh);
        if ((!p->sparse && !p->wfac) || !p->wxh)
            return gmm_error(GMM_ENOMEM, "out of memory for the Laplace metric (%zu latents)",
                             p->n);
        p->wqx = p->wxh + p->n;
        p->wc = p->wqx + p->n;
        p->wwt = p->wc + p->n;
    }
    /* from x = 0: the map must not depend on the object's history */
    p->cold = 1;
    if ((st = problem_laplace_forward_form(p, theta, &f, 0)))
        return st;
    const gmm_band *L = p->sparse ? NULL : gmm_laplace_chol(p->lap);
    const double *wt = gmm_laplace_weights(p->lap);
    p->wL = p->sparse ? gmm_laplace_factor(p->lap) : p->wfac;
    if (p->sparse ? !p->wL || gmm_latent_nconstr(p->lat) > 0 || !wt : !L || !wt)
        return gmm_error(GMM_EINVAL, "the Laplace metric is not available for a latent with "
                                     "linear constraints (use the prior's)");
    /* the Laplace workspace's observations are the packed rows, in order */
    memcpy(p->wwt, wt, p->nobs * sizeof *wt);
    if (p->sparse)
        st = gmm_laplace_posterior_sparse(p->lap, p->wxh, NULL);
    else if (!(st = gmm_factor_set_chol(p->wfac, L)))
        st = gmm_laplace_posterior(p->lap, p->wxh, NULL);
    return st ? st : gmm_factor_mul_lt(p->wL, p->wxh, p->wc);
}

/* The whitened density's arrays, and the packed observed rows. */
static gmm_status whiten_alloc(gmm_problem *p)
{
    size_t no = p->nobs ? p->nobs : 1, nc = gmm_lik_nconst(&p->lik), onz = 0;
    for (size_t r = 0; r < p->nrows; r++)
        if (!isnan(p->y[r]))
            onz += gmm_obsmap_row_hi(&p->map, r) - gmm_obsmap_row_lo(&p->map, r);
    p->wcoef = gmm_malloc(gmm_obsmap_nnz(&p->map) ? gmm_obsmap_nnz(&p->map) : 1, sizeof *p->wcoef);
    p->wx = gmm_malloc(p->n, sizeof *p->wx);
    p->wg = gmm_malloc(p->n, sizeof *p->wg);
    p->woff = gmm_calloc(p->nrows ? p->nrows : 1, sizeof *p->woff);
    p->wrow = gmm_malloc(2 * no + 1 + (onz ? onz : 1), sizeof *p->wrow);
    p->wy = gmm_malloc((6 + nc) * no + (onz ? onz : 1), sizeof *p->wy);
    if (!p->wcoef || !p->wx || !p->wg || !p->woff || !p->wrow || !p->wy)
        return gmm_error(GMM_ENOMEM, "out of memory for the whitened density (%zu latents)",
                         p->n);
    p->wptr = p->wrow + no;
    p->widx = p->wptr + no + 1;
    p->we = p->wy + no;
    p->wo = p->we + no;
    p->wf = p->wo + no;
    p->wd = p->wf + no;
    p->whx = p->wd + no;
    p->wconst = p->whx + no;
    p->wh = p->wconst + nc * no;
    const size_t *off = gmm_latent_obs_offset(p->lat);
    size_t i = 0;
    p->wptr[0] = 0;
    for (size_t r = 0; r < p->nrows; r++) {
        if (isnan(p->y[r]))
            continue;
        size_t lo = gmm_obsmap_row_lo(&p->map, r), hi = gmm_obsmap_row_hi(&p->map, r),
               k0 = p->wptr[i];
        for (size_t k = lo; k < hi; k++)
            p->widx[k0 + k - lo] = off[r] + gmm_obsmap_row_pos(&p->map, k, lo);
        p->wrow[i] = r;
        p->wy[i] = p->y[r];
        p->we[i] = p->e ? p->e[r] : 1.0;
        /* y and e are the problem's for good: their constants once */
        gmm_lik_row_const(&p->lik, p->wy[i], p->we[i], p->wconst + i * nc);
        p->wptr[++i] = k0 + hi - lo;
    }
    p->wone = p->wptr[p->nobs] == p->nobs;
    return GMM_OK;
}

double problem_packed_lik(gmm_problem *p, double *g, double *parbar)
{
    size_t nc = gmm_lik_nconst(&p->wlik), np = p->wlik.type->nparam;
    if (!parbar && !p->owt)
        return gmm_lik_sum_const(&p->wlik, p->nobs, p->wy, p->we, p->wconst, p->wf, g);
    double sum = 0.0, out[4], dpar[3 * GMM_LIK_MAXPARAM];
    for (size_t i = 0; i < p->nobs; i++) {
        const double *c = p->wconst + i * nc;
        if (p->owt) /* the packed row i is data row wrow[i] */
            gmm_lik_eval_weighted(&p->wlik, p->wy[i], p->we[i], p->wt[p->wrow[i]], c,
                                  p->wf[i], out, parbar ? dpar : NULL);
        else
            gmm_lik_eval_const(&p->wlik, p->wy[i], p->we[i], c, p->wf[i], out, dpar);
        sum += out[0];
        if (g)
            g[i] = out[1];
        for (size_t k = 0; parbar && k < np; k++)
            parbar[k] += dpar[3 * k];
    }
    return sum;
}

/* f = X beta + H x at the packed rows into p->wf (in row_f's order of
 * operations), from x = p->wx. */
void problem_packed_f(gmm_problem *p)
{
    const double *x = p->wx, *h = p->wh;
    if (p->wone) { /* the same operations without the inner loop */
        for (size_t i = 0; i < p->nobs; i++)
            p->wf[i] = p->wo[i] + h[i] * x[p->widx[i]];
        return;
    }
    for (size_t i = 0; i < p->nobs; i++) {
        double f = p->wo[i];
        for (size_t k = p->wptr[i]; k < p->wptr[i + 1]; k++)
            f += h[k] * x[p->widx[k]];
        p->wf[i] = f;
    }
}

/* p->wg = H' a over the packed rows (a: nobs). */
void problem_packed_scatter(gmm_problem *p, const double *a)
{
    const double *h = p->wh;
    memset(p->wg, 0, p->n * sizeof *p->wg);
    if (p->wone) {
        for (size_t i = 0; i < p->nobs; i++)
            p->wg[p->widx[i]] += a[i] * h[i];
        return;
    }
    for (size_t i = 0; i < p->nobs; i++)
        for (size_t k = p->wptr[i]; k < p->wptr[i + 1]; k++)
            p->wg[p->widx[k]] += a[i] * h[k];
}

gmm_status gmm_problem_whiten_setup(gmm_problem *p, const double *theta)
{
    gmm_status st;
    if (!p || !theta)
        return gmm_error(GMM_EINVAL, "gmm_problem_whiten_setup: NULL argument");
    p->wready = 0;
    if (!p->wx && (st = whiten_alloc(p)))
        return st;
    if ((st = set_lik(p, theta)))
        return st;
    p->wlik = p->lik;
    if (p->ncoef)
        gmm_problem_offsets(p, theta, p->woff);
    gmm_problem_offset_constant(p, theta, &p->wb);
    if ((st = gmm_latent_theta_check(p->lat, theta)) ||
        (st = gmm_latent_obs_values(p->lat, theta, p->wcoef)))
        return st;
    for (size_t i = 0; i < p->nobs; i++) {
        size_t r = p->wrow[i];
        p->wo[i] = p->woff[r];
        memcpy(p->wh + p->wptr[i], p->wcoef + gmm_obsmap_row_lo(&p->map, r),
               (p->wptr[i + 1] - p->wptr[i]) * sizeof *p->wh);
    }
    /* the sparse path whitens by a sparse factor of the prior, never by
     * the band of the latent's bandwidth */
    if ((st = p->metric == GMM_METRIC_LAPLACE ? laplace_map_setup(p, theta)
              : p->sparse                     ? gmm_latent_whiten_setup_sparse(p->lat, theta)
                                              : gmm_latent_whiten_setup(p->lat, theta)))
        return st;
    p->wready = 1;
    return GMM_OK;
}

/* x = W v (prior metric) or x^ + L^-T v (Laplace metric) into p->wx. */
gmm_status problem_whiten(gmm_problem *p, const double *v, double *x)
{
    if (p->metric != GMM_METRIC_LAPLACE)
        return gmm_latent_whiten(p->lat, v, x);
    memcpy(x, v, p->n * sizeof *x);
    gmm_status st = gmm_factor_solve_lt(p->wL, x);
    for (size_t j = 0; j < p->n && st == GMM_OK; j++)
        x[j] += p->wxh[j];
    return st;
}

gmm_status gmm_problem_unwhiten(gmm_problem *p, const double *x, double *v)
{
    if (!p || !p->wready || !x || !v)
        return gmm_error(GMM_EINVAL, "gmm_problem_unwhiten: no whitening setup");
    if (p->metric != GMM_METRIC_LAPLACE)
        return gmm_latent_unwhiten(p->lat, x, v);
    for (size_t j = 0; j < p->n; j++)
        p->wqx[j] = x[j] - p->wxh[j];
    return gmm_factor_mul_lt(p->wL, p->wqx, v);
}

/* b + h_r' x at data row r, from the whitening setup's rows and p->wx. */
static double row_f(const gmm_problem *p, size_t r)
{
    size_t lo = gmm_obsmap_row_lo(&p->map, r), hi = gmm_obsmap_row_hi(&p->map, r);
    const double *x = p->wx + gmm_latent_obs_offset(p->lat)[r];
    double f = p->woff[r];
    for (size_t k = lo; k < hi; k++)
        f += p->wcoef[k] * x[gmm_obsmap_row_pos(&p->map, k, lo)];
    return f;
}

/* Under the Laplace map x = x^ + L^-T v with L L' = Q + H'WH (W = diag(w),
 * the weights the factorisation used), so L'x = c + v with c = L'x^, and
 *
 *   x'Qx = |c + v|^2 - sum_i w_i (h_i'x)^2,
 *   d/dv (x'Qx / 2) = L^-1 Q x = (c + v) - L^-1 H'W H x,
 *
 * which leaves the two triangular solves of the map and its transpose and
 * no product with Q.  The rows' h_i'x (without X beta) are formed on the
 * way to f.  Rounding: the sums err by at most about (n + 2) eps (|c + v|^2
 * + x'Wx) against n eps x'|Q||x| for x'Qx formed with Q x, so where the
 * data dominate (x'Wx >> x'Qx) the subtraction loses the digits of their
 * ratio -- an absolute error in lp still far below the energy errors NUTS
 * works with (a few tenths); and L L' = Q + H'WH holds to the Cholesky
 * factor's backward error, |E| <= gamma_{kl+2} |L| |L'|, so the density
 * sampled has Q + E for Q, x'Ex of the same order.  The value and the
 * gradient are those of one function of v, so the sampler's target is
 * consistent (tests/infer/test_whitened.c: against the dense definition). */
static double laplace_quad(gmm_problem *p, const double *v)
{
    const double *x = p->wx, *h = p->wh, *w = p->wwt;
    double xwx = 0.0, cv = 0.0;
    for (size_t i = 0; p->wone && i < p->nobs; i++)
        p->whx[i] = h[i] * x[p->widx[i]];
    for (size_t i = 0; !p->wone && i < p->nobs; i++) {
        double hx = 0.0;
        for (size_t k = p->wptr[i]; k < p->wptr[i + 1]; k++)
            hx += h[k] * x[p->widx[k]];
        p->whx[i] = hx;
    }
    for (size_t i = 0; i < p->nobs; i++) {
        double hx = p->whx[i];
        p->wf[i] = p->wo[i] + hx;
        xwx += w[i] * hx * hx;
    }
    for (size_t j = 0; j < p->n; j++) {
        double t = p->wc[j] + v[j];
        cv += t * t;
        p->wqx[j] = t; /* for the gradient */
    }
    return cv - xwx;
}

gmm_status gmm_problem_whitened_logp(gmm_problem *p, const double *v, double *lp, double *grad)
{
    gmm_status st;
    if (!p || !p->wready)
        return gmm_error(GMM_EINVAL, "gmm_problem_whitened_logp: no whitening setup");
    if ((st = problem_whiten(p, v, p->wx)))
        return st;
    int lap = p->metric == GMM_METRIC_LAPLACE;
    /* x'Qx: v'v under the prior's map; see laplace_quad under the Laplace
     * map, whose Jacobian |L|^-1 is constant at fixed theta */
    double xqx = 0.0;
    if (lap) {
        xqx = laplace_quad(p, v);
    } else {
        problem_packed_f(p);
        for (size_t j = 0; j < p->n; j++)
            xqx += v[j] * v[j];
    }
    double sum = problem_packed_lik(p, grad ? p->wd : NULL, NULL);
    double l = sum - 0.5 * xqx;
    if (!isfinite(l))
        return gmm_error(GMM_EDOM, "whitened log density not finite");
    *lp = l;
    if (!grad)
        return GMM_OK;
    if (lap) {
        /* L^-1 H'(g + W H x) - (c + v) */
        for (size_t i = 0; i < p->nobs; i++)
            p->wd[i] += p->wwt[i] * p->whx[i];
        problem_packed_scatter(p, p->wd);
        memcpy(grad, p->wg, p->n * sizeof *grad);
        if ((st = gmm_factor_solve_l(p->wL, grad)))
            return st;
        for (size_t j = 0; j < p->n; j++)
            grad[j] -= p->wqx[j];
        return GMM_OK;
    }
    problem_packed_scatter(p, p->wd);
    if ((st = gmm_latent_whiten_t(p->lat, p->wg, grad)))
        return st;
    for (size_t j = 0; j < p->n; j++)
        grad[j] -= v[j];
    return GMM_OK;
}

gmm_status gmm_problem_whitened_linpred(gmm_problem *p, const double *v, double *frows,
                                        double *xnodes)
{
    gmm_status st;
    if (!p || !p->wready)
        return gmm_error(GMM_EINVAL, "gmm_problem_whitened_linpred: no whitening setup");
    if ((st = problem_whiten(p, v, p->wx)))
        return st;
    for (size_t r = 0; frows && r < p->nrows; r++) {
        frows[r] = row_f(p, r);
    }
    if (xnodes) {
        if (gmm_latent_node_index(p->lat, 0) == GMM_NO_INDEX)
            return gmm_error(GMM_EINVAL, "a %s model has no nodes", gmm_latent_family(p->lat));
        if (!p->const_off)
            return gmm_error(GMM_EINVAL, "the model has covariates: its nodes have no linear "
                                         "predictor of their own");
        for (size_t v2 = 0; v2 < p->n; v2++)
            xnodes[v2] = p->wb + p->wx[gmm_latent_node_index(p->lat, v2)];
    }
    return GMM_OK;
}

gmm_status gmm_problem_whitened_start(gmm_problem *p, const double *theta, double *v)
{
    gmm_status st;
    if (!p || !p->wready || !theta || !v)
        return gmm_error(GMM_EINVAL, "gmm_problem_whitened_start: no whitening setup");
    if (p->metric == GMM_METRIC_LAPLACE) {
        memset(v, 0, p->n * sizeof *v); /* the mode */
        return GMM_OK;
    }
    /* from x = 0, not from whatever mode an earlier call left: the start
     * (and so a chain) must not depend on the object's history */
    p->cold = 1;
    if ((st = gmm_problem_posterior(p, theta, p->wg, NULL)))
        return st;
    return gmm_latent_unwhiten(p->lat, p->wg, v);
}

gmm_status gmm_problem_data_information(gmm_problem *p, const double *theta, double *lmax)
{
    gmm_status st;
    if (!p || !theta || !lmax)
        return gmm_error(GMM_EINVAL, "gmm_problem_data_information: NULL argument");
    if (gmm_latent_nconstr(p->lat))
        return gmm_error(GMM_EINVAL, "the latent has linear constraints, where the Laplace "
                                     "metric is not available");
    if (!gmm_latent_assembled(p->lat))
        return gmm_error(GMM_EINVAL, "the latent's precision exists only in the square-root "
                                     "form, where the Laplace metric is not available");
    gmm_metric keep = p->metric;
    p->metric = GMM_METRIC_PRIOR;
    double *u = gmm_malloc(p->n, sizeof *u), *z = gmm_malloc(p->n, sizeof *z);
    double *wr = gmm_calloc(p->nrows ? p->nrows : 1, sizeof *wr);
    if (!u || !z || !wr) {
        st = gmm_error(GMM_ENOMEM, "out of memory for %zu latents", p->n);
        goto done;
    }
    double f, out[4];
    if ((st = gmm_problem_whiten_setup(p, theta)) || (!p->lap && (st = problem_laplace_alloc(p))))
        goto done;
    p->cold = 1;
    if ((st = problem_laplace_forward(p, theta, &f)) ||
        (st = p->sparse ? gmm_laplace_posterior_sparse(p->lap, p->wx, NULL)
                        : gmm_laplace_posterior(p->lap, p->wx, NULL)))
        goto done;
    /* W at the mode, its negative entries (a non-log-concave likelihood's
     * outliers) as 0: they add no information */
    for (size_t r = 0; r < p->nrows; r++)
        if (!isnan(p->y[r])) {
            gmm_lik_eval_weighted(&p->wlik, p->y[r], p->e ? p->e[r] : 1.0,
                                  p->wt ? p->wt[r] : 1.0, NULL, row_f(p, r), out, NULL);
            wr[r] = fmax(-out[2], 0.0);
        }
    /* power iteration on M u = W' H' diag(w) H W u from a constant u: the
     * Rayleigh quotients rise to lambda_max; a few digits are plenty */
    const size_t *off = gmm_latent_obs_offset(p->lat);
    double lam = 0.0;
    for (size_t j = 0; j < p->n; j++)
        u[j] = 1.0 / sqrt((double)p->n);
    for (int it = 0; it < 200; it++) {
        if ((st = gmm_latent_whiten(p->lat, u, p->wx)))
            goto done;
        memset(p->wg, 0, p->n * sizeof *p->wg);
        for (size_t r = 0; r < p->nrows; r++) {
            if (wr[r] == 0.0)
                continue;
            size_t lo = gmm_obsmap_row_lo(&p->map, r), hi = gmm_obsmap_row_hi(&p->map, r);
            const double *h = p->wcoef, *x = p->wx + off[r];
            double fr = 0.0;
            for (size_t k = lo; k < hi; k++)
                fr += h[k] * x[gmm_obsmap_row_pos(&p->map, k, lo)];
            for (size_t k = lo; k < hi; k++)
                p->wg[off[r] + gmm_obsmap_row_pos(&p->map, k, lo)] += wr[r] * fr * h[k];
        }
        if ((st = gmm_latent_whiten_t(p->lat, p->wg, z)))
            goto done;
        double uz = 0.0, zz = 0.0;
        for (size_t j = 0; j < p->n; j++) {
            uz += u[j] * z[j];
            zz += z[j] * z[j];
        }
        double prev = lam;
        lam = uz;
        if (!(zz > 0.0))
            break;
        for (size_t j = 0; j < p->n; j++)
            u[j] = z[j] / sqrt(zz);
        if (it > 0 && fabs(lam - prev) <= 1e-3 * lam)
            break;
    }
    *lmax = lam;
done:
    p->metric = keep;
    p->wready = 0;
    gmm_free(u);
    gmm_free(z);
    gmm_free(wr);
    return st;
}

gmm_status gmm_problem_whitened_latent(gmm_problem *p, const double *v, double *x)
{
    if (!p || !p->wready || !v || !x)
        return gmm_error(GMM_EINVAL, "gmm_problem_whitened_latent: no whitening setup");
    return problem_whiten(p, v, x);
}
