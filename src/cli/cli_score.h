/* cli_score.h -- the options of `gmm-infer score` (cmd_score.c), parsed
 * and checked in cli_score_opts.c. */
#ifndef GMM_CLI_SCORE_H
#define GMM_CLI_SCORE_H

#include <stddef.h>

typedef struct {
    const char *model_path, *rows, *test;
    const char **draws;        /* ndraws --draws files */
    size_t ndraws;
    int loo;
    int storage;               /* --factor (gmm_model_factor), or
                                * CLI_MODEL_FILE_FACTOR: the model's */
    int stop;                  /* end now with the exit code returned (--help) */
} cli_score_args;

/* Parse and check the options alone (before anything is read): 0, or an
 * exit code after the message (with a->stop, also 0: --help printed).
 * Free a with cli_score_args_free either way. */
int cli_score_args_parse(const char *cmd, int argc, char **argv, cli_score_args *a);
void cli_score_args_free(cli_score_args *a);

#endif
