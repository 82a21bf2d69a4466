/* test_table_join.c -- gmm_table_join_column (io.h): the interaction a:b
 * of two columns appended as a column of joined cells, the table's other
 * cells and lines untouched, and its errors. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/io.h"
#include "support/tmpfiles.h"

START_TEST(test_join_column)
{
    char *dir = tu_mkdtemp();
    char *p = tu_write_str(dir, "t.csv", "y,a,b\n1,A,x\n2,B,\n3,A,yy\n");
    gmm_table *t = NULL;
    ck_assert_int_eq(gmm_table_read(p, &t), GMM_OK);
    size_t col[2] = {1, 2}, out, c;
    ck_assert_int_eq(gmm_table_join_column(t, "a:b", col, 2, &out), GMM_OK);
    ck_assert_uint_eq(out, 3);
    ck_assert_uint_eq(t->ncol, 4);
    ck_assert_int_eq(gmm_table_column(t, "a:b", &c), GMM_OK);
    ck_assert_uint_eq(c, 3);
    static const char *const want[] = {"A:x", "B:", "A:yy"};
    for (size_t r = 0; r < 3; r++) {
        ck_assert_str_eq(t->cell[r][3], want[r]);
        ck_assert_uint_eq(t->line[r], r + 2);
    }
    ck_assert_str_eq(t->cell[2][0], "3");
    ck_assert_str_eq(t->cell[1][1], "B");
    /* a second column on top of the first */
    size_t c3[1] = {3};
    ck_assert_int_eq(gmm_table_join_column(t, "copy", c3, 1, &out), GMM_OK);
    ck_assert_str_eq(t->cell[0][4], "A:x");
    ck_assert_str_eq(t->header[3], "a:b");
    size_t bad[1] = {9};
    ck_assert_int_eq(gmm_table_join_column(t, "z", bad, 1, &out), GMM_EINVAL);
    ck_assert_int_eq(gmm_table_join_column(t, "z", col, 0, &out), GMM_EINVAL);
    gmm_table_free(t);
    tu_rmdir_all(dir);
    free(p);
    free(dir);
}
END_TEST

Suite *io_table_join_suite(void)
{
    Suite *s = suite_create("io_table_join");
    TCase *tc = tcase_create("join");
    tcase_add_test(tc, test_join_column);
    suite_add_tcase(s, tc);
    return s;
}
