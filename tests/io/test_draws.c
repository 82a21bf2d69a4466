/* test_draws.c -- reading draws files: which columns are variables, chains
 * grouped and ordered by id, files merged, and every error naming its
 * file(s) and line; out-of-memory paths. */
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

/* Write the NULL-terminated list of (name, text) pairs and read them all. */
static gmm_status read_files(gmm_draws **d, char **paths, size_t n, const char *const *spec)
{
    for (size_t f = 0; f < n; f++)
        paths[f] = tu_write_str(dir, spec[2 * f], spec[2 * f + 1]);
    return gmm_draws_read((const char *const *)paths, n, d);
}

static void free_paths(char **paths, size_t n)
{
    for (size_t f = 0; f < n; f++)
        free(paths[f]);
}

/* want with "@0", "@1" replaced by paths[0], paths[1]. */
static void expand(char *out, size_t size, const char *want, char *const *paths)
{
    size_t used = 0;
    for (const char *p = want; *p && used + 1 < size; p++) {
        if (p[0] == '@' && (p[1] == '0' || p[1] == '1')) {
            used += (size_t)snprintf(out + used, size - used, "%s", paths[p[1] - '0']);
            p++;
        } else {
            out[used++] = *p;
        }
    }
    out[used < size ? used : size - 1] = '\0';
}

/* The read must fail with GMM_EPARSE and the message want ("@0", "@1" the
 * paths of the first and second file). */
static void read_bad(size_t n, const char *const *spec, const char *want)
{
    char *paths[2] = {NULL, NULL};
    gmm_draws *d = (gmm_draws *)&d;
    gmm_status st = read_files(&d, paths, n, spec);
    ck_assert_int_eq(st, GMM_EPARSE);
    ck_assert_ptr_null(d);
    char expect[1024];
    expand(expect, sizeof expect, want, paths);
    ck_assert_str_eq(gmm_error_message(), expect);
    free_paths(paths, n);
}

START_TEST(test_columns_and_order)
{
    /* Chains interleaved and out of order; .iteration ignored (row order
     * kept); sampler columns skipped but lp__ kept; NA read as NAN. */
    const char *spec[] = {"a.csv",
                          ".chain,.iteration,.draw,lp__,accept_stat__,treedepth__,mu,f[1]\n"
                          "2,1,1,-1,0.9,3,20,200\n"
                          "1,1,2,-2,0.8,3,10,100\n"
                          "2,2,3,-3,0.7,3,21,NA\n"
                          "1,2,4,-4,0.6,3,11,101\n"
                          "1,9,5,-5,0.5,3,12,102\n"
                          "2,0,6,-6,0.4,3,22,202\n"};
    char *paths[1];
    gmm_draws *d = NULL;
    ck_assert_msg(read_files(&d, paths, 1, spec) == GMM_OK, "%s", gmm_error_message());
    ck_assert_uint_eq(d->nvar, 3);
    ck_assert_uint_eq(d->nchain, 2);
    ck_assert_uint_eq(d->niter, 3);
    ck_assert_str_eq(d->name[0], "lp__");
    ck_assert_str_eq(d->name[1], "mu");
    ck_assert_str_eq(d->name[2], "f[1]");
    ck_assert(d->chain[0] == 1 && d->chain[1] == 2);
    const double mu[6] = {10, 11, 12, 20, 21, 22};
    ck_assert(memcmp(gmm_draws_variable(d, 1), mu, sizeof mu) == 0);
    const double *f = gmm_draws_variable(d, 2);
    ck_assert(f[0] == 100 && f[2] == 102 && f[3] == 200 && isnan(f[4]) && f[5] == 202);
    ck_assert_ptr_null(gmm_draws_variable(d, 3));
    gmm_draws_free(d);
    free_paths(paths, 1);
}
END_TEST

/* The chains of one file split over two (in either order, with columns in
 * another order) read back as the same draws. */
START_TEST(test_merge)
{
    const char *one[] = {"all.csv", ".chain,x,y\n3,1,5\n1,2,6\n3,3,7\n1,4,8\n"};
    const char *two[] = {"p.csv", ".chain,x,y\n3,1,5\n3,3,7\n", "q.csv", ".chain,y,x\n1,6,2\n1,8,4\n"};
    char *p1[1], *p2[2];
    gmm_draws *a = NULL, *b = NULL;
    ck_assert(read_files(&a, p1, 1, one) == GMM_OK);
    ck_assert_msg(read_files(&b, p2, 2, two) == GMM_OK, "%s", gmm_error_message());
    ck_assert(a->nvar == b->nvar && a->nchain == b->nchain && a->niter == b->niter);
    ck_assert(a->chain[0] == 1 && b->chain[0] == 1 && b->chain[1] == 3);
    ck_assert(memcmp(a->x, b->x, a->nvar * a->nchain * a->niter * sizeof *a->x) == 0);
    gmm_draws_free(a);
    gmm_draws_free(b);
    free_paths(p1, 1);
    free_paths(p2, 2);
}
END_TEST

START_TEST(test_errors)
{
    const char *clash[] = {"a.csv", ".chain,x\n1,0\n2,0\n", "b.csv", ".chain,x\n3,0\n\n2,1\n"};
    read_bad(2, clash, "@1:4: chain 2 is also in @0");

    const char *twice[] = {"a.csv", ".chain,x\n1,0\n"};
    char *paths[2];
    gmm_draws *d = NULL;
    paths[0] = paths[1] = tu_write_str(dir, twice[0], twice[1]);
    ck_assert_int_eq(gmm_draws_read((const char *const *)paths, 2, &d), GMM_EPARSE);
    char expect[512];
    snprintf(expect, sizeof expect, "%s:2: chain 1 is also in %s", paths[0], paths[0]);
    ck_assert_str_eq(gmm_error_message(), expect);
    free(paths[0]);

    const char *uneven[] = {"a.csv", ".chain,x\n1,0\n1,0\n1,0\n", "b.csv", ".chain,x\n2,0\n2,0\n"};
    read_bad(2, uneven,
             "chains of different lengths: chain 2 has 2 draws (@1), chain 1 has 3 (@0)");

    const char *nochain[] = {"a.csv", "chain,x\n1,0\n"};
    read_bad(1, nochain,
             "@0: no column '.chain' (columns: chain, x) (nor lp__: not CmdStan's CSV either)");

    const char *novar[] = {"a.csv", ".chain,.iteration,.draw,accept_stat__\n1,1,1,0.5\n"};
    read_bad(1, novar,
             "@0: no variables (only .chain/.iteration/.draw and sampler columns ending in __)");

    const char *nodraws[] = {"a.csv", ".chain,x\n"};
    read_bad(1, nodraws, "@0: no draws");

    const char *badid[] = {"a.csv", ".chain,x\n1,0\n0,1\n"};
    read_bad(1, badid, "@0:3: column '.chain': '0' is not a positive integer");
    const char *badid2[] = {"a.csv", ".chain,x\n1.5,0\n"};
    read_bad(1, badid2, "@0:2: column '.chain': '1.5' is not a positive integer");

    const char *badnum[] = {"a.csv", ".chain,x\n1,0\n1,abc\n"};
    read_bad(1, badnum, "@0:3: column 'x': 'abc' is not a number");

    const char *missing[] = {"a.csv", ".chain,x,y\n1,0,0\n", "b.csv", ".chain,y,lp__\n2,0,0\n"};
    read_bad(2, missing, "@1: column 'lp__' is not in @0");
    const char *missing2[] = {"a.csv", ".chain,x,y\n1,0,0\n", "b.csv", ".chain,y,n__\n2,0,0\n"};
    read_bad(2, missing2, "@1: no column 'x' (@0 has it)");

    ck_assert_int_eq(gmm_draws_read(NULL, 1, &d), GMM_EINVAL);
    ck_assert_int_eq(gmm_draws_read((const char *const *)paths, 0, &d), GMM_EINVAL);
    ck_assert_int_eq(gmm_draws_read((const char *const *)paths, 1, NULL), GMM_EINVAL);
    gmm_draws_free(NULL);
}
END_TEST

/* CmdStan's CSV: comments anywhere, one chain per file, its id from
 * "# id = N" or else the file's position, Stan's dotted names as
 * bracketed ones, a parameter's underscored name as the sidecar's; mixed
 * with a draws_df file is an error. */
START_TEST(test_cmdstan)
{
    static const char *const stan[] = {
        "s_1.csv", "# method = sample\n# id = 1 (Default)\nlp__,accept_stat__,a_b,f.1,m.2.10\n"
                   "# Adaptation terminated\n-1,0.9,5,1,2\n-2,0.8,6,3,4\n# Elapsed\n",
        "s_2.csv", "lp__,accept_stat__,a_b,f.1,m.2.10\n-3,0.7,7,5,6\n# mid\n-4,0.6,8,7,8\n",
        NULL};
    char *paths[2];
    gmm_draws *d = NULL;
    ck_assert_int_eq(read_files(&d, paths, 2, stan), GMM_OK);
    ck_assert_int_eq(d->stan, 1);
    ck_assert_uint_eq(d->nvar, 4);
    ck_assert_str_eq(d->name[0], "lp__");
    ck_assert_str_eq(d->name[1], "a_b"); /* no sidecar: as it is */
    ck_assert_str_eq(d->name[2], "f[1]");
    ck_assert_str_eq(d->name[3], "m[2,10]");
    /* the second file has no id: chain 2 by its position */
    ck_assert_uint_eq(d->nchain, 2);
    ck_assert(gmm_draws_variable(d, 0)[1] == -2 && gmm_draws_variable(d, 0)[3] == -4);
    ck_assert(gmm_draws_variable(d, 3)[0] == 2 && gmm_draws_variable(d, 3)[2] == 6);
    gmm_draws_free(d);
    d = NULL;
    free_paths(paths, 2);

    static const char *const two[] = {
        "s_1.csv", "# id = 3\nlp__,a.b,f.1\n-1,5,1\n-2,6,2\n",
        "s_2.csv", "lp__,a.b,f.1\n-3,7,3\n-4,8,4\n", NULL};
    ck_assert_int_eq(read_files(&d, paths, 2, two), GMM_OK);
    ck_assert_uint_eq(d->nchain, 2);
    ck_assert_int_eq(d->chain[0], 2);
    ck_assert_int_eq(d->chain[1], 3);
    ck_assert_str_eq(d->name[1], "a.b");
    ck_assert(gmm_draws_variable(d, 2)[0] == 3 && gmm_draws_variable(d, 2)[3] == 2);
    gmm_draws_free(d);
    d = NULL;
    free_paths(paths, 2);
    /* the set's sidecar names the parameter a_b stands for */
    char *side = tu_write_str(dir, "s.csv.json", "{\"format\": \"cmdstan\", \"origin\": "
                                                 "{\"parameters\": {\"0.x-y\": \"sampled\"}}}");
    static const char *const par[] = {"s_1.csv", "lp__,0_x_y\n-1,5\n", NULL};
    ck_assert_int_eq(read_files(&d, paths, 1, par), GMM_OK);
    ck_assert_str_eq(d->name[1], "0.x-y");
    gmm_draws_free(d);
    d = NULL;
    free(side);
    free_paths(paths, 1);

    /* separate CmdStan runs all say "id = 1 (Default)": no id, positions */
    static const char *const dflt[] = {
        "s_1.csv", "# id = 1 (Default)\nlp__,f.1\n-1,1\n",
        "s_2.csv", "# id = 1 (Default)\nlp__,f.1\n-3,3\n", NULL};
    ck_assert_int_eq(read_files(&d, paths, 2, dflt), GMM_OK);
    ck_assert_uint_eq(d->nchain, 2);
    ck_assert(gmm_draws_variable(d, 1)[0] == 1 && gmm_draws_variable(d, 1)[1] == 3);
    gmm_draws_free(d);
    d = NULL;
    free_paths(paths, 2);
    /* save_warmup: the first ceil(num_warmup / thin) rows are the warm-up's */
    static const char *const warm[] = {
        "w_1.csv", "# method = sample (Default)\n#   sample\n#     num_samples = 2\n"
                   "#     num_warmup = 3\n#     save_warmup = true\n#     thin = 2\n"
                   "lp__,f.1\n-1,10\n-2,20\n# Adaptation terminated\n-3,30\n-4,40\n",
        "w_2.csv", "#     num_warmup = 1000 (Default)\n#     save_warmup = false (Default)\n"
                   "lp__,f.1\n-5,50\n-6,60\n", NULL};
    ck_assert_int_eq(read_files(&d, paths, 2, warm), GMM_OK);
    ck_assert_uint_eq(d->niter, 2);
    ck_assert(gmm_draws_variable(d, 1)[0] == 30 && gmm_draws_variable(d, 1)[3] == 60);
    gmm_draws_free(d);
    d = NULL;
    free_paths(paths, 2);
    static const char *const short_warm[] = {
        "w_1.csv", "#     num_warmup = 3\n#     save_warmup = 1\nlp__,f.1\n-1,10\n-2,20\n",
        NULL};
    read_bad(1, short_warm,
             "@0: save_warmup with num_warmup = 3, thin = 1: 3 warm-up rows, but the file has 2");

    static const char *const mixed[] = {
        "a.csv", ".chain,lp__,f[1]\n1,-1,1\n", "s_2.csv", "lp__,f.1\n-3,3\n", NULL};
    read_bad(2, mixed, "@1: CmdStan's CSV (no column .chain), @0 is a draws_df CSV: give "
                       "files of one format");
    static const char *const dup[] = {
        "s_1.csv", "# id = 1\nlp__,f.1\n-1,1\n", "s_2.csv", "# id = 1\nlp__,f.1\n-3,3\n", NULL};
    read_bad(2, dup, "@1:3: chain 1 is also in @0");
    static const char *const pos[] = {
        "s_1.csv", "# id = 2\nlp__,f.1\n-1,1\n", "s_2.csv", "lp__,f.1\n-3,3\n", NULL};
    read_bad(2, pos, "@1:2: chain 2 is also in @0");
    static const char *const cell[] = {"s_1.csv", "# c\nlp__,f.1\n# d\n-1,x\n", NULL};
    read_bad(1, cell, "@0:4: column 'f.1': 'x' is not a number");
}
END_TEST

START_TEST(test_out_of_memory)
{
    const char *spec[] = {"a.csv", ".chain,x,y\n1,0,0\n2,1,1\n", "b.csv", ".chain,y,x\n3,0,0\n"};
    char *paths[2];
    for (size_t f = 0; f < 2; f++)
        paths[f] = tu_write_str(dir, spec[2 * f], spec[2 * f + 1]);
    gmm_status st = GMM_ENOMEM;
    long k;
    for (k = 0; k < 200 && st != GMM_OK; k++) {
        gmm_draws *d = NULL;
        gmm_alloc_fail_after(k);
        st = gmm_draws_read((const char *const *)paths, 2, &d);
        gmm_alloc_fail_after(-1);
        ck_assert_msg(st == GMM_OK || st == GMM_ENOMEM, "k = %ld: %s", k, gmm_error_message());
        ck_assert(st == GMM_OK ? d != NULL : d == NULL);
        gmm_draws_free(d);
    }
    ck_assert_int_eq(st, GMM_OK);
    free_paths(paths, 2);
}
END_TEST

Suite *io_draws_suite(void)
{
    Suite *s = suite_create("io_draws");
    TCase *tc = tcase_create("draws");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_columns_and_order);
    tcase_add_test(tc, test_merge);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_cmdstan);
    tcase_add_test(tc, test_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
