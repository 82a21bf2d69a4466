/* test_band_qr.c -- the square-root factorisation (band.h section 6): the
 * factor folded from the rows of M against GSL's dense Cholesky of M^T M,
 * in sorted and shuffled row order, every bandwidth; errors; the reason it
 * exists -- accuracy where forming M^T M loses it; and the band reversal
 * J B J the square-root form of the marginal likelihood works in. */
#include <check.h>
#include <float.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/band.h"
#include "support/testutil.h"

typedef struct {
    size_t j0, w;
    double v[64];
} qrow;

/* Rows for an n-column M with bandwidth kl: one row starting at every column
 * (leading entry >= 0.5 in magnitude, so M has full column rank), plus n/2
 * extra random rows; widths random in 1 .. min(kl + 1, n - j0). */
static size_t make_rows(tu_rng *r, size_t n, size_t kl, qrow *rows)
{
    size_t nr = 0;
    for (size_t j = 0; j < n + n / 2; j++) {
        qrow *q = &rows[nr++];
        q->j0 = j < n ? j : (size_t)(tu_uniform(r) * (double)n);
        size_t wmax = kl + 1 < n - q->j0 ? kl + 1 : n - q->j0;
        q->w = 1 + (size_t)(tu_uniform(r) * (double)wmax);
        for (size_t s = 0; s < q->w; s++)
            q->v[s] = tu_normal(r);
        if (j < n)
            q->v[0] = (q->v[0] < 0 ? -0.5 : 0.5) + q->v[0];
    }
    return nr;
}

static int cmp_j0(const void *a, const void *b)
{
    const qrow *x = a, *y = b;
    return (x->j0 > y->j0) - (x->j0 < y->j0);
}

/* Dense lower Cholesky factor (column-major) of sum_rows v v^T, by GSL. */
static double *dense_factor(size_t n, const qrow *rows, size_t nr)
{
    gsl_matrix *P = gsl_matrix_calloc(n, n);
    for (size_t k = 0; k < nr; k++)
        for (size_t a = 0; a < rows[k].w; a++)
            for (size_t b = 0; b < rows[k].w; b++)
                *gsl_matrix_ptr(P, rows[k].j0 + a, rows[k].j0 + b) += rows[k].v[a] * rows[k].v[b];
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(P), GSL_SUCCESS);
    double *D = calloc(n * n, sizeof *D);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++)
            D[j * n + i] = gsl_matrix_get(P, i, j);
    gsl_matrix_free(P);
    return D;
}

START_TEST(test_rows_vs_dense)
{
    static const size_t ns[] = {1, 2, 3, 10, 57};
    tu_rng r;
    tu_rng_seed(&r, 4101);
    qrow *rows = malloc(200 * sizeof *rows);
    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
        size_t n = ns[in];
        for (size_t kl = 0; kl <= n + 1 && kl < 63; kl += (kl < 12 ? 1 : 9)) {
            for (int shuffled = 0; shuffled < 2; shuffled++) {
                size_t nr = make_rows(&r, n, kl, rows);
                if (!shuffled)
                    qsort(rows, nr, sizeof *rows, cmp_j0);
                gmm_band *L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
                /* NaN beyond the 4 (kl + 1) slots the routine may use: a read
                 * past them would poison L */
                double work[256];
                for (size_t k = 0; k < 256; k++)
                    work[k] = NAN;
                for (size_t k = 0; k < nr; k++)
                    ck_assert_int_eq(gmm_band_chol_add_row(L, rows[k].j0, rows[k].w, rows[k].v,
                                                           (k % 2) ? work : NULL),
                                     GMM_OK);
                ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_OK);
                double *D = dense_factor(n, rows, nr);
                double e = tu_band_vs_dense(L, D);
                /* both are backward-stable factorisations of well-conditioned
                 * matrices: worst measured 2.3e-14 */
                ck_assert_msg(e < 1e-12, "n %zu kl %zu shuffled %d: %g", n, kl, shuffled, e);
                free(D);
                gmm_band_free(L);
            }
        }
    }
    free(rows);
}
END_TEST

START_TEST(test_rows_errors)
{
    gmm_band *L = gmm_band_alloc(5, 2, 0, GMM_BAND_LOWER);
    double v[4] = {1, 2, 3, 4};
    ck_assert_int_eq(gmm_band_chol_add_row(L, 0, 4, v, NULL), GMM_EDIM); /* wider than kl+1 */
    ck_assert_int_eq(gmm_band_chol_add_row(L, 3, 3, v, NULL), GMM_EDIM); /* past column n */
    v[1] = NAN;
    ck_assert_int_eq(gmm_band_chol_add_row(L, 0, 3, v, NULL), GMM_EDOM);
    ck_assert_uint_eq(gmm_error_index(), 1);
    v[1] = 2;
    /* rows reach columns 0..3 only: column 4 is undetermined */
    ck_assert_int_eq(gmm_band_chol_add_row(L, 0, 3, v, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_add_row(L, 1, 3, v, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_add_row(L, 2, 2, v, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_add_row(L, 3, 1, v, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_ENOTPD);
    ck_assert_uint_eq(gmm_error_index(), 4);
    /* a row in the span of earlier ones adds nothing new: still singular */
    double u[2] = {0, 0};
    ck_assert_int_eq(gmm_band_chol_add_row(L, 3, 2, u, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_ENOTPD);
    ck_assert_int_eq(gmm_band_chol_add_row(L, 4, 1, v, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_OK);
    gmm_band *G = gmm_band_alloc(5, 2, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_band_chol_add_row(G, 0, 1, v, NULL), GMM_EDIM);
    gmm_band_free(G);
    gmm_band_free(L);
}
END_TEST

/* A banded Lauchli matrix: rows e_j + e_{j+1} (j < n-1) and delta e_j.
 * M^T M = T + delta^2 I with T the signless Laplacian of a path, whose
 * eigenvalues 2 + 2 cos(pi k/n), k = 1..n, include 0: log det is known in
 * closed form, and its smallest eigenvalue delta^2 drowns in the rounding of
 * the stored entries of M^T M (2 + delta^2).  The rows keep it. */
START_TEST(test_rows_accuracy_lauchli)
{
    size_t n = 60;
    double delta = 1e-6;
    double exact = log(delta * delta);
    for (size_t k = 1; k < n; k++)
        exact += log(2.0 + 2.0 * cos(M_PI * (double)k / (double)n) + delta * delta);
    gmm_band *L = gmm_band_alloc(n, 1, 0, GMM_BAND_LOWER);
    double one[2] = {1.0, 1.0}, dl = delta;
    for (size_t j = 0; j < n; j++) {
        if (j + 1 < n)
            ck_assert_int_eq(gmm_band_chol_add_row(L, j, 2, one, NULL), GMM_OK);
        ck_assert_int_eq(gmm_band_chol_add_row(L, j, 1, &dl, NULL), GMM_OK);
    }
    ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_OK);
    double e_rows = fabs(gmm_band_chol_logdet(L) - exact);
    /* the same matrix formed and factorised */
    gmm_band *P = gmm_band_alloc(n, 1, 0, GMM_BAND_SYMMETRIC);
    for (size_t j = 0; j < n; j++) {
        *gmm_band_ptr(P, j, j) = (j > 0) + (j + 1 < n) + delta * delta;
        if (j + 1 < n)
            *gmm_band_ptr(P, j + 1, j) = 1.0;
    }
    double e_normal = INFINITY;
    if (gmm_band_chol_decomp(P, P) == GMM_OK)
        e_normal = fabs(gmm_band_chol_logdet(P) - exact);
    /* eps cond(M) ~ 1e-16 * 2e6 vs eps cond(M^T M) ~ 1e-16 * 4e12; measured
     * 2.8e-14 from the rows, 8.9e-5 from the formed matrix */
    ck_assert_msg(e_rows < 1e-10, "rows: log det error %g", e_rows);
    ck_assert_msg(e_normal > 1e3 * e_rows, "rows %g vs normal equations %g", e_rows, e_normal);
    gmm_band_free(P);
    gmm_band_free(L);
}
END_TEST

/* J B J against the dense reversal, and its own inverse. */
START_TEST(test_reverse)
{
    tu_rng r;
    tu_rng_seed(&r, 4201);
    static const size_t ns[] = {1, 2, 3, 10, 57};
    for (size_t in = 0; in < 5; in++)
        for (size_t kl = 0; kl <= ns[in] + 1; kl += kl < 6 ? 1 : 13) {
            size_t n = ns[in];
            gmm_band *B = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
            tu_band_fill_random(B, &r);
            double *D = tu_band_to_dense(B), *R = malloc(n * n * sizeof *R);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++)
                    R[j * n + i] = D[(n - 1 - j) * n + (n - 1 - i)];
            ck_assert_int_eq(gmm_band_reverse(B), GMM_OK);
            ck_assert(tu_band_vs_dense(B, R) == 0.0);
            ck_assert_int_eq(gmm_band_reverse(B), GMM_OK);
            ck_assert(tu_band_vs_dense(B, D) == 0.0);
            free(D);
            free(R);
            gmm_band_free(B);
        }
    gmm_band *L = gmm_band_alloc(4, 1, 0, GMM_BAND_LOWER);
    ck_assert_int_eq(gmm_band_reverse(L), GMM_EDIM);
    gmm_band_free(L);
}
END_TEST

Suite *band_qr_suite(void)
{
    Suite *s = suite_create("band_qr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_rows_vs_dense);
    tcase_add_test(tc, test_rows_errors);
    tcase_add_test(tc, test_rows_accuracy_lauchli);
    tcase_add_test(tc, test_reverse);
    suite_add_tcase(s, tc);
    return s;
}
