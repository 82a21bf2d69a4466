/* cli_hmc.h -- the parts of `gmm-infer hmc` (cmd_hmc.c): its options
 * (cli_hmc_opts.c), the options that need the model (cli_hmc_setup.c), the
 * checks of its files before the run and of its chains after
 * (cli_hmc_check.c), and what it writes: the draws (csv, or CmdStan's CSV
 * per chain), FILE.json beside them, the summary (cli_hmc.c).  The chains
 * themselves are the library's (gmm/hmc_chains.h). */
#ifndef GMM_CLI_HMC_H
#define GMM_CLI_HMC_H

#include <stddef.h>
#include <stdint.h>

#include "cli_model.h"
#include "gmm/hmc_chains.h"

/* ---- cli_hmc_opts.c ---------------------------------------------------- */

/* hmc's command line: the model options, the run's parameters and the
 * files. */
typedef struct {
    cli_model_opts model;
    gmm_hmc_run_params rp;     /* from the options; the model's parts later */
    const char *model_path, *out, *summary, *subset, *init, *metric;
    const char **prior;        /* nprior --prior values */
    size_t nprior, nthread;
    int quiet, sample_hyper, cmdstan, target_given, mh_given;
    int stop;                  /* end now with the exit code returned (--help) */
} cli_hmc_args;

/* Parse and check the options alone (before anything is read or printed):
 * 0, or an exit code after the message (with a->stop, also 0: --help
 * printed).  Free a with cli_hmc_args_free either way. */
int cli_hmc_args_parse(const char *cmd, int argc, char **argv, cli_hmc_args *a);
void cli_hmc_args_free(cli_hmc_args *a);

/* ---- cli_hmc.c, cli_hmc_check.c ----------------------------------------- */

typedef struct {
    const gmm_hmc_run_params *rp; /* the run: settings, sampled, priors, keep */
    gmm_mdl *model;          /* the first thread's: header names, "origin" */
    int cmdstan;               /* --format cmdstan */
    const char *out;           /* -o (NULL or "-": stdout) */
    const char *summary;       /* --summary, or NULL */
    const char *model_path, *data;
    int quiet;
} cli_hmc_out;

/* In cli_hmc_check.c: every file the run will write, checked before the work (that it can be
 * written; and listed in io, for cli_io_check against the inputs); 0 or an
 * exit code. */
int cli_hmc_check_outputs(const char *cmd, const cli_hmc_out *w, cli_io *io);

/* The draws, FILE.json and the summary of a finished or cancelled run (ch);
 * messages on stderr; 0 or an exit code (the interrupt's after a cancel). */
int cli_hmc_write(const char *cmd, const cli_hmc_out *w, const gmm_hmc_chains *ch);

/* CmdStan diagnose's warnings on stderr, each with what to try, whatever
 * --quiet says: tree-depth saturation and E-BFMI per chain, divergences
 * in all.  In cli_hmc_check.c.  0 or an exit code. */
int cli_hmc_diagnose(const char *cmd, const cli_hmc_out *w, const gmm_hmc_chains *ch);

/* ---- cli_hmc_setup.c ---------------------------------------------------- */

/* --latent-subset S into a mask of the model's f sites; 0 or an exit code. */
int cli_hmc_parse_subset(const char *cmd, gmm_mdl *m, const char *spec, unsigned char **keep);

/* The sampled parameters and their priors: the library's defaults, then
 * --prior NAME=lognormal(MU,SIGMA) / logitnormal / atanhnormal / normal(MU,SIGMA)
 * (args: the kind the parameter's scale takes, problem.h); printed
 * unless quiet; 0 or an exit code. */
int cli_hmc_priors(const char *cmd, gmm_mdl *m, const char **args, size_t nargs, int **sampled,
                   gmm_prior **priors, int quiet);

/* --init FILE: q's mean of a vi result (n latents, allocated), where the
 * chains start (jittered); 0 or an exit code. */
int cli_hmc_init_point(const char *cmd, gmm_mdl *m, const char *init, double **x0);

/* In cli_hmc_opts.c: --metric ARG (NULL: auto) against the other
 * options, before anything is read or printed: laplace, prior or auto, and
 * not laplace with --sample-hyper.  0 or CLI_EXIT_USAGE after the
 * message. */
int cli_hmc_metric_check(const char *cmd, const char *arg, int sample_hyper);
/* --metric ARG (NULL: auto) into *metric: laplace, prior, or auto -- the
 * prior's with --sample-hyper, else laplace when the data's information
 * (gmm_mdl_hmc_metric_auto at the model's values) exceeds
 * GMM_METRIC_AUTO_INFO (prior when the Laplace fit fails); the choice
 * reported unless quiet; laplace with --sample-hyper refused.  0 or an
 * exit code. */
int cli_hmc_metric(const char *cmd, gmm_mdl *m, const char *arg, int sample_hyper, int quiet,
                   gmm_metric *metric);

#endif
