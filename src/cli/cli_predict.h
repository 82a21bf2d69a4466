/* cli_predict.h -- the options of `gmm-infer predict` (cmd_predict.c),
 * parsed and checked in cli_predict_opts.c. */
#ifndef GMM_CLI_PREDICT_H
#define GMM_CLI_PREDICT_H

#include <stddef.h>

#include "gmm/model.h"

typedef struct {
    const char *model_path, *data, *at, *atcol, *grid, *out;
    const char **draws;        /* ndraws --draws files */
    size_t ndraws;
    int observed, verbose, terms;
    double level;
    gmm_mdl_terms_kept kept;   /* --re */
    int storage;               /* --factor (gmm_model_factor), or
                                * CLI_MODEL_FILE_FACTOR: the model's */
    int stop;                  /* end now with the exit code returned (--help) */
} cli_predict_args;

/* Parse and check the options alone (before anything is read): 0, or an
 * exit code after the message (with a->stop, also 0: --help printed).
 * Free a with cli_predict_args_free either way. */
int cli_predict_args_parse(const char *cmd, int argc, char **argv, cli_predict_args *a);
void cli_predict_args_free(cli_predict_args *a);

/* --grid FROM:TO:STEP into nq points *xq (allocated).  0 or an exit code
 * after the message. */
int cli_predict_grid(const char *cmd, const char *arg, double **xq, size_t *nq);
/* --at PATH's inputs: column col, else the model's x column model_x when
 * the file has it, else the first, into *xq (allocated, nq).  0 or an exit
 * code after the message. */
int cli_predict_read_at(const char *cmd, const char *path, const char *col, const char *model_x,
                        double **xq, size_t *nq);

#endif
