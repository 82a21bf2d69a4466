/* test_wide_band.c -- the evaluations repeated by fit, HMC and VI allocate
 * nothing once their workspaces exist, at a bandwidth (>= 48) where the
 * band Cholesky and its reverse take their blocked paths: the exact
 * Gaussian likelihood with its gradient (marglik, the stacked prior's
 * log-determinant on its constrained subspace), the Laplace approximation
 * behind fit's objective, the joint log density of HMC --sample-hyper
 * (the whitening at every theta and its reverse mode) and VI's ELBO.  Each
 * runs once to size what grows on first use, then again with every
 * allocation failing (alloc.h's count-down injector), which must give the
 * same numbers. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/stack.h"
#include "gmm/vi.h"
#include "support/testutil.h"

/* rw1 over NT values (proper: a second iid instead) + iid over NA levels,
 * one row per pair: each level of the one term is coupled to every level of
 * the other, so no ordering has a bandwidth below min(NT, NA).  rw1's
 * sum-to-zero is a constraint, whose prior log-determinant the stack
 * computes; without it the callers factor Q themselves. */
enum { NT = 52, NA = 52, NROW = NT * NA };

typedef struct {
    size_t lev[NROW], levt[NROW];
    double val[NROW], y[NROW], cnt[NROW];
    gmm_latent *lat;
} wide;

static void wide_make(wide *w, int proper)
{
    tu_rng r;
    tu_rng_seed(&r, 48);
    for (size_t t = 0; t < NT; t++)
        for (size_t a = 0; a < NA; a++) {
            size_t i = t * NA + a;
            w->val[i] = (double)t;
            w->lev[i] = a;
            double f = sin(0.2 * (double)t) + 0.3 * tu_normal(&r);
            w->y[i] = f + 0.5 * tu_normal(&r);
            w->cnt[i] = floor(3.0 * exp(0.3 * f) * tu_uniform(&r) + 0.5);
        }
    w->y[7] = NAN;
    for (size_t i = 0; i < NROW; i++)
        w->levt[i] = i / NA;
    gmm_stack_term t[2] = {
        {.model = GMM_STACK_RW1, .name = "f.t", .value = w->val, .variance = 0.4},
        {.model = GMM_STACK_IID, .name = "f.a", .nlevel = NA, .level = w->lev, .variance = 0.7},
    };
    if (proper)
        t[0] = (gmm_stack_term){.model = GMM_STACK_IID, .name = "f.t", .nlevel = NT,
                                .level = w->levt, .variance = 0.4};
    ck_assert_int_eq(gmm_latent_stack_alloc(NROW, 2, t, 0, &w->lat), GMM_OK);
    ck_assert_uint_ge(gmm_latent_bandwidth(w->lat), 48);
    ck_assert_uint_eq(gmm_latent_nconstr(w->lat) > 0, !proper);
}

/* Bitwise equality of two runs' numbers. */
static void same(const double *a, const double *b, size_t n, const char *what)
{
    ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "%s differs under injection", what);
}

START_TEST(test_gaussian_allocates_nothing)
{
    wide w;
    wide_make(&w, _i);
    size_t np = gmm_latent_nparam(w.lat);
    const double *th = gmm_latent_param_start(w.lat);
    double ll[2], nb[2], *tb = malloc(2 * np * sizeof *tb);
    gmm_status st[2];
    for (int k = 0; k < 2; k++) {
        gmm_alloc_fail_after(k ? 0 : -1);
        st[k] = gmm_latent_gaussian(w.lat, th, w.y, 0.3, &ll[k], tb + k * np, &nb[k]);
        gmm_alloc_fail_after(-1);
        ck_assert_msg(st[k] == GMM_OK, "run %d: %s", k, gmm_error_message());
    }
    same(ll, ll + 1, 1, "log likelihood");
    same(tb, tb + np, np, "gradient");
    same(nb, nb + 1, 1, "noise gradient");
    free(tb);
    gmm_latent_free(w.lat);
}
END_TEST

START_TEST(test_laplace_joint_vi_allocate_nothing)
{
    wide w;
    wide_make(&w, _i);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(w.lat, &lik, w.cnt, NULL, 1, 0.0, &p), GMM_OK);
    gmm_objective *obj = gmm_problem_objective(p);
    size_t np = obj->nparam;
    double *th = malloc(np * sizeof *th);
    memcpy(th, obj->value, np * sizeof *th);

    /* fit's objective: the Laplace approximation and its gradient.  Its
     * Newton iteration starts from the last mode, so the reference is a
     * twin problem with the same history. */
    gmm_problem *p2 = NULL;
    ck_assert_int_eq(gmm_problem_alloc(w.lat, &lik, w.cnt, NULL, 1, 0.0, &p2), GMM_OK);
    gmm_objective *obj2 = gmm_problem_objective(p2);
    double f[2], *g = malloc(2 * np * sizeof *g);
    for (size_t k = 0; k < np; k++) /* another theta than the first evaluation's */
        if (obj->scale[k] == GMM_SCALE_LOG) {
            th[k] *= 1.5;
            break;
        }
    for (int k = 0; k < 2; k++) {
        gmm_objective *o = k ? obj : obj2;
        ck_assert_int_eq(o->eval(o->ctx, o->value, &f[k], g + k * np), GMM_OK);
        gmm_alloc_fail_after(k ? 0 : -1);
        gmm_status st = o->eval(o->ctx, th, &f[k], g + k * np);
        gmm_alloc_fail_after(-1);
        ck_assert_msg(st == GMM_OK, "laplace run %d: %s", k, gmm_error_message());
    }
    gmm_problem_free(p2);
    same(f, f + 1, 1, "Laplace value");
    same(g, g + np, np, "Laplace gradient");

    /* HMC --sample-hyper: every parameter sampled, the whitening re-done at
     * each q */
    int *samp = malloc(np * sizeof *samp);
    gmm_prior *pri = malloc(np * sizeof *pri);
    for (size_t k = 0; k < np; k++) {
        samp[k] = 1;
        pri[k] = (gmm_prior){gmm_prior_kind_of(obj->scale[k]), 0.0, 1.0};
    }
    ck_assert_int_eq(gmm_problem_joint_setup(p, th, samp, pri), GMM_OK);
    size_t dq = gmm_problem_joint_dim(p);
    double *q = malloc(dq * sizeof *q), lp[2], *gq = malloc(2 * dq * sizeof *gq);
    ck_assert_int_eq(gmm_problem_joint_start(p, q), GMM_OK);
    q[dq - 1] += 0.1; /* another theta than the start's */
    for (int k = 0; k < 2; k++) {
        gmm_alloc_fail_after(k ? 0 : -1);
        gmm_status st = gmm_problem_joint_logp(p, q, &lp[k], gq + k * dq);
        gmm_alloc_fail_after(-1);
        ck_assert_msg(st == GMM_OK, "joint run %d: %s", k, gmm_error_message());
    }
    same(lp, lp + 1, 1, "joint log density");
    same(gq, gq + dq, dq, "joint gradient");

    /* VI's ELBO and its gradients, from the Laplace start */
    gmm_vi_params vp;
    gmm_vi_params_init(&vp);
    gmm_vi *v = NULL;
    ck_assert_int_eq(gmm_vi_alloc(p, &vp, &v), GMM_OK);
    ck_assert_int_eq(gmm_vi_start_laplace(v, NULL), GMM_OK);
    size_t nv = gmm_vi_nvar(v);
    double e[2], *lb = malloc(2 * nv * sizeof *lb), *tb = malloc(2 * np * sizeof *tb);
    for (int k = 0; k < 2; k++) {
        gmm_alloc_fail_after(k ? 0 : -1);
        gmm_status st = gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &e[k], lb + k * nv,
                                    tb + k * np);
        gmm_alloc_fail_after(-1);
        ck_assert_msg(st == GMM_OK, "elbo run %d: %s", k, gmm_error_message());
    }
    same(e, e + 1, 1, "ELBO");
    same(lb, lb + nv, nv, "ELBO gradient in lambda");
    same(tb, tb + np, np, "ELBO gradient in theta");

    gmm_vi_free(v);
    free(lb);
    free(tb);
    free(q);
    free(gq);
    free(samp);
    free(pri);
    free(g);
    free(th);
    gmm_problem_free(p);
    gmm_latent_free(w.lat);
}
END_TEST

Suite *infer_wide_band_suite(void)
{
    Suite *s = suite_create("infer_wide_band");
    TCase *tc = tcase_create("no allocation");
    tcase_add_loop_test(tc, test_gaussian_allocates_nothing, 0, 2);
    tcase_add_loop_test(tc, test_laplace_joint_vi_allocate_nothing, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
