/* modelfile.h -- the model file: a model's description, its parameter
 * values and how it was fitted, as JSON, written once a model is fitted and
 * read back to predict from it, sample it or score with it.  Readers ignore
 * keys they do not know and refuse a newer format_version; doubles
 * round-trip exactly.  The format, key by key: src/io/modelfile.c. */
#ifndef GMM_MODELFILE_H
#define GMM_MODELFILE_H

#include <stddef.h>
#include <stdio.h>

#include "gmm/status.h"

/* How a model's precisions are stored and factorised: the band after
 * RCM (band.h) or the sparse Cholesky after a fill-reducing ordering
 * (sparse.h, factor.h), or auto: the whole-model layer predicts both
 * costs and takes the cheaper (model.h). */
typedef enum {
    GMM_MODEL_FACTOR_AUTO = 0,
    GMM_MODEL_FACTOR_BAND,
    GMM_MODEL_FACTOR_SPARSE
} gmm_model_factor;

/* "auto", "band", "sparse". */
const char *gmm_model_factor_name(gmm_model_factor f);
/* The factor named `name` into *f: 0, or -1 for another name. */
int gmm_model_factor_parse(const char *name, gmm_model_factor *f);

/* A model's description: its latent, likelihood, data and their columns --
 * the one type that a program fills from its options (or takes from a model
 * file), that the whole-model layer builds from (model.h: gmm_mdl_spec's
 * desc) and that a model file records.  Strings are borrowed when a program
 * fills it; gmm_model_read allocates those of a file (gmm_model_free frees
 * them). */
typedef struct {
    const char *formula;    /* the model's formula (formula.h), or NULL */
    const char *kernel;     /* state-space kernel spec ("matern32 + ..."), or NULL */
    const char *precision;  /* graph precision spec ("edge-ou(...)"), or NULL */
    const char *likelihood; /* "gaussian", ... (a build takes NULL as "gaussian") */
    struct {
        const char *file;     /* CSV path ("-": stdin); a file records it absolute */
        const char *x, *y;    /* column names, or NULL (a build: the first two) */
        const char *node;     /* graph models: node column, or NULL */
        const char *exposure; /* or NULL */
        const char *trials;   /* or NULL (written only when set) */
        const char *weights;  /* prior weights' column, or NULL (written only
                               * when set) */
    } data;
    const char *graph;      /* edge-list file of a graph model, or NULL */
    const char *edge_cols[3]; /* i, j, length column names; all NULL: "i", "j"
                               * and an optional "length"; [2] may be NULL
                               * alone (no lengths) */
    double merge_tol;       /* state-space, kernel terms: inputs closer than
                             * this share a state (written as "merge_tol"
                             * when > 0; absent: 0) */
    gmm_model_factor factor; /* written as "factor" when not auto; absent
                              * (older files): auto */
} gmm_model_desc;

/* One row of lme4's VarCorr: effect `name` of random-effect term `group`
 * (lme4's names), its standard deviation and its correlations with the
 * group's earlier effects (ncorr of them); the residual's: group
 * "Residual", name "". */
typedef struct {
    const char *group, *name;
    double sd;
    size_t ncorr;
    const double *corr;
} gmm_model_varcorr;

typedef struct {
    int format_version;   /* read: as found; write: GMM_FORMAT_VERSION is written */
    char *tool_version;   /* read: as found; write: ignored, GMM_VERSION is written */
    gmm_model_desc desc;  /* with values for the parameters in kernel or
                           * precision; exactly one of the two, or neither
                           * with a formula of several f() terms */
    size_t nparam;
    char **param_name;    /* nparam names */
    double *param_value;  /* nparam values: finite, or NAN written as null (a
                           * coefficient not estimated: its design column
                           * was aliased) */
    int has_center;       /* 0: "center": null */
    double center;
    double loglik;        /* finite */
    size_t iterations;
    int converged;
    const char *stop;     /* write: "stop" when not NULL (borrowed); read:
                           * always NULL (informational only) */
    double decrement;     /* write: "decrement" when not NAN: fit's Newton
                           * decrement at the returned point (fit.h,
                           * CONVERGED); read: NAN (informational only) */
    const int *boundary;  /* write: nparam flags (borrowed), "boundary" lists
                           * the flagged names; NULL: none.  read: NULL */
    const double *std_error; /* write: nparam values (borrowed), "std_errors"
                              * holds the finite ones; NULL: none.  read:
                              * always NULL */
    size_t nvarcorr;         /* write: "varcorr", one object {group, name, sd,
                              * corr} per row (borrowed) when nvarcorr > 0;
                              * read: 0 (informational only) */
    const gmm_model_varcorr *varcorr;
    /* A VI result (vi.h), written as "elbo" and "variational":
     * {"file": ..., "bandwidth": b} when has_vi: q's mean and the band of its
     * precision factor L are in that CSV (index,mean,l0,...,lb with l_j =
     * L(index, index - j)); a relative file name is beside the model. */
    int has_vi;
    double elbo;
    char *vi_file;
    size_t vi_bandwidth;
} gmm_model;

/* All fields zero / NULL. */
void gmm_model_init(gmm_model *m);

/* Write m as JSON (2-space indent, trailing newline) to f.  The struct's
 * pointers are only read, so a writer may point them at its own strings.
 * `name` is used in messages ("-" or NULL: "<stdout>").  Errors: GMM_EINVAL
 * (neither or both of kernel/precision, a NULL required string, a non-finite
 * loglik/center/parameter, naming it), GMM_ENOMEM, GMM_EIO (write failed).
 * The caller owns f (wrap it in gmm_outfile to write a file atomically). */
gmm_status gmm_model_write(const gmm_model *m, FILE *f, const char *name);

/* gmm_model_write into `path` atomically through gmm_outfile (io.h): the
 * file appears complete or not at all; NULL or "-" is stdout.  Errors as
 * gmm_model_write, plus gmm_outfile's GMM_EIO. */
gmm_status gmm_model_save(const gmm_model *m, const char *path);

/* Read the model in `path` ("-" = stdin) into *m (every string allocated;
 * release with gmm_model_free).  Errors: GMM_EIO ("FILE: cannot open:
 * strerror"), GMM_EPARSE ("FILE:LINE:COL: <jansson's message>" for bad JSON
 * or a duplicated key, "FILE: missing key 'loglik'", "FILE: key
 * 'data.file' must be a string", a format_version newer than
 * GMM_FORMAT_VERSION), GMM_ENOMEM.  On error *m is left initialised
 * (nothing to free). */
gmm_status gmm_model_read(const char *path, gmm_model *m);

/* Free what gmm_model_read allocated and re-initialise m; NULL-safe.  Only
 * for structs filled by gmm_model_read. */
void gmm_model_free(gmm_model *m);

/* Index of parameter `name` in m, or GMM_EPARSE ("model: no parameter
 * 'name'"). */
gmm_status gmm_model_param_index(const gmm_model *m, const char *name, size_t *index);

#endif
