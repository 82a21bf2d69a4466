/* bench_lattice_prior.c -- a k x k lattice (4 neighbours) with one besag
 * term on it, f(node, besag), one data row per node: the time to build the
 * stacked latent (RCM, besag's scaling by the sparse factor, the joint
 * order), the first prior in sparse storage (the pattern's symbolic work, Q
 * and the constrained normaliser from a sparse factorisation) and a second
 * (the numeric work of every later evaluation), and the peak resident
 * memory.  No band of the lattice's bandwidth (k) is formed.
 *
 *   bench_lattice_prior [k]   (default 1000: 1e6 nodes)
 *   BENCH_QUICK=1             k = 200
 *   BENCH_CSV=FILE            also append op,n,l,impl,ms rows: lattice-build and
 *                             lattice-prior (a later evaluation's), l the joint
 *                             bandwidth */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmm/alloc.h"
#include "gmm/graph.h"
#include "gmm/latent.h"
#include "gmm/sparse.h"
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
    fprintf(stderr, "bench_lattice_prior: %s: %s\n", what, gmm_error_message());
    return 1;
}

int main(int argc, char **argv)
{
    size_t k = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10)
               : getenv("BENCH_QUICK") && *getenv("BENCH_QUICK") ? 200 : 1000;
    size_t n = k * k, m = 0;
    size_t *ei = malloc(2 * n * sizeof *ei), *ej = malloc(2 * n * sizeof *ej);
    size_t *node = malloc(n * sizeof *node);
    if (k < 2 || !ei || !ej || !node)
        return fprintf(stderr, "bench_lattice_prior: k >= 2 and memory\n"), 1;
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++) {
            node[i * k + j] = i * k + j;
            if (j + 1 < k) {
                ei[m] = i * k + j;
                ej[m++] = i * k + j + 1;
            }
            if (i + 1 < k) {
                ei[m] = i * k + j;
                ej[m++] = (i + 1) * k + j;
            }
        }
    gmm_graph *g = NULL;
    gmm_latent *l = NULL;
    gmm_sparse *Q = NULL;
    if (gmm_graph_from_edges(n, m, ei, ej, NULL, NULL, NULL, &g))
        return fail("graph");
    free(ei);
    free(ej);
    gmm_stack_term t = {.model = GMM_STACK_BESAG, .name = "f.node", .level = node, .graph = g,
                        .variance = 1.0};
    double t0 = now();
    if (gmm_latent_stack_alloc(n, 1, &t, 0, &l))
        return fail("build");
    double t1 = now();
    double theta = 0.7, ld = NAN;
    if (gmm_latent_prior_pattern(l, &Q) || gmm_latent_prior_sparse(l, &theta, Q, &ld))
        return fail("prior");
    double t2 = now();
    theta = 1.3; /* the numeric work alone, as at every later evaluation */
    if (gmm_latent_prior_sparse(l, &theta, Q, &ld))
        return fail("prior");
    double t3 = now();
    printf("lattice %zu x %zu besag: n = %zu, joint bandwidth %zu (band of Q %.1f GB, not "
           "formed), nnz(Q) = %zu\n",
           k, k, gmm_latent_dim(l), gmm_latent_bandwidth(l),
           (double)(gmm_latent_bandwidth(l) + 1) * (double)n * 8.0 / 1e9, Q->nnz);
    printf("  build %.2f s, first prior_sparse (symbolic + numeric) %.2f s, next (numeric: "
           "Q and the log det on the subspace, %.6g) %.2f s, peak RSS %.0f MB\n",
           t1 - t0, t2 - t1, ld, t3 - t2, (double)peak_kb() / 1e3);
    const char *csv = getenv("BENCH_CSV");
    FILE *cf = csv && *csv ? fopen(csv, "a") : NULL;
    if (cf) {
        fprintf(cf, "lattice-build,%zu,%zu,stack,%.3f\n", n, gmm_latent_bandwidth(l),
                1e3 * (t1 - t0));
        fprintf(cf, "lattice-prior,%zu,%zu,sparse,%.3f\n", n, gmm_latent_bandwidth(l),
                1e3 * (t3 - t2));
        fclose(cf);
    }
    gmm_sparse_free(Q);
    gmm_latent_free(l);
    gmm_graph_free(g);
    free(node);
    return 0;
}
