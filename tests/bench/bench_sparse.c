/* bench_sparse.c -- the sparse factor (CHOLMOD, factor.h) on a k x k grid
 * Laplacian + 1e-3 I (the besag precision of a 2-D lattice), k = 100, 300,
 * 1000: the analysis (ordering and symbolic factorisation, once per
 * model), one numeric factorisation, the selected inverse on Q's pattern
 * (Takahashi) and its reverse mode, with nnz(L); and the band factor on
 * the same matrix (natural order, bandwidth k: what RCM gives a grid) for
 * k <= 300.  Wall and CPU seconds (the machine may be shared), best of a
 * few repetitions for the numeric steps.
 *
 *   BENCH_QUICK=1   k = 100 and 300 only
 *   BENCH_K=300     one size only
 *   BENCH_CSV=FILE  also append rows op,n,l,impl,ms (l: k) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gmm/band.h"
#include "gmm/factor.h"
#include "gmm/sparse.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

typedef struct {
    double wall, cpu;
} span;

static FILE *csv_file;

static void report(const char *impl, const char *op, size_t n, size_t k, span s)
{
    printf("sparse:   %-6s %-9s %9.3f s wall %9.3f s cpu\n", impl, op, s.wall, s.cpu);
    if (csv_file)
        fprintf(csv_file, "%s_%s,%zu,%zu,%s,%.6g\n", impl, op, n, k, impl, 1e3 * s.wall);
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_sparse: %s: %s\n", what, gmm_error_message());
    return 1;
}

/* The grid's Laplacian + 1e-3 I on its pattern. */
static gmm_sparse *grid(size_t k)
{
    size_t n = k * k, m = 0, *ei = malloc(2 * n * sizeof *ei), *ej = malloc(2 * n * sizeof *ej);
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++) {
            if (b + 1 < k)
                ei[m] = a * k + b, ej[m++] = a * k + b + 1;
            if (a + 1 < k)
                ei[m] = a * k + b, ej[m++] = (a + 1) * k + b;
        }
    gmm_sparse *Q = NULL;
    if (gmm_sparse_from_entries(n, m, ei, ej, &Q) == GMM_OK)
        for (size_t j = 0; j < n; j++) {
            size_t deg = (j % k > 0) + (j % k + 1 < k) + (j / k > 0) + (j / k + 1 < k);
            Q->val[Q->colptr[j]] = (double)deg + 1e-3;
            for (size_t p = Q->colptr[j] + 1; p < Q->colptr[j + 1]; p++)
                Q->val[p] = -1.0;
        }
    free(ei);
    free(ej);
    return Q;
}

/* Factorisation, selected inverse and its reverse, best of reps, on f
 * (decomp_band: Qb for the band factor, else Q for the sparse one). */
static int numeric(gmm_factor *f, const gmm_sparse *Q, const gmm_band *Qb, int reps,
                   const char *impl, size_t k)
{
    gmm_sparse *S = gmm_sparse_alloc_like(Q), *Sbar = gmm_sparse_alloc_like(Q);
    gmm_sparse *Qbar = gmm_sparse_alloc_like(Q);
    if (!S || !Sbar || !Qbar)
        return fail("alloc");
    for (size_t p = 0; p < Sbar->nnz; p++)
        Sbar->val[p] = 1.0;
    span best[3] = {{1e300, 1e300}, {1e300, 1e300}, {1e300, 1e300}};
    for (int rep = 0; rep < reps; rep++) {
        double t[4], c[4];
        t[0] = now(), c[0] = cpu();
        if ((Qb ? gmm_factor_decomp(f, Qb) : gmm_factor_decomp_sparse(f, Q)) != GMM_OK)
            return fail("decomp");
        t[1] = now(), c[1] = cpu();
        if (gmm_factor_selinv_sparse(f, S) != GMM_OK)
            return fail("selinv");
        t[2] = now(), c[2] = cpu();
        if (gmm_factor_selinv_sparse_rev(f, S, Sbar, Qbar) != GMM_OK)
            return fail("reverse");
        t[3] = now(), c[3] = cpu();
        for (int i = 0; i < 3; i++) {
            if (t[i + 1] - t[i] < best[i].wall)
                best[i].wall = t[i + 1] - t[i];
            if (c[i + 1] - c[i] < best[i].cpu)
                best[i].cpu = c[i + 1] - c[i];
        }
    }
    report(impl, "factor", Q->n, k, best[0]);
    report(impl, "selinv", Q->n, k, best[1]);
    report(impl, "reverse", Q->n, k, best[2]);
    gmm_sparse_free(S);
    gmm_sparse_free(Sbar);
    gmm_sparse_free(Qbar);
    return 0;
}

static int one_size(size_t k)
{
    gmm_sparse *Q = grid(k);
    if (!Q)
        return fail("grid");
    size_t n = Q->n;
    int reps = k >= 1000 ? 2 : 3;
    printf("sparse: %zu x %zu grid Laplacian + 1e-3 I: n = %zu, nnz(Q lower) = %zu\n", k, k, n,
           Q->nnz);
    double t0 = now(), c0 = cpu();
    gmm_factor *f = gmm_factor_sparse_alloc(Q);
    if (!f)
        return fail("analysis");
    span an = {now() - t0, cpu() - c0};
    double fl, by;
    gmm_factor_cost(f, &fl, &by);
    printf("sparse:   sparse ordering %s, nnz(L) = %.4g, flops %.3g, %.3g MB\n",
           gmm_factor_ordering(f), gmm_factor_nnz(f), fl, by / 1e6);
    report("sparse", "analysis", n, k, an);
    if (numeric(f, Q, NULL, reps, "sparse", k))
        return 1;
    gmm_factor_free(f);
    if (k <= 300) {
        gmm_band *Qb = gmm_band_alloc(n, k, 0, GMM_BAND_SYMMETRIC);
        gmm_factor *fb = gmm_factor_band_alloc(n, k);
        if (!Qb || !fb)
            return fail("band alloc");
        gmm_band_set_zero(Qb);
        for (size_t j = 0; j < n; j++)
            for (size_t p = Q->colptr[j]; p < Q->colptr[j + 1]; p++)
                *gmm_band_ptr(Qb, Q->rowind[p], j) = Q->val[p];
        gmm_factor_cost(fb, &fl, &by);
        printf("sparse:   band   bandwidth %zu, nnz(L) = %.4g, flops %.3g, %.3g MB\n", k,
               gmm_factor_nnz(fb), fl, by / 1e6);
        if (numeric(fb, Q, Qb, k >= 300 ? 1 : reps, "band", k))
            return 1;
        gmm_factor_free(fb);
        gmm_band_free(Qb);
    }
    gmm_sparse_free(Q);
    return 0;
}

int main(void)
{
    const char *quick = getenv("BENCH_QUICK"), *csv = getenv("BENCH_CSV"), *ks = getenv("BENCH_K");
    int q = quick && *quick && *quick != '0';
    if (csv && *csv && (csv_file = fopen(csv, "a")) != NULL &&
        fseek(csv_file, 0, SEEK_END) == 0 && ftell(csv_file) == 0)
        fprintf(csv_file, "op,n,l,impl,ms\n");
    static const size_t sizes[] = {100, 300, 1000};
    int rc = 0;
    for (size_t i = 0; i < (q ? 2u : 3u) && !rc; i++)
        if (!ks || (size_t)atol(ks) == sizes[i])
            rc = one_size(sizes[i]);
    if (csv_file)
        fclose(csv_file);
    return rc;
}
