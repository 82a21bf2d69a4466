/* bench_vi.c -- the ELBO and its gradient as n grows (vi.h): a linear
 * method shows a constant time per latent; and gmm_vi_fit to convergence.
 *
 *   series: Poisson counts on a regular grid, matern32 (d = 2, bandwidth
 *           3), n in {1e3, 1e4, 1e5, 1e6} (BENCH_QUICK=1: up to 1e5), the
 *           prior by its rows (the default) and assembled
 *   graph:  Poisson counts on a strip lattice of 20 x (n / 20) nodes
 *           (bandwidth ~20 after RCM), edge-ou, n in {1e3, 1e4, 1e5}
 *           (BENCH_QUICK=1: up to 1e4)
 *   BENCH_CSV=FILE  append rows op,n,l,impl,ms (op vi_elbo_grad_<model>)
 *
 * Times are wall-clock medians at the Laplace start: the ELBO alone, the
 * ELBO with its gradient in the variational parameters, and with the
 * hyperparameters' too.  Then one fit (default parameters, q only) per
 * model at n = 1e4 (and 1e5 unless BENCH_QUICK): iterations, evaluations,
 * seconds.
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
#include "gmm/vi.h"

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

static void die(const char *what)
{
    fprintf(stderr, "bench_vi: %s: %s\n", what, gmm_error_message());
    exit(1);
}

static double poisson(gmm_rng *r, double mu)
{
    double l = exp(-mu), p = 1.0;
    int k = 0;
    if (mu > 30.0)
        return fmax(0.0, floor(mu + sqrt(mu) * gmm_rng_normal(r) + 0.5));
    do {
        k++;
        p *= gmm_rng_uniform(r);
    } while (p > l);
    return (double)(k - 1);
}

/* Median ms of reps calls of the ELBO (what: 0 value, 1 + lambda
 * gradient, 2 + theta gradient). */
static double time_elbo(gmm_vi *v, int what, size_t reps)
{
    size_t nv = gmm_vi_nvar(v), np = gmm_vi_nparam(v);
    double *gl = malloc(nv * sizeof *gl), *gt = malloc((np ? np : 1) * sizeof *gt), f, t[16];
    for (size_t k = 0; k < reps; k++) {
        double t0 = now();
        if (gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &f, what ? gl : NULL,
                        what == 2 ? gt : NULL))
            die("elbo");
        t[k] = 1e3 * (now() - t0);
    }
    qsort(t, reps, sizeof *t, cmp_double);
    free(gl);
    free(gt);
    return t[reps / 2];
}

static void run(const char *label, gmm_latent *lat, size_t n, gmm_vi_prior_form form, int fit,
                FILE *csv)
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
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.prior = form;
    gmm_vi *v = NULL;
    if (gmm_vi_alloc(p, &par, &v))
        die("vi");
    double t0 = now();
    if (gmm_vi_start_laplace(v, NULL))
        die("start");
    double tstart = 1e3 * (now() - t0);
    size_t reps = n >= 1000000 ? 3 : n >= 100000 ? 5 : 11;
    double t_val = time_elbo(v, 0, reps), t_var = time_elbo(v, 1, reps),
           t_all = time_elbo(v, 2, reps);
    const char *fname = gmm_vi_uses_rows(v) ? "rows" : "assembled";
    printf("%-7s %-9s n = %8zu  b %3zu  ELBO %9.2f ms  + grad q %9.2f ms  + grad theta %9.2f ms"
           "  %6.3f us/latent  (Laplace start %8.1f ms)\n",
           label, fname, n, gmm_vi_bandwidth(v), t_val, t_var, t_all,
           1e3 * t_all / (double)gmm_vi_dim(v), tstart);
    if (csv)
        fprintf(csv, "vi_elbo_grad_%s,%zu,%zu,gmm_%s,%.6g\n", label, n, gmm_vi_bandwidth(v),
                fname, t_all);
    if (fit) {
        gmm_vi_result res;
        t0 = now();
        if (gmm_vi_fit(v, &res))
            die("fit");
        printf("%-7s %-9s n = %8zu  fit: %zu iterations, %zu evaluations, %.2f s, ELBO %.6f "
               "(%s)\n",
               label, fname, n, res.iterations, res.evaluations, now() - t0, res.elbo,
               res.message);
    }
    gmm_vi_free(v);
    gmm_problem_free(p);
    free(y);
}

int main(void)
{
    int quick = getenv("BENCH_QUICK") && *getenv("BENCH_QUICK");
    const char *csvname = getenv("BENCH_CSV");
    FILE *csv = csvname && *csvname ? fopen(csvname, "a") : NULL;
    size_t ns[] = {1000, 10000, 100000, 1000000};
    size_t nmax = quick ? 100000 : 1000000, fitmax = quick ? 10000 : 100000;
    gmm_spec_node *s = NULL;
    gmm_kernel *k = NULL;
    if (gmm_spec_parse("matern32(variance=1, lengthscale=50)", &s) ||
        gmm_kernel_from_spec(s, &k))
        die("kernel");
    for (size_t i = 0; i < 4 && ns[i] <= nmax; i++) {
        size_t n = ns[i];
        double *x = malloc(n * sizeof *x);
        for (size_t j = 0; j < n; j++)
            x[j] = (double)j;
        gmm_latent *lat = NULL;
        if (gmm_latent_ssm_alloc(k, x, n, NULL, &lat))
            die("state-space latent");
        run("series", lat, n, GMM_VI_PRIOR_AUTO, n >= 10000 && n <= fitmax, csv);
        run("series", lat, n, GMM_VI_PRIOR_ASSEMBLED, 0, csv);
        gmm_latent_free(lat);
        free(x);
    }
    gmm_kernel_free(k);
    gmm_spec_free(s);

    size_t gmax = quick ? 10000 : 100000, w = 20;
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
        run("graph", lat, n, GMM_VI_PRIOR_AUTO, n >= 10000 && n <= fitmax, csv);
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
