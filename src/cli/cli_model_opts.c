/* cli_model_opts.c -- the model options shared by loglik, fit, gradcheck,
 * predict, hmc, vi and score (see cli_model.h): their help, and their values
 * parsed into the model's description (cli_model_opts.spec). */

#include "cli_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/gmrf.h"
#include "gmm/kernel.h"
#include "gmm/ssm.h"

static const char formula_help[] =
    "Model as a formula (man page: Formulas):\n"
    "  --formula 'Y ~ TERMS'  terms joined by +: 1 (default), 0 or -1 (no\n"
    "                      intercept), NAME (covariate), factor(NAME), and one or\n"
    "                      more f(NAME, MODEL, ...), latent terms indexed by\n"
    "                      column NAME and stacked into one posterior; MODEL is\n";

static const char options_help[] =
    "Model (state-space GP):\n"
    "  --kernel SPEC       kernel spec, e.g. 'matern32 + quasiperiodic(period=1)'\n"
    "                      (default: " GMM_MDL_DEFAULT_KERNEL ",\n"
    "                      period held fixed unless --free-period)\n"
    "  --free-period       let the default kernel's period be fitted too\n"
    "  --x NAME, --y NAME  input and output columns (default: the first two)\n"
    "  --merge-tol T       inputs closer than T share one state (default 0); also\n"
    "                      the index values of a formula's kernel terms\n"
    "Model (graph GMRF):\n"
    "  --graph EDGES.csv   edge list (columns i,j[,length])\n"
    "  --edge-cols I,J[,LEN]  its column names\n"
    "  --precision SPEC    e.g. 'edge-ou(variance=1, lengthscale=10)'\n"
    "  --node NAME, --y NAME  node and outcome columns of DATA.csv\n"
    "  --strict-nodes      a DATA.csv node missing from the graph is an error\n"
    "Likelihood:\n"
    "  --likelihood L      one of the families below, with its parameters as\n"
    "                      NAME(KEY=VALUE, ...); all but the exact Gaussian path\n"
    "                      use the Laplace approximation\n"
    "%s"
    "  --noise V           Gaussian variance start (default: a tenth of var(y))\n"
    "  --no-center         Gaussian: do not subtract the mean of the observed y\n"
    "  --exposure NAME     exposure column, for a family that reads one (default: 1)\n"
    "  --trials NAME       number-of-trials column, for a family that reads one\n"
    "                      (default: 1)\n"
    "  --weights NAME      prior weights column (finite, >= 0), as R's lm and glm:\n"
    "                      gaussian y ~ N(f, variance / w), others w log p(y | f)\n"
    "  --na omit|fail      a row with a missing covariate, factor or term column\n"
    "                      (or weight where y is observed): dropped with a count,\n"
    "                      as R's na.omit (default), or an error\n"
    "  --intercept B       non-Gaussian: start of the intercept b in f = b + Hx\n"
    "                      (default: the family's, from the data)\n"
    "  --no-intercept      non-Gaussian: no intercept\n"
    "Both:\n"
    "  --fix NAME          hold parameter NAME (e.g. intercept) where parameters are\n"
    "                      fitted or checked (repeatable)\n"
    "  --factor F          auto (default), band, sparse, cholesky or square-root:\n"
    "                      how the posterior precision is stored and factorised\n"
    "                      (man page: Factorisation)\n"
    "  --verbose           report defaults, sizes and progress on stderr\n";

/* The names name_at(0), name_at(1), ... comma-separated after text, which
 * starts at column indent; wrapped within 80 columns at that indent. */
static void print_names(FILE *f, int indent, const char *text, const char *(*name_at)(size_t))
{
    int col = fprintf(f, "%*s%s", indent, "", text);
    const char *nm;
    for (size_t i = 0; (nm = name_at(i)); i++) {
        const char *sep = name_at(i + 1) ? "," : "";
        if (col > indent && col + 1 + (int)(strlen(nm) + strlen(sep)) > 79)
            col = fprintf(f, "\n%*s", indent, "") - 1;
        if (col > indent)
            col += fprintf(f, " ");
        col += fprintf(f, "%s%s", nm, sep);
    }
    fputc('\n', f);
}

static const char *kernel_at(size_t i)
{
    const gmm_kernel_type *t = gmm_kernel_type_at(i);
    return t ? t->name : NULL;
}

/* The formula's models from the library's tables: a new keyword model,
 * kernel or precision family needs no edit here. */
static void print_formula_help(FILE *f)
{
    fputs(formula_help, f);
    const char *about;
    for (size_t i = 0; gmm_mdl_term_model(i, &about); i++)
        fprintf(f, "%24s%-8s%s\n", "", gmm_mdl_term_model(i, NULL), about);
    fprintf(f, "%24s%s", "", "'KERNEL' a kernel spec in quotes on input NAME, e.g.\n");
    fprintf(f, "%32s%s", "", "'matern32 + periodic(period=52)'; kernels:\n");
    print_names(f, 32, "", kernel_at);
    fprintf(f, "%24s%s", "", "'PRECISION', graph=EDGES.csv  a precision spec on\n");
    print_names(f, 32, "node NAME:", gmm_gmrf_family_at);
    fputs("                      rw1 and rw2 take cyclic (a walk on a circle, for a\n"
          "                      season) and period=P\n",
          f);
}

/* The families come from the likelihood table, so that a new one needs no
 * edit here. */
void cli_model_print_help(FILE *f)
{
    print_formula_help(f);
    const char *split = strstr(options_help, "%s");
    fwrite(options_help, 1, (size_t)(split - options_help), f);
    for (size_t i = 0; i < gmm_lik_ntypes(); i++) {
        const gmm_lik_type *t = gmm_lik_type_at(i);
        int col = fprintf(f, "%22s%s", "", t->name);
        for (size_t k = 0; k < t->nparam; k++)
            col += fprintf(f, "%s%s", k ? ", " : "(", t->param[k]);
        if (t->nparam)
            col += fprintf(f, ")");
        if (t->rowq)
            fprintf(f, "%*s reads %s", col < 46 ? 46 - col : 0, "", t->rowq);
        fputs(i == 0 ? " (default)\n" : "\n", f);
    }
    fputs(split + 2, f);
}

/* The model option that accumulates. */
const int cli_model_repeatable[] = {CLI_OPT_FIX, 0};

void cli_model_opts_init(cli_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seen.repeatable = cli_model_repeatable;
    gmm_mdl_spec_init(&o->spec);
}

void cli_model_opts_free(cli_model_opts *o)
{
    gmm_free((void *)o->fix);
    o->fix = NULL;
    o->nfix = 0;
}

static int parse_positive(const char *cmd, const char *opt, const char *arg, int zero_ok,
                          double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end || !isfinite(v) || v < 0 || (!zero_ok && v == 0)) {
        cli_msg(cmd, "--%s: '%s' is not a %s number", opt, arg,
                zero_ok ? "non-negative" : "positive");
        return -1;
    }
    *out = v;
    return 1;
}

int cli_model_parse_factor(const char *cmd, const char *arg, int storage_only, int *ssm,
                           gmm_model_factor *storage)
{
    *ssm = GMM_SSM_FACTOR_AUTO;
    if (gmm_model_factor_parse(arg, storage) == 0)
        return 0;
    /* the band's two factorisations (a state-space model's rule): the
     * model then takes the band (model.h) */
    *storage = GMM_MODEL_FACTOR_AUTO;
    if (!storage_only && !strcmp(arg, "cholesky"))
        *ssm = GMM_SSM_FACTOR_CHOL;
    else if (!storage_only && !strcmp(arg, "square-root"))
        *ssm = GMM_SSM_FACTOR_ROWS;
    else {
        cli_msg(cmd, "--factor: '%s' is not auto, %s", arg,
                storage_only ? "band or sparse"
                             : "cholesky or square-root (the band's), band or sparse");
        return -1;
    }
    return 0;
}

int cli_model_opt(cli_model_opts *o, const char *cmd, int c, const char *arg)
{
    if (c >= CLI_OPT_KERNEL && c < CLI_OPT_VERBOSE)
        o->given++;
    switch (c) {
    case CLI_OPT_KERNEL: o->spec.desc.kernel = arg; return 1;
    case CLI_OPT_FORMULA: o->spec.desc.formula = arg; return 1;
    case CLI_OPT_GRAPH: o->spec.desc.graph = arg; return 1;
    case CLI_OPT_PRECISION: o->spec.desc.precision = arg; return 1;
    case CLI_OPT_EDGE_COLS: o->edge_cols = arg; return 1;
    case CLI_OPT_X: o->spec.desc.data.x = arg; return 1;
    case CLI_OPT_Y: o->spec.desc.data.y = arg; return 1;
    case CLI_OPT_NODE: o->spec.desc.data.node = arg; return 1;
    case CLI_OPT_NOISE:
        return parse_positive(cmd, "noise", arg, 0, &o->spec.noise);
    case CLI_OPT_NO_CENTER: o->spec.no_center = 1; return 1;
    case CLI_OPT_STRICT_NODES: o->spec.strict_nodes = 1; return 1;
    case CLI_OPT_MERGE_TOL:
        return parse_positive(cmd, "merge-tol", arg, 1, &o->spec.desc.merge_tol);
    case CLI_OPT_FREE_PERIOD: o->spec.free_period = 1; return 1;
    case CLI_OPT_LIKELIHOOD: o->spec.desc.likelihood = arg; return 1;
    case CLI_OPT_EXPOSURE: o->spec.desc.data.exposure = arg; return 1;
    case CLI_OPT_TRIALS: o->spec.desc.data.trials = arg; return 1;
    case CLI_OPT_WEIGHTS: o->spec.desc.data.weights = arg; return 1;
    case CLI_OPT_NA:
        if (strcmp(arg, "omit") && strcmp(arg, "fail")) {
            cli_msg(cmd, "--na: '%s' is not omit or fail", arg);
            return -1;
        }
        o->spec.na_fail = !strcmp(arg, "fail");
        return 1;
    case CLI_OPT_INTERCEPT: {
        char *end;
        o->spec.intercept = strtod(arg, &end);
        if (end == arg || *end || !isfinite(o->spec.intercept)) {
            cli_msg(cmd, "--intercept: '%s' is not a finite number", arg);
            return -1;
        }
        return 1;
    }
    case CLI_OPT_NO_INTERCEPT: o->spec.no_intercept = 1; return 1;
    case CLI_OPT_VERBOSE: o->verbose = 1; return 1;
    case CLI_OPT_FACTOR:
        o->factor_given = 1;
        return cli_model_parse_factor(cmd, arg, 0, &o->spec.factor, &o->spec.desc.factor) ? -1
                                                                                            : 1;
    case CLI_OPT_FIX: {
        const char **f = gmm_realloc((void *)o->fix, o->nfix + 1, sizeof *f);
        if (!f) {
            cli_msg(cmd, "out of memory");
            return -1;
        }
        f[o->nfix++] = arg;
        o->fix = f;
        return 1;
    }
    default: return 0;
    }
}

int cli_model_getopt(cli_model_opts *o, const char *cmd, int argc, char **argv,
                     const char *shortopts, const struct option *longopts,
                     const char *usage_text, int *rc)
{
    int c;
    while ((c = cli_getopt(cmd, &o->seen, argc, argv, shortopts, longopts)) != -1) {
        if (c == CLI_OPT_REPEATED) {
            *rc = CLI_EXIT_USAGE;
            return CLI_MODEL_OPT_STOP;
        }
        int r = cli_model_opt(o, cmd, c, optarg);
        if (r > 0)
            continue;
        if (r < 0) {
            *rc = CLI_EXIT_USAGE;
            return CLI_MODEL_OPT_STOP;
        }
        if (c == 'h') {
            fputs(usage_text, stdout);
            cli_model_print_help(stdout);
            *rc = CLI_EXIT_OK;
            return CLI_MODEL_OPT_STOP;
        }
        if (c == '?' || c == ':') {
            fprintf(stderr, "Try 'gmm-infer %s --help'.\n", cmd);
            *rc = CLI_EXIT_USAGE;
            return CLI_MODEL_OPT_STOP;
        }
        return c;
    }
    return -1;
}

int cli_model_positional(const char *cmd, int argc, char **argv, cli_model_opts *o)
{
    if (optind < argc)
        o->spec.desc.data.file = argv[optind++];
    if (optind < argc) {
        cli_msg(cmd, "unexpected argument '%s'", argv[optind]);
        return CLI_EXIT_USAGE;
    }
    return 0;
}
