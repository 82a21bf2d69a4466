/* test_gradcheck.c -- the user-facing gradient check: right gradients pass
 * (including ~0 gradients at an optimum), a wrong one is caught and named,
 * objective failures during the differences are reported with the
 * parameter. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/gradcheck.h"

/* log N(y; mu, s2) summed over a fixed sample, with an optional bug. */
typedef struct {
    double y[8];
    double bug;        /* multiplies d/ds2 */
    double wall;       /* s2 >= wall: GMM_ENOTPD */
} iid;

static gmm_status iid_eval(void *ctx, const double *th, double *f, double *g)
{
    iid *d = ctx;
    double mu = th[0], s2 = th[1], ss = 0.0, s1 = 0.0;
    if (s2 >= d->wall)
        return gmm_error_at(GMM_ENOTPD, 2, "precision not positive definite at row 2");
    for (int i = 0; i < 8; i++) {
        ss += (d->y[i] - mu) * (d->y[i] - mu);
        s1 += d->y[i] - mu;
    }
    *f = -4.0 * log(6.283185307179586 * s2) - ss / (2 * s2) + 0.1 * th[2] * th[2] * th[2];
    if (g) {
        g[0] = s1 / s2;
        g[1] = d->bug * (-4.0 / s2 + ss / (2 * s2 * s2));
        g[2] = 0.3 * th[2] * th[2];
    }
    return GMM_OK;
}

typedef struct {
    iid d;
    char *name[3];
    double value[3];
    int positive[3], fixed[3];
    gmm_objective obj;
} fixture;

static void setup(fixture *f)
{
    static const double y[8] = {1.2, -0.3, 2.5, 0.7, 1.9, -1.1, 0.4, 3.3};
    memset(f, 0, sizeof *f);
    memcpy(f->d.y, y, sizeof y);
    f->d.bug = 1.0;
    f->d.wall = INFINITY;
    f->name[0] = "mu";
    f->name[1] = "noise.variance";
    f->name[2] = "c";
    f->value[0] = 0.5;
    f->value[1] = 2.0;
    f->value[2] = -3.0;
    f->positive[1] = 1;
    f->fixed[2] = 1; /* fixed parameters are checked too */
    f->obj = (gmm_objective){3, f->name, f->value, f->positive, f->fixed, iid_eval, &f->d};
}

START_TEST(test_correct_gradient_passes)
{
    fixture f;
    setup(&f);
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    gmm_gradcheck_result r;
    ck_assert_int_eq(gmm_gradcheck(&f.obj, &p, &r), GMM_OK);
    ck_assert_uint_eq(r.nparam, 3);
    ck_assert_uint_eq(r.nfail, 0);
    for (size_t i = 0; i < 3; i++) {
        ck_assert(r.row[i].ok);
        ck_assert_str_eq(r.row[i].name, f.name[i]);
        ck_assert(r.row[i].value == f.value[i]);
        ck_assert_msg(r.row[i].rel_error < 1e-8, "%s: %g", r.row[i].name, r.row[i].rel_error);
    }
    /* Natural scale for the positive one: d/ds2 itself. */
    double ss = 0.0;
    for (int i = 0; i < 8; i++)
        ss += (f.d.y[i] - 0.5) * (f.d.y[i] - 0.5);
    ck_assert(fabs(r.row[1].numeric - (-4.0 / 2.0 + ss / 8.0)) < 1e-8);
    ck_assert(f.value[1] == 2.0); /* untouched */
    gmm_gradcheck_result_free(&r);
}
END_TEST

START_TEST(test_zero_gradient_at_optimum_passes)
{
    fixture f;
    setup(&f);
    double m = 0.0, s = 0.0;
    for (int i = 0; i < 8; i++)
        m += f.d.y[i] / 8;
    for (int i = 0; i < 8; i++)
        s += (f.d.y[i] - m) * (f.d.y[i] - m) / 8;
    f.value[0] = m;
    f.value[1] = s;
    f.value[2] = 0.0;
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    gmm_gradcheck_result r;
    ck_assert_int_eq(gmm_gradcheck(&f.obj, &p, &r), GMM_OK);
    ck_assert(fabs(r.row[0].analytic) < 1e-12 && fabs(r.row[1].analytic) < 1e-12);
    gmm_gradcheck_result_free(&r);
}
END_TEST

START_TEST(test_wrong_gradient_is_caught)
{
    fixture f;
    setup(&f);
    f.d.bug = 1.001; /* 0.1% off */
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    gmm_gradcheck_result r;
    ck_assert_int_eq(gmm_gradcheck(&f.obj, &p, &r), GMM_ECHECK);
    ck_assert_uint_eq(r.nfail, 1);
    ck_assert(r.row[0].ok && !r.row[1].ok && r.row[2].ok);
    ck_assert(fabs(r.row[1].rel_error - 1e-3) < 1e-5);
    ck_assert_msg(strstr(gmm_error_message(), "'noise.variance'"), "%s", gmm_error_message());
    gmm_gradcheck_result_free(&r);
    gmm_gradcheck_result_free(&r); /* idempotent */
}
END_TEST

START_TEST(test_objective_failures)
{
    fixture f;
    setup(&f);
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    gmm_gradcheck_result r;
    /* Fails just above the point: inside the difference stencil. */
    f.d.wall = 2.0 * exp(5e-5);
    ck_assert_int_eq(gmm_gradcheck(&f.obj, &p, &r), GMM_ENOTPD);
    ck_assert_msg(strstr(gmm_error_message(), "gradcheck: 'noise.variance' at 2.0"), "%s",
                  gmm_error_message());
    ck_assert_msg(strstr(gmm_error_message(), "row 2"), "%s", gmm_error_message());
    ck_assert_ptr_null(r.row);
    /* Fails at the point itself. */
    f.d.wall = 1.0;
    ck_assert_int_eq(gmm_gradcheck(&f.obj, &p, &r), GMM_ENOTPD);
    ck_assert(strstr(gmm_error_message(), "at the given parameters"));
    /* A positive parameter that is negative (0 is its boundary: allowed,
     * reported as not checked). */
    f.d.wall = INFINITY;
    f.value[1] = -1.0;
    ck_assert_int_eq(gmm_gradcheck(&f.obj, &p, &r), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "noise.variance"));
}
END_TEST

START_TEST(test_params_check)
{
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    ck_assert_int_eq(gmm_gradcheck_params_check(&p), GMM_OK);
    p.step = 0;
    ck_assert_int_eq(gmm_gradcheck_params_check(&p), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "step"));
    gmm_gradcheck_params_init(&p);
    p.rel_tol = -1;
    ck_assert_int_eq(gmm_gradcheck_params_check(&p), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "rel_tol"));
    gmm_gradcheck_params_init(&p);
    p.abs_tol = NAN;
    ck_assert_int_eq(gmm_gradcheck_params_check(&p), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "abs_tol"));
}
END_TEST

START_TEST(test_out_of_memory_sweep)
{
    fixture f;
    setup(&f);
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    gmm_gradcheck_result r;
    gmm_status st = GMM_ENOMEM;
    long k;
    for (k = 0; k < 50 && st == GMM_ENOMEM; k++) {
        gmm_alloc_fail_after(k);
        st = gmm_gradcheck(&f.obj, &p, &r);
        gmm_alloc_fail_after(-1);
        if (st == GMM_ENOMEM)
            ck_assert_ptr_null(r.row);
    }
    ck_assert_int_eq(st, GMM_OK);
    ck_assert(k > 1);
    gmm_gradcheck_result_free(&r);
}
END_TEST

Suite *infer_gradcheck_suite(void)
{
    Suite *s = suite_create("infer_gradcheck");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_correct_gradient_passes);
    tcase_add_test(tc, test_zero_gradient_at_optimum_passes);
    tcase_add_test(tc, test_wrong_gradient_is_caught);
    tcase_add_test(tc, test_objective_failures);
    tcase_add_test(tc, test_params_check);
    tcase_add_test(tc, test_out_of_memory_sweep);
    suite_add_tcase(s, tc);
    return s;
}
