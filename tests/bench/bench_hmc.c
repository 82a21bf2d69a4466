/* bench_hmc.c -- the sampler's own cost per leapfrog step, beside the
 * gradient's: NUTS (default settings, 200 warm-up iterations and 200 draws)
 * on a standard normal of dimension 1e2 .. 1e5, whose gradient is as cheap
 * as a gradient can be, so the time left over is the sampler's (leapfrog
 * updates, momentum draws, no-U-turn checks, copies).  The gradient alone is
 * timed by calling the same callback as often, through a volatile pointer.
 *
 *   BENCH_QUICK=1   dimensions up to 1e4 only
 *   BENCH_CSV=FILE  also append rows op,n,l,impl,ms: op hmc_overhead, n the
 *                   dimension, l the mean leapfrog steps per transition, impl
 *                   nuts, ms the sampler's CPU time per 1000 leapfrog steps
 *                   (gradient excluded) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gmm/hmc.h"

static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static gmm_status std_normal(void *ctx, const double *q, double *lp, double *grad)
{
    size_t n = *(const size_t *)ctx;
    double f = 0.0;
    for (size_t i = 0; i < n; i++) {
        f -= 0.5 * q[i] * q[i];
        grad[i] = -q[i];
    }
    *lp = f;
    return GMM_OK;
}

int main(void)
{
    const char *quick = getenv("BENCH_QUICK"), *csv = getenv("BENCH_CSV");
    size_t top = (quick && *quick && *quick != '0') ? 10000 : 100000;
    FILE *out = csv && *csv ? fopen(csv, "a") : NULL;
    printf("%8s %10s %8s %12s %12s %14s\n", "dim", "leapfrogs", "per_it", "ns/leapfrog",
           "ns/gradient", "ns/leap/coord");
    for (size_t dim = 100; dim <= top; dim *= 10) {
        gmm_hmc_params par;
        gmm_hmc_params_init(&par);
        par.warmup = 200;
        par.draws = 200;
        par.seed = 11;
        gmm_hmc *h = gmm_hmc_alloc(dim, &par);
        double *q = calloc(dim, sizeof *q), *g = malloc(dim * sizeof *g);
        if (!h || !q || !g)
            return 1;
        for (size_t i = 0; i < dim; i++)
            q[i] = 0.1 * (double)(i % 7) - 0.3;
        gmm_hmc_target t = {std_normal, &dim};
        size_t leap = 0;
        double t0 = cpu();
        if (gmm_hmc_init(h, q, &t) != GMM_OK)
            return 1;
        for (size_t it = 0; it < par.warmup + par.draws; it++) {
            gmm_hmc_draw d;
            if (gmm_hmc_iterate(h, &d) != GMM_OK)
                return 1;
            leap += d.n_leapfrog;
        }
        double total = cpu() - t0;
        gmm_status (*volatile f)(void *, const double *, double *, double *) = std_normal;
        double lp, sink = 0.0;
        t0 = cpu();
        for (size_t k = 0; k < leap; k++) {
            q[k % dim] += 1e-9;
            f(&dim, q, &lp, g);
            sink += lp;
        }
        double grad = cpu() - t0;
        double own = (total - grad) / (double)leap;
        printf("%8zu %10zu %8.1f %12.0f %12.0f %14.2f%s\n", dim, leap,
               (double)leap / (double)(par.warmup + par.draws), 1e9 * total / (double)leap,
               1e9 * grad / (double)leap, 1e9 * own / (double)dim, sink == 1.0 ? " " : "");
        if (out)
            fprintf(out, "hmc_overhead,%zu,%.1f,nuts,%.4f\n", dim,
                    (double)leap / (double)(par.warmup + par.draws), 1e6 * own);
        gmm_hmc_free(h);
        free(q);
        free(g);
    }
    if (out)
        fclose(out);
    return 0;
}
