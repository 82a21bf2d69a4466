/* test_sparse.c -- the sparse storage (sparse.h) against a dense picture of
 * the same matrix: patterns from entries (either triangle, repeats, the
 * diagonal always), unions, lookup of every (i, j), and y = A x against the
 * dense product (tolerance c n eps, c = 4: the sums differ only in order). */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/sparse.h"
#include "support/testutil.h"

/* Every stored column ascends strictly, starts at its diagonal, stays in
 * the lower triangle. */
static void check_well_formed(const gmm_sparse *A)
{
    ck_assert_uint_eq(A->colptr[0], 0);
    ck_assert_uint_eq(A->colptr[A->n], A->nnz);
    for (size_t j = 0; j < A->n; j++) {
        ck_assert_uint_lt(A->colptr[j], A->colptr[j + 1]);
        ck_assert_uint_eq(A->rowind[A->colptr[j]], j);
        for (size_t p = A->colptr[j] + 1; p < A->colptr[j + 1]; p++)
            ck_assert_uint_gt(A->rowind[p], A->rowind[p - 1]);
    }
}

/* m random entries of an n x n pattern, some repeated and in either
 * triangle; mark[i + n j] = mark[j + n i] = 1 for each, and the diagonal. */
static void random_entries(size_t n, size_t m, size_t *ei, size_t *ej, char *mark, tu_rng *r)
{
    memset(mark, 0, n * n);
    for (size_t i = 0; i < n; i++)
        mark[i + n * i] = 1;
    for (size_t k = 0; k < m; k++) {
        if (k > 0 && k % 5 == 0) { /* a repeat, flipped */
            ei[k] = ej[k - 1];
            ej[k] = ei[k - 1];
        } else {
            ei[k] = (size_t)(tu_uniform(r) * (double)n);
            ej[k] = (size_t)(tu_uniform(r) * (double)n);
        }
        mark[ei[k] + n * ej[k]] = mark[ej[k] + n * ei[k]] = 1;
    }
}

START_TEST(test_sparse_from_entries)
{
    static const size_t sizes[] = {1, 2, 7, 40};
    tu_rng r;
    tu_rng_seed(&r, 31);
    for (size_t a = 0; a < sizeof sizes / sizeof sizes[0]; a++) {
        size_t n = sizes[a], m = 3 * n;
        size_t *ei = malloc(m * sizeof *ei), *ej = malloc(m * sizeof *ej);
        char *mark = malloc(n * n);
        random_entries(n, m, ei, ej, mark, &r);
        gmm_sparse *A = NULL;
        ck_assert_int_eq(gmm_sparse_from_entries(n, m, ei, ej, &A), GMM_OK);
        ck_assert_uint_eq(A->n, n);
        check_well_formed(A);
        size_t count = 0;
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i < n; i++) {
                size_t p = gmm_sparse_find(A, i, j);
                ck_assert_uint_eq(p, gmm_sparse_find(A, j, i));
                if (mark[i + n * j]) {
                    count++;
                    ck_assert_uint_ne(p, SIZE_MAX);
                    ck_assert_uint_eq(A->rowind[p], i);
                    ck_assert(p >= A->colptr[j] && p < A->colptr[j + 1]);
                    ck_assert_double_eq(A->val[p], 0.0);
                } else {
                    ck_assert_uint_eq(p, SIZE_MAX);
                }
            }
        ck_assert_uint_eq(count, A->nnz); /* nothing stored twice or invented */
        ck_assert_uint_eq(gmm_sparse_find(A, n, 0), SIZE_MAX);
        gmm_sparse_free(A);
        free(ei);
        free(ej);
        free(mark);
    }
}
END_TEST

START_TEST(test_sparse_union_like_symv)
{
    size_t n = 30, m = 50;
    tu_rng r;
    tu_rng_seed(&r, 32);
    size_t ei[50], ej[50], fi[50], fj[50];
    char *ma = malloc(n * n), *mb = malloc(n * n);
    random_entries(n, m, ei, ej, ma, &r);
    random_entries(n, m, fi, fj, mb, &r);
    gmm_sparse *A = NULL, *B = NULL, *C = NULL;
    ck_assert_int_eq(gmm_sparse_from_entries(n, m, ei, ej, &A), GMM_OK);
    ck_assert_int_eq(gmm_sparse_from_entries(n, m, fi, fj, &B), GMM_OK);
    ck_assert_int_eq(gmm_sparse_union(A, B, &C), GMM_OK);
    check_well_formed(C);
    size_t count = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            int in = ma[i + n * j] || mb[i + n * j];
            count += (size_t)in;
            ck_assert_int_eq(gmm_sparse_find(C, i, j) != SIZE_MAX, in);
        }
    ck_assert_uint_eq(count, C->nnz);

    /* alloc_like: the same pattern, values 0; set_zero clears */
    gmm_sparse *D = gmm_sparse_alloc_like(C);
    ck_assert_ptr_nonnull(D);
    ck_assert_uint_eq(D->nnz, C->nnz);
    ck_assert_int_eq(memcmp(D->colptr, C->colptr, (n + 1) * sizeof *D->colptr), 0);
    ck_assert_int_eq(memcmp(D->rowind, C->rowind, C->nnz * sizeof *D->rowind), 0);
    for (size_t p = 0; p < D->nnz; p++) {
        ck_assert_double_eq(D->val[p], 0.0);
        D->val[p] = tu_normal(&r);
    }

    /* symv against the dense symmetric matrix */
    double *Dd = calloc(n * n, sizeof *Dd), x[30], y[30], yd[30];
    for (size_t j = 0; j < n; j++)
        for (size_t p = D->colptr[j]; p < D->colptr[j + 1]; p++)
            Dd[D->rowind[p] + n * j] = Dd[j + n * D->rowind[p]] = D->val[p];
    for (size_t i = 0; i < n; i++)
        x[i] = tu_normal(&r);
    gmm_sparse_symv(D, x, y);
    for (size_t i = 0; i < n; i++) {
        yd[i] = 0.0;
        for (size_t j = 0; j < n; j++)
            yd[i] += Dd[i + n * j] * x[j];
    }
    ck_assert_double_le(tu_max_rel_diff(y, yd, n), 4.0 * (double)n * DBL_EPSILON);
    gmm_sparse_set_zero(D);
    for (size_t p = 0; p < D->nnz; p++)
        ck_assert_double_eq(D->val[p], 0.0);

    free(Dd);
    free(ma);
    free(mb);
    gmm_sparse_free(A);
    gmm_sparse_free(B);
    gmm_sparse_free(C);
    gmm_sparse_free(D);
}
END_TEST

START_TEST(test_sparse_errors)
{
    size_t ei[3] = {0, 1, 4}, ej[3] = {1, 2, 0};
    gmm_sparse *A = (gmm_sparse *)1, *B = NULL, *C = NULL;
    ck_assert_int_eq(gmm_sparse_from_entries(4, 3, ei, ej, &A), GMM_EINVAL);
    ck_assert_ptr_null(A);
    ck_assert_uint_eq(gmm_error_index(), 2); /* the entry out of range */
    ck_assert_int_eq(gmm_sparse_from_entries(4, 2, ei, ej, &A), GMM_OK);
    ck_assert_int_eq(gmm_sparse_from_entries(5, 0, NULL, NULL, &B), GMM_OK);
    ck_assert_uint_eq(B->nnz, 5); /* the diagonal alone */
    ck_assert_int_eq(gmm_sparse_union(A, B, &C), GMM_EDIM);
    ck_assert_ptr_null(C);
    ck_assert_int_eq(gmm_sparse_from_entries(0, 0, NULL, NULL, &C), GMM_OK);
    ck_assert_uint_eq(C->nnz, 0);
    gmm_sparse_free(NULL);
    gmm_sparse_free(A);
    gmm_sparse_free(B);
    gmm_sparse_free(C);
}
END_TEST

Suite *sparse_suite(void)
{
    Suite *s = suite_create("sparse");
    TCase *tc = tcase_create("storage");
    tcase_add_test(tc, test_sparse_from_entries);
    tcase_add_test(tc, test_sparse_union_like_symv);
    tcase_add_test(tc, test_sparse_errors);
    suite_add_tcase(s, tc);
    return s;
}
