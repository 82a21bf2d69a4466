/* cmd_predict.c -- `gmm-infer predict`: posterior mean, variance and a
 * central interval (--level) of the latent f (or of y with --observed) as
 * CSV, for a fitted model: at new inputs (interpolation and forecasting) for
 * state-space models, at every node for graph models.  Variances come from
 * the Takahashi inverse subset of the posterior precision: linear in n, no
 * dense matrix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "cli_predict.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/summary.h"
#include "gmm/modelfile.h"
#include "gmm/ssm.h"

/* predict --terms: term,level,mean,sd (gmm_mdl_terms_get). */
static int write_terms(const char *cmd, gmm_mdl *m, const char *out_path)
{
    gmm_mdl_terms t;
    gmm_status s = gmm_mdl_terms_get(m, &t);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if (t.se_failed)
        cli_msg(cmd, "warning: no standard errors (the observed information is not positive "
                     "definite: the model is not at a maximum)");
    gmm_outfile *of = NULL;
    int rc = 0;
    if ((s = gmm_outfile_open(out_path, &of)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    FILE *f = gmm_outfile_stream(of);
    fputs("term,level,mean,sd\n", f);
    for (size_t i = 0; i < t.n; i++) {
        gmm_csv_put_field(f, t.term[i]);
        fputc(',', f);
        gmm_csv_put_field(f, t.level[i]);
        fputc(',', f);
        gmm_csv_put_number(f, t.mean[i]);
        fputc(',', f);
        gmm_csv_put_number(f, t.sd[i]);
        fputc('\n', f);
    }
    if ((s = gmm_outfile_commit(of)) != GMM_OK)
        rc = cli_fail(cmd, s);
done:
    gmm_mdl_terms_free(&t);
    return rc;
}

/* The posterior of f from MCMC draws (gmm-infer hmc) at their f[...]
 * columns' sites (gmm_mdl_predict_draws), or at new inputs xq (nq of
 * them; gmm_mdl_predict_draws_at) when xq is set.  Every column is checked
 * before anything is written. */
static int predict_draws(const char *cmd, gmm_mdl *m, const char **paths, size_t npath,
                         const double *xq, size_t nq, double level, const char *out_path)
{
    gmm_draws *d = NULL;
    size_t *site = NULL, nout = 0;
    gmm_summary_pred *pr = NULL;
    int rc = 0;
    gmm_status s = gmm_draws_read(paths, npath, &d);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if ((rc = cli_model_check_draws(cmd, m, paths, npath, d)) != 0)
        goto done;
    size_t nv = xq ? (nq ? nq : 1) : d->nvar ? d->nvar : 1;
    site = gmm_malloc(nv, sizeof *site);
    pr = gmm_malloc(nv, sizeof *pr);
    if (!site || !pr) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    s = xq ? gmm_mdl_predict_draws_at(m, d, paths[0], xq, nq, level, pr)
           : gmm_mdl_predict_draws(m, d, paths[0], level, site, pr, &nout);
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    rc = xq ? cli_pred_write(cmd, NULL, out_path, m, xq, NULL, pr, nq, level)
            : cli_pred_write(cmd, NULL, out_path, m, NULL, site, pr, nout, level);
done:
    gmm_draws_free(d);
    gmm_free(site);
    gmm_free(pr);
    return rc;
}

/* The same at the rows of t (gmm_mdl_predict_draws_rows). */
static int predict_draws_rows(const char *cmd, gmm_mdl *m, const char **paths, size_t npath,
                              const gmm_mdl_test *t, double level, const char *out_path)
{
    gmm_draws *d = NULL;
    gmm_summary_pred *pr = NULL;
    int rc = 0;
    gmm_status s = gmm_draws_read(paths, npath, &d);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if ((rc = cli_model_check_draws(cmd, m, paths, npath, d)) != 0)
        goto done;
    if (!(pr = gmm_malloc(t->n ? t->n : 1, sizeof *pr))) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if ((s = gmm_mdl_predict_draws_rows(m, d, paths[0], t, level, pr)) != GMM_OK)
        rc = cli_fail(cmd, s);
    else
        rc = cli_pred_write_rows(cmd, NULL, out_path, m, t, pr, level);
done:
    gmm_draws_free(d);
    gmm_free(pr);
    return rc;
}

/* The model file and the model, once -o is known writable and no output
 * replaces what is read (the model, the files it names, --at, the draws).
 * 0 or an exit code. */
static int open_model(const char *cmd, const cli_predict_args *a, gmm_model *mf, gmm_mdl **m)
{
    cli_io io;
    cli_io_init(&io);
    gmm_status s = GMM_OK;
    int rc = 0;
    if ((a->out && strcmp(a->out, "-") && (s = gmm_outfile_check(a->out)) != GMM_OK) ||
        (s = gmm_model_read(a->model_path, mf)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    cli_io_output(&io, "-o", a->out, NULL);
    cli_model_file_inputs(&io, mf, a->model_path, a->data, "the model file");
    cli_io_input(&io, "the --at file", a->at);
    cli_io_draws(&io, a->draws, a->ndraws);
    if ((rc = cli_io_check(cmd, &io)) == 0)
        rc = cli_model_from_file(cmd, mf, a->model_path, a->data, a->verbose,
                                 GMM_SSM_FACTOR_AUTO, a->storage, m);
done:
    cli_io_free(&io);
    return rc;
}

static int no_observed_draws(const char *cmd)
{
    cli_msg(cmd, "--observed does not apply with --draws (the draws are of f)");
    return CLI_EXIT_USAGE;
}

/* Rows of t at a level of an iid term the data lack: a note that their
 * effect is the prior's (lme4's allow.new.levels = TRUE). */
static void new_levels_note(const char *cmd, const gmm_mdl *m, const gmm_mdl_test *t)
{
    gmm_mdl_new_levels nl;
    gmm_mdl_test_new_levels(m, t, &nl);
    if (nl.nrow && nl.param)
        cli_msg(cmd, "note: %zu row%s at a level the model's data do not have (first %s:%zu: "
                     "column '%s', level '%s'): a new group, whose effect is the prior's, mean 0 "
                     "and variance %s = %.6g",
                nl.nrow, nl.nrow > 1 ? "s" : "", t->table->file, t->table->line[nl.first],
                nl.column, nl.level, nl.param, nl.variance);
    else if (nl.nrow)
        cli_msg(cmd, "note: %zu row%s at a level the model's data do not have (first %s:%zu: "
                     "column '%s', level '%s'): a new group, whose effect is the prior's",
                nl.nrow, nl.nrow > 1 ? "s" : "", t->table->file, t->table->line[nl.first],
                nl.column, nl.level);
}

/* --at FILE's rows, with their covariates, factor levels and inputs or
 * nodes. */
static int predict_at_rows(const char *cmd, const cli_predict_args *a, gmm_mdl *m)
{
    if (a->ndraws && a->observed)
        return no_observed_draws(cmd);
    if (a->atcol) {
        cli_msg(cmd, "--at-col does not apply: the rows of %s are read by the model's "
                     "column names",
                a->at);
        return CLI_EXIT_USAGE;
    }
    gmm_mdl_test *t = NULL;
    int rc;
    int fixed = a->kept == GMM_MDL_TERMS_FIXED;
    gmm_status s = gmm_mdl_rows_read(m, a->at, fixed ? GMM_MDL_ROWS_FIXED : GMM_MDL_ROWS_PREDICT,
                                     &t);
    if (s != GMM_OK)
        rc = cli_fail(cmd, s);
    else if (a->ndraws)
        rc = predict_draws_rows(cmd, m, a->draws, a->ndraws, t, a->level, a->out);
    else if (fixed)
        rc = cli_pred_fixed(cmd, a->out, m, t, NULL, 0, a->level, a->observed);
    else if ((rc = cli_pred_rows(cmd, NULL, a->out, m, t, a->level, a->observed)) == 0)
        new_levels_note(cmd, m, t);
    gmm_mdl_test_free(t);
    return rc;
}

/* The queries: --grid's points, --at's inputs (*xq, allocated), or the
 * model's nq sites (*xq NULL). */
static int queries(const char *cmd, const cli_predict_args *a, gmm_mdl *m, const gmm_model *mf,
                   double **xq, size_t *nq)
{
    if (a->grid)
        return cli_predict_grid(cmd, a->grid, xq, nq);
    if (a->at)
        return cli_predict_read_at(cmd, a->at, a->atcol, mf->desc.data.x, xq, nq);
    *nq = gmm_mdl_nsites(m);
    return 0;
}

/* --observed asks for new observations' intervals: Gaussian only. */
static int check_observed(const char *cmd, gmm_mdl *m)
{
    if (gmm_mdl_response_name(m))
        cli_msg(cmd, "--observed applies to the Gaussian likelihood; the %s columns give "
                     "the expected outcome",
                gmm_mdl_response_name(m));
    else
        cli_msg(cmd, "--observed applies to the Gaussian likelihood (new observations of "
                     "the %s likelihood are not normal)",
                gmm_mdl_likelihood_name(m));
    return CLI_EXIT_USAGE;
}

int cmd_predict(int argc, char **argv)
{
    const char *cmd = "predict";
    cli_predict_args a;
    gmm_model mf;
    gmm_model_init(&mf);
    gmm_mdl *m = NULL;
    double *xq = NULL;
    size_t nq = 0;

    int rc = cli_predict_args_parse(cmd, argc, argv, &a);
    if (rc || a.stop || (rc = open_model(cmd, &a, &mf, &m)) != 0)
        goto done;
    if (a.terms) {
        rc = write_terms(cmd, m, a.out);
    } else if (a.at && gmm_mdl_at_rows(m)) {
        rc = predict_at_rows(cmd, &a, m);
    } else if ((a.at || a.grid) && gmm_mdl_check_new_inputs(m) != GMM_OK) {
        cli_msg(cmd, "%s", gmm_error_message());
        rc = CLI_EXIT_USAGE;
    } else if (a.ndraws) {
        if (a.observed)
            rc = no_observed_draws(cmd);
        else if ((a.at || a.grid) && (rc = queries(cmd, &a, m, &mf, &xq, &nq)) == 0)
            rc = predict_draws(cmd, m, a.draws, a.ndraws, xq, nq, a.level, a.out);
        else if (!a.at && !a.grid)
            rc = predict_draws(cmd, m, a.draws, a.ndraws, NULL, 0, a.level, a.out);
    } else if (a.observed && !gmm_mdl_observed_normal(m)) {
        rc = check_observed(cmd, m);
    } else if ((rc = queries(cmd, &a, m, &mf, &xq, &nq)) == 0) {
        if (isatty(STDERR_FILENO) || a.verbose) {
            /* long work shows progress: the posterior first, then the queries */
            cli_msg(cmd, "posterior of %zu rows, then %zu predictions", gmm_mdl_nobs(m), nq);
            cli_model_progress(m, cmd);
            cli_install_signals();
        }
        rc = a.kept == GMM_MDL_TERMS_FIXED
                 ? cli_pred_fixed(cmd, a.out, m, NULL, xq, nq, a.level, a.observed)
                 : cli_pred_normal(cmd, NULL, a.out, m, xq, nq, a.level, a.observed);
    }
done:
    gmm_free(xq);
    gmm_mdl_free(m);
    gmm_model_free(&mf);
    cli_predict_args_free(&a);
    return rc;
}
