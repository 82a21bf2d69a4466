/* test_status.c -- the last-error record (status.h). */
#include <check.h>
#include <string.h>

#include "gmm/status.h"

/* A caller that prefixes the last message to itself gets the prefix and
 * the whole old message (the record is formatted through a copy). */
START_TEST(test_error_prefix_self)
{
    gmm_error(GMM_EINVAL, "new rows of a kernel are refused");
    gmm_error_at(GMM_EINVAL, 3, "'%s': %s", "f.t", gmm_error_message());
    ck_assert_str_eq(gmm_error_message(), "'f.t': new rows of a kernel are refused");
    ck_assert_uint_eq(gmm_error_index(), 3);
    gmm_error(GMM_EDOM, "fit: %s", gmm_error_message());
    ck_assert_str_eq(gmm_error_message(), "fit: 'f.t': new rows of a kernel are refused");
}
END_TEST

Suite *core_status_suite(void)
{
    Suite *s = suite_create("core_status");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_error_prefix_self);
    suite_add_tcase(s, tc);
    return s;
}
