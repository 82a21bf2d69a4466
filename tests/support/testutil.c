/* testutil.c -- see testutil.h. */
#include "testutil.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void tu_rng_seed(tu_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ULL + 1; }

static uint64_t next_u64(tu_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double tu_uniform(tu_rng *r) { return (double)(next_u64(r) >> 11) * 0x1.0p-53; }

double tu_normal(tu_rng *r)
{
    double u1 = tu_uniform(r), u2 = tu_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void tu_band_fill_random(gmm_band *b, tu_rng *r)
{
    for (size_t j = 0; j < b->n; j++)
        for (size_t i = (j >= b->ku ? j - b->ku : 0); i <= j + b->kl && i < b->n; i++)
            *gmm_band_ptr(b, i, j) = tu_normal(r);
}

void tu_band_fill_spd(gmm_band *b, tu_rng *r)
{
    size_t n = b->n;
    tu_band_fill_random(b, r);
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t j = 0; j < n; j++)
            if (j != i)
                s += fabs(gmm_band_get(b, i, j));
        *gmm_band_ptr(b, i, i) = s + 1.0 + tu_uniform(r);
    }
}

void tu_band_fill_lower(gmm_band *b, tu_rng *r)
{
    for (size_t j = 0; j < b->n; j++)
        for (size_t i = j; i <= j + b->kl && i < b->n; i++)
            *gmm_band_ptr(b, i, j) = i == j ? 1.0 + tu_uniform(r) : 0.3 * tu_normal(r);
}

double *tu_band_to_dense(const gmm_band *b)
{
    size_t n = b->n;
    double *D = calloc(n ? n * n : 1, sizeof *D);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            D[j * n + i] = gmm_band_get(b, i, j);
    return D;
}

double tu_max_rel_diff(const double *a, const double *b, size_t m)
{
    double scale = 1.0, d = 0.0;
    for (size_t i = 0; i < m; i++)
        if (fabs(b[i]) > scale)
            scale = fabs(b[i]);
    for (size_t i = 0; i < m; i++) {
        double e = fabs(a[i] - b[i]);
        if (!(e <= d))
            d = e; /* NaN propagates */
    }
    return d / scale;
}

double tu_band_vs_dense(const gmm_band *b, const double *D)
{
    size_t n = b->n;
    double scale = 1.0, d = 0.0;
    for (size_t k = 0; k < n * n; k++)
        if (fabs(D[k]) > scale)
            scale = fabs(D[k]);
    for (size_t j = 0; j < n; j++)
        for (size_t i = (j >= b->ku ? j - b->ku : 0); i <= j + b->kl && i < n; i++) {
            double e = fabs(*gmm_band_ptr(b, i, j) - D[j * n + i]);
            if (!(e <= d))
                d = e;
        }
    return d / scale;
}

double tu_fd_check(double *p, size_t m, const double *analytic, tu_scalar_fn f, void *ctx,
                   double step, double abs_floor, size_t *worst)
{
    double maxerr = 0.0;
    for (size_t i = 0; i < m; i++) {
        double save = p[i], h = step * (fabs(save) > 1.0 ? fabs(save) : 1.0);
        p[i] = save + h;
        double fp = f(ctx);
        p[i] = save - h;
        double fm = f(ctx);
        p[i] = save;
        double fd = (fp - fm) / (2.0 * h);
        double scale = abs_floor;
        if (fabs(analytic[i]) > scale)
            scale = fabs(analytic[i]);
        if (fabs(fd) > scale)
            scale = fabs(fd);
        double err = fabs(analytic[i] - fd) / scale;
        if (!(err <= maxerr)) {
            maxerr = err;
            if (worst)
                *worst = i;
        }
    }
    return maxerr;
}

double tu_fd_check_sample(double *p, size_t m, const double *analytic, tu_scalar_fn f,
                          void *ctx, double step, double abs_floor, size_t nsample, tu_rng *r,
                          size_t *worst)
{
    if (m <= nsample)
        return tu_fd_check(p, m, analytic, f, ctx, step, abs_floor, worst);
    double maxerr = 0.0;
    for (size_t s = 0; s < nsample; s++) {
        size_t i = (size_t)(tu_uniform(r) * (double)m);
        double err = tu_fd_check(p + i, 1, analytic + i, f, ctx, step, abs_floor, NULL);
        if (!(err <= maxerr)) {
            maxerr = err;
            if (worst)
                *worst = i;
        }
    }
    return maxerr;
}

double tu_fd_check_band(gmm_band *P, const gmm_band *Pbar, tu_scalar_fn f, void *ctx,
                        double step, double abs_floor, size_t nsample, tu_rng *r, size_t *wi,
                        size_t *wj)
{
    size_t n = P->n, count = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = (j >= P->ku ? j - P->ku : 0); i <= j + P->kl && i < n; i++)
            count++;
    double maxerr = 0.0;
    size_t draws = count <= nsample ? count : nsample;
    for (size_t s = 0; s < draws; s++) {
        /* The s-th slot in column order, or a random one. */
        size_t want = count <= nsample ? s : (size_t)(tu_uniform(r) * (double)count), k = 0;
        for (size_t j = 0; j < n; j++) {
            size_t i0 = j >= P->ku ? j - P->ku : 0, i1 = j + P->kl < n ? j + P->kl : n - 1;
            if (want >= k + (i1 - i0 + 1)) {
                k += i1 - i0 + 1;
                continue;
            }
            size_t i = i0 + (want - k);
            double err = tu_fd_check(gmm_band_ptr(P, i, j), 1, gmm_band_ptr(Pbar, i, j), f, ctx,
                                     step, abs_floor, NULL);
            if (!(err <= maxerr)) {
                maxerr = err;
                if (wi)
                    *wi = i;
                if (wj)
                    *wj = j;
            }
            break;
        }
    }
    return maxerr;
}

double tu_fd_check4(double *p, size_t m, const double *analytic, tu_scalar_fn f, void *ctx,
                    double step, double abs_floor, size_t *worst)
{
    double maxerr = 0.0;
    for (size_t i = 0; i < m; i++) {
        double save = p[i], h = step * (fabs(save) > 1.0 ? fabs(save) : 1.0);
        p[i] = save + h;
        double f1 = f(ctx);
        p[i] = save - h;
        double fm1 = f(ctx);
        p[i] = save + 2.0 * h;
        double f2 = f(ctx);
        p[i] = save - 2.0 * h;
        double fm2 = f(ctx);
        p[i] = save;
        double fd = (8.0 * (f1 - fm1) - (f2 - fm2)) / (12.0 * h);
        double scale = abs_floor;
        if (fabs(analytic[i]) > scale)
            scale = fabs(analytic[i]);
        if (fabs(fd) > scale)
            scale = fabs(fd);
        double err = fabs(analytic[i] - fd) / scale;
        if (!(err <= maxerr)) {
            maxerr = err;
            if (worst)
                *worst = i;
        }
    }
    return maxerr;
}

int tu_objective_log_se(const gmm_objective *o, const double *theta, double h, double *se,
                        double *decrement, const double *truth, double *wald)
{
    size_t np = o->nparam, nf = 0;
    size_t *fi = malloc(np * sizeof *fi);
    double *th = malloc(np * sizeof *th), *gp = malloc(np * sizeof *gp),
           *gm = malloc(np * sizeof *gm), *H = malloc(np * np * sizeof *H);
    int rc = -1;
    for (size_t i = 0; i < np; i++) {
        se[i] = 0.0;
        if (!o->fixed[i])
            fi[nf++] = i;
    }
    memcpy(th, theta, np * sizeof *th);
    for (size_t a = 0; a < nf; a++) {
        size_t i = fi[a];
        double f;
        /* d/du_j of L at u_i +- h, where dL/du_j = p_j dL/dp_j */
        th[i] = theta[i] * exp(h);
        if (o->eval(o->ctx, th, &f, gp) != GMM_OK)
            goto done;
        for (size_t b = 0; b < nf; b++)
            gp[fi[b]] *= th[fi[b]];
        th[i] = theta[i] * exp(-h);
        if (o->eval(o->ctx, th, &f, gm) != GMM_OK)
            goto done;
        for (size_t b = 0; b < nf; b++)
            gm[fi[b]] *= th[fi[b]];
        th[i] = theta[i];
        for (size_t b = 0; b < nf; b++)
            H[a * nf + b] = -(gp[fi[b]] - gm[fi[b]]) / (2.0 * h); /* information */
    }
    for (size_t a = 0; a < nf; a++)
        for (size_t b = 0; b < a; b++)
            H[a * nf + b] = H[b * nf + a] = 0.5 * (H[a * nf + b] + H[b * nf + a]);
    if (truth) {
        double w = 0.0;
        for (size_t a = 0; a < nf; a++)
            for (size_t b = 0; b < nf; b++)
                w += log(theta[fi[a]] / truth[fi[a]]) * H[a * nf + b] *
                     log(theta[fi[b]] / truth[fi[b]]);
        *wald = w;
    }
    gsl_matrix_view Hv = gsl_matrix_view_array(H, nf, nf);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int bad = gsl_linalg_cholesky_decomp1(&Hv.matrix) || gsl_linalg_cholesky_invert(&Hv.matrix);
    gsl_set_error_handler(old);
    if (bad)
        goto done;
    for (size_t a = 0; a < nf; a++)
        se[fi[a]] = sqrt(gsl_matrix_get(&Hv.matrix, a, a));
    if (decrement) {
        double f, q = 0.0;
        if (o->eval(o->ctx, theta, &f, gp) != GMM_OK)
            goto done;
        for (size_t a = 0; a < nf; a++)
            for (size_t b = 0; b < nf; b++)
                q += gp[fi[a]] * theta[fi[a]] * gsl_matrix_get(&Hv.matrix, a, b) * gp[fi[b]] *
                     theta[fi[b]];
        *decrement = 0.5 * q;
    }
    rc = 0;
done:
    free(fi);
    free(th);
    free(gp);
    free(gm);
    free(H);
    return rc;
}

double tu_t_bound(double p, size_t m, double nu)
{
    double q = p / (2.0 * (double)m);
    return nu > 0.0 ? gsl_cdf_tdist_Qinv(q, nu) : gsl_cdf_ugaussian_Qinv(q);
}

void tu_chisq_bounds(double p, size_t m, double nu, double *lo, double *hi)
{
    double q = p / (2.0 * (double)m);
    *lo = gsl_cdf_chisq_Pinv(q, nu) / nu;
    *hi = gsl_cdf_chisq_Qinv(q, nu) / nu;
}

uint64_t tu_seed(uint64_t s)
{
    const char *e = getenv("GMM_TEST_SEED");
    return s + 1000003u * (e ? strtoull(e, NULL, 10) : 0);
}

double tu_fit_z_bound(size_t nfree) { return 1.25 * tu_t_bound(4e-7, nfree, 0.0); }

double tu_fit_wald_bound(size_t nfree)
{
    return 1.25 * 1.25 * gsl_cdf_chisq_Qinv(1e-7, (double)nfree);
}
