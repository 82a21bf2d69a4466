/* test_outfile.c -- atomic output: the target changes only on commit, and no
 * temporary file survives commit, abort or a failed commit. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "support/tmpfiles.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }

static void teardown(void)
{
    tu_rmdir_all(dir);
    free(dir);
}

static char *in_dir(const char *name) { return tu_path(dir, name); }

START_TEST(test_commit_creates)
{
    char *path = in_dir("out.csv");
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    FILE *f = gmm_outfile_stream(o);
    ck_assert_ptr_nonnull(f);
    fputs("a,b\n1,2\n", f);
    /* Until commit only the temporary exists, and not under the target name. */
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    char *got = tu_read_file(path, NULL);
    ck_assert_str_eq(got, "a,b\n1,2\n");
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(got);
    free(path);
}
END_TEST

START_TEST(test_commit_replaces_and_mode)
{
    char *path = tu_write_str(dir, "m.json", "old\n");
    umask(022);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    fputs("new\n", gmm_outfile_stream(o));
    char *mid = tu_read_file(path, NULL);
    ck_assert_str_eq(mid, "old\n");
    ck_assert_uint_eq(tu_dir_count(dir), 2);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    char *got = tu_read_file(path, NULL);
    ck_assert_str_eq(got, "new\n");
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 0777, 0644);  /* not mkstemp's 0600 */
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(mid);
    free(got);
    free(path);
}
END_TEST

START_TEST(test_abort_keeps_old)
{
    char *path = tu_write_str(dir, "keep.txt", "precious\n");
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    fputs("half-written garbage", gmm_outfile_stream(o));
    fflush(gmm_outfile_stream(o));
    ck_assert_uint_eq(tu_dir_count(dir), 2);
    gmm_outfile_abort(o);
    char *got = tu_read_file(path, NULL);
    ck_assert_str_eq(got, "precious\n");
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    gmm_outfile_abort(NULL);
    free(got);
    free(path);

    /* Abort without a previous file leaves nothing at all. */
    path = in_dir("never.txt");
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    gmm_outfile_abort(o);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    ck_assert_int_ne(access(path, F_OK), 0);
    free(path);
}
END_TEST

START_TEST(test_relative_path_and_tmp_name)
{
    int here = open(".", O_RDONLY);
    ck_assert_int_ge(here, 0);
    ck_assert_int_eq(chdir(dir), 0);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open("rel.txt", &o), GMM_OK);
    /* The temporary is ".rel.txt.tmpXXXXXX" in the same directory. */
    DIR *d = opendir(".");
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            ck_assert_msg(!strncmp(e->d_name, ".rel.txt.tmp", 12) && strlen(e->d_name) == 18,
                          "temporary named '%s'", e->d_name);
            found++;
        }
    closedir(d);
    ck_assert_int_eq(found, 1);
    fputs("x", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    char *got = tu_read_file("rel.txt", NULL);
    ck_assert_str_eq(got, "x");
    free(got);
    ck_assert_int_eq(fchdir(here), 0);
    close(here);
}
END_TEST

START_TEST(test_stdout)
{
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open("-", &o), GMM_OK);
    ck_assert_ptr_eq(gmm_outfile_stream(o), stdout);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    ck_assert_int_eq(gmm_outfile_open(NULL, &o), GMM_OK);
    ck_assert_ptr_eq(gmm_outfile_stream(o), stdout);
    gmm_outfile_abort(o);
    ck_assert_ptr_null(gmm_outfile_stream(NULL));
}
END_TEST

START_TEST(test_open_errors)
{
    char *path = in_dir("no/such/dir/out.csv");
    gmm_outfile *o = (gmm_outfile *)&o;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_EIO);
    ck_assert_ptr_null(o);
    char want[1024];
    snprintf(want, sizeof want,
             "cannot create a temporary file for '%s': No such file or directory", path);
    ck_assert_str_eq(gmm_error_message(), want);
    free(path);

    path = in_dir("sub/");
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_EIO);
    snprintf(want, sizeof want, "'%s': not a file name", path);
    ck_assert_str_eq(gmm_error_message(), want);
    ck_assert_int_eq(gmm_outfile_open("", &o), GMM_EIO);
    ck_assert_int_eq(gmm_outfile_open("x", NULL), GMM_EINVAL);
    free(path);
}
END_TEST

/* rename onto a directory fails at commit: an error naming both files, and
 * the temporary is removed. */
START_TEST(test_commit_error_cleans_up)
{
    char *path = in_dir("adir");
    ck_assert_int_eq(mkdir(path, 0755), 0);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    fputs("data", gmm_outfile_stream(o));
    ck_assert_uint_eq(tu_dir_count(dir), 2);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_EIO);
    const char *m = gmm_error_message();
    ck_assert_msg(strstr(m, "cannot rename '") && strstr(m, path) && strstr(m, "Is a directory"),
                  "message: %s", m);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    rmdir(path);
    free(path);
}
END_TEST

START_TEST(test_out_of_memory)
{
    char *path = in_dir("oom.txt");
    int ok = 0;
    for (long k = 0; k < 20 && !ok; k++) {
        gmm_outfile *o = NULL;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_outfile_open(path, &o);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            fputs("y", gmm_outfile_stream(o));
            ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
            ok = 1;
        } else {
            ck_assert_int_eq(st, GMM_ENOMEM);
            ck_assert_uint_eq(tu_dir_count(dir), 0);
        }
    }
    ck_assert(ok);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(path);
}
END_TEST

extern Suite *io_outfile_suite(void);
Suite *io_outfile_suite(void)
{
    Suite *s = suite_create("io_outfile");
    TCase *tc = tcase_create("outfile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_commit_creates);
    tcase_add_test(tc, test_commit_replaces_and_mode);
    tcase_add_test(tc, test_abort_keeps_old);
    tcase_add_test(tc, test_relative_path_and_tmp_name);
    tcase_add_test(tc, test_stdout);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_commit_error_cleans_up);
    tcase_add_test(tc, test_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
