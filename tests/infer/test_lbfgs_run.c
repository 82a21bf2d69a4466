/* test_lbfgs_run.c -- the L-BFGS driver fit and vi share (infer_impl.h):
 * the minimum of a quadratic, a refused start, refused trial points that
 * never become the anchor, the decrease test, and hooks that stop a run;
 * the gradient-only polish past f's resolution. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "../../src/infer/infer_impl.h"

#define NV 4

typedef struct {
    double bound;     /* x[0] < bound, or refused */
    int refuse_start; /* every point refused */
    size_t evals, refused;
    size_t stop_at;   /* accepted: stop at this iteration (0: never) */
    size_t after_at;  /* after: stop at this iteration (0: never) */
    double hole;      /* eval_coarse: |x[0] - 2| < hole refused */
    infer_lbfgs *d;
} quad;

/* f = sum_i (i + 1) (x_i - 2)^2 / 2, minimum 0 at x = 2. */
static int eval(void *ctx, const double *x, double *f, double *g, double step)
{
    quad *q = ctx;
    (void)step;
    q->evals++;
    if (q->refuse_start || !(x[0] < q->bound)) {
        q->refused++;
        gmm_error(GMM_EDOM, "x0 = %g outside the domain", x[0]);
        return 0;
    }
    *f = 0.0;
    for (size_t i = 0; i < NV; i++) {
        double a = (double)(i + 1), r = x[i] - 2.0;
        *f += 0.5 * a * r * r;
        g[i] = a * r;
    }
    return 1;
}

static int accepted(void *ctx, const double *x, double f, double gnorm)
{
    quad *q = ctx;
    (void)gnorm;
    ck_assert(x[0] < q->bound && isfinite(f));
    ck_assert(f == q->d->f0 && !memcmp(x, q->d->u0, NV * sizeof *x));
    return q->stop_at && q->d->iter == q->stop_at;
}

static int after(void *ctx, const double *x)
{
    quad *q = ctx;
    (void)x;
    return q->after_at && q->d->iter == q->after_at;
}

static void setup(infer_lbfgs *d, quad *q)
{
    memset(q, 0, sizeof *q);
    q->bound = INFINITY;
    q->d = d;
    ck_assert_int_eq(infer_lbfgs_alloc(d, NV, 3), GMM_OK);
    d->memory = 6;
    d->epsilon = 1e-8;
    d->max_iterations = 200;
    d->max_linesearch = 40;
    d->delta = 0.0;
    d->eval = eval;
    d->accepted = accepted;
    d->after = after;
    d->ctx = q;
}

START_TEST(test_lbfgs_quadratic_minimum)
{
    infer_lbfgs d;
    quad q;
    setup(&d, &q);
    double x[NV] = {0, -1, 3, 0.5};
    ck_assert_int_eq(infer_lbfgs_run(&d, x, "test"), GMM_OK);
    ck_assert(infer_lbfgs_converged(d.ret));
    ck_assert(!d.start_failed && !d.stopped && !d.stopped_delta);
    for (size_t i = 0; i < NV; i++)
        ck_assert_msg(fabs(x[i] - 2.0) < 1e-7, "x[%zu] = %.17g", i, x[i]);
    ck_assert(d.f0 < 1e-14 && infer_lbfgs_gnorm(&d) <= 1e-8 * fmax(1.0, 4.0));
    infer_lbfgs_free(&d);
}
END_TEST

START_TEST(test_lbfgs_refused_start)
{
    infer_lbfgs d;
    quad q;
    setup(&d, &q);
    q.refuse_start = 1;
    double x[NV] = {0, -1, 3, 0.5}, x0[NV];
    memcpy(x0, x, sizeof x);
    ck_assert_int_eq(infer_lbfgs_run(&d, x, "test"), GMM_OK);
    ck_assert(d.start_failed);
    ck_assert_uint_eq(q.evals, 1);
    ck_assert_str_eq(d.fail_msg, "x0 = 0 outside the domain");
    ck_assert(!memcmp(x, x0, sizeof x)); /* not overwritten */
    infer_lbfgs_free(&d);
}
END_TEST

START_TEST(test_lbfgs_refused_trials_stay_outside)
{
    /* the minimum (x0 = 2) lies beyond the domain's edge x0 < 1.5: trials
     * beyond it are refused and mirrored, the run ends inside, towards the
     * edge, far below the start's f (12.75), and no accepted iterate is
     * outside (accepted asserts it) */
    infer_lbfgs d;
    quad q;
    setup(&d, &q);
    q.bound = 1.5;
    d.delta = 1e-12;
    double x[NV] = {0, -1, 3, 0.5};
    ck_assert_int_eq(infer_lbfgs_run(&d, x, "test"), GMM_OK);
    ck_assert(!d.start_failed);
    ck_assert(q.refused > 0);
    ck_assert_msg(x[0] < 1.5 && x[0] > 1.0, "x[0] = %.17g", x[0]);
    ck_assert_msg(d.f0 < 0.2, "f = %.17g", d.f0);
    ck_assert(!memcmp(x, d.u0, sizeof x));
    infer_lbfgs_free(&d);
}
END_TEST

START_TEST(test_lbfgs_stops)
{
    infer_lbfgs d;
    quad q;
    /* a decrease test that always passes stops after `past` iterations */
    setup(&d, &q);
    d.delta = 1e300;
    double x[NV] = {0, -1, 3, 0.5};
    ck_assert_int_eq(infer_lbfgs_run(&d, x, "test"), GMM_OK);
    ck_assert(d.stopped_delta && !d.stopped);
    ck_assert_uint_eq(d.iter, 3);
    infer_lbfgs_free(&d);
    /* the accepted hook stops at iteration 2; x is that iterate */
    setup(&d, &q);
    q.stop_at = 2;
    double y[NV] = {0, -1, 3, 0.5};
    ck_assert_int_eq(infer_lbfgs_run(&d, y, "test"), GMM_OK);
    ck_assert(d.stopped && !d.stopped_delta);
    ck_assert_uint_eq(d.iter, 2);
    ck_assert(!memcmp(y, d.u0, sizeof y));
    infer_lbfgs_free(&d);
    /* the after hook, run after the decrease test, stops too */
    setup(&d, &q);
    q.after_at = 1;
    double z[NV] = {0, -1, 3, 0.5};
    ck_assert_int_eq(infer_lbfgs_run(&d, z, "test"), GMM_OK);
    ck_assert(d.stopped);
    ck_assert_uint_eq(d.iter, 1);
    infer_lbfgs_free(&d);
    /* liblbfgs refusing its parameters is the driver's error */
    setup(&d, &q);
    d.epsilon = -1.0;
    ck_assert_int_eq(infer_lbfgs_run(&d, z, "test"), GMM_EINVAL);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "test: liblbfgs rejected"));
    infer_lbfgs_free(&d);
}
END_TEST

/* f = sum_i a_i (x_i - 2)^2 / 2 with a_i = 10^(2 i) (condition 1e6), f
 * rounded to a multiple of 1e-9: its decrease vanishes in that rounding
 * long before its exact gradient does. */
static int eval_coarse(void *ctx, const double *x, double *f, double *g, double step)
{
    quad *q = ctx;
    (void)step;
    q->evals++;
    if (fabs(x[0] - 2.0) < q->hole) {
        q->refused++;
        gmm_error(GMM_EDOM, "x0 = %g outside the domain", x[0]);
        return 0;
    }
    double s = 0.0;
    for (size_t i = 0; i < NV; i++) {
        double a = pow(10.0, 2.0 * (double)i), r = x[i] - 2.0;
        s += 0.5 * a * r * r;
        g[i] = a * r;
    }
    *f = 1e-9 * round(s / 1e-9);
    return 1;
}

START_TEST(test_lbfgs_polish_past_f_rounding)
{
    infer_lbfgs d;
    quad q;
    setup(&d, &q);
    d.eval = eval_coarse;
    d.accepted = NULL;
    d.after = NULL;
    d.epsilon = 1e-12;
    double x[NV] = {0, -1, 3, 0.5};
    ck_assert_int_eq(infer_lbfgs_run(&d, x, "test"), GMM_OK);
    /* f's rounding ends the run: a failed line search, |g| far above 1e-12 */
    ck_assert(infer_lbfgs_line_search_stop(d.ret));
    double gn = infer_lbfgs_gnorm(&d), f0 = d.f0;
    ck_assert_msg(gn > 1e-7, "|g| %g: the run did not stall", gn);
    size_t it = 0;
    ck_assert_int_eq(infer_lbfgs_polish(&d, 1e-10, 1e-9, 200, &it), GMM_OK);
    ck_assert_msg(infer_lbfgs_gnorm(&d) <= 1e-10, "|g| %g after %zu iterations",
                  infer_lbfgs_gnorm(&d), it);
    ck_assert(it > 0 && it < 200);
    ck_assert(d.f0 <= f0 + 1e-9);
    for (size_t i = 0; i < NV; i++) /* |x - 2| <= |g_i| / a_i */
        ck_assert_double_eq_tol(d.u0[i], 2.0, 1e-10);
    infer_lbfgs_free(&d);
}
END_TEST

/* Trial points the objective refuses shrink the polish's bracket and
 * never become the anchor; the polish stops at the domain's edge when the
 * stationary point lies beyond it. */
START_TEST(test_lbfgs_polish_refused_trials)
{
    infer_lbfgs d;
    quad q;
    setup(&d, &q);
    d.eval = eval_coarse;
    d.accepted = NULL;
    d.after = NULL;
    d.epsilon = 1e-12;
    double x[NV] = {0, -1, 3, 0.5};
    ck_assert_int_eq(infer_lbfgs_run(&d, x, "test"), GMM_OK);
    ck_assert_msg(fabs(d.u0[0] - 2.0) > 1e-9, "x0 %.17g", d.u0[0]);
    q.hole = 0.5 * fabs(d.u0[0] - 2.0); /* the minimum outside */
    size_t it = 0;
    ck_assert_int_eq(infer_lbfgs_polish(&d, 1e-10, 1e-9, 200, &it), GMM_OK);
    ck_assert(fabs(d.u0[0] - 2.0) >= q.hole);
    ck_assert(q.refused > 0);
    ck_assert(infer_lbfgs_gnorm(&d) > 1e-10);
    infer_lbfgs_free(&d);
}
END_TEST

Suite *infer_lbfgs_run_suite(void)
{
    Suite *s = suite_create("infer_lbfgs_run");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_lbfgs_quadratic_minimum);
    tcase_add_test(tc, test_lbfgs_refused_start);
    tcase_add_test(tc, test_lbfgs_refused_trials_stay_outside);
    tcase_add_test(tc, test_lbfgs_stops);
    tcase_add_test(tc, test_lbfgs_polish_past_f_rounding);
    tcase_add_test(tc, test_lbfgs_polish_refused_trials);
    suite_add_tcase(s, tc);
    return s;
}
