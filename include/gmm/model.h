/* model.h -- a whole model built from its description (gmm_mdl_spec, whose
 * gmm_model_desc a model file records: modelfile.h): the latent, the
 * likelihood and the data joined in a gmm_problem (problem.h) with its
 * objective.  Only this layer knows the latent families apart; callers ask
 * it for sites, predictions, scores and the model draws came from.  Nothing
 * here prints: reports go to a callback, failures are a gmm_status with
 * gmm_error's message and a gmm_mdl_failure.  Design: src/mdl/model.c. */
#ifndef GMM_MODEL_H
#define GMM_MODEL_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "gmm/draws.h"
#include "gmm/graph.h"
#include "gmm/hmc_chains.h"
#include "gmm/io.h"
#include "gmm/likelihood.h"
#include "gmm/stack.h"
#include "gmm/modelfile.h"
#include "gmm/objective.h"
#include "gmm/problem.h"
#include "gmm/status.h"
#include "gmm/summary.h"
#include "gmm/vi.h"

typedef struct gmm_mdl gmm_mdl;

/* ---- graphs from tables (model_graph.c) ----------------------------------- */

/* Read an edge list from a table (graph.h: gmm_graph_from_labels): node
 * labels in columns col_i and col_j (NULL: "i" and "j"), lengths in
 * col_len.  col_len NULL means no lengths (all 1); when len_optional is
 * nonzero a missing col_len column also means no lengths (the default
 * "length" column), otherwise it is an error (the caller named it).  Errors
 * name the table's file and line: missing columns (the table's message),
 * an empty node id, a length that is not a number (the table's message),
 * and every error of gmm_graph_from_edges.  O(m) expected. */
gmm_status gmm_mdl_graph_read(const gmm_table *t, const char *col_i, const char *col_j,
                              const char *col_len, int len_optional, gmm_graph **out);

/* Attach the rows of a data table to nodes by their labels in column `col`
 * (graph.h: gmm_graph_attach_nodes, with its node, added, nadded and
 * strict).  Missing columns: the table's message. */
gmm_status gmm_mdl_graph_attach(gmm_graph *g, const gmm_table *t, const char *col, int strict,
                                size_t *node, size_t **added, size_t *nadded);

/* What a report is about (the callback decides what to show). */
typedef enum {
    GMM_MDL_REPORT_DATA,    /* "read N rows: O observed, M missing" (not from a model file),
                             * "; K more dropped for a missing value in a column the model
                             * uses" after it when rows were dropped (spec.na_fail 0) */
    GMM_MDL_REPORT_WARNING, /* "warning: ...": rows merged, nodes isolated, ... */
    GMM_MDL_REPORT_INFO,    /* defaults chosen, sizes (only with spec.verbose) */
    GMM_MDL_REPORT_SUMMARY  /* the latent and likelihood in one line (spec.verbose, not from
                             * a model file) */
} gmm_mdl_report;

/* A report's text, one line or several ("\n  item" lines), without a final
 * newline; valid during the call. */
typedef void (*gmm_mdl_report_fn)(void *user, gmm_mdl_report kind, const char *text);

typedef struct {
    /* What the model is (modelfile.h); its strings are borrowed.  A
     * formula (formula.h), without values, replaces kernel, precision,
     * graph and the data's x, y and node, which must then be NULL; with
     * values it gives the fixed effects and the kind of latent.  Fields
     * that exclude or need each other: gmm_mdl_rule; what a formula's
     * terms mean: src/mdl/model_formula_terms.c. */
    gmm_model_desc desc;
    int strict_nodes;          /* a data node missing from the graph is an error */
    int factor;                /* gmm_ssm_factor (0: auto) */
    double noise;              /* Gaussian variance start; NAN: a tenth of var(y) */
    double intercept;          /* start of the intercept; NAN: the data's */
    int no_intercept;
    int no_center;             /* Gaussian data not centred */
    int na_fail;               /* a missing value in a column the model uses
                                * (a covariate, factor or term's column; the
                                * weight of an observed row) is an error; 0:
                                * the row is dropped, as R's na.omit
                                * (gmm_mdl_rows_dropped).  A missing exposure
                                * or trials of an observed row is an error
                                * either way */
    int free_period;           /* with the default kernel (desc names no latent):
                                * its period is estimated, not held at 1 */
    /* Parameters held fixed (names of the objective; "noise.variance" is the
     * Gaussian variance's older name). */
    const char *const *fix;
    size_t nfix;
    /* A model file's values (NULL: none): its centre, intercept and every
     * parameter value; its paths and spec strings are NOT read from here
     * (fill the fields above), its "variational" part neither (see
     * gmm_mdl_load_vi).  values_name names the file in messages. */
    const gmm_model *values;
    const char *values_name;
    /* The path of the model file the values came from (NULL: none), kept
     * for the draws' origin (its digest). */
    const char *model_path;
    int verbose;               /* report defaults and sizes */
    gmm_mdl_report_fn report;  /* NULL: reports are dropped */
    void *report_user;
} gmm_mdl_spec;

/* Zero, with noise and intercept NAN. */
void gmm_mdl_spec_init(gmm_mdl_spec *s);

/* The data rows dropped for a missing value (gmm_mdl_spec's na_fail 0). */
size_t gmm_mdl_rows_dropped(const gmm_mdl *m);

/* The latent of a description that names none (no kernel, graph or
 * formula, and no model file's values): a smooth trend plus a yearly
 * quasi-periodic component (x in years), the paper's CO2 kernel.  Its
 * period, GMM_MDL_DEFAULT_KERNEL_FIXED, is held fixed unless
 * spec.free_period is set. */
#define GMM_MDL_DEFAULT_KERNEL "matern32 + quasiperiodic(period=1, harmonics=2)"
#define GMM_MDL_DEFAULT_KERNEL_FIXED "1.quasiperiodic.period"

/* Nonzero when d names no latent (no kernel, graph or formula): a build
 * without values takes GMM_MDL_DEFAULT_KERNEL. */
int gmm_mdl_desc_names_no_latent(const gmm_model_desc *d);

/* Which rule of the description a build found broken (gmm_mdl_failure's
 * rule), so that a program can word it in its own terms (the message
 * words it in the description's fields). */
typedef enum {
    GMM_MDL_RULE_NONE = 0,
    GMM_MDL_RULE_KERNEL_AND_GRAPH,     /* a kernel and a graph (or an iid term) */
    GMM_MDL_RULE_GRAPH_FIELDS,         /* precision, node or edge_cols without a graph */
    GMM_MDL_RULE_GRAPH_NEEDS,          /* a graph without precision, node or y */
    GMM_MDL_RULE_STATE_SPACE_FIELDS,   /* x or merge_tol with a graph */
    GMM_MDL_RULE_EXPOSURE_AND_TRIALS,  /* both per-row columns */
    GMM_MDL_RULE_NON_GAUSSIAN_FIELDS,  /* exposure, intercept or no_intercept, Gaussian */
    GMM_MDL_RULE_ROW_COLUMN,           /* exposure or trials the likelihood has not */
    GMM_MDL_RULE_GAUSSIAN_FIELDS,      /* noise or no_center, not Gaussian */
    GMM_MDL_RULE_INTERCEPT_AND_NONE,   /* intercept and no_intercept */
    GMM_MDL_RULE_FORMULA_REPLACES,     /* a formula with kernel, graph, precision, x, y
                                        * or node */
    GMM_MDL_RULE_MERGE_TOL_NO_KERNEL   /* merge_tol with a formula of no kernel term */
} gmm_mdl_rule;

/* How a build failed, beyond its status and message. */
typedef struct {
    /* nonzero: the description contradicts itself or names what is not
     * there (fields that exclude each other, a fixed name that is no
     * parameter, edge columns): the caller's mistake, not the data's */
    int usage;
    /* with usage: the rule broken, when it is one of gmm_mdl_rule's */
    gmm_mdl_rule rule;
    /* a spec's syntax or values: its key ("kernel", "precision",
     * "likelihood", "formula": an error inside a formula's f() spec points
     * into the formula), its text (points into the spec) and the offset of
     * the error in it; text NULL otherwise */
    const char *spec_key;
    const char *spec_text;
    size_t spec_pos;
    /* nonzero: the message is about spec.fix ("no parameter 'x'; the
     * parameters are:") */
    int fix;
    /* the model's parameter names when the message ends in a list of them
     * (a name in spec.fix or values that is not one): "  name\n" each,
     * allocated (the caller frees it with gmm_free), or NULL */
    char *params;
} gmm_mdl_failure;

/* Free what a failure holds (fail->params); NULL-safe. */
void gmm_mdl_failure_free(gmm_mdl_failure *fail);

/* Build the model s describes (the steps: src/mdl/model.c): Gaussian data
 * centred (by the mean, or values->center), the kernel's and likelihood's
 * defaults from the data, s->fix held and, with s->values, every parameter
 * taken from them.  *out is the caller's (gmm_mdl_free); fail (may be
 * NULL) is filled on failure.  Errors: GMM_EINVAL (fail->usage: a
 * contradictory description), GMM_EPARSE (specs, data, model-file values),
 * GMM_EPARSE/EINVAL "FILE:LINE: column 'y': ..." (an observed row the
 * likelihood refuses), GMM_EIO, GMM_ENOMEM, the latent's and problem's. */
gmm_status gmm_mdl_build(const gmm_mdl_spec *s, gmm_mdl **out, gmm_mdl_failure *fail);
void gmm_mdl_free(gmm_mdl *m); /* NULL-safe */

/* The i-th model a formula's f(NAME, MODEL) names by a keyword (iid, rw1,
 * rw2, besag, bym2), and in *about (may be NULL) what it is, in a line;
 * NULL past the last.  MODEL may also be a kernel spec (kernel.h,
 * gmm_kernel_type_at) or, with graph=, a precision spec (gmrf.h,
 * gmm_gmrf_family_at), quoted; an unknown name is an error that lists the
 * three. */
const char *gmm_mdl_term_model(size_t i, const char **about);

/* Data a fit cannot work with, said before trying: no observed y, one, a
 * constant Gaussian y, counts all 0, binary outcomes all equal: GMM_EINVAL
 * with the reason. */
gmm_status gmm_mdl_fit_check(const gmm_mdl *m);

/* The objective (names, values, positive/fixed flags, eval) and the problem
 * behind it; both owned by m. */
gmm_objective *gmm_mdl_objective(gmm_mdl *m);
gmm_problem *gmm_mdl_problem(gmm_mdl *m);
size_t gmm_mdl_nobs(const gmm_mdl *m);
/* The coefficients (problem.h): the last ncoef parameters of the
 * objective, named "intercept", "coef.NAME" and "coef.NAME[LEVEL]". */
size_t gmm_mdl_ncoef(const gmm_mdl *m);
/* Coefficient k's column as R's model.matrix names it ("(Intercept)", "x",
 * "factor(g)B:x", "I(x^2)", "poly(x, 2)1"), or an offset() term's text
 * ("offset(log(e))"): the last gmm_mdl_noffset(m) coefficients, held at 1.
 * NULL for k >= gmm_mdl_ncoef(m) or a model without a formula. */
const char *gmm_mdl_coef_label(const gmm_mdl *m, size_t k);
size_t gmm_mdl_noffset(const gmm_mdl *m);
/* The standard errors a fit reports, in place: se (the objective's
 * nparam, gmm_fit's) keeps the coefficients' and has NAN for the others (a
 * variance's is a poor summary of its uncertainty).  Returns nonzero when
 * one of them is finite. */
int gmm_mdl_coef_std_errors(const gmm_mdl *m, double *se);
/* "exact" (Gaussian) or "laplace"; "vi" when q is attached. */
const char *gmm_mdl_approximation(const gmm_mdl *m);
const char *gmm_mdl_posterior_kind(const gmm_mdl *m);
gmm_vi *gmm_mdl_vi(gmm_mdl *m);
/* Attach q (ownership passes to m; NULL detaches). */
void gmm_mdl_set_vi(gmm_mdl *m, gmm_vi *v);
/* Every parameter of m's objective from the model file src, by name (src
 * may have more): resuming from another result of the same model.
 * GMM_EINVAL "SRC_NAME: no value for 'NAME': not a result of this model"
 * (m's values then partly replaced). */
gmm_status gmm_mdl_take_params(gmm_mdl *m, const gmm_model *src, const char *src_name);
/* q from a VI factor file (qfile.h, bandwidth b), at m's current
 * parameters, attached to m.  Errors: gmm_qfile_read's, then
 * gmm_vi_set_state's; GMM_EINVAL and GMM_EDIM prefixed "PATH (variational
 * parameters of MODEL): "; GMM_ENOMEM. */
gmm_status gmm_mdl_load_vi(gmm_mdl *m, const char *path, size_t bandwidth,
                           const char *model_name);
/* Start v (allocated on m's problem) for a vi run: from the Laplace
 * approximation (src NULL: gmm_vi_start_laplace, *start its name), or from
 * a vi result of this model, src (named src_name in messages): its
 * parameters by name (gmm_mdl_take_params) and its q read from qpath (its
 * bandwidth src->vi_bandwidth, zero-extended or restricted to v's; *start
 * "given").  m is left without q.  Errors: gmm_mdl_take_params's,
 * gmm_mdl_load_vi's, gmm_vi_set_state_from's, gmm_vi_start_laplace's. */
gmm_status gmm_mdl_vi_start(gmm_mdl *m, gmm_vi *v, const gmm_model *src, const char *qpath,
                            const char *src_name, const char **start);
/* A vi run's result saved: m takes v's parameters (gmm_vi_theta), and the
 * model file (m described, with res's ELBO as "loglik" and "elbo", its
 * iterations, "converged" unless interrupted, and "variational" naming
 * qpath's base name, beside the model) goes to path and v's q to qpath,
 * both members of the output set `set`, for the caller to commit with its
 * other outputs (gmm_qfile_save).  Errors: gmm_mdl_describe's,
 * gmm_vi_factor's, gmm_qfile_save's; GMM_ENOMEM. */
gmm_status gmm_mdl_save_vi(gmm_mdl *m, gmm_vi *v, const gmm_vi_result *res, int interrupted,
                           gmm_outset *set, const char *path, const char *qpath);
size_t gmm_mdl_newton_iterations(const gmm_mdl *m);
/* "cholesky", "square-root" or "sparse": how the last evaluation factorised the
 * posterior precision; *bound (may be NULL) the Cholesky's rounding bound
 * of an exact evaluation (0: none to report). */
const char *gmm_mdl_factorisation(const gmm_mdl *m, double *bound);
/* gmm_problem_sqrt_declined of the model's problem. */
int gmm_mdl_sqrt_declined(const gmm_mdl *m);
size_t gmm_mdl_bandwidth(const gmm_mdl *m);
/* Latents one observation reads: the state dimension (graphs: 1). */
size_t gmm_mdl_state_dim(const gmm_mdl *m);
/* The centring constant (0 when not centred). */
double gmm_mdl_center(const gmm_mdl *m, int *has_center);
/* The likelihood at the current parameters; owned by m, valid until the
 * next call. */
const gmm_lik *gmm_mdl_likelihood(gmm_mdl *m);
/* The likelihood family's name ("poisson"). */
const char *gmm_mdl_likelihood_name(const gmm_mdl *m);
/* Nonzero when the likelihood's expectations under a normal f are in
 * closed form (VI needs no quadrature rule). */
int gmm_mdl_expect_closed_form(const gmm_mdl *m);
/* The Gaussian noise variance at the current parameters (0 otherwise). */
double gmm_mdl_noise(const gmm_mdl *m);

/* Fill a gmm_model describing m at its current parameter values; strings
 * point into m or into *scratch (free with gmm_free after use).  The
 * recorded paths are absolute.  GMM_ENOMEM. */
gmm_status gmm_mdl_describe(const gmm_mdl *m, gmm_model *mf, char **scratch);

/* Sites: where the model predicts without new inputs.  Models with inputs
 * (state-space) have one per data row (x from gmm_mdl_data_x), labelled by
 * x ("%.17g"), the others one per graph node, labelled by its name; both
 * by gmm_mdl_site_label (buf >= 64 bytes). */
int gmm_mdl_has_inputs(const gmm_mdl *m);
/* GMM_OK when m can predict at new inputs (gmm_mdl_predict with xq), else
 * GMM_EINVAL with the reason (a graph model predicts at its nodes only). */
gmm_status gmm_mdl_check_new_inputs(const gmm_mdl *m);
size_t gmm_mdl_nsites(const gmm_mdl *m);
const char *gmm_mdl_site_label(const gmm_mdl *m, size_t v, char *buf);
/* The sites' column: "x" (inputs) or "node". */
const char *gmm_mdl_site_column(const gmm_mdl *m);
/* What the summaries of the response are called, the prefix of their
 * columns: "rate" (a log link), "prob" (a logit link), or NULL (Gaussian:
 * the response is f itself; predictions of new observations add the
 * noise instead). */
const char *gmm_mdl_response_name(const gmm_mdl *m);
/* Nonzero when new observations are normal about f (the Gaussian
 * likelihood: their predictions add its noise variance). */
int gmm_mdl_observed_normal(const gmm_mdl *m);
/* The site (graph node) with this label: 1 and *v, or 0. */
int gmm_mdl_site_find(const gmm_mdl *m, const char *label, size_t *v);
/* Column names: outcome, the per-row quantity's (exposure or trials, as
 * the likelihood's rowq; NULL: none), input or node column. */
const char *gmm_mdl_data_y_name(const gmm_mdl *m);
const char *gmm_mdl_data_exposure_name(const gmm_mdl *m);
const char *gmm_mdl_data_site_name(const gmm_mdl *m);
/* The data file as given. */
const char *gmm_mdl_data_file(const gmm_mdl *m);
/* The observed inputs (state-space: every row's x, n of them). */
const double *gmm_mdl_data_x(const gmm_mdl *m, size_t *n);
/* The linear predictor b + f at every site (nsites of them: data rows, or
 * graph nodes) for the whitened latent field v (gmm_problem_whitened_linpred);
 * after gmm_problem_whiten_setup. */
gmm_status gmm_mdl_whitened_sites(gmm_mdl *m, const double *v, double *f);
/* Posterior mean and variance of the linear predictor (+ the centre of
 * Gaussian data) at the current parameters, under q when attached: at nq
 * inputs xq for models with inputs, else at every site (xq ignored, nq must
 * be nsites: GMM_EDIM).  Exact for the Gaussian likelihood, Laplace
 * otherwise. */
gmm_status gmm_mdl_predict(gmm_mdl *m, const double *xq, size_t nq, double *mean, double *var);
/* gmm_mdl_predict summarised (summary.h): mean, variance, the interval of
 * probability `level` of f and of its response through the inverse link
 * (gmm_summary_pred_normal), at nq inputs xq, or at every site when xq is
 * NULL (nq must be gmm_mdl_nsites: GMM_EDIM).  observed: intervals for new
 * observations (the noise variance added; only without a response name:
 * GMM_EINVAL otherwise).  pr: nq summaries, caller-allocated. */
gmm_status gmm_mdl_predict_summary(gmm_mdl *m, const double *xq, size_t nq, double level,
                                   int observed, gmm_summary_pred *pr);
/* Progress of long predictions (state-space): fn(user, done, total),
 * nonzero cancels (GMM_ECANCEL). */
void gmm_mdl_set_progress(gmm_mdl *m, int (*fn)(void *user, size_t done, size_t total),
                          void *user);

/* m's identity at its current parameters, as the "origin" of a draws
 * sidecar (draws.h); sampled: nparam flags, or NULL (all fixed).  A new
 * JSON object in *out.  GMM_EIO: the model file cannot be read again for
 * its digest. */
gmm_status gmm_mdl_draws_origin(gmm_mdl *m, const int *sampled, json_t **out);

/* What gmm_mdl_check_draws found for one file of draws. */
typedef enum {
    GMM_MDL_DRAWS_SAME,       /* its sidecar names m */
    GMM_MDL_DRAWS_OTHER_FILE, /* another model file with m's likelihood, latent, data and
                               * parameters */
    GMM_MDL_DRAWS_UNCHECKED   /* no sidecar; its columns are m's */
} gmm_mdl_draws_verdict;

/* Draws d, read from `path`, against m: its sidecar "origin" must be m's
 * (gmm_draws_origin_check).  A file without one passes only when its
 * columns are exactly m's draw columns (f at every site in order,
 * x[1..n] or none, lp__ and m's parameters).  Errors: GMM_EINVAL
 * "PATH: ..." naming the model the draws came from or the first column
 * that is not m's; the sidecar reader's. */
gmm_status gmm_mdl_check_draws(gmm_mdl *m, const char *path, const gmm_draws *d,
                               gmm_mdl_draws_verdict *verdict);
/* Draws read from CmdStan CSV files (d->stan) name the K-th node of a
 * graph f[K]: rename those columns f[LABEL], as the draws_df layout names
 * them, and clear d->stan (models with inputs: f[ROW] either way).  Call
 * before gmm_mdl_check_draws.  GMM_EINVAL "column 'f.K' is not the
 * position of one of the graph's N nodes ...", GMM_ENOMEM. */
gmm_status gmm_mdl_draws_stan_sites(const gmm_mdl *m, gmm_draws *d);
/* The site a draws column names ("f[ROW]" with ROW 1..n for models
 * with inputs, "f[LABEL]" for graphs; column of at least 4 characters,
 * "f[...]") into *v.  GMM_EINVAL "column 'NAME' is not a data row of the
 * model's data (1..n)" / "... is not a node of the model's graph". */
gmm_status gmm_mdl_draws_site(const gmm_mdl *m, const char *column, size_t *v);
/* Site v's column in draws: "f[ROW]" (ROW = v + 1) for models with
 * inputs, "f[LABEL]" for graphs; in buf (>= 96 bytes). */
const char *gmm_mdl_draws_column(const gmm_mdl *m, size_t v, char *buf);
/* What a site is, for a sentence: "data row" or "the graph's node". */
const char *gmm_mdl_site_noun(const gmm_mdl *m);
/* The sites one item of a list names: a data row "A" or a range "A-B"
 * (1-based) for models with inputs, a node's label for graphs, as the
 * 0-based range [*first, *last].  GMM_EINVAL "'ITEM' is not a data row or
 * range A-B in 1..n" / "'ITEM' is not a node of the graph". */
gmm_status gmm_mdl_sites_parse(const gmm_mdl *m, const char *item, size_t *first,
                               size_t *last);
/* ---- the model's side of an HMC run (model_hmc.c) ------------------------- */

/* q's mean of m's variational posterior (gmm_mdl_load_vi first) into *x
 * (the latent size, allocated), where chains may start; q is dropped from
 * m (gmm_mdl_set_vi NULL).  GMM_ENOMEM. */
gmm_status gmm_mdl_take_vi_mean(gmm_mdl *m, double **x);
/* The metric an automatic choice takes at m's values: laplace when the
 * data's information exceeds the prior's by more than
 * GMM_METRIC_AUTO_INFO in the stiffest direction (*lmax,
 * gmm_problem_data_information), else prior.  On an error (no Laplace
 * fit: prior, and the error recorded) *metric is prior. */
gmm_status gmm_mdl_hmc_metric_auto(gmm_mdl *m, gmm_metric *metric, double *lmax);

/* The columns of run rp's draws of m (rp's sampled parameters, kept sites,
 * states, log-likelihoods of the observed rows), in CmdStan's layout or
 * the draws data frame's, for gmm_draws_write_header (draws.h); borrowed
 * from m and rp, freed with gmm_mdl_draws_columns_free.  GMM_ENOMEM. */
gmm_status gmm_mdl_draws_columns(gmm_mdl *m, const gmm_hmc_run_params *rp, int cmdstan,
                                 gmm_draws_columns **out);
void gmm_mdl_draws_columns_free(gmm_draws_columns *c); /* NULL-safe */
/* CmdStan's comment block of chain ci (kept draws) of run rp of m. */
void gmm_mdl_cmdstan_config(gmm_mdl *m, const gmm_hmc_run_params *rp,
                            const gmm_hmc_chain_info *ci, size_t kept, const char *model_file,
                            const char *data_file, gmm_draws_cmdstan_config *c);
/* The sidecar FILE.json of run rp's chains ch (how the draws were made:
 * tool, model and data files, sampler settings, fixed values and priors,
 * the design the coefficients' priors are on, "origin", per-chain step
 * sizes, divergences and leapfrog steps, the format, and after a cancel
 * the draws and chains kept), new in *out.  gmm_mdl_draws_origin's
 * errors, GMM_ENOMEM. */
gmm_status gmm_mdl_hmc_sidecar(gmm_mdl *m, const gmm_hmc_run_params *rp,
                               const gmm_hmc_chains *ch, const char *model_file,
                               const char *data_file, int cmdstan, json_t **out);

/* Held-out data for gmm_mdl_score (or new rows to predict at): a CSV with
 * the model's site (input or node) column, the columns of its covariates
 * and factors, and (to score) its outcome and exposure columns, checked
 * against the likelihood. */
typedef struct {
    gmm_table *table;      /* the file as read (lines, cells for messages) */
    size_t col_site, col_y;  /* col_y: table->ncol when not read */
    size_t n, nobs;        /* rows, rows with an observed outcome */
    double *y, *e;         /* n each: outcome (NAN: missing), exposure (1: none) */
    double *x;             /* n inputs (models with inputs) */
    size_t *site;          /* n graph nodes (graphs); GMM_MDL_NEW_LEVEL: a level
                            * of an iid term the model's data do not have */
    double *X;             /* n x ncoef design rows (gmm_mdl_ncoef), row-major;
                            * NULL without coefficients */
    gmm_stack_at *sat;     /* a model of several f() terms: n x nterm, each
                            * term's reading of the row (stack.h); else NULL */
    double *sz;            /* the coefficients sat's correlated terms point
                            * into (stack.h's z), or NULL */
    double *sgrp;          /* with sat: n x nterm x 2, each term's group and
                            * replicate values (gmm_latent_stack_row_group) */
} gmm_mdl_test;

#define GMM_MDL_NEW_LEVEL ((size_t)-1)

/* What gmm_mdl_rows_read reads rows for. */
enum {
    GMM_MDL_ROWS_PREDICT = 0, /* to predict at: no outcome or exposure column */
    GMM_MDL_ROWS_SCORE = 1,   /* to score: as gmm_mdl_test_read */
    GMM_MDL_ROWS_FIXED = 2    /* to predict the fixed effects alone (gmm_mdl_predict_fixed):
                               * neither, nor the f() terms' columns -- the node or level
                               * column, when there, labels the row; site[r] = r, sat NULL */
};

/* Read `path` as rows of m: to score or to predict at (mode, above; y is
 * NAN but to score).  Each f() term reads its column (what it accepts:
 * src/mdl/model_score.c); a level an iid term's data lack is kept
 * (GMM_MDL_NEW_LEVEL).  A factor level the model's data lack, or a node
 * not in a graph term's graph, is GMM_EPARSE "FILE:LINE: column 'C': ...".
 * Errors otherwise as gmm_mdl_test_read. */
gmm_status gmm_mdl_rows_read(const gmm_mdl *m, const char *path, int mode,
                             gmm_mdl_test **out);
/* The inputs of t's rows for a model with inputs (t->x), NULL for one
 * whose rows are labelled by their nodes or levels: what a prediction
 * table prints in its first column. */
const double *gmm_mdl_test_inputs(const gmm_mdl *m, const gmm_mdl_test *t);
/* Row r's label in a table of t's rows (without inputs): its node or level
 * cell, or for a model of several f() terms its number among the file's
 * rows (1-based, in buf of >= 64 bytes). */
const char *gmm_mdl_test_label(const gmm_mdl *m, const gmm_mdl_test *t, size_t r, char *buf);
/* Posterior mean (+ the centre of Gaussian data) and variance of the
 * linear predictor X_r beta + f(site_r) at every row r of t (t->n each;
 * beta at m's values, its estimation error not included): f from the
 * exact, Laplace or q posterior at the row's input or node, N(0, variance)
 * for an iid level the data lack; several f() terms: the row's form of
 * the stacked latent (src/mdl/model_score.c).  Errors: the posterior's,
 * GMM_ENOMEM. */
gmm_status gmm_mdl_predict_test(gmm_mdl *m, const gmm_mdl_test *t, double *mean, double *var);
/* gmm_mdl_predict_test summarised as gmm_mdl_predict_summary does, into
 * pr[0..t->n). */
gmm_status gmm_mdl_predict_test_summary(gmm_mdl *m, const gmm_mdl_test *t, double level,
                                        int observed, gmm_summary_pred *pr);
/* The rows of new data t (gmm_mdl_rows_read, to predict or score) with a
 * level of an iid term the model's data do not have -- a new group, whose
 * effect is the term's prior, N(0, variance): their count, and for the
 * first of them its row, column, level and the variance parameter (name,
 * value) of its term (NULL, NAN when the term has no such parameter).
 * Strings borrowed from t and m. */
typedef struct {
    size_t nrow, first;
    const char *column, *level, *param;
    double variance;
} gmm_mdl_new_levels;
void gmm_mdl_test_new_levels(const gmm_mdl *m, const gmm_mdl_test *t, gmm_mdl_new_levels *out);
/* Which terms a prediction keeps: every term (the default), or none of
 * the latent's -- lme4's re.form = NA: X beta alone, every f() term
 * dropped, structured or not (src/mdl/model_fixed.c). */
typedef enum { GMM_MDL_TERMS_ALL = 0, GMM_MDL_TERMS_FIXED } gmm_mdl_terms_kept;

/* The fixed effects alone: mean[r] = X_r beta (+ the centre of Gaussian
 * data) and var[r] = X_r C X_r', C the coefficients' covariance (the
 * inverse observed information at m's values, as fit's std_errors: its
 * only uncertainty), at the rows of t (t->n of them), or with t NULL at
 * the nq new inputs xq or, xq NULL, at the nq sites of gmm_mdl_predict:
 * the data rows (nq = nrow: GMM_EDIM), or the nodes of a model whose
 * design is the same at every row (as it must be at new inputs).
 * Errors: GMM_EINVAL (sites of a design that varies by row), GMM_ENOTPD
 * "the coefficients' variance: the observed information is not positive
 * definite ..." (not at a maximum), gmm_fit_lincomb_var's; GMM_ENOMEM. */
gmm_status gmm_mdl_predict_fixed(gmm_mdl *m, const gmm_mdl_test *t, const double *xq, size_t nq,
                                 double *mean, double *var);
/* gmm_mdl_predict_fixed summarised as gmm_mdl_predict_summary does, into
 * pr[0..n), n = t->n or nq. */
gmm_status gmm_mdl_predict_fixed_summary(gmm_mdl *m, const gmm_mdl_test *t, const double *xq,
                                         size_t nq, double level, int observed,
                                         gmm_summary_pred *pr);
/* Nonzero when predictions away from the data are at rows (a table read
 * by gmm_mdl_rows_read: covariates, factors, nodes or levels) rather than
 * at bare inputs: a model with covariates or factors, a graph or iid
 * term, or several f() terms. */
int gmm_mdl_at_rows(const gmm_mdl *m);

/* Read `path` as held-out data of m.  Errors: the table's (GMM_EIO,
 * GMM_EPARSE: a missing column), GMM_EPARSE "FILE:LINE: column 'C': ..."
 * (a node not in the graph, a missing exposure, an outcome the likelihood
 * refuses) and "FILE: ...: nothing to score" when no outcome is observed,
 * GMM_ENOMEM. */
gmm_status gmm_mdl_test_read(const gmm_mdl *m, const char *path, gmm_mdl_test **out);
void gmm_mdl_test_free(gmm_mdl_test *t); /* NULL-safe */
/* lpd[r] = log E[p(y_r | f_r)] for every observed row r of t under m's
 * posterior (exact, Laplace, or q when attached); lpd has t->n entries,
 * those of missing rows are not written. */
gmm_status gmm_mdl_score(gmm_mdl *m, const gmm_mdl_test *t, double *lpd);
/* Leave-one-out: lpd[r] = log p(y_r | y_-r) for every observed data row r
 * of m (nrow = gmm_mdl_data_x's n entries; missing rows get NAN), at m's
 * current parameters, from the posterior with row r's site removed (the
 * cavity: src/mdl/model_score.c).  One prediction at the data rows, O(n)
 * on top.  GMM_EDOM "data row L: the cavity variance is not positive ..."
 * (non-log-concave likelihoods), GMM_ENOMEM; the prediction's and
 * predictive's. */
gmm_status gmm_mdl_score_loo(gmm_mdl *m, double *lpd);
/* How gmm_mdl_score_loo leaves a row out for m as it stands: "exact"
 * (an observed normal likelihood under the exact or Laplace posterior) or
 * "cavity" (the row's Gaussian site removed). */
const char *gmm_mdl_loo_method(const gmm_mdl *m);
/* Data row r of m (r < nrow): its source line, outcome (as read, NAN
 * missing) and site (gmm_mdl_site_label's v). */
void gmm_mdl_data_row(const gmm_mdl *m, size_t r, size_t *line, double *y, size_t *site);
/* gmm_mdl_score under draws d (of m: see gmm_mdl_check_draws) read from
 * dpath: lpd[r] = log mean_s E[p(y_r | f_r) | draw s], the likelihood at
 * each draw's parameters (sampled columns, else m's), f_r from the draw's
 * f[...] columns or its latent states x[1..n] (src/mdl/model_score.c).
 * Errors: GMM_EINVAL "DPATH: draw K: ..." (parameters out of their
 * domain), "FILE:LINE: ..." (a row no f[...] column reaches, without the
 * states), "DPATH: no column 'f[...]' ..."; the bridge's. */
gmm_status gmm_mdl_score_draws(gmm_mdl *m, const gmm_mdl_test *t, const gmm_draws *d,
                               const char *dpath, double *lpd);
/* The posterior of f from draws d of m (read from dpath, for messages):
 * for every column f[...], in order, its site (site[k]) and the mean,
 * variance and interval at the level of f, and of the response through
 * the inverse link draw by draw (pr[k]); *nout of them.  site and pr hold
 * d->nvar entries.  Errors: GMM_EINVAL "DPATH: column ... is not ..." (see
 * gmm_mdl_draws_site), "DPATH: no f[...] columns in the draws"; the
 * summaries'. */
gmm_status gmm_mdl_predict_draws(gmm_mdl *m, const gmm_draws *d, const char *dpath,
                                 double level, size_t *site, gmm_summary_pred *pr, size_t *nout);
/* At nq new inputs xq (models with inputs) from draws that hold the latent
 * states x[1..n]: each new f drawn from the Markov bridge
 * given each draw (gmm_problem_predict_at_draws), with the draw's sampled
 * parameters, summarised into pr[0..nq) as above (means and intervals of
 * centred data moved back by the centre).  Errors: GMM_EINVAL "DPATH: no
 * latent states x[1..n]: ..."; the bridge's. */
gmm_status gmm_mdl_predict_draws_at(gmm_mdl *m, const gmm_draws *d, const char *dpath,
                                    const double *xq, size_t nq, double level,
                                    gmm_summary_pred *pr);
/* m term by term: first each coefficient (term its name,
 * "intercept", "coef.x", "coef.g[L]"; level empty) with its value and its
 * standard error as fit's std_errors (the observed information at m's
 * values; NAN and se_failed set when it is not positive definite), then
 * the f() term (term "f.NAME", or "f" without a formula) at each
 * of its levels: its distinct data inputs in increasing order ("%.17g"),
 * or its graph's nodes in node order (an iid term: its levels), with the
 * posterior mean and sd of the latent alone (exact, Laplace or q; without
 * coefficients, centre or noise). */
typedef struct {
    size_t n;
    char (*term)[64];
    char **level;      /* n strings, each allocated */
    double *mean, *sd;
    int se_failed;
} gmm_mdl_terms;

/* Fill *out (the caller frees it with gmm_mdl_terms_free).  Errors: the
 * posterior's, GMM_ENOMEM. */
gmm_status gmm_mdl_terms_get(gmm_mdl *m, gmm_mdl_terms *out);
void gmm_mdl_terms_free(gmm_mdl_terms *t); /* NULL-safe */

/* lme4's VarCorr of the formula's random-effect terms ((x | g), formula.h)
 * at the model's current values: for each term in order, a row per effect
 * (its standard deviation, its correlations with the term's earlier
 * effects), then the residual's for a Gaussian likelihood; n 0 without
 * such terms.  The rows' strings are the model's (valid while it lives);
 * freed with gmm_mdl_varcorr_free (NULL-safe).  Errors: GMM_ENOMEM, a
 * parameter out of its domain. */
typedef struct {
    size_t n;
    gmm_model_varcorr *row;
    double *corr;
} gmm_mdl_varcorr;
gmm_status gmm_mdl_varcorr_get(const gmm_mdl *m, gmm_mdl_varcorr *out);
void gmm_mdl_varcorr_free(gmm_mdl_varcorr *v);

/* At the rows of t (gmm_mdl_rows_read) from draws that hold the latent
 * states x[1..n]: each draw's X_r beta plus its latent at the row
 * (src/mdl/model_draws.c), summarised into pr[0..t->n) as
 * gmm_mdl_predict_draws_at does.  Errors: GMM_EINVAL "DPATH: no latent
 * states x[1..n]: ..."; the bridge's and summaries'. */
gmm_status gmm_mdl_predict_draws_rows(gmm_mdl *m, const gmm_draws *d, const char *dpath,
                                      const gmm_mdl_test *t, double level,
                                      gmm_summary_pred *pr);
/* The model file m was built from, as given (NULL: none). */
const char *gmm_mdl_model_path(const gmm_mdl *m);

#endif
