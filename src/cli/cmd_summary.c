/* cmd_summary.c -- `gmm-infer summary DRAWS.csv...`: the posterior summary
 * of MCMC draws, one row per variable, with the columns and the
 * definitions of R's posterior::summarise_draws() (summary.h), over the
 * chains of every file merged by chain id (draws.h). */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/summary.h"

static const char *CMD = "summary";

static void usage(FILE *f)
{
    fputs("Usage: gmm-infer summary [OPTIONS] DRAWS.csv...\n"
          "\n"
          "Summarise MCMC draws as R's posterior::summarise_draws() does: print CSV\n"
          "  variable,mean,median,sd,mad,q5,q95,rhat,ess_bulk,ess_tail\n"
          "with one row per variable (lp__ included, other columns ending in __ skipped),\n"
          "rank-normalised split R-hat and bulk/tail effective sample sizes (Vehtari et\n"
          "al. 2021); NA where posterior gives NA (constant draws, a missing draw, chains\n"
          "too short).  Each file ('-' for stdin) has a header row with a .chain column\n"
          "(.iteration and .draw are ignored: a chain's draws are its rows in file\n"
          "order).  The chains of all files are merged; a chain id in two files, files\n"
          "with different variables and chains of different lengths are errors.\n"
          "\n"
          "Options:\n"
          "  -o, --output FILE   write to FILE (atomically) instead of stdout\n"
          "  -h, --help          show this help and exit\n"
          "\n"
          "Exit status: 0 success, 1 bad input or I/O error, 2 usage error,\n"
          "130/143 interrupted.\n",
          f);
}

int cmd_summary(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL;
    int c;

    optind = 1;
    opterr = 0;
    cli_opt_seen seen = {NULL, {0}, 0};
    while ((c = cli_getopt("summary", &seen, argc, argv, ":ho:", longopts)) != -1) {
        switch (c) {
        case CLI_OPT_REPEATED:
            return CLI_EXIT_USAGE;
        case 'o':
            out_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        case ':':
            return cli_usage_error("summary", "option '%s' needs an argument", argv[optind - 1]);
        default:
            return cli_usage_error("summary", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind == argc)
        return cli_usage_error("summary", "missing DRAWS.csv");
    size_t nstdin = 0;
    for (int i = optind; i < argc; i++)
        nstdin += argv[i][0] == '-' && !argv[i][1];
    if (nstdin > 1)
        return cli_usage_error("summary", "'-' (stdin) given %zu times", nstdin);

    /* -o never replaces a draws file or its sidecar */
    cli_io io;
    cli_io_init(&io);
    cli_io_output(&io, "-o", out_path, NULL);
    cli_io_draws(&io, (const char *const *)(argv + optind), (size_t)(argc - optind));
    int rc = cli_io_check(CMD, &io);
    cli_io_free(&io);
    if (rc)
        return rc;
    if (cli_install_signals() != 0)
        cli_msg(CMD, "warning: cannot catch SIGINT/SIGTERM");
    gmm_draws *d = NULL;
    gmm_outfile *of = NULL;
    gmm_status st = gmm_draws_read((const char *const *)(argv + optind), (size_t)(argc - optind),
                                   &d);
    if (st == GMM_OK)
        st = gmm_outfile_open(out_path, &of);
    if (st == GMM_OK)
        st = gmm_summary_write(gmm_outfile_stream(of), d, cli_stop_requested);
    if (st == GMM_OK) {
        st = gmm_outfile_commit(of);
        of = NULL;
    }
    gmm_outfile_abort(of);
    gmm_draws_free(d);
    return st == GMM_OK ? CLI_EXIT_OK : cli_fail(CMD, st);
}
