/* cli_predict_opts.c -- the options of `gmm-infer predict` (cli_predict.h):
 * its usage, its option table, the checks of the options alone, and the
 * new inputs --grid and --at give. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "cli_predict.h"
#include "gmm/alloc.h"
#include "gmm/io.h"

static const char usage_text[] =
    "Usage: gmm-infer predict --model MODEL.json [DATA.csv] [--at FILE | --grid FROM:TO:STEP]\n"
    "                         [--observed] [--re all|none] [--draws FILE]...\n"
    "                         [--level P] [-o FILE]\n"
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
    "  --re all|none       the latent (random-effect) terms kept: all (default;\n"
    "                      a level of an iid term the data lack gets its prior,\n"
    "                      mean 0 and the term's variance), or none: the fixed\n"
    "                      effects X beta alone (lme4's re.form = NA; every f()\n"
    "                      term dropped), whose variance is the coefficients'\n"
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
    "  --factor F          auto, band or sparse: how the posterior precision is\n"
    "                      stored and factorised (default: the model's)\n"
    "  --verbose           report sizes on stderr\n"
    "  -h, --help          this help\n"
    "Without --at or --grid, predictions are at the data's inputs.\n";

enum { OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_AT, OPT_ATCOL, OPT_GRID, OPT_OBSERVED,
       OPT_VERBOSE, OPT_DRAWS, OPT_LEVEL, OPT_TERMS, OPT_RE, OPT_FACTOR };
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
                                         {"re", required_argument, NULL, OPT_RE},
                                         {"factor", required_argument, NULL, OPT_FACTOR},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};

/* One option: 0, or an exit code after the message (-1: --help printed). */
static int predict_opt(const char *cmd, int c, const char *arg, cli_predict_args *a)
{
    switch (c) {
    case CLI_OPT_REPEATED: return CLI_EXIT_USAGE;
    case OPT_MODEL: a->model_path = arg; return 0;
    case OPT_DRAWS: {
        const char **d = gmm_realloc((void *)a->draws, a->ndraws + 1, sizeof *d);
        if (!d)
            return cli_fail(cmd, GMM_ENOMEM);
        d[a->ndraws++] = arg;
        a->draws = d;
        return 0;
    }
    case OPT_AT: a->at = arg; return 0;
    case OPT_ATCOL: a->atcol = arg; return 0;
    case OPT_GRID: a->grid = arg; return 0;
    case OPT_OBSERVED: a->observed = 1; return 0;
    case OPT_TERMS: a->terms = 1; return 0;
    case OPT_VERBOSE: a->verbose = 1; return 0;
    case OPT_FACTOR: {
        int ssm;
        gmm_model_factor f;
        if (cli_model_parse_factor(cmd, arg, 1, &ssm, &f))
            return CLI_EXIT_USAGE;
        a->storage = (int)f;
        return 0;
    }
    case OPT_LEVEL: return cli_parse_level(cmd, arg, &a->level);
    case OPT_RE:
        if (strcmp(arg, "all") && strcmp(arg, "none")) {
            cli_msg(cmd, "--re: expected 'all' or 'none', got '%s'", arg);
            return CLI_EXIT_USAGE;
        }
        a->kept = strcmp(arg, "none") ? GMM_MDL_TERMS_ALL : GMM_MDL_TERMS_FIXED;
        return 0;
    case 'o': a->out = arg; return 0;
    case 'h': fputs(usage_text, stdout); return -1;
    default:
        fprintf(stderr, "Try 'gmm-infer %s --help'.\n", cmd);
        return CLI_EXIT_USAGE;
    }
}

int cli_predict_args_parse(const char *cmd, int argc, char **argv, cli_predict_args *a)
{
    static const int repeatable[] = {OPT_DRAWS, 0};
    cli_opt_seen seen = {repeatable, {0}, 0};
    memset(a, 0, sizeof *a);
    a->level = CLI_DEFAULT_LEVEL;
    a->storage = CLI_MODEL_FILE_FACTOR;
    int c, rc;
    optind = 1;
    while ((c = cli_getopt(cmd, &seen, argc, argv, "ho:", longopts)) != -1)
        if ((rc = predict_opt(cmd, c, optarg, a)) != 0) {
            a->stop = rc < 0;
            return rc < 0 ? 0 : rc;
        }
    if (optind < argc)
        a->data = argv[optind++];
    if (optind < argc) {
        cli_msg(cmd, "unexpected argument '%s'", argv[optind]);
        return CLI_EXIT_USAGE;
    }
    if (!a->model_path) {
        cli_msg(cmd, "--model MODEL.json is required");
        return CLI_EXIT_USAGE;
    }
    if (a->terms && (a->at || a->grid || a->ndraws || a->observed)) {
        cli_msg(cmd, "--terms excludes --at, --grid, --draws and --observed");
        return CLI_EXIT_USAGE;
    }
    if (a->kept == GMM_MDL_TERMS_FIXED && (a->terms || a->ndraws)) {
        cli_msg(cmd, "--re none excludes --terms and --draws");
        return CLI_EXIT_USAGE;
    }
    if (a->at && a->grid) {
        cli_msg(cmd, "--at and --grid exclude each other");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

void cli_predict_args_free(cli_predict_args *a) { gmm_free((void *)a->draws); }

int cli_predict_grid(const char *cmd, const char *arg, double **xq, size_t *nq)
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

int cli_predict_read_at(const char *cmd, const char *path, const char *col, const char *model_x,
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
