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
    read_bad(1, nochain, "@0: no column '.chain' (columns: chain, x)");

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
    tcase_add_test(tc, test_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
