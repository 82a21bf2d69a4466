/* runner.c -- one runner for every Check suite.  The suite list is generated
 * by the Makefile from the `Suite *NAME_suite(void)` definitions under tests/.
 *
 *   CK_RUN_SUITE=band_chol   run one suite      CK_FORK=no   no fork (for gdb)
 *   CK_VERBOSITY=verbose     one line per test
 */
#include <check.h>
#include <stdlib.h>

#define GMM_SUITE(name) Suite *name##_suite(void);
#include "suites.h"
#undef GMM_SUITE

int main(void)
{
    SRunner *sr = srunner_create(NULL);
#define GMM_SUITE(name) srunner_add_suite(sr, name##_suite());
#include "suites.h"
#undef GMM_SUITE
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
