/* cli.h -- what the subcommands share: the command table, messages on
 * stderr, and the one mapping from gmm_status to an exit code.
 * Only src/cli/ prints or exits. */
#ifndef GMM_CLI_H
#define GMM_CLI_H

#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "gmm/draws.h"
#include "gmm/likelihood.h"
#include "gmm/model.h"
#include "gmm/status.h"
#include "gmm/summary.h"

/* Exit codes (also in the man page): */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_ERROR = 1,  /* bad input, numerical failure, I/O */
    CLI_EXIT_USAGE = 2,  /* bad command line */
    CLI_EXIT_CHECK = 3,  /* a check failed (gradcheck) */
    CLI_EXIT_INCONCLUSIVE = 4, /* a check could not decide (gradcheck) */
    CLI_EXIT_INT = 130,  /* interrupted (SIGINT) */
    CLI_EXIT_TERM = 143  /* terminated (SIGTERM) */
};

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is "gmm-infer NAME" */
    const char *summary;
} cli_command;

/* The table, in src/cli/main.c. */
extern const cli_command cli_commands[];

/* The exit code for a library status: the one place this mapping lives. */
int cli_exit_code(gmm_status s);

/* "gmm-infer CMD: message\n" on stderr. */
void cli_msg(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Print the library's last error for cmd and return cli_exit_code(s). */
int cli_fail(const char *cmd, gmm_status s);

/* ---- cli_common.c ---------------------------------------------------- */

/* Report a spec syntax error: "gmm-infer CMD: <last library error>" (a
 * spec read from a model file: "gmm-infer CMD: FILE: \"KEY\": <error>") and
 * then the spec with a caret under offset pos (gmm_spec_caret), all on
 * stderr.  Call right after gmm_spec_parse (or a model-layer check) failed,
 * with pos = gmm_error_index().  file NULL: a spec of the command line. */
void cli_print_spec_error(const char *cmd, const char *file, const char *key, const char *text,
                          size_t pos);

/* Flush and close stdout and report whether everything written to it
 * arrived: 0, or "gmm-infer CMD: <stdout>: write error: REASON" on stderr
 * (REASON from errno: "No space left on device" for > /dev/full) and
 * CLI_EXIT_ERROR.  A closed stdout (>&-) that nothing was written to is
 * not an error.  main() calls it after every command, so no command can
 * exit 0 with its output lost; after it, stdout is closed. */
int cli_close_stdout(const char *cmd);

/* A usage error: "gmm-infer CMD: message" and a pointer to CMD's --help
 * on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Option --OPT's value ARG as an integer in [min, max] (max 0: any size_t)
 * into *out: 0, or CLI_EXIT_USAGE after "--OPT: 'ARG' is not an integer
 * from MIN to MAX". */
/* Option --OPT's value ARG as one of two words A and B: *second = 0 for A,
 * 1 for B, and 0; or CLI_EXIT_USAGE after "--OPT: 'ARG' is not A or B". */
int cli_parse_choice(const char *cmd, const char *opt, const char *arg, const char *a,
                     const char *b, int *second);
int cli_parse_size(const char *cmd, const char *opt, const char *arg, size_t min, size_t max,
                   size_t *out);

/* Options given twice.  A single-valued option (one that takes a value)
 * given twice is a usage error, never "the last one wins": the first
 * thing a user who repeats one expects is not known.  Flags (no value) may
 * repeat (they say the same thing again), and so may the options a command
 * lists in `repeatable` because they accumulate (--fix, --draws, --prior).
 * A command's getopt loop calls cli_getopt where it would call
 * getopt_long, with a cli_opt_seen that starts zeroed but for repeatable
 * (a 0-terminated list of option codes, or NULL). */
#define CLI_OPT_SEEN_MAX 64
typedef struct {
    const int *repeatable;
    int seen[CLI_OPT_SEEN_MAX]; /* codes of single-valued options seen */
    size_t nseen;
} cli_opt_seen;
/* getopt_long(argc, argv, shortopts, longopts, NULL), and then, for a
 * single-valued option seen before: "gmm-infer CMD: --NAME given twice"
 * ("-o/--output given twice" for one with a short form) on stderr and
 * CLI_OPT_REPEATED, on which the command exits with CLI_EXIT_USAGE. */
#define CLI_OPT_REPEATED (-3)
int cli_getopt(const char *cmd, cli_opt_seen *seen, int argc, char **argv,
               const char *shortopts, const struct option *longopts);

/* ---- cli_io.c -------------------------------------------------------- */

/* Outputs that would replace inputs.  A command lists every file it will
 * read (cli_io_input: data files, the model file and the files it names,
 * edge lists, draws and their sidecars, --at, --init and q files) and every
 * file it will write (cli_io_output: -o and the other options' files, the
 * companions written beside them, cmdstan chain files, .partial names),
 * then calls cli_io_check before the work starts: an output that is one
 * of the inputs (gmm_path_same_file: the same file through symbolic and
 * hard links, a FIFO or device too) or another output is a usage error.
 * "-" and NULL (stdin, stdout) are never listed; an output that does not
 * exist yet cannot be an input.  Strings are copied; out of memory is
 * remembered and reported by cli_io_check. */
typedef struct {
    struct cli_io_in {
        char *what, *path; /* "the model file", "m.json" */
    } *in;
    struct cli_io_out {
        char *opt, *arg, *path; /* "-o", "d.csv", "d.csv.json" (path NULL: arg) */
    } *out;
    size_t nin, nout;
    int nomem;
} cli_io;
void cli_io_init(cli_io *io);
void cli_io_free(cli_io *io);
/* An input: `what` names its role ("the data file"); path NULL or "-": none. */
void cli_io_input(cli_io *io, const char *what, const char *path);
/* An output: the file `path` written because of option `opt` with value
 * `arg` (path NULL: arg itself, else a companion such as ARG.json).
 * arg NULL or "-": none. */
void cli_io_output(cli_io *io, const char *opt, const char *arg, const char *path);
/* 0; or, for the first output that is an input, "gmm-infer CMD: -o m.json
 * is the model file m.json (an output never replaces an input)" (a
 * companion: "d.csv.json (written with -o d.csv) is ...") and
 * CLI_EXIT_USAGE; for two outputs that are one file (but for one written
 * in place, such as /dev/null, which none replaces), "... and ... are the
 * same file (each output needs a file of its own)" and CLI_EXIT_USAGE;
 * CLI_EXIT_ERROR when a list ran out of memory. */
int cli_io_check(const char *cmd, const cli_io *io);
/* The draws files paths[0..n) and their sidecars (gmm_draws_sidecar), as
 * inputs. */
void cli_io_draws(cli_io *io, const char *const *paths, size_t n);
/* path + suffix ("m.json" + ".partial"), allocated; NULL when out of
 * memory. */
char *cli_path_suffix(const char *path, const char *suffix);

/* --level's default: the probability of every printed interval. */
#define CLI_DEFAULT_LEVEL 0.9

/* Option --level's value ARG, a probability in (0, 1), into *level: 0, or
 * CLI_EXIT_USAGE after "--level: 'ARG' is not a probability in (0, 1)". */
int cli_parse_level(const char *cmd, const char *arg, double *level);

/* ---- cli_pred.c ------------------------------------------------------ */

/* The prediction table of model m (predict, vi --posterior) to path
 * (stdout for NULL or "-"), written only when complete -- committed on its
 * own (set NULL), or opened in set (io.h: gmm_outset) for the caller to
 * commit with its other outputs: the header
 *   SITE,mean,var,lower,upper[,R,R_lower,R_upper],level
 * with SITE gmm_mdl_site_column's and R gmm_mdl_response_name's ("rate",
 * "prob", or NULL: no such columns), then one row per prediction pr[i]: at
 * the new input x[i], or else (x NULL) at the site's label, site[i] (site
 * NULL: site i), then pr[i]'s fields and the level (shortest exact form).
 * 0, or the exit code after the message. */
struct gmm_mdl;
struct gmm_outset;
int cli_pred_write(const char *cmd, struct gmm_outset *set, const char *path,
                   const struct gmm_mdl *m, const double *x, const size_t *site,
                   const gmm_summary_pred *pr, size_t n, double level);
/* The predictive summaries of model m (gmm_mdl_predict_summary: at the nq
 * new inputs xq, or xq NULL at its nq = gmm_mdl_nsites sites) as that
 * table.  0, or the exit code after the message. */
int cli_pred_normal(const char *cmd, struct gmm_outset *set, const char *path,
                    struct gmm_mdl *m, const double *xq, size_t nq, double level, int observed);
/* The same at the rows of t (gmm_mdl_predict_test_summary), labelled by
 * their input or by their own site cell (a node, or a level of an iid term
 * the data do not have). */
int cli_pred_rows(const char *cmd, struct gmm_outset *set, const char *path, struct gmm_mdl *m,
                  const gmm_mdl_test *t, double level, int observed);
/* predict --re none: the fixed effects alone (gmm_mdl_predict_fixed_summary)
 * at the rows of t, or (t NULL) at the nq inputs xq or, xq NULL, at the
 * model's nq sites, labelled as the two above. */
int cli_pred_fixed(const char *cmd, const char *path, struct gmm_mdl *m, const gmm_mdl_test *t,
                   const double *xq, size_t nq, double level, int observed);
/* The table of summaries pr[0..t->n) at the rows of t, labelled so. */
int cli_pred_write_rows(const char *cmd, struct gmm_outset *set, const char *path,
                        const struct gmm_mdl *m, const gmm_mdl_test *t,
                        const gmm_summary_pred *pr, double level);
/* Option --OPT's value ARG, a finite number >= 0, into *out: 0, or
 * CLI_EXIT_USAGE after "--OPT: 'ARG' is not a non-negative number". */
int cli_parse_nonneg(const char *cmd, const char *opt, const char *arg, double *out);

/* 0, or the number of the SIGINT/SIGTERM received since
 * cli_install_signals().  Long commands return nonzero from their progress
 * callback when it is set (cli_stop_requested()), the library returns
 * GMM_ECANCEL, and cli_exit_code maps that to 130 (SIGINT) or 143
 * (SIGTERM). */
extern volatile sig_atomic_t cli_interrupted;
/* Catch SIGINT and SIGTERM into cli_interrupted (once: a second signal of
 * the same kind gets the default action, so a stuck command can still be
 * killed; interrupted system calls restart).  0, or -1 with errno. */
int cli_install_signals(void);
/* Nonzero once a signal has arrived: what a progress callback returns. */
int cli_stop_requested(void);
/* 143 after SIGTERM, else 130. */
int cli_interrupt_exit_code(void);

/* Subcommands (one file each). */
int cmd_version(int argc, char **argv);
int cmd_order(int argc, char **argv);
int cmd_loglik(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_gradcheck(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_loo(int argc, char **argv);
int cmd_hmc(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_vi(int argc, char **argv);



#endif
