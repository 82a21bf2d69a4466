/* cli_common.c -- helpers the subcommands share: messages and exit codes,
 * spec errors with a caret, CSV fields and numbers, turning SIGINT/SIGTERM
 * into a clean cancellation, checking that stdout took everything, options
 * given twice, and outputs that would replace inputs. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/io.h"
#include "gmm/model.h"
#include "gmm/spec.h"

volatile sig_atomic_t cli_interrupted = 0;

int cli_exit_code(gmm_status s)
{
    switch (s) {
    case GMM_OK: return CLI_EXIT_OK;
    case GMM_ECHECK: return CLI_EXIT_CHECK;
    case GMM_EINCONCLUSIVE: return CLI_EXIT_INCONCLUSIVE;
    case GMM_ECANCEL: return cli_interrupt_exit_code();
    default: return CLI_EXIT_ERROR;
    }
}

void cli_msg(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (cmd)
        fprintf(stderr, "gmm-infer %s: ", cmd);
    else
        fputs("gmm-infer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_fail(const char *cmd, gmm_status s)
{
    const char *m = gmm_error_message();
    /* the library may name the operation itself ("fit: ..."): said once */
    size_t cl = cmd ? strlen(cmd) : 0;
    if (m && cl && !strncmp(m, cmd, cl) && m[cl] == ':' && m[cl + 1] == ' ')
        m += cl + 2;
    cli_msg(cmd, "%s", m && *m ? m : gmm_strerror(s));
    return cli_exit_code(s);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gmm-infer %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'gmm-infer %s --help'.\n", cmd);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

void cli_print_spec_error(const char *cmd, const char *file, const char *key, const char *text,
                          size_t pos)
{
    const char *m = gmm_error_message();
    if (!m || !*m)
        m = "malformed spec";
    if (file)
        cli_msg(cmd, "%s: \"%s\": %s", file, key, m);
    else
        cli_msg(cmd, "%s", m);
    if (!text)
        return;
    /* Two lines of at most 2 + strlen(text) + 1 bytes each, plus NUL. */
    size_t len = strlen(text), size = 2 * len + 8;
    char *buf = gmm_malloc(size, 1);
    if (!buf)
        return;
    gmm_spec_caret(text, pos, buf, size);
    fprintf(stderr, "%s\n", buf);
    gmm_free(buf);
}

int cli_close_stdout(const char *cmd)
{
    /* The stream's error flag may have been set by a write long ago; the
     * flush retries what is buffered and gives errno back. */
    int err = 0, failed = ferror(stdout);
    errno = 0;
    if (fflush(stdout) != 0) {
        err = errno;
        failed = 1;
    }
    /* A flush that failed earlier, inside the command, has lost its errno
     * (glibc discards the buffer then).  A write of no bytes asks the file
     * again without sending anything: /dev/full still says ENOSPC. */
    if (failed && !err && write(STDOUT_FILENO, "", 0) < 0)
        err = errno;
    errno = 0;
    /* Nothing is buffered now, so EBADF from fclose only says fd 1 was
     * never open: nothing was lost. */
    if (fclose(stdout) != 0 && errno != EBADF && !failed) {
        err = errno;
        failed = 1;
    }
    if (!failed)
        return CLI_EXIT_OK;
    if (err)
        cli_msg(cmd, "<stdout>: write error: %s", strerror(err));
    else
        cli_msg(cmd, "<stdout>: write error");
    return CLI_EXIT_ERROR;
}

static void on_signal(int sig) { cli_interrupted = sig; }

int cli_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: an interrupted read or write resumes instead of failing
     * with EINTR, so the command reaches its next progress callback and
     * cancels there.  SA_RESETHAND: a second Ctrl-C kills at once. */
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return -1;
    return 0;
}

int cli_stop_requested(void) { return cli_interrupted != 0; }

int cli_interrupt_exit_code(void)
{
    return cli_interrupted == SIGTERM ? CLI_EXIT_TERM : CLI_EXIT_INT;
}

/* Does option c take a value?  Its long form's has_arg, else its letter's
 * ':' in shortopts.  *name its long name (NULL: none). */
static int takes_value(int c, const char *shortopts, const struct option *longopts,
                       const char **name)
{
    *name = NULL;
    for (const struct option *l = longopts; l && l->name; l++)
        if (!l->flag && l->val == c) {
            *name = l->name;
            return l->has_arg != no_argument;
        }
    const char *p = c > 0 && c < 256 && c != ':' ? strchr(shortopts, c) : NULL;
    return p && p[1] == ':';
}

int cli_getopt(const char *cmd, cli_opt_seen *seen, int argc, char **argv,
               const char *shortopts, const struct option *longopts)
{
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    const char *name;
    if (c < 0 || c == '?' || c == ':' || !takes_value(c, shortopts, longopts, &name))
        return c;
    for (const int *r = seen->repeatable; r && *r; r++)
        if (*r == c)
            return c;
    for (size_t i = 0; i < seen->nseen; i++)
        if (seen->seen[i] == c) {
            int shrt = c > 0 && c < 256 && c != ':' && strchr(shortopts, c);
            if (name && shrt)
                cli_msg(cmd, "-%c/--%s given twice", c, name);
            else if (name)
                cli_msg(cmd, "--%s given twice", name);
            else
                cli_msg(cmd, "-%c given twice", c);
            return CLI_OPT_REPEATED;
        }
    if (seen->nseen < CLI_OPT_SEEN_MAX)
        seen->seen[seen->nseen++] = c;
    return c;
}

int cli_parse_size(const char *cmd, const char *opt, const char *arg, size_t min, size_t max,
                   size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (end == arg || *end || arg[0] == '-' || v < min || errno == ERANGE || v > SIZE_MAX ||
        (max && v > max)) {
        if (max)
            cli_msg(cmd, "--%s: '%s' is not an integer from %zu to %zu", opt, arg, min, max);
        else
            cli_msg(cmd, "--%s: '%s' is not an integer >= %zu", opt, arg, min);
        return CLI_EXIT_USAGE;
    }
    *out = (size_t)v;
    return 0;
}

int cli_parse_choice(const char *cmd, const char *opt, const char *arg, const char *a,
                     const char *b, int *second)
{
    if (strcmp(arg, a) && strcmp(arg, b)) {
        cli_msg(cmd, "--%s: '%s' is not %s or %s", opt, arg, a, b);
        return CLI_EXIT_USAGE;
    }
    *second = !strcmp(arg, b);
    return 0;
}

int cli_parse_level(const char *cmd, const char *arg, double *level)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end || !(v > 0.0 && v < 1.0)) {
        cli_msg(cmd, "--level: '%s' is not a probability in (0, 1)", arg);
        return CLI_EXIT_USAGE;
    }
    *level = v;
    return 0;
}

static void pred_header(FILE *f, const char *site, const char *r)
{
    fprintf(f, "%s,mean,var,lower,upper", site);
    if (r)
        fprintf(f, ",%s,%s_lower,%s_upper", r, r, r);
    fputs(",level\n", f);
}

static void pred_row(FILE *f, const char *label, double x, const gmm_summary_pred *p,
                     const char *resp, double level)
{
    if (label)
        gmm_csv_put_field(f, label);
    else
        gmm_csv_put_number(f, x);
    const double col[] = {p->mean, p->var, p->lower, p->upper};
    for (size_t k = 0; k < 4; k++) {
        fputc(',', f);
        gmm_csv_put_number(f, col[k]);
    }
    if (resp) {
        const double rc[] = {p->resp, p->resp_lower, p->resp_upper};
        for (size_t k = 0; k < 3; k++) {
            fputc(',', f);
            gmm_csv_put_number(f, rc[k]);
        }
    }
    /* 0.9, not 0.90000000000000002: the level as the user typed it */
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", level);
    if (strtod(buf, NULL) != level)
        snprintf(buf, sizeof buf, "%.17g", level);
    fprintf(f, ",%s\n", buf);
}

/* cli_pred_write's table, the site column from x, from the test rows' own
 * site cells (t), or from the model's sites. */
static int pred_write(const char *cmd, gmm_outset *set, const char *path, const gmm_mdl *m,
                      const double *x, const size_t *site, const gmm_mdl_test *t,
                      const gmm_summary_pred *pr, size_t n, double level)
{
    gmm_outfile *of = NULL;
    gmm_status s = set ? gmm_outset_open(set, path, &of) : gmm_outfile_open(path, &of);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    FILE *f = gmm_outfile_stream(of);
    const char *resp = gmm_mdl_response_name(m);
    pred_header(f, gmm_mdl_site_column(m), resp);
    for (size_t i = 0; i < n; i++) {
        char buf[64];
        const char *label = x ? NULL
                            : t ? gmm_mdl_test_label(m, t, i, buf)
                                : gmm_mdl_site_label(m, site ? site[i] : i, buf);
        pred_row(f, label, x ? x[i] : 0.0, &pr[i], resp, level);
    }
    if (!set && (s = gmm_outfile_commit(of)) != GMM_OK)
        return cli_fail(cmd, s);
    return 0;
}

int cli_pred_write(const char *cmd, gmm_outset *set, const char *path, const gmm_mdl *m,
                   const double *x, const size_t *site, const gmm_summary_pred *pr, size_t n,
                   double level)
{
    return pred_write(cmd, set, path, m, x, site, NULL, pr, n, level);
}

int cli_pred_write_rows(const char *cmd, gmm_outset *set, const char *path, const gmm_mdl *m,
                        const gmm_mdl_test *t, const gmm_summary_pred *pr, double level)
{
    return pred_write(cmd, set, path, m, gmm_mdl_test_inputs(m, t), NULL, t, pr, t->n, level);
}

int cli_pred_rows(const char *cmd, gmm_outset *set, const char *path, gmm_mdl *m,
                  const gmm_mdl_test *t, double level, int observed)
{
    gmm_summary_pred *pr = gmm_malloc(t->n ? t->n : 1, sizeof *pr);
    if (!pr)
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_status s = gmm_mdl_predict_test_summary(m, t, level, observed, pr);
    int rc = s != GMM_OK ? cli_fail(cmd, s) : cli_pred_write_rows(cmd, set, path, m, t, pr, level);
    gmm_free(pr);
    return rc;
}

int cli_pred_normal(const char *cmd, gmm_outset *set, const char *path, gmm_mdl *m,
                    const double *xq, size_t nq, double level, int observed)
{
    gmm_summary_pred *pr = gmm_malloc(nq ? nq : 1, sizeof *pr);
    if (!pr)
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_status s = gmm_mdl_predict_summary(m, xq, nq, level, observed, pr);
    int rc = s != GMM_OK ? cli_fail(cmd, s) : cli_pred_write(cmd, set, path, m, xq, NULL, pr, nq, level);
    gmm_free(pr);
    return rc;
}

int cli_parse_nonneg(const char *cmd, const char *opt, const char *arg, double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end || !(v >= 0.0) || !isfinite(v)) {
        cli_msg(cmd, "--%s: '%s' is not a non-negative number", opt, arg);
        return CLI_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

/* ---- outputs that would replace inputs (cli.h) ------------------------------- */

void cli_io_init(cli_io *io) { memset(io, 0, sizeof *io); }

void cli_io_free(cli_io *io)
{
    for (size_t i = 0; i < io->nin; i++) {
        gmm_free(io->in[i].what);
        gmm_free(io->in[i].path);
    }
    for (size_t i = 0; i < io->nout; i++) {
        gmm_free(io->out[i].opt);
        gmm_free(io->out[i].arg);
        gmm_free(io->out[i].path);
    }
    gmm_free(io->in);
    gmm_free(io->out);
    cli_io_init(io);
}

void cli_io_input(cli_io *io, const char *what, const char *path)
{
    if (!path || !strcmp(path, "-"))
        return;
    struct cli_io_in *in = gmm_realloc(io->in, io->nin + 1, sizeof *in);
    if (!in) {
        io->nomem = 1;
        return;
    }
    io->in = in;
    in += io->nin;
    in->what = gmm_strdup(what);
    in->path = gmm_strdup(path);
    if (!in->what || !in->path) {
        gmm_free(in->what);
        gmm_free(in->path);
        io->nomem = 1;
        return;
    }
    io->nin++;
}

void cli_io_output(cli_io *io, const char *opt, const char *arg, const char *path)
{
    if (!arg || !strcmp(arg, "-"))
        return;
    struct cli_io_out *out = gmm_realloc(io->out, io->nout + 1, sizeof *out);
    if (!out) {
        io->nomem = 1;
        return;
    }
    io->out = out;
    out += io->nout;
    out->opt = gmm_strdup(opt);
    out->arg = gmm_strdup(arg);
    out->path = path ? gmm_strdup(path) : NULL;
    if (!out->opt || !out->arg || (path && !out->path)) {
        gmm_free(out->opt);
        gmm_free(out->arg);
        gmm_free(out->path);
        io->nomem = 1;
        return;
    }
    io->nout++;
}

void cli_io_draws(cli_io *io, const char *const *paths, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *side = NULL;
        cli_io_input(io, "the draws file", paths[i]);
        /* a sidecar that cannot be opened is the reader's error to report */
        if (gmm_draws_sidecar(paths[i], &side) == GMM_OK && side)
            cli_io_input(io, "the draws' sidecar", side);
        gmm_free(side);
    }
}

/* "-o m.json", or "m.q.csv (written with -o m.json)", into buf. */
static const char *out_name(const struct cli_io_out *o, char *buf, size_t size)
{
    if (o->path)
        snprintf(buf, size, "%s (written with %s %s)", o->path, o->opt, o->arg);
    else
        snprintf(buf, size, "%s %s", o->opt, o->arg);
    return buf;
}

int cli_io_check(const char *cmd, const cli_io *io)
{
    if (io->nomem)
        return cli_fail(cmd, gmm_error(GMM_ENOMEM, "out of memory"));
    char a[2 * PATH_MAX], b[2 * PATH_MAX];
    for (size_t i = 0; i < io->nout; i++) {
        const struct cli_io_out *o = &io->out[i];
        const char *op = o->path ? o->path : o->arg;
        for (size_t k = 0; k < io->nin; k++)
            if (gmm_path_same_file(op, io->in[k].path)) {
                cli_msg(cmd, "%s is %s %s (an output never replaces an input)",
                        out_name(o, a, sizeof a), io->in[k].what, io->in[k].path);
                return CLI_EXIT_USAGE;
            }
        /* two outputs written in place (-o /dev/null --summary /dev/null)
         * replace nothing */
        int in_place = 0;
        if (gmm_outfile_check_kind(op, &in_place) == GMM_OK && in_place)
            continue;
        for (size_t k = 0; k < i; k++) {
            const struct cli_io_out *p = &io->out[k];
            if (gmm_path_same_file(op, p->path ? p->path : p->arg)) {
                cli_msg(cmd, "%s and %s are the same file (each output needs a file of its own)",
                        out_name(o, a, sizeof a), out_name(p, b, sizeof b));
                return CLI_EXIT_USAGE;
            }
        }
    }
    return 0;
}
