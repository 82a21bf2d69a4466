/* test_numfmt.c -- gmm_fmt_g17 (io.h) against the C library's own "%.17g":
 * byte for byte on random bit patterns (every exponent), random mantissas
 * over the range of the integer path and around its limits, the
 * neighbours of powers of 2 and 10 (where the digit count and the exponent
 * change), exact ties (m 2^-s with 18 significant digits ending in 5: the
 * ties-to-even rule), integers and decimal fractions, and the special
 * values. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/io.h"

static uint64_t xs = 0x9E3779B97F4A7C15u;

static uint64_t next_bits(void)
{
    xs ^= xs << 13;
    xs ^= xs >> 7;
    xs ^= xs << 17;
    return xs;
}

static size_t checked;

static void same(double x)
{
    char want[64], got[GMM_FMT_G17_SIZE + 8];
    memset(got, 'x', sizeof got);
    int n = snprintf(want, sizeof want, "%.17g", x);
    size_t len = gmm_fmt_g17(x, got);
    checked++;
    if (strcmp(want, got) != 0 || len != (size_t)n || len >= GMM_FMT_G17_SIZE)
        ck_abort_msg("%a: printf \"%s\", gmm_fmt_g17 \"%s\" (length %zu)", x, want, got, len);
}

/* x and its k neighbours on each side. */
static void around(double x, int k)
{
    double lo = x, hi = x;
    same(x);
    for (int i = 0; i < k; i++) {
        same(lo = nextafter(lo, -INFINITY));
        same(hi = nextafter(hi, INFINITY));
    }
}

START_TEST(test_numfmt_random_bits)
{
    for (int i = 0; i < 300000; i++) {
        uint64_t u = next_bits();
        double x;
        memcpy(&x, &u, sizeof x);
        same(x);
    }
}
END_TEST

START_TEST(test_numfmt_random_mantissas)
{
    /* 2^-70 .. 2^140 covers both paths and both of their limits */
    for (int i = 0; i < 300000; i++) {
        double m = (double)(next_bits() >> 11);
        int e = (int)(next_bits() % 210) - 123;
        same(ldexp(m, e));
        same(-ldexp(m, e));
    }
}
END_TEST

START_TEST(test_numfmt_boundaries)
{
    for (int e = -1074; e <= 1023; e++)
        around(ldexp(1.0, e), 3);
    for (int k = -324; k <= 308; k++)
        around(pow(10.0, k), 4);
    /* the limits of the integer path: 1e-16 and 2^127 */
    around(1e-16, 50);
    around(ldexp(1.0, 127), 50);
    around(1e17, 50);
    around(1e16, 50);
    same(DBL_MAX);
    same(DBL_MIN);
    same(DBL_TRUE_MIN);
}
END_TEST

START_TEST(test_numfmt_ties)
{
    /* m 2^-s with few significant bits: their decimal expansions end in 5,
     * and those with 18 significant digits are exact ties at 17 (2^-25 =
     * 2.98023223876953125e-08 is written ...312, not ...313) */
    size_t ties = 0;
    for (int s = 1; s <= 120; s++)
        for (uint64_t m = 1; m < 2048; m += 2) {
            double x = ldexp((double)m, -s);
            char buf[160];
            int n = snprintf(buf, sizeof buf, "%.100e", x); /* exact: s <= 120 */
            /* 18 significant digits, the last a 5, the rest zeros */
            if (n > 0 && buf[18] == '5' && strspn(buf + 19, "0") == strcspn(buf + 19, "e"))
                ties++;
            same(x);
            same(-x);
        }
    ck_assert_uint_gt(ties, 50);
}
END_TEST

START_TEST(test_numfmt_decimals)
{
    for (int i = 0; i < 200000; i++) {
        same((double)i);
        same(i / 1000.0);
        same(i * 0.1);
        same(1e17 + 16.0 * i);
        same(-7.25 + i * 1e-6);
    }
    same(0.0);
    same(-0.0);
    same(INFINITY);
    same(-INFINITY);
    same(NAN);
    same(0.1);
    same(1.0 / 3.0);
    same(-2.0 / 3.0);
    same(123456789012345678.0);
    ck_assert_uint_gt(checked, 1000000);
}
END_TEST

Suite *io_numfmt_suite(void)
{
    Suite *s = suite_create("io_numfmt");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_numfmt_random_bits);
    tcase_add_test(tc, test_numfmt_random_mantissas);
    tcase_add_test(tc, test_numfmt_boundaries);
    tcase_add_test(tc, test_numfmt_ties);
    tcase_add_test(tc, test_numfmt_decimals);
    suite_add_tcase(s, tc);
    return s;
}
