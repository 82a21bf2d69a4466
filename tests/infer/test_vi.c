/* test_vi.c -- precision-parameterised variational inference (vi.h):
 * the ELBO's gradient against finite differences for every likelihood on
 * small state-space and graph models (both prior forms); with a Gaussian
 * likelihood, L-BFGS from m = 0, L = I reaching the exact log marginal
 * likelihood and the exact posterior; Poisson counts on two latents against
 * the exact posterior moments by quadrature; the square-root prior terms
 * against a dense long-double computation at close inputs.
 *
 * CK_VERBOSITY=verbose prints the measured errors. */
#include <check.h>
#include <float.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_sf_gamma.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/fit.h"
#include "gmm/graph.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/spec.h"
#include "gmm/stack.h"
#include "gmm/vi.h"
#include "support/testutil.h"
#include "support/tu_dense_gp.h"
#include "support/tu_model.h"

static int verbose(void)
{
    const char *v = getenv("CK_VERBOSITY");
    return v && strcmp(v, "verbose") == 0;
}

/* Outcomes for a likelihood from a smooth f; every 7th row missing. */
static void outcomes(const gmm_lik *lik, tu_rng *r, size_t n, double *y, double *e)
{
    for (size_t i = 0; i < n; i++) {
        double f = 0.8 * sin(0.37 * (double)i) + 0.3 * tu_normal(r);
        e[i] = 0.5 + 1.5 * tu_uniform(r);
        if (!strcmp(lik->type->name, "bernoulli"))
            y[i] = tu_uniform(r) < 1.0 / (1.0 + exp(-f)) ? 1.0 : 0.0;
        else if (!strcmp(lik->type->name, "binomial")) {
            e[i] = floor(1.0 + 12.0 * tu_uniform(r));
            y[i] = 0.0;
            for (double k = 0; k < e[i]; k++)
                y[i] += tu_uniform(r) < 1.0 / (1.0 + exp(-f)) ? 1.0 : 0.0;
        } else if (lik->type->rowq && !strcmp(lik->type->rowq, "exposure"))
            y[i] = floor(e[i] * exp(f + 0.5) + 2.0 * tu_uniform(r));
        else
            y[i] = f + 0.3 * tu_normal(r) + (i % 9 == 4 && lik->type->nparam == 2 ? 5.0 : 0.0);
        if (i % 7 == 3)
            y[i] = NAN;
    }
}

static gmm_latent *ssm_latent(const char *spec, const double *x, size_t n, gmm_kernel **k)
{
    *k = tu_kernel_of(spec);
    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.damp_rel = 1e-3; /* oscillators: damping far from rounding */
    gmm_latent *lat = NULL;
    ck_assert_msg(gmm_latent_ssm_alloc(*k, x, n, &par, &lat) == GMM_OK, "%s: %s", spec,
                  gmm_error_message());
    return lat;
}

/* A ring of 12 nodes with two chords; rows observe nodes (some twice, one
 * never). */
typedef struct {
    gmm_graph *g;
    gmm_gmrf *m;
    gmm_latent *lat;
} graph_model;

static void graph_of(const char *spec, size_t rows, graph_model *gm)
{
    size_t ei[14], ej[14], nn = 12, node[64];
    double len[14];
    for (size_t i = 0; i < 12; i++) {
        ei[i] = i;
        ej[i] = (i + 1) % 12;
        len[i] = 0.5 + 0.1 * (double)i;
    }
    ei[12] = 0, ej[12] = 6, len[12] = 2.0;
    ei[13] = 3, ej[13] = 9, len[13] = 1.5;
    ck_assert_int_eq(gmm_graph_from_edges(nn, 14, ei, ej, len, NULL, NULL, &gm->g), GMM_OK);
    gmm_spec_node *s = NULL;
    ck_assert_int_eq(gmm_spec_parse(spec, &s), GMM_OK);
    ck_assert_msg(gmm_gmrf_alloc(gm->g, s, spec, &gm->m) == GMM_OK, "%s", gmm_error_message());
    gmm_spec_free(s);
    ck_assert(rows <= 64);
    for (size_t r = 0; r < rows; r++)
        node[r] = (r * 5) % 11;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(gm->m, rows, node, &gm->lat), GMM_OK);
}

static void graph_free(graph_model *gm)
{
    gmm_latent_free(gm->lat);
    gmm_gmrf_free(gm->m);
    gmm_graph_free(gm->g);
}

/* ---- gradient against finite differences ---------------------------------------------- */

typedef struct {
    gmm_vi *v;
    double *th, *lam;
} fd_ctx;

static double elbo_f(void *vc)
{
    fd_ctx *c = vc;
    double f;
    ck_assert_msg(gmm_vi_elbo(c->v, c->th, c->lam, &f, NULL, NULL) == GMM_OK, "%s",
                  gmm_error_message());
    return f;
}

/* tu_fd_check4 over at most nsample entries of p drawn with r (all of them
 * in order when m <= nsample). */
static double fd4_sample(double *p, size_t m, const double *g, tu_scalar_fn f, void *ctx,
                         double step, size_t nsample, tu_rng *r, size_t *worst)
{
    if (m <= nsample)
        return tu_fd_check4(p, m, g, f, ctx, step, 1.0, worst);
    double maxerr = 0.0;
    for (size_t s = 0; s < nsample; s++) {
        size_t i = (size_t)(tu_uniform(r) * (double)m);
        double err = tu_fd_check4(p + i, 1, g + i, f, ctx, step, 1.0, NULL);
        if (!(err <= maxerr)) {
            maxerr = err;
            *worst = i;
        }
    }
    return maxerr;
}

/* The ELBO's gradient in lambda (every entry, or a sample of 150; not with
 * theta_only) and in theta (every entry) against 4th-order central
 * differences: relative 1e-6 of max(|g|, 1).  q: the Laplace start, moved
 * at random. */
static void check_grad_mode(gmm_latent *lat, const char *liktext, gmm_vi_prior_form form,
                            size_t bandwidth, const char *label, int theta_only)
{
    tu_rng r;
    tu_rng_seed(&r, 19);
    size_t nr = gmm_latent_nrows(lat);
    gmm_lik lik = tu_lik_of(liktext, 1.7);
    double *y = malloc(nr * sizeof *y), *e = malloc(nr * sizeof *e);
    outcomes(&lik, &r, nr, y, e);
    int gauss = lik.type->conjugate;
    gmm_problem *p = NULL;
    ck_assert_msg(gmm_problem_alloc(lat, &lik, y, lik.type->rowq ? e : NULL, !gauss, 0.3,
                                    &p) == GMM_OK,
                  "%s: %s", label, gmm_error_message());
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.prior = form;
    par.bandwidth = bandwidth;
    par.nquad = 40; /* one rule throughout (no switching between differences) */
    gmm_vi *v = NULL;
    ck_assert_msg(gmm_vi_alloc(p, &par, &v) == GMM_OK, "%s", gmm_error_message());
    const char *start = NULL;
    ck_assert_msg(gmm_vi_start_laplace(v, &start) == GMM_OK, "%s", gmm_error_message());
    ck_assert_str_eq(start, "laplace");
    size_t nv = gmm_vi_nvar(v), np = gmm_vi_nparam(v);
    double *lam = malloc(nv * sizeof *lam), *th = malloc(np * sizeof *th);
    double *gl = malloc(nv * sizeof *gl), *gt = malloc(np * sizeof *gt), f;
    memcpy(lam, gmm_vi_lambda(v), nv * sizeof *lam);
    memcpy(th, gmm_vi_theta(v), np * sizeof *th);
    /* theta_only: a small move, the prior's precision being ~ 1 / damp
     * along a damped kernel (a move of 0.1 makes the ELBO ~ -1e8, whose
     * rounding drowns the differences) */
    for (size_t j = 0; j < nv; j++)
        lam[j] += (theta_only ? 1e-6 : 0.1) * tu_normal(&r);
    ck_assert_msg(gmm_vi_elbo(v, th, lam, &f, gl, gt) == GMM_OK, "%s", gmm_error_message());
    fd_ctx c = {v, th, lam};
    size_t worst = 0;
    double el = theta_only ? 0.0 : fd4_sample(lam, nv, gl, elbo_f, &c, 1e-4, 150, &r, &worst);
    ck_assert_msg(el < 1e-6, "%s %s: d/dlambda[%zu] %.10g, relative error %.3g", label, liktext,
                  worst, gl[worst], el);
    double et = tu_fd_check4(th, np, gt, elbo_f, &c, 1e-4, 1.0, &worst);
    ck_assert_msg(et < 1e-6, "%s %s: d/d%s %.10g, relative error %.3g", label, liktext,
                  gmm_problem_objective(p)->name[worst], gt[worst], et);
    if (verbose())
        printf("vi gradient %-12s %-24s %s: lambda %.2e, theta %.2e (ELBO %.6f)\n", label,
               liktext, gmm_vi_uses_rows(v) ? "rows" : "assembled", el, et, f);
    free(lam);
    free(th);
    free(gl);
    free(gt);
    gmm_vi_free(v);
    gmm_problem_free(p);
    free(y);
    free(e);
}

static void check_grad_bw(gmm_latent *lat, const char *liktext, gmm_vi_prior_form form,
                          size_t bandwidth, const char *label)
{
    check_grad_mode(lat, liktext, form, bandwidth, label, 0);
}

static void check_grad(gmm_latent *lat, const char *liktext, gmm_vi_prior_form form,
                       const char *label)
{
    check_grad_bw(lat, liktext, form, GMM_VI_BANDWIDTH_PRIOR, label);
}

static const char *all_liks[] = {"gaussian(variance=0.3)", "poisson", "bernoulli",
                                 "negbinomial(dispersion=1.7)", "binomial",
                                 "studentt(df=3.5, scale=0.4)"};
#define NLIKS (sizeof all_liks / sizeof all_liks[0])

START_TEST(test_vi_grad_ssm)
{
    /* matern32; and a sum with a periodic term, whose observation rows
     * vary with theta (demodulated: their gradient flows through
     * gmm_latent_obs_coef_rev) */
    const char *kernels[] = {"matern32(variance=1.3, lengthscale=0.7)",
                             "matern12(variance=0.8, lengthscale=2) + "
                             "periodic(variance=0.7, lengthscale=1.2, period=2.3, harmonics=1)"};
    tu_rng r;
    tu_rng_seed(&r, 5);
    size_t n = 14;
    double x[14];
    for (size_t i = 0; i < n; i++)
        x[i] = 0.3 * (double)i + 0.1 * tu_uniform(&r);
    x[9] = x[8]; /* a repeated input: two rows of one state */
    for (size_t ik = 0; ik < 2; ik++) {
        gmm_kernel *k = NULL;
        gmm_latent *lat = ssm_latent(kernels[ik], x, n, &k);
        if (ik == 1)
            ck_assert(gmm_latent_obs_varies(lat));
        for (size_t il = 0; il < NLIKS; il++)
            check_grad(lat, all_liks[il], GMM_VI_PRIOR_AUTO, "state-space");
        check_grad(lat, "poisson", GMM_VI_PRIOR_ASSEMBLED, "state-space");
        check_grad(lat, "gaussian(variance=0.3)", GMM_VI_PRIOR_ASSEMBLED, "state-space");
        /* q's band narrower and wider than the prior's: the rows' moments
         * read a window of L and Sigma that ends where q's band does */
        size_t kl = gmm_latent_bandwidth(lat);
        check_grad_bw(lat, "poisson", GMM_VI_PRIOR_ROWS, 0, "state-space b 0");
        check_grad_bw(lat, "poisson", GMM_VI_PRIOR_ROWS, kl - 1, "state-space b kl - 1");
        check_grad_bw(lat, "bernoulli", GMM_VI_PRIOR_ROWS, kl + 3, "state-space b kl + 3");
        gmm_latent_free(lat);
        gmm_kernel_free(k);
    }
}
END_TEST

/* A stack with a damped periodic summand (stack_sqrt.c, SQUARE-ROOT FORM) at
 * the default damping: vi takes its merged rows (D in double-double) and
 * the hyperparameters' gradient from q's moments (gmm_latent_prior_rows_rev_q:
 * a damped block's E_q[x'Qx] from tr(Q S) = n + tr(D S)); the rows of the
 * periodic vary with its period.  The gradient in theta only, at a q moved
 * by 1e-6: in lambda (the rows' code, checked above at damp_rel 1e-3) the
 * differences at the default damping were off by 7e-4 of the gradient for a
 * kernel alone as well, the ELBO being ~ -1e8 there (measured). */
START_TEST(test_vi_grad_stack_damped)
{
    gmm_kernel *k = tu_kernel_of("matern12(variance=0.8, lengthscale=2) + "
                                 "periodic(variance=0.7, lengthscale=1.2, period=2.3, harmonics=1)");
    size_t n = 14, lev[14];
    double x[14];
    tu_rng r;
    tu_rng_seed(&r, 9);
    for (size_t i = 0; i < n; i++) {
        x[i] = 0.3 * (double)i + 0.1 * tu_uniform(&r);
        lev[i] = i / 5; /* local groups: a narrow band */
    }
    x[9] = x[8];
    gmm_stack_term term[2] = {
        {.model = GMM_STACK_KERNEL, .name = "f.t", .value = x, .kernel = k},
        {.model = GMM_STACK_IID, .name = "f.g", .nlevel = 3, .level = lev, .variance = 0.4}};
    gmm_latent *lat = NULL;
    ck_assert_msg(gmm_latent_stack_alloc(n, 2, term, 0, &lat) == GMM_OK, "%s",
                  gmm_error_message());
    ck_assert(!gmm_latent_assembled(lat) && gmm_latent_has_rows_rev_q(lat));
    ck_assert(gmm_latent_obs_varies(lat));
    const char *liks[] = {"gaussian(variance=0.3)", "poisson", "bernoulli"};
    for (size_t il = 0; il < 3; il++)
        check_grad_mode(lat, liks[il], GMM_VI_PRIOR_AUTO, GMM_VI_BANDWIDTH_PRIOR, "stack damped",
                        1);
    size_t kl = gmm_latent_bandwidth(lat);
    /* a q band wider than the prior's (a narrower one cannot follow the
     * damped chain's ~ 1 / damp couplings: the ELBO ~ -1e8 again) */
    check_grad_mode(lat, "poisson", GMM_VI_PRIOR_ROWS, kl + 2, "stack damped b kl + 2", 1);
    gmm_latent_free(lat);
    /* beside an intrinsic rw1 (sum to zero): the rows hold the pins, which
     * D, m'Qm and -Qm drop (gmm_latent_prior_rows_pins); q conditioned */
    double z[14];
    for (size_t i = 0; i < n; i++)
        z[i] = (double)((i * 5) % 7);
    term[1] = (gmm_stack_term){.model = GMM_STACK_RW1, .name = "f.z", .value = z};
    ck_assert_msg(gmm_latent_stack_alloc(n, 2, term, 0, &lat) == GMM_OK, "%s",
                  gmm_error_message());
    ck_assert_uint_eq(gmm_latent_nconstr(lat), 1);
    /* Gaussian and Poisson: with Bernoulli outcomes here the differences'
     * own floor along the periodic variance is ~ 5e-7 of its gradient (central
     * differences at steps 1e-3 .. 1e-6: truncation 2.7e-5 down to noise
     * 2.4e-6; measured), the test's 1e-6 */
    for (size_t il = 0; il < 2; il++)
        check_grad_mode(lat, liks[il], GMM_VI_PRIOR_AUTO, GMM_VI_BANDWIDTH_PRIOR,
                        "stack damped + rw1", 1);
    gmm_latent_free(lat);
    gmm_kernel_free(k);
}
END_TEST

START_TEST(test_vi_grad_graph)
{
    graph_model gm;
    graph_of("laplacian(precision=0.8, ridge=0.3) + edge-ou(variance=2, lengthscale=0.7)", 17,
             &gm);
    for (size_t il = 0; il < NLIKS; il++)
        check_grad(gm.lat, all_liks[il], GMM_VI_PRIOR_AUTO, "graph");
    graph_free(&gm);
}
END_TEST

/* ---- the start -------------------------------------------------------------------------- */

/* gmm_vi_start_laplace is the Laplace approximation: its mode and the
 * covariance band of P^-1 (gmm_problem_posterior), with the factor folded
 * from the prior's rows and the rows sorted by state (inputs given out of
 * order, one repeated); for a Gaussian likelihood that is the exact
 * posterior: the ELBO there is log p(y) and its lambda-gradient 0. */
static void check_start(gmm_latent *lat, const char *liktext, gmm_vi_prior_form form,
                        const char *label)
{
    tu_rng r;
    tu_rng_seed(&r, 37);
    size_t nr = gmm_latent_nrows(lat), n = gmm_latent_dim(lat);
    gmm_lik lik = tu_lik_of(liktext, 1.7);
    double *y = malloc(nr * sizeof *y), *e = malloc(nr * sizeof *e);
    outcomes(&lik, &r, nr, y, e);
    int gauss = lik.type->conjugate;
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, lik.type->rowq ? e : NULL, !gauss, 0.3,
                                       &p),
                     GMM_OK);
    gmm_objective *o = gmm_problem_objective(p);
    size_t ckl = gmm_latent_cov_bandwidth(lat);
    gmm_band *c1 = gmm_band_alloc(n, ckl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *c2 = gmm_band_alloc(n, ckl, 0, GMM_BAND_SYMMETRIC);
    double *m1 = malloc(n * sizeof *m1), *m2 = malloc(n * sizeof *m2), f, lp;
    ck_assert_int_eq(o->eval(o->ctx, o->value, &lp, NULL), GMM_OK);
    ck_assert_int_eq(gmm_problem_posterior(p, o->value, m1, c1), GMM_OK);
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.prior = form;
    gmm_vi *v = NULL;
    ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK);
    const char *start;
    ck_assert_int_eq(gmm_vi_start_laplace(v, &start), GMM_OK);
    ck_assert_str_eq(start, "laplace");
    ck_assert_int_eq(gmm_vi_posterior(v, m2, c2), GMM_OK);
    double *d1 = tu_band_to_dense(c1);
    double em = tu_max_rel_diff(m2, m1, n), ec = tu_band_vs_dense(c2, d1);
    ck_assert_msg(em < 1e-9 && ec < 1e-9, "%s %s: start's mean off by %.3g, covariance by %.3g",
                  label, liktext, em, ec);
    double *g = malloc(gmm_vi_nvar(v) * sizeof *g), gn = 0.0;
    ck_assert_int_eq(gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &f, g, NULL), GMM_OK);
    for (size_t j = 0; j < gmm_vi_nvar(v); j++)
        gn = fmax(gn, fabs(g[j]));
    if (verbose())
        printf("vi start %-12s %-24s %s: mean %.1e, cov %.1e; ELBO %.12f, log q(y) %.12f, "
               "|grad| %.1e\n",
               label, liktext, gmm_vi_uses_rows(v) ? "rows" : "assembled", em, ec, f, lp, gn);
    if (gauss)
        ck_assert_msg(fabs(f - lp) <= 1e-10 * fabs(lp) && gn < 1e-8,
                      "%s: ELBO %.15g vs log p(y) %.15g, gradient %.3g", label, f, lp, gn);
    else
        ck_assert_msg(f < lp + 0.5, "%s: ELBO %.15g vs Laplace %.15g", label, f, lp);
    free(g);
    free(d1);
    free(m1);
    free(m2);
    gmm_band_free(c1);
    gmm_band_free(c2);
    gmm_vi_free(v);
    gmm_problem_free(p);
    free(y);
    free(e);
}

START_TEST(test_vi_start)
{
    size_t n = 24;
    double x[24];
    for (size_t i = 0; i < n; i++)
        x[i] = 0.35 * (double)((i * 7) % n); /* a permutation of the grid */
    x[5] = x[11];
    gmm_kernel *k = NULL;
    gmm_latent *lat = ssm_latent("matern52(variance=1.1, lengthscale=1.3)", x, n, &k);
    for (int f = 0; f < 2; f++) {
        gmm_vi_prior_form form = f ? GMM_VI_PRIOR_ASSEMBLED : GMM_VI_PRIOR_AUTO;
        check_start(lat, "gaussian(variance=0.2)", form, "state-space");
        check_start(lat, "poisson", form, "state-space");
        check_start(lat, "bernoulli", form, "state-space");
    }
    gmm_latent_free(lat);
    gmm_kernel_free(k);
    graph_model gm;
    graph_of("edge-ou(variance=1.5, lengthscale=2)", 17, &gm);
    check_start(gm.lat, "gaussian(variance=0.2)", GMM_VI_PRIOR_AUTO, "graph");
    check_start(gm.lat, "negbinomial(dispersion=2)", GMM_VI_PRIOR_AUTO, "graph");
    graph_free(&gm);
}
END_TEST

/* ---- Gaussian likelihood: VI is exact --------------------------------------------------- */

/* From m = 0, L = I, L-BFGS reaches the exact log marginal likelihood and
 * the exact posterior (mean, covariance band) when b covers the
 * posterior's bandwidth. */
static void check_gaussian_exact(gmm_latent *lat, const double *y, const char *label,
                                 size_t memory)
{
    gmm_lik lik = tu_lik_of("gaussian(variance=0.2)", 1.7);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 0, 0.0, &p), GMM_OK);
    gmm_objective *o = gmm_problem_objective(p);
    double exact;
    ck_assert_int_eq(o->eval(o->ctx, o->value, &exact, NULL), GMM_OK);
    size_t n = gmm_latent_dim(lat), kl = gmm_latent_bandwidth(lat);
    double *mx = malloc(n * sizeof *mx), *mv = malloc(n * sizeof *mv);
    gmm_band *cx = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *cv = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_problem_posterior(p, o->value, mx, cx), GMM_OK);
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.tol = 0.0; /* to the gradient test */
    par.epsilon = 1e-9;
    par.max_iter = 20000;
    par.memory = memory;
    gmm_vi *v = NULL;
    ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK);
    ck_assert_int_eq(gmm_vi_set_state(v, NULL, NULL, NULL), GMM_OK);
    gmm_vi_result res;
    ck_assert_msg(gmm_vi_fit(v, &res) == GMM_OK, "%s", gmm_error_message());
    ck_assert_str_eq(res.start, "given");
    ck_assert_int_eq(gmm_vi_posterior(v, mv, cv), GMM_OK);
    double em = 0.0, sm = 0.0;
    for (size_t j = 0; j < n; j++) {
        em = fmax(em, fabs(mv[j] - mx[j]));
        sm = fmax(sm, fabs(mx[j]));
    }
    double *cxd = tu_band_to_dense(cx);
    double ec = tu_band_vs_dense(cv, cxd);
    double rel = fabs(res.elbo - exact) / fabs(exact);
    if (verbose())
        printf("vi gaussian %-12s n %3zu: %4zu iterations (%s), ELBO %.12f exact %.12f "
               "(rel %.2e), mean %.2e, cov band %.2e\n",
               label, n, res.iterations, res.message, res.elbo, exact, rel, em / fmax(1.0, sm),
               ec);
    fflush(stdout);
    ck_assert_msg(res.elbo <= exact + 1e-9 * fabs(exact), "%s: ELBO %.15g above log p(y) %.15g",
                  label, res.elbo, exact);
    ck_assert_msg(rel < 1e-6, "%s: ELBO %.15g vs exact %.15g (%s)", label, res.elbo, exact,
                  res.message);
    ck_assert_msg(em <= 1e-4 * fmax(1.0, sm) && ec <= 1e-4, "%s: mean off by %.3g, covariance "
                                                            "by %.3g",
                  label, em, ec);
    /* predictions from q as from the exact posterior */
    size_t nr = gmm_latent_nrows(lat), nq = 7;
    double *a = malloc(4 * (nr > n ? nr : n) * sizeof *a), *b = a + (nr > n ? nr : n);
    double *c = b + (nr > n ? nr : n), *d = c + (nr > n ? nr : n), ep = 0.0;
    ck_assert_int_eq(gmm_vi_predict_rows(v, a, b), GMM_OK);
    ck_assert_int_eq(gmm_problem_predict_rows(p, o->value, c, d), GMM_OK);
    for (size_t i = 0; i < nr; i++)
        ep = fmax(ep, fmax(fabs(a[i] - c[i]), fabs(b[i] - d[i])));
    if (gmm_latent_has_inputs(lat)) {
        double xq[7] = {-0.5, 0.0, 0.1, 1.05, 3.3, 7.2, 9.0};
        ck_assert_int_eq(gmm_vi_predict_at(v, xq, nq, a, b), GMM_OK);
        ck_assert_int_eq(gmm_problem_predict_at(p, o->value, xq, nq, c, d), GMM_OK);
        ck_assert_int_eq(gmm_vi_predict_nodes(v, a, b), GMM_EINVAL);
    } else {
        nq = n;
        ck_assert_int_eq(gmm_vi_predict_nodes(v, a, b), GMM_OK);
        ck_assert_int_eq(gmm_problem_predict_nodes(p, o->value, c, d), GMM_OK);
        ck_assert_int_eq(gmm_vi_predict_at(v, a, 1, b, c), GMM_EINVAL);
    }
    for (size_t i = 0; i < nq; i++)
        ep = fmax(ep, fmax(fabs(a[i] - c[i]), fabs(b[i] - d[i])));
    ck_assert_msg(ep <= 1e-4, "%s: predictions off by %.3g", label, ep);
    free(a);
    free(cxd);
    free(mx);
    free(mv);
    gmm_band_free(cx);
    gmm_band_free(cv);
    gmm_vi_free(v);
    gmm_problem_free(p);
}

START_TEST(test_vi_gaussian_exact)
{
    tu_rng r;
    tu_rng_seed(&r, 23);
    size_t n = 25;
    double x[25], y[25];
    for (size_t i = 0; i < n; i++) {
        x[i] = 0.3 * (double)i;
        y[i] = i % 6 == 4 ? NAN : sin(x[i]) + 0.4 * tu_normal(&r);
    }
    gmm_kernel *k = NULL;
    gmm_latent *lat = ssm_latent("matern32(variance=1.2, lengthscale=0.9)", x, n, &k);
    check_gaussian_exact(lat, y, "state-space", 10);
    gmm_latent_free(lat);
    gmm_kernel_free(k);
    graph_model gm;
    graph_of("edge-ou(variance=1.5, lengthscale=2)", 17, &gm);
    check_gaussian_exact(gm.lat, y, "graph", 10);
    /* memory 2: L's blocks (b + 1 > 2 memory) preconditioned by their
     * diagonals only (vi.c, SCALING) */
    ck_assert_uint_gt(gmm_latent_bandwidth(gm.lat) + 1, 4);
    check_gaussian_exact(gm.lat, y, "graph, diag", 2);
    graph_free(&gm);
}
END_TEST

/* With a Gaussian likelihood max_q ELBO = log p(y | theta), so learning the
 * hyperparameters jointly with q (learn_hyper) reaches the maximum
 * likelihood of fit.h: the same loglik and theta. */
START_TEST(test_vi_learn_hyper)
{
    tu_rng r;
    tu_rng_seed(&r, 29);
    size_t n = 40;
    double x[40], y[40];
    for (size_t i = 0; i < n; i++) {
        x[i] = 0.25 * (double)i;
        y[i] = i % 8 == 5 ? NAN : 1.5 * sin(0.8 * x[i]) + 0.3 * tu_normal(&r);
    }
    gmm_kernel *k = NULL;
    gmm_latent *lat = ssm_latent("matern32(variance=1, lengthscale=1)", x, n, &k);
    gmm_lik lik = tu_lik_of("gaussian(variance=0.5)", 1.7);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 0, 0.0, &p), GMM_OK);
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.learn_hyper = 1;
    par.tol = 1e-13;
    gmm_vi *v = NULL;
    ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK); /* copies the start theta */
    gmm_objective *o = gmm_problem_objective(p);
    gmm_fit_params fp;
    gmm_fit_params_init(&fp);
    fp.epsilon = 1e-9;
    gmm_fit_result fr;
    ck_assert_int_eq(gmm_fit(o, &fp, &fr), GMM_OK);
    gmm_vi_result res;
    ck_assert_msg(gmm_vi_fit(v, &res) == GMM_OK, "%s", gmm_error_message());
    const double *th = gmm_vi_theta(v);
    double et = 0.0;
    for (size_t i = 0; i < o->nparam; i++)
        et = fmax(et, fabs(log(th[i] / o->value[i])));
    if (verbose())
        printf("vi learn_hyper: %zu iterations, %zu restarts (%s), ELBO %.10f, ML loglik %.10f; "
               "theta (%.6f, %.6f, %.6f) off the ML fit's by %.2e in log\n",
               res.iterations, res.restarts, res.message, res.elbo, fr.loglik, th[0], th[1],
               th[2], et);
    ck_assert_msg(res.elbo <= fr.loglik + 1e-9 && fr.loglik - res.elbo < 1e-6 * fabs(fr.loglik),
                  "ELBO %.12g, ML %.12g", res.elbo, fr.loglik);
    ck_assert_msg(et < 1e-3, "theta off by %.3g in log", et);
    gmm_vi_free(v);
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_kernel_free(k);
}
END_TEST

/* ---- the API's edges ---------------------------------------------------------------------- */

static int cancel_at_3(void *user, const gmm_vi_progress *pr)
{
    size_t *calls = user;
    (*calls)++;
    ck_assert(isfinite(pr->elbo) && pr->grad_norm >= 0.0 && pr->evaluations >= pr->iteration);
    return pr->iteration == 3;
}

START_TEST(test_vi_api)
{
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    ck_assert_int_eq(gmm_vi_params_check(&par), GMM_OK);
    par.tol = -1.0;
    ck_assert_int_eq(gmm_vi_params_check(&par), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "tol"));
    gmm_vi_params_init(&par);
    par.nquad = GMM_LIK_QUAD_MAX + 1;
    ck_assert_int_eq(gmm_vi_params_check(&par), GMM_EINVAL);
    ck_assert(strstr(gmm_error_message(), "nquad"));
    gmm_vi_params_init(&par);
    par.memory = 0;
    ck_assert_int_eq(gmm_vi_params_check(&par), GMM_EINVAL);
    gmm_vi_params_init(&par);
    par.epsilon = 0.0;
    ck_assert_int_eq(gmm_vi_params_check(&par), GMM_EINVAL);

    graph_model gm;
    graph_of("edge-ou(variance=1.5, lengthscale=2)", 17, &gm);
    tu_rng r;
    tu_rng_seed(&r, 41);
    double y[17], e[17];
    gmm_lik lik = tu_lik_of("bernoulli", 1.7);
    outcomes(&lik, &r, 17, y, e);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(gm.lat, &lik, y, NULL, 1, 0.1, &p), GMM_OK);
    gmm_vi *v = NULL;
    gmm_vi_params_init(&par);
    par.prior = GMM_VI_PRIOR_ROWS; /* a graph has no square root */
    ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_EINVAL);
    ck_assert_ptr_null(v);
    /* bandwidths: the prior's by default, clamped to n - 1 */
    gmm_vi_params_init(&par);
    par.bandwidth = 1000;
    ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK);
    ck_assert_uint_eq(gmm_vi_bandwidth(v), 11);
    ck_assert_uint_eq(gmm_vi_nvar(v), 12 + 12 * 12);
    ck_assert(!gmm_vi_uses_rows(v));
    gmm_vi_free(v);
    /* a mean-field q (b = 0), bernoulli with the adaptive rule, converges
     * from the Laplace start; cancelling stops at the callback's iteration */
    gmm_vi_params_init(&par);
    par.bandwidth = 0;
    ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK);
    gmm_vi_result res;
    ck_assert_msg(gmm_vi_fit(v, &res) == GMM_OK, "%s", gmm_error_message());
    ck_assert_msg(res.converged, "%s", res.message);
    ck_assert_str_eq(res.start, "laplace");
    double *lam = malloc(gmm_vi_nvar(v) * sizeof *lam), f;
    ck_assert_int_eq(gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &f, lam, NULL), GMM_OK);
    ck_assert_msg(fabs(f - res.elbo) <= 1e-12 * fabs(f), "%.15g vs %.15g", f, res.elbo);
    gmm_vi_free(v);
    size_t calls = 0;
    par.progress = cancel_at_3;
    par.user = &calls;
    ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK);
    ck_assert_int_eq(gmm_vi_fit(v, &res), GMM_ECANCEL);
    ck_assert_uint_eq(calls, 3);
    ck_assert_uint_eq(res.iterations, 3);
    ck_assert_int_eq(gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &f, NULL, NULL), GMM_OK);
    /* set_state: a non-positive diagonal, a wrong kind; L NULL is I */
    gmm_band *L = gmm_band_alloc(12, 2, 0, GMM_BAND_LOWER);
    ck_assert_int_eq(gmm_vi_set_state(v, NULL, NULL, L), GMM_EINVAL);
    ck_assert_int_eq(gmm_band_set_kind(L, GMM_BAND_SYMMETRIC), GMM_OK);
    ck_assert_int_eq(gmm_vi_set_state(v, NULL, NULL, L), GMM_EDIM);
    ck_assert_int_eq(gmm_vi_set_state(v, NULL, NULL, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_set_kind(L, GMM_BAND_LOWER), GMM_OK);
    ck_assert_int_eq(gmm_vi_factor(v, L), GMM_OK);
    ck_assert(gmm_band_get(L, 5, 5) == 1.0 && gmm_band_get(L, 6, 5) == 0.0);
    /* a theta outside its domain is EDOM from the ELBO */
    double th[4];
    memcpy(th, gmm_vi_theta(v), gmm_vi_nparam(v) * sizeof *th);
    th[0] = -1.0;
    ck_assert_int_eq(gmm_vi_elbo(v, th, gmm_vi_lambda(v), &f, NULL, NULL), GMM_EDOM);
    free(lam);
    gmm_band_free(L);
    gmm_vi_free(v);
    gmm_problem_free(p);
    graph_free(&gm);
}
END_TEST

/* Every allocation failure of gmm_vi_alloc and gmm_vi_fit is a clean
 * GMM_ENOMEM (no leak: the sanitizer build checks). */
/* Resuming from another q: the mean and L restricted (narrower) or
 * zero-extended (wider) to the new bandwidth. */
START_TEST(test_vi_set_state_from)
{
    graph_model gm;
    graph_of("edge-ou(variance=1.5, lengthscale=2)", 17, &gm);
    tu_rng r;
    tu_rng_seed(&r, 43);
    double y[17], e[17];
    gmm_lik lik = tu_lik_of("poisson", 1.7);
    outcomes(&lik, &r, 17, y, e);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(gm.lat, &lik, y, NULL, 1, 0.1, &p), GMM_OK);
    gmm_vi_params par;
    gmm_vi *v[3] = {NULL, NULL, NULL};
    size_t bw[3] = {2, 1, 4};
    for (int k = 0; k < 3; k++) {
        gmm_vi_params_init(&par);
        par.bandwidth = bw[k];
        ck_assert_int_eq(gmm_vi_alloc(p, &par, &v[k]), GMM_OK);
    }
    gmm_vi_result res;
    ck_assert_int_eq(gmm_vi_fit(v[0], &res), GMM_OK);
    const double *th = gmm_problem_objective(p)->value;
    size_t n = gmm_vi_dim(v[0]);
    gmm_band *L0 = gmm_band_alloc(n, 2, 0, GMM_BAND_LOWER);
    ck_assert_int_eq(gmm_vi_factor(v[0], L0), GMM_OK);
    for (int k = 1; k < 3; k++) {
        ck_assert_int_eq(gmm_vi_set_state_from(v[k], th, v[0]), GMM_OK);
        gmm_band *Lk = gmm_band_alloc(n, bw[k], 0, GMM_BAND_LOWER);
        ck_assert_int_eq(gmm_vi_factor(v[k], Lk), GMM_OK);
        for (size_t i = 0; i < n; i++) {
            ck_assert(gmm_vi_mean(v[k])[i] == gmm_vi_mean(v[0])[i]);
            for (size_t j = 0; j <= bw[k] && j <= i; j++) {
                double want = j <= 2 ? gmm_band_get(L0, i, i - j) : 0.0;
                ck_assert_msg(fabs(gmm_band_get(Lk, i, i - j) - want) <= 1e-14 * fabs(want),
                              "b %zu: L(%zu, %zu) %.17g, want %.17g", bw[k], i, i - j,
                              gmm_band_get(Lk, i, i - j), want);
            }
        }
        gmm_band_free(Lk);
    }
    ck_assert_int_eq(gmm_vi_set_state_from(v[1], th, NULL), GMM_EINVAL);
    gmm_band_free(L0);
    for (int k = 0; k < 3; k++)
        gmm_vi_free(v[k]);
    gmm_problem_free(p);
    graph_free(&gm);
}
END_TEST

START_TEST(test_vi_oom)
{
    graph_model gm;
    graph_of("edge-ou(variance=1.5, lengthscale=2)", 17, &gm);
    tu_rng r;
    tu_rng_seed(&r, 43);
    double y[17], e[17];
    gmm_lik lik = tu_lik_of("poisson", 1.7);
    outcomes(&lik, &r, 17, y, e);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(gm.lat, &lik, y, e, 1, 0.1, &p), GMM_OK);
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.learn_hyper = 1;
    int failed = 0;
    for (long k = 0; k < 200; k++) {
        gmm_vi *v = NULL;
        gmm_vi_result res;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_vi_alloc(p, &par, &v);
        if (st == GMM_OK)
            st = gmm_vi_fit(v, &res);
        gmm_alloc_fail_after(-1);
        gmm_vi_free(v);
        if (st == GMM_OK)
            break;
        ck_assert_msg(st == GMM_ENOMEM, "k = %ld: %s", k, gmm_error_message());
        failed++;
    }
    ck_assert_int_gt(failed, 10);
    gmm_problem_free(p);
    graph_free(&gm);
}
END_TEST

/* ---- Poisson counts on two latents: q against the exact posterior ------------------------- */

/* The unnormalised posterior of two latents, exp(log p(x, y) - shift), times
 * a monomial x0^p0 x1^p1 (latent order). */
typedef struct {
    double Q[3]; /* Q00, Q10, Q11 */
    size_t nobs;
    const size_t *off;
    const double *y, *e;
    double b0, shift;
    int p0, p1;
    double x1; /* the outer variable */
    double lo0, hi0;
    gsl_integration_workspace *wi;
} post2;

static double logjoint2(const post2 *c, double x0, double x1)
{
    double s = -0.5 * (c->Q[0] * x0 * x0 + 2.0 * c->Q[1] * x0 * x1 + c->Q[2] * x1 * x1);
    for (size_t r = 0; r < c->nobs; r++) {
        double f = c->b0 + (c->off[r] ? x1 : x0);
        s += c->y[r] * (f + log(c->e[r])) - c->e[r] * exp(f) - gsl_sf_lngamma(c->y[r] + 1.0);
    }
    return s;
}

static double inner2(double x0, void *vp)
{
    const post2 *c = vp;
    return pow(x0, c->p0) * pow(c->x1, c->p1) * exp(logjoint2(c, x0, c->x1) - c->shift);
}

static double outer2(double x1, void *vp)
{
    post2 *c = vp;
    c->x1 = x1;
    gsl_function F = {inner2, c};
    double r, err;
    int st = gsl_integration_qag(&F, c->lo0, c->hi0, 0.0, 1e-12, 200, GSL_INTEG_GAUSS31, c->wi,
                                 &r, &err);
    ck_assert_msg(st == 0 || st == GSL_EROUND, "inner quadrature: %s", gsl_strerror(st));
    return r;
}

/* Two nodes joined by one edge (edge-ou), 5 Poisson rows with exposures, an
 * intercept held at 0.2.  VI (b = 1: q a full 2 x 2 Gaussian) against the
 * posterior mean and covariance by nested adaptive quadrature (GSL QAG,
 * relative 1e-12, over the Laplace mode +- 10 sd), and the ELBO against log
 * p(y) by the same quadrature. */
typedef struct {
    double em, ec, lm, lc, gap;
} q2_err;

static q2_err poisson_two(double scale)
{
    size_t ei[1] = {0}, ej[1] = {1}, node[5] = {0, 0, 1, 1, 1};
    double len[1] = {1.0}, y[5] = {2, 4, 0, 1, 1}, e[5] = {1.0, 1.5, 0.8, 1.2, 1.0};
    for (int r = 0; r < 5; r++) {
        y[r] *= scale;
        e[r] *= scale;
    }
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(2, 1, ei, ej, len, NULL, NULL, &g), GMM_OK);
    gmm_spec_node *sp = NULL;
    ck_assert_int_eq(gmm_spec_parse("edge-ou(variance=1, lengthscale=1.5)", &sp), GMM_OK);
    gmm_gmrf *gm = NULL;
    ck_assert_int_eq(gmm_gmrf_alloc(g, sp, "edge-ou", &gm), GMM_OK);
    gmm_latent *lat = NULL;
    ck_assert_int_eq(gmm_latent_gmrf_alloc(gm, 5, node, &lat), GMM_OK);
    gmm_lik lik = tu_lik_of("poisson", 1.7);
    gmm_problem *p = NULL;
    ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, e, 1, 0.2, &p), GMM_OK);
    const double *th = gmm_problem_objective(p)->value;
    /* Laplace: mode and covariance (the quadrature's centre and scale) */
    double mode[2];
    gmm_band *lc = gmm_band_alloc(2, 1, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_problem_posterior(p, th, mode, lc), GMM_OK);
    gmm_band *Q = gmm_band_alloc(2, 1, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_latent_prior(lat, th, Q, NULL), GMM_OK);
    post2 c = {{gmm_band_get(Q, 0, 0), gmm_band_get(Q, 1, 0), gmm_band_get(Q, 1, 1)},
               5,
               gmm_latent_obs_offset(lat),
               y,
               e,
               0.2,
               0.0,
               0,
               0,
               0.0,
               0.0,
               0.0,
               gsl_integration_workspace_alloc(200)};
    c.shift = logjoint2(&c, mode[0], mode[1]);
    double sd0 = sqrt(gmm_band_get(lc, 0, 0)), sd1 = sqrt(gmm_band_get(lc, 1, 1));
    c.lo0 = mode[0] - 10.0 * sd0;
    c.hi0 = mode[0] + 10.0 * sd0;
    gsl_integration_workspace *wo = gsl_integration_workspace_alloc(200);
    static const int pw[6][2] = {{0, 0}, {1, 0}, {0, 1}, {2, 0}, {1, 1}, {0, 2}};
    double mom[6];
    for (int k = 0; k < 6; k++) {
        c.p0 = pw[k][0];
        c.p1 = pw[k][1];
        gsl_function F = {outer2, &c};
        double err;
        int st = gsl_integration_qag(&F, mode[1] - 10.0 * sd1, mode[1] + 10.0 * sd1, 0.0, 1e-11,
                                     200, GSL_INTEG_GAUSS31, wo, &mom[k], &err);
        ck_assert_msg(st == 0 || st == GSL_EROUND, "outer quadrature: %s", gsl_strerror(st));
    }
    double mean[2] = {mom[1] / mom[0], mom[2] / mom[0]};
    double cov[3] = {mom[3] / mom[0] - mean[0] * mean[0], mom[4] / mom[0] - mean[0] * mean[1],
                     mom[5] / mom[0] - mean[1] * mean[1]};
    double detQ = c.Q[0] * c.Q[2] - c.Q[1] * c.Q[1];
    double logz = c.shift + log(mom[0]) + 0.5 * log(detQ) - log(2.0 * M_PI);
    /* VI */
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.tol = 0.0;
    par.epsilon = 1e-10;
    gmm_vi *v = NULL;
    ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK);
    ck_assert_uint_eq(gmm_vi_bandwidth(v), 1);
    gmm_vi_result res;
    ck_assert_msg(gmm_vi_fit(v, &res) == GMM_OK, "%s", gmm_error_message());
    ck_assert_str_eq(res.start, "laplace");
    double m[2];
    gmm_band *vc = gmm_band_alloc(2, 1, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_vi_posterior(v, m, vc), GMM_OK);
    double vcov[3] = {gmm_band_get(vc, 0, 0), gmm_band_get(vc, 1, 0), gmm_band_get(vc, 1, 1)};
    double lcov[3] = {gmm_band_get(lc, 0, 0), gmm_band_get(lc, 1, 0), gmm_band_get(lc, 1, 1)};
    /* errors in units of the exact posterior sd (means) and relative (covariance) */
    double em = 0.0, ec = 0.0, lm = 0.0, lcv = 0.0;
    for (int j = 0; j < 2; j++) {
        double sd = sqrt(cov[j == 0 ? 0 : 2]);
        em = fmax(em, fabs(m[j] - mean[j]) / sd);
        lm = fmax(lm, fabs(mode[j] - mean[j]) / sd);
    }
    for (int j = 0; j < 3; j++) {
        double sc = sqrt(cov[j == 1 ? 0 : j] * cov[j == 1 ? 2 : j]);
        ec = fmax(ec, fabs(vcov[j] - cov[j]) / sc);
        lcv = fmax(lcv, fabs(lcov[j] - cov[j]) / sc);
    }
    if (verbose())
        printf("vi poisson, two latents, counts x%g: %zu iterations (%s, |g| %.1e); mean "
               "(%.4f, %.4f) off by %.4f sd (Laplace %.4f), covariance (%.4f, %.4f, %.4f) "
               "off by %.4f (Laplace %.4f); ELBO %.6f, log p(y) %.6f (gap %.2e)\n",
               scale, res.iterations, res.message, res.grad_norm, mean[0], mean[1], em, lm,
               cov[0], cov[1], cov[2], ec, lcv, res.elbo, logz, logz - res.elbo);
    ck_assert_msg(res.elbo <= logz, "ELBO %.10g above log p(y) %.10g", res.elbo, logz);
    /* VI's variances below the exact ones (KL(q || p) is zero-forcing) */
    ck_assert(vcov[0] < cov[0] && vcov[2] < cov[2]);
    q2_err out = {em, ec, lm, lcv, logz - res.elbo};
    gsl_integration_workspace_free(c.wi);
    gsl_integration_workspace_free(wo);
    gmm_band_free(vc);
    gmm_band_free(lc);
    gmm_band_free(Q);
    gmm_vi_free(v);
    gmm_problem_free(p);
    gmm_latent_free(lat);
    gmm_gmrf_free(gm);
    gmm_spec_free(sp);
    gmm_graph_free(g);
    return out;
}

START_TEST(test_vi_poisson_quadrature)
{
    gsl_set_error_handler_off();
    q2_err a = poisson_two(1.0), b = poisson_two(10.0);
    /* VI minimises KL(q || p), so q is not the posterior's mean and
     * covariance: the posterior of a few counts is skewed.  Measured with 8
     * counts: mean 0.0033 sd off (the Laplace mode: 0.23 sd), covariance
     * 0.079 of sd_i sd_j (Laplace 0.067; VI's variances are the smaller),
     * ELBO 0.0245 below log p(y); with 10x the counts and exposures, as the
     * posterior becomes Gaussian: 0.0007 sd (Laplace 0.10), 0.021 (Laplace
     * 0.020), 0.0049.  Tolerances: about twice the measurements at 1x; at
     * 10x the errors must shrink (an error in the ELBO or its gradient
     * would not make them). */
    ck_assert_msg(a.em < 0.01 && a.ec < 0.15 && a.gap < 0.05, "x1: mean %.3g sd, covariance "
                                                              "%.3g, gap %.3g",
                  a.em, a.ec, a.gap);
    ck_assert_msg(b.em < a.em && b.ec < a.ec / 3.0 && b.gap < a.gap / 3.0, "x10: mean %.3g sd, "
                                                                          "covariance %.3g, "
                                                                          "gap %.3g",
                  b.em, b.ec, b.gap);
    ck_assert_msg(a.em < a.lm && b.em < b.lm, "VI's mean no closer than the Laplace mode");
}
END_TEST

/* ---- the quadrature's error estimate against adaptive integration ------------------------- */

typedef struct {
    const gmm_lik *lik;
    double y, e, mu, sd;
} erow;

static double erow_f(double z, void *vp)
{
    const erow *c = vp;
    double out[4];
    gmm_lik_eval(c->lik, c->y, c->e, c->mu + c->sd * z, out, NULL);
    return out[0] * exp(-0.5 * z * z) / sqrt(2.0 * M_PI);
}

/* gmm_vi_quad_error(K) estimates sum_r |E_r(K) - E_r| by the rule of 2K
 * points: against E_r from GSL's adaptive integration (1e-12 relative) at
 * q's per-row mean and variance, within a factor 2 for the coarse rules
 * where the error is well above rounding; 0 for a closed-form family. */
START_TEST(test_vi_quad_error)
{
    gsl_set_error_handler_off();
    graph_model gm;
    graph_of("edge-ou(variance=4, lengthscale=2)", 17, &gm);
    tu_rng r;
    tu_rng_seed(&r, 43);
    double y[17], e[17], mu[17], s2[17];
    const char *liks[] = {"bernoulli", "negbinomial", "poisson"};
    gsl_integration_workspace *w = gsl_integration_workspace_alloc(200);
    for (size_t l = 0; l < 3; l++) {
        gmm_lik lik = tu_lik_of(liks[l], 1.7);
        outcomes(&lik, &r, 17, y, e);
        const double *ep = lik.type->rowq ? e : NULL;
        gmm_problem *p = NULL;
        ck_assert_int_eq(gmm_problem_alloc(gm.lat, &lik, y, ep, 1, 0.1, &p), GMM_OK);
        gmm_vi_params par;
        gmm_vi_params_init(&par);
        gmm_vi *v = NULL;
        double est;
        ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK);
        ck_assert_int_eq(gmm_vi_quad_error(v, 4, &est), GMM_EINVAL); /* no state yet */
        ck_assert_int_eq(gmm_vi_start_laplace(v, NULL), GMM_OK);
        ck_assert_int_eq(gmm_vi_quad_error(v, GMM_LIK_QUAD_MAX + 1, &est), GMM_EINVAL);
        ck_assert_int_eq(gmm_vi_predict_rows(v, mu, s2), GMM_OK);
        double exact[17], s2max = 0.0;
        for (size_t i = 0; i < 17; i++) {
            if (isnan(y[i]))
                continue;
            erow c = {&lik, y[i], ep ? e[i] : 1.0, mu[i], sqrt(s2[i])};
            gsl_function F = {erow_f, &c};
            double err;
            /* beyond 12 sd the Gaussian weight (< 1e-31) leaves nothing */
            int st = gsl_integration_qag(&F, -12.0, 12.0, 1e-15, 1e-12, 200, GSL_INTEG_GAUSS61,
                                         w, &exact[i], &err);
            ck_assert_msg(st == 0 || st == GSL_EROUND, "row %zu: %s", i, gsl_strerror(st));
            s2max = fmax(s2max, s2[i]);
        }
        static const size_t ks[] = {1, 2, 3, 4, 6, 8, 0};
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            double truth = 0.0;
            for (size_t i = 0; i < 17; i++) {
                if (isnan(y[i]))
                    continue;
                double out[3];
                size_t k = ks[t] ? ks[t] : s2[i] <= 0.4 ? 20 : s2[i] <= 1.0 ? 40 : 100;
                ck_assert_int_eq(gmm_lik_expect(&lik, y[i], ep ? e[i] : 1.0, mu[i], s2[i], k,
                                                out, NULL),
                                 GMM_OK);
                truth += fabs(out[0] - exact[i]);
            }
            ck_assert_int_eq(gmm_vi_quad_error(v, ks[t], &est), GMM_OK);
            /* the check: the same error, against 1e-8 max(1, |ELBO|) */
            double cerr, lim, elbo;
            ck_assert_int_eq(gmm_vi_quad_check(v, ks[t], &cerr, &lim), GMM_OK);
            ck_assert_int_eq(gmm_vi_elbo(v, gmm_vi_theta(v), gmm_vi_lambda(v), &elbo, NULL, NULL),
                             GMM_OK);
            ck_assert(cerr == est && lim == 1e-8 * fmax(1.0, fabs(elbo)));
            if (verbose())
                printf("vi quad_error %-9s K %3zu (max s2 %.2f): estimate %.3e, true %.3e\n",
                       liks[l], ks[t], s2max, est, truth);
            if (lik.type->conjugate || !strcmp(liks[l], "poisson")) {
                ck_assert_msg(est == 0.0, "%s: estimate %g", liks[l], est);
            } else if (truth > 1e-9) {
                ck_assert_msg(est > 0.5 * truth && est < 2.0 * truth,
                              "%s K %zu: estimate %.3e, true error %.3e", liks[l], ks[t], est,
                              truth);
            } else {
                ck_assert_msg(est < 1e-9, "%s K %zu: estimate %.3e, true error %.3e", liks[l],
                              ks[t], est, truth);
            }
        }
        gmm_vi_free(v);
        gmm_problem_free(p);
    }
    gsl_integration_workspace_free(w);
    graph_free(&gm);
}
END_TEST

/* ---- the square-root prior terms at close inputs against a dense reference -------------- */

/* The reference arithmetic: binary128 where the compiler has it (GCC and
 * Clang on x86-64: 113-bit significand, software, no library needed for
 * + - * /), else long double. */
#if defined(__SIZEOF_FLOAT128__)
__extension__ typedef __float128 qreal;
#else
typedef long double qreal;
#endif

/* The ELBO from the same G (the latent's rows), L and m, dense, in qreal:
 * tr(Sigma G'G) = |L^-1 G'|_F^2, m'Q m = |G m|^2, s2_r = |L^-1 h_r|^2,
 * log|Q| = 2 sum log|G_ii| (G is lower triangular: checked), log|L L'| =
 * 2 sum log L_ii; E_r in double from the qreal mu_r, s2_r. */
static double dense_elbo(gmm_latent *lat, const double *theta, const gmm_band *Lb,
                         const double *m, const gmm_lik *lik, double b0, const double *y,
                         const double *e)
{
    size_t n = gmm_latent_dim(lat), kl = gmm_latent_bandwidth(lat);
    size_t w = gmm_latent_obs_width(lat), nr = gmm_latent_nrows(lat);
    gmm_prior_rows G;
    ck_assert_int_eq(gmm_latent_prior_rows(lat, theta, &G, NULL), GMM_OK);
    ck_assert_uint_eq(G.nrows, n);
    qreal *Gd = calloc(n * n, sizeof *Gd), *Ld = calloc(n * n, sizeof *Ld);
    qreal *z = malloc(n * sizeof *z);
    double *row = malloc((kl + 1) * sizeof *row), ldp = 0.0, ldq = 0.0;
    for (size_t i = 0; i < n; i++) { /* row-major G */
        size_t first, wi = G.row(G.ctx, i, &first, row);
        ck_assert_uint_eq(first + wi - 1, i);
        for (size_t a = 0; a < wi; a++)
            Gd[i * n + first + a] = row[a];
        ldp += 2.0 * log(fabs(row[wi - 1]));
    }
    for (size_t j = 0; j < n; j++) /* column-major L */
        for (size_t i = j; i < n; i++)
            Ld[j * n + i] = gmm_band_get(Lb, i, j);
    for (size_t j = 0; j < n; j++)
        ldq += 2.0 * log(gmm_band_get(Lb, j, j));
    /* z = L^-1 v by forward substitution */
#define FSOLVE()                                                                                 \
    for (size_t ii = 0; ii < n; ii++) {                                                          \
        qreal t = z[ii];                                                                         \
        for (size_t kk = 0; kk < ii; kk++)                                                       \
            t -= Ld[kk * n + ii] * z[kk];                                                        \
        z[ii] = t / Ld[ii * n + ii];                                                             \
    }
    qreal tr = 0, mqm = 0;
    for (size_t i = 0; i < n; i++) { /* column i of G' is row i of G */
        qreal gm = 0;
        for (size_t k = 0; k < n; k++) {
            z[k] = Gd[i * n + k];
            gm += Gd[i * n + k] * (qreal)m[k];
        }
        mqm += gm * gm;
        FSOLVE();
        for (size_t k = 0; k < n; k++)
            tr += z[k] * z[k];
    }
    double *coef = malloc(nr * w * sizeof *coef), sumE = 0.0, out[3];
    ck_assert_int_eq(gmm_latent_obs_coef(lat, theta, coef), GMM_OK);
    const size_t *off = gmm_latent_obs_offset(lat);
    for (size_t r = 0; r < nr; r++) {
        if (isnan(y[r]))
            continue;
        qreal mu = b0, s2 = 0;
        for (size_t k = 0; k < n; k++)
            z[k] = 0;
        for (size_t a = 0; a < w; a++) {
            z[off[r] + a] = coef[r * w + a];
            mu += (qreal)coef[r * w + a] * (qreal)m[off[r] + a];
        }
        FSOLVE();
        for (size_t k = 0; k < n; k++)
            s2 += z[k] * z[k];
        ck_assert_int_eq(gmm_lik_expect(lik, y[r], e ? e[r] : 1.0, (double)mu, (double)s2, 100,
                                        out, NULL),
                         GMM_OK);
        sumE += out[0];
    }
#undef FSOLVE
    double kl_div = 0.5 * ((double)(tr - (qreal)n) + (double)mqm - ldp + ldq);
    free(Gd);
    free(Ld);
    free(z);
    free(row);
    free(coef);
    return sumE - kl_div;
}

/* Matern-3/2 at spacing dt (lengthscale 1), 30 inputs, Gaussian noise
 * (variance 0.1), q the exact posterior (gmm_vi_start_laplace: the mean by
 * the latent's square-root form, L folded from the rows), and q with its
 * mean moved by 1%.  The ELBO with the rows and with the assembled Q_p
 * (refused below dt = 3e-4: GMM_EDOM) against dense_elbo; at the posterior
 * also against log p(y) (gmm_latent_gaussian), and the largest entry of
 * the lambda-gradient there (0 in exact arithmetic: the optimum). */
START_TEST(test_vi_close_inputs)
{
    static const double dts[] = {1e-1, 1e-2, 1e-3, 1e-4, 1e-6};
    size_t n = 30;
    double x[30], y[30];
    tu_rng r;
    tu_rng_seed(&r, 31);
    for (size_t i = 0; i < n; i++)
        y[i] = i % 9 == 4 ? NAN : 1.0 + 0.3 * tu_normal(&r);
    for (size_t id = 0; id < sizeof dts / sizeof dts[0]; id++) {
        for (size_t i = 0; i < n; i++)
            x[i] = dts[id] * (double)i;
        gmm_kernel *k = NULL;
        gmm_latent *lat = ssm_latent("matern32(variance=1, lengthscale=1)", x, n, &k);
        gmm_lik lik = tu_lik_of("gaussian(variance=0.1)", 1.7);
        gmm_problem *p = NULL;
        ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 0, 0.0, &p), GMM_OK);
        gmm_vi_params par;
        gmm_vi_params_init(&par);
        gmm_vi *vr = NULL, *va = NULL;
        par.prior = GMM_VI_PRIOR_ROWS;
        ck_assert_int_eq(gmm_vi_alloc(p, &par, &vr), GMM_OK);
        par.prior = GMM_VI_PRIOR_ASSEMBLED;
        ck_assert_int_eq(gmm_vi_alloc(p, &par, &va), GMM_OK);
        const char *start;
        ck_assert_msg(gmm_vi_start_laplace(vr, &start) == GMM_OK, "%s", gmm_error_message());
        ck_assert_str_eq(start, "laplace");
        size_t nv = gmm_vi_nvar(vr), N = gmm_vi_dim(vr), np = gmm_vi_nparam(vr);
        double *lam = malloc(nv * sizeof *lam), *th = malloc(np * sizeof *th);
        double *gr = malloc(nv * sizeof *gr), *ga = malloc(nv * sizeof *ga);
        memcpy(lam, gmm_vi_lambda(vr), nv * sizeof *lam);
        memcpy(th, gmm_vi_theta(vr), np * sizeof *th);
        gmm_band *Lb = gmm_band_alloc(N, gmm_vi_bandwidth(vr), 0, GMM_BAND_LOWER);
        ck_assert_int_eq(gmm_vi_factor(vr, Lb), GMM_OK);
        double exact;
        ck_assert_int_eq(gmm_latent_gaussian(lat, th, y, th[np - 1], &exact, NULL, NULL),
                         GMM_OK);
        double err_r[2], err_a[2], ref[2], g_r = 0.0, g_a = NAN;
        for (int moved = 0; moved < 2; moved++) {
            if (moved)
                for (size_t j = 0; j < N; j++)
                    lam[j] *= 1.01;
            gmm_lik at = lik;
            at.par[0] = th[np - 1];
            ref[moved] = dense_elbo(lat, th, Lb, lam, &at, 0.0, y, NULL);
            double er, ea = NAN;
            ck_assert_msg(gmm_vi_elbo(vr, th, lam, &er, gr, NULL) == GMM_OK, "%s",
                          gmm_error_message());
            gmm_status sa = gmm_vi_elbo(va, th, lam, &ea, ga, NULL);
            if (dts[id] < 3e-4)
                ck_assert_int_eq(sa, GMM_EDOM);
            else
                ck_assert_msg(sa == GMM_OK, "%s", gmm_error_message());
            err_r[moved] = fabs(er - ref[moved]) / fabs(ref[moved]);
            err_a[moved] = sa == GMM_OK ? fabs(ea - ref[moved]) / fabs(ref[moved]) : NAN;
            if (!moved) {
                for (size_t j = 0; j < nv; j++) {
                    g_r = fmax(g_r, fabs(gr[j]));
                    if (sa == GMM_OK)
                        g_a = fmax(isnan(g_a) ? 0.0 : g_a, fabs(ga[j]));
                }
            }
        }
        /* measured: rows <= 6.1e-14 at every spacing; assembled 5e-14, 2e-11,
         * 7e-8 at dt/l = 0.1, 0.01, 0.001 */
        ck_assert_msg(fabs(ref[0] - exact) <= 1e-10 * fabs(exact), "dt %g: dense %.15g vs log "
                                                                   "p(y) %.15g",
                      dts[id], ref[0], exact);
        ck_assert_msg(err_r[0] <= 1e-12 && err_r[1] <= 1e-12, "dt %g: rows off by %.3g, %.3g",
                      dts[id], err_r[0], err_r[1]);
        if (verbose())
            printf("vi close inputs dt/l %.0e: ELBO at the posterior: dense %.12f (log p(y) "
                   "%.3e rel), rows %.2e, assembled %.2e rel; |grad| rows %.1e, assembled "
                   "%.1e; mean moved (ELBO %.6f): rows %.2e, assembled %.2e\n",
                   dts[id], ref[0], fabs(ref[0] - exact) / fabs(exact), err_r[0], err_a[0],
                   g_r, g_a, ref[1], err_r[1], err_a[1]);
        gmm_band_free(Lb);
        free(lam);
        free(th);
        free(gr);
        free(ga);
        gmm_vi_free(vr);
        gmm_vi_free(va);
        gmm_problem_free(p);
        gmm_latent_free(lat);
        gmm_kernel_free(k);
    }
}
END_TEST

/* The gradient in m against sum_r a_r h_r - G'(G m) in qreal from the same
 * rows (Gaussian likelihood, no intercept): the largest error relative to
 * max(|ref|_inf, |sum_r a_r h_r|_inf). */
static double mean_grad_error(gmm_latent *lat, const double *th, const double *m,
                              const double *y, double noise, const double *mbar)
{
    size_t n = gmm_latent_dim(lat), kl = gmm_latent_bandwidth(lat);
    size_t w = gmm_latent_obs_width(lat), nr = gmm_latent_nrows(lat);
    gmm_prior_rows G;
    ck_assert_int_eq(gmm_latent_prior_rows(lat, th, &G, NULL), GMM_OK);
    qreal *ref = calloc(n, sizeof *ref), *ah = calloc(n, sizeof *ah);
    double *row = malloc((kl + 1) * sizeof *row), *coef = malloc(nr * w * sizeof *coef);
    for (size_t i = 0; i < G.nrows; i++) {
        size_t first, wi = G.row(G.ctx, i, &first, row);
        qreal t = 0;
        for (size_t a = 0; a < wi; a++)
            t += (qreal)row[a] * (qreal)m[first + a];
        for (size_t a = 0; a < wi; a++)
            ref[first + a] -= t * (qreal)row[a];
    }
    ck_assert_int_eq(gmm_latent_obs_coef(lat, th, coef), GMM_OK);
    const size_t *off = gmm_latent_obs_offset(lat);
    for (size_t r = 0; r < nr; r++) {
        qreal mu = 0;
        for (size_t a = 0; a < w; a++)
            mu += (qreal)coef[r * w + a] * (qreal)m[off[r] + a];
        for (size_t a = 0; a < w; a++)
            ah[off[r] + a] += ((qreal)y[r] - mu) / (qreal)noise * (qreal)coef[r * w + a];
    }
    double scale = 0.0, err = 0.0;
    for (size_t j = 0; j < n; j++) {
        ref[j] += ah[j];
        scale = fmax(scale, fmax(fabs((double)ref[j]), fabs((double)ah[j])));
        err = fmax(err, fabs(mbar[j] - (double)ref[j]));
    }
    free(ref);
    free(ah);
    free(row);
    free(coef);
    return err / scale;
}

/* The ELBO's gradient at close inputs (30 inputs at spacing dt, lengthscale
 * 1, Gaussian noise 0.1, q the exact posterior).  In theta against the
 * dense GP's d log p(y)/dtheta in long double (tu_dense_grad): q is
 * optimal for theta, so the ELBO's partial gradient is that (the envelope
 * theorem), up to q's rounding at second order.  In m, at the posterior
 * and with the mean moved 1%, against mean_grad_error's qreal reference
 * from the same rows.  Measured (tests/bench/bench_vi_accuracy.c, n = 60):
 * theta within 3e-10 of max(|g|, 1) for matern32 down to dt/l = 1e-6 and
 * 2e-10 for matern52 at 1e-3 (through the rows' entries: 5e-4, 3.1 and
 * 3e-2); m within 3e-16 (1e-2, 0.7, 3e-2).  The bounds: 1e-6 of max(|g|,
 * 1) (the envelope's second-order term, sum_k 2 |r_k| eps (l/dt)^(nu +
 * 1/2) |m|, r_k the posterior mean's whitened residuals, is below 1e-8
 * here); 64 eps for m (r = G m and G'r in double-double leave the
 * rounding of a few sums of order 1). */
START_TEST(test_vi_close_inputs_grad)
{
    static const struct {
        const char *kernel;
        double dt;
    } cases[] = {{"matern32(variance=1, lengthscale=1)", 1e-5},
                 {"matern32(variance=1, lengthscale=1)", 1e-6},
                 {"matern52(variance=1, lengthscale=1)", 1e-3}};
    size_t n = 30;
    double x[30], y[30], noise = 0.1;
    tu_rng r;
    tu_rng_seed(&r, 32);
    for (size_t i = 0; i < n; i++)
        y[i] = 1.0 + 0.3 * tu_normal(&r);
    for (size_t ic = 0; ic < sizeof cases / sizeof cases[0]; ic++) {
        for (size_t i = 0; i < n; i++)
            x[i] = cases[ic].dt * (double)i;
        gmm_kernel *k = NULL;
        gmm_latent *lat = ssm_latent(cases[ic].kernel, x, n, &k);
        size_t nk = gmm_latent_nparam(lat);
        double gd[4];
        ck_assert_int_eq(tu_dense_grad(k, gmm_latent_param_start(lat), noise, 0.0, x, y, n, gd,
                                       NULL),
                         0);
        gmm_lik lik = tu_lik_of("gaussian(variance=0.1)", 1.0);
        gmm_problem *p = NULL;
        ck_assert_int_eq(gmm_problem_alloc(lat, &lik, y, NULL, 0, 0.0, &p), GMM_OK);
        gmm_vi_params par;
        gmm_vi_params_init(&par);
        par.prior = GMM_VI_PRIOR_ROWS;
        gmm_vi *v = NULL;
        ck_assert_int_eq(gmm_vi_alloc(p, &par, &v), GMM_OK);
        ck_assert_msg(gmm_vi_start_laplace(v, NULL) == GMM_OK, "%s", gmm_error_message());
        size_t nv = gmm_vi_nvar(v), N = gmm_vi_dim(v), np = gmm_vi_nparam(v);
        ck_assert_uint_eq(np, nk + 1);
        double *lam = malloc(nv * sizeof *lam), *gl = malloc(nv * sizeof *gl), gt[4], f;
        const double *th = gmm_vi_theta(v);
        memcpy(lam, gmm_vi_lambda(v), nv * sizeof *lam);
        ck_assert_int_eq(gmm_vi_elbo(v, th, lam, &f, gl, gt), GMM_OK);
        double eth = 0.0;
        for (size_t i = 0; i < np; i++)
            eth = fmax(eth, fabs(gt[i] - gd[i]) / fmax(fabs(gd[i]), 1.0));
        double em0 = mean_grad_error(lat, th, lam, y, noise, gl);
        for (size_t j = 0; j < N; j++)
            lam[j] *= 1.01;
        ck_assert_int_eq(gmm_vi_elbo(v, th, lam, &f, gl, NULL), GMM_OK);
        double em1 = mean_grad_error(lat, th, lam, y, noise, gl);
        if (verbose())
            printf("vi close inputs gradient %s dt/l %.0e: theta %.2e of max(|g|, 1); m %.2e at "
                   "the posterior, %.2e moved\n",
                   cases[ic].kernel, cases[ic].dt, eth, em0, em1);
        ck_assert_msg(eth < 1e-6, "%s dt %g: theta gradient off by %.3g", cases[ic].kernel,
                      cases[ic].dt, eth);
        ck_assert_msg(em0 < 64 * DBL_EPSILON && em1 < 64 * DBL_EPSILON,
                      "%s dt %g: m gradient off by %.3g, %.3g", cases[ic].kernel, cases[ic].dt,
                      em0, em1);
        free(lam);
        free(gl);
        gmm_vi_free(v);
        gmm_problem_free(p);
        gmm_latent_free(lat);
        gmm_kernel_free(k);
    }
}
END_TEST

Suite *infer_vi_suite(void)
{
    Suite *s = suite_create("infer_vi");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_vi_grad_ssm);
    tcase_add_test(tc, test_vi_grad_graph);
    tcase_add_test(tc, test_vi_grad_stack_damped);
    tcase_add_test(tc, test_vi_start);
    tcase_add_test(tc, test_vi_gaussian_exact);
    tcase_add_test(tc, test_vi_learn_hyper);
    tcase_add_test(tc, test_vi_close_inputs);
    tcase_add_test(tc, test_vi_close_inputs_grad);
    tcase_add_test(tc, test_vi_poisson_quadrature);
    tcase_add_test(tc, test_vi_quad_error);
    tcase_add_test(tc, test_vi_api);
    tcase_add_test(tc, test_vi_set_state_from);
    tcase_add_test(tc, test_vi_oom);
    suite_add_tcase(s, tc);
    return s;
}
