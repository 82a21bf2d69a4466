/* draws.h -- MCMC draws read from one or more CSV files into chains x
 * iterations per variable, the layout summary.h takes.
 *
 * A draws file is what `posterior::as_draws_df()` accepts and what a
 * sampler writes (CmdStanR's draws_df, gmm-infer's samplers): a header row
 *
 *   .chain,.iteration,.draw,lp__,accept_stat__,stepsize__,...,mu,f[1],...
 *
 * then one row per draw.  Columns:
 *   .chain       required; a positive integer chain id;
 *   .iteration, .draw   optional and ignored: as posterior does, a chain's
 *                draws are taken in the order of its rows;
 *   NAME__       sampler diagnostics (accept_stat__, treedepth__, ...):
 *                skipped, except lp__, which is a variable as in posterior;
 *   anything else   a variable, in the first file's column order.
 * Cells are numbers or missing (empty, NA, NaN: kept as NAN, so a summary
 * of that variable is NA as in posterior).
 *
 * Several files merge by chain: the chains of every file, each chain whole
 * in one file (a chain id in two files, or a file given twice, is an error
 * naming both), ordered by chain id -- so the same chains split over
 * several files give the same draws, bit for bit.  Every file must hold
 * the same variables (in any column order).  All chains must have the same
 * number of draws: posterior cannot form a draws array otherwise, and
 * neither truncates nor pads, so this is an error too, naming the shortest
 * and longest chains.
 */
#ifndef GMM_DRAWS_H
#define GMM_DRAWS_H

#include <stddef.h>

#include "gmm/status.h"

typedef struct {
    size_t nvar, nchain, niter;
    char **name;  /* nvar variable names */
    long *chain;  /* nchain chain ids, ascending */
    double *x;    /* variable v, chain c, iteration s: x[(v nchain + c) niter + s] */
} gmm_draws;

/* Read and merge npath >= 1 files ("-" = stdin, once) into *out (freed
 * with gmm_draws_free; NULL on failure).  Errors (GMM_EPARSE unless said)
 * name the file and, for a cell, the line and column: the table reader's
 * (GMM_EIO for an unreadable file); "file: no column '.chain' (...)";
 * "file: no variables (only .chain/.iteration/.draw and sampler columns
 * ending in __)"; "file: no draws"; "file:L: column '.chain': 'x' is not a
 * positive integer"; "file:L: column 'mu': 'abc' is not a number";
 * "b.csv: no column 'mu' (a.csv has it)" and "b.csv: column 'nu' is not in
 * a.csv"; "b.csv:L: chain 2 is also in a.csv"; "chains of different
 * lengths: chain 3 has 150 draws (b.csv), chain 1 has 200 (a.csv)".
 * GMM_EINVAL for NULL arguments or npath 0; GMM_ENOMEM.  Reads one file
 * at a time: memory is the draws plus one file's text. */
gmm_status gmm_draws_read(const char *const *paths, size_t npath, gmm_draws **out);
void gmm_draws_free(gmm_draws *d); /* NULL-safe */

/* The draws of variable v: nchain x niter, chain-major. */
const double *gmm_draws_variable(const gmm_draws *d, size_t v);

#endif
