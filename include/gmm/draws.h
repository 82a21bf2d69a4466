/* draws.h -- MCMC draws: read from one or more CSV files (posterior's
 * draws_df layout or CmdStan's output CSV) into chains x iterations per
 * variable, the layout summary.h takes; written in the same two layouts a
 * row at a time; and the identity of the model that made them, recorded in
 * the files' sidecar.  The layouts and how files merge: src/io/draws.c;
 * the columns written: draws_write.c; the "origin" record: draws_origin.c. */
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
 * with gmm_draws_free; NULL on failure), every file of one layout, the
 * chains ordered by id.  Errors: GMM_EPARSE with a message naming the file
 * and, for a cell, the line and column (no chain column nor lp__, mixed
 * layouts, warm-up rows missing, no variables or no draws, a cell not a
 * number, a variable missing from one file, a chain in two files, chains
 * of different lengths: draws.c lists the messages); GMM_EIO (a file
 * unreadable); GMM_EINVAL (NULL, npath 0); GMM_ENOMEM.  Memory: the draws
 * plus one file's text. */
gmm_status gmm_draws_read(const char *const *paths, size_t npath, gmm_draws **out);
void gmm_draws_free(gmm_draws *d); /* NULL-safe */

/* The draws of variable v: nchain x niter, chain-major. */
const double *gmm_draws_variable(const gmm_draws *d, size_t v);

/* ---- writing draws (draws_write.c) ---------------------------------------- */

/* The columns a sampler writes, in this order after its diagnostics
 * (lp__, ..., energy__): the sampled parameters, f at the kept sites, the
 * states x, the log-likelihoods of data rows (names: draws_write.c).
 * Writers print numbers as %.17g and leave the stream's errors to the
 * caller (ferror). */
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
 * lines with CmdStan's keys, then what f.i and the inverse metric are
 * (each '\n' of metric_space starts a new comment line; draws_write.c). */
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

/* ---- the model draws belong to (draws_origin.c) -------------------------- */

/* Draws of f or of the latent states mean something only under the model
 * that made them: a sampler records that model's identity as "origin" in
 * the draws file's sidecar FILE.json (its fields: draws_origin.c), and a
 * reader of draws with a model compares it with its own.  Digests are
 * 64-bit FNV-1a: they tell files apart, they are no protection against a
 * forger. */

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
 * PREFIX.partial.json) whose "format" is "cmdstan" -- where a CmdStan set
 * of chains written to PREFIX.csv or PREFIX keeps it.  GMM_EIO when a
 * candidate exists but cannot be opened, GMM_ENOMEM. */
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
