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
 * CmdStan's output CSV (`hmc --format cmdstan`, CmdStan's own sampler) is
 * read as it is: a file without .chain but with lp__ is one chain, its id
 * the file's `# id = N` comment line or else (also for CmdStan's "id = 1
 * (Default)" of separate runs) its position among the files (1, 2, ...);
 * comment lines ('#' in column 1) are skipped wherever they are
 * (configuration, adaptation, timing); with `save_warmup` on, the first
 * ceil(num_warmup / thin) rows, the warm-up's, are dropped (as CmdStanPy
 * does); Stan's names NAME.I.J read as
 * NAME[I,J] (f.3 -> f[3], log_lik.3 -> log_lik[3]), and a name that hmc
 * made of a parameter's (0_matern32_variance) as that parameter's
 * (0.matern32.variance) when the files' sidecar (gmm_draws_sidecar)
 * records it.  On a graph, CmdStan's f.K is the K-th node, not node "K":
 * `stan` tells the two apart.  All files must be of one of the two kinds.
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
#include <stdint.h>
#include <stdio.h>

#include "gmm/json.h"
#include "gmm/status.h"

typedef struct {
    size_t nvar, nchain, niter;
    char **name;  /* nvar variable names */
    long *chain;  /* nchain chain ids, ascending */
    double *x;    /* variable v, chain c, iteration s: x[(v nchain + c) niter + s] */
    int stan;     /* 1: read from CmdStan CSV files (f[K]: the K-th site), 0: draws_df */
} gmm_draws;

/* Read and merge npath >= 1 files ("-" = stdin, once) into *out (freed
 * with gmm_draws_free; NULL on failure).  Errors (GMM_EPARSE unless said)
 * name the file and, for a cell, the line and column: the table reader's
 * (GMM_EIO for an unreadable file); "file: no column '.chain' (...) (nor
 * lp__: not CmdStan's CSV either)"; "b.csv: CmdStan's CSV (no column
 * .chain), a.csv is a draws_df CSV: give files of one format"; "file:
 * save_warmup with num_warmup = W, thin = T: K warm-up rows, but the file
 * has N";
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

/* ---- writing draws (draws_write.c) ----------------------------------------
 *
 * The two layouts the reader above takes, as a sampler writes them: the
 * draws data frame (one file, every chain) and CmdStan's output CSV (one
 * file per chain, gmm_draws_chain_path).  The columns, after the sampler's
 * lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__:
 * the sampled parameters, f at the kept sites, the states x, the
 * log-likelihoods of data rows.  A draws data frame leads with
 * .chain,.iteration,.draw and names f[LABEL], x[i], log_lik[row]; CmdStan's
 * names are f.K (K the site's 1-based position), x.i, log_lik.row, and a
 * parameter's name with every character other than a letter, digit or '_'
 * as '_' (0.matern32.variance -> 0_matern32_variance; a '.' there would
 * separate indices).  Numbers are %.17g (gmm_fmt_g17).  Nothing here
 * checks the stream: the caller looks at ferror. */
typedef struct {
    int cmdstan;                    /* 1: CmdStan's layout, 0: draws data frame */
    size_t nparam;
    const char *const *param;       /* the sampled parameters' names */
    size_t nsite;
    const size_t *site;             /* the kept sites' 0-based positions */
    const char *const *site_name;   /* their draws-data-frame names (LABEL of f[LABEL]) */
    size_t nstate;                  /* x[1] .. x[nstate]; 0: none */
    size_t nloglik;
    const size_t *loglik_row;       /* the log_lik columns' 0-based data rows */
} gmm_draws_columns;

/* The header row (with its newline). */
void gmm_draws_write_header(FILE *f, const gmm_draws_columns *c);

/* One row of ncol values (with its newline); a draws data frame's leads
 * with chain, iteration, draw. */
void gmm_draws_write_row(FILE *f, int cmdstan, uint64_t chain, size_t iteration, size_t draw,
                         const double *row, size_t ncol);

/* What a CmdStan file says of its chain before the header, as '#' comment
 * lines with CmdStan's keys (method = sample, adapt, hmc/nuts or static,
 * metric = diag_e, id, data, random, output), then what f.i and the
 * inverse metric are: "f.i: the linear predictor at SITE_NOUN i; the
 * inverse metric is the sampler's, on METRIC_SPACE, not on f" (each '\n'
 * of metric_space starts a new comment line). */
typedef struct {
    const char *model_file;         /* NULL: none */
    const char *data_file;          /* NULL: "" */
    size_t num_samples, num_warmup;
    double gamma, delta, kappa, t0;
    size_t init_buffer, term_buffer, window;
    int nuts;                       /* 1: nuts, max_depth; 0: static, steps */
    unsigned max_depth;
    size_t steps;
    double stepsize, stepsize_jitter;
    uint64_t id, seed;
    const char *site_noun;          /* "data row", "the graph's node" */
    const char *metric_space;       /* what the sampler's metric is on */
} gmm_draws_cmdstan_config;
void gmm_draws_write_cmdstan_config(FILE *f, const gmm_draws_cmdstan_config *c);
/* The adaptation's result after the header: the step size and the n
 * diagonal elements of the inverse metric. */
void gmm_draws_write_cmdstan_adaptation(FILE *f, double stepsize, const double *inv_metric,
                                        size_t n);
/* The elapsed times after the draws. */
void gmm_draws_write_cmdstan_times(FILE *f, double warmup_seconds, double sampling_seconds);

/* CmdStan's file of chain `id` of output `path`: PATH_ID.csv, or
 * PREFIX_ID.csv for a path PREFIX.csv (as CmdStan names a run's chains;
 * gmm_draws_sidecar reads these names back).  Allocated; NULL when out of
 * memory. */
char *gmm_draws_chain_path(const char *path, uint64_t id);

/* ---- the model draws belong to (draws_origin.c) --------------------------
 *
 * Draws of f or of the latent states mean something only under the model
 * that made them.  A sampler records what identifies that model as
 * "origin" in the draws file's sidecar FILE.json, and a command reading
 * draws with a model compares it with its own:
 *
 *   "origin": {
 *     "model_file": "/abs/m.json" | null,   (null: built from options)
 *     "model_digest": "fnv1a64:<16 hex>" | null,   (of the file's bytes)
 *     "likelihood": "poisson", "latent": "state-space" | "graph",
 *     "latent_size": n, "rows": data rows,
 *     "sites_digest": "fnv1a64:...",   (the inputs' bits, or the node labels)
 *     "data_digest": "fnv1a64:...",    (outcomes, exposures, centre)
 *     "parameters": {"NAME": value when fixed, "sampled" when sampled}
 *   }
 *
 * The digest is 64-bit FNV-1a: it tells files apart, it is no protection
 * against a forger. */

/* A running digest: init, then add bytes. */
void gmm_digest_init(uint64_t *h);
void gmm_digest_add(uint64_t *h, const void *p, size_t n);
/* "fnv1a64:" and 16 lower-case hex digits into out (>= 25 bytes). */
void gmm_digest_format(uint64_t h, char *out);
/* The digest of a file's bytes into out (>= 25 bytes).  GMM_EIO naming
 * the file when it cannot be read. */
gmm_status gmm_digest_file(const char *path, char *out);

/* A model's identity; strings and arrays are borrowed. */
typedef struct {
    const char *model_file;  /* NULL: no file */
    const char *model_digest; /* NULL: no file */
    const char *likelihood;
    const char *latent;
    size_t latent_size, rows;
    const char *sites_digest, *data_digest;
    size_t nparam;
    const char *const *param_name;
    const double *param_value;
    const int *sampled;      /* nparam flags, or NULL: all fixed */
} gmm_draws_origin;

/* The "origin" object above, new (the caller owns it).  GMM_EDOM for a
 * non-finite fixed value, GMM_ENOMEM. */
gmm_status gmm_draws_origin_json(const gmm_draws_origin *o, json_t **out);

/* The sidecar of draws file `path` into *side (allocated, the caller
 * frees it), or *side = NULL when it has none ("-", no file): PATH.json,
 * else, for a CmdStan chain file PREFIX_ID.csv (or PREFIX_ID.csv.partial),
 * the set's PREFIX.csv.json or PREFIX.json (PREFIX.csv.partial.json,
 * PREFIX.partial.json) whose "format" is "cmdstan" -- where hmc --format
 * cmdstan -o PREFIX.csv or -o PREFIX writes it.  GMM_EIO when a candidate
 * exists but cannot be opened, GMM_ENOMEM. */
gmm_status gmm_draws_sidecar(const char *path, char **side);

/* The "origin" of draws file `path`'s sidecar (gmm_draws_sidecar) into *out
 * (a new reference), or *out = NULL when there is none to read: "-", no
 * sidecar, or a sidecar without "origin" (earlier versions).  GMM_EPARSE for
 * a sidecar that is not JSON or whose "origin" is not an object, GMM_EIO for
 * one that exists but cannot be read. */
gmm_status gmm_draws_origin_read(const char *path, json_t **out);

/* Do draws recorded as `rec` (an "origin" object) belong to model `cur`
 * (its parameters: each value; `sampled` is ignored)?  The likelihood,
 * latent family and size, rows, sites, data and parameter names must be
 * equal, and each parameter fixed in `rec` must have cur's value exactly
 * (sampled ones are the draws' own).  GMM_OK when they belong -- then
 * *same_file is 0 when both record a model file and the digests differ
 * (an equal model in another file: the caller may say so) --, else
 * GMM_EINVAL with a message naming the first difference and the model the
 * draws came from ("draws of another model: made from coal.json (poisson,
 * state-space, 112 latents, 112 rows); this one is ...").  GMM_EPARSE for
 * a malformed `rec`. */
gmm_status gmm_draws_origin_check(const json_t *rec, const gmm_draws_origin *cur,
                                  int *same_file);

#endif
