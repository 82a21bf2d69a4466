/* cli_model.c -- the model options shared by loglik, fit, gradcheck,
 * predict, hmc, vi and score (see cli_model.h): they, or a model file, become
 * a gmm_mdl_spec that the library builds (model.h); this file prints what
 * the build reports and how it failed. */
/* realpath (XSI) */
#define _XOPEN_SOURCE 700

#include "cli_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/formula.h"
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
    "  --factor F          auto (default), cholesky or square-root: how the posterior\n"
    "                      precision is factorised (man page: Factorisation)\n"
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
    "  --intercept B       non-Gaussian: start of the intercept b in f = b + Hx\n"
    "                      (default: the family's, from the data)\n"
    "  --no-intercept      non-Gaussian: no intercept\n"
    "Both:\n"
    "  --fix NAME          hold parameter NAME (e.g. intercept) where parameters are\n"
    "                      fitted or checked (repeatable)\n"
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
        if (!strcmp(arg, "auto"))
            o->spec.factor = GMM_SSM_FACTOR_AUTO;
        else if (!strcmp(arg, "cholesky"))
            o->spec.factor = GMM_SSM_FACTOR_CHOL;
        else if (!strcmp(arg, "square-root"))
            o->spec.factor = GMM_SSM_FACTOR_ROWS;
        else {
            cli_msg(cmd, "--factor: '%s' is not auto, cholesky or square-root", arg);
            return -1;
        }
        return 1;
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

/* What the build reports, on stderr as the command's messages. */
typedef struct {
    const char *cmd;
    int quiet, verbose, from_file;
    int default_kernel; /* say so after the data report (verbose) */
} report_ctx;

static void on_report(void *user, gmm_mdl_report kind, const char *text)
{
    const report_ctx *r = user;
    if (kind == GMM_MDL_REPORT_DATA && r->quiet) {
        /* a quiet copy still says which kernel it took (as each copy did) */
        if (r->verbose && r->default_kernel)
            cli_msg(r->cmd, "default kernel: %s", GMM_MDL_DEFAULT_KERNEL);
        return;
    }
    if (r->quiet)
        return;
    if (r->from_file && (kind == GMM_MDL_REPORT_DATA || kind == GMM_MDL_REPORT_SUMMARY))
        return;
    if (!r->verbose && (kind == GMM_MDL_REPORT_INFO || kind == GMM_MDL_REPORT_SUMMARY))
        return;
    cli_msg(r->cmd, "%s", text);
    if (kind == GMM_MDL_REPORT_DATA && r->verbose && r->default_kernel)
        cli_msg(r->cmd, "default kernel: %s", GMM_MDL_DEFAULT_KERNEL);
}

/* A broken rule of the description (model.h: gmm_mdl_rule) in the options'
 * words; NULL: the library's message serves. */
static const char *rule_message(gmm_mdl_rule r)
{
    switch (r) {
    case GMM_MDL_RULE_KERNEL_AND_GRAPH: return "--kernel and --graph exclude each other";
    case GMM_MDL_RULE_GRAPH_FIELDS: return "--precision, --node and --edge-cols need --graph";
    case GMM_MDL_RULE_GRAPH_NEEDS:
        return "--graph needs --precision SPEC, --node NAME and --y NAME";
    case GMM_MDL_RULE_STATE_SPACE_FIELDS:
        return "--x, --merge-tol and --free-period apply to state-space models, not to --graph";
    case GMM_MDL_RULE_EXPOSURE_AND_TRIALS: return "--exposure and --trials exclude each other";
    case GMM_MDL_RULE_NON_GAUSSIAN_FIELDS:
        return "--exposure, --intercept and --no-intercept apply to non-Gaussian likelihoods "
               "(Gaussian data are centred instead)";
    case GMM_MDL_RULE_GAUSSIAN_FIELDS:
        return "--noise and --no-center apply to the Gaussian likelihood (use --likelihood's "
               "own parameters, e.g. 'negbinomial(dispersion=2)')";
    case GMM_MDL_RULE_INTERCEPT_AND_NONE:
        return "--intercept and --no-intercept exclude each other";
    case GMM_MDL_RULE_FORMULA_REPLACES:
        return "--formula replaces --kernel, --graph, --precision, --x, --y and --node";
    case GMM_MDL_RULE_MERGE_TOL_NO_KERNEL:
        return "--merge-tol applies to state-space models: --kernel, or kernel terms "
               "f(NAME, 'KERNEL') of a formula";
    default: return NULL;
    }
}

/* A failed build, as the command line says it: a spec with a caret (under
 * the model file's key when spec_file is set), a usage error (exit 2), a
 * list of the parameters.  Returns the exit code. */
static int build_failed(const char *cmd, gmm_status s, const gmm_mdl_failure *f,
                        const char *spec_file)
{
    int rc;
    if (f->spec_text) {
        cli_print_spec_error(cmd, spec_file, f->spec_key, f->spec_text, f->spec_pos);
        rc = cli_exit_code(s);
    } else if (f->usage && rule_message(f->rule)) {
        cli_msg(cmd, "%s", rule_message(f->rule));
        rc = CLI_EXIT_USAGE;
    } else if (f->usage) {
        /* the row column's rule: "FIELD: ..." names the option's field */
        cli_msg(cmd, "%s%s", f->fix ? "--fix: " : f->rule == GMM_MDL_RULE_ROW_COLUMN ? "--" : "",
                gmm_error_message());
        rc = CLI_EXIT_USAGE;
    } else {
        rc = cli_fail(cmd, s);
    }
    if (f->params)
        fputs(f->params, stderr);
    return rc;
}

/* Build the model of spec s with its reports printed through r: 0 and
 * *out, or the exit code after the failure's messages. */
static int build(const char *cmd, gmm_mdl_spec *s, report_ctx *r, const char *spec_file,
                 gmm_mdl **out)
{
    s->report = on_report;
    s->report_user = r;
    gmm_mdl_failure f;
    gmm_status st = gmm_mdl_build(s, out, &f);
    int rc = st != GMM_OK ? build_failed(cmd, st, &f, spec_file) : 0;
    gmm_mdl_failure_free(&f);
    return rc;
}

/* Split "I,J[,LEN]" into cols (pointers into buf, a copy of spec). */
static int split_edge_cols(const char *cmd, const char *spec, char *buf, const char *cols[3])
{
    char *p = strcpy(buf, spec);
    for (int k = 0; k < 3 && *p; k++) {
        size_t len = strcspn(p, ",");
        if (len == 0) {
            cli_msg(cmd, "--edge-cols: empty column name in '%s'", spec);
            return CLI_EXIT_USAGE;
        }
        cols[k] = p;
        p += len;
        if (*p == ',')
            *p++ = '\0';
    }
    if (*p || !cols[1]) {
        cli_msg(cmd, "--edge-cols: expected I,J or I,J,LEN, got '%s'", spec);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_model_load(const char *cmd, const cli_model_opts *o, gmm_mdl **out)
{
    *out = NULL;
    if (!o->spec.desc.data.file) {
        cli_msg(cmd, "missing DATA.csv (see '%s --help')", cmd);
        return CLI_EXIT_USAGE;
    }
    if (o->spec.desc.graph && o->spec.free_period) {
        cli_msg(cmd, "--x, --merge-tol and --free-period apply to state-space models, not "
                     "to --graph");
        return CLI_EXIT_USAGE;
    }
    if (o->spec.free_period && o->spec.desc.kernel) {
        cli_msg(cmd, "--free-period applies to the default kernel only");
        return CLI_EXIT_USAGE;
    }
    int rc = 0;
    report_ctx r = {cmd, o->quiet, o->verbose, 0, gmm_mdl_desc_names_no_latent(&o->spec.desc)};
    gmm_mdl_spec s = o->spec;
    char *cols = o->edge_cols ? gmm_malloc(strlen(o->edge_cols) + 1, 1) : NULL;
    if (o->edge_cols && !cols) {
        rc = cli_fail(cmd, gmm_error(GMM_ENOMEM, "out of memory"));
        goto done;
    }
    if (o->edge_cols && (rc = split_edge_cols(cmd, o->edge_cols, cols, s.desc.edge_cols)) != 0)
        goto done;
    s.fix = o->fix;
    s.nfix = o->nfix;
    s.verbose = o->verbose;
    rc = build(cmd, &s, &r, NULL, out);
done:
    gmm_free(cols);
    return rc;
}

/* Where a file rec (not "-") named by the model file model_path is: rec
 * itself when absolute (or model_path is NULL or "-"), else beside the
 * model file when readable there, else rec when readable from here (files
 * of earlier versions recorded relative names).  *out allocated, NULL when
 * neither is readable; -1 when out of memory, else 0. */
static int find_recorded(const char *model_path, const char *rec, char **out)
{
    *out = NULL;
    if (rec[0] == '/' || !model_path || !strcmp(model_path, "-"))
        return (*out = gmm_strdup(rec)) ? 0 : -1;
    const char *slash = strrchr(model_path, '/');
    size_t dl = slash ? (size_t)(slash - model_path) + 1 : 0;
    char *cand = gmm_malloc(dl + strlen(rec) + 1, 1);
    if (!cand)
        return -1;
    memcpy(cand, model_path, dl);
    strcpy(cand + dl, rec);
    if (access(cand, R_OK) == 0) {
        *out = cand;
        return 0;
    }
    gmm_free(cand);
    if (access(rec, R_OK) == 0 && !(*out = gmm_strdup(rec)))
        return -1;
    return 0;
}

/* An input named by a model file, where find_recorded finds it.  0, or an
 * exit code after a message naming what was looked for. */
static int resolve_path(const char *cmd, const char *model_path, const char *what,
                        const char *rec, char **out)
{
    *out = NULL;
    if (!strcmp(rec, "-")) {
        cli_msg(cmd, "%s: the model's %s came from standard input; give the file again, e.g. "
                     "'gmm-infer %s --model %s DATA.csv'",
                model_path ? model_path : "model", what, cmd, model_path ? model_path : "M.json");
        return CLI_EXIT_USAGE;
    }
    if (find_recorded(model_path, rec, out) != 0)
        return cli_fail(cmd, GMM_ENOMEM);
    if (!*out) {
        const char *slash = strrchr(model_path, '/');
        int dl = slash ? (int)(slash - model_path) + 1 : 0;
        cli_msg(cmd, "%s: the model's %s '%s' is not found (looked for %.*s%s and ./%s)",
                model_path, what, rec, dl, model_path, rec, rec);
        return CLI_EXIT_ERROR;
    }
    if (access(*out, R_OK) != 0) {
        cli_msg(cmd, "%s: the model's %s '%s' cannot be read: %s", model_path ? model_path : "model",
                what, *out, strerror(errno));
        gmm_free(*out);
        *out = NULL;
        return CLI_EXIT_ERROR;
    }
    return 0;
}

int cli_model_from_file(const char *cmd, const gmm_model *mf, const char *model_path,
                        const char *data, int verbose, int factor, gmm_mdl **out)
{
    int rc = 0;
    char *data_file = NULL, *graph_file = NULL;
    const char *mp = model_path && strcmp(model_path, "-") ? model_path : "<stdin>";
    int graph = mf->desc.precision != NULL;
    *out = NULL;
    if (!data &&
        (rc = resolve_path(cmd, model_path, "data file", mf->desc.data.file, &data_file)) != 0)
        goto done;
    if (graph && mf->desc.graph &&
        (rc = resolve_path(cmd, model_path, "edge list", mf->desc.graph, &graph_file)) != 0)
        goto done;
    report_ctx r = {cmd, 0, verbose, 1, 0};
    gmm_mdl_spec s;
    gmm_mdl_spec_init(&s);
    s.desc = mf->desc;
    s.desc.graph = graph_file;
    s.desc.data.file = data ? data : data_file;
    if (graph) {
        s.desc.merge_tol = 0.0;
        s.desc.data.x = NULL;
    } else {
        s.desc.data.node = NULL;
    }
    s.factor = factor;
    s.values = mf;
    s.values_name = mp;
    s.model_path = model_path && strcmp(model_path, "-") ? model_path : NULL;
    s.verbose = verbose;
    rc = build(cmd, &s, &r, mp, out);
    if (rc == 0 && mf->has_vi && (rc = cli_model_load_vi(cmd, *out, mf, model_path)) != 0) {
        gmm_mdl_free(*out);
        *out = NULL;
    }
done:
    gmm_free(data_file);
    gmm_free(graph_file);
    return rc;
}

/* The graph=PATH files of a formula's f() terms, as inputs ("the edge
 * list of f(NAME, MODEL)" + suffix).  A formula that does not parse has
 * none here: the build reports it. */
static void formula_inputs(cli_io *io, const char *formula, const char *suffix)
{
    gmm_formula *fm = NULL;
    if (!formula || gmm_formula_parse(formula, &fm) != GMM_OK)
        return;
    for (size_t t = 0; t < fm->nlatent; t++) {
        const gmm_formula_latent *l = &fm->latent[t];
        const char *g = gmm_formula_arg_find(l, "graph", NULL);
        char what[160];
        snprintf(what, sizeof what, "the edge list of f(%s, %s)%s", l->name,
                 l->quoted ? "..." : l->model, suffix);
        if (g && *g)
            cli_io_input(io, what, g);
    }
    gmm_formula_free(fm);
}

void cli_model_opts_inputs(cli_io *io, const cli_model_opts *o)
{
    cli_io_input(io, "the data file", o->spec.desc.data.file);
    cli_io_input(io, "the edge list", o->spec.desc.graph);
    formula_inputs(io, o->spec.desc.formula, "");
}

/* A file named by model file mf (read from model_path), as an input: where
 * resolve_path will find it. */
static void recorded_input(cli_io *io, const char *what, const char *model_path, const char *rec)
{
    if (!rec || !strcmp(rec, "-"))
        return;
    char *path = NULL;
    if (find_recorded(model_path, rec, &path) != 0)
        io->nomem = 1;
    cli_io_input(io, what, path);
    gmm_free(path);
}

void cli_model_file_inputs(cli_io *io, const gmm_model *mf, const char *model_path,
                           const char *data, const char *what)
{
    cli_io_input(io, what, model_path);
    if (data)
        cli_io_input(io, "the data file", data);
    else
        recorded_input(io, "the model's data file", model_path, mf->desc.data.file);
    if (mf->desc.precision)
        recorded_input(io, "the model's edge list", model_path, mf->desc.graph);
    formula_inputs(io, mf->desc.formula, " in the model");
    if (mf->has_vi)
        recorded_input(io, "the model's q file", model_path, mf->vi_file);
}

void cli_model_vi_inputs(cli_io *io, const char *opt, const char *path)
{
    gmm_model mi;
    gmm_model_init(&mi);
    char what[64], qwhat[64];
    snprintf(what, sizeof what, "the %s file", opt);
    snprintf(qwhat, sizeof qwhat, "the q file of %s", opt);
    cli_io_input(io, what, path);
    if (path && gmm_model_read(path, &mi) == GMM_OK && mi.has_vi)
        recorded_input(io, qwhat, path, mi.vi_file);
    gmm_model_free(&mi);
}

int cli_model_fit_check(const char *cmd, const gmm_mdl *m)
{
    gmm_status s = gmm_mdl_fit_check(m);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
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

int cli_model_open(const char *cmd, const cli_model_opts *o, const char *model_path,
                   gmm_model *mf, cli_io *io, gmm_mdl **out)
{
    int rc;
    *out = NULL;
    if (!model_path) {
        if (io) {
            cli_model_opts_inputs(io, o);
            if ((rc = cli_io_check(cmd, io)) != 0)
                return rc;
        }
        return cli_model_load(cmd, o, out);
    }
    if (o->given) {
        cli_msg(cmd, "--model takes the model from the file: give no model options with it");
        return CLI_EXIT_USAGE;
    }
    gmm_status s = gmm_model_read(model_path, mf);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if (io) {
        cli_model_file_inputs(io, mf, model_path, o->spec.desc.data.file, "the model file");
        if ((rc = cli_io_check(cmd, io)) != 0)
            return rc;
    }
    return cli_model_from_file(cmd, mf, model_path, o->spec.desc.data.file, o->verbose,
                               o->spec.factor, out);
}

int cli_model_vi_start(const char *cmd, gmm_mdl *m, gmm_vi *v, const gmm_model *src,
                       const char *src_path, const char **start)
{
    char *path = NULL;
    const char *sp = src_path && strcmp(src_path, "-") ? src_path : "<stdin>";
    int rc = src ? resolve_path(cmd, src_path, "variational parameters", src->vi_file, &path) : 0;
    if (rc != 0)
        return rc;
    gmm_status s = gmm_mdl_vi_start(m, v, src, path, sp, start);
    gmm_free(path);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

int cli_model_load_vi(const char *cmd, gmm_mdl *m, const gmm_model *mf, const char *model_path)
{
    char *path = NULL;
    const char *mp = model_path && strcmp(model_path, "-") ? model_path : "<stdin>";
    int rc = resolve_path(cmd, model_path, "variational parameters", mf->vi_file, &path);
    if (rc != 0)
        return rc;
    gmm_status s = gmm_mdl_load_vi(m, path, mf->vi_bandwidth, mp);
    if (s == GMM_EINVAL) {
        cli_msg(cmd, "%s", gmm_error_message());
        rc = CLI_EXIT_ERROR;
    } else if (s != GMM_OK) {
        cli_fail(cmd, s);
        rc = CLI_EXIT_ERROR;
    }
    gmm_free(path);
    return rc;
}

const char *cli_model_factorisation(const char *cmd, const gmm_mdl *m, int verbose)
{
    double bound;
    const char *f = gmm_mdl_factorisation(m, &bound);
    if (gmm_mdl_sqrt_declined(m))
        cli_msg(cmd, "warning: the likelihood is not log-concave, so the Laplace approximation "
                     "factorised the assembled precision where the square-root form was due "
                     "(a damped periodic, cosine or constant factor, or inputs close relative "
                     "to a lengthscale): the rounding bound there is %.2g of log-likelihood, "
                     "and gradients may be off by more",
                bound);
    if (verbose && bound > 0.0)
        cli_msg(cmd, "factorisation: %s (the Cholesky's rounding bound at these parameters: "
                     "%.2g of log-likelihood)",
                strcmp(f, "cholesky") ? "square-root form" : "Cholesky", bound);
    return f;
}

int cli_model_describe(const char *cmd, gmm_mdl *m, gmm_model *mf, char **scratch)
{
    gmm_status s = gmm_mdl_describe(m, mf, scratch);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

static int predict_progress(void *user, size_t done, size_t total)
{
    cli_msg((const char *)user, "predicted %zu of %zu inputs", done, total);
    return cli_stop_requested();
}

void cli_model_progress(gmm_mdl *m, const char *cmd)
{
    gmm_mdl_set_progress(m, predict_progress, (void *)cmd);
}

int cli_model_check_draws(const char *cmd, gmm_mdl *m, const char *const *paths,
                          size_t npath, gmm_draws *d)
{
    gmm_status st = gmm_mdl_draws_stan_sites(m, d);
    if (st == GMM_EINVAL) {
        cli_msg(cmd, "%s: %s", npath ? paths[0] : "<draws>", gmm_error_message());
        return CLI_EXIT_ERROR;
    }
    if (st != GMM_OK)
        return cli_fail(cmd, st);
    for (size_t i = 0; i < npath; i++) {
        gmm_mdl_draws_verdict v;
        gmm_status s = gmm_mdl_check_draws(m, paths[i], d, &v);
        if (s == GMM_EINVAL) {
            cli_msg(cmd, "%s", gmm_error_message());
            return CLI_EXIT_ERROR;
        }
        if (s != GMM_OK)
            return cli_fail(cmd, s);
        if (v == GMM_MDL_DRAWS_OTHER_FILE)
            cli_msg(cmd, "warning: %s: made from another model file than %s, with the "
                         "same likelihood, latent, data and parameters",
                    paths[i], gmm_mdl_model_path(m) ? gmm_mdl_model_path(m) : "this model");
        else if (v == GMM_MDL_DRAWS_UNCHECKED)
            cli_msg(cmd, "warning: %s: no sidecar %s.json, so that the draws come from this model "
                         "is not checked, only that their columns are its columns",
                    paths[i], strcmp(paths[i], "-") ? paths[i] : "<stdin>");
    }
    return 0;
}
