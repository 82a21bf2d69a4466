/* bench_laplace.c -- the Laplace approximation's log marginal likelihood
 * and gradient as n grows (problem.h): a linear method shows a constant
 * time per latent.
 *
 *   series: Poisson counts on a regular grid, matern32 (d = 2, bandwidth
 *           3), n in {1e3, 1e4, 1e5, 1e6} (BENCH_QUICK=1: up to 1e5)
 *   graph:  Poisson counts on a strip lattice of w x (n / w) nodes (w = 20:
 *           bandwidth ~20 after RCM, like a road network), edge-ou
 *           precision, n in {1e3, 1e4, 1e5} (BENCH_QUICK=1: up to 1e4)
 *   BENCH_CSV=FILE  append rows op,n,l,impl,ms (op laplace_loglik_grad)
 *   BENCH_FACTOR=cholesky | square-root | auto: the series' factorisation
 *           alone (the Laplace approximation's --factor).  Default: the
 *           series twice, on the assembled precision (cholesky, the series_chol
 *           rows) and by auto, which takes the square-root form here from
 *           n = 1e3 (the Cholesky's rounding bound exceeds 1e-8), with the
 *           ratio of their moved times
 *   BENCH_N=n       the series at n alone (no graph); BENCH_REPS=r (1 .. 16)
 *           evaluations per run instead of 11 (5 from n = 1e5, 3 at 1e6):
 *           with r and 1, an instruction count's difference over r - 1 is
 *           one moved evaluation's (valgrind --tool=callgrind)
 *
 * Times are wall-clock: the first evaluation (cold: the mode searched from
 * x = 0), then the median of evaluations at hyperparameters moved by 5%
 * each time (the first parameter scaled by 1.05^k), the mode warm-started
 * from the previous one as in a fit's line search, with its median CPU time
 * (the thread's: robust on a loaded machine); Newton iterations of each
 * kind (the last of the moved ones; 0 when the square-root form keeps the
 * assembled start's mode).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmm/graph.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/rng.h"
#include "gmm/spec.h"
#include "gmm/ssm.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This thread's CPU seconds: what an evaluation costs on a machine whose
 * other jobs stretch the wall-clock. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_laplace: %s: %s\n", what, gmm_error_message());
    exit(1);
}

/* Poisson counts of rate exp(f), f a slow sine plus noise. */
static double poisson(gmm_rng *r, double mu)
{
    double l = exp(-mu), p = 1.0;
    int k = 0;
    if (mu > 30.0) /* normal approximation: the benchmark needs counts, not exactness */
        return fmax(0.0, floor(mu + sqrt(mu) * gmm_rng_normal(r) + 0.5));
    do {
        k++;
        p *= gmm_rng_uniform(r);
    } while (p > l);
    return (double)(k - 1);
}

static size_t env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? (size_t)strtoul(v, NULL, 10) : dflt;
}

/* The moved evaluations' median wall-clock and CPU times (ms) into ms[0],
 * ms[1] (NAN with one evaluation). */
static void run(const char *label, gmm_latent *lat, size_t n, FILE *csv, double ms_out[2])
{
    gmm_rng r;
    gmm_rng_seed(&r, 99, 0);
    size_t nr = gmm_latent_nrows(lat);
    double *y = malloc(nr * sizeof *y);
    for (size_t i = 0; i < nr; i++)
        y[i] = poisson(&r, exp(1.0 + sin(6.283 * (double)i / 500.0) + 0.3 * gmm_rng_normal(&r)));
    gmm_lik lik;
    if (gmm_lik_parse("poisson", &lik))
        die("likelihood");
    gmm_problem *p = NULL;
    if (gmm_problem_alloc(lat, &lik, y, NULL, 1, 1.0, &p))
        die("problem");
    gmm_objective *o = gmm_problem_objective(p);
    double *g = malloc(o->nparam * sizeof *g), f, t[16], c[16];
    size_t reps = env_size("BENCH_REPS", n >= 1000000 ? 3 : n >= 100000 ? 5 : 11), cold = 0;
    if (reps < 1 || reps > 16) {
        fprintf(stderr, "bench_laplace: BENCH_REPS must be 1 .. 16\n");
        exit(2);
    }
    double *th = malloc(o->nparam * sizeof *th);
    memcpy(th, o->value, o->nparam * sizeof *th);
    for (size_t k = 0; k < reps; k++) {
        if (k > 0)
            th[0] *= 1.05;
        double t0 = now(), c0 = cpu_now();
        if (o->eval(o->ctx, th, &f, g))
            die("evaluation");
        t[k] = 1e3 * (now() - t0);
        c[k] = 1e3 * (cpu_now() - c0);
        if (k == 0)
            cold = gmm_problem_iterations(p);
    }
    double cold_ms = t[0];
    qsort(t + 1, reps - 1, sizeof *t, cmp_double);
    qsort(c + 1, reps - 1, sizeof *c, cmp_double);
    double ms = ms_out[0] = reps > 1 ? t[1 + (reps - 1) / 2] : NAN;
    ms_out[1] = reps > 1 ? c[1 + (reps - 1) / 2] : NAN;
    printf("%-11s n = %8zu  bandwidth %3zu  cold %9.4g ms (%2zu Newton)  moved %9.4g ms (cpu "
           "%.4g; %zu Newton)  %6.3f us/latent\n",
           label, n, gmm_latent_bandwidth(lat), cold_ms, cold, ms, ms_out[1],
           gmm_problem_iterations(p), 1e3 * ms / (double)gmm_latent_dim(lat));
    if (csv)
        fprintf(csv, "laplace_loglik_grad_%s,%zu,%zu,gmm_moved,%.6g\nlaplace_loglik_grad_%s,%zu,"
                     "%zu,gmm_cold,%.6g\n",
                label, n, gmm_latent_bandwidth(lat), ms, label, n, gmm_latent_bandwidth(lat),
                cold_ms);
    gmm_problem_free(p);
    free(th);
    free(g);
    free(y);
}

int main(void)
{
    int quick = getenv("BENCH_QUICK") && *getenv("BENCH_QUICK");
    const char *csvname = getenv("BENCH_CSV");
    FILE *csv = csvname && *csvname ? fopen(csvname, "a") : NULL;
    size_t ns[] = {1000, 10000, 100000, 1000000};
    size_t nmax = quick ? 100000 : 1000000, one = env_size("BENCH_N", 0);
    if (one) {
        ns[0] = nmax = one;
        ns[1] = ns[2] = ns[3] = one + 1;
    }
    gmm_spec_node *s = NULL;
    gmm_kernel *k = NULL;
    if (gmm_spec_parse("matern32(variance=1, lengthscale=50)", &s) ||
        gmm_kernel_from_spec(s, &k))
        die("kernel");
    const char *fe = getenv("BENCH_FACTOR");
    int both = !fe || !*fe;
    for (size_t i = 0; i < 4 && ns[i] <= nmax; i++) {
        size_t n = ns[i];
        double *x = malloc(n * sizeof *x), ms[2][2];
        for (size_t j = 0; j < n; j++)
            x[j] = (double)j;
        for (int form = both ? 0 : 1; form < 2; form++) {
            gmm_latent *lat = NULL;
            gmm_ssm_params par;
            gmm_ssm_params_init(&par);
            if (!form || (fe && !strcmp(fe, "cholesky")))
                par.factor = GMM_SSM_FACTOR_CHOL;
            else if (fe && !strcmp(fe, "square-root"))
                par.factor = GMM_SSM_FACTOR_ROWS;
            if (gmm_latent_ssm_alloc(k, x, n, &par, &lat))
                die("state-space latent");
            run(form ? "series" : "series_chol", lat, n, csv, ms[form]);
            gmm_latent_free(lat);
        }
        if (both)
            printf("series      n = %8zu  moved, auto against the assembled precision: %.2fx "
                   "wall-clock, %.2fx CPU\n",
                   n, ms[1][0] / ms[0][0], ms[1][1] / ms[0][1]);
        free(x);
    }
    gmm_kernel_free(k);
    gmm_spec_free(s);

    size_t gmax = one ? 0 : quick ? 10000 : 100000, w = 20;
    if (gmm_spec_parse("edge-ou(variance=1, lengthscale=5)", &s))
        die("precision");
    for (size_t i = 0; i < 3 && ns[i] <= gmax; i++) {
        size_t n = ns[i], len = n / w, m = 0;
        size_t *ei = malloc(2 * n * sizeof *ei), *ej = malloc(2 * n * sizeof *ej);
        for (size_t a = 0; a < len; a++)
            for (size_t b = 0; b < w; b++) {
                size_t v = a * w + b;
                if (b + 1 < w) {
                    ei[m] = v;
                    ej[m++] = v + 1;
                }
                if (a + 1 < len) {
                    ei[m] = v;
                    ej[m++] = v + w;
                }
            }
        gmm_graph *g = NULL;
        gmm_gmrf *gm = NULL;
        gmm_latent *lat = NULL;
        size_t *node = malloc(n * sizeof *node);
        for (size_t v = 0; v < n; v++)
            node[v] = v;
        if (gmm_graph_from_edges(n, m, ei, ej, NULL, NULL, NULL, &g) ||
            gmm_gmrf_alloc(g, s, NULL, &gm) || gmm_latent_gmrf_alloc(gm, n, node, &lat))
            die("graph latent");
        double ms[2];
        run("graph", lat, n, csv, ms);
        gmm_latent_free(lat);
        gmm_gmrf_free(gm);
        gmm_graph_free(g);
        free(node);
        free(ei);
        free(ej);
    }
    gmm_spec_free(s);
    if (csv)
        fclose(csv);
    return 0;
}
