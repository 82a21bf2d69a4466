/* test_model_hmc.c -- the model's side of an HMC run (model.h,
 * model_hmc.c): the draws' columns in both layouts, and the rules the CLI
 * asks the model for (LOO's method, the likelihood's name). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/hmc_chains.h"
#include "gmm/model.h"
#include "support/tmpfiles.h"
#include "support/tu_model.h"

START_TEST(test_columns)
{
    char *dir = tu_mkdtemp();
    char *edges = tu_write_str(dir, "edges.csv", "i,j\na,b\nb,c\n");
    char *nodes = tu_write_str(dir, "nodes.csv", "node,count\na,3\nb,\nc,5\n");
    gmm_mdl_spec s;
    tu_graph_count_spec(&s, nodes, edges, "edge-ou(variance=1, lengthscale=2)");
    gmm_mdl *m = NULL;
    ck_assert_int_eq(gmm_mdl_build(&s, &m, NULL), GMM_OK);
    ck_assert_str_eq(gmm_mdl_likelihood_name(m), "poisson");
    ck_assert_str_eq(gmm_mdl_loo_method(m), "cavity");

    const gmm_objective *o = gmm_mdl_objective(m);
    int *sampled = calloc(o->nparam, sizeof *sampled);
    ck_assert_ptr_nonnull(sampled);
    sampled[o->nparam - 1] = 1;
    const unsigned char keep[3] = {1, 0, 1};
    gmm_hmc_run_params rp;
    gmm_hmc_run_params_init(&rp);
    rp.sampled = sampled;
    rp.keep = keep;
    rp.states = 1;
    rp.log_lik = 1;
    for (int cmdstan = 0; cmdstan < 2; cmdstan++) {
        gmm_draws_columns *c = NULL;
        ck_assert_int_eq(gmm_mdl_draws_columns(m, &rp, cmdstan, &c), GMM_OK);
        ck_assert_int_eq(c->cmdstan, cmdstan);
        ck_assert_uint_eq(c->nparam, 1);
        ck_assert_str_eq(c->param[0], o->name[o->nparam - 1]);
        ck_assert_uint_eq(c->nsite, 2); /* a and c: b is not kept */
        ck_assert_uint_eq(c->site[0], 0);
        ck_assert_uint_eq(c->site[1], 2);
        if (!cmdstan) {
            ck_assert_str_eq(c->site_name[0], "f[a]");
            ck_assert_str_eq(c->site_name[1], "f[c]");
        }
        ck_assert_uint_eq(c->nstate, 3);
        ck_assert_uint_eq(c->nloglik, 2); /* b's count is missing */
        ck_assert_uint_eq(c->loglik_row[0], 0);
        ck_assert_uint_eq(c->loglik_row[1], 2);
        gmm_mdl_draws_columns_free(c);
    }
    free(sampled);
    gmm_mdl_free(m);
    tu_rmdir_all(dir);
    free(dir);
    free(edges);
    free(nodes);
}
END_TEST

Suite *mdl_model_hmc_suite(void)
{
    Suite *s = suite_create("mdl_model_hmc");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_columns);
    suite_add_tcase(s, tc);
    return s;
}
