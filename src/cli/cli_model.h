/* cli_model.h -- the options every model-reading subcommand shares, and the
 * one place the CLI turns them (or a model file) into a model description
 * (gmm_mdl_spec, model.h) and has the library build it: a latent model (a
 * state-space GP from --kernel, or a graph GMRF from --graph +
 * --precision) and a likelihood (--likelihood) joined with the data. */
#ifndef GMM_CLI_MODEL_H
#define GMM_CLI_MODEL_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "cli.h"
#include "gmm/draws.h"
#include "gmm/model.h"
#include "gmm/modelfile.h"

typedef struct {
    /* the model as the options describe it, filled as they are parsed:
     * spec.desc (DATA.csv positional, --formula, --kernel, --graph,
     * --precision, --x, --y, --node, --likelihood, --exposure, --trials,
     * --merge-tol), --noise, --intercept, --no-intercept, --no-center,
     * --free-period,
     * --strict-nodes, --factor; the rest of spec is set when the model is
     * built (cli_model_load) */
    gmm_mdl_spec spec;
    const char *edge_cols;  /* --edge-cols I,J[,LEN] (split when the model is built) */
    cli_opt_seen seen;      /* options seen (a single-valued one given twice: error);
                             * seen.repeatable: cli_model_repeatable, or a
                             * command's list that includes CLI_OPT_FIX */
    int quiet;              /* build without the data report and warnings (a
                             * second copy of a model, for another thread) */
    int verbose;            /* --verbose */
    const char **fix;       /* --fix NAME (repeatable) */
    size_t nfix;
    int given;              /* model options seen (all but --verbose): a
                             * command reading --model refuses them */
    int factor_given;       /* --factor seen: its band or sparse choice
                             * (spec.desc.factor) replaces a model file's */
} cli_model_opts;

enum {
    CLI_OPT_KERNEL = 1000,
    CLI_OPT_GRAPH,
    CLI_OPT_PRECISION,
    CLI_OPT_EDGE_COLS,
    CLI_OPT_X,
    CLI_OPT_Y,
    CLI_OPT_NODE,
    CLI_OPT_NOISE,
    CLI_OPT_NO_CENTER,
    CLI_OPT_STRICT_NODES,
    CLI_OPT_MERGE_TOL,
    CLI_OPT_FIX,
    CLI_OPT_FREE_PERIOD,
    CLI_OPT_EXPOSURE,
    CLI_OPT_LIKELIHOOD,
    CLI_OPT_INTERCEPT,
    CLI_OPT_NO_INTERCEPT,
    CLI_OPT_TRIALS,
    CLI_OPT_WEIGHTS,
    CLI_OPT_FORMULA,
    CLI_OPT_VERBOSE,
    CLI_OPT_FACTOR, /* after VERBOSE: a numerical choice, allowed with --model */
    CLI_OPT_NA,     /* how the data are read, allowed with --model too */
    CLI_OPT_FIRST_COMMAND /* commands number their own options from here */
};

/* The option codes above that may be given more than once: CLI_OPT_FIX,
 * 0-terminated (cli_opt_seen's repeatable). */
extern const int cli_model_repeatable[];

/* The long options above, for a command's getopt_long table. */
#define CLI_MODEL_LONGOPTS                                                                       \
    {"kernel", required_argument, NULL, CLI_OPT_KERNEL},                                        \
        {"formula", required_argument, NULL, CLI_OPT_FORMULA},                                  \
        {"graph", required_argument, NULL, CLI_OPT_GRAPH},                                      \
        {"precision", required_argument, NULL, CLI_OPT_PRECISION},                              \
        {"edge-cols", required_argument, NULL, CLI_OPT_EDGE_COLS},                              \
        {"x", required_argument, NULL, CLI_OPT_X}, {"y", required_argument, NULL, CLI_OPT_Y},   \
        {"node", required_argument, NULL, CLI_OPT_NODE},                                        \
        {"noise", required_argument, NULL, CLI_OPT_NOISE},                                      \
        {"no-center", no_argument, NULL, CLI_OPT_NO_CENTER},                                    \
        {"strict-nodes", no_argument, NULL, CLI_OPT_STRICT_NODES},                              \
        {"merge-tol", required_argument, NULL, CLI_OPT_MERGE_TOL},                              \
        {"fix", required_argument, NULL, CLI_OPT_FIX},                                          \
        {"free-period", no_argument, NULL, CLI_OPT_FREE_PERIOD},                                \
        {"exposure", required_argument, NULL, CLI_OPT_EXPOSURE},                                \
        {"likelihood", required_argument, NULL, CLI_OPT_LIKELIHOOD},                            \
        {"intercept", required_argument, NULL, CLI_OPT_INTERCEPT},                              \
        {"no-intercept", no_argument, NULL, CLI_OPT_NO_INTERCEPT},                              \
        {"trials", required_argument, NULL, CLI_OPT_TRIALS},                                    \
        {"weights", required_argument, NULL, CLI_OPT_WEIGHTS},                                  \
        {"na", required_argument, NULL, CLI_OPT_NA},                                            \
        {"verbose", no_argument, NULL, CLI_OPT_VERBOSE},                                        \
        {"factor", required_argument, NULL, CLI_OPT_FACTOR}

/* Print the help text for the options above (each command's --help), the
 * likelihood families listed from their table. */
void cli_model_print_help(FILE *f);

void cli_model_opts_init(cli_model_opts *o);
void cli_model_opts_free(cli_model_opts *o);
/* Handle option c (with optarg arg) if it is a model option: 1 handled, 0
 * not a model option, -1 a bad value (message printed). */
int cli_model_opt(cli_model_opts *o, const char *cmd, int c, const char *arg);

/* A model command's getopt_long (argc, argv, shortopts, longopts as
 * getopt_long takes them; the caller sets optind = 1 before the first call)
 * with what every model command does alike done here: model options (into
 * o), -h (usage_text, then the model options' help, on stdout) and unknown
 * options.  Returns the next option that is the command's own (optarg as
 * getopt_long leaves it), -1 after the last option, or CLI_MODEL_OPT_STOP
 * when the command must end now with exit code *rc (0 after --help, 2 on a
 * usage error, its message printed). */
#define CLI_MODEL_OPT_STOP (-2)
int cli_model_getopt(cli_model_opts *o, const char *cmd, int argc, char **argv,
                     const char *shortopts, const struct option *longopts,
                     const char *usage_text, int *rc);

/* What the build reports, on stderr as the command's messages. */
typedef struct {
    const char *cmd;
    int quiet, verbose, from_file;
    int default_kernel; /* say so after the data report (verbose) */
} cli_model_report;

/* Build the model of spec s with its reports printed through r (failures
 * in spec_file's keys when set: a model file): 0 and *out, or the exit code
 * after the failure's messages. */
int cli_model_build(const char *cmd, gmm_mdl_spec *s, cli_model_report *r, const char *spec_file,
                    gmm_mdl **out);

/* Read the data (and graph), build the model (model.h) from the options
 * and print what the build reports on stderr (the data summary, warnings,
 * with --verbose defaults and sizes).  Returns an exit code (0 on success,
 * with *out set; messages printed otherwise). */
int cli_model_load(const char *cmd, const cli_model_opts *o, gmm_mdl **out);
/* Rebuild a model from a model file (fit's output, read from model_path):
 * its spec, parameter values, data file and columns, and a VI result's q;
 * `data` (may be NULL) overrides the model's data file.  Recorded paths
 * are absolute; relative ones (older files) are looked for beside the
 * model file first.  Returns an exit code. */
int cli_model_from_file(const char *cmd, const gmm_model *mf, const char *model_path,
                        const char *data, int verbose, int factor, int storage,
                        gmm_mdl **out);
/* cli_model_from_file's storage when the command was given no --factor:
 * the model file's choice. */
#define CLI_MODEL_FILE_FACTOR (-1)
/* --factor's value: auto, band or sparse (how the precisions are stored
 * and factorised: *storage) and, unless storage_only, cholesky or
 * square-root (a band's factorisation: *ssm, gmm_ssm_factor; the others
 * set it to auto).  0, or -1 after the message. */
int cli_model_parse_factor(const char *cmd, const char *arg, int storage_only, int *ssm,
                           gmm_model_factor *storage);

/* gmm_mdl_fit_check, its message printed.  Returns an exit code. */
int cli_model_fit_check(const char *cmd, const gmm_mdl *m);

/* After getopt: take the optional positional DATA.csv from argv[optind..]
 * into o->data (an extra argument is a usage error).  Returns an exit code. */
int cli_model_positional(const char *cmd, int argc, char **argv, cli_model_opts *o);
/* The model a command works on: from `model_path` (fit's output; then no
 * model option may be given, and o->data, when set, overrides its data
 * file) or else from the options.  mf receives the file's contents (free
 * with gmm_model_free).  With io (may be NULL), the command's outputs
 * already listed there, the model's inputs are added to it
 * (cli_model_opts_inputs or cli_model_file_inputs) and cli_io_check runs
 * before anything is read but the model file.  Returns an exit code. */
int cli_model_open(const char *cmd, const cli_model_opts *o, const char *model_path,
                   gmm_model *mf, cli_io *io, gmm_mdl **out);

/* The files the options will read, as inputs of io: DATA.csv, --graph, a
 * formula's graph= files. */
void cli_model_opts_inputs(cli_io *io, const cli_model_opts *o);
/* The files of model file mf, read from model_path, as inputs of io (where
 * cli_model_from_file will look for them): model_path itself (as `what`,
 * e.g. "the model file"), its data file (or `data`, when given, which
 * replaces it), its edge list, its formula's graph= files, a vi result's
 * q file ("the model's q file"). */
void cli_model_file_inputs(cli_io *io, const gmm_model *mf, const char *model_path,
                           const char *data, const char *what);
/* A vi result read from path, option opt's value ("--init"), as inputs
 * of io: path ("the --init file") and its q file ("the q file of
 * --init"); nothing more when path cannot be read (its reader reports
 * that). */
void cli_model_vi_inputs(cli_io *io, const char *opt, const char *path);

/* q from a VI result's model file (its "variational" sidecar, found beside
 * the model file): allocated and attached.  Returns an exit code. */
int cli_model_load_vi(const char *cmd, gmm_mdl *m, const gmm_model *mf, const char *model_path);
/* gmm_mdl_vi_start from the vi result src read from src_path (NULL: from
 * the Laplace approximation), its q found as cli_model_load_vi finds it.
 * Returns an exit code. */
int cli_model_vi_start(const char *cmd, gmm_mdl *m, gmm_vi *v, const gmm_model *src,
                       const char *src_path, const char **start);
/* gmm_mdl_factorisation; with verbose, the choice and the Cholesky's
 * rounding bound are also reported on stderr, and always a warning when
 * the square-root form was declined (gmm_mdl_sqrt_declined). */
const char *cli_model_factorisation(const char *cmd, const gmm_mdl *m, int verbose);
/* gmm_mdl_describe; returns an exit code. */
int cli_model_describe(const char *cmd, gmm_mdl *m, gmm_model *mf, char **scratch);
/* Report the progress of long predictions on stderr (and let SIGINT
 * cancel them): for a terminal. */
void cli_model_progress(gmm_mdl *m, const char *cmd);
/* Draws d, read from paths[0..npath), against m (gmm_mdl_check_draws),
 * with a warning for draws of another model file or without a sidecar;
 * CmdStan's f.K on a graph renamed first (gmm_mdl_draws_stan_sites).
 * Returns an exit code. */
int cli_model_check_draws(const char *cmd, gmm_mdl *m, const char *const *paths,
                          size_t npath, gmm_draws *d);

#endif
