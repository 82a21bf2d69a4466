/* test_gradcheck.c -- the user-facing gradient check: right gradients pass
 * (including ~0 gradients at an optimum, and on an objective whose rounding
 * noise is far above eps |f|), a wrong one is caught and named, objective
 * failures during the differences are reported with the parameter. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/gradcheck.h"

/* log N(y; mu, s2) summed over a fixed sample, with an optional bug. */
typedef struct {
    double y[8];
    double bug;        /* multiplies d/ds2 */
    double bug_mu;     /* multiplies d/dmu */
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
        g[0] = d->bug_mu * s1 / s2;
        g[1] = d->bug * (-4.0 / s2 + ss / (2 * s2 * s2));
        g[2] = 0.3 * th[2] * th[2];
    }
    return GMM_OK;
}

typedef struct {
    iid d;
    char *name[3];
    double value[3];
    gmm_scale scale[3];
    int fixed[3];
    gmm_objective obj;
} fixture;

static void setup(fixture *f)
{
    static const double y[8] = {1.2, -0.3, 2.5, 0.7, 1.9, -1.1, 0.4, 3.3};
    memset(f, 0, sizeof *f);
    memcpy(f->d.y, y, sizeof y);
    f->d.bug = f->d.bug_mu = 1.0;
    f->d.wall = INFINITY;
    f->name[0] = "mu";
    f->name[1] = "noise.variance";
    f->name[2] = "c";
    f->value[0] = 0.5;
    f->value[1] = 2.0;
    f->value[2] = -3.0;
    f->scale[1] = GMM_SCALE_LOG;
    f->fixed[2] = 1; /* fixed parameters are checked too */
    f->obj = (gmm_objective){3, f->name, f->value, f->scale, f->fixed, iid_eval, &f->d};
}

/* What a row says agrees with its verdict: abs_error is |analytic -
 * numeric| and ok is abs_error <= allowed (the CLI prints these three). */
static void check_rows_agree(const gmm_gradcheck_result *r)
{
    for (size_t i = 0; i < r->nparam; i++) {
        const gmm_gradcheck_row *w = &r->row[i];
        double d = fabs(w->analytic - w->numeric);
        ck_assert_msg(fabs(w->abs_error - d) <= 1e-12 * d + 1e-300, "%s: abs_error %g vs %g",
                      w->name, w->abs_error, d);
        ck_assert_msg((w->ok || w->inconclusive) == (w->abs_error <= w->allowed),
                      "%s: ok %d, inconclusive %d, %g vs allowed %g", w->name, w->ok,
                      w->inconclusive, w->abs_error, w->allowed);
        ck_assert_msg(!(w->ok && w->inconclusive), "%s", w->name);
    }
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
    check_rows_agree(&r);
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
    /* the relative error of a zero gradient means nothing: large, yet ok */
    ck_assert(r.row[0].ok && r.row[1].ok);
    ck_assert_msg(r.row[0].rel_error > 1e-6 || r.row[1].rel_error > 1e-6, "%g %g",
                  r.row[0].rel_error, r.row[1].rel_error);
    check_rows_agree(&r);
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
    check_rows_agree(&r);
    ck_assert_msg(strstr(gmm_error_message(), "'noise.variance'"), "%s", gmm_error_message());
    gmm_gradcheck_result_free(&r);
    gmm_gradcheck_result_free(&r); /* idempotent */
}
END_TEST

/* 1e-4 relative on an entry of the size of the objective's (d/dmu = 2.3,
 * loglik -17.2) is 13x the allowance: still caught. */
START_TEST(test_small_relative_error_is_caught)
{
    fixture f;
    setup(&f);
    f.d.bug_mu = 1.0 + 1e-4;
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    gmm_gradcheck_result r;
    ck_assert_int_eq(gmm_gradcheck(&f.obj, &p, &r), GMM_ECHECK);
    ck_assert(!r.row[0].ok && r.row[1].ok && r.row[2].ok);
    ck_assert_msg(fabs(r.row[0].analytic - r.row[0].numeric) > 5.0 * r.row[0].allowed,
                  "difference %g, allowed %g", fabs(r.row[0].analytic - r.row[0].numeric),
                  r.row[0].allowed);
    gmm_gradcheck_result_free(&r);
}
END_TEST

/* An objective shaped like the CO2 fit's (loglik -957 at an optimum in two
 * log-parameters, a third with a large, fast-varying derivative like the
 * period's: 270.87 cos(250 u)) with rounding noise of the CO2 likelihood's
 * size: a deterministic function of theta, uniform in +-1e-8 (sd 5.8e-9,
 * 3e4 eps |f|).  Analytic errors of the size measured on the CO2 fit at its
 * optimum (3e-4 on the log scale, 3e-7 |f|) must pass, as must the exact
 * large derivative; 1e-4 relative on the large one must fail. */
typedef struct {
    double slop[2]; /* added to d/du of the two at the optimum */
    double bug;     /* multiplies the third's derivative */
    double amp;     /* half-width of the noise (1e-8: the CO2 likelihood's) */
} noisy;

static double hash_noise(const double *th, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &th[i], sizeof b);
        h ^= b;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u; /* splitmix64's finaliser */
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
        h ^= h >> 31;
    }
    return (double)(h >> 11) * 0x1.0p-52 - 1.0; /* uniform in [-1, 1) */
}

static gmm_status noisy_eval(void *ctx, const double *th, double *f, double *g)
{
    noisy *d = ctx;
    double ua = log(th[0] / 400.0), ub = log(th[1] / 20.0), uc = log(th[2]);
    *f = -957.0 - 500.0 * ua * ua - 300.0 * ub * ub + 270.87 / 250.0 * sin(250.0 * uc) +
         d->amp * hash_noise(th, 3);
    if (g) {
        g[0] = (-1000.0 * ua + d->slop[0]) / th[0];
        g[1] = (-600.0 * ub + d->slop[1]) / th[1];
        g[2] = d->bug * 270.87 * cos(250.0 * uc) / th[2];
    }
    return GMM_OK;
}

static gmm_status noisy_check_tol(noisy *d, double rel_tol, gmm_gradcheck_result *r)
{
    static char *name[3] = {"a", "b", "period"};
    static gmm_scale scale[3] = {GMM_SCALE_LOG, GMM_SCALE_LOG, GMM_SCALE_LOG};
    static int fixed[3];
    double value[3] = {400.0, 20.0, 1.0};
    gmm_objective obj = {3, name, value, scale, fixed, noisy_eval, d};
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    p.rel_tol = rel_tol;
    return gmm_gradcheck(&obj, &p, r);
}

static gmm_status noisy_check(noisy *d, gmm_gradcheck_result *r)
{
    return noisy_check_tol(d, 1e-6, r);
}

START_TEST(test_noisy_objective_at_optimum)
{
    noisy d = {{3e-4, -3e-4}, 1.0, 1e-8};
    gmm_gradcheck_result r;
    ck_assert_int_eq(noisy_check(&d, &r), GMM_OK);
    const double exact[3] = {0.0, 0.0, 270.87};
    const double value[3] = {400.0, 20.0, 1.0};
    for (size_t i = 0; i < 3; i++) {
        /* ECnoise finds the noise (sd 5.8e-9) within a factor of 3, and the
         * error bound covers the difference's actual error. */
        ck_assert_msg(r.row[i].noise > 2e-9 && r.row[i].noise < 2e-8, "%s: noise %g",
                      r.row[i].name, r.row[i].noise);
        ck_assert_msg(fabs(r.row[i].numeric - exact[i] / value[i]) <= r.row[i].fd_error,
                      "%s: fd %.10g, exact %.10g, bound %g", r.row[i].name, r.row[i].numeric,
                      exact[i] / value[i], r.row[i].fd_error);
    }
    /* The large derivative to 2e-5 relative despite the noise (measured 1e-5:
     * the bound is GSL's conservative one), a fifth of the error below. */
    ck_assert_msg(r.row[2].fd_error < 2e-5 * 270.87, "%g", r.row[2].fd_error);
    gmm_gradcheck_result_free(&r);

    d.slop[0] = 3e-3; /* 3e-6 |f|: beyond the objective's scale */
    ck_assert_int_eq(noisy_check(&d, &r), GMM_ECHECK);
    ck_assert(!r.row[0].ok && r.row[1].ok && r.row[2].ok);
    gmm_gradcheck_result_free(&r);

    d.slop[0] = 3e-4;
    d.bug = 1.0 + 1e-4; /* 0.027 on 270.87 */
    ck_assert_int_eq(noisy_check(&d, &r), GMM_ECHECK);
    ck_assert(r.row[0].ok && r.row[1].ok && !r.row[2].ok);
    gmm_gradcheck_result_free(&r);
}
END_TEST

/* The same objective with noise of 1e-2 (sd 5.8e-3, the size the Laplace
 * likelihood of a long count series reaches): the differences' error bound
 * is then far above the tolerance (1e-6 x 957), so a right gradient cannot
 * be confirmed and neither can one wrong by 0.05 -- both inconclusive,
 * never ok -- while one wrong by far more than the bound still fails. */
START_TEST(test_noisy_objective_is_inconclusive)
{
    noisy d = {{0.0, 0.0}, 1.0, 1e-2};
    gmm_gradcheck_result r;
    ck_assert_int_eq(noisy_check(&d, &r), GMM_EINCONCLUSIVE);
    ck_assert_uint_eq(r.nfail, 0);
    ck_assert_uint_eq(r.ninconclusive, 3);
    for (size_t i = 0; i < 3; i++) {
        const gmm_gradcheck_row *w = &r.row[i];
        ck_assert_msg(w->inconclusive && !w->ok, "%s", w->name);
        /* the verdict's reason: fd_error above tol = allowed - fd_error */
        ck_assert_msg(w->fd_error > w->allowed - w->fd_error, "%s: %g vs %g", w->name,
                      w->fd_error, w->allowed - w->fd_error);
        ck_assert(w->abs_error <= w->allowed);
        ck_assert(w->needed_tol > 1e-6);
    }
    ck_assert_msg(strstr(gmm_error_message(), "3 of 3 gradients inconclusive"), "%s",
                  gmm_error_message());
    ck_assert_msg(strstr(gmm_error_message(), "'a'"), "%s", gmm_error_message());
    gmm_gradcheck_result_free(&r);

    /* wrong by 0.05 on the u scale: 50 times the tolerance, under fd_error */
    d.slop[0] = 0.05;
    ck_assert_int_eq(noisy_check(&d, &r), GMM_EINCONCLUSIVE);
    ck_assert(r.row[0].inconclusive && !r.row[0].ok);
    ck_assert(fabs(r.row[0].analytic * 400.0 - 0.05) < 1e-12);
    gmm_gradcheck_result_free(&r);

    /* wrong by 100: beyond any error bound, a failure (which outranks) */
    d.slop[1] = 100.0;
    ck_assert_int_eq(noisy_check(&d, &r), GMM_ECHECK);
    ck_assert_uint_eq(r.nfail, 1);
    ck_assert(!r.row[1].ok && !r.row[1].inconclusive);
    ck_assert(r.row[1].abs_error > r.row[1].allowed);
    ck_assert(r.row[0].inconclusive);
    gmm_gradcheck_result_free(&r);

    /* the tolerance the message names decides the right gradient: ok */
    d.slop[0] = d.slop[1] = 0.0;
    ck_assert_int_eq(noisy_check(&d, &r), GMM_EINCONCLUSIVE);
    double need = 0.0;
    for (size_t i = 0; i < 3; i++)
        need = fmax(need, r.row[i].needed_tol);
    gmm_gradcheck_result_free(&r);
    ck_assert_int_eq(noisy_check_tol(&d, 1.01 * need, &r), GMM_OK);
    for (size_t i = 0; i < 3; i++)
        ck_assert(r.row[i].ok && !r.row[i].inconclusive);
    gmm_gradcheck_result_free(&r);
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
    p.rel_tol = NAN;
    ck_assert_int_eq(gmm_gradcheck_params_check(&p), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "rel_tol"));
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

/* A smooth objective with a large third derivative and little noise (f =
 * -1000 + 50 sin(3 u) + 1e-12 noise, u = log p, at p = 1: df/du = 150,
 * d3f/du3 = -1350): the 3-point rule's error, which bounds the 5-point
 * difference at the first steps, allows about 2.5e-7 there; the 5-point
 * rule's own error (central_diff4) brings the bound below 2e-8 -- and the
 * bound still covers the difference's actual error. */
static gmm_status wave_eval(void *ctx, const double *th, double *f, double *g)
{
    (void)ctx;
    double u = log(th[0]);
    *f = -1000.0 + 50.0 * sin(3.0 * u) + 1e-12 * hash_noise(th, 1);
    if (g)
        g[0] = 150.0 * cos(3.0 * u) / th[0];
    return GMM_OK;
}

START_TEST(test_smooth_objective_sharp_bound)
{
    static char *name[1] = {"p"};
    static gmm_scale scale[1] = {GMM_SCALE_LOG};
    static int fixed[1];
    double value[1] = {1.0};
    gmm_objective obj = {1, name, value, scale, fixed, wave_eval, NULL};
    gmm_gradcheck_params p;
    gmm_gradcheck_params_init(&p);
    gmm_gradcheck_result r;
    ck_assert_int_eq(gmm_gradcheck(&obj, &p, &r), GMM_OK);
    const gmm_gradcheck_row *w = &r.row[0];
    ck_assert_msg(w->ok, "%g %g", w->numeric, w->fd_error);
    ck_assert_msg(fabs(w->numeric - 150.0) <= w->fd_error, "fd %.12g, bound %g", w->numeric,
                  w->fd_error);
    ck_assert_msg(w->fd_error < 2e-8, "bound %g", w->fd_error);
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
    tcase_add_test(tc, test_noisy_objective_is_inconclusive);
    tcase_add_test(tc, test_small_relative_error_is_caught);
    tcase_add_test(tc, test_noisy_objective_at_optimum);
    tcase_add_test(tc, test_smooth_objective_sharp_bound);
    tcase_add_test(tc, test_objective_failures);
    tcase_add_test(tc, test_params_check);
    tcase_add_test(tc, test_out_of_memory_sweep);
    suite_add_tcase(s, tc);
    return s;
}
