/* bench_stack.c -- the weekly influenza counts (data/, 140 districts x 416
 * weeks) as a space-time Poisson model on a stacked latent (stack.h):
 * f(district, bym2, graph) + f(week, rw2) + f(t, rw1) + intercept.  Reports
 * the components' sizes, the joint bandwidth and observation width, the
 * time to build the latent, one Laplace evaluation with its gradient, and
 * the peak resident memory.
 *
 *   BENCH_QUICK=1   the first 104 weeks only
 *   BENCH_CSV=FILE  also append a row op,n,l,impl,ms: op stack-laplace, l the bandwidth */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmm/alloc.h"
#include "gmm/graph.h"
#include "gmm/io.h"
#include "gmm/likelihood.h"
#include "gmm/model.h"
#include "gmm/problem.h"
#include "gmm/stack.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long peak_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_stack: %s: %s\n", what, gmm_error_message());
    return 1;
}

int main(void)
{
    gmm_table *et = NULL, *ct = NULL;
    gmm_graph *g = NULL;
    if (gmm_table_read("data/flu_bybw_edges.csv", &et) ||
        gmm_mdl_graph_read(et, "i", "j", NULL, 0, &g) ||
        gmm_table_read("data/flu_bybw_weekly_counts.csv", &ct))
        return fail("reading data/flu_bybw_*");
    size_t D = 140, T = ct->nrow;
    if (getenv("BENCH_QUICK") && *getenv("BENCH_QUICK") && T > 104)
        T = 104;
    size_t nr = T * D, ct_t, ct_w;
    size_t *dist = malloc(nr * sizeof *dist);
    double *col = malloc(ct->nrow * sizeof *col), *tt = malloc(nr * sizeof *tt);
    double *wk = malloc(nr * sizeof *wk), *y = malloc(nr * sizeof *y);
    double *tcol = malloc(ct->nrow * sizeof *tcol), *wcol = malloc(ct->nrow * sizeof *wcol);
    if (gmm_table_column(ct, "t", &ct_t) || gmm_table_column(ct, "week", &ct_w) ||
        gmm_table_column_double(ct, ct_t, 0, tcol) || gmm_table_column_double(ct, ct_w, 0, wcol))
        return fail("columns t, week");
    for (size_t d = 0; d < D; d++) {
        char name[16];
        size_t c, v;
        snprintf(name, sizeof name, "n%zu", d);
        if (gmm_table_column(ct, name, &c) || gmm_table_column_double(ct, c, 0, col))
            return fail(name);
        snprintf(name, sizeof name, "%zu", d);
        if (!gmm_graph_node_find(g, name, &v))
            return fail("district not in the graph");
        for (size_t t = 0; t < T; t++) {
            size_t r = t * D + d;
            dist[r] = v;
            tt[r] = tcol[t];
            wk[r] = wcol[t];
            y[r] = col[t];
        }
    }
    gmm_stack_term terms[3] = {
        {.model = GMM_STACK_BYM2, .name = "f.district", .level = dist, .graph = g},
        {.model = GMM_STACK_RW2, .name = "f.week", .value = wk},
        {.model = GMM_STACK_RW1, .name = "f.t", .value = tt}};
    double t0 = now();
    gmm_latent *l = NULL;
    if (gmm_latent_stack_alloc(nr, 3, terms, 0, &l))
        return fail("stack");
    double t_alloc = now() - t0;
    char buf[512];
    gmm_latent_stack_describe(l, buf, sizeof buf);
    gmm_lik lik;
    gmm_problem *p = NULL;
    if (gmm_lik_parse("poisson", &lik) || gmm_problem_alloc(l, &lik, y, NULL, 1, 0.0, &p))
        return fail("problem");
    gmm_objective *o = gmm_problem_objective(p);
    double th[8], f, grad[8];
    memcpy(th, o->value, o->nparam * sizeof *th);
    t0 = now();
    if (o->eval(o->ctx, th, &f, grad))
        return fail("laplace");
    double t_eval = now() - t0;
    printf("flu space-time, %zu rows: %s\n", nr, buf);
    printf("  build %.3f s, Laplace value + gradient %.3f s (%zu Newton iterations), log q %.6f, "
           "peak RSS %.0f MB\n",
           t_alloc, t_eval, gmm_problem_iterations(p), f, (double)peak_kb() / 1024.0);
    const char *csv = getenv("BENCH_CSV");
    FILE *cf = csv && *csv ? fopen(csv, "a") : NULL;
    if (cf) {
        fprintf(cf, "stack-laplace,%zu,%zu,stack,%.3f\n", gmm_latent_dim(l),
                gmm_latent_bandwidth(l), 1e3 * t_eval);
        fclose(cf);
    }
    gmm_problem_free(p);
    gmm_latent_free(l);
    gmm_graph_free(g);
    gmm_table_free(et);
    gmm_table_free(ct);
    free(dist);
    free(col);
    free(tt);
    free(wk);
    free(y);
    free(tcol);
    free(wcol);
    return 0;
}
