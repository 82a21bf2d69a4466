/* test_band_qr.c -- the square-root factorisation (band.h section 6): the
 * factor folded from the rows of M, one at a time and in blocks, against
 * GSL's dense Cholesky of M^T M, in sorted and shuffled row order, every
 * bandwidth; rows travelling the whole band; errors; and the reason it
 * exists -- accuracy where forming M^T M loses it. */
#include <check.h>
#include <float.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
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

/* Rows (kl + 1 entries from j0, zero-padded) copied into a block for
 * gmm_band_chol_add_rows, scaled by sc. */
static void to_block(const qrow *rows, size_t m, size_t kl, double sc, size_t *first, double *V)
{
    for (size_t i = 0; i < m; i++) {
        first[i] = rows[i].j0;
        for (size_t s = 0; s <= kl; s++)
            V[i * (kl + 1) + s] = s < rows[i].w ? sc * rows[i].v[s] : 0.0;
    }
}

/* Blocks of 1..9 rows against the dense factor: in order of first column,
 * blocks in shuffled order (each block sorted), and both with the rows
 * scaled by 2^-540 and 2^500 -- squares out of range, the reflections'
 * scaled path; the factor scales exactly, so the tolerance is the same. */
START_TEST(test_rows_block_vs_dense)
{
    static const size_t ns[] = {1, 2, 3, 10, 57};
    static const double scales[] = {1.0, 0x1p-540, 0x1p500};
    tu_rng r;
    tu_rng_seed(&r, 4301);
    qrow *rows = malloc(200 * sizeof *rows);
    size_t *first = malloc(200 * sizeof *first);
    double *V = malloc(200 * 64 * sizeof *V);
    double *work = malloc((gmm_band_chol_add_rows_work(9, 62) + 16) * sizeof *work);
    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
        size_t n = ns[in];
        for (size_t kl = 0; kl <= n + 1 && kl < 63; kl += (kl < 12 ? 1 : 9)) {
            for (int mode = 0; mode < 6; mode++) {
                int shuffled = mode % 2;
                double sc = scales[mode / 2];
                size_t nr = make_rows(&r, n, kl, rows);
                qsort(rows, nr, sizeof *rows, cmp_j0);
                size_t klc = kl < n - 1 ? kl : n - 1; /* the band's clamped width */
                /* block boundaries, then (shuffled) the blocks in random order */
                size_t nb = 0, bstart[201];
                for (size_t k = 0; k < nr; k += 1 + (size_t)(tu_uniform(&r) * 9.0))
                    bstart[nb++] = k;
                bstart[nb] = nr;
                size_t order[201];
                for (size_t b = 0; b < nb; b++)
                    order[b] = b;
                for (size_t b = nb; shuffled && b > 1; b--) {
                    size_t c = (size_t)(tu_uniform(&r) * (double)b), t = order[b - 1];
                    order[b - 1] = order[c];
                    order[c] = t;
                }
                gmm_band *L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
                for (size_t b = 0; b < nb; b++) {
                    size_t k0 = bstart[order[b]], m = bstart[order[b] + 1] - k0;
                    to_block(rows + k0, m, klc, sc, first, V);
                    /* NaN in the workspace and past it: reading a slot before
                     * writing it, or beyond the stated size, poisons L */
                    for (size_t k = 0; k < gmm_band_chol_add_rows_work(m, klc) + 16; k++)
                        work[k] = NAN;
                    ck_assert_int_eq(gmm_band_chol_add_rows(L, m, first, V, klc + 1,
                                                            (b % 2) ? work : NULL),
                                     GMM_OK);
                }
                ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_OK);
                for (size_t j = 0; j < n; j++)
                    for (size_t i = j; i < n && i <= j + klc; i++)
                        *gmm_band_ptr(L, i, j) /= sc;
                double *D = dense_factor(n, rows, nr);
                double e = tu_band_vs_dense(L, D);
                ck_assert_msg(e < 1e-12, "n %zu kl %zu mode %d: %g", n, kl, mode, e);
                free(D);
                gmm_band_free(L);
            }
        }
    }
    free(work);
    free(V);
    free(first);
    free(rows);
}
END_TEST

/* A block against a factor it barely changes (|x| ~ 1e-200 against a unit
 * pivot: dropped, far below rounding), a zero row (discarded) and one row
 * over columns 1..2, which leaves column 2 undetermined; the result against
 * the Givens path. */
START_TEST(test_rows_block_edge)
{
    gmm_band *L = gmm_band_alloc(3, 1, 0, GMM_BAND_LOWER);
    gmm_band *G = gmm_band_alloc(3, 1, 0, GMM_BAND_LOWER);
    double one = 1.0, V[6] = {1e-200, 0.0, 1.0, 1.0, 0.0, 0.0};
    size_t first[3] = {0, 1, 1};
    ck_assert_int_eq(gmm_band_chol_add_row(L, 0, 1, &one, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 3, first, V, 2, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_add_row(G, 0, 1, &one, NULL), GMM_OK);
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(gmm_band_chol_add_row(G, first[i], 2, V + 2 * i, NULL), GMM_OK);
    for (size_t j = 0; j < 3; j++)
        for (size_t i = j; i < 3 && i <= j + 1; i++)
            ck_assert_msg(fabs(*gmm_band_ptr(L, i, j) - *gmm_band_ptr(G, i, j)) <= 1e-15,
                          "(%zu,%zu): %g vs %g", i, j, *gmm_band_ptr(L, i, j),
                          *gmm_band_ptr(G, i, j));
    ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_ENOTPD);
    ck_assert_uint_eq(gmm_error_index(), 2);
    /* L = [1e-200; 1e-200] in column 0, then a row [1, 0]: it is swapped in
     * as the pivot (row pivoting), the old column of L drops to 1e-200 of
     * it in column 0 but must carry its entry in column 1 on: L(1,1) =
     * 1e-200 (exactly: P = [1, 1e-400; 1e-400, 1e-400]). */
    gmm_band_set_zero(L);
    double tiny[2] = {1e-200, 1e-200}, unit[2] = {1.0, 0.0};
    size_t f0 = 0;
    ck_assert_int_eq(gmm_band_chol_add_row(L, 0, 2, tiny, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 1, &f0, unit, 2, NULL), GMM_OK);
    ck_assert(*gmm_band_ptr(L, 0, 0) == 1.0 && fabs(*gmm_band_ptr(L, 1, 0)) < 1e-300);
    ck_assert_msg(fabs(*gmm_band_ptr(L, 1, 1) - 1e-200) <= 1e-215, "%g",
                  *gmm_band_ptr(L, 1, 1));
    gmm_band_free(G);
    gmm_band_free(L);
}
END_TEST

START_TEST(test_rows_block_errors)
{
    gmm_band *L = gmm_band_alloc(5, 2, 0, GMM_BAND_LOWER);
    double V[9] = {1, 2, 3, 1, 2, 3, 1, 2, 3};
    size_t first[3] = {0, 1, 2};
    ck_assert_int_eq(gmm_band_chol_add_rows(NULL, 1, first, V, 3, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 1, NULL, V, 3, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 0, NULL, NULL, 0, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 3, first, V, 2, NULL), GMM_EDIM); /* ldv */
    first[1] = 2;
    first[2] = 1;
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 3, first, V, 3, NULL), GMM_EDIM); /* order */
    ck_assert_uint_eq(gmm_error_index(), 2);
    first[1] = 1;
    first[2] = 5;
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 3, first, V, 3, NULL), GMM_EDIM); /* past n */
    ck_assert_uint_eq(gmm_error_index(), 2);
    first[2] = 3; /* columns 3..5: the last entry is past column 4 */
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 3, first, V, 3, NULL), GMM_EDIM);
    ck_assert_uint_eq(gmm_error_index(), 2);
    V[8] = 0.0;
    V[4] = INFINITY;
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 3, first, V, 3, NULL), GMM_EDOM);
    ck_assert_uint_eq(gmm_error_index(), 1);
    for (size_t j = 0; j < 5; j++) /* nothing folded by the failed calls */
        ck_assert(*gmm_band_ptr(L, j, j) == 0.0);
    V[4] = 2.0;
    /* rows on columns 0..2, 1..3, 3..4: nothing is left for column 2 */
    ck_assert_int_eq(gmm_band_chol_add_rows(L, 3, first, V, 3, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_ENOTPD);
    ck_assert_uint_eq(gmm_error_index(), 2);
    gmm_band *G = gmm_band_alloc(5, 2, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_band_chol_add_rows(G, 1, first, V, 3, NULL), GMM_EDIM);
    gmm_band_free(G);
    gmm_band_free(L);
}
END_TEST

/* A row (or a block) that has to travel the whole band: every row of the
 * factor is filled, so the rotations or reflections run to the last column,
 * sliding their window many times. */
START_TEST(test_rows_travel)
{
    tu_rng r;
    tu_rng_seed(&r, 4401);
    for (size_t kl = 0; kl < 4; kl++)
        for (int block = 0; block < 2; block++) {
            size_t n = 40, nr = 0;
            qrow *rows = malloc((n + 3) * sizeof *rows);
            for (size_t j = 0; j < n; j++, nr++) {
                rows[nr].j0 = j;
                rows[nr].w = kl + 1 < n - j ? kl + 1 : n - j;
                for (size_t s = 0; s < rows[nr].w; s++)
                    rows[nr].v[s] = (s == 0 ? 2.0 : 0.0) + tu_normal(&r);
            }
            for (size_t k = 0; k < 3; k++, nr++) { /* the travellers, at columns 0, 0, 1 */
                rows[nr].j0 = k / 2;
                rows[nr].w = kl + 1;
                for (size_t s = 0; s <= kl; s++)
                    rows[nr].v[s] = tu_normal(&r);
            }
            gmm_band *L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
            size_t first[3];
            double V[3 * 4];
            for (size_t k = 0; k < n; k++)
                ck_assert_int_eq(gmm_band_chol_add_row(L, rows[k].j0, rows[k].w, rows[k].v, NULL),
                                 GMM_OK);
            if (block) {
                to_block(rows + n, 3, kl, 1.0, first, V);
                ck_assert_int_eq(gmm_band_chol_add_rows(L, 3, first, V, kl + 1, NULL), GMM_OK);
            } else {
                for (size_t k = n; k < nr; k++)
                    ck_assert_int_eq(gmm_band_chol_add_row(L, rows[k].j0, rows[k].w, rows[k].v,
                                                           NULL),
                                     GMM_OK);
            }
            double *D = dense_factor(n, rows, nr);
            double e = tu_band_vs_dense(L, D);
            ck_assert_msg(e < 1e-12, "kl %zu block %d: %g", kl, block, e);
            free(D);
            gmm_band_free(L);
            free(rows);
        }
}
END_TEST

/* Why the blocks pivot rows: M = [1e8 D; I], D the (n-1) x n difference
 * matrix.  M^T M = 1e16 D^T D + I has log det sum_k log(1 + 1e16 lambda_k),
 * lambda_k = 2 - 2 cos(pi k / n) the path Laplacian's eigenvalues, and the
 * k = 0 term (log 1 = 0) is carried by the unit rows alone: a method whose
 * rounding is relative to the large rows (a reflection that swaps a large
 * row into a small pivot, eps 1e16 ~ 1 in M^T M) loses it.  Small rows
 * first, then the large ones in blocks of 3; and both mixed in blocks. */
START_TEST(test_rows_block_graded)
{
    size_t n = 30;
    double exact = 0.0;
    for (size_t k = 1; k < n; k++)
        exact += log(1.0 + 1e16 * (2.0 - 2.0 * cos(M_PI * (double)k / (double)n)));
    for (int mixed = 0; mixed < 2; mixed++) {
        gmm_band *L = gmm_band_alloc(n, 1, 0, GMM_BAND_LOWER);
        size_t first[6];
        double V[12];
        for (size_t j = 0; j < n && !mixed; j++) {
            first[0] = j;
            V[0] = 1.0;
            V[1] = 0.0;
            ck_assert_int_eq(gmm_band_chol_add_rows(L, 1, first, V, 2, NULL), GMM_OK);
        }
        for (size_t j0 = 0; j0 < n; j0 += 3) {
            size_t m = 0;
            for (size_t j = j0; j < j0 + 3 && j < n; j++) {
                if (mixed) {
                    first[m] = j;
                    V[2 * m] = 1.0;
                    V[2 * m++ + 1] = 0.0;
                }
                if (j + 1 < n) {
                    first[m] = j;
                    V[2 * m] = 1e8;
                    V[2 * m++ + 1] = -1e8;
                }
            }
            ck_assert_int_eq(gmm_band_chol_add_rows(L, m, first, V, 2, NULL), GMM_OK);
        }
        ck_assert_int_eq(gmm_band_chol_rows_check(L), GMM_OK);
        double e = fabs(gmm_band_chol_logdet(L) - exact);
        /* measured 4.5e-13 (a few ulps of 1072); without the pivoting 5e-8 */
        ck_assert_msg(e < 1e-13 * exact, "mixed %d: log det error %g of %g", mixed, e, exact);
        gmm_band_free(L);
    }
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

/* ---- the tape: the fold's map and the rows' posterior moments ------------------- */

/* Rows sorted by first column, cut into blocks of 1..9 (bstart, nb). */
static size_t cut_blocks(tu_rng *r, size_t nr, size_t *bstart)
{
    size_t nb = 0;
    for (size_t k = 0; k < nr; k += 1 + (size_t)(tu_uniform(r) * 9.0))
        bstart[nb++] = k;
    bstart[nb] = nr;
    return nb;
}

/* Each recorded block, unfolded on lanes that hold the coefficients of the
 * rows over all n columns, turns R's rows after the block (L's columns)
 * and its rows reduced to zero back into R's rows before it and the rows
 * it was given: the recorded map is the fold's, inverted, to rounding. */
START_TEST(test_rows_tape_unfold)
{
    static const size_t ns[] = {1, 3, 10, 57};
    tu_rng r;
    tu_rng_seed(&r, 4907);
    qrow *rows = malloc(200 * sizeof *rows);
    size_t *first = malloc(200 * sizeof *first), bstart[201];
    double *V = malloc(200 * 64 * sizeof *V);
    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
        size_t n = ns[in], lw = (n + 3) / 4 * 4;
        for (size_t kl = 0; kl < n + 1 && kl < 20; kl += (kl < 6 ? 1 : 7)) {
            size_t nr = make_rows(&r, n, kl, rows);
            qsort(rows, nr, sizeof *rows, cmp_j0);
            size_t klc = kl < n - 1 ? kl : n - 1, nb = cut_blocks(&r, nr, bstart);
            gmm_band *L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
            gmm_band *L0 = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
            gmm_band_tape tape = {0};
            double *S = malloc((n + 200) * lw * sizeof *S);
            for (size_t b = 0; b < nb; b++) {
                size_t k0 = bstart[b], m = bstart[b + 1] - k0, pos = tape.len;
                to_block(rows + k0, m, klc, 1.0, first, V);
                gmm_band_copy(L0, L);
                ck_assert_int_eq(gmm_band_chol_add_rows_tape(L, m, first, V, klc + 1, NULL,
                                                             &tape),
                                 GMM_OK);
                size_t c0, mb, cend, next, dest[10];
                ck_assert_int_eq(gmm_band_tape_block(&tape, pos, &c0, &mb, &cend, &next, dest),
                                 GMM_OK);
                ck_assert_uint_eq(c0, first[0]);
                ck_assert_uint_eq(mb, m);
                ck_assert_uint_eq(next, tape.len);
                size_t nR = cend - c0;
                memset(S, 0, (nR + m) * lw * sizeof *S);
                for (size_t j = c0; j < cend; j++)
                    for (size_t c = j; c < n && c <= j + klc; c++)
                        S[(j - c0) * lw + c] = gmm_band_get(L, c, j);
                for (size_t i = 0; i < m; i++)
                    for (size_t q = 0; q < m; q++)
                        ck_assert(dest[i] == SIZE_MAX || dest[i] != dest[q] || i == q);
                ck_assert_int_eq(gmm_band_chol_rows_unfold(&tape, pos, nR, S, lw, lw), GMM_OK);
                double e = 0.0, sc = 1.0;
                for (size_t j = c0; j < cend; j++)
                    for (size_t c = 0; c < n; c++) {
                        double want = c >= j && c <= j + klc ? gmm_band_get(L0, c, j) : 0.0;
                        sc = fmax(sc, fabs(want));
                        e = fmax(e, fabs(S[(j - c0) * lw + c] - want));
                    }
                for (size_t i = 0; i < m; i++)
                    for (size_t c = 0; c < n; c++) {
                        double want = c >= first[i] && c <= first[i] + klc
                                          ? V[i * (klc + 1) + c - first[i]]
                                          : 0.0;
                        sc = fmax(sc, fabs(want));
                        e = fmax(e, fabs(S[(nR + i) * lw + c] - want));
                    }
                /* measured <= 2e-15 (relative to the largest entry, ~3) */
                ck_assert_msg(e <= 1e-13 * sc, "n %zu kl %zu block %zu: %g", n, kl, b, e);
            }
            free(S);
            gmm_free(tape.data);
            gmm_band_free(L0);
            gmm_band_free(L);
        }
    }
    free(V);
    free(first);
    free(rows);
}
END_TEST

/* The dense posterior of rows M with R mu = z: Sigma + mu mu' = E[x x']
 * (n x n, row-major, long double) by plain loops (no BLAS: the same bits
 * under every OpenBLAS kernel). */
static long double *dense_second_moment(size_t n, const qrow *rows, size_t nr, const double *z)
{
    long double *P = calloc(n * n, sizeof *P), *X = calloc(n * n, sizeof *X);
    long double *mu = calloc(n, sizeof *mu);
    for (size_t k = 0; k < nr; k++)
        for (size_t a = 0; a < rows[k].w; a++)
            for (size_t b = 0; b < rows[k].w; b++)
                P[(rows[k].j0 + a) * n + rows[k].j0 + b] +=
                    (long double)rows[k].v[a] * rows[k].v[b];
    for (size_t j = 0; j < n; j++) { /* P = Lp Lp', in place (lower) */
        long double s = P[j * n + j];
        for (size_t k = 0; k < j; k++)
            s -= P[j * n + k] * P[j * n + k];
        ck_assert(s > 0);
        P[j * n + j] = sqrtl(s);
        for (size_t i = j + 1; i < n; i++) {
            long double t = P[i * n + j];
            for (size_t k = 0; k < j; k++)
                t -= P[i * n + k] * P[j * n + k];
            P[i * n + j] = t / P[j * n + j];
        }
    }
    for (size_t i = n; i-- > 0;) { /* mu = Lp^-T z */
        long double t = z[i];
        for (size_t k = i + 1; k < n; k++)
            t -= P[k * n + i] * mu[k];
        mu[i] = t / P[i * n + i];
    }
    for (size_t c = 0; c < n; c++) { /* X = P^-1, column by column */
        long double *col = calloc(n, sizeof *col);
        for (size_t i = 0; i < n; i++) {
            long double t = i == c;
            for (size_t k = 0; k < i; k++)
                t -= P[i * n + k] * col[k];
            col[i] = t / P[i * n + i];
        }
        for (size_t i = n; i-- > 0;) {
            long double t = col[i];
            for (size_t k = i + 1; k < n; k++)
                t -= P[k * n + i] * col[k];
            col[i] = t / P[i * n + i];
        }
        for (size_t i = 0; i < n; i++)
            X[i * n + c] = col[i] + mu[i] * mu[c];
        free(col);
    }
    free(mu);
    free(P);
    return X;
}

typedef struct {
    size_t n, kl, nb;
    const qrow *rows;
    const size_t *bstart;
    const long double *X;
    const double *diag; /* per block: L's diagonal before it (n) */
    size_t calls, nx;
    double err, scale;
} moments_check;

/* a' X b for two rows of the model (first column, width, entries). */
static long double quad(const moments_check *mc, const qrow *a, const qrow *b)
{
    long double t = 0;
    for (size_t p = 0; p < a->w; p++)
        for (size_t q = 0; q < b->w; q++)
            t += (long double)a->v[p] * mc->X[(a->j0 + p) * mc->n + b->j0 + q] * b->v[q];
    return t;
}

static gmm_status check_block(void *ctx, size_t block, const gmm_band_block_moments *bm)
{
    moments_check *mc = ctx;
    ck_assert_uint_eq(block, mc->calls); /* from the last to the first, counted back */
    mc->calls++;
    block = mc->nb - 1 - block;
    const qrow *rows = mc->rows + mc->bstart[block];
    ck_assert_uint_eq(bm->m, mc->bstart[block + 1] - mc->bstart[block]);
    ck_assert_uint_eq(bm->c0, rows[0].j0);
    for (size_t i = 0; i < bm->m; i++) {
        const double *a = bm->rows + i * bm->lw;
        for (size_t k = 0; k < bm->m; k++) {
            long double want = quad(mc, rows + i, rows + k) - (i == k);
            double got = gmm_band_moment(bm, a, bm->rows + k * bm->lw);
            mc->err = fmax(mc->err, fabs(got - (double)want));
            mc->scale = fmax(mc->scale, fabs((double)want));
        }
        /* x_J = F_J^-1 (R_J x): only as accurate as F_J is conditioned.
         * Random rows that run out within a block leave rows of R made of
         * rounding (diagonal ~1e-16) that J may include; a Markov chain's
         * state never (its rows determine it). */
        const double *dg = mc->diag + block * mc->n;
        double dmin = INFINITY, dmax = 0.0;
        for (size_t c = 0; c < bm->nj; c++) {
            dmin = fmin(dmin, fabs(dg[bm->c0 + c]));
            dmax = fmax(dmax, fabs(dg[bm->c0 + c]));
        }
        for (size_t c = 0; c < bm->nj && dmin > 1e-6 * dmax; c++) {
            qrow e = {bm->c0 + c, 1, {1.0}};
            mc->nx++;
            long double want = quad(mc, rows + i, &e);
            double got = gmm_band_moment(bm, a, bm->xj + c * bm->lw);
            mc->err = fmax(mc->err, fabs(got - (double)want));
            mc->scale = fmax(mc->scale, fabs((double)want));
        }
    }
    return GMM_OK;
}

/* The moments of every block's rows against the dense posterior, for rows
 * folded in blocks from L = 0 in order of first column: E[a a'] - I and
 * E[a x_J'] (J: the columns the block found filled); and a callback's
 * status stops the sweep. */
START_TEST(test_rows_moments_vs_dense)
{
    static const size_t ns[] = {1, 3, 10, 40};
    tu_rng r;
    tu_rng_seed(&r, 5011);
    qrow *rows = malloc(200 * sizeof *rows);
    size_t *first = malloc(200 * sizeof *first), bstart[201];
    double *V = malloc(200 * 64 * sizeof *V), *z = malloc(64 * sizeof *z);
    gmm_band_tape work = {0};
    size_t nxsum = 0;
    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
        size_t n = ns[in];
        for (size_t kl = 0; kl < n + 1 && kl < 14; kl += (kl < 4 ? 1 : 5)) {
            size_t nr = make_rows(&r, n, kl, rows);
            qsort(rows, nr, sizeof *rows, cmp_j0);
            size_t klc = kl < n - 1 ? kl : n - 1, nb = cut_blocks(&r, nr, bstart);
            gmm_band *L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
            gmm_band_tape tape = {0};
            double *diag = malloc(nb * n * sizeof *diag);
            for (size_t b = 0; b < nb; b++) {
                size_t k0 = bstart[b], m = bstart[b + 1] - k0;
                to_block(rows + k0, m, klc, 1.0, first, V);
                gmm_band_diag(L, diag + b * n);
                ck_assert_int_eq(gmm_band_chol_add_rows_tape(L, m, first, V, klc + 1, NULL,
                                                             &tape),
                                 GMM_OK);
            }
            for (size_t j = 0; j < n; j++)
                z[j] = 2.0 * tu_normal(&r);
            long double *X = dense_second_moment(n, rows, nr, z);
            moments_check mc = {n, klc, nb, rows, bstart, X, diag, 0, 0, 0.0, 1.0};
            gmm_status st = gmm_band_chol_rows_moments(&tape, z, n, check_block, &mc, &work);
            ck_assert_msg(st == GMM_OK, "n %zu kl %zu: %s", n, kl, gmm_error_message());
            ck_assert_uint_eq(mc.calls, nb);
            nxsum += mc.nx;
            if (getenv("GMM_TEST_REPORT"))
                fprintf(stderr, "rows moments n %zu kl %zu: %.2g of %.2g (%zu x entries)\n", n,
                        kl, mc.err, mc.scale, mc.nx);
            /* measured <= 2e-14 of the largest moment (up to ~1e2: condition
             * numbers of these random rows are modest) */
            ck_assert_msg(mc.err <= 1e-12 * mc.scale, "n %zu kl %zu: %g of %g", n, kl, mc.err,
                          mc.scale);
            free(X);
            free(diag);
            gmm_free(tape.data);
            gmm_band_free(L);
        }
    }
    ck_assert(nxsum > 200); /* the x moments were checked (measured: 308), not all skipped */
    ck_assert_int_eq(gmm_band_chol_rows_moments(NULL, z, 1, check_block, NULL, &work),
                     GMM_EINVAL);
    gmm_free(work.data);
    free(z);
    free(V);
    free(first);
    free(rows);
}
END_TEST

/* The lane products a state-space model's gradient sums
 * (gmm_band_moment_gram_blocks, gmm_band_lanes_mix_blocks) against plain
 * sums, every vector count of the kernels (1 .. 4, and the general path),
 * every tile shape: within the rounding bound of a sum of k products,
 * k eps sum |terms| (the order of the sums differs). */
START_TEST(test_lane_products)
{
    static const size_t lws[] = {4, 8, 12, 16, 20, 28};
    /* block partitions of 5 rows: one block of 5 (every tile shape: 2 x 2,
     * 2 x 1, 1 x 2, 1 x 1), blocks of 1, 3, 1, and of 2, 1, 2 */
    static const size_t parts[3][4] = {{0, 5}, {0, 1, 4, 5}, {0, 2, 3, 5}};
    static const size_t nparts[3] = {1, 3, 3};
    tu_rng r;
    tu_rng_seed(&r, 733);
    double *a = malloc(3 * 5 * 28 * sizeof *a), *b = malloc(3 * 5 * 28 * sizeof *b);
    double out[5 * 7], M[5 * 5], N[5 * 5], mix[5 * 28];
    for (size_t il = 0; il < sizeof lws / sizeof lws[0]; il++) {
        size_t lw = lws[il], stride = 5 * lw;
        for (size_t i = 0; i < 3 * stride; i++) {
            a[i] = tu_normal(&r);
            b[i] = tu_normal(&r);
        }
        gmm_band_block_moments bm = {0, 0, 0, lw, lw - 1 - (size_t)(tu_uniform(&r) * 3.0),
                                     NULL, NULL};
        for (size_t ip = 0; ip < 3; ip++) {
            const size_t *boff = parts[ip];
            size_t nblk = nparts[ip], blk[5];
            for (size_t k = 0; k < nblk; k++)
                for (size_t i = boff[k]; i < boff[k + 1]; i++)
                    blk[i] = k;
            for (size_t nt = 1; nt <= 3; nt += 2) {
                for (size_t k = 0; k < 5 * 7; k++)
                    out[k] = 1.0; /* added to on the blocks only; columns 5, 6 untouched */
                gmm_band_moment_gram_blocks(&bm, nblk, boff, a, b, stride, nt, out, 7);
                for (size_t i = 0; i < 5; i++)
                    for (size_t k = 0; k < 7; k++) {
                        double want = 1.0, bound = 0.0;
                        for (size_t t = 0; k < 5 && blk[i] == blk[k] && t < nt; t++) {
                            const double *ai = a + t * stride + i * lw;
                            const double *bk = b + t * stride + k * lw;
                            want += gmm_band_moment(&bm, ai, bk);
                            for (size_t l = 0; l < lw; l++)
                                bound += fabs(ai[l] * bk[l]);
                            bound += 2.0 * fabs(ai[bm.r] * bk[bm.r]);
                        }
                        bound = (double)(nt * lw + 4) * DBL_EPSILON * (bound + 1.0);
                        ck_assert_msg(fabs(out[i * 7 + k] - want) <= 2.0 * bound,
                                      "gram lw %zu partition %zu nt %zu (%zu, %zu): %.17g vs "
                                      "%.17g",
                                      lw, ip, nt, i, k, out[i * 7 + k], want);
                    }
            }
            for (int withn = 0; withn < 2; withn++) {
                for (size_t k = 0; k < 25; k++) {
                    M[k] = tu_normal(&r);
                    N[k] = tu_normal(&r);
                }
                gmm_band_lanes_mix_blocks(lw, nblk, boff, M, 5, a, withn ? N : NULL, 5,
                                          withn ? b : NULL, mix);
                for (size_t i = 0; i < 5; i++)
                    for (size_t l = 0; l < lw; l++) {
                        double want = 0.0, bound = 0.0;
                        size_t j0 = boff[blk[i]], j1 = boff[blk[i] + 1];
                        for (size_t j = j0; j < j1; j++) {
                            want += M[i * 5 + j] * a[j * lw + l];
                            bound += fabs(M[i * 5 + j] * a[j * lw + l]);
                        }
                        for (size_t j = j0; withn && j < j1; j++) {
                            want += N[i * 5 + j] * b[j * lw + l];
                            bound += fabs(N[i * 5 + j] * b[j * lw + l]);
                        }
                        size_t nj = (j1 - j0) * (withn ? 2 : 1);
                        ck_assert_msg(fabs(mix[i * lw + l] - want) <=
                                          (double)(nj + 1) * DBL_EPSILON * bound,
                                      "mix lw %zu partition %zu N %d row %zu: %.17g vs %.17g",
                                      lw, ip, withn, i, mix[i * lw + l], want);
                    }
            }
        }
    }
    free(a);
    free(b);
}
END_TEST

Suite *band_qr_suite(void)
{
    Suite *s = suite_create("band_qr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_rows_vs_dense);
    tcase_add_test(tc, test_rows_errors);
    tcase_add_test(tc, test_rows_block_vs_dense);
    tcase_add_test(tc, test_rows_block_edge);
    tcase_add_test(tc, test_rows_block_errors);
    tcase_add_test(tc, test_rows_travel);
    tcase_add_test(tc, test_rows_block_graded);
    tcase_add_test(tc, test_rows_accuracy_lauchli);
    tcase_add_test(tc, test_rows_tape_unfold);
    tcase_add_test(tc, test_rows_moments_vs_dense);
    tcase_add_test(tc, test_lane_products);
    suite_add_tcase(s, tc);
    return s;
}
