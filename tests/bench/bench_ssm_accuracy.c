/* bench_ssm_accuracy.c -- where the state-space log-likelihood stops agreeing
 * with the dense GP, per kernel, as inputs get closer than the lengthscale;
 * the zero-process-noise regularisation against the undamped dense GP; and
 * the time of one loglik + gradient versus n.
 *
 * Table 1: n = 300 inputs on a regular grid dt = r * lengthscale; y drawn
 * from the dense GP (GSL Cholesky) at noise/variance 0.01, 0.1 and 1 and
 * three seeds; the WORST relative loglik error over those 9 data sets, per
 * r.  "limit" is the smallest r of the sweep whose worst error, and that of
 * every larger r, is <= 1e-6.
 * Table 2: the default damping of zero-noise kernels, n = 300, error against
 * the dense GP of the undamped kernel, per noise/variance.
 * Table 3: loglik + gradient time of the paper's CO2 model (matern32 +
 * quasiperiodic(harmonics=2), d = 6) on weekly inputs, n = 1e3 .. 1e5.
 *
 * BENCH_QUICK=1: one seed, fewer sizes; SKIP1=1 / SKIP3=1 skip tables 1 / 3.
 * FACTOR=chol|rows: force one factorisation in tables 1 and 2 (default: the
 * automatic choice -- the Cholesky above its limit, the square-root form below).
 * DAMP_REL=x: table 2 at that damp_rel instead of the default.
 * Output is plain text.
 */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmm/kernel.h"
#include "gmm/spec.h"
#include "gmm/ssm.h"

static uint64_t rng_s;
static double unif(void)
{
    uint64_t z = (rng_s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}
static double normal(void)
{
    double u = unif(), v = unif();
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static gmm_kernel *kernel_of(const char *text)
{
    gmm_spec_node *s = NULL;
    gmm_kernel *k = NULL;
    if (gmm_spec_parse(text, &s) || gmm_kernel_from_spec(s, &k)) {
        fprintf(stderr, "bench_ssm_accuracy: %s: %s\n", text, gmm_error_message());
        exit(1);
    }
    gmm_spec_free(s);
    return k;
}

/* Dense GP: draw y (when draw) and return the loglik of y. */
static double dense(const gmm_kernel *k, const double *th, double damp, const double *x, double *y,
                    size_t n, double noise, int draw)
{
    gsl_matrix *L = gsl_matrix_alloc(n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(L, i, j, gmm_kernel_cov(k, th, damp, x[i] - x[j]) + (i == j ? noise : 0));
    if (gsl_linalg_cholesky_decomp1(L)) {
        gsl_matrix_free(L);
        return NAN;
    }
    if (draw) {
        double *z = malloc(n * sizeof *z);
        for (size_t i = 0; i < n; i++)
            z[i] = normal();
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (size_t j = 0; j <= i; j++)
                s += gsl_matrix_get(L, i, j) * z[j];
            y[i] = s;
        }
        free(z);
    }
    double ld = 0.0, q = 0.0, *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        double t = y[i];
        for (size_t l = 0; l < i; l++)
            t -= gsl_matrix_get(L, i, l) * b[l];
        b[i] = t / gsl_matrix_get(L, i, i);
        q += b[i] * b[i];
        ld += 2.0 * log(gsl_matrix_get(L, i, i));
    }
    free(b);
    gsl_matrix_free(L);
    return -0.5 * q - 0.5 * ld - 0.5 * (double)n * log(2.0 * M_PI);
}

static double *theta_of(const gmm_kernel *k, double noise)
{
    size_t np = gmm_kernel_nparam(k);
    double *th = malloc((np + 1) * sizeof *th);
    memcpy(th, gmm_kernel_values_const(k), np * sizeof *th);
    th[np] = noise;
    return th;
}

/* Relative loglik error of the state-space model on data (x, y). */
static double ssm_err(const gmm_kernel *k, double *th, const double *x, const double *y,
                      size_t n, double ref, const gmm_ssm_params *par)
{
    gmm_ssm *m = NULL;
    double ll;
    if (gmm_ssm_alloc(k, x, y, n, par, &m))
        return INFINITY;
    gmm_status st = gmm_ssm_loglik(m, th, &ll, NULL);
    gmm_ssm_free(m);
    return st ? INFINITY : fabs(ll - ref) / fabs(ref);
}

static const struct {
    const char *spec;
    double ell; /* the lengthscale dt is measured in */
} sweep[] = {
    {"matern12(variance=1, lengthscale=1)", 1.0},
    {"matern32(variance=1, lengthscale=1)", 1.0},
    {"matern52(variance=1, lengthscale=1)", 1.0},
    {"quasiperiodic(variance=1, lengthscale=1, period=0.7, harmonics=2)", 1.0},
    {"matern32(variance=1, lengthscale=1) + quasiperiodic(variance=0.5, lengthscale=1, "
     "period=0.3, harmonics=2)",
     1.0},
    {"matern32(variance=1, lengthscale=1) * matern12(variance=1, lengthscale=1)", 1.0},
    {"matern52(variance=1, lengthscale=1) * matern32(variance=1, lengthscale=1)", 1.0},
    {"matern32(variance=1, lengthscale=1) * periodic(variance=1, lengthscale=1, period=0.5, "
     "harmonics=2)",
     1.0},
};

static const char *zero_noise[] = {
    "constant(variance=1)",
    "cosine(variance=1, period=1.7)",
    "periodic(variance=1, lengthscale=1, period=1.7, harmonics=3)",
    "matern32(variance=1, lengthscale=3) + periodic(variance=0.6, lengthscale=1.2, period=3.1, "
    "harmonics=3)",
    "cosine(variance=1, period=1.3) * periodic(variance=1, lengthscale=1, period=2.9, "
    "harmonics=2)",
    "constant(variance=1) * cosine(variance=1, period=2.9)",
};

int main(void)
{
    gsl_set_error_handler_off();
    int quick = getenv("BENCH_QUICK") && *getenv("BENCH_QUICK") && *getenv("BENCH_QUICK") != '0';
    size_t n = 300, nseed = quick ? 1 : 3;
    double noises[3] = {0.01, 0.1, 1.0};
    double rs[] = {1, 0.3, 0.1, 0.03, 0.02, 0.015, 0.01, 0.007, 0.005, 0.003, 0.002, 0.001,
                   3e-4, 1e-4, 3e-5, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10};
    size_t nr = sizeof rs / sizeof rs[0];
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    const char *fe = getenv("FACTOR");
    gmm_ssm_factor factor = !fe                   ? GMM_SSM_FACTOR_AUTO
                            : !strcmp(fe, "chol") ? GMM_SSM_FACTOR_CHOL
                            : !strcmp(fe, "rows") ? GMM_SSM_FACTOR_ROWS
                                                  : GMM_SSM_FACTOR_AUTO;
    par.check_spacing = 0;
    par.factor = factor;

    if (!getenv("SKIP1")) {
    printf("Table 1: worst relative loglik error vs the dense GP, n = %zu, regular dt = r * "
           "lengthscale\n%-8s", n, "r");
    for (size_t ir = 0; ir < nr; ir++)
        printf(" %8.3g", rs[ir]);
    printf("  limit(1e-6)\n");
    for (size_t ik = 0; ik < sizeof sweep / sizeof sweep[0]; ik++) {
        gmm_kernel *k = kernel_of(sweep[ik].spec);
        double limit = NAN;
        int ok = 1;
        printf("%-8.8s", sweep[ik].spec);
        for (size_t ir = 0; ir < nr; ir++) {
            double worst = 0.0;
            for (size_t is = 0; is < nseed; is++)
                for (size_t inz = 0; inz < 3; inz++) {
                    rng_s = 1000 * is + 17 * inz + ir;
                    double *th = theta_of(k, noises[inz]);
                    for (size_t i = 0; i < n; i++)
                        x[i] = 10.0 + (double)i * rs[ir] * sweep[ik].ell;
                    double ref = dense(k, th, 0.0, x, y, n, noises[inz], 1);
                    double e = ssm_err(k, th, x, y, n, ref, &par);
                    worst = fmax(worst, isnan(e) ? INFINITY : e);
                    free(th);
                }
            printf(" %8.1e", worst);
            ok = ok && worst <= 1e-6;
            if (ok)
                limit = rs[ir];
        }
        printf("  %g   %s\n", limit, sweep[ik].spec);
        gmm_kernel_free(k);
    }

    }
    printf("\nTable 2: default damping of zero-noise kernels, n = %zu, dt = 0.1: relative "
           "loglik error vs the UNDAMPED dense GP, worst over %zu seeds\n%-12s", n, nseed,
           "noise/var");
    for (size_t inz = 0; inz < 3; inz++)
        printf(" %9g", noises[inz]);
    printf("\n");
    gmm_ssm_params_init(&par);
    par.factor = factor;
    if (getenv("DAMP_REL"))
        par.damp_rel = atof(getenv("DAMP_REL"));
    for (size_t ik = 0; ik < sizeof zero_noise / sizeof zero_noise[0]; ik++) {
        gmm_kernel *k = kernel_of(zero_noise[ik]);
        printf("%-12.12s", zero_noise[ik]);
        for (size_t inz = 0; inz < 3; inz++) {
            double worst = 0.0;
            for (size_t is = 0; is < nseed; is++) {
                rng_s = 7000 + 100 * is + inz;
                double *th = theta_of(k, noises[inz]);
                for (size_t i = 0; i < n; i++)
                    x[i] = 10.0 + 0.1 * (double)i;
                double ref = dense(k, th, 0.0, x, y, n, noises[inz], 1);
                worst = fmax(worst, ssm_err(k, th, x, y, n, ref, &par));
                free(th);
            }
            printf(" %9.1e", worst);
        }
        printf("   %s\n", zero_noise[ik]);
        gmm_kernel_free(k);
    }

    if (getenv("SKIP3"))
        return 0;
    printf("\nTable 3: loglik + gradient time, matern32 + quasiperiodic(harmonics=2), weekly "
           "inputs (d = 6, bandwidth 11)\n");
    gmm_kernel *k = kernel_of("matern32(variance=100, lengthscale=20) + quasiperiodic("
                              "variance=5, lengthscale=50, period=1, harmonics=2)");
    size_t sizes[] = {1000, 3000, 10000, 100000};
    for (size_t is = 0; is < (quick ? 2 : 4); is++) {
        size_t nn = sizes[is];
        double *xx = malloc(nn * sizeof *xx), *yy = malloc(nn * sizeof *yy);
        for (size_t i = 0; i < nn; i++) {
            xx[i] = 1958.0 + (double)i * 7.0 / 365.25;
            yy[i] = (i % 40 == 3) ? NAN : sin(xx[i] * 6.283185307179586) + 0.01 * (double)i;
        }
        double *th = theta_of(k, 0.1), g[6], ll;
        gmm_ssm *m = NULL;
        if (gmm_ssm_alloc(k, xx, yy, nn, NULL, &m) || gmm_ssm_loglik(m, th, &ll, g)) {
            fprintf(stderr, "bench_ssm_accuracy: %s\n", gmm_error_message());
            return 1;
        }
        int reps = nn <= 3000 ? 200 : nn <= 10000 ? 40 : 5;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int r = 0; r < reps; r++)
            gmm_ssm_loglik(m, th, &ll, g);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("n = %6zu  loglik+gradient %8.3f ms  (%zu cached intervals)\n", nn,
               1e3 * sec / reps, gmm_ssm_nintervals(m));
        gmm_ssm_free(m);
        free(th);
        free(xx);
        free(yy);
    }
    gmm_kernel_free(k);
    free(x);
    free(y);
    return 0;
}
