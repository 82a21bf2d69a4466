/* cmd_predict.c -- `gmm-infer predict`: posterior mean, variance and a
 * central interval (--level) of the latent f (or of y with --observed) as
 * CSV, for a fitted model: at new inputs (interpolation and forecasting) for
 * state-space models, at every node for graph models.  Variances come from
 * the Takahashi inverse subset of the posterior precision: linear in n, no
 * dense matrix. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/summary.h"
#include "gmm/modelfile.h"
#include "gmm/ssm.h"

static const char usage_text[] =
    "Usage: gmm-infer predict --model MODEL.json [DATA.csv] [--at FILE | --grid FROM:TO:STEP]\n"
    "                         [--observed] [--draws FILE]... [--level P] [-o FILE]\n"
    "       gmm-infer predict --model MODEL.json [DATA.csv] --terms [-o FILE]\n"
    "Print CSV x,mean,var,lower,upper,level (graph models: node,...): the\n"
    "posterior of the latent f (plus the intercept) with its central interval at\n"
    "probability level P; for count likelihoods also rate,rate_lower,rate_upper\n"
    "(the rate per unit exposure, exp(f): posterior mean and interval), for\n"
    "binary and binomial ones prob,prob_lower,prob_upper, before the level column.\n"
    "Non-Gaussian models use the Laplace approximation.\n\n"
    "  --model FILE        the model written by fit (required)\n"
    "  DATA.csv            condition on this data instead of the model's data file\n"
    "  --at FILE           predict at the x values of FILE (column --at-col, or the\n"
    "                      model's x column, or the first column); a model with\n"
    "                      covariates, factors, graph or iid terms or several f()\n"
    "                      terms at the rows of FILE, read by its column names\n"
    "  --at-col NAME       column of --at FILE\n"
    "  --grid FROM:TO:STEP predict on a regular grid (inclusive of TO when on it)\n"
    "  --observed          add the noise variance: intervals for new observations\n"
    "  --draws FILE        summarise MCMC draws of f (gmm-infer hmc's output;\n"
    "                      repeatable): mean, var and the interval between the\n"
    "                      (1-P)/2 and (1+P)/2 quantiles at the data rows or nodes;\n"
    "                      with --at/--grid, at new inputs from draws with states\n"
    "                      (hmc --states)\n"
    "  --terms             print term,level,mean,sd instead: each coefficient's\n"
    "                      estimate and standard error, then the f() term's\n"
    "                      posterior mean and sd at each of its levels, nodes\n"
    "                      or data inputs\n"
    "  --level P           the intervals' probability, in (0, 1) (default 0.9)\n"
    "  -o, --output FILE   write to FILE (atomically) instead of stdout\n"
    "  --verbose           report sizes on stderr\n"
    "  -h, --help          this help\n"
    "Without --at or --grid, predictions are at the data's inputs.\n";

static int parse_grid(const char *cmd, const char *arg, double **xq, size_t *nq)
{
    double a, b, st;
    char tail;
    if (sscanf(arg, "%lf:%lf:%lf%c", &a, &b, &st, &tail) != 3 || !isfinite(a) ||
        !isfinite(b) || !isfinite(st) || !(st > 0) || b < a) {
        cli_msg(cmd, "--grid: expected FROM:TO:STEP with FROM <= TO and STEP > 0, got '%s'",
                arg);
        return CLI_EXIT_USAGE;
    }
    double count = floor((b - a) / st * (1 + 1e-12)) + 1;
    if (count > 1e8) {
        cli_msg(cmd, "--grid: %.0f points is too many (at most 1e8)", count);
        return CLI_EXIT_USAGE;
    }
    *nq = (size_t)count;
    *xq = gmm_malloc(*nq, sizeof(double));
    if (!*xq)
        return cli_fail(cmd, GMM_ENOMEM);
    for (size_t i = 0; i < *nq; i++)
        (*xq)[i] = a + (double)i * st;
    return 0;
}

static int read_at(const char *cmd, const char *path, const char *col, const char *model_x,
                   double **xq, size_t *nq)
{
    gmm_table *t = NULL;
    gmm_status s = gmm_table_read(path, &t);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    size_t c = 0;
    int rc = 0;
    if (col)
        s = gmm_table_column(t, col, &c);
    else if (model_x && gmm_table_column(t, model_x, &c) != GMM_OK)
        c = 0;
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    *nq = t->nrow;
    *xq = gmm_malloc(t->nrow ? t->nrow : 1, sizeof(double));
    if (!*xq) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if ((s = gmm_table_column_double(t, c, 0, *xq)) != GMM_OK)
        rc = cli_fail(cmd, s);
done:
    gmm_table_free(t);
    return rc;
}

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

int cmd_predict(int argc, char **argv)
{
    const char *cmd = "predict";
    enum { OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_AT, OPT_ATCOL, OPT_GRID, OPT_OBSERVED,
           OPT_VERBOSE, OPT_DRAWS, OPT_LEVEL, OPT_TERMS };
    static const struct option longopts[] = {{"model", required_argument, NULL, OPT_MODEL},
                                             {"at", required_argument, NULL, OPT_AT},
                                             {"at-col", required_argument, NULL, OPT_ATCOL},
                                             {"grid", required_argument, NULL, OPT_GRID},
                                             {"observed", no_argument, NULL, OPT_OBSERVED},
                                             {"output", required_argument, NULL, 'o'},
                                             {"verbose", no_argument, NULL, OPT_VERBOSE},
                                             {"draws", required_argument, NULL, OPT_DRAWS},
                                             {"level", required_argument, NULL, OPT_LEVEL},
                                             {"terms", no_argument, NULL, OPT_TERMS},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *at = NULL, *atcol = NULL, *grid = NULL, *out_path = NULL;
    const char *data = NULL;
    const char **draws = NULL;
    size_t ndraws = 0;
    int observed = 0, verbose = 0, terms = 0, c, rc = 0;
    double level = CLI_DEFAULT_LEVEL;
    gmm_model mf;
    gmm_model_init(&mf);
    gmm_mdl *m = NULL;
    double *xq = NULL;
    size_t nq = 0;
    cli_io io;
    cli_io_init(&io);

    static const int repeatable[] = {OPT_DRAWS, 0};
    cli_opt_seen seen = {repeatable, {0}, 0};
    optind = 1;
    while ((c = cli_getopt(cmd, &seen, argc, argv, "ho:", longopts)) != -1) {
        switch (c) {
        case CLI_OPT_REPEATED: rc = CLI_EXIT_USAGE; goto done;
        case OPT_MODEL: model_path = optarg; break;
        case OPT_DRAWS: {
            const char **d = gmm_realloc((void *)draws, ndraws + 1, sizeof *d);
            if (!d) {
                rc = cli_fail(cmd, GMM_ENOMEM);
                goto done;
            }
            d[ndraws++] = optarg;
            draws = d;
            break;
        }
        case OPT_AT: at = optarg; break;
        case OPT_ATCOL: atcol = optarg; break;
        case OPT_GRID: grid = optarg; break;
        case OPT_OBSERVED: observed = 1; break;
        case OPT_TERMS: terms = 1; break;
        case OPT_VERBOSE: verbose = 1; break;
        case OPT_LEVEL:
            if ((rc = cli_parse_level(cmd, optarg, &level)) != 0)
                goto done;
            break;
        case 'o': out_path = optarg; break;
        case 'h': fputs(usage_text, stdout); goto done;
        default:
            fprintf(stderr, "Try 'gmm-infer %s --help'.\n", cmd);
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (optind < argc)
        data = argv[optind++];
    if (optind < argc) {
        cli_msg(cmd, "unexpected argument '%s'", argv[optind]);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (!model_path) {
        cli_msg(cmd, "--model MODEL.json is required");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (terms && (at || grid || ndraws || observed)) {
        cli_msg(cmd, "--terms excludes --at, --grid, --draws and --observed");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (at && grid) {
        cli_msg(cmd, "--at and --grid exclude each other");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    gmm_status s;
    if (out_path && strcmp(out_path, "-") && (s = gmm_outfile_check(out_path)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    s = gmm_model_read(model_path, &mf);
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    /* -o never replaces what is read: the model, the files it names, --at,
     * the draws */
    cli_io_output(&io, "-o", out_path, NULL);
    cli_model_file_inputs(&io, &mf, model_path, data, "the model file");
    cli_io_input(&io, "the --at file", at);
    cli_io_draws(&io, draws, ndraws);
    if ((rc = cli_io_check(cmd, &io)) != 0)
        goto done;
    if ((rc = cli_model_from_file(cmd, &mf, model_path, data, verbose, GMM_SSM_FACTOR_AUTO, &m)) != 0)
        goto done;
    if (terms) {
        rc = write_terms(cmd, m, out_path);
        goto done;
    }
    if (at && gmm_mdl_at_rows(m)) {
        /* rows with their covariates, factor levels and inputs or nodes */
        if (ndraws && observed) {
            cli_msg(cmd, "--observed does not apply with --draws (the draws are of f)");
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (atcol) {
            cli_msg(cmd, "--at-col does not apply: the rows of %s are read by the model's "
                         "column names",
                    at);
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        gmm_mdl_test *t = NULL;
        gmm_status s2 = gmm_mdl_rows_read(m, at, 0, &t);
        if (s2 != GMM_OK)
            rc = cli_fail(cmd, s2);
        else if (ndraws)
            rc = predict_draws_rows(cmd, m, draws, ndraws, t, level, out_path);
        else
            rc = cli_pred_rows(cmd, NULL, out_path, m, t, level, observed);
        gmm_mdl_test_free(t);
        goto done;
    }
    if ((at || grid) && gmm_mdl_check_new_inputs(m) != GMM_OK) {
        cli_msg(cmd, "%s", gmm_error_message());
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (ndraws) {
        if (observed) {
            cli_msg(cmd, "--observed does not apply with --draws (the draws are of f)");
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (at || grid) {
            if (grid)
                rc = parse_grid(cmd, grid, &xq, &nq);
            else
                rc = read_at(cmd, at, atcol, mf.data.x, &xq, &nq);
            if (rc == 0)
                rc = predict_draws(cmd, m, draws, ndraws, xq, nq, level, out_path);
            goto done;
        }
        rc = predict_draws(cmd, m, draws, ndraws, NULL, 0, level, out_path);
        goto done;
    }
    if (observed && !gmm_mdl_observed_normal(m)) {
        if (gmm_mdl_response_name(m))
            cli_msg(cmd, "--observed applies to the Gaussian likelihood; the %s columns give "
                         "the expected outcome",
                    gmm_mdl_response_name(m));
        else
            cli_msg(cmd, "--observed applies to the Gaussian likelihood (new observations of "
                         "the %s likelihood are not normal)",
                    gmm_mdl_likelihood(m)->type->name);
        rc = CLI_EXIT_USAGE;
        goto done;
    }

    if (grid) {
        if ((rc = parse_grid(cmd, grid, &xq, &nq)) != 0)
            goto done;
    } else if (at) {
        if ((rc = read_at(cmd, at, atcol, mf.data.x, &xq, &nq)) != 0)
            goto done;
    } else {
        nq = gmm_mdl_nsites(m);
    }
    if (isatty(STDERR_FILENO) || verbose) {
        /* long work shows progress: the posterior first, then the queries */
        cli_msg(cmd, "posterior of %zu rows, then %zu predictions", gmm_mdl_nobs(m), nq);
        cli_model_progress(m, cmd);
        cli_install_signals();
    }
    rc = cli_pred_normal(cmd, NULL, out_path, m, xq, nq, level, observed);
done:
    gmm_free(xq);
    gmm_mdl_free(m);
    gmm_model_free(&mf);
    gmm_free((void *)draws);
    cli_io_free(&io);
    return rc;
}
