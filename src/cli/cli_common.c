/* cli_common.c -- helpers the subcommands share: messages and exit codes,
 * spec errors with a caret, turning SIGINT/SIGTERM into a clean
 * cancellation, checking that stdout took everything, options given twice
 * and option values.  Prediction tables are cli_pred.c's, outputs that
 * would replace inputs cli_io.c's. */
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
