/* test_logit_scale.c -- bym2's mixing weight phi on the logit scale
 * (objective.h, SCALES) through inference, on Poisson counts with exposures
 * over the 64 nodes of an 8 x 8 grid whose log rate is a smooth field (a
 * slope and a parabola), so that the marginal likelihood rises towards phi
 * -> 1, the besag model:
 *   - fit from phi = 0.5 reaches the besag model's maximum (on a log scale
 *     it would stop at phi = 0.88, 19 nats below, its trial points beyond
 *     phi = 1 refused: "domain");
 *   - the objective's gradient against finite differences (gradcheck) at phi
 *     = 0.5, 1e-6 and 1 - 1e-6: differences on logit phi stay in (0, 1);
 *   - the joint HMC target of (v, u): u = logit phi, its gradient against
 *     central differences, and lp against the density written out --
 *     log p(y | v, theta) - |v|^2/2 plus the prior's logit-normal density of
 *     phi times the Jacobian dphi/du = phi (1 - phi);
 *   - vi --learn-hyper: phi moves past 0.999 and the ELBO to within 0.02 of
 *     the besag model's.
 * The data are made here by integer hashing: the same on any machine.
 * Also the scales' maps themselves, the atanh one (a correlation) with them.
 * CK_VERBOSITY=verbose prints what was measured. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/fit.h"
#include "gmm/gradcheck.h"
#include "gmm/graph.h"
#include "gmm/hmc_chains.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/objective.h"
#include "gmm/problem.h"
#include "gmm/stack.h"
#include "gmm/vi.h"
#include "support/testutil.h"

#define K 8
#define NN (K * K)

static int verbose(void)
{
    const char *v = getenv("CK_VERBOSITY");
    return v && strcmp(v, "verbose") == 0;
}

/* A uniform in (0, 1) and a standard-normal-like value (a sum of four
 * uniforms, scaled) from the row i by integer hashing. */
static double hash_u(int i, int a, int b) { return ((i * a + b) % 1009 + 0.5) / 1009.0; }
static double hash_z(int i, int s)
{
    return (hash_u(i, 37 + s, 11) + hash_u(i, 101 + s, 7) + hash_u(i, 173 + s, 3) +
            hash_u(i, 263 + s, 5) - 2.0) *
           sqrt(3.0);
}

typedef struct {
    gmm_graph *g;
    gmm_latent *lat;
    gmm_lik lik;
    gmm_problem *p;
    size_t level[NN];
    double y[NN], e[NN], X[2 * NN];
} grid;

/* The grid's problem with one component of model `model` (BYM2 or BESAG)
 * named f.node, and the coefficients intercept and coef.x. */
static void grid_make(grid *d, gmm_stack_model model)
{
    size_t ei[2 * NN], ej[2 * NN], ne = 0;
    memset(d, 0, sizeof *d);
    for (int r = 0; r < K; r++)
        for (int c = 0; c < K; c++) {
            int v = r * K + c, i = v + 1;
            if (c + 1 < K)
                ei[ne] = (size_t)v, ej[ne++] = (size_t)v + 1;
            if (r + 1 < K)
                ei[ne] = (size_t)v, ej[ne++] = (size_t)v + K;
            double x = (c - 3.5) / 3.5, yy = (r - 3.5) / 3.5;
            double mu, eta = 0.1 * x + 0.5 * yy + 0.4 * x * x;
            d->e[v] = 40.0 + 20.0 * hash_u(i, 7, 1);
            mu = d->e[v] * exp(eta);
            d->y[v] = fmax(0.0, floor(mu + sqrt(mu) * hash_z(i, 0) + 0.5));
            d->level[v] = (size_t)v;
            d->X[2 * v] = 1.0;
            d->X[2 * v + 1] = x;
        }
    ck_assert_int_eq(gmm_graph_from_edges(NN, ne, ei, ej, NULL, NULL, NULL, &d->g), GMM_OK);
    gmm_stack_term t = {.model = model, .name = "f.node", .level = d->level, .graph = d->g};
    ck_assert_int_eq(gmm_latent_stack_alloc(NN, 1, &t, 0, &d->lat), GMM_OK);
    ck_assert_int_eq(gmm_lik_parse("poisson", &d->lik), GMM_OK);
    double sy = 0.0, se = 0.0;
    for (int v = 0; v < NN; v++)
        sy += d->y[v], se += d->e[v];
    static const char *const names[2] = {"intercept", "coef.x"};
    double start[2] = {log(sy / se), 0.0};
    gmm_problem_design des = {2, d->X, names, start, 1};
    ck_assert_int_eq(gmm_problem_alloc_design(d->lat, &d->lik, d->y, d->e, &des, &d->p), GMM_OK);
}

static void grid_free(grid *d)
{
    gmm_problem_free(d->p);
    gmm_latent_free(d->lat);
    gmm_graph_free(d->g);
}

/* The index of parameter `name` in o. */
static size_t param(const gmm_objective *o, const char *name)
{
    for (size_t i = 0; i < o->nparam; i++)
        if (!strcmp(o->name[i], name))
            return i;
    ck_abort_msg("no parameter %s", name);
    return 0;
}

/* The maximum of the besag model on the same data: the bym2 model's
 * supremum at phi -> 1. */
static double besag_loglik(void)
{
    grid d;
    grid_make(&d, GMM_STACK_BESAG);
    gmm_fit_params fp;
    gmm_fit_params_init(&fp);
    gmm_fit_result res;
    ck_assert_int_eq(gmm_fit(gmm_problem_objective(d.p), &fp, &res), GMM_OK);
    ck_assert_msg(res.converged, "besag: %s", res.message);
    grid_free(&d);
    return res.loglik;
}

START_TEST(test_fit_reaches_phi_one)
{
    double lb = besag_loglik();
    grid d;
    grid_make(&d, GMM_STACK_BYM2);
    gmm_objective *o = gmm_problem_objective(d.p);
    size_t ip = param(o, "f.node.phi");
    ck_assert_double_eq(o->value[ip], 0.5);
    gmm_fit_params fp;
    gmm_fit_params_init(&fp);
    gmm_fit_result res;
    ck_assert_int_eq(gmm_fit(o, &fp, &res), GMM_OK);
    if (verbose())
        printf("bym2 -> besag: loglik %.10f (besag %.10f), phi 1 - %.3g, %zu iterations, "
               "stop %s\n",
               res.loglik, lb, 1.0 - o->value[ip], res.iterations, res.stop);
    ck_assert_msg(strcmp(res.stop, "domain"), "stopped against the domain at phi = %.17g: %s",
                  o->value[ip], res.domain_msg);
    ck_assert_msg(o->value[ip] > 0.999 && o->value[ip] < 1.0, "phi %.17g", o->value[ip]);
    ck_assert_msg(res.loglik >= lb - 1e-4, "loglik %.10f, the besag maximum %.10f", res.loglik,
                  lb);
    grid_free(&d);
}
END_TEST

START_TEST(test_gradcheck_near_the_bounds)
{
    grid d;
    grid_make(&d, GMM_STACK_BYM2);
    gmm_objective *o = gmm_problem_objective(d.p);
    size_t ip = param(o, "f.node.phi");
    o->value[param(o, "f.node.variance")] = 0.06;
    o->value[param(o, "intercept")] = 0.05;
    o->value[param(o, "coef.x")] = 0.25;
    static const double phis[3] = {0.5, 1e-6, 1.0 - 1e-6};
    gmm_gradcheck_params gp;
    gmm_gradcheck_params_init(&gp);
    for (int k = 0; k < 3; k++) {
        o->value[ip] = phis[k];
        gmm_gradcheck_result r;
        gmm_status st = gmm_gradcheck(o, &gp, &r);
        ck_assert_msg(st == GMM_OK, "phi = %g: %s", phis[k], gmm_error_message());
        ck_assert(r.row[ip].ok && r.row[ip].value == phis[k]);
        if (verbose())
            printf("gradcheck phi = %g: analytic %.10g, numeric %.10g +- %.2g\n", phis[k],
                   r.row[ip].analytic, r.row[ip].numeric, r.row[ip].fd_error);
        gmm_gradcheck_result_free(&r);
    }
    grid_free(&d);
}
END_TEST

/* The joint target at q with u[k] (the k-th sampled hyperparameter's
 * coordinate) set. */
typedef struct {
    gmm_problem *p;
    double *q;
} joint_ctx;

static double joint_lp(void *ctx)
{
    joint_ctx *c = ctx;
    double lp;
    ck_assert_msg(gmm_problem_joint_logp(c->p, c->q, &lp, NULL) == GMM_OK, "%s",
                  gmm_error_message());
    return lp;
}

/* log of the logit-normal density of phi, and of the Jacobian dphi/du. */
static double log_logitnormal(double phi, double mu, double sigma)
{
    double z = (log(phi / (1.0 - phi)) - mu) / sigma;
    return -log(sigma) - 0.5 * log(2.0 * 3.14159265358979323846) - log(phi * (1.0 - phi)) - 0.5 * z * z;
}

START_TEST(test_joint_target_logit_phi)
{
    grid d;
    grid_make(&d, GMM_STACK_BYM2);
    gmm_objective *o = gmm_problem_objective(d.p);
    size_t np = o->nparam, n = gmm_latent_dim(d.lat), ip = param(o, "f.node.phi");
    double *th = malloc(np * sizeof *th);
    memcpy(th, o->value, np * sizeof *th);
    th[param(o, "f.node.variance")] = 0.06;
    th[param(o, "intercept")] = 0.05;
    th[param(o, "coef.x")] = 0.25;
    th[ip] = 0.9;
    memcpy(o->value, th, np * sizeof *th);
    int *samp = malloc(np * sizeof *samp);
    gmm_prior *pri = malloc(np * sizeof *pri);
    gmm_hmc_default_priors(d.p, samp, pri);
    pri[ip].mu = 1.0; /* logitnormal(1, 1.5): its kind the default's, by phi's scale */
    pri[ip].sigma = 1.5;
    ck_assert_int_eq(gmm_problem_joint_setup(d.p, th, samp, pri), GMM_OK);
    size_t dq = gmm_problem_joint_dim(d.p), jp = n; /* phi's coordinate */
    ck_assert_uint_eq(dq, n + np);
    for (size_t k = 0; k < ip; k++)
        jp += samp[k] != 0;
    double *q = malloc(dq * sizeof *q), *g = malloc(dq * sizeof *g), *t2 = malloc(np * sizeof *t2);
    ck_assert_int_eq(gmm_problem_joint_start(d.p, q), GMM_OK);
    ck_assert_double_eq_tol(q[jp], log(0.9 / 0.1), 1e-12);
    /* u = 3 is phi = 1 / (1 + e^-3), inside (0, 1) */
    q[jp] = 3.0;
    ck_assert_int_eq(gmm_problem_joint_theta(d.p, q, t2), GMM_OK);
    ck_assert_double_eq_tol(t2[ip], 1.0 / (1.0 + exp(-3.0)), 1e-15);
    /* the gradient in q: every hyperparameter and 40 latents, 4th-order
     * differences */
    tu_rng r;
    tu_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++)
        q[i] += 0.3 * tu_normal(&r);
    double lp;
    ck_assert_int_eq(gmm_problem_joint_logp(d.p, q, &lp, g), GMM_OK);
    joint_ctx c = {d.p, q};
    size_t worst = 0;
    double eh = tu_fd_check4(q + n, dq - n, g + n, joint_lp, &c, 1e-3, 1.0, &worst);
    ck_assert_msg(eh < 1e-6, "d lp / d u[%zu] = %.10g, relative error %.3g", worst, g[n + worst],
                  eh);
    double ev = tu_fd_check_sample(q, n, g, joint_lp, &c, 1e-4, 1.0, 40, &r, &worst);
    ck_assert_msg(ev < 1e-6, "d lp / d v[%zu] = %.10g, relative error %.3g", worst, g[worst], ev);
    /* lp is the data term plus log N(u; mu, sigma) for each sampled u: for
     * phi, the logit-normal density times the Jacobian phi (1 - phi) */
    double lp2[2], base[2], prior[2];
    for (int k = 0; k < 2; k++) {
        q[jp] = k ? -4.0 : 2.5;
        ck_assert_int_eq(gmm_problem_joint_logp(d.p, q, &lp2[k], NULL), GMM_OK);
        ck_assert_int_eq(gmm_problem_joint_theta(d.p, q, t2), GMM_OK);
        ck_assert_int_eq(gmm_problem_whiten_setup(d.p, t2), GMM_OK);
        ck_assert_int_eq(gmm_problem_whitened_logp(d.p, q, &base[k], NULL), GMM_OK);
        double phi = t2[ip];
        prior[k] = log_logitnormal(phi, 1.0, 1.5) + log(phi * (1.0 - phi));
    }
    double want = (base[0] + prior[0]) - (base[1] + prior[1]);
    ck_assert_msg(fabs((lp2[0] - lp2[1]) - want) < 1e-9 * fmax(1.0, fabs(want)),
                  "lp difference %.12g, data term and logit-normal prior with the Jacobian "
                  "%.12g",
                  lp2[0] - lp2[1], want);
    free(th);
    free(samp);
    free(pri);
    free(q);
    free(g);
    free(t2);
    grid_free(&d);
}
END_TEST

/* The ELBO after vi with the hyperparameters learnt (max_iter iterations). */
static double vi_elbo(grid *d, double *phi)
{
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.learn_hyper = 1;
    par.max_iter = 4000;
    gmm_vi *v = NULL;
    ck_assert_int_eq(gmm_vi_alloc(d->p, &par, &v), GMM_OK);
    gmm_vi_result res;
    ck_assert_msg(gmm_vi_fit(v, &res) == GMM_OK, "%s", gmm_error_message());
    const gmm_objective *o = gmm_problem_objective(d->p);
    if (phi)
        *phi = gmm_vi_theta(v)[param(o, "f.node.phi")];
    if (verbose())
        printf("vi %s: ELBO %.10f after %zu iterations (%s)\n", phi ? "bym2" : "besag", res.elbo,
               res.iterations, res.message);
    gmm_vi_free(v);
    return res.elbo;
}

START_TEST(test_vi_learn_hyper_phi_to_one)
{
    grid d;
    grid_make(&d, GMM_STACK_BESAG);
    double eb = vi_elbo(&d, NULL), phi;
    grid_free(&d);
    grid_make(&d, GMM_STACK_BYM2);
    double e = vi_elbo(&d, &phi);
    ck_assert_msg(phi > 0.999 && phi < 1.0, "phi %.17g", phi);
    ck_assert_msg(e >= eb - 0.02, "ELBO %.10f, the besag model's %.10f", e, eb);
    grid_free(&d);
}
END_TEST

/* Every scale's maps (objective.h, SCALES): u of p and p of u invert each
 * other, dp/du matches a central difference of p(u) to its truncation
 * (h^2 p'''(u) / 6, ~1e-10) and rounding (eps |u| / h, ~1e-11; h = 1e-5
 * max(1, |u|)), and only the open domain is inside. */
START_TEST(test_scale_maps)
{
    const gmm_scale sc[] = {GMM_SCALE_IDENTITY, GMM_SCALE_LOG, GMM_SCALE_LOGIT, GMM_SCALE_ATANH};
    const double pts[4][3] = {{-3.5, 0.0, 2e4}, {1e-3, 1.0, 7e2}, {1e-4, 0.5, 0.999},
                              {-0.999, 0.3, 0.9}};
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 3; j++) {
            double p = pts[s][j], u = gmm_scale_to_u(sc[s], p), h = 1e-5 * fmax(1.0, fabs(u));
            ck_assert(gmm_scale_inside(sc[s], p));
            ck_assert_double_le_tol(fabs(gmm_scale_from_u(sc[s], u) - p), 0.0,
                                    1e-15 * fmax(1.0, fabs(p)));
            double fd = (gmm_scale_from_u(sc[s], u + h) - gmm_scale_from_u(sc[s], u - h)) / (2 * h);
            double d = gmm_scale_dp_du(sc[s], p);
            ck_assert_msg(fabs(fd - d) <= 1e-8 * fmax(1.0, fabs(d)), "%s at %g: %.12g vs %.12g",
                          gmm_scale_name(sc[s]), p, d, fd);
        }
    ck_assert(!gmm_scale_inside(GMM_SCALE_ATANH, 1.0));
    ck_assert(!gmm_scale_inside(GMM_SCALE_ATANH, -1.0));
    ck_assert(gmm_scale_inside(GMM_SCALE_ATANH, -0.5));
    ck_assert(!gmm_scale_inside(GMM_SCALE_LOGIT, -0.5));
    ck_assert(!gmm_scale_inside(GMM_SCALE_LOG, 0.0));
    double per;
    ck_assert(gmm_scale_two_sided(GMM_SCALE_ATANH, &per) && per == 0.5);
    ck_assert(gmm_scale_two_sided(GMM_SCALE_LOGIT, &per) && per == 1.0);
    ck_assert(!gmm_scale_two_sided(GMM_SCALE_LOG, NULL));
    ck_assert_str_eq(gmm_prior_kind_name(gmm_prior_kind_of(GMM_SCALE_ATANH)), "atanhnormal");
}
END_TEST

Suite *infer_logit_scale_suite(void)
{
    Suite *s = suite_create("infer_logit_scale");
    TCase *tc = tcase_create("bym2_phi");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_scale_maps);
    tcase_add_test(tc, test_fit_reaches_phi_one);
    tcase_add_test(tc, test_gradcheck_near_the_bounds);
    tcase_add_test(tc, test_joint_target_logit_phi);
    tcase_add_test(tc, test_vi_learn_hyper_phi_to_one);
    suite_add_tcase(s, tc);
    return s;
}
