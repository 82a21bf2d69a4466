/* bench_laplace_accuracy.c -- the Laplace log likelihood and its gradient
 * against a dense oracle as the spacing shrinks against the lengthscale.
 *
 *   n = 2000 unit-spaced inputs, matern32 and matern52 (variance 1,
 *   lengthscale 10, 100, 1000, 1e4: dt/l = 1e-1 .. 1e-4), counts or
 *   outcomes drawn once per likelihood from f = sin(2 pi x / 700): poisson,
 *   bernoulli, negbinomial(dispersion=3); no intercept.
 *
 * The oracle is Rasmussen & Williams' Algorithm 3.1 (mode by Newton on the
 * dense covariance K, B = I + W^1/2 K W^1/2, log q = -a'f/2 + sum log p -
 * sum log diag chol(B)) and Algorithm 5.1 for dlog q / d(variance,
 * lengthscale), the third-derivative term included (sign as below) -- it
 * never forms the precision, so it is as accurate at dt/l = 1e-4 as at
 * 1e-1 (B's condition number is at most 1 + n max W var).  O(n^3) per
 * case: a bench, not a test.
 * Printed: the relative error of log q, the largest relative error over
 * the two kernel gradients ("refused" when the library refuses the
 * lengthscale) and the factorisation the library's --factor rule took
 * (BENCH_FACTOR=cholesky or square-root forces one).  BENCH_LS=l1,l2,...
 * replaces the four lengthscales.  Time: a few minutes per lengthscale.
 *
 * BENCH_ORACLE_CHECK=1: instead, the oracle's gradient against central
 * differences of its own log q (and the library's) at one case: the book's
 * Algorithm 5.1 prints the third-derivative term with the wrong sign
 * (GPML's infLaplace has it right), which this check catches.
 */
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_sf_gamma.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/rng.h"
#include "gmm/spec.h"
#include "gmm/ssm.h"

#define N 2000
enum { POIS, BERN, NEGB };
static const double DISP = 3.0;
static double VAR = 1.0; /* the oracle's variance (moved only by its self-check) */

static void die(const char *what)
{
    fprintf(stderr, "bench_laplace_accuracy: %s: %s\n", what, gmm_error_message());
    exit(1);
}

/* log p(y | f) and its first three derivatives in f. */
static double lik(int kind, double y, double f, double *d1, double *d2, double *d3)
{
    double mu = exp(f);
    switch (kind) {
    case POIS:
        *d1 = y - mu;
        *d2 = -mu;
        *d3 = -mu;
        return y * f - mu - lgamma(y + 1.0);
    case BERN: {
        double p = 1.0 / (1.0 + exp(-f));
        *d1 = y - p;
        *d2 = -p * (1.0 - p);
        *d3 = -p * (1.0 - p) * (1.0 - 2.0 * p);
        return y * f - (f > 0 ? f + log1p(exp(-f)) : log1p(exp(f)));
    }
    default: {
        double r = DISP, s = r + mu;
        *d1 = y - (y + r) * mu / s;
        *d2 = -(y + r) * r * mu / (s * s);
        *d3 = -(y + r) * r * mu * (r - mu) / (s * s * s);
        return lgamma(y + r) - lgamma(r) - lgamma(y + 1.0) + r * log(r / s) + y * (f - log(s));
    }
    }
}

/* k(r) and dk/dl for variance 1. */
static double matern(int nu5, double r, double l, double *dl)
{
    double a = (nu5 ? sqrt(5.0) : sqrt(3.0)) * r / l, e = exp(-a);
    if (nu5) {
        *dl = a * a / 3.0 * (1.0 + a) * e / l;
        return (1.0 + a + a * a / 3.0) * e;
    }
    *dl = a * a * e / l;
    return (1.0 + a) * e;
}

static double fmax_abs(const double *v)
{
    double m = 0.0;
    for (size_t i = 0; i < N; i++)
        m = fmax(m, fabs(v[i]));
    return m;
}

/* Algorithm 3.1 and 5.1: log q into *lq, d/d(variance, lengthscale) into g. */
static void oracle(int nu5, double l, int kind, const double *y, double *lq, double g[2])
{
    gsl_matrix *K = gsl_matrix_alloc(N, N), *Kl = gsl_matrix_alloc(N, N);
    gsl_matrix *B = gsl_matrix_alloc(N, N), *M = gsl_matrix_alloc(N, N);
    double *f = calloc(N, sizeof *f), *a = calloc(N, sizeof *a), *sw = malloc(N * sizeof *sw);
    double *d1 = malloc(N * sizeof *d1), *d2 = malloc(N * sizeof *d2),
           *d3 = malloc(N * sizeof *d3), *t = malloc(N * sizeof *t), *u = malloc(N * sizeof *u);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double dl, k = matern(nu5, fabs((double)i - (double)j), l, &dl);
            gsl_matrix_set(K, i, j, VAR * k);
            gsl_matrix_set(Kl, i, j, VAR * dl);
        }
    gsl_vector_view tv = gsl_vector_view_array(t, N), uv = gsl_vector_view_array(u, N);
    double psi_old = -INFINITY, lp = 0.0, logdet = 0.0, df = INFINITY;
    for (int it = 0; it < 200; it++) {
        /* B = I + sW K sW, L = chol(B) */
        lp = 0.0;
        for (size_t i = 0; i < N; i++) {
            lp += lik(kind, y[i], f[i], &d1[i], &d2[i], &d3[i]);
            sw[i] = sqrt(-d2[i]);
        }
        double af = 0.0;
        for (size_t i = 0; i < N; i++)
            af += a[i] * f[i];
        double psi = -0.5 * af + lp;
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < N; j++)
                gsl_matrix_set(B, i, j,
                               (i == j) + sw[i] * gsl_matrix_get(K, i, j) * sw[j]);
        if (gsl_linalg_cholesky_decomp1(B))
            die("oracle: B not positive definite");
        logdet = 0.0;
        for (size_t i = 0; i < N; i++)
            logdet += log(gsl_matrix_get(B, i, i));
        /* Newton converges quadratically: stop once f no longer moves */
        if (it > 0 && df <= 1e-14 * (1.0 + fmax_abs(f)) && psi >= psi_old - 1e-12 * fabs(psi))
            break;
        psi_old = psi;
        /* b = W f + d1; a = b - sW L'\(L\(sW K b)); f = K a */
        double *b = u;
        for (size_t i = 0; i < N; i++)
            b[i] = -d2[i] * f[i] + d1[i];
        gsl_blas_dsymv(CblasLower, 1.0, K, &uv.vector, 0.0, &tv.vector);
        for (size_t i = 0; i < N; i++)
            t[i] *= sw[i];
        gsl_linalg_cholesky_svx(B, &tv.vector); /* B^{-1} (sW K b) */
        for (size_t i = 0; i < N; i++)
            a[i] = b[i] - sw[i] * t[i];
        gsl_vector_view av = gsl_vector_view_array(a, N), fv = gsl_vector_view_array(u, N);
        gsl_blas_dsymv(CblasLower, 1.0, K, &av.vector, 0.0, &fv.vector);
        df = 0.0;
        for (size_t i = 0; i < N; i++) {
            df = fmax(df, fabs(u[i] - f[i]));
            f[i] = u[i];
        }
    }
    double af = 0.0;
    for (size_t i = 0; i < N; i++)
        af += a[i] * f[i];
    *lq = -0.5 * af + lp - logdet;

    /* Algorithm 5.1 at the mode (B holds chol(B) at it, d1 = a there). */
    /* M = L \ (sW K): C of R&W */
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            gsl_matrix_set(M, i, j, sw[i] * gsl_matrix_get(K, i, j));
    gsl_blas_dtrsm(CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, 1.0, B, M);
    double *s2 = malloc(N * sizeof *s2);
    for (size_t j = 0; j < N; j++) {
        gsl_vector_view c = gsl_matrix_column(M, j);
        double cc = gsl_blas_dnrm2(&c.vector);
        /* +1/2, as GPML's infLaplace (dfhat): d log q / d f_i =
         * -1/2 d log|B| / d f_i = +1/2 Sigma_ii d3_i, W being -d2; the
         * book's Algorithm 5.1 prints -1/2 */
        s2[j] = 0.5 * (gsl_matrix_get(K, j, j) - cc * cc) * d3[j];
    }
    /* R = sW L'\(L\ diag(sW)), into M */
    gsl_matrix_set_zero(M);
    for (size_t i = 0; i < N; i++)
        gsl_matrix_set(M, i, i, sw[i]);
    gsl_blas_dtrsm(CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, 1.0, B, M);
    gsl_blas_dtrsm(CblasLeft, CblasLower, CblasTrans, CblasNonUnit, 1.0, B, M);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            gsl_matrix_set(M, i, j, sw[i] * gsl_matrix_get(M, i, j));
    for (int p = 0; p < 2; p++) {
        const gsl_matrix *C = p == 0 ? K : Kl; /* dK/dvariance = K / VAR */
        double aca = 0.0, trRC = 0.0;
        gsl_vector_view av = gsl_vector_view_array(a, N);
        gsl_blas_dsymv(CblasLower, 1.0, C, &av.vector, 0.0, &tv.vector); /* b = C d1 */
        for (size_t i = 0; i < N; i++) {
            aca += a[i] * t[i];
            for (size_t j = 0; j < N; j++)
                trRC += gsl_matrix_get(M, i, j) * gsl_matrix_get(C, j, i);
        }
        double s1 = 0.5 * aca - 0.5 * trRC;
        /* s3 = b - K R b */
        gsl_blas_dgemv(CblasNoTrans, 1.0, M, &tv.vector, 0.0, &uv.vector);
        double *krb = malloc(N * sizeof *krb);
        gsl_vector_view kv = gsl_vector_view_array(krb, N);
        gsl_blas_dsymv(CblasLower, 1.0, K, &uv.vector, 0.0, &kv.vector);
        double s23 = 0.0;
        for (size_t i = 0; i < N; i++)
            s23 += s2[i] * (t[i] - krb[i]);
        free(krb);
        g[p] = (s1 + s23) / (p == 0 ? VAR : 1.0);
    }
    free(s2);
    gsl_matrix_free(K);
    gsl_matrix_free(Kl);
    gsl_matrix_free(B);
    gsl_matrix_free(M);
    free(f);
    free(a);
    free(sw);
    free(d1);
    free(d2);
    free(d3);
    free(t);
    free(u);
}

/* The library's log q and gradient in (variance, lengthscale); 0 when it
 * refuses. */
static int library(int nu5, double l, const char *likname, const double *y, double *lq,
                   double g[2], const char **form)
{
    char spec[128];
    snprintf(spec, sizeof spec, "%s(variance=1, lengthscale=%g)", nu5 ? "matern52" : "matern32",
             l);
    gmm_spec_node *s = NULL;
    gmm_kernel *k = NULL;
    gmm_latent *lat = NULL;
    gmm_problem *p = NULL;
    gmm_lik lk;
    double x[N];
    for (size_t i = 0; i < N; i++)
        x[i] = (double)i;
    if (gmm_spec_parse(spec, &s) || gmm_kernel_from_spec(s, &k))
        die("kernel");
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    const char *fe = getenv("BENCH_FACTOR");
    if (fe && !strcmp(fe, "cholesky"))
        par.factor = GMM_SSM_FACTOR_CHOL;
    else if (fe && !strcmp(fe, "square-root"))
        par.factor = GMM_SSM_FACTOR_ROWS;
    if (gmm_latent_ssm_alloc(k, x, N, &par, &lat))
        die("latent");
    if (gmm_lik_parse(likname, &lk))
        die("likelihood");
    if (gmm_problem_alloc(lat, &lk, y, NULL, 0, 0.0, &p))
        die("problem");
    gmm_objective *o = gmm_problem_objective(p);
    double *gr = malloc(o->nparam * sizeof *gr);
    int ok = o->eval(o->ctx, o->value, lq, gr) == GMM_OK;
    for (size_t i = 0; ok && i < o->nparam; i++) {
        if (strstr(o->name[i], ".variance"))
            g[0] = gr[i];
        else if (strstr(o->name[i], ".lengthscale"))
            g[1] = gr[i];
    }
    if (!ok)
        fprintf(stderr, "  (%s, l %g, %s: %s)\n", spec, l, likname, gmm_error_message());
    *form = gmm_problem_factorisation(p, NULL);
    free(gr);
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_kernel_free(k);
    gmm_spec_free(s);
    return ok;
}

int main(void)
{
    static const char *liks[3] = {"poisson", "bernoulli", "negbinomial(dispersion=3)"};
    double ls[16] = {10.0, 100.0, 1000.0, 1e4};
    int nls = 4;
    const char *lse = getenv("BENCH_LS");
    if (lse) {
        nls = 0;
        for (const char *e = lse; *e && nls < 16;) {
            char *end;
            ls[nls++] = strtod(e, &end);
            if (end == e || (*end && *end != ','))
                die("BENCH_LS: not a list of numbers");
            e = *end ? end + 1 : end;
        }
    }
    double y[3][N];
    gmm_rng r;
    gmm_rng_seed(&r, 2020, 0);
    for (size_t i = 0; i < N; i++) {
        double f = sin(6.283185307179586 * (double)i / 700.0), mu = exp(f);
        /* Poisson by inversion; negative binomial as a gamma-Poisson mixture
         * drawn by inversion of its pmf; Bernoulli of the logistic */
        double u = gmm_rng_uniform(&r), pk = exp(-mu), c = pk;
        int k = 0;
        while (u > c && k < 1000) {
            k++;
            pk *= mu / k;
            c += pk;
        }
        y[POIS][i] = k;
        y[BERN][i] = gmm_rng_uniform(&r) < 1.0 / (1.0 + exp(-f));
        u = gmm_rng_uniform(&r);
        double rr = DISP, q = rr / (rr + mu);
        pk = pow(q, rr);
        c = pk;
        k = 0;
        while (u > c && k < 1000) {
            pk *= (k + rr) / (k + 1.0) * (1.0 - q);
            k++;
            c += pk;
        }
        y[NEGB][i] = k;
    }
    if (getenv("BENCH_ORACLE_CHECK")) {
        double lq, g[2], lp, lm, gg[2], h = 1e-5;
        oracle(0, 10.0, POIS, y[POIS], &lq, g);
        VAR = 1.0 + h;
        oracle(0, 10.0, POIS, y[POIS], &lp, gg);
        VAR = 1.0 - h;
        oracle(0, 10.0, POIS, y[POIS], &lm, gg);
        VAR = 1.0;
        printf("variance: 5.1 %.10g fd %.10g\n", g[0], (lp - lm) / (2 * h));
        oracle(0, 10.0 * (1 + h), POIS, y[POIS], &lp, gg);
        oracle(0, 10.0 * (1 - h), POIS, y[POIS], &lm, gg);
        printf("lengthscale: 5.1 %.10g fd %.10g\n", g[1], (lp - lm) / (2 * h * 10.0));
        double lq2, g2[2];
        const char *form;
        library(0, 10.0, liks[POIS], y[POIS], &lq2, g2, &form);
        printf("library: %.10g %.10g\n", g2[0], g2[1]);
        return 0;
    }
    printf("%-9s %-26s %8s %8s %22s %12s %12s %s\n", "kernel", "likelihood", "l", "dt/l",
           "log q (dense)", "rel err", "grad rel err", "factorisation");
    for (int nu5 = 0; nu5 < 2; nu5++)
        for (int kd = 0; kd < 3; kd++)
            for (int li = 0; li < nls; li++) {
                double l = ls[li], lq0, g0[2], lq, g[2] = {0.0, 0.0};
                const char *kn = nu5 ? "matern52" : "matern32", *form = "";
                if (!library(nu5, l, liks[kd], y[kd], &lq, g, &form)) {
                    printf("%-9s %-26s %8g %8g %22s %12s %12s\n", kn, liks[kd], l, 1.0 / l, "",
                           "refused", "refused");
                    continue;
                }
                oracle(nu5, l, kd, y[kd], &lq0, g0);
                double ge = 0.0;
                for (int p = 0; p < 2; p++)
                    ge = fmax(ge, fabs(g[p] - g0[p]) / fabs(g0[p]));
                printf("%-9s %-26s %8g %8g %22.15g %12.2e %12.2e %s\n", kn, liks[kd], l,
                       1.0 / l, lq0, fabs(lq - lq0) / fabs(lq0), ge, form);
                fflush(stdout);
            }
    return 0;
}
