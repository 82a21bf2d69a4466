/* bench_band_solve_prod.c -- cost of the triangular solves and products of
 * the band module, and of their reverse modes, as n grows at fixed
 * bandwidth: a linear operator shows a constant time per row.
 *
 * For each operator and n in {1e4, 1e5, 1e6} (l = 3, band-band with
 * bandwidths (3, 3)) it reports CPU time per call and per row (ns).
 *
 *   BENCH_QUICK=1   n in {1e4, 1e5}
 *   BENCH_CSV=FILE  also append rows op,n,l,impl,ms (wall ms per call) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gmm/band.h"

static unsigned long long rng_state = 7;
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

static void fill(gmm_band *b, int lower_factor)
{
    for (size_t j = 0; j < b->n; j++)
        for (size_t i = (j >= b->ku ? j - b->ku : 0); i <= j + b->kl && i < b->n; i++)
            *gmm_band_ptr(b, i, j) =
                lower_factor ? (i == j ? 1.0 + uniform() : 0.3 * (uniform() - 0.5))
                             : uniform() - 0.5;
}

static void fill_vec(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = uniform() - 0.5;
}

typedef struct {
    size_t n;
    gmm_band *L, *Lbar, *B, *X, *Xbar, *Bbar, *S, *Sbar;
    double *x, *y, *s, *work;
} bench_data;

enum { SOLVE_VEC, SOLVE_VEC_REV, SOLVE_BAND, SOLVE_BAND_REV, GEMM, GEMM_REV, GEMV_SYM,
       GEMV_SYM_REV, OUTER_SYM, OUTER_SYM_REV, NCASE };
static const char *case_name[NCASE] = {
    "tri_solve_vec(L^T)", "tri_solve_vec_rev(L^T)", "tri_solve_band(L,(3,3))",
    "tri_solve_band_rev", "gemm(L,B^T)->(6,3)", "gemm_rev", "gemv(SYM)", "gemv_rev(SYM)",
    "outer(SYM,k=1)", "outer_rev(SYM)"};

static gmm_status run_case(int c, bench_data *d)
{
    switch (c) {
    case SOLVE_VEC: return gmm_band_tri_solve_vec(d->L, GMM_TRANS, d->s);
    case SOLVE_VEC_REV:
        return gmm_band_tri_solve_vec_rev(d->L, GMM_TRANS, d->s, d->x, d->y, d->Lbar, d->work);
    case SOLVE_BAND: return gmm_band_tri_solve_band(d->L, GMM_NOTRANS, d->B, d->X);
    case SOLVE_BAND_REV:
        return gmm_band_tri_solve_band_rev(d->L, GMM_NOTRANS, d->B, d->X, d->Xbar, d->Bbar,
                                           d->Lbar);
    case GEMM: return gmm_band_gemm(GMM_NOTRANS, d->L, GMM_TRANS, d->B, d->X);
    case GEMM_REV: return gmm_band_gemm_rev(GMM_NOTRANS, d->L, GMM_TRANS, d->B, d->Xbar,
                                            d->Lbar, d->Bbar);
    case GEMV_SYM: return gmm_band_gemv(GMM_NOTRANS, 1.0, d->S, d->x, 0.0, d->y);
    case GEMV_SYM_REV: return gmm_band_gemv_rev(GMM_NOTRANS, 1.0, d->S, d->x, d->s, d->Sbar,
                                                d->y);
    case OUTER_SYM: return gmm_band_outer(1.0, 1, d->x, d->n, d->s, d->n, d->Sbar);
    case OUTER_SYM_REV:
        return gmm_band_outer_rev(1.0, 1, d->x, d->n, d->s, d->n, d->S, d->y, d->n, d->work,
                                  d->n);
    default: return GMM_EINVAL;
    }
}

int main(void)
{
    const char *quick = getenv("BENCH_QUICK"), *csv = getenv("BENCH_CSV");
    int q = quick && *quick && *quick != '0';
    size_t ns[3] = {10000, 100000, 1000000}, nn = q ? 2 : 3, l = 3;
    FILE *out = csv && *csv ? fopen(csv, "a") : NULL;
    if (out && fseek(out, 0, SEEK_END) == 0 && ftell(out) == 0)
        fprintf(out, "op,n,l,impl,ms\n");
    double per_row[NCASE][3];

    for (size_t a = 0; a < nn; a++) {
        bench_data d = {0};
        size_t n = d.n = ns[a];
        d.L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        d.Lbar = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        d.B = gmm_band_alloc(n, 3, 3, GMM_BAND_GENERAL);
        d.Bbar = gmm_band_alloc(n, 3, 3, GMM_BAND_GENERAL);
        d.X = gmm_band_alloc(n, 3 + l, 3, GMM_BAND_GENERAL);
        d.Xbar = gmm_band_alloc(n, 3 + l, 3, GMM_BAND_GENERAL);
        d.S = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        d.Sbar = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        d.x = malloc(n * sizeof(double));
        d.y = malloc(n * sizeof(double));
        d.s = malloc(n * sizeof(double));
        d.work = malloc(n * sizeof(double));
        if (!d.L || !d.Lbar || !d.B || !d.Bbar || !d.X || !d.Xbar || !d.S || !d.Sbar || !d.x ||
            !d.y || !d.s || !d.work) {
            fprintf(stderr, "bench_band_solve_prod: out of memory at n = %zu\n", n);
            return 1;
        }
        fill(d.L, 1);
        fill(d.B, 0);
        fill(d.Xbar, 0);
        fill(d.S, 0);
        fill_vec(d.x, n);
        fill_vec(d.s, n);
        fill_vec(d.y, n);
        for (int c = 0; c < NCASE; c++) {
            /* Repeat until 0.2 s of CPU; solves restart from a fresh right-hand side
             * now and then so the values stay finite. */
            size_t reps = 0;
            double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), c1;
            do {
                if (c == SOLVE_VEC && reps % 8 == 0)
                    fill_vec(d.s, n);
                if (run_case(c, &d) != GMM_OK) {
                    fprintf(stderr, "bench_band_solve_prod: %s: %s\n", case_name[c],
                            gmm_error_message());
                    return 1;
                }
                reps++;
                c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            } while (c1 - c0 < 0.2);
            double wall = (clock_s(CLOCK_MONOTONIC) - w0) / (double)reps;
            double cpu = (c1 - c0) / (double)reps;
            per_row[c][a] = 1e9 * cpu / (double)n;
            printf("%-26s n %8zu  %10.3f ms/call  %7.2f ns/row\n", case_name[c], n, 1e3 * cpu,
                   per_row[c][a]);
            if (out)
                fprintf(out, "%s,%zu,%zu,gmm,%.6g\n", case_name[c], n, l, 1e3 * wall);
        }
        gmm_band_free(d.L);
        gmm_band_free(d.Lbar);
        gmm_band_free(d.B);
        gmm_band_free(d.Bbar);
        gmm_band_free(d.X);
        gmm_band_free(d.Xbar);
        gmm_band_free(d.S);
        gmm_band_free(d.Sbar);
        free(d.x);
        free(d.y);
        free(d.s);
        free(d.work);
    }
    printf("time per row, largest n / smallest n (1 = linear):\n");
    for (int c = 0; c < NCASE; c++)
        printf("  %-26s %.2f\n", case_name[c], per_row[c][nn - 1] / per_row[c][0]);
    if (out)
        fclose(out);
    return 0;
}
