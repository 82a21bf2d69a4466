/* test_draws_origin.c -- the model draws belong to: the digest against
 * FNV-1a's published values, the origin through its JSON and a sidecar
 * file, and each difference refused with the model the draws came from. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/draws.h"
#include "gmm/status.h"
#include "support/tmpfiles.h"

static const char *names[] = {"0.matern12.variance", "likelihood.variance"};

static void origin(gmm_draws_origin *o, double *val)
{
    memset(o, 0, sizeof *o);
    o->model_file = "/m/a.json";
    o->model_digest = "fnv1a64:0000000000000001";
    o->likelihood = "gaussian";
    o->latent = "state-space";
    o->latent_size = 12;
    o->rows = 12;
    o->sites_digest = "fnv1a64:00000000000000aa";
    o->data_digest = "fnv1a64:00000000000000bb";
    o->nparam = 2;
    o->param_name = names;
    o->param_value = val;
}

START_TEST(test_digest)
{
    /* FNV-1a 64 of "", "a" and "foobar" (the FNV reference's test vectors) */
    char out[32];
    uint64_t h;
    gmm_digest_init(&h);
    gmm_digest_format(h, out);
    ck_assert_str_eq(out, "fnv1a64:cbf29ce484222325");
    gmm_digest_add(&h, "a", 1);
    gmm_digest_format(h, out);
    ck_assert_str_eq(out, "fnv1a64:af63dc4c8601ec8c");
    gmm_digest_init(&h);
    gmm_digest_add(&h, "foo", 3);
    gmm_digest_add(&h, "bar", 3);
    gmm_digest_format(h, out);
    ck_assert_str_eq(out, "fnv1a64:85944171f73967e8");
    char *dir = tu_mkdtemp(), *p = tu_write_str(dir, "f", "foobar");
    ck_assert_int_eq(gmm_digest_file(p, out), GMM_OK);
    ck_assert_str_eq(out, "fnv1a64:85944171f73967e8");
    char *q = tu_path(dir, "absent");
    ck_assert_int_eq(gmm_digest_file(q, out), GMM_EIO);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "absent"));
    free(p);
    free(q);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* rec (from o at values v0, sampled flags) checked against cur at v1. */
static gmm_status check(const gmm_draws_origin *rec_o, const gmm_draws_origin *cur, int *same)
{
    json_t *rec = NULL;
    ck_assert_int_eq(gmm_draws_origin_json(rec_o, &rec), GMM_OK);
    gmm_status s = gmm_draws_origin_check(rec, cur, same);
    json_decref(rec);
    return s;
}

START_TEST(test_check)
{
    double v0[] = {0.7, 0.0315}, v1[] = {0.7, 0.0315};
    gmm_draws_origin a, b;
    int same;
    origin(&a, v0);
    origin(&b, v1);
    ck_assert_int_eq(check(&a, &b, &same), GMM_OK);
    ck_assert_int_eq(same, 1);
    /* the same model in another file: belongs, but said */
    b.model_digest = "fnv1a64:0000000000000002";
    ck_assert_int_eq(check(&a, &b, &same), GMM_OK);
    ck_assert_int_eq(same, 0);
    /* every identifying field, one at a time */
    static const char *why[] = {"another likelihood",        "another latent family",
                                "another number of latents", "another number of data rows",
                                "other inputs or nodes",     "other data"};
    for (int k = 0; k < 6; k++) {
        origin(&b, v1);
        switch (k) {
        case 0: b.likelihood = "poisson"; break;
        case 1: b.latent = "graph"; break;
        case 2: b.latent_size = 24; break;
        case 3: b.rows = 11; break;
        case 4: b.sites_digest = "fnv1a64:00000000000000ab"; break;
        default: b.data_digest = "fnv1a64:00000000000000bc"; break;
        }
        ck_assert_int_eq(check(&a, &b, &same), GMM_EINVAL);
        ck_assert_msg(strstr(gmm_error_message(), why[k]), "%s", gmm_error_message());
        ck_assert_msg(strstr(gmm_error_message(),
                             "made from /m/a.json (gaussian, state-space, 12 latents, 12 rows)"),
                      "%s", gmm_error_message());
    }
    /* a fixed value that differs in the last bit is another model */
    origin(&b, v1);
    v1[1] = 0.031500000000000007;
    ck_assert_int_eq(check(&a, &b, &same), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "likelihood.variance = 0.0315"));
    /* ... unless the draws sampled it */
    int sampled[] = {0, 1};
    a.sampled = sampled;
    ck_assert_int_eq(check(&a, &b, &same), GMM_OK);
    v1[0] = 0.8;
    ck_assert_int_eq(check(&a, &b, &same), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "0.matern12.variance"));
    /* other parameter names */
    static const char *other[] = {"0.matern32.variance", "likelihood.variance"};
    origin(&b, v0);
    b.param_name = other;
    a.sampled = NULL;
    ck_assert_int_eq(check(&a, &b, &same), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "no parameter '0.matern32.variance'"));
}
END_TEST

START_TEST(test_sidecar)
{
    char *dir = tu_mkdtemp(), *d = tu_write_str(dir, "d.csv", ".chain,mu\n1,0\n");
    json_t *o = NULL;
    /* none: no sidecar, stdin, a sidecar of an earlier version */
    ck_assert_int_eq(gmm_draws_origin_read(d, &o), GMM_OK);
    ck_assert_ptr_null(o);
    ck_assert_int_eq(gmm_draws_origin_read("-", &o), GMM_OK);
    ck_assert_ptr_null(o);
    char *j = tu_write_str(dir, "d.csv.json", "{\"command\": \"hmc\"}\n");
    ck_assert_int_eq(gmm_draws_origin_read(d, &o), GMM_OK);
    ck_assert_ptr_null(o);
    free(j);
    j = tu_write_str(dir, "d.csv.json", "{\"origin\": 3}\n");
    ck_assert_int_eq(gmm_draws_origin_read(d, &o), GMM_EPARSE);
    free(j);
    j = tu_write_str(dir, "d.csv.json", "{\"origin\": {\"likelihood\": \"poisson\"}}\n");
    ck_assert_int_eq(gmm_draws_origin_read(d, &o), GMM_OK);
    ck_assert_ptr_nonnull(o);
    ck_assert_str_eq(json_string_value(json_object_get(o, "likelihood")), "poisson");
    /* malformed: a missing key is a parse error, not a match */
    double v[] = {0.7, 0.0315};
    gmm_draws_origin cur;
    int same;
    origin(&cur, v);
    ck_assert_int_eq(gmm_draws_origin_check(o, &cur, &same), GMM_EPARSE);
    json_decref(o);
    free(j);
    free(d);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

/* Where the sidecar of a draws file is: PATH.json; for CmdStan's
 * PREFIX_N.csv[.partial], the set's PREFIX.csv.json or PREFIX.json
 * (.partial.json) when it says "format": "cmdstan". */
static void expect_sidecar(const char *dir, const char *file, const char *want)
{
    char *path = tu_path(dir, file), *side = (char *)1;
    ck_assert_int_eq(gmm_draws_sidecar(path, &side), GMM_OK);
    if (!want) {
        ck_assert_msg(side == NULL, "%s: sidecar %s, expected none", file, side);
    } else {
        char *w = tu_path(dir, want);
        ck_assert_ptr_nonnull(side);
        ck_assert_str_eq(side, w);
        free(w);
    }
    free(side);
    free(path);
}

START_TEST(test_sidecar_path)
{
    char *dir = tu_mkdtemp();
    static const char *const made[] = {"a.csv.json", "b.json", "c.json", "c_1.csv.json",
                                       "d.csv.partial.json", "e.partial.json"};
    char *f[6];
    for (int k = 0; k < 6; k++)
        f[k] = tu_write_str(dir, made[k], k == 2 ? "{\"format\": \"csv\"}\n"
                                                 : "{\"format\": \"cmdstan\"}\n");
    expect_sidecar(dir, "a_1.csv", "a.csv.json");
    expect_sidecar(dir, "a_12.csv", "a.csv.json");
    expect_sidecar(dir, "b_2.csv", "b.json");
    expect_sidecar(dir, "c_1.csv", "c_1.csv.json"); /* PATH.json first */
    expect_sidecar(dir, "c_2.csv", NULL);           /* c.json is no cmdstan sidecar */
    expect_sidecar(dir, "d_1.csv.partial", "d.csv.partial.json");
    expect_sidecar(dir, "e_1.csv.partial", "e.partial.json");
    expect_sidecar(dir, "a_.csv", NULL);
    expect_sidecar(dir, "a_1.tsv", NULL);
    expect_sidecar(dir, "_1.csv", NULL);
    char *side = (char *)1;
    ck_assert_int_eq(gmm_draws_sidecar("-", &side), GMM_OK);
    ck_assert_ptr_null(side);
    for (int k = 0; k < 6; k++)
        free(f[k]);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

Suite *io_draws_origin_suite(void)
{
    Suite *s = suite_create("io_draws_origin");
    TCase *tc = tcase_create("origin");
    tcase_add_test(tc, test_digest);
    tcase_add_test(tc, test_check);
    tcase_add_test(tc, test_sidecar);
    tcase_add_test(tc, test_sidecar_path);
    suite_add_tcase(s, tc);
    return s;
}
