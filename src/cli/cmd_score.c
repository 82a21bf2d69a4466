/* cmd_score.c -- `gmm-infer score`: the log pointwise predictive density of
 * held-out outcomes, sum_i log E[p(y*_i | f_i)], under a model's posterior
 * (exact or Laplace, from a fit) or under MCMC draws (--draws): total as
 * JSON on stdout, per row as CSV with --rows; with --loo, the model's own
 * data left out one row at a time (gmm_mdl_score_loo). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_model.h"
#include "cli_score.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/json.h"
#include "gmm/likelihood.h"
#include "gmm/modelfile.h"
#include "gmm/problem.h"

/* The report root on stdout and the rows file of set (when --rows opened
 * one), committed together: a report that cannot be written (stdout on a
 * full disk) leaves no rows file.  s: the report's status so far (not OK:
 * nothing is written).  Takes set. */
static int commit_report(const char *cmd, gmm_outset *set, json_t *root, gmm_status s)
{
    gmm_outfile *so = NULL;
    if (s == GMM_OK && !root)
        s = gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK && (s = gmm_outset_open(set, NULL, &so)) == GMM_OK &&
        (s = gmm_json_write(gmm_outfile_stream(so), root, "-")) == GMM_OK) {
        s = gmm_outset_commit(set);
        set = NULL;
    }
    gmm_outset_abort(set);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

/* score --loo: the JSON and the rows of gmm_mdl_score_loo. */
static int score_loo(const char *cmd, gmm_mdl *m, const char *rows_path)
{
    size_t n;
    gmm_mdl_data_x(m, &n);
    double *lpd = gmm_malloc(n ? n : 1, sizeof *lpd);
    gmm_outset *set = NULL;
    gmm_outfile *of = NULL;
    json_t *root = NULL;
    int rc = 0;
    gmm_status s = lpd ? gmm_mdl_score_loo(m, lpd) : GMM_ENOMEM;
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    double total = 0.0;
    size_t nobs = 0;
    for (size_t r = 0; r < n; r++)
        if (!isnan(lpd[r])) {
            total += lpd[r];
            nobs++;
        }
    if ((s = gmm_outset_alloc(&set)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (rows_path) {
        if ((s = gmm_outset_open(set, rows_path, &of)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        FILE *f = gmm_outfile_stream(of);
        fprintf(f, "line,%s,%s,elpd_loo\n", gmm_mdl_data_site_name(m), gmm_mdl_data_y_name(m));
        for (size_t r = 0; r < n; r++) {
            size_t line, site;
            double y;
            char buf[96];
            if (isnan(lpd[r]))
                continue;
            gmm_mdl_data_row(m, r, &line, &y, &site);
            fprintf(f, "%zu,", line);
            gmm_csv_put_field(f, gmm_mdl_site_label(m, site, buf));
            fprintf(f, ",%.17g,%.17g\n", y, lpd[r]);
        }
    }
    const char *post = gmm_mdl_posterior_kind(m);
    root = json_object();
    s = root ? gmm_json_set_number(root, "elpd_loo", total) : GMM_OK;
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "n", json_integer((json_int_t)nobs));
    if (root && s == GMM_OK)
        s = gmm_json_set_number(root, "mean_elpd_loo", total / (double)nobs);
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "posterior", json_string(post));
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "method", json_string(gmm_mdl_loo_method(m)));
    rc = commit_report(cmd, set, root, s);
    set = NULL;
done:
    json_decref(root);
    gmm_outset_abort(set);
    gmm_free(lpd);
    return rc;
}

/* The model file and the model, once --rows is known writable and does
 * not replace what is read.  0 or an exit code. */
static int open_model(const char *cmd, const cli_score_args *a, gmm_model *mf, gmm_mdl **m)
{
    cli_io io;
    cli_io_init(&io);
    gmm_status s = GMM_OK;
    int rc = 0;
    if ((a->rows && (s = gmm_outfile_check(a->rows)) != GMM_OK) ||
        (s = gmm_model_read(a->model_path, mf)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    cli_io_output(&io, "--rows", a->rows, NULL);
    cli_model_file_inputs(&io, mf, a->model_path, NULL, "the model file");
    cli_io_input(&io, "the test file", a->test);
    cli_io_draws(&io, a->draws, a->ndraws);
    if ((rc = cli_io_check(cmd, &io)) == 0)
        rc = cli_model_from_file(cmd, mf, a->model_path, NULL, 0, 0, a->storage, m);
done:
    cli_io_free(&io);
    return rc;
}

/* lpd of the rows of tt under the draws (checked to be m's) or m's
 * posterior; *source names which. */
static int score_rows(const char *cmd, const cli_score_args *a, gmm_mdl *m,
                      const gmm_mdl_test *tt, double *lpd, const char **source)
{
    gmm_draws *d = NULL;
    gmm_status s;
    int rc = 0;
    if (a->ndraws) {
        *source = "draws";
        if ((s = gmm_draws_read(a->draws, a->ndraws, &d)) != GMM_OK)
            return cli_fail(cmd, s);
        if ((rc = cli_model_check_draws(cmd, m, a->draws, a->ndraws, d)) == 0 &&
            (s = gmm_mdl_score_draws(m, tt, d, a->draws[0], lpd)) != GMM_OK)
            rc = cli_fail(cmd, s);
        gmm_draws_free(d);
        return rc;
    }
    *source = gmm_mdl_posterior_kind(m);
    return (s = gmm_mdl_score(m, tt, lpd)) == GMM_OK ? 0 : cli_fail(cmd, s);
}

/* The rows file (--rows) of a test score, a member of set. */
static gmm_status write_rows(gmm_outset *set, const char *path, gmm_mdl *m,
                             const gmm_mdl_test *tt, const double *lpd)
{
    gmm_outfile *of = NULL;
    gmm_status s = gmm_outset_open(set, path, &of);
    if (s != GMM_OK)
        return s;
    FILE *f = gmm_outfile_stream(of);
    fprintf(f, "line,%s,%s,lpd\n", gmm_mdl_data_site_name(m), gmm_mdl_data_y_name(m));
    for (size_t r = 0; r < tt->n; r++) {
        char buf[64];
        if (isnan(tt->y[r]))
            continue;
        fprintf(f, "%zu,", tt->table->line[r]);
        gmm_csv_put_field(f, gmm_mdl_test_label(m, tt, r, buf));
        fprintf(f, ",%.17g,%.17g\n", tt->y[r], lpd[r]);
    }
    return GMM_OK;
}

/* score TEST.csv: the JSON and the rows. */
static int score_test(const char *cmd, const cli_score_args *a, gmm_mdl *m)
{
    gmm_mdl_test *tt = NULL;
    gmm_outset *set = NULL;
    double *lpd = NULL;
    json_t *root = NULL;
    const char *source = NULL;
    int rc = 0;
    gmm_status s = gmm_mdl_test_read(m, a->test, &tt);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if (!(lpd = gmm_malloc(tt->n ? tt->n : 1, sizeof *lpd))) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if ((rc = score_rows(cmd, a, m, tt, lpd, &source)) != 0)
        goto done;
    double total = 0.0;
    for (size_t r = 0; r < tt->n; r++)
        if (!isnan(tt->y[r]))
            total += lpd[r];
    if ((s = gmm_outset_alloc(&set)) != GMM_OK ||
        (a->rows && (s = write_rows(set, a->rows, m, tt, lpd)) != GMM_OK)) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    root = json_object();
    s = root ? gmm_json_set_number(root, "lpd", total) : GMM_OK;
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "n", json_integer((json_int_t)tt->nobs));
    if (root && s == GMM_OK)
        s = gmm_json_set_number(root, "mean_lpd", total / (double)tt->nobs);
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "posterior", json_string(source));
    if (root && s == GMM_OK)
        s = gmm_json_set_new(root, "test", json_string(a->test));
    rc = commit_report(cmd, set, root, s);
    set = NULL;
done:
    json_decref(root);
    gmm_outset_abort(set);
    gmm_mdl_test_free(tt);
    gmm_free(lpd);
    return rc;
}

int cmd_score(int argc, char **argv)
{
    const char *cmd = "score";
    cli_score_args a;
    gmm_model mf;
    gmm_model_init(&mf);
    gmm_mdl *m = NULL;
    int rc = cli_score_args_parse(cmd, argc, argv, &a);
    if (!rc && !a.stop && (rc = open_model(cmd, &a, &mf, &m)) == 0)
        rc = a.loo ? score_loo(cmd, m, a.rows) : score_test(cmd, &a, m);
    gmm_mdl_free(m);
    gmm_model_free(&mf);
    cli_score_args_free(&a);
    return rc;
}
