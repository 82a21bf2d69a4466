/* bench_ssm.c -- the state-space marginal likelihood and its gradient as n
 * grows: the CO2 model of the paper (matern32 + quasiperiodic(harmonics=2),
 * state dimension 6, bandwidth 7) on synthetic weekly data with 3% of the
 * weeks missing.  A linear method shows a constant time per input.
 *
 *   n in {1e3, 3e3, 1e4, 1e5, 1e6}    (BENCH_QUICK=1: up to 1e5)
 *   BENCH_CSV=FILE  append rows op,n,l,impl,ms (op ssm_loglik, ssm_loglik_grad;
 *                   impl gmm_cholesky, gmm_square_root, and gmm_default: the
 *                   model as `gmm-infer` builds it, automatic choice included)
 *
 * Times are wall-clock medians over repeats (one thread: the code is serial),
 * for both factorisations of the posterior precision (the Cholesky of the
 * assembled band, the paper's algorithm; the square-root form), and for the
 * default (the automatic choice, ssm.h, FACTORISATION), timed as such.
 * scripts/bench_ssm_baselines.py rebuilds this data and these parameters bit
 * for bit (the same splitmix64 stream) and writes statsmodels' rows beside
 * these (impl statsmodels): keep the two in step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmm/kernel.h"
#include "gmm/spec.h"
#include "gmm/ssm.h"
#include "support/tu_ssm.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static unsigned long long rng = 12345;
static double uniform(void)
{
    unsigned long long z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Median milliseconds of `reps` calls. */
static double time_eval(gmm_ssm *m, const double *theta, double *grad, size_t reps)
{
    double t[64], ll;
    if (reps > 64)
        reps = 64;
    for (size_t r = 0; r < reps; r++) {
        double t0 = now();
        if (tu_ssm_loglik(m, theta, &ll, grad) != GMM_OK) {
            fprintf(stderr, "bench_ssm: evaluation failed: %s\n", gmm_error_message());
            exit(1);
        }
        t[r] = 1e3 * (now() - t0);
    }
    qsort(t, reps, sizeof *t, cmp_double);
    return t[reps / 2];
}

int main(void)
{
    const char *spec_text = "matern32(variance=100, lengthscale=20) + "
                            "quasiperiodic(variance=2, lengthscale=50, period=1, harmonics=2)";
    const char *csv = getenv("BENCH_CSV");
    int quick = getenv("BENCH_QUICK") && *getenv("BENCH_QUICK");
    size_t sizes[] = {1000, 3000, 10000, 100000, 1000000};
    size_t nsizes = quick ? 4 : 5;
    FILE *out = NULL;
    if (csv && *csv) {
        out = fopen(csv, "a");
        if (!out) {
            perror(csv);
            return 1;
        }
        if (fseek(out, 0, SEEK_END) == 0 && ftell(out) == 0)
            fprintf(out, "op,n,l,impl,ms\n");
    }
    gmm_spec_node *spec;
    gmm_kernel *k;
    if (gmm_spec_parse(spec_text, &spec) != GMM_OK || gmm_kernel_from_spec(spec, &k) != GMM_OK) {
        fprintf(stderr, "bench_ssm: %s\n", gmm_error_message());
        return 1;
    }
    size_t np = gmm_kernel_nparam(k);
    double *theta = malloc((np + 1) * sizeof *theta), *grad = malloc((np + 1) * sizeof *grad);
    memcpy(theta, gmm_kernel_values(k), np * sizeof *theta);
    theta[np] = 0.1;

    printf("CO2 state-space model (state dim %zu): loglik and loglik + gradient, wall ms,\n"
           "by factorisation (ssm.h, FACTORISATION; auto: the one chosen here)\n",
           gmm_kernel_dim(k));
    printf("%10s %4s %10s %10s %10s %10s %9s %12s %10s\n", "n", "bw", "chol", "chol+grad", "sqrt",
           "sqrt+grad", "sqrt/chol", "auto", "auto+grad");
    static const char *impl[3] = {"gmm_cholesky", "gmm_square_root", "gmm_default"};
    for (size_t s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        for (size_t i = 0; i < n; i++) {
            x[i] = 1958.0 + (double)i * 7.0 / 365.25;
            y[i] = uniform() < 0.03 ? NAN : 10 * sin(x[i] / 7) + 3 * sin(6.283185 * x[i]) +
                                               0.3 * (uniform() - 0.5);
        }
        size_t reps = n <= 10000 ? 31 : n <= 100000 ? 7 : 3;
        double tv[3], tg[3];
        size_t bw = 0;
        int autorows = 0;
        for (int f = 0; f < 3; f++) {
            gmm_ssm_params par;
            gmm_ssm_params_init(&par);
            par.factor = f == 0 ? GMM_SSM_FACTOR_CHOL
                         : f == 1 ? GMM_SSM_FACTOR_ROWS
                                  : GMM_SSM_FACTOR_AUTO;
            gmm_ssm *m;
            if (tu_ssm_alloc(k, x, y, n, &par, &m) != GMM_OK) {
                fprintf(stderr, "bench_ssm: %s\n", gmm_error_message());
                return 1;
            }
            tv[f] = time_eval(m, theta, NULL, reps);
            tg[f] = time_eval(m, theta, grad, reps);
            if (f == 2)
                autorows = gmm_ssm_used_rows(m);
            bw = gmm_ssm_bandwidth(m);
            gmm_ssm_free(m);
        }
        printf("%10zu %4zu %10.3f %10.3f %10.3f %10.3f %9.2f %12s %10.3f\n", n, bw, tv[0], tg[0],
               tv[1], tg[1], tg[1] / tg[0], autorows ? "square-root" : "cholesky", tg[2]);
        for (int f = 0; out && f < 3; f++) {
            fprintf(out, "ssm_loglik,%zu,%zu,%s,%.6g\n", n, bw, impl[f], tv[f]);
            fprintf(out, "ssm_loglik_grad,%zu,%zu,%s,%.6g\n", n, bw, impl[f], tg[f]);
        }
        free(x);
        free(y);
    }
    if (out)
        fclose(out);
    free(theta);
    free(grad);
    gmm_kernel_free(k);
    gmm_spec_free(spec);
    return 0;
}
