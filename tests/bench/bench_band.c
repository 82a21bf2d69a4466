/* bench_band.c -- the band module's Cholesky against LAPACK's dpbtrf
 * (OpenBLAS) and GSL's banded Cholesky, each reverse mode against its forward
 * operator, the triangular solves with L and L^T against OpenBLAS's dtbsv,
 * and the inverse subset (selinv) against the Cholesky.  Both sides
 * of each comparison work in place on a restored copy: gmm_band_chol_decomp
 * is called with L == Q, as dpbtrf overwrites its input.
 *
 * Grid: n in {1e4, 1e5, 1e6} x l in {1, 3, 11, 32, 117} (a cell that cannot
 * be allocated is skipped and says so).  Each (operator, implementation) is
 * timed over a few repetitions, the implementations taking turns, and the
 * MEDIAN is reported, in milliseconds of CPU time of the calling thread
 * (CLOCK_THREAD_CPUTIME_ID): OpenBLAS is held to one thread, so this is the
 * whole cost, and time the thread spends descheduled on a shared machine is
 * not counted (cache and memory-bandwidth contention from other processes
 * still is: on a loaded machine trust the ratios more than absolute times).
 * Inputs are restored before every repetition, outside the timed region, and
 * every factor is compared with gmm's (a WARNING line if they differ).
 *
 *   BENCH_QUICK=1   n in {1e4, 1e5} and 3 repetitions (well under a minute)
 *   BENCH_CSV=FILE  also append rows "op,n,l,impl,ms" (header when FILE is new;
 *                   ms: the median thread CPU time printed in the table)
 *   BENCH_OPS=TEXT  only the operators whose name contains TEXT (e.g.
 *                   tri_solve)
 *
 * Adding an operator: write a prepare (untimed) and a run (timed) function
 * and add one line to `rows` below; `base` names the row a ratio is taken
 * against (a reverse mode against its forward). */
#include <gsl/gsl_cblas.h> /* OpenBLAS provides the symbols; its own cblas.h clashes with GSL's */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmm/band.h"

/* LAPACK (in -lopenblas) and OpenBLAS's own controls. */
void dpbtrf_(const char *uplo, const int *n, const int *kd, double *ab, const int *ldab,
             int *info);
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
extern void openblas_set_num_threads(int);

/* ---- the data one (n, l) cell works on -------------------------------------------- */

typedef struct {
    size_t n, l;
    gmm_band *Q;    /* SPD input, never modified */
    gmm_band *A, *B; /* scratch: a copy of Q factored in place, adjoints */
    gmm_band *L;    /* chol(Q), kept for the reverse modes and the solves */
    gmm_band *S;    /* selinv(L), kept for selinv_rev */
    double *x, *s, *sbar, *vbar, *work; /* vectors of length n */
} cell;

static unsigned long long rng_state = 12345;
static double uniform(void) /* splitmix64, in [0, 1) */
{
    unsigned long long z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Random symmetric band, diagonally dominant: off-diagonals U(-1, 1), the
 * diagonal 2 l + 1. */
static void fill_spd(gmm_band *Q)
{
    size_t n = Q->n, l = Q->kl;
    for (size_t j = 0; j < n; j++) {
        double *c = gmm_band_col(Q, j);
        c[j] = 2.0 * (double)l + 1.0;
        for (size_t i = j + 1; i <= j + l && i < n; i++)
            c[i] = 2.0 * uniform() - 1.0;
    }
}

/* A cheap deterministic adjoint: the values do not change the work done. */
static void fill_adjoint(gmm_band *B)
{
    size_t m = B->ld * B->n;
    for (size_t k = 0; k < m; k++)
        B->data[k] = 0.1 * (double)(k % 7) - 0.3;
}

static void copy_data(gmm_band *dst, const gmm_band *src)
{
    memcpy(dst->data, src->data, src->ld * src->n * sizeof(double));
}

/* ---- operators: prepare (untimed) and run (timed) ----------------------------------------- */

static void prep_factor(cell *c)
{
    copy_data(c->A, c->Q);
    gmm_band_set_kind(c->A, GMM_BAND_SYMMETRIC);
}

static int run_chol_gmm(cell *c) { return gmm_band_chol_decomp(c->A, c->A) != GMM_OK; }

static int run_chol_dpbtrf(cell *c)
{
    int n = (int)c->n, kd = (int)c->l, ld = (int)c->A->ld, info = 0;
    dpbtrf_("L", &n, &kd, c->A->data, &ld, &info);
    return info != 0;
}

/* GSL's symmetric band format is an n x (l+1) row-major matrix whose row i
 * holds A(i,i), A(i+1,i), ..., A(i+l,i): the same memory as our band. */
static int run_chol_gsl(cell *c)
{
    gsl_matrix_view m = gsl_matrix_view_array(c->A->data, c->n, c->A->ld);
    return gsl_linalg_cholesky_band_decomp(&m.matrix) != GSL_SUCCESS;
}

static void prep_adjoint(cell *c)
{
    fill_adjoint(c->A);
    gmm_band_set_kind(c->A, GMM_BAND_LOWER);
}

static int run_chol_rev_gmm(cell *c) { return gmm_band_chol_decomp_rev(c->L, c->A, c->A) != 0; }

static void prep_vec(cell *c)
{
    for (size_t i = 0; i < c->n; i++)
        c->s[i] = c->x[i];
}

static int run_solve_gmm(cell *c) { return gmm_band_tri_solve_vec(c->L, GMM_TRANS, c->s) != 0; }

static int run_solve_dtbsv(cell *c)
{
    cblas_dtbsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (int)c->n, (int)c->l,
                c->L->data, (int)c->L->ld, c->s, 1);
    return 0;
}

static int run_solve_n_gmm(cell *c)
{
    return gmm_band_tri_solve_vec(c->L, GMM_NOTRANS, c->s) != 0;
}

static int run_solve_n_dtbsv(cell *c)
{
    cblas_dtbsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)c->n, (int)c->l,
                c->L->data, (int)c->L->ld, c->s, 1);
    return 0;
}

static void prep_solve_rev(cell *c)
{
    fill_adjoint(c->B);
    gmm_band_set_kind(c->B, GMM_BAND_LOWER);
    memset(c->vbar, 0, c->n * sizeof(double));
}

static int run_solve_rev_gmm(cell *c)
{
    return gmm_band_tri_solve_vec_rev(c->L, GMM_TRANS, c->s, c->sbar, c->vbar, c->B, c->work) !=
           GMM_OK;
}

static int run_solve_n_rev_gmm(cell *c)
{
    return gmm_band_tri_solve_vec_rev(c->L, GMM_NOTRANS, c->s, c->sbar, c->vbar, c->B,
                                      c->work) != GMM_OK;
}

/* S = the band of (L L^T)^{-1}, and its reverse mode (Sbar in A, destroyed;
 * Lbar in B). */
static void prep_selinv(cell *c) { (void)c; }

static int run_selinv_gmm(cell *c) { return gmm_band_chol_selinv(c->L, c->S) != GMM_OK; }

static void prep_selinv_rev(cell *c)
{
    fill_adjoint(c->A);
    gmm_band_set_kind(c->A, GMM_BAND_SYMMETRIC);
    memset(c->B->data, 0, c->B->ld * c->n * sizeof(double));
    gmm_band_set_kind(c->B, GMM_BAND_LOWER);
}

static int run_selinv_rev_gmm(cell *c)
{
    return gmm_band_chol_selinv_rev(c->L, c->S, c->A, c->B) != GMM_OK;
}

typedef struct {
    const char *op, *impl, *base; /* base: op whose gmm time this row is divided by */
    void (*prepare)(cell *);
    int (*run)(cell *);
} bench_row;

static const bench_row rows[] = {
    {"chol", "gmm", NULL, prep_factor, run_chol_gmm},
    {"chol", "openblas", NULL, prep_factor, run_chol_dpbtrf},
    {"chol", "gsl", NULL, prep_factor, run_chol_gsl},
    {"chol_rev", "gmm", "chol", prep_adjoint, run_chol_rev_gmm},
    {"tri_solve_vec(L^T)", "gmm", NULL, prep_vec, run_solve_gmm},
    {"tri_solve_vec(L^T)", "openblas", NULL, prep_vec, run_solve_dtbsv},
    {"tri_solve_vec_rev", "gmm", "tri_solve_vec(L^T)", prep_solve_rev, run_solve_rev_gmm},
    {"tri_solve_vec(L)", "gmm", NULL, prep_vec, run_solve_n_gmm},
    {"tri_solve_vec(L)", "openblas", NULL, prep_vec, run_solve_n_dtbsv},
    {"tri_solve_vec_rev(L)", "gmm", "tri_solve_vec(L)", prep_solve_rev, run_solve_n_rev_gmm},
    {"selinv", "gmm", "chol", prep_selinv, run_selinv_gmm},
    {"selinv_rev", "gmm", "selinv", prep_selinv_rev, run_selinv_rev_gmm},
};
#define NROWS (sizeof rows / sizeof *rows)

/* ---- timing ------------------------------------------------------------------------------ */

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double factor_diff(const cell *c);

static double median(double *t, int k)
{
    qsort(t, (size_t)k, sizeof *t, cmp_double);
    return k % 2 ? t[k / 2] : 0.5 * (t[k / 2 - 1] + t[k / 2]);
}

/* ms[r] = median milliseconds of row r over `reps` runs.  The rows take turns
 * (run 1 of every row, then run 2, ...), so a change of load on the machine
 * hits all of them alike; a row stops repeating once its runs took 15 s, so a
 * slow baseline does not hold up the grid.  ms[r] < 0: the row failed. */
static const char *only_ops; /* BENCH_OPS */

static void time_cell(cell *c, int reps, double *ms)
{
    double t[NROWS][16], total[NROWS] = {0};
    int k[NROWS] = {0}, failed[NROWS] = {0};
    for (int rep = 0; rep < reps && rep < 16; rep++)
        for (size_t r = 0; r < NROWS; r++) {
            if (failed[r] || total[r] > 15e3 || (only_ops && !strstr(rows[r].op, only_ops)))
                continue;
            rows[r].prepare(c);
            double t0 = cpu_now();
            if (rows[r].run(c)) {
                fprintf(stderr, "bench_band: %s/%s failed at n %zu l %zu: %s\n", rows[r].op,
                        rows[r].impl, c->n, c->l, gmm_error_message());
                failed[r] = 1;
                continue;
            }
            t[r][k[r]] = 1e3 * (cpu_now() - t0);
            total[r] += t[r][k[r]++];
            if (rows[r].run == run_chol_dpbtrf || rows[r].run == run_chol_gsl) {
                double d = factor_diff(c);
                if (!(d <= 1e-10))
                    printf("WARNING: %s/%s differs from gmm by %g (n %zu l %zu)\n", rows[r].op,
                           rows[r].impl, d, c->n, c->l);
            }
        }
    for (size_t r = 0; r < NROWS; r++)
        ms[r] = failed[r] || k[r] == 0 ? -1.0 : median(t[r], k[r]);
}

/* Largest |A - L| over the stored slots, relative to max |L|: the
 * implementations must agree before their times mean anything. */
static double factor_diff(const cell *c)
{
    double d = 0.0, s = 1.0;
    for (size_t j = 0; j < c->n; j++) {
        const double *a = gmm_band_col(c->A, j), *b = gmm_band_col(c->L, j);
        for (size_t i = j; i <= j + c->l && i < c->n; i++) {
            d = fmax(d, fabs(a[i] - b[i]));
            s = fmax(s, fabs(b[i]));
        }
    }
    return d / s;
}

static void free_cell(cell *c)
{
    gmm_band_free(c->Q);
    gmm_band_free(c->A);
    gmm_band_free(c->B);
    gmm_band_free(c->L);
    gmm_band_free(c->S);
    free(c->x);
    free(c->s);
    free(c->sbar);
    free(c->vbar);
    free(c->work);
}

static int alloc_cell(cell *c, size_t n, size_t l)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->l = l;
    c->Q = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    c->A = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    c->B = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    c->L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    c->S = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    c->x = malloc(n * sizeof(double));
    c->s = malloc(n * sizeof(double));
    c->sbar = malloc(n * sizeof(double));
    c->vbar = malloc(n * sizeof(double));
    c->work = malloc(n * sizeof(double));
    if (!c->Q || !c->A || !c->B || !c->L || !c->S || !c->x || !c->s || !c->sbar || !c->vbar || !c->work) {
        free_cell(c);
        return 0;
    }
    fill_spd(c->Q);
    for (size_t i = 0; i < n; i++) {
        c->x[i] = uniform() - 0.5;
        c->sbar[i] = uniform() - 0.5;
    }
    return gmm_band_chol_decomp(c->Q, c->L) == GMM_OK &&
           gmm_band_chol_selinv(c->L, c->S) == GMM_OK;
}

int main(void)
{
    const char *quick = getenv("BENCH_QUICK"), *csv = getenv("BENCH_CSV");
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    only_ops = getenv("BENCH_OPS");
    if (only_ops && !*only_ops)
        only_ops = NULL;
    int q = quick && *quick && *quick != '0';
    const size_t ns[] = {10000, 100000, 1000000}, ls[] = {1, 3, 11, 32, 117};
    size_t nn = q ? 2 : 3, nl = sizeof ls / sizeof *ls;
    int reps = q ? 3 : 5;

    gsl_set_error_handler_off();
    openblas_set_num_threads(1);
    printf("bench_band: OpenBLAS core %s, config %s\n", openblas_get_corename(),
           openblas_get_config());
    printf("bench_band: OPENBLAS_CORETYPE %s; OpenBLAS forced to 1 thread\n",
           coretype ? coretype : "(not set)");
    printf("bench_band: median of %d runs, ms of thread CPU time%s\n", reps,
           q ? " (BENCH_QUICK)" : "");

    FILE *out = NULL;
    if (csv && *csv) {
        out = fopen(csv, "a");
        if (!out) {
            fprintf(stderr, "bench_band: cannot open %s\n", csv);
            return 1;
        }
        if (fseek(out, 0, SEEK_END) == 0 && ftell(out) == 0)
            fprintf(out, "op,n,l,impl,ms\n");
    }

    printf("\n%-20s %8s %4s %10s %10s %10s %9s %9s %9s\n", "op", "n", "l", "gmm", "openblas",
           "gsl", "blas/gmm", "gsl/gmm", "/base");
    for (size_t a = 0; a < nn; a++)
        for (size_t b = 0; b < nl; b++) {
            size_t n = ns[a], l = ls[b];
            cell c;
            if (!alloc_cell(&c, n, l)) {
                printf("%-20s %8zu %4zu  skipped: cannot allocate or factor\n", "*", n, l);
                continue;
            }
            double ms[NROWS];
            time_cell(&c, reps, ms);
            for (size_t r = 0; r < NROWS; r++)
                if (out && ms[r] >= 0)
                    fprintf(out, "%s,%zu,%zu,%s,%.6g\n", rows[r].op, n, l, rows[r].impl, ms[r]);
            /* One printed line per op: its implementations side by side. */
            for (size_t r = 0; r < NROWS; r++) {
                if ((r > 0 && strcmp(rows[r].op, rows[r - 1].op) == 0) ||
                    (only_ops && !strstr(rows[r].op, only_ops)))
                    continue;
                double t[3] = {-1, -1, -1}, fwd = -1;
                const char *impls[3] = {"gmm", "openblas", "gsl"};
                for (size_t k = r; k < NROWS && strcmp(rows[k].op, rows[r].op) == 0; k++)
                    for (int m = 0; m < 3; m++)
                        if (strcmp(rows[k].impl, impls[m]) == 0)
                            t[m] = ms[k];
                if (rows[r].base)
                    for (size_t k = 0; k < NROWS; k++)
                        if (strcmp(rows[k].op, rows[r].base) == 0 &&
                            strcmp(rows[k].impl, "gmm") == 0)
                            fwd = ms[k];
                printf("%-20s %8zu %4zu", rows[r].op, n, l);
                for (int m = 0; m < 3; m++)
                    t[m] >= 0 ? printf(" %10.3f", t[m]) : printf(" %10s", "-");
                for (int m = 1; m < 3; m++)
                    t[m] >= 0 && t[0] > 0 ? printf(" %8.2fx", t[m] / t[0]) : printf(" %9s", "");
                fwd > 0 && t[0] >= 0 ? printf(" %8.2fx", t[0] / fwd) : printf(" %9s", "");
                printf("\n");
            }
            fflush(stdout);
            free_cell(&c);
        }
    printf("\nblas/gmm, gsl/gmm: speed-up of gmm over dpbtrf/dtbsv and GSL (> 1: gmm faster);\n"
           "/base: gmm time over that of the op it builds on: chol_rev/chol,\n"
           "tri_solve_vec_rev/tri_solve_vec (L^T and L), selinv/chol, selinv_rev/selinv.\n");
    if (out)
        fclose(out);
    return 0;
}
