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

Suite *io_draws_origin_suite(void)
{
    Suite *s = suite_create("io_draws_origin");
    TCase *tc = tcase_create("origin");
    tcase_add_test(tc, test_digest);
    tcase_add_test(tc, test_check);
    tcase_add_test(tc, test_sidecar);
    suite_add_tcase(s, tc);
    return s;
}
