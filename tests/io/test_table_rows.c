/* test_table_rows.c -- a table's missing cells (gmm_table_cell_missing: the
 * tokens gmm_table_column_double reads as NAN) and dropping rows in place
 * (gmm_table_keep_rows): the kept rows keep their order, cells and source
 * lines, so that later messages still name the file's lines. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/io.h"
#include "support/tmpfiles.h"

START_TEST(test_missing_and_keep)
{
    char *dir = tu_mkdtemp();
    char *path = tu_write_str(dir, "t.csv",
                              "a,b\n1,x\n\n2, NA \n3,\"\"\n4,NaN\n5,nan\n6,na\n");
    gmm_table *t = NULL;
    ck_assert_int_eq(gmm_table_read(path, &t), GMM_OK);
    ck_assert_uint_eq(t->nrow, 6);
    /* as gmm_table_column_double: NA (blanks around), "", NaN, nan missing; "na" not */
    const int want[] = {0, 1, 1, 1, 1, 0};
    double b[6];
    ck_assert_int_eq(gmm_table_column_double(t, 1, 1, b) != GMM_OK, 1); /* x, na: not numbers */
    for (size_t r = 0; r < 6; r++) {
        ck_assert_int_eq(gmm_table_cell_missing(t, r, 1), want[r]);
        ck_assert_int_eq(gmm_table_cell_missing(t, r, 0), 0);
    }
    ck_assert_int_eq(gmm_table_cell_missing(t, 6, 0), 0); /* out of range */
    ck_assert_int_eq(gmm_table_cell_missing(t, 0, 2), 0);
    unsigned char keep[6];
    for (size_t r = 0; r < 6; r++)
        keep[r] = !want[r];
    gmm_table_keep_rows(t, keep);
    ck_assert_uint_eq(t->nrow, 2);
    ck_assert_str_eq(t->cell[0][0], "1");
    ck_assert_str_eq(t->cell[1][0], "6");
    ck_assert_str_eq(t->cell[1][1], "na");
    ck_assert_uint_eq(t->line[0], 2);
    ck_assert_uint_eq(t->line[1], 8); /* the blank line 3 counted */
    double a[2];
    ck_assert_int_eq(gmm_table_column_double(t, 0, 0, a), GMM_OK);
    ck_assert(a[0] == 1.0 && a[1] == 6.0);
    gmm_table_free(t);
    free(path);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

extern Suite *io_table_rows_suite(void);
Suite *io_table_rows_suite(void)
{
    Suite *s = suite_create("io_table_rows");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_missing_and_keep);
    suite_add_tcase(s, tc);
    return s;
}
