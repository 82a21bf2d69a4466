/* test_band.c -- storage, accessors and the small helpers of band.c. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "gmm/band.h"
#include "support/testutil.h"

START_TEST(test_alloc_clamps_and_layout)
{
    gmm_band *b = gmm_band_alloc(4, 9, 7, GMM_BAND_GENERAL);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->kl, 3);
    ck_assert_uint_eq(b->ku, 3);
    ck_assert_uint_eq(b->ld, 7);
    /* LAPACK layout: (i, j) at data[j*ld + ku + i - j]. */
    *gmm_band_ptr(b, 2, 1) = 5.0;
    ck_assert(b->data[1 * 7 + 3 + 2 - 1] == 5.0);
    ck_assert(gmm_band_get(b, 2, 1) == 5.0);
    gmm_band_free(b);

    ck_assert_ptr_null(gmm_band_alloc(4, 1, 1, GMM_BAND_SYMMETRIC));
    ck_assert_int_eq(gmm_error_status(), GMM_EDIM);

    gmm_band *z = gmm_band_alloc(0, 3, 0, GMM_BAND_LOWER);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq(z->n, 0);
    gmm_band_free(z);
    gmm_band_free(NULL);
}
END_TEST

START_TEST(test_symmetric_get_reflects)
{
    gmm_band *s = gmm_band_alloc(5, 2, 0, GMM_BAND_SYMMETRIC);
    *gmm_band_ptr(s, 3, 1) = 2.5;
    ck_assert(gmm_band_get(s, 1, 3) == 2.5);
    ck_assert(gmm_band_get(s, 4, 1) == 0.0);
    ck_assert(!gmm_band_in_band(s, 1, 3));
    gmm_band_free(s);
}
END_TEST

/* gmm_band_set_kind: the storage read another way, entries untouched; the
 * in-place Cholesky's LOWER band made SYMMETRIC again for a new assembly;
 * a triangular kind refused on a band with an upper band. */
START_TEST(test_set_kind)
{
    gmm_band *q = gmm_band_alloc(4, 1, 0, GMM_BAND_SYMMETRIC);
    for (size_t j = 0; j < 4; j++) {
        *gmm_band_ptr(q, j, j) = 4.0;
        if (j + 1 < 4)
            *gmm_band_ptr(q, j + 1, j) = 1.0;
    }
    ck_assert_int_eq(gmm_band_chol_decomp(q, q), GMM_OK);
    ck_assert_int_eq(q->kind, GMM_BAND_LOWER);
    double l10 = gmm_band_get(q, 1, 0);
    ck_assert_int_eq(gmm_band_chol_decomp(q, q), GMM_EDIM); /* a factor is not SYMMETRIC */
    ck_assert_int_eq(gmm_band_set_kind(q, GMM_BAND_SYMMETRIC), GMM_OK);
    ck_assert_int_eq(q->kind, GMM_BAND_SYMMETRIC);
    ck_assert(gmm_band_get(q, 1, 0) == l10 && gmm_band_get(q, 0, 1) == l10);
    ck_assert_int_eq(gmm_band_set_kind(q, (gmm_band_kind)7), GMM_EINVAL);
    ck_assert_int_eq(q->kind, GMM_BAND_SYMMETRIC);
    gmm_band *g = gmm_band_alloc(4, 1, 1, GMM_BAND_GENERAL);
    ck_assert_int_eq(gmm_band_set_kind(g, GMM_BAND_LOWER), GMM_EDIM);
    ck_assert_int_eq(gmm_band_set_kind(g, GMM_BAND_SYMMETRIC), GMM_EDIM);
    ck_assert_int_eq(g->kind, GMM_BAND_GENERAL);
    ck_assert_int_eq(gmm_band_set_kind(q, GMM_BAND_GENERAL), GMM_OK);
    gmm_band_free(g);
    gmm_band_free(q);
}
END_TEST

START_TEST(test_copy_band_and_transpose)
{
    tu_rng r;
    tu_rng_seed(&r, 1);
    for (size_t n = 1; n <= 7; n++) {
        gmm_band *s = gmm_band_alloc(n, 2, 0, GMM_BAND_SYMMETRIC);
        tu_band_fill_random(s, &r);
        gmm_band *g = gmm_band_alloc(n, 3, 1, GMM_BAND_GENERAL);
        ck_assert_int_eq(gmm_band_copy_band(g, s), GMM_OK);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double want = (i >= j ? i - j <= 3 : j - i <= 1) ? gmm_band_get(s, i, j) : 0.0;
                ck_assert(gmm_band_get(g, i, j) == want);
            }
        gmm_band *t = gmm_band_alloc(n, 1, 3, GMM_BAND_GENERAL);
        ck_assert_int_eq(gmm_band_transpose(t, g), GMM_OK);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                ck_assert(gmm_band_get(t, i, j) == gmm_band_get(g, j, i));
        gmm_band_free(s);
        gmm_band_free(g);
        gmm_band_free(t);
    }
}
END_TEST

/* c = dot(W, copy_band(A)) for a fixed random W: the reverse modes of
 * copy_band and dot, checked against central differences of stored entries. */
/* gmm_band_axpy against the dense sum over the band both hold: plain
 * (offdiag 1) and into the gradient convention (offdiag 2), Y's wider band
 * untouched beyond X's; a GENERAL operand refused. */
START_TEST(test_axpy_lower_bands)
{
    size_t n = 7;
    gmm_band *X = gmm_band_alloc(n, 2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Y = gmm_band_alloc(n, 3, 0, GMM_BAND_LOWER);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + 3; i++) {
            if (i <= j + 2)
                *gmm_band_ptr(X, i, j) = 1.0 + 0.1 * (double)(i + 3 * j);
            *gmm_band_ptr(Y, i, j) = -0.5 + 0.01 * (double)(7 * i + j);
        }
    for (int k = 1; k <= 2; k++) {
        gmm_band *Z = gmm_band_alloc(n, 3, 0, GMM_BAND_LOWER);
        ck_assert_int_eq(gmm_band_copy(Z, Y), GMM_OK);
        ck_assert_int_eq(gmm_band_axpy(-0.75, (double)k, X, Z), GMM_OK);
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i < n && i <= j + 3; i++) {
                double x = i <= j + 2 ? gmm_band_get(X, i, j) : 0.0;
                double want = gmm_band_get(Y, i, j) + (i == j ? 1.0 : (double)k) * -0.75 * x;
                ck_assert_double_eq_tol(gmm_band_get(Z, i, j), want, 1e-15);
            }
        gmm_band_free(Z);
    }
    gmm_band *G = gmm_band_alloc(n, 1, 1, GMM_BAND_GENERAL);
    ck_assert_int_eq(gmm_band_axpy(1.0, 1.0, G, Y), GMM_EDIM);
    gmm_band_free(G);
    gmm_band_free(X);
    gmm_band_free(Y);
}
END_TEST

START_TEST(test_copy_band_rev_symmetric_fd)
{
    tu_rng r;
    tu_rng_seed(&r, 2);
    size_t n = 6;
    gmm_band *A = gmm_band_alloc(n, 2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *G = gmm_band_alloc(n, 2, 2, GMM_BAND_GENERAL);
    gmm_band *W = gmm_band_alloc(n, 2, 2, GMM_BAND_GENERAL);
    gmm_band *Gbar = gmm_band_alloc(n, 2, 2, GMM_BAND_GENERAL);
    gmm_band *Abar = gmm_band_alloc(n, 2, 0, GMM_BAND_SYMMETRIC);
    tu_band_fill_random(A, &r);
    tu_band_fill_random(W, &r);
    gmm_band_copy_band(G, A);
    gmm_band_dot_rev(G, W, 1.0, Gbar, NULL);
    gmm_band_copy_band_rev(Gbar, Abar);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + 2; i++) {
            double *p = gmm_band_ptr(A, i, j), save = *p, h = 1e-6;
            *p = save + h;
            gmm_band_copy_band(G, A);
            double cp = gmm_band_dot(G, W);
            *p = save - h;
            gmm_band_copy_band(G, A);
            double cm = gmm_band_dot(G, W);
            *p = save;
            double fd = (cp - cm) / (2 * h);
            ck_assert_double_eq_tol(*gmm_band_ptr(Abar, i, j), fd, 1e-7);
        }
    gmm_band_free(A);
    gmm_band_free(G);
    gmm_band_free(W);
    gmm_band_free(Gbar);
    gmm_band_free(Abar);
}
END_TEST

START_TEST(test_dot_symmetric_counts_both_triangles)
{
    gmm_band *S = gmm_band_alloc(3, 1, 0, GMM_BAND_SYMMETRIC);
    gmm_band *T = gmm_band_alloc(3, 1, 0, GMM_BAND_SYMMETRIC);
    *gmm_band_ptr(S, 1, 0) = 2.0;
    *gmm_band_ptr(T, 1, 0) = 3.0;
    *gmm_band_ptr(S, 2, 2) = 1.0;
    *gmm_band_ptr(T, 2, 2) = 4.0;
    ck_assert_double_eq_tol(gmm_band_dot(S, T), 2 * 6.0 + 4.0, 1e-15);
    gmm_band *Sbar = gmm_band_alloc(3, 1, 0, GMM_BAND_SYMMETRIC);
    gmm_band_dot_rev(S, T, 1.0, Sbar, NULL);
    ck_assert_double_eq_tol(*gmm_band_ptr(Sbar, 1, 0), 6.0, 1e-15); /* 2 T(1,0) */
    ck_assert_double_eq_tol(*gmm_band_ptr(Sbar, 2, 2), 4.0, 1e-15);
    gmm_band_free(S);
    gmm_band_free(T);
    gmm_band_free(Sbar);
}
END_TEST

/* Column blocks against entry-wise access: whole blocks and blocks that run
 * past the last row, strides equal to and wider than kl + 1; only existing
 * slots are touched on either side. */
START_TEST(test_cols_set_acc)
{
    tu_rng r;
    tu_rng_seed(&r, 23);
    const size_t ns[] = {1, 4, 9, 30};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        size_t n = ns[a];
        gmm_band *B = gmm_band_alloc(n, 5, 0, GMM_BAND_SYMMETRIC);
        size_t ld = B->kl + 1;
        for (size_t ldb = ld; ldb <= ld + 2; ldb += 2)
            for (size_t j0 = 0; j0 < n; j0++)
                for (size_t w = 0; j0 + w <= n && w <= 4; w++) {
                    double blk[4 * 8], acc[4 * 8], ref[4 * 8];
                    for (size_t t = 0; t < 4 * 8; t++)
                        blk[t] = tu_normal(&r);
                    tu_band_fill_random(B, &r);
                    gmm_band *C = gmm_band_alloc(n, 5, 0, GMM_BAND_SYMMETRIC);
                    gmm_band_copy(C, B);
                    ck_assert_int_eq(gmm_band_cols_set(B, j0, w, blk, ldb), GMM_OK);
                    for (size_t j = 0; j < n; j++)
                        for (size_t i = j; i < n && i <= j + B->kl; i++) {
                            int in = j >= j0 && j < j0 + w;
                            double want = in ? blk[(j - j0) * ldb + (i - j)]
                                             : *gmm_band_ptr(C, i, j);
                            ck_assert(*gmm_band_ptr(B, i, j) == want);
                        }
                    for (size_t t = 0; t < 4 * 8; t++)
                        acc[t] = ref[t] = tu_normal(&r);
                    ck_assert_int_eq(gmm_band_cols_acc(C, j0, w, acc, ldb), GMM_OK);
                    for (size_t c = 0; c < w; c++)
                        for (size_t s2 = 0; s2 < ld; s2++) {
                            size_t j = j0 + c, i = j + s2;
                            if (i < n)
                                ref[c * ldb + s2] += *gmm_band_ptr(C, i, j);
                        }
                    for (size_t t = 0; t < 4 * 8; t++)
                        ck_assert(acc[t] == ref[t]);
                    gmm_band_free(C);
                }
        double blk[8];
        ck_assert_int_eq(gmm_band_cols_set(B, n, 1, blk, ld), GMM_EDIM);
        ck_assert_int_eq(gmm_band_cols_acc(B, 0, 1, blk, ld - 1), GMM_EDIM);
        gmm_band_free(B);
    }
    gmm_band *G = gmm_band_alloc(6, 2, 1, GMM_BAND_GENERAL);
    double blk[8];
    ck_assert_int_eq(gmm_band_cols_set(G, 0, 1, blk, 4), GMM_EDIM);
    gmm_band_free(G);
}
END_TEST

Suite *band_suite(void)
{
    Suite *s = suite_create("band");
    TCase *tc = tcase_create("storage");
    tcase_add_test(tc, test_alloc_clamps_and_layout);
    tcase_add_test(tc, test_symmetric_get_reflects);
    tcase_add_test(tc, test_set_kind);
    tcase_add_test(tc, test_copy_band_and_transpose);
    tcase_add_test(tc, test_copy_band_rev_symmetric_fd);
    tcase_add_test(tc, test_axpy_lower_bands);
    tcase_add_test(tc, test_dot_symmetric_counts_both_triangles);
    tcase_add_test(tc, test_cols_set_acc);
    suite_add_tcase(s, tc);
    return s;
}
