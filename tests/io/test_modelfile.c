/* test_modelfile.c -- the model JSON: exact round trips (state-space and
 * graph models), unknown keys ignored, every required key missing or of the
 * wrong type named with the file, malformed JSON located, newer formats
 * refused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmm/alloc.h"
#include "gmm/modelfile.h"
#include "gmm/version.h"

static char tmpl[] = "/tmp/gmm_test_modelXXXXXX";

static char *temp_path(void)
{
    char *p = malloc(sizeof tmpl);
    memcpy(p, tmpl, sizeof tmpl);
    int fd = mkstemp(p);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static char *names[] = {"0.matern32.variance", "0.matern32.lengthscale",
                        "1.quasiperiodic.period", "noise.variance"};
/* Values chosen to need all 17 digits. */
static double values[] = {0.1, 1.0 / 3.0, 1.0, 2.220446049250313e-16 * 3.0};

static gmm_model ssm_model(void)
{
    gmm_model m;
    gmm_model_init(&m);
    m.desc.kernel =
        "matern32(variance=0.1, lengthscale=0.33333333333333331) + quasiperiodic(period=1)";
    m.nparam = 4;
    m.param_name = names;
    m.param_value = values;
    m.desc.likelihood = "gaussian";
    m.has_center = 1;
    m.center = 338.76543210987654;
    m.loglik = -1234.5678901234567;
    m.iterations = 42;
    m.converged = 1;
    m.desc.data.file = "data/co2.csv";
    m.desc.data.x = "decimal_year";
    m.desc.data.y = "co2_ppm";
    return m;
}

START_TEST(test_round_trip_state_space)
{
    gmm_model m = ssm_model(), r;
    char *path = temp_path();
    FILE *f = fopen(path, "w");
    ck_assert_int_eq(gmm_model_write(&m, f, path), GMM_OK);
    fclose(f);
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_OK);
    ck_assert_int_eq(r.format_version, GMM_FORMAT_VERSION);
    ck_assert_str_eq(r.tool_version, GMM_VERSION);
    ck_assert_str_eq(r.desc.kernel, m.desc.kernel);
    ck_assert_ptr_null(r.desc.precision);
    ck_assert_uint_eq(r.nparam, 4);
    for (size_t i = 0; i < 4; i++) {
        ck_assert_str_eq(r.param_name[i], names[i]); /* order kept */
        ck_assert_msg(r.param_value[i] == values[i], "%s: %.17g vs %.17g", names[i],
                      r.param_value[i], values[i]);
    }
    ck_assert_str_eq(r.desc.likelihood, "gaussian");
    ck_assert(r.has_center && r.center == m.center);
    ck_assert(r.loglik == m.loglik);
    ck_assert_uint_eq(r.iterations, 42);
    ck_assert(r.converged);
    ck_assert_str_eq(r.desc.data.file, "data/co2.csv");
    ck_assert_str_eq(r.desc.data.x, "decimal_year");
    ck_assert_str_eq(r.desc.data.y, "co2_ppm");
    ck_assert_ptr_null(r.desc.data.node);
    ck_assert_ptr_null(r.desc.graph);
    ck_assert_int_eq(r.desc.factor, GMM_MODEL_FACTOR_AUTO); /* auto: not written */
    size_t k;
    ck_assert_int_eq(gmm_model_param_index(&r, "noise.variance", &k), GMM_OK);
    ck_assert_uint_eq(k, 3);
    ck_assert_int_eq(gmm_model_param_index(&r, "nope", &k), GMM_EPARSE);
    gmm_model_free(&r);
    gmm_model_free(&r); /* re-initialised: harmless */
    unlink(path);
    free(path);
}
END_TEST

START_TEST(test_round_trip_graph_and_null_center)
{
    gmm_model m;
    gmm_model_init(&m);
    char *pn[] = {"0.edge-ou.variance", "0.edge-ou.lengthscale", "noise.variance"};
    double pv[] = {1.5, 120.25, 0.01};
    m.desc.precision = "edge-ou(variance=1.5, lengthscale=120.25)";
    m.nparam = 3;
    m.param_name = pn;
    m.param_value = pv;
    m.desc.likelihood = "gaussian";
    m.loglik = 12.5;
    m.desc.data.file = "nodes.csv";
    m.desc.data.node = "district";
    m.desc.data.y = "cases";
    m.desc.data.exposure = "population";
    m.desc.graph = "edges.csv";
    m.desc.edge_cols[0] = "from";
    m.desc.edge_cols[1] = "to";
    char *path = temp_path();
    FILE *f = fopen(path, "w");
    ck_assert_int_eq(gmm_model_write(&m, f, path), GMM_OK);
    fclose(f);
    gmm_model r;
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_OK);
    ck_assert_ptr_null(r.desc.kernel);
    ck_assert_str_eq(r.desc.precision, m.desc.precision);
    ck_assert(!r.has_center);
    ck_assert(!r.converged);
    ck_assert_str_eq(r.desc.graph, "edges.csv");
    ck_assert_str_eq(r.desc.data.node, "district");
    ck_assert_str_eq(r.desc.data.exposure, "population");
    ck_assert_ptr_null(r.desc.data.x);
    ck_assert_str_eq(r.desc.edge_cols[0], "from");
    ck_assert_str_eq(r.desc.edge_cols[1], "to");
    ck_assert_ptr_null(r.desc.edge_cols[2]);
    ck_assert(r.param_value[1] == 120.25);
    gmm_model_free(&r);
    unlink(path);
    free(path);
}
END_TEST

static const char *good =
    "{\"format_version\": 1, \"tool_version\": \"0.0.9\", \"kernel\": \"matern12\",\n"
    " \"parameters\": {\"0.matern12.variance\": 2, \"noise.variance\": 0.5},\n"
    " \"likelihood\": \"gaussian\", \"center\": null, \"loglik\": -3.25,\n"
    " \"iterations\": 0, \"converged\": false, \"data\": {\"file\": \"d.csv\"},\n"
    " \"future_key\": {\"anything\": [1, 2, 3]}}\n";

/* The factorisation a model asked for: written when band or sparse, read
 * back; a file without it reads as auto (above). */
START_TEST(test_round_trip_factor)
{
    const gmm_model_factor fs[] = {GMM_MODEL_FACTOR_BAND, GMM_MODEL_FACTOR_SPARSE};
    for (size_t i = 0; i < 2; i++) {
        gmm_model m = ssm_model(), r;
        m.desc.factor = fs[i];
        char *path = temp_path();
        FILE *f = fopen(path, "w");
        ck_assert_int_eq(gmm_model_write(&m, f, path), GMM_OK);
        fclose(f);
        ck_assert_int_eq(gmm_model_read(path, &r), GMM_OK);
        ck_assert_int_eq(r.desc.factor, fs[i]);
        gmm_model_free(&r);
        unlink(path);
        free(path);
    }
    gmm_model_factor g;
    ck_assert_int_eq(gmm_model_factor_parse("sparse", &g), 0);
    ck_assert_int_eq(g, GMM_MODEL_FACTOR_SPARSE);
    ck_assert_int_eq(gmm_model_factor_parse("cholesky", &g), -1);
    ck_assert_str_eq(gmm_model_factor_name(GMM_MODEL_FACTOR_AUTO), "auto");
}
END_TEST

START_TEST(test_unknown_keys_ignored_and_integers_accepted)
{
    char *path = temp_path();
    write_text(path, good);
    gmm_model r;
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_OK);
    ck_assert(r.param_value[0] == 2.0);
    ck_assert_str_eq(r.tool_version, "0.0.9");
    ck_assert_ptr_null(r.desc.data.x);
    gmm_model_free(&r);
    unlink(path);
    free(path);
}
END_TEST

/* Each required key removed in turn: the error names it and the file. */
static const char *required[] = {"format_version", "tool_version", "kernel", "parameters",
                                 "likelihood",     "center",       "loglik", "iterations",
                                 "converged",      "data"};

START_TEST(test_missing_required_key)
{
    const char *key = required[_i];
    char needle[64], text[1024];
    snprintf(needle, sizeof needle, "\"%s\":", key);
    /* Rename the key so the document stays valid JSON. */
    const char *at = strstr(good, needle);
    ck_assert_ptr_nonnull(at);
    size_t off = (size_t)(at - good);
    memcpy(text, good, off);
    text[off] = '\0';
    strcat(text, "\"x_");
    strcat(text, at + 1);
    char *path = temp_path();
    write_text(path, text);
    gmm_model r;
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_EPARSE);
    char want[128];
    snprintf(want, sizeof want, "%s: missing key '%s'", path, key);
    ck_assert_msg(strstr(gmm_error_message(), want), "want \"%s\", got \"%s\"", want,
                  gmm_error_message());
    ck_assert_ptr_null(r.desc.kernel); /* left initialised */
    unlink(path);
    free(path);
}
END_TEST

static const struct {
    const char *from, *to, *message;
} corruptions[] = {
    {"\"loglik\": -3.25", "\"loglik\": \"high\"", "key 'loglik' must be a number"},
    {"\"iterations\": 0", "\"iterations\": -1", "key 'iterations' must be a non-negative"},
    {"\"converged\": false", "\"converged\": 0", "key 'converged' must be true or false"},
    {"\"center\": null", "\"center\": \"x\"", "key 'center' must be a number or null"},
    {"\"noise.variance\": 0.5", "\"noise.variance\": \"x\"", "parameter 'noise.variance' must"},
    {"{\"file\": \"d.csv\"}", "{\"file\": 3}", "key 'data.file' must be a string"},
    {"{\"file\": \"d.csv\"}", "{\"x\": \"t\"}", "missing key 'data.file'"},
    {"\"format_version\": 1", "\"format_version\": 2", "format_version 2 is newer"},
    {"\"format_version\": 1", "\"format_version\": \"1\"", "'format_version' must be"},
    {"\"kernel\": \"matern12\"", "\"kernel\": \"k\", \"precision\": \"p\"", "not both"},
    {"\"kernel\": \"matern12\"", "\"precision\": \"edge-ou\"", "missing key 'graph'"},
    {"\"likelihood\": \"gaussian\"", "\"likelihood\": [1]", "key 'likelihood' must be a string"},
    {"\"parameters\": {", "\"parameters\": {\"a\": 1, \"a\": 2, ", "duplicate"},
    {"\"loglik\": -3.25,", "\"loglik\": -3.25", ":4:13: "}, /* malformed: line:col */
    {"\"loglik\": -3.25,", "\"factor\": \"dense\", \"loglik\": -3.25,", "key 'factor' must be"},
    {"\"loglik\": -3.25,", "\"factor\": 2, \"loglik\": -3.25,", "key 'factor' must be"},
};

START_TEST(test_bad_values)
{
    char text[1024];
    const char *at = strstr(good, corruptions[_i].from);
    ck_assert_ptr_nonnull(at);
    size_t off = (size_t)(at - good);
    memcpy(text, good, off);
    text[off] = '\0';
    strcat(text, corruptions[_i].to);
    strcat(text, at + strlen(corruptions[_i].from));
    char *path = temp_path();
    write_text(path, text);
    gmm_model r;
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_EPARSE);
    ck_assert_msg(strstr(gmm_error_message(), corruptions[_i].message), "case %d: got \"%s\"",
                  _i, gmm_error_message());
    ck_assert_msg(strncmp(gmm_error_message(), path, strlen(path)) == 0, "no file in \"%s\"",
                  gmm_error_message());
    unlink(path);
    free(path);
}
END_TEST

START_TEST(test_io_errors_and_bad_writes)
{
    gmm_model r;
    ck_assert_int_eq(gmm_model_read("/nonexistent/model.json", &r), GMM_EIO);
    ck_assert(strstr(gmm_error_message(), "/nonexistent/model.json"));
    char *path = temp_path();
    write_text(path, "");
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_EPARSE);
    write_text(path, "[1, 2]");
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_EPARSE);
    ck_assert(strstr(gmm_error_message(), "JSON object"));
    unlink(path);
    free(path);

    FILE *f = tmpfile();
    gmm_model m = ssm_model();
    m.loglik = NAN;
    ck_assert_int_eq(gmm_model_write(&m, f, "out.json"), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "loglik"));
    m = ssm_model();
    double bad[] = {0.1, INFINITY, 1, 1};
    m.param_value = bad;
    ck_assert_int_eq(gmm_model_write(&m, f, "out.json"), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "0.matern32.lengthscale"));
    m = ssm_model();
    m.desc.precision = "edge-ou";
    ck_assert_int_eq(gmm_model_write(&m, f, "out.json"), GMM_EINVAL);
    m = ssm_model();
    m.desc.data.file = NULL;
    ck_assert_int_eq(gmm_model_write(&m, f, NULL), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "<stdout>: model without 'data.file'"));
    fclose(f);
    /* A stream that cannot be written. */
    FILE *ro = fopen("/dev/null", "r");
    m = ssm_model();
    ck_assert_int_eq(gmm_model_write(&m, ro, "ro.json"), GMM_EIO);
    fclose(ro);
}
END_TEST

START_TEST(test_save_atomic)
{
    gmm_model m = ssm_model(), r;
    char *path = temp_path();
    ck_assert_int_eq(gmm_model_save(&m, path), GMM_OK);
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_OK);
    ck_assert(r.loglik == m.loglik && r.param_value[3] == values[3]);
    gmm_model_free(&r);
    /* A model that cannot be written leaves the old file untouched. */
    m.loglik = NAN;
    ck_assert_int_eq(gmm_model_save(&m, path), GMM_EINVAL);
    ck_assert_int_eq(gmm_model_read(path, &r), GMM_OK);
    ck_assert(r.loglik == -1234.5678901234567);
    gmm_model_free(&r);
    unlink(path);
    free(path);
    m = ssm_model();
    ck_assert_int_eq(gmm_model_save(&m, "/nonexistent/dir/model.json"), GMM_EIO);
}
END_TEST

/* Every allocation of a read failing in turn: GMM_ENOMEM, nothing leaked,
 * the struct left initialised. */
START_TEST(test_read_out_of_memory_sweep)
{
    gmm_model m = ssm_model(), r;
    m.desc.graph = "edges.csv";
    m.desc.edge_cols[0] = "a";
    m.desc.edge_cols[1] = "b";
    m.desc.edge_cols[2] = "len";
    m.desc.data.node = "node";
    char *path = temp_path();
    ck_assert_int_eq(gmm_model_save(&m, path), GMM_OK);
    gmm_status st = GMM_ENOMEM;
    long k;
    for (k = 0; k < 200 && st == GMM_ENOMEM; k++) {
        gmm_alloc_fail_after(k);
        st = gmm_model_read(path, &r);
        gmm_alloc_fail_after(-1);
        if (st == GMM_ENOMEM)
            ck_assert(r.nparam == 0 && r.desc.kernel == NULL && r.desc.data.file == NULL);
    }
    ck_assert_int_eq(st, GMM_OK);
    ck_assert(k > 10);
    ck_assert_str_eq(r.desc.edge_cols[2], "len");
    gmm_model_free(&r);
    unlink(path);
    free(path);
}
END_TEST

Suite *io_modelfile_suite(void)
{
    Suite *s = suite_create("io_modelfile");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_round_trip_state_space);
    tcase_add_test(tc, test_round_trip_factor);
    tcase_add_test(tc, test_round_trip_graph_and_null_center);
    tcase_add_test(tc, test_unknown_keys_ignored_and_integers_accepted);
    tcase_add_loop_test(tc, test_missing_required_key, 0,
                        (int)(sizeof required / sizeof required[0]));
    tcase_add_loop_test(tc, test_bad_values, 0, (int)(sizeof corruptions / sizeof corruptions[0]));
    tcase_add_test(tc, test_io_errors_and_bad_writes);
    tcase_add_test(tc, test_save_atomic);
    tcase_add_test(tc, test_read_out_of_memory_sweep);
    suite_add_tcase(s, tc);
    return s;
}
