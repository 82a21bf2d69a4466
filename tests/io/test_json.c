/* test_json.c -- exact round trip of doubles through a file, located parse
 * errors, and the getters' messages. */
#include <check.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmm/io.h"
#include "gmm/json.h"
#include "support/testutil.h"
#include "support/tmpfiles.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }

static void teardown(void)
{
    tu_rmdir_all(dir);
    free(dir);
}

static char *in_dir(const char *name) { return tu_path(dir, name); }

/* Write root to dir/name through an outfile; return the path. */
static char *write_json(const char *name, const json_t *root)
{
    char *path = in_dir(name);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    ck_assert_int_eq(gmm_json_write(gmm_outfile_stream(o), root, path), GMM_OK);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    return path;
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static const double tricky[] = {
    0.1, 1.0 / 3.0, 1e-300, 5e-324, -0.0, 0.0, 1.7976931348623157e308, -1.7976931348623157e308,
    2.2250738585072014e-308, 2.225073858507201e-308 /* largest subnormal */,
    9007199254740993.0, 123456789.123456789, 1.0, 3.0, -2.5, 1e22, 1e23, 0.30000000000000004,
};

/* Round trip the tricky list (and 2000 random bit patterns) through a file. */
START_TEST(test_round_trip_exact)
{
    enum { NRAND = 2000 };
    size_t nt = sizeof tricky / sizeof tricky[0];
    double *x = malloc(sizeof(double) * (nt + NRAND));
    memcpy(x, tricky, sizeof tricky);
    tu_rng r;
    tu_rng_seed(&r, 7);
    for (size_t i = nt; i < nt + NRAND;) {
        uint64_t bits = (uint64_t)(tu_uniform(&r) * 0x1p32) << 32 |
                        (uint64_t)(tu_uniform(&r) * 0x1p32);
        double v;
        memcpy(&v, &bits, sizeof v);
        if (isfinite(v))
            x[i++] = v;
    }
    json_t *root = json_object();
    for (size_t i = 0; i < nt; i++) {
        char key[16];
        snprintf(key, sizeof key, "v%zu", i);
        ck_assert_int_eq(gmm_json_set_number(root, key, x[i]), GMM_OK);
    }
    json_t *arr = gmm_json_numbers(x, nt + NRAND);
    ck_assert_ptr_nonnull(arr);
    ck_assert_int_eq(gmm_json_set_new(root, "all", arr), GMM_OK);
    char *path = write_json("r.json", root);
    json_decref(root);

    json_t *back = NULL;
    ck_assert_int_eq(gmm_json_read(path, &back), GMM_OK);
    for (size_t i = 0; i < nt; i++) {
        char key[16];
        snprintf(key, sizeof key, "v%zu", i);
        double v;
        ck_assert_int_eq(gmm_json_get_number(back, key, "r.json", &v), GMM_OK);
        ck_assert_msg(same_bits(v, x[i]), "%s: %.17g came back as %.17g", key, x[i], v);
    }
    json_t *all = NULL;
    ck_assert_int_eq(gmm_json_get_array(back, "all", "r.json", &all), GMM_OK);
    double *y = malloc(sizeof(double) * (nt + NRAND));
    ck_assert_int_eq(gmm_json_get_numbers(all, nt + NRAND, "r.json: all", y), GMM_OK);
    for (size_t i = 0; i < nt + NRAND; i++)
        ck_assert_msg(same_bits(y[i], x[i]), "all[%zu]: %a came back as %a", i, x[i], y[i]);
    json_decref(back);
    free(x);
    free(y);
    free(path);
}
END_TEST

/* Output text: keys in insertion order, 2-space indent, newline at the end,
 * '.' as decimal point even under a comma locale (when one is installed). */
START_TEST(test_output_format)
{
    json_t *root = json_object();
    ck_assert_int_eq(gmm_json_set_number(root, "zeta", 1.5), GMM_OK);
    ck_assert_int_eq(gmm_json_set_string(root, "alpha", "x"), GMM_OK);
    ck_assert_int_eq(gmm_json_set_bool(root, "mid", 1), GMM_OK);
    ck_assert_int_eq(gmm_json_set_number(root, "zeta", -0.0), GMM_OK); /* replace: stays first */
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    if (!loc)
        loc = setlocale(LC_NUMERIC, "fr_FR.UTF-8");
    char *path = write_json("f.json", root);
    setlocale(LC_NUMERIC, "C");
    char *text = tu_read_file(path, NULL);
    ck_assert_str_eq(text, "{\n  \"zeta\": -0.0,\n  \"alpha\": \"x\",\n  \"mid\": true\n}\n");
    free(text);
    free(path);

    json_t *one = json_object();
    ck_assert_int_eq(gmm_json_set_number(one, "v", 2.5), GMM_OK);
    if (loc)
        setlocale(LC_NUMERIC, loc);
    path = write_json("g.json", one);
    json_t *back = NULL;
    ck_assert_int_eq(gmm_json_read(path, &back), GMM_OK);
    setlocale(LC_NUMERIC, "C");
    text = tu_read_file(path, NULL);
    ck_assert_str_eq(text, "{\n  \"v\": 2.5\n}\n");
    double v;
    ck_assert_int_eq(gmm_json_get_number(back, "v", "g", &v), GMM_OK);
    ck_assert(v == 2.5);
    json_decref(back);
    json_decref(one);
    json_decref(root);
    free(text);
    free(path);
}
END_TEST

START_TEST(test_read_errors)
{
    json_t *j = (json_t *)&j;
    char *missing = in_dir("none.json");
    ck_assert_int_eq(gmm_json_read(missing, &j), GMM_EIO);
    ck_assert_ptr_null(j);
    char want[1024];
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", missing);
    ck_assert_str_eq(gmm_error_message(), want);
    free(missing);

    static const struct {
        const char *text, *where;
    } bad[] = {
        {"{\n  \"a\": 1,\n  \"b\": }\n", ":3:8: "},
        {"{\"a\": 1, \"a\": 2}", ":1:12: duplicate object key"},
        {"{\"a\": 1}\n{", ":2:1: "},             /* trailing content */
        {"", ":1:0: "},                         /* empty file */
        {"{\"a\": 1e400}", ":1:11: "},          /* overflow */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *path = tu_write_str(dir, "bad.json", bad[k].text);
        ck_assert_int_eq(gmm_json_read(path, &j), GMM_EPARSE);
        snprintf(want, sizeof want, "%s%s", path, bad[k].where);
        ck_assert_msg(!strncmp(gmm_error_message(), want, strlen(want)),
                      "case %zu: message '%s', expected prefix '%s'", k, gmm_error_message(),
                      want);
        free(path);
    }
}
END_TEST

START_TEST(test_getters)
{
    json_error_t e;
    json_t *m = json_loads("{\"n\": 3, \"x\": 2.5, \"s\": \"rbf\", \"b\": false, \"o\": {}, "
                           "\"a\": [1, \"two\"], \"nul\": null}",
                           0, &e);
    ck_assert_ptr_nonnull(m);
    double x;
    const char *s;
    int b = 7;
    json_t *o;
    ck_assert_int_eq(gmm_json_get_number(m, "n", "model.json", &x), GMM_OK);
    ck_assert(x == 3.0); /* JSON integers are numbers too */
    ck_assert_int_eq(gmm_json_get_number(m, "x", "model.json", &x), GMM_OK);
    ck_assert(x == 2.5);
    ck_assert_int_eq(gmm_json_get_string(m, "s", "model.json", &s), GMM_OK);
    ck_assert_str_eq(s, "rbf");
    ck_assert_int_eq(gmm_json_get_bool(m, "b", "model.json", &b), GMM_OK);
    ck_assert_int_eq(b, 0);
    ck_assert_int_eq(gmm_json_get_object(m, "o", "model.json", &o), GMM_OK);
    ck_assert(json_is_object(o));

    ck_assert_int_eq(gmm_json_get_object(m, "parameters", "MODEL.json", &o), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "MODEL.json: key 'parameters' missing");
    ck_assert_int_eq(gmm_json_get_number(m, "s", "model.json: kernel", &x), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(),
                     "model.json: kernel: key 's' is a string, expected a number");
    ck_assert_int_eq(gmm_json_get_string(m, "nul", "m", &s), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "m: key 'nul' is null, expected a string");
    ck_assert_int_eq(gmm_json_get_bool(m, "x", "m", &b), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "m: key 'x' is a number, expected a boolean");
    ck_assert_int_eq(gmm_json_get_array(m, "o", "m", &o), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "m: key 'o' is an object, expected an array");
    ck_assert_int_eq(gmm_json_get_number(json_object_get(m, "a"), "k", "m: a", &x), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(),
                     "m: a: is an array, expected an object (looking for key 'k')");

    double v[3];
    json_t *a = json_object_get(m, "a");
    ck_assert_int_eq(gmm_json_get_numbers(a, 3, "m: a", v), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "m: a: has 2 elements, expected 3");
    ck_assert_int_eq(gmm_json_get_numbers(a, 2, "m: a", v), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "m: a[1] is a string, expected a number");
    ck_assert_uint_eq(gmm_error_index(), 1);
    json_decref(m);
}
END_TEST

START_TEST(test_setter_errors)
{
    json_t *o = json_object();
    ck_assert_int_eq(gmm_json_set_number(o, "v", NAN), GMM_EDOM);
    ck_assert_int_eq(gmm_json_set_number(o, "v", INFINITY), GMM_EDOM);
    ck_assert_int_eq(gmm_json_set_new(o, "v", NULL), GMM_ENOMEM);
    ck_assert_int_eq(gmm_json_set_string(o, "s", "\xff\xfe"), GMM_EINVAL);
    ck_assert_int_eq(gmm_json_set_new(NULL, "v", json_real(1.0)), GMM_EINVAL); /* stolen */
    ck_assert_uint_eq(json_object_size(o), 0);
    double x[3] = {1.0, -INFINITY, 2.0};
    ck_assert_ptr_null(gmm_json_numbers(x, 3));
    ck_assert_int_eq(gmm_error_status(), GMM_EDOM);
    ck_assert_uint_eq(gmm_error_index(), 1);
    json_t *empty = gmm_json_numbers(NULL, 0);
    ck_assert_uint_eq(json_array_size(empty), 0);
    json_decref(empty);
    json_decref(o);
}
END_TEST

START_TEST(test_stdin)
{
    char *path = tu_write_str(dir, "in.json", "{\"k\": [1,\n 2 x]}");
    int saved = dup(0);
    ck_assert(freopen(path, "r", stdin) != NULL);
    json_t *j = NULL;
    ck_assert_int_eq(gmm_json_read("-", &j), GMM_EPARSE);
    ck_assert_msg(!strncmp(gmm_error_message(), "<stdin>:2:4: ", 13), "message '%s'",
                  gmm_error_message());
    dup2(saved, 0);
    close(saved);
    clearerr(stdin);
    free(path);
}
END_TEST

extern Suite *io_json_suite(void);
Suite *io_json_suite(void)
{
    Suite *s = suite_create("io_json");
    TCase *tc = tcase_create("json");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_trip_exact);
    tcase_add_test(tc, test_output_format);
    tcase_add_test(tc, test_read_errors);
    tcase_add_test(tc, test_getters);
    tcase_add_test(tc, test_setter_errors);
    tcase_add_test(tc, test_stdin);
    suite_add_tcase(s, tc);
    return s;
}
