/* test_whitened.c -- the log joint in whitened coordinates (problem.h),
 * under the prior's map and the Laplace map: its gradient in v against
 * finite differences, its value against the latent prior's density and
 * between the maps, the Laplace map exact for a Gaussian likelihood, the
 * start at the posterior mode; value and gradient against a dense
 * evaluation of their definition on count data that dominate the prior
 * (graph, state-space, stacked and constrained stacked latents, with
 * covariates); and the data's information (auto's rule) against a dense
 * eigenvalue. */
#include <check.h>
#include <gsl/gsl_eigen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/graph.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/spec.h"
#include "gmm/stack.h"
#include "support/testutil.h"

typedef struct {
    gmm_problem *p;
    double *v; /* the point of lp_fd */
} wctx;

static double lp_of(void *vc, const double *v)
{
    double lp;
    ck_assert_int_eq(gmm_problem_whitened_logp(((wctx *)vc)->p, v, &lp, NULL), GMM_OK);
    return lp;
}

static void check_metric(gmm_latent *lat, const char *liktext, const char *label,
                         gmm_metric metric)
{
    tu_rng r;
    tu_rng_seed(&r, 3);
    size_t nr = gmm_latent_nrows(lat), n = gmm_latent_dim(lat);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse(liktext, &lik), GMM_OK);
    gmm_lik_fill_defaults(&lik, NULL, 0);
    double *y = malloc(nr * sizeof *y);
    for (size_t i = 0; i < nr; i++)
        y[i] = i % 6 == 5 ? NAN
               : lik.type->conjugate ? tu_normal(&r)
               : lik.type->rowq      ? floor(3.0 * tu_uniform(&r))
                                     : (tu_uniform(&r) < 0.4);
    gmm_problem *p = NULL;
    ck_assert_msg(gmm_problem_alloc(lat, &lik, y, NULL, !lik.type->conjugate, 0.2, &p) == GMM_OK,
                  "%s", gmm_error_message());
    const double *th = gmm_problem_objective(p)->value;
    ck_assert_int_eq(gmm_problem_whiten_setup(p, th), GMM_OK);
    double *v = malloc(n * sizeof *v), *g = malloc(n * sizeof *g), lp;
    double *mode = malloc(n * sizeof *mode), *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        v[i] = 0.7 * tu_normal(&r);
    if (metric == GMM_METRIC_LAPLACE) {
        /* the same x under both maps has the same lp (constant Jacobians
         * dropped alike), and unwhiten inverts the Laplace map */
        double lp0, lp1;
        ck_assert_int_eq(gmm_problem_whitened_logp(p, v, &lp0, NULL), GMM_OK);
        ck_assert_int_eq(gmm_problem_whitened_latent(p, v, x), GMM_OK);
        gmm_problem_set_metric(p, metric);
        ck_assert_int_eq(gmm_problem_whiten_setup(p, th), GMM_OK);
        ck_assert_int_eq(gmm_problem_unwhiten(p, x, g), GMM_OK);
        ck_assert_int_eq(gmm_problem_whitened_logp(p, g, &lp1, NULL), GMM_OK);
        ck_assert_msg(fabs(lp1 - lp0) <= 1e-9 * fmax(1.0, fabs(lp0)),
                      "%s %s: lp %.17g under the Laplace map, %.17g under the prior's", label,
                      liktext, lp1, lp0);
        ck_assert_int_eq(gmm_problem_whitened_latent(p, g, mode), GMM_OK);
        double e = 0.0;
        for (size_t i = 0; i < n; i++)
            e = fmax(e, fabs(mode[i] - x[i]) / fmax(1.0, fabs(x[i])));
        ck_assert_msg(e < 1e-9, "%s %s: unwhiten then whiten off by %g", label, liktext, e);
    }
    ck_assert_int_eq(gmm_problem_whitened_logp(p, v, &lp, g), GMM_OK);
    if (metric == GMM_METRIC_LAPLACE && lik.type->conjugate) {
        /* a Gaussian posterior whitened by its own precision: v ~ N(0, I) */
        double e = 0.0;
        for (size_t i = 0; i < n; i++)
            e = fmax(e, fabs(g[i] + v[i]));
        ck_assert_msg(e < 1e-9, "%s %s: gradient + v = %g, not 0", label, liktext, e);
    }
    /* gradient: central differences, step 1e-5 (the density is smooth, O(1)) */
    wctx c = {p, NULL};
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double s = v[i], h = 1e-5;
        v[i] = s + h;
        double a = lp_of(&c, v);
        v[i] = s - h;
        double b = lp_of(&c, v);
        v[i] = s;
        worst = fmax(worst, fabs(g[i] - (a - b) / (2 * h)) / fmax(1.0, fabs(g[i])));
    }
    ck_assert_msg(worst < 1e-6, "%s %s: whitened gradient off by %g", label, liktext, worst);
    /* start: map(v0) is the posterior mode */
    ck_assert_int_eq(gmm_problem_posterior(p, th, mode, NULL), GMM_OK);
    ck_assert_int_eq(gmm_problem_whiten_setup(p, th), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_start(p, th, v), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_latent(p, v, x), GMM_OK);
    double e = 0.0, sc = 0.0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs(x[i] - mode[i]));
        sc = fmax(sc, fabs(mode[i]));
    }
    ck_assert_msg(e <= 1e-9 * fmax(1.0, sc), "%s %s: start off the mode by %g", label, liktext, e);
    /* at the mode the whitened gradient vanishes (the mode maximises it) */
    ck_assert_int_eq(gmm_problem_whitened_logp(p, v, &lp, g), GMM_OK);
    double gn = 0.0;
    for (size_t i = 0; i < n; i++)
        gn = fmax(gn, fabs(g[i]));
    ck_assert_msg(gn < 1e-6, "%s %s: gradient %g at the mode", label, liktext, gn);
    free(mode);
    free(x);
    free(v);
    free(g);
    free(y);
    gmm_problem_free(p);
}

static void check(gmm_latent *lat, const char *liktext, const char *label)
{
    check_metric(lat, liktext, label, GMM_METRIC_PRIOR);
    check_metric(lat, liktext, label, GMM_METRIC_LAPLACE);
}

static double jlp_of(gmm_problem *p, const double *q)
{
    double lp;
    ck_assert_msg(gmm_problem_joint_logp(p, q, &lp, NULL) == GMM_OK, "%s", gmm_error_message());
    return lp;
}

/* The joint density of (v, sampled hyperparameters): gradient against
 * 4th-order central differences in every coordinate. */
static void check_joint(gmm_latent *lat, const char *liktext, const char *label)
{
    tu_rng r;
    tu_rng_seed(&r, 5);
    size_t nr = gmm_latent_nrows(lat), n = gmm_latent_dim(lat);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse(liktext, &lik), GMM_OK);
    gmm_lik_fill_defaults(&lik, NULL, 0);
    double *y = malloc(nr * sizeof *y);
    for (size_t i = 0; i < nr; i++)
        y[i] = i % 6 == 5 ? NAN
               : lik.type->conjugate ? tu_normal(&r)
               : lik.type->rowq      ? floor(3.0 * tu_uniform(&r))
                                     : (tu_uniform(&r) < 0.4);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, !lik.type->conjugate, 0.2, &p), GMM_OK);
    gmm_objective *o = gmm_problem_objective(p);
    size_t np = o->nparam;
    int *samp = malloc(np * sizeof *samp);
    gmm_prior *pr = malloc(np * sizeof *pr);
    for (size_t k = 0; k < np; k++) {
        int is_b = !lik.type->conjugate && k == np - 1;
        samp[k] = 1;
        pr[k] = (gmm_prior){is_b ? GMM_PRIOR_NORMAL : GMM_PRIOR_LOGNORMAL,
                            is_b ? 0.1 : log(o->value[k]) + 0.2, 1.3};
    }
    /* the Laplace map is built at one theta: refused when theta moves */
    gmm_problem_set_metric(p, GMM_METRIC_LAPLACE);
    ck_assert_int_eq(gmm_problem_joint_setup(p, o->value, samp, pr), GMM_EINVAL);
    gmm_problem_set_metric(p, GMM_METRIC_PRIOR);
    ck_assert_int_eq(gmm_problem_joint_setup(p, o->value, samp, pr), GMM_OK);
    size_t dim = gmm_problem_joint_dim(p);
    ck_assert_uint_eq(dim, n + np);
    double *q = malloc(dim * sizeof *q), *g = malloc(dim * sizeof *g), lp;
    ck_assert_int_eq(gmm_problem_joint_start(p, q), GMM_OK);
    for (size_t i = 0; i < dim; i++)
        q[i] += 0.3 * tu_normal(&r);
    ck_assert_int_eq(gmm_problem_joint_logp(p, q, &lp, g), GMM_OK);
    double worst = 0.0;
    size_t wi = 0;
    for (size_t i = 0; i < dim; i++) {
        double s0 = q[i], h = 1e-3, f[4], off[4] = {-2, -1, 1, 2};
        for (int k = 0; k < 4; k++) {
            q[i] = s0 + off[k] * h;
            f[k] = jlp_of(p, q);
        }
        q[i] = s0;
        double fd = (f[0] - 8.0 * f[1] + 8.0 * f[2] - f[3]) / (12.0 * h);
        double e = fabs(g[i] - fd) / fmax(1.0, fabs(fd));
        if (e > worst) {
            worst = e;
            wi = i;
        }
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "joint gradient %s %s: worst %.2g at q[%zu] (n = %zu)\n", label, liktext,
                worst, wi, n);
    ck_assert_msg(worst < 1e-6, "%s %s: joint gradient off by %g at q[%zu] (n = %zu)", label,
                  liktext, worst, wi, n);
    free(q);
    free(g);
    free(samp);
    free(pr);
    free(y);
    gmm_problem_free(p);
}

START_TEST(test_whitened_ssm)
{
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("matern32(variance=1.2, lengthscale=0.8) + "
                                    "matern12(variance=0.3, lengthscale=2)",
                                    &s),
                     GMM_OK);
    gmm_kernel *k = NULL;
    ck_assert_int_eq(gmm_kernel_from_spec(s, &k), GMM_OK);
    size_t n = 30;
    double x[30];
    for (size_t i = 0; i < n; i++)
        x[i] = 0.37 * (double)i;
    x[4] = x[3];
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_ssm_alloc(k, x, n, NULL, &lat), GMM_OK);
    const char *liks[] = {"gaussian(variance=0.3)", "poisson", "bernoulli",
                          "negbinomial(dispersion=2)"};
    for (size_t i = 0; i < 4; i++) {
        check(lat, liks[i], "state-space");
        check_joint(lat, liks[i], "state-space");
    }
    gmm_latent_free(lat);
    gmm_kernel_free(k);
    gmm_spec_free(s);
    /* a demodulated kernel: its observation rows depend on the period */
    ck_assert_int_eq(gmm_spec_parse("periodic(variance=0.8, lengthscale=1.1, period=2.3, "
                                    "harmonics=2) + matern12(variance=0.2, lengthscale=1)",
                                    &s),
                     GMM_OK);
    ck_assert_int_eq(gmm_kernel_from_spec(s, &k), GMM_OK);
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.damp_rel = 1e-3;
    ck_assert_int_eq(gmm_latent_ssm_alloc(k, x, n, &par, &lat), GMM_OK);
    check_joint(lat, "poisson", "demodulated");
    gmm_latent_free(lat);
    gmm_kernel_free(k);
    gmm_spec_free(s);
}
END_TEST

START_TEST(test_whitened_graph)
{
    size_t ei[12], ej[12];
    for (size_t i = 0; i < 11; i++) {
        ei[i] = i;
        ej[i] = i + 1;
    }
    ei[11] = 0, ej[11] = 7;
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(12, 12, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("edge-ou(variance=1.5, lengthscale=2)", &s), GMM_OK);
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, s, NULL, &m), GMM_OK);
    size_t node[15];
    for (size_t r = 0; r < 15; r++)
        node[r] = (r * 7) % 12;
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(m, 15, node, &lat), GMM_OK);
    check(lat, "poisson", "graph");
    check(lat, "gaussian(variance=0.5)", "graph");
    check_joint(lat, "negbinomial(dispersion=2)", "graph");
    check_joint(lat, "gaussian(variance=0.5)", "graph");
    gmm_latent_free(lat);
    gmm_gmrf_free(m);
    gmm_spec_free(s);
    gmm_graph_free(g);
}
END_TEST

/* The whitened target against a dense computation in graph numbering, on a
 * graph that RCM reorders, with an isolated node, a node seen twice, one
 * unseen, a missing count, exposures and an intercept.  Per map: x(v) is
 * read as the draws are written (the nodes' linear predictor minus b); the
 * map is affine, its Jacobian J the columns x(e_k) - x(0); lp equals
 * sum_r log Poisson(y_r | e_r exp(b + x_node(r))) - x'Qx/2 with Q the
 * edge-ou precision of gmrf.h built here, the gradient J'(H'(y - mu) - Q x);
 * and J'MJ = I with M = Q (prior's map) or Q + H'diag(mu)H at the mode x(0)
 * (Laplace map), so the log|J| the sampler drops is -log|M|/2, a constant. */
#define DN 14
#define DR 16
START_TEST(test_whitened_dense)
{
    size_t ei[15], ej[15], m = 0;
    double len[15];
    for (size_t i = 0; i + 1 < DN - 1; i++, m++) { /* node 13 isolated */
        ei[m] = i;
        ej[m] = i + 1;
    }
    size_t ci[3] = {0, 3, 2}, cj[3] = {7, 11, 12};
    for (size_t k = 0; k < 3; k++, m++) {
        ei[m] = ci[k];
        ej[m] = cj[k];
    }
    for (size_t k = 0; k < m; k++)
        len[k] = 0.5 + 0.3 * (double)(k % 5);
    gmm_graph *gr = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(DN, m, ei, ej, len, NULL, NULL, &gr), GMM_OK);
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("edge-ou(variance=1.3, lengthscale=1.7)", &s), GMM_OK);
    gmm_gmrf *gm = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(gr, s, NULL, &gm), GMM_OK);
    /* rows: nodes 5r mod 14 except node 8, then 3 and 13 again */
    size_t node[DR];
    double y[DR], e[DR];
    size_t nr = 0;
    for (size_t r = 0; r < DN; r++)
        if ((r * 5) % DN != 8)
            node[nr++] = (r * 5) % DN;
    node[nr++] = 3;
    node[nr++] = 13;
    node[nr++] = 6;
    ck_assert_uint_eq(nr, DR);
    for (size_t r = 0; r < DR; r++) {
        y[r] = (double)((r * 7) % 11 + 2 * (r % 3));
        e[r] = 0.5 + 0.75 * (double)(r % 4);
    }
    y[9] = NAN;
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, DR, node, &lat), GMM_OK);
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, e, 1, 0.3, &p), GMM_OK);
    const double *th = gmm_problem_objective(p)->value;
    double b = 0.3;
    /* Q by gmrf.h's formula, graph numbering */
    double Q[DN][DN] = {{0}};
    int deg[DN] = {0};
    for (size_t k = 0; k < m; k++) {
        double t = len[k] / 1.7, sq = -expm1(-2.0 * t);
        Q[ei[k]][ei[k]] += (1.0 / sq - 0.5) / 1.3;
        Q[ej[k]][ej[k]] += (1.0 / sq - 0.5) / 1.3;
        Q[ei[k]][ej[k]] += -exp(-t) / (sq * 1.3);
        Q[ej[k]][ei[k]] += -exp(-t) / (sq * 1.3);
        deg[ei[k]]++;
        deg[ej[k]]++;
    }
    for (size_t i = 0; i < DN; i++)
        if (!deg[i])
            Q[i][i] = 1.0 / 1.3;
    tu_rng rg;
    tu_rng_seed(&rg, 11);
    for (int lap = 0; lap < 2; lap++) {
        const char *what = lap ? "laplace" : "prior";
        gmm_problem_set_metric(p, lap ? GMM_METRIC_LAPLACE : GMM_METRIC_PRIOR);
        ck_assert_int_eq(gmm_problem_whiten_setup(p, th), GMM_OK);
        double v[DN] = {0}, x0[DN], x[DN], J[DN][DN], mu[DR], gx[DN], g[DN], lp;
        ck_assert_int_eq(gmm_problem_whitened_linpred(p, v, NULL, x0), GMM_OK);
        for (size_t k = 0; k < DN; k++) {
            v[k] = 1.0;
            ck_assert_int_eq(gmm_problem_whitened_linpred(p, v, NULL, x), GMM_OK);
            v[k] = 0.0;
            for (size_t i = 0; i < DN; i++)
                J[i][k] = x[i] - x0[i];
        }
        for (size_t i = 0; i < DN; i++)
            x0[i] -= b;
        for (int trial = 0; trial < 4; trial++) {
            for (size_t k = 0; k < DN; k++)
                v[k] = (trial ? 0.8 : 0.0) * tu_normal(&rg);
            ck_assert_int_eq(gmm_problem_whitened_logp(p, v, &lp, g), GMM_OK);
            ck_assert_int_eq(gmm_problem_whitened_linpred(p, v, NULL, x), GMM_OK);
            double dl = 0.0, scale = 1.0;
            for (size_t i = 0; i < DN; i++) {
                x[i] -= b;
                double jv = x0[i];
                for (size_t k = 0; k < DN; k++)
                    jv += J[i][k] * v[k];
                ck_assert_msg(fabs(x[i] - jv) <= 1e-12 * (1.0 + fabs(x[i])),
                              "%s: the map is not affine at x[%zu]: %.17g against %.17g", what,
                              i, x[i], jv);
            }
            for (size_t i = 0; i < DN; i++) {
                gx[i] = 0.0;
                for (size_t j = 0; j < DN; j++) {
                    dl -= 0.5 * x[i] * Q[i][j] * x[j];
                    gx[i] -= Q[i][j] * x[j];
                }
            }
            for (size_t r = 0; r < DR; r++) {
                mu[r] = e[r] * exp(b + x[node[r]]);
                if (isnan(y[r]))
                    continue;
                dl += y[r] * log(mu[r]) - mu[r] - lgamma(y[r] + 1.0);
                gx[node[r]] += y[r] - mu[r];
                scale += fabs(y[r] * log(mu[r])) + mu[r];
            }
            ck_assert_msg(fabs(lp - dl) <= 1e-12 * scale, "%s: lp %.17g, dense %.17g", what,
                          lp, dl);
            for (size_t k = 0; k < DN; k++) {
                double jg = 0.0, gs = 0.0;
                for (size_t i = 0; i < DN; i++) {
                    jg += J[i][k] * gx[i];
                    gs += fabs(J[i][k] * gx[i]);
                }
                ck_assert_msg(fabs(g[k] - jg) <= 1e-12 * (1.0 + gs),
                              "%s: gradient[%zu] %.17g, dense %.17g", what, k, g[k], jg);
            }
            if (trial == 0 && lap) { /* the mode: the dense gradient vanishes */
                for (size_t i = 0; i < DN; i++)
                    ck_assert_msg(fabs(gx[i]) < 1e-8, "laplace: x(0) is not the mode: "
                                  "gradient %g at node %zu", gx[i], i);
            }
            if (trial == 0) {
                /* J'MJ = I, M = Q (+ H'diag(mu)H at the mode) */
                double M[DN][DN];
                memcpy(M, Q, sizeof M);
                for (size_t r = 0; lap && r < DR; r++)
                    if (!isnan(y[r]))
                        M[node[r]][node[r]] += mu[r];
                double worst = 0.0;
                for (size_t a = 0; a < DN; a++)
                    for (size_t c = 0; c < DN; c++) {
                        double t = 0.0;
                        for (size_t i = 0; i < DN; i++)
                            for (size_t j = 0; j < DN; j++)
                                t += J[i][a] * M[i][j] * J[j][c];
                        worst = fmax(worst, fabs(t - (a == c)));
                    }
                ck_assert_msg(worst < 1e-10, "%s: J'MJ - I off by %g", what, worst);
            }
        }
    }
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_gmrf_free(gm);
    gmm_spec_free(s);
    gmm_graph_free(gr);
}
END_TEST

static double lp_fd(void *vc)
{
    wctx *c = vc;
    double lp;
    ck_assert_int_eq(gmm_problem_whitened_logp(c->p, c->v, &lp, NULL), GMM_OK);
    return lp;
}

/* The whitened density of p under its metric against its definition,
 * densely: x = map(v), J = dx/dv column by column (map(e_i) - map(0): the
 * map is affine), f = X beta + C x from the latent's dense coefficient
 * windows, and
 *
 *   lp = sum_r log p(y_r | f_r) - q / 2,  grad = J' (H' g) - dq/dv / 2,
 *
 * q = x'Qx with Q assembled densely (Laplace map) or v'v (prior map: its
 * definition, the constrained latents' pinned coordinates included).
 * Rounding allowance: 8 (n + kl + 8) eps times the sum of the magnitudes
 * that enter (the likelihood's terms, x'|Q||x|, v'v and sum |d2 log p|
 * (h'x)^2, where the Laplace map's x'Qx = |L'x|^2 - x'Wx cancels), and per
 * gradient entry the like of J'(|H'| |g| + |Q| |x| + |H'| |W| |H x|) + |v|.
 * Then the gradient against fourth-order differences. */
static void check_dense(gmm_problem *p, const char *label)
{
    gmm_latent *lat = gmm_problem_latent_eval(p);
    size_t n = gmm_latent_dim(lat), nr = gmm_latent_nrows(lat), w = gmm_latent_obs_width(lat);
    size_t kl = gmm_latent_bandwidth(lat), np = gmm_problem_objective(p)->nparam;
    const double *th = gmm_problem_objective(p)->value, *y = gmm_problem_y(p);
    const double *ex = gmm_problem_exposure(p);
    const size_t *off = gmm_latent_obs_offset(lat);
    int lap = gmm_problem_metric(p) == GMM_METRIC_LAPLACE;
    tu_rng r;
    tu_rng_seed(&r, 11);
    ck_assert_msg(gmm_problem_whiten_setup(p, th) == GMM_OK, "%s: %s", label,
                  gmm_error_message());
    double *v = malloc(n * sizeof *v), *g = malloc(n * sizeof *g), *x = malloc(n * sizeof *x);
    double *x0 = malloc(n * sizeof *x0), *J = malloc(n * n * sizeof *J);
    double *Q = calloc(n * n, sizeof *Q), *C = malloc(nr * w * sizeof *C);
    double *b = malloc(nr * sizeof *b), *a = calloc(n, sizeof *a), *aa = calloc(n, sizeof *aa);
    double *qx = calloc(n, sizeof *qx), *qa = calloc(n, sizeof *qa), lp;
    for (size_t i = 0; i < n; i++)
        v[i] = 0.0;
    ck_assert_int_eq(gmm_problem_whitened_latent(p, v, x0), GMM_OK);
    for (size_t i = 0; i < n; i++) {
        v[i] = 1.0;
        ck_assert_int_eq(gmm_problem_whitened_latent(p, v, x), GMM_OK);
        for (size_t j = 0; j < n; j++)
            J[j * n + i] = x[j] - x0[j];
        v[i] = 0.0;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = 0.7 * tu_normal(&r);
    ck_assert_int_eq(gmm_problem_whitened_logp(p, v, &lp, g), GMM_OK);
    ck_assert_int_eq(gmm_problem_whitened_latent(p, v, x), GMM_OK);
    gmm_band *Qb = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    double ld;
    ck_assert_int_eq(gmm_latent_prior(lat, th, Qb, &ld), GMM_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            Q[i * n + j] = (i > j ? i - j : j - i) <= kl ? gmm_band_get(Qb, i, j) : 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            qx[i] += Q[i * n + j] * x[j];
            qa[i] += fabs(Q[i * n + j] * x[j]);
        }
    ck_assert_int_eq(gmm_latent_obs_coef(lat, th, C), GMM_OK);
    gmm_problem_offsets(p, th, b);
    gmm_lik lk;
    ck_assert_int_eq(gmm_problem_lik_at(p, th, &lk), GMM_OK);
    double sum = 0.0, scale = 0.0, out[4];
    for (size_t rr = 0; rr < nr; rr++) {
        if (isnan(y[rr]))
            continue;
        double hx = 0.0, hxa = 0.0;
        for (size_t k = 0; k < w; k++) {
            hx += C[rr * w + k] * x[off[rr] + k];
            hxa += fabs(C[rr * w + k] * x[off[rr] + k]);
        }
        gmm_lik_eval(&lk, y[rr], ex ? ex[rr] : 1.0, b[rr] + hx, out, NULL);
        sum += out[0];
        scale += fabs(out[0]) + fabs(out[2]) * hxa * hxa;
        for (size_t k = 0; k < w; k++) {
            a[off[rr] + k] += C[rr * w + k] * out[1];
            aa[off[rr] + k] += fabs(C[rr * w + k]) * (fabs(out[1]) + fabs(out[2]) * hxa);
        }
    }
    double q = 0.0, qabs = 0.0, vv = 0.0;
    for (size_t j = 0; j < n; j++) {
        q += x[j] * qx[j];
        qabs += fabs(x[j]) * qa[j];
        vv += v[j] * v[j];
    }
    double want = sum - 0.5 * (lap ? q : vv), tol = 8.0 * (double)(n + kl + 8) * 2.22e-16;
    scale += qabs + vv;
    ck_assert_msg(fabs(lp - want) <= tol * scale, "%s: lp %.17g, dense %.17g (scale %g)", label,
                  lp, want, scale);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double gi = lap ? 0.0 : -v[i], si = fabs(v[i]);
        for (size_t j = 0; j < n; j++) {
            gi += J[j * n + i] * (a[j] - (lap ? qx[j] : 0.0));
            si += fabs(J[j * n + i]) * (aa[j] + qa[j]);
        }
        ck_assert_msg(fabs(g[i] - gi) <= tol * si, "%s: gradient[%zu] %.17g, dense %.17g "
                      "(scale %g)", label, i, g[i], gi, si);
        worst = fmax(worst, fabs(g[i] - gi) / si);
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "whitened dense %s: lp off by %.2g of its scale, gradient %.2g "
                "(allowance %.2g; n %zu, kl %zu, %zu parameters)\n", label,
                fabs(lp - want) / scale, worst, tol, n, kl, np);
    /* the gradient against fourth-order differences */
    wctx c = {p, v};
    size_t wi = 0;
    double fd = tu_fd_check4(v, n, g, lp_fd, &c, 1e-3, 1.0, &wi);
    ck_assert_msg(fd < 1e-7, "%s: gradient against differences off by %g at v[%zu]", label, fd,
                  wi);
    gmm_band_free(Qb);
    free(v);
    free(g);
    free(x);
    free(x0);
    free(J);
    free(Q);
    free(C);
    free(b);
    free(a);
    free(aa);
    free(qx);
    free(qa);
}

/* Counts of rate about 20: the data dominate the prior, as in the
 * benchmarks, so the Laplace map's x'Qx cancels. */
static double *count_data(size_t nr, uint64_t seed)
{
    tu_rng r;
    tu_rng_seed(&r, seed);
    double *y = malloc(nr * sizeof *y);
    for (size_t i = 0; i < nr; i++)
        y[i] = i % 9 == 4 ? NAN : floor(20.0 * exp(0.6 * tu_normal(&r)));
    return y;
}

/* Both maps on lat (Poisson, an intercept and a covariate when cov), or
 * the prior's alone where the Laplace map is refused (constraints). */
static void check_dense_maps(gmm_latent *lat, int cov, const char *label)
{
    size_t nr = gmm_latent_nrows(lat);
    double *y = count_data(nr, 21), *X = malloc(3 * nr * sizeof *X), *e = malloc(nr * sizeof *e);
    for (size_t i = 0; i < nr; i++) {
        X[2 * i] = 1.0;
        X[2 * i + 1] = sin(0.7 * (double)i);
        X[2 * nr + i] = 1.0; /* the intercept alone */
        e[i] = 0.5 + (double)(i % 4);
    }
    const char *names[] = {"intercept", "z"};
    double start[] = {log(20.0) - 0.5, 0.3};
    gmm_problem_design d = {cov ? 2 : 1, cov ? X : X + 2 * nr, names, start, 0};
    gmm_lik lik;
    ck_assert_int_eq(gmm_lik_parse("poisson", &lik), GMM_OK);
    gmm_problem *p = NULL;
    ck_assert_msg(gmm_problem_alloc_design(lat, &lik, y, cov ? e : NULL, &d, &p) == GMM_OK, "%s",
                  gmm_error_message());
    char buf[96];
    snprintf(buf, sizeof buf, "%s, prior map", label);
    check_dense(p, buf);
    gmm_problem_set_metric(p, GMM_METRIC_LAPLACE);
    if (gmm_latent_nconstr(lat)) {
        ck_assert_int_eq(gmm_problem_whiten_setup(p, gmm_problem_objective(p)->value),
                         GMM_EINVAL);
    } else {
        snprintf(buf, sizeof buf, "%s, Laplace map", label);
        check_dense(p, buf);
    }
    gmm_problem_free(p);
    free(X);
    free(e);
    free(y);
}

START_TEST(test_whitened_dense_models)
{
    /* graph: one coefficient per row, several rows per node */
    size_t ei[12], ej[12];
    for (size_t i = 0; i < 11; i++) {
        ei[i] = i;
        ej[i] = i + 1;
    }
    ei[11] = 0, ej[11] = 7;
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(12, 12, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("edge-ou(variance=1.5, lengthscale=2)", &s), GMM_OK);
    gmm_gmrf *m = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, s, NULL, &m), GMM_OK);
    size_t node[15];
    for (size_t r = 0; r < 15; r++)
        node[r] = (r * 7) % 12;
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(m, 15, node, &lat), GMM_OK);
    check_dense_maps(lat, 0, "graph");
    check_dense_maps(lat, 1, "graph, covariate");
    gmm_latent_free(lat);

    /* state space: rows read windows of two states; a demodulated
     * periodic kernel's rows depend on theta */
    gmm_kernel *k = NULL;
    double x[30];
    for (size_t i = 0; i < 30; i++)
        x[i] = 0.37 * (double)i;
    const char *kern[] = {"matern32(variance=1.2, lengthscale=0.8) + "
                          "matern12(variance=0.3, lengthscale=2)",
                          "periodic(variance=0.8, lengthscale=1.1, period=2.3, harmonics=2) + "
                          "matern12(variance=0.2, lengthscale=1)"};
    for (int i = 0; i < 2; i++) {
        gmm_spec_node *ks = NULL;
        ck_assert_int_eq(gmm_spec_parse(kern[i], &ks), GMM_OK);
        ck_assert_int_eq(gmm_kernel_from_spec(ks, &k), GMM_OK);
        gmm_ssm_params par;
        gmm_ssm_params_init(&par);
        par.damp_rel = 1e-3;
        ck_assert_int_eq(gmm_latent_ssm_alloc(k, x, 30, &par, &lat), GMM_OK);
        check_dense_maps(lat, 1, i ? "demodulated" : "state-space");
        gmm_latent_free(lat);
        gmm_kernel_free(k);
        gmm_spec_free(ks);
    }

    /* stacks: two iid factors (a sparse map, two coefficients per row),
     * an iid factor beside a graph, and a random walk (constrained) beside
     * an iid factor, as formulas build them */
    size_t lev[2][40];
    double val[40];
    tu_rng r;
    tu_rng_seed(&r, 8);
    for (size_t i = 0; i < 40; i++) {
        lev[0][i] = (size_t)(tu_uniform(&r) * 7);
        lev[1][i] = (size_t)(tu_uniform(&r) * 12);
        val[i] = 0.3 * (double)(size_t)(tu_uniform(&r) * 9);
    }
    gmm_stack_term t[3][2] = {
        {{.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7, .level = lev[0], .variance = 0.7},
         {.model = GMM_STACK_IID, .name = "f.b", .nlevel = 12, .level = lev[1], .variance = 1.3}},
        {{.model = GMM_STACK_IID, .name = "f.a", .nlevel = 7, .level = lev[0], .variance = 0.7},
         {.model = GMM_STACK_GRAPH, .name = "f.node", .level = lev[1], .gmrf = m}},
        {{.model = GMM_STACK_RW1, .name = "f.t", .value = val, .variance = 0.9},
         {.model = GMM_STACK_IID, .name = "f.b", .nlevel = 12, .level = lev[1],
          .variance = 0.4}}};
    const char *tname[] = {"stack iid+iid", "stack iid+graph", "stack rw1+iid (constrained)"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(gmm_latent_stack_alloc(40, 2, t[i], 0, &lat), GMM_OK);
        ck_assert_uint_eq(gmm_latent_nconstr(lat) > 0, i == 2);
        check_dense_maps(lat, 1, tname[i]);
        gmm_latent_free(lat);
    }
    gmm_gmrf_free(m);
    gmm_spec_free(s);
    gmm_graph_free(g);
}
END_TEST

/* lambda_max(D^1/2 K D^1/2), K the Matern-3/2 covariance at the observed
 * inputs, D the likelihood's -d2 log p at the mode's f: the generalised
 * eigenvalue of H'DH against Q, densely. */
static double dense_info(const double *x, const double *y, const double *d, size_t n, double s2,
                         double ell)
{
    size_t m = 0, idx[64];
    for (size_t i = 0; i < n; i++)
        if (!isnan(y[i]))
            idx[m++] = i;
    gsl_matrix *A = gsl_matrix_alloc(m, m);
    for (size_t a = 0; a < m; a++)
        for (size_t b = 0; b < m; b++) {
            double r = sqrt(3.0) * fabs(x[idx[a]] - x[idx[b]]) / ell;
            double k = s2 * (1.0 + r) * exp(-r);
            gsl_matrix_set(A, a, b, sqrt(d[idx[a]] * d[idx[b]]) * k);
        }
    gsl_vector *ev = gsl_vector_alloc(m);
    gsl_eigen_symm_workspace *w = gsl_eigen_symm_alloc(m);
    ck_assert_int_eq(gsl_eigen_symm(A, ev, w), 0);
    double mx = gsl_vector_max(ev);
    gsl_eigen_symm_free(w);
    gsl_vector_free(ev);
    gsl_matrix_free(A);
    return mx;
}

START_TEST(test_data_information)
{
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse("matern32(variance=1.3, lengthscale=2.5)", &s), GMM_OK);
    gmm_kernel *k = NULL;
    ck_assert_int_eq(gmm_kernel_from_spec(s, &k), GMM_OK);
    size_t n = 40;
    double x[40], yg[40], yp[40], d[40], mean[40], var[40];
    for (size_t i = 0; i < n; i++) {
        x[i] = 0.3 * (double)i;
        yg[i] = i % 7 == 6 ? NAN : sin(x[i]);
        yp[i] = i % 7 == 6 ? NAN : floor(6.0 + 5.0 * sin(x[i]));
    }
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_ssm_alloc(k, x, n, NULL, &lat), GMM_OK);
    for (int pois = 0; pois < 2; pois++) {
        gmm_lik lik;
        ck_assert_int_eq(gmm_lik_parse(pois ? "poisson" : "gaussian(variance=0.05)", &lik),
                         GMM_OK);
        gmm_problem *p = NULL;
        ck_assert_int_eq(gmm_problem_alloc(lat, &lik, pois ? yp : yg, NULL, pois, 1.2, &p),
                         GMM_OK);
        const double *th = gmm_problem_objective(p)->value;
        ck_assert_int_eq(gmm_problem_predict_rows(p, th, mean, var), GMM_OK);
        for (size_t i = 0; i < n; i++)
            d[i] = pois ? exp(mean[i]) : 1.0 / 0.05; /* f^ = b + x^ at row i */
        double want = dense_info(x, pois ? yp : yg, d, n, 1.3, 2.5), got;
        gmm_problem_set_metric(p, GMM_METRIC_LAPLACE);
        ck_assert_int_eq(gmm_problem_data_information(p, th, &got), GMM_OK);
        ck_assert_int_eq(gmm_problem_metric(p), GMM_METRIC_LAPLACE);
        /* the power iteration stops at a relative change of 1e-3 */
        ck_assert_msg(fabs(got - want) <= 1e-2 * want, "%s: information %.6g, dense %.6g",
                      lik.type->name, got, want);
        if (getenv("GMM_TEST_REPORT"))
            fprintf(stderr, "data information %s: %.6g, dense %.6g\n", lik.type->name, got, want);
        gmm_problem_free(p);
    }
    gmm_latent_free(lat);
    gmm_kernel_free(k);
    gmm_spec_free(s);
}
END_TEST

Suite *infer_whitened_suite(void)
{
    Suite *s = suite_create("infer_whitened");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_whitened_ssm);
    tcase_add_test(tc, test_whitened_graph);
    tcase_add_test(tc, test_whitened_dense);
    tcase_add_test(tc, test_whitened_dense_models);
    tcase_add_test(tc, test_data_information);
    suite_add_tcase(s, tc);
    return s;
}
