/* test_qfile.c -- q's file (qfile.h): a written file reads back to the
 * same doubles, its layout (header, NaN above the corner), and the errors
 * of a file of another shape or with a malformed entry. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/qfile.h"
#include "support/testutil.h"
#include "support/tmpfiles.h"

START_TEST(test_qfile_round_trip)
{
    size_t n = 7, b = 2;
    tu_rng r;
    tu_rng_seed(&r, 11);
    gmm_band *L = gmm_band_alloc(n, b, 0, GMM_BAND_LOWER);
    gmm_band *L2 = gmm_band_alloc(n, b, 0, GMM_BAND_LOWER);
    ck_assert(L && L2);
    tu_band_fill_lower(L, &r);
    double mean[7], mean2[7];
    for (size_t i = 0; i < n; i++)
        mean[i] = tu_normal(&r) * 1e3 / 3.0;
    char *dir = tu_mkdtemp(), *path = tu_path(dir, "x.q.csv");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gmm_qfile_write(f, n, b, mean, L), GMM_OK);
    ck_assert_int_eq(fclose(f), 0);
    char *text = tu_read_file(path, NULL);
    ck_assert(!strncmp(text, "index,mean,l0,l1,l2\n0,", 22));
    ck_assert_ptr_nonnull(strstr(text, ",NaN,NaN\n1,")); /* row 0: l1, l2 above the corner */
    free(text);
    ck_assert_int_eq(gmm_qfile_read(path, n, b, mean2, L2), GMM_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert(mean2[i] == mean[i]);
        for (size_t j = 0; j <= b && j <= i; j++)
            ck_assert(gmm_band_get(L2, i, i - j) == gmm_band_get(L, i, i - j));
    }
    /* another model's shape: both named */
    gmm_band *L3 = gmm_band_alloc(n, 1, 0, GMM_BAND_LOWER);
    ck_assert_int_eq(gmm_qfile_read(path, n, 1, mean2, L3), GMM_EPARSE);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "7 rows of 5 columns"));
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "q bandwidth 1 (4 columns"));
    ck_assert_int_eq(gmm_qfile_read(path, n + 1, b, mean2, L2), GMM_EINVAL);
    gmm_band_free(L3);
    free(path);
    /* a malformed entry below the corner is refused at its row */
    path = tu_write_str(dir, "bad.q.csv", "index,mean,l0,l1\n0,1,1,NaN\n1,2,x,0.5\n");
    gmm_band *L4 = gmm_band_alloc(2, 1, 0, GMM_BAND_LOWER);
    ck_assert_int_eq(gmm_qfile_read(path, 2, 1, mean2, L4), GMM_EPARSE);
    gmm_band_free(L4);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
    gmm_band_free(L);
    gmm_band_free(L2);
}
END_TEST

START_TEST(test_qfile_path)
{
    const char *in[] = {"out/m.json", "m", "m.JSON", ".json", "x.json.bak"};
    const char *want[] = {"out/m.q.csv", "m.q.csv", "m.JSON.q.csv", ".json.q.csv",
                          "x.json.bak.q.csv"};
    for (size_t k = 0; k < 5; k++) {
        char *q = gmm_qfile_path(in[k]);
        ck_assert_str_eq(q, want[k]);
        gmm_free(q);
    }
}
END_TEST

Suite *io_qfile_suite(void)
{
    Suite *s = suite_create("io_qfile");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_qfile_round_trip);
    tcase_add_test(tc, test_qfile_path);
    suite_add_tcase(s, tc);
    return s;
}
