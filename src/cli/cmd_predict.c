/* cmd_predict.c -- `gmm-infer predict`: posterior mean, variance and 95%
 * interval of the latent f (or of y with --observed) as CSV, for a fitted
 * model: at new inputs (interpolation and forecasting) for state-space
 * models, at every node for graph models.  Variances come from the Takahashi
 * inverse subset of the posterior precision: linear in n, no dense matrix. */
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
    "                         [--observed] [-o FILE]\n"
    "Print CSV x,mean,var,lower,upper (graph models: node,mean,var,lower,upper):\n"
    "the posterior of the latent f (plus the intercept) with a 95% interval; for\n"
    "count likelihoods also rate,rate_lower,rate_upper (the rate per unit exposure,\n"
    "exp(f): posterior mean and the interval), for bernoulli prob,prob_lower,\n"
    "prob_upper.  Non-Gaussian models use the Laplace approximation.\n\n"
    "  --model FILE        the model written by fit (required)\n"
    "  DATA.csv            condition on this data instead of the model's data file\n"
    "  --at FILE           predict at the x values of FILE (column --at-col, or the\n"
    "                      model's x column, or the first column)\n"
    "  --at-col NAME       column of --at FILE\n"
    "  --grid FROM:TO:STEP predict on a regular grid (inclusive of TO when on it)\n"
    "  --observed          add the noise variance: intervals for new observations\n"
    "  --draws FILE        summarise MCMC draws of f (gmm-infer hmc's output;\n"
    "                      repeatable): mean, var and the 90% interval (5% and 95%\n"
    "                      quantiles) at the data rows or nodes; with --at/--grid,\n"
    "                      at new inputs from draws with states (hmc --states)\n"
    "  -o, --output FILE   write to FILE (atomically) instead of stdout\n"
    "  --verbose           report sizes on stderr\n"
    "  -h, --help          this help\n"
    "Without --at or --grid, predictions are at the data's inputs.\n";

/* 97.5% quantile of the standard normal. */
#define Z975 1.959963984540054

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

/* The posterior of f from MCMC draws (gmm-infer hmc): for every column
 * f[...] the mean, variance and 90% interval (5% and 95% quantiles), at the
 * data row's x (state-space) or the node; rates / probabilities through the
 * inverse link, draw by draw. */
static int predict_draws(const char *cmd, cli_model *m, const gmm_lik *lik, const char **paths,
                         size_t npath, const char *out_path)
{
    gmm_draws *d = NULL;
    gmm_outfile *of = NULL;
    gmm_summary_work *sw = NULL;
    int rc = 0;
    gmm_status s = gmm_draws_read(paths, npath, &d);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if ((rc = cli_model_check_draws(cmd, m, paths, npath, d)) != 0) {
        gmm_draws_free(d);
        return rc;
    }
    size_t N = d->nchain * d->niter, nx = 0;
    const double *x = cli_model_data_x(m, &nx);
    if ((s = gmm_summary_work_alloc(d->nchain, d->niter, &sw)) != GMM_OK ||
        (s = gmm_outfile_open(out_path, &of)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    FILE *f = gmm_outfile_stream(of);
    const char *resp = lik->type->conjugate ? NULL : lik->type->link_log ? "rate" : "prob";
    fprintf(f, "%s,mean,var,lower,upper", cli_model_has_inputs(m) ? "x" : "node");
    if (resp)
        fprintf(f, ",%s,%s_lower,%s_upper", resp, resp, resp);
    fputc('\n', f);
    size_t nout = 0;
    for (size_t v = 0; v < d->nvar; v++) {
        const char *name = d->name[v];
        size_t len = strlen(name);
        if (len < 4 || strncmp(name, "f[", 2) || name[len - 1] != ']')
            continue;
        if (cli_model_has_inputs(m)) {
            char *end;
            unsigned long r = strtoul(name + 2, &end, 10);
            if (end != name + len - 1 || r < 1 || r > nx) {
                cli_msg(cmd, "%s: column '%s' is not a data row of the model's data (1..%zu)",
                        paths[0], name, nx);
                rc = CLI_EXIT_ERROR;
                goto done;
            }
            fprintf(f, "%.17g", x[r - 1]);
        } else {
            fprintf(f, "%.*s", (int)(len - 3), name + 2);
        }
        /* mean, sd and the type-7 quantiles as `summary` computes them */
        const double *dv = gmm_draws_variable(d, v);
        gmm_summary sm;
        if ((s = gmm_summary_compute(dv, d->nchain, d->niter, sw, &sm)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        double mu = sm.mean, lo = sm.q5, hi = sm.q95, rm = 0.0;
        for (size_t i = 0; resp && i < N; i++)
            rm += lik->type->mean(lik->par, 1.0, dv[i]);
        fprintf(f, ",%.17g,%.17g,%.17g,%.17g", mu, N > 1 ? sm.sd * sm.sd : 0.0, lo, hi);
        if (resp)
            fprintf(f, ",%.17g,%.17g,%.17g", rm / (double)N, lik->type->mean(lik->par, 1.0, lo),
                    lik->type->mean(lik->par, 1.0, hi));
        fputc('\n', f);
        nout++;
    }
    if (nout == 0) {
        cli_msg(cmd, "%s: no f[...] columns in the draws", paths[0]);
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    s = gmm_outfile_commit(of);
    of = NULL;
    if (s != GMM_OK)
        rc = cli_fail(cmd, s);
done:
    gmm_outfile_abort(of);
    gmm_draws_free(d);
    gmm_summary_work_free(sw);
    return rc;
}

/* At new inputs from draws that hold the latent states (hmc --states):
 * each new f(t) drawn from the Markov bridge given each draw
 * (gmm_problem_predict_at_draws); 90% intervals; rates through the
 * inverse link (monotone: the quantiles map, the mean is over the draws). */
static int predict_draws_at(const char *cmd, cli_model *m, const gmm_lik *lik,
                            const char **paths, size_t npath, const double *xq, size_t nq,
                            const char *out_path)
{
    gmm_draws *d = NULL;
    gmm_outfile *of = NULL;
    double *xs = NULL, *th = NULL, *mean = NULL, *var = NULL, *lo = NULL, *hi = NULL;
    int rc = 0;
    gmm_status s = gmm_draws_read(paths, npath, &d);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if ((rc = cli_model_check_draws(cmd, m, paths, npath, d)) != 0) {
        gmm_draws_free(d);
        return rc;
    }
    gmm_problem *p = cli_model_problem(m);
    gmm_objective *o = cli_model_objective(m);
    size_t n = gmm_latent_dim(gmm_problem_latent(p)), N = d->nchain * d->niter, np = o->nparam;
    size_t x1 = d->nvar, nqq = nq ? nq : 1;
    for (size_t v = 0; v < d->nvar && x1 == d->nvar; v++)
        if (!strcmp(d->name[v], "x[1]"))
            x1 = v;
    if (x1 == d->nvar || x1 + n > d->nvar) {
        cli_msg(cmd, "%s: no latent states x[1..%zu]: predicting new inputs from draws needs "
                     "them (gmm-infer hmc --states)",
                paths[0], n);
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    xs = gmm_malloc(N * n, sizeof *xs);
    th = gmm_malloc(N * (np ? np : 1), sizeof *th);
    mean = gmm_malloc(nqq, sizeof *mean);
    var = gmm_malloc(nqq, sizeof *var);
    lo = gmm_malloc(nqq, sizeof *lo);
    hi = gmm_malloc(nqq, sizeof *hi);
    if (!xs || !th || !mean || !var || !lo || !hi) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    for (size_t j = 0; j < n; j++) {
        const double *col = gmm_draws_variable(d, x1 + j);
        for (size_t k = 0; k < N; k++)
            xs[k * n + j] = col[k];
    }
    /* sampled hyperparameters are columns by name; the others the model's */
    for (size_t k2 = 0; k2 < np; k2++) {
        size_t v;
        for (v = 0; v < d->nvar && strcmp(d->name[v], o->name[k2]); v++)
            ;
        for (size_t k = 0; k < N; k++)
            th[k * np + k2] = v < d->nvar ? gmm_draws_variable(d, v)[k] : o->value[k2];
    }
    if ((s = gmm_problem_predict_at_draws(p, th, np, xs, N, xq, nq, 1, mean, var, lo, hi)) !=
            GMM_OK ||
        (s = gmm_outfile_open(out_path, &of)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    FILE *f = gmm_outfile_stream(of);
    double c0 = cli_model_center(m, NULL);
    const char *resp = lik->type->conjugate ? NULL : lik->type->link_log ? "rate" : "prob";
    fprintf(f, "x,mean,var,lower,upper");
    if (resp)
        fprintf(f, ",%s_lower,%s_upper", resp, resp);
    fputc('\n', f);
    for (size_t q = 0; q < nq; q++) {
        fprintf(f, "%.17g,%.17g,%.17g,%.17g,%.17g", xq[q], mean[q] + c0, var[q], lo[q] + c0,
                hi[q] + c0);
        if (resp)
            fprintf(f, ",%.17g,%.17g", lik->type->mean(lik->par, 1.0, lo[q]),
                    lik->type->mean(lik->par, 1.0, hi[q]));
        fputc('\n', f);
    }
    s = gmm_outfile_commit(of);
    of = NULL;
    if (s != GMM_OK)
        rc = cli_fail(cmd, s);
done:
    gmm_outfile_abort(of);
    gmm_draws_free(d);
    gmm_free(xs);
    gmm_free(th);
    gmm_free(mean);
    gmm_free(var);
    gmm_free(lo);
    gmm_free(hi);
    return rc;
}

int cmd_predict(int argc, char **argv)
{
    const char *cmd = "predict";
    enum { OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_AT, OPT_ATCOL, OPT_GRID, OPT_OBSERVED,
           OPT_VERBOSE, OPT_DRAWS };
    static const struct option longopts[] = {{"model", required_argument, NULL, OPT_MODEL},
                                             {"at", required_argument, NULL, OPT_AT},
                                             {"at-col", required_argument, NULL, OPT_ATCOL},
                                             {"grid", required_argument, NULL, OPT_GRID},
                                             {"observed", no_argument, NULL, OPT_OBSERVED},
                                             {"output", required_argument, NULL, 'o'},
                                             {"verbose", no_argument, NULL, OPT_VERBOSE},
                                             {"draws", required_argument, NULL, OPT_DRAWS},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *at = NULL, *atcol = NULL, *grid = NULL, *out_path = NULL;
    const char *data = NULL;
    const char **draws = NULL;
    size_t ndraws = 0;
    int observed = 0, verbose = 0, c, rc = 0;
    gmm_model mf;
    gmm_model_init(&mf);
    cli_model *m = NULL;
    double *xq = NULL, *mean = NULL, *var = NULL;
    size_t nq = 0;
    gmm_outfile *of = NULL;

    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        switch (c) {
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
        case OPT_VERBOSE: verbose = 1; break;
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
    if ((rc = cli_model_from_file(cmd, &mf, model_path, data, verbose, GMM_SSM_FACTOR_AUTO, &m)) != 0)
        goto done;
    if (!cli_model_has_inputs(m) && (at || grid)) {
        cli_msg(cmd, "--at and --grid apply to models with inputs (state-space); this model "
                     "predicts at every node");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    const gmm_lik *lik = cli_model_likelihood(m);
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
                rc = predict_draws_at(cmd, m, lik, draws, ndraws, xq, nq, out_path);
            goto done;
        }
        rc = predict_draws(cmd, m, lik, draws, ndraws, out_path);
        goto done;
    }
    if (observed && !lik->type->conjugate) {
        cli_msg(cmd, "--observed applies to the Gaussian likelihood; the %s columns give the "
                     "expected outcome",
                lik->type->link_log ? "rate" : "prob");
        rc = CLI_EXIT_USAGE;
        goto done;
    }

    if (!cli_model_has_inputs(m)) {
        nq = cli_model_nsites(m);
    } else if (grid) {
        if ((rc = parse_grid(cmd, grid, &xq, &nq)) != 0)
            goto done;
    } else if (at) {
        if ((rc = read_at(cmd, at, atcol, mf.data.x, &xq, &nq)) != 0)
            goto done;
    } else {
        const double *x = cli_model_data_x(m, &nq);
        xq = gmm_malloc(nq ? nq : 1, sizeof(double));
        if (!xq) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto done;
        }
        memcpy(xq, x, nq * sizeof(double));
    }
    mean = gmm_malloc(nq ? nq : 1, sizeof(double));
    var = gmm_malloc(nq ? nq : 1, sizeof(double));
    if (!mean || !var) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if (isatty(STDERR_FILENO) || verbose) {
        /* long work shows progress: the posterior first, then the queries */
        cli_msg(cmd, "posterior of %zu rows, then %zu predictions", cli_model_nobs(m), nq);
        cli_model_progress(m, cmd);
        cli_install_signals();
    }
    if ((s = cli_model_predict(m, xq, nq, mean, var)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    double noise = observed ? cli_model_noise(m) : 0.0;
    if ((s = gmm_outfile_open(out_path, &of)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    FILE *f = gmm_outfile_stream(of);
    /* non-Gaussian: the mean outcome per unit exposure (rate) or the
     * probability, its posterior mean and the same 95% interval mapped
     * through the (monotone) inverse link (gmm_lik_response) */
    const char *resp = lik->type->conjugate ? NULL : lik->type->link_log ? "rate" : "prob";
    fprintf(f, "%s,mean,var,lower,upper", cli_model_has_inputs(m) ? "x" : "node");
    if (resp)
        fprintf(f, ",%s,%s_lower,%s_upper", resp, resp, resp);
    fputc('\n', f);
    for (size_t i = 0; i < nq; i++) {
        double v = var[i] + noise, sd = sqrt(v > 0 ? v : 0);
        if (!cli_model_has_inputs(m)) {
            char buf[64];
            fprintf(f, "%s,", cli_model_site_label(m, i, buf));
        } else {
            fprintf(f, "%.17g,", xq[i]);
        }
        fprintf(f, "%.17g,%.17g,%.17g,%.17g", mean[i], v, mean[i] - Z975 * sd,
                mean[i] + Z975 * sd);
        if (resp) {
            double r[3];
            if ((s = gmm_lik_response(lik, mean[i], v, Z975, r)) != GMM_OK)
                break;
            fprintf(f, ",%.17g,%.17g,%.17g", r[0], r[1], r[2]);
        }
        fputc('\n', f);
    }
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    s = gmm_outfile_commit(of);
    of = NULL;
    if (s != GMM_OK)
        rc = cli_fail(cmd, s);
done:
    gmm_outfile_abort(of);
    gmm_free(xq);
    gmm_free(mean);
    gmm_free(var);
    cli_model_free(m);
    gmm_model_free(&mf);
    gmm_free((void *)draws);
    return rc;
}
