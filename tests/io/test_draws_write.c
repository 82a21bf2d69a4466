/* test_draws_write.c -- draws written in both layouts (draws.h): the exact
 * text of a draws data frame and of a CmdStan chain file, and each read
 * back by gmm_draws_read to the same names and numbers. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "support/tmpfiles.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }

static void teardown(void)
{
    tu_rmdir_all(dir);
    free(dir);
}

static const char *const param[] = {"0.matern32.variance"};
static const size_t site[] = {0, 2};
static const char *const site_name[] = {"f[1]", "f[a,b]"};
static const size_t loglik_row[] = {1};

static gmm_draws_columns columns(int cmdstan)
{
    return (gmm_draws_columns){cmdstan, 1, param, 2, site, site_name, 1, 1, loglik_row};
}

/* The sampler's seven columns, then parameter, two sites, a state, a
 * log-likelihood: 12 values. */
static const double row1[] = {-1.5, 0.9, 0.25, 3, 7, 0, 2.5, 1.25, 0.1, -0.2, 0.3, -4};
static const double row2[] = {-1, 1, 0.25, 2, 3, 1, 2, 2, NAN, 1e300, -0.0, -5};

static char *write_with(const char *name, int cmdstan, void (*body)(FILE *, int))
{
    char *path = tu_path(dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    body(f, cmdstan);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

static void draws_df(FILE *f, int cmdstan)
{
    gmm_draws_columns c = columns(cmdstan);
    gmm_draws_write_header(f, &c);
    gmm_draws_write_row(f, 0, 1, 1, 1, row1, 12);
    gmm_draws_write_row(f, 0, 1, 2, 2, row2, 12);
}

START_TEST(test_draws_df)
{
    char *path = write_with("d.csv", 0, draws_df);
    char *text = tu_read_file(path, NULL);
    ck_assert_str_eq(text, ".chain,.iteration,.draw,lp__,accept_stat__,stepsize__,treedepth__,"
                           "n_leapfrog__,divergent__,energy__,0.matern32.variance,f[1],"
                           "\"f[a,b]\",x[1],log_lik[2]\n"
                           "1,1,1,-1.5,0.90000000000000002,0.25,3,7,0,2.5,1.25,"
                           "0.10000000000000001,-0.20000000000000001,"
                           "0.29999999999999999,-4\n"
                           "1,2,2,-1,1,0.25,2,3,1,2,2,nan,1.0000000000000001e+300,-0,-5\n");
    gmm_draws *d = NULL;
    const char *p = path;
    ck_assert_int_eq(gmm_draws_read(&p, 1, &d), GMM_OK);
    ck_assert_uint_eq(d->nvar, 6); /* lp__ and the five model columns */
    ck_assert_str_eq(d->name[2], "f[1]");
    ck_assert_str_eq(d->name[3], "f[a,b]");
    ck_assert_double_eq(gmm_draws_variable(d, 1)[0], 1.25);
    ck_assert(isnan(gmm_draws_variable(d, 2)[1]));
    gmm_draws_free(d);
    free(text);
    free(path);
}
END_TEST

static void cmdstan_chain(FILE *f, int cmdstan)
{
    gmm_draws_columns c = columns(cmdstan);
    gmm_draws_cmdstan_config conf = {
        .model_file = "m.json", .data_file = NULL, .num_samples = 2, .num_warmup = 10,
        .gamma = 0.05, .delta = 0.8, .kappa = 0.75, .t0 = 10, .init_buffer = 75,
        .term_buffer = 50, .window = 25, .nuts = 1, .max_depth = 10, .steps = 10,
        .stepsize = 1, .stepsize_jitter = 0, .id = 3, .seed = 7, .site_noun = "data row",
        .metric_space = "the latent field\nwhitened by the prior"};
    const double inv_metric[] = {1, 0.5};
    gmm_draws_write_cmdstan_config(f, &conf);
    gmm_draws_write_header(f, &c);
    gmm_draws_write_cmdstan_adaptation(f, 0.5, inv_metric, 2);
    gmm_draws_write_row(f, 1, 3, 1, 1, row1, 12);
    gmm_draws_write_row(f, 1, 3, 2, 2, row2, 12);
    gmm_draws_write_cmdstan_times(f, 0.25, 0.5);
}

START_TEST(test_cmdstan)
{
    char *path = write_with("run_3.csv", 1, cmdstan_chain);
    char *text = tu_read_file(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "# model_file = m.json\n# method = sample\n"));
    ck_assert_ptr_nonnull(strstr(text, "#     num_samples = 2\n#     num_warmup = 10\n"));
    ck_assert_ptr_nonnull(strstr(text, "# id = 3\n# data\n#   file = \n# random\n#   seed = 7\n"));
    ck_assert_ptr_nonnull(strstr(text, "# f.i: the linear predictor at data row i; the inverse "
                                       "metric is the sampler's, on\n# the latent field\n"
                                       "# whitened by the prior, not on f\n"));
    ck_assert_ptr_nonnull(strstr(text, "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,"
                                       "divergent__,energy__,0_matern32_variance,f.1,f.3,x.1,"
                                       "log_lik.2\n# Adaptation terminated\n# Step size = 0.5\n"
                                       "# Diagonal elements of inverse mass matrix:\n# 1, 0.5\n"
                                       "-1.5,0.9"));
    ck_assert_ptr_nonnull(strstr(text, "#  Elapsed Time: 0.250 seconds (Warm-up)\n"));
    gmm_draws *d = NULL;
    const char *p = path;
    ck_assert_int_eq(gmm_draws_read(&p, 1, &d), GMM_OK);
    ck_assert_int_eq(d->stan, 1);
    ck_assert_uint_eq(d->nchain, 1);
    ck_assert_int_eq(d->chain[0], 3);
    ck_assert_uint_eq(d->niter, 2);
    ck_assert_str_eq(d->name[2], "f[1]");
    ck_assert_str_eq(d->name[3], "f[3]");
    ck_assert_double_eq(gmm_draws_variable(d, 5)[1], -5);
    gmm_draws_free(d);
    free(text);
    free(path);
}
END_TEST

START_TEST(test_chain_path)
{
    const char *const in[] = {"out.csv", "out", "a.b/x.csv", ".csv"};
    const char *const want[] = {"out_12.csv", "out_12.csv", "a.b/x_12.csv", ".csv_12.csv"};
    for (size_t k = 0; k < sizeof in / sizeof in[0]; k++) {
        char *p = gmm_draws_chain_path(in[k], 12);
        ck_assert_str_eq(p, want[k]);
        gmm_free(p);
    }
}
END_TEST

Suite *io_draws_write_suite(void)
{
    Suite *s = suite_create("io_draws_write");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_draws_df);
    tcase_add_test(tc, test_cmdstan);
    tcase_add_test(tc, test_chain_path);
    suite_add_tcase(s, tc);
    return s;
}
