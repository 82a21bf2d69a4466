/* cli_vi.h -- the options of `gmm-infer vi` (cmd_vi.c), parsed and
 * checked in cli_vi_opts.c. */
#ifndef GMM_CLI_VI_H
#define GMM_CLI_VI_H

#include "cli_model.h"
#include "gmm/vi.h"

typedef struct {
    cli_model_opts model;
    gmm_vi_params par;
    int bw_given;              /* --bandwidth given: else a resumed q keeps its own */
    const char *model_path, *out, *init, *post;
    double level;              /* --level, NAN: not given */
    int quiet;
    int stop;                  /* end now with the exit code returned (--help) */
} cli_vi_args;

/* Parse and check the options alone (before anything is read or printed):
 * 0, or an exit code after the message (with a->stop, also 0: --help
 * printed).  Free a with cli_vi_args_free either way. */
int cli_vi_args_parse(const char *cmd, int argc, char **argv, cli_vi_args *a);
void cli_vi_args_free(cli_vi_args *a);

#endif
