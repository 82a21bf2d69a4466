/* main.c -- the gmm-infer entry point: top-level options and the subcommand
 * table (usage is printed from the table, so it cannot drift). */
#include <gsl/gsl_errno.h>
#include <locale.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gmm/version.h"

const cli_command cli_commands[] = {
    {"loglik", cmd_loglik, "log marginal likelihood and its gradient (JSON)"},
    {"fit", cmd_fit, "fit the parameters by maximum marginal likelihood (L-BFGS)"},
    {"predict", cmd_predict, "posterior mean and interval at a level (CSV)"},
    {"gradcheck", cmd_gradcheck, "check the gradient against finite differences"},
    {"hmc", cmd_hmc, "posterior draws of the latent field by whitened NUTS (CSV)"},
    {"vi", cmd_vi, "variational inference with a banded precision factor (JSON model)"},
    {"score", cmd_score, "log predictive density of held-out outcomes (JSON)"},
    {"summary", cmd_summary, "posterior summary of MCMC draws files: R-hat, bulk/tail ESS (CSV)"},
    {"loo", cmd_loo, "PSIS-LOO and WAIC from hmc --log-lik draws (JSON)"},
    {"order", cmd_order, "reverse Cuthill-McKee ordering of a graph: bandwidth, profile"},
    {"version", cmd_version, "print the version and exit"},
    {NULL, NULL, NULL},
};

int cmd_version(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("Usage: gmm-infer version\nPrint the version and exit.\n");
        return CLI_EXIT_OK;
    }
    if (argc > 1) {
        cli_msg("version", "unexpected argument '%s'", argv[1]);
        return CLI_EXIT_USAGE;
    }
    printf("gmm-infer %s\n", GMM_VERSION);
    return CLI_EXIT_OK;
}

static void usage(FILE *f)
{
    fputs("Usage: gmm-infer [--help] [--version] COMMAND [ARGS...]\n\n"
          "Inference in Gaussian Markov models with banded precision matrices.\n\n"
          "Commands:\n",
          f);
    for (const cli_command *c = cli_commands; c->name; c++)
        fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fputs("\nRun 'gmm-infer COMMAND --help' for a command's options; see gmm-infer(1).\n", f);
}

/* Run command c with argv[0] = "gmm-infer NAME": getopt prefixes its own
 * messages ("unrecognized option") with argv[0], so they read as every
 * other message of the command does. */
static int run_command(const cli_command *c, int argc, char **argv)
{
    static char name[64];
    snprintf(name, sizeof name, "gmm-infer %s", c->name);
    argv[0] = name;
    return c->run(argc, argv);
}

/* Run the command line; main() then checks stdout. */
static int run(int argc, char **argv, const char **cmd_name)
{
    *cmd_name = NULL;
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") && argc == 3) {
        /* gmm-infer help CMD = gmm-infer CMD --help */
        for (const cli_command *c = cli_commands; c->name; c++)
            if (!strcmp(argv[2], c->name)) {
                char *hargv[] = {NULL, (char *)"--help", NULL};
                *cmd_name = c->name;
                return run_command(c, 2, hargv);
            }
        cli_msg(NULL, "help: unknown command '%s'", argv[2]);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        if (argc > 2 && strcmp(cmd, "help")) {
            cli_msg(NULL, "unexpected argument '%s'", argv[2]);
            return CLI_EXIT_USAGE;
        }
        if (argc > 3) {
            cli_msg(NULL, "help takes one command name");
            return CLI_EXIT_USAGE;
        }
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        *cmd_name = "version";
        return cmd_version(argc - 1, argv + 1);
    }
    for (const cli_command *c = cli_commands; c->name; c++)
        if (!strcmp(cmd, c->name)) {
            *cmd_name = c->name;
            return run_command(c, argc - 1, argv + 1);
        }
    cli_msg(NULL, "unknown command '%s'", cmd);
    usage(stderr);
    return CLI_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* Numbers are read and written in the C locale whatever the user's. */
    setlocale(LC_NUMERIC, "C");
    /* GSL's default handler aborts; the library checks every GSL status. */
    gsl_set_error_handler_off();
    /* Freed memory stays with the process for the next evaluation's
     * arrays: glibc returns the heap's free top past 128 KB and unmaps
     * every block it mapped (from 32 MB, a limit mallopt cannot raise: a
     * lattice's factor values), and every first touch of fresh pages costs
     * a fault: 0.3 s of a 300 x 300 lattice loglik's 2 s, whose
     * factorisations and selected inverses allocate and free their
     * workspace per call.  So the heap keeps its free top up to 1 GB and
     * nothing is mapped apart (M_MMAP_MAX 0: 5500 -> 2300 faults there).
     * The peak barely moves (max RSS 337 MB against 335 there).  The heap
     * grows by 64 MB at a time, untouched until used, so that the library
     * can advise the growth huge pages before anything touches it
     * (alloc.c, HUGE PAGES). */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TOP_PAD, 64 << 20);

    const char *cmd = NULL;
    int rc = run(argc, argv, &cmd);
    /* Output that never arrived is a failure whatever the command thought:
     * success (0) and a failed or undecided check (3, 4, whose report is
     * the output) become 1.  After another failure the command has said what went wrong; a
     * lost stdout adds nothing to that. */
    if (rc == CLI_EXIT_OK || rc == CLI_EXIT_CHECK || rc == CLI_EXIT_INCONCLUSIVE) {
        if (cli_close_stdout(cmd) != CLI_EXIT_OK)
            rc = CLI_EXIT_ERROR;
    } else {
        fclose(stdout);
    }
    return rc;
}
