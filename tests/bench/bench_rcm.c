/* bench_rcm.c -- reverse Cuthill-McKee on a road-like graph of about 1e6
 * nodes: a k x k grid with every node jittered into a scrambled numbering,
 * 10% of the grid edges deleted at random and a few diagonal shortcuts added
 * (so degrees run 1..6 as on a street network).  Reports the time to build
 * the CSR from the edge list, the time of the ordering (the symbolic step of
 * every graph model), and the bandwidth before and after.
 *
 *   BENCH_QUICK=1   a 300 x 300 grid instead of 1000 x 1000
 *   BENCH_CSV=FILE  also append a row op,n,l,impl,ms: op rcm, l the bandwidth after */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gmm/alloc.h"
#include "gmm/graph.h"

/* splitmix64: the benchmark links only libgmm, not the test support. */
static unsigned long long rng_state = 2024;
static double uniform(void)
{
    unsigned long long z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* Wall time, and the process's CPU time (the machine may be shared: CPU
 * time is what the code costs, wall time what a user waits). */
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

int main(void)
{
    const char *quick = getenv("BENCH_QUICK"), *csv = getenv("BENCH_CSV");
    size_t k = (quick && *quick && *quick != '0') ? 300 : 1000, n = k * k;

    /* Scrambled numbering: label[grid index] is a random permutation. */
    size_t *label = malloc(n * sizeof *label);
    for (size_t v = 0; v < n; v++)
        label[v] = v;
    for (size_t v = n; v-- > 1;) {
        size_t w = (size_t)(uniform() * (double)(v + 1));
        size_t t = label[v];
        label[v] = label[w];
        label[w] = t;
    }
    size_t cap = 3 * n, m = 0;
    size_t *ei = malloc(cap * sizeof *ei), *ej = malloc(cap * sizeof *ej);
    double *len = malloc(cap * sizeof *len);
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            size_t v = a * k + b;
            if (b + 1 < k && uniform() >= 0.1) {
                ei[m] = label[v], ej[m] = label[v + 1], len[m++] = 50.0 + 20.0 * uniform();
            }
            if (a + 1 < k && uniform() >= 0.1) {
                ei[m] = label[v], ej[m] = label[v + k], len[m++] = 50.0 + 20.0 * uniform();
            }
            if (a + 1 < k && b + 1 < k && uniform() < 0.05) {
                ei[m] = label[v], ej[m] = label[v + k + 1], len[m++] = 75.0;
            }
        }

    double t0 = now(), c0 = cpu();
    gmm_graph *g = NULL;
    if (gmm_graph_from_edges(n, m, ei, ej, len, "bench", NULL, &g) != GMM_OK) {
        fprintf(stderr, "bench_rcm: %s\n", gmm_error_message());
        return 1;
    }
    double t1 = now(), c1 = cpu();
    size_t *perm = malloc(n * sizeof *perm), *iperm = malloc(n * sizeof *iperm);
    size_t ncomp = 0, *comp = malloc(n * sizeof *comp);
    gmm_graph_components(g, comp, &ncomp);
    double best = 1e300, best_cpu = 1e300;
    int reps = 5;
    for (int rep = 0; rep < reps; rep++) {
        double s = now(), sc = cpu();
        if (gmm_graph_rcm(g, perm, iperm) != GMM_OK) {
            fprintf(stderr, "bench_rcm: %s\n", gmm_error_message());
            return 1;
        }
        double e = now() - s, ec = cpu() - sc;
        if (e < best)
            best = e;
        if (ec < best_cpu)
            best_cpu = ec;
    }
    size_t bw0 = gmm_graph_bandwidth(g, NULL), bw1 = gmm_graph_bandwidth(g, iperm);
    int ok = gmm_graph_perm_check(n, perm, iperm);
    printf("rcm: %zu x %zu perturbed grid: n = %zu, edges = %zu, components = %zu\n", k, k, n,
           g->nedge, ncomp);
    printf("rcm:   build CSR %.3f s wall (%.3f s cpu)\n", t1 - t0, c1 - c0);
    printf("rcm:   order, best of %d: %.3f s wall, %.3f s cpu\n", reps, best, best_cpu);
    printf("rcm:   bandwidth %zu -> %zu, bijection %s\n", bw0, bw1, ok ? "yes" : "NO");
    if (csv && *csv) {
        FILE *f = fopen(csv, "a");
        if (f) {
            if (fseek(f, 0, SEEK_END) == 0 && ftell(f) == 0)
                fprintf(f, "op,n,l,impl,ms\n");
            fprintf(f, "rcm,%zu,%zu,gmm,%.6g\n", n, bw1, 1e3 * best);
            fclose(f);
        }
    }
    gmm_graph_free(g);
    free(label);
    free(ei);
    free(ej);
    free(len);
    free(perm);
    free(iperm);
    free(comp);
    return ok ? 0 : 1;
}
