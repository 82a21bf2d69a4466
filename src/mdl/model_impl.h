/* model_impl.h -- the gmm_mdl struct, shared by the files of src/mdl/.
 * Calls between them go one way, each file calling only those listed after
 * it:
 *
 *   model_fixed.c   predictions from the fixed effects alone
 *   model_new_levels.c     new rows' levels the data lack
 *   model_score.c   new rows (predict --at, score), held-out scores
 *   model_draws.c   the identity of the model draws came from; predictions
 *                   and a stacked row's value from draws
 *   model_terms.c   predict --terms
 *   model_sites.c   queries, sites, predictions, the model file, vi's q
 *   model.c         building from the description: the specs, the data
 *   model_problem.c the problem: parameters named by term, coefficients
 *   model_latent_build.c   the latent: state-space, graph or stacked terms
 *   model_formula_terms.c  the formula's meaning, its record in a model file
 *   model_values.c  a model file's paths and values
 *   model_rules.c   the description's consistency, parameters held fixed,
 *                   the outcomes against the likelihood
 *   model_build_msg.c      a build's reports and failures (model_build.h
 *                   declares the build's steps for the files above)
 *   model_names.c   the keyword models of f()
 *   model_design.c  the fixed terms' design: R's model.matrix
 *   model_design_expr.c    the fixed terms' expressions and poly()'s basis
 *   formula.c       the formula's parser (formula.h), with formula_fixed.c,
 *                   formula_expr.c and formula_lex.c (formula_impl.h)
 */
#ifndef GMM_MODEL_IMPL_H
#define GMM_MODEL_IMPL_H

#include "gmm/draws.h"
#include "gmm/formula.h"
#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/model.h"
#include "gmm/spec.h"
#include "gmm/stack.h"

/* What a fixed variable takes from the model's data: whether it is a
 * factor and its levels,
 * sorted (numeric order when every level is a number), each once, the
 * reference level `ref` among them (the first unless factor(x, ref = L));
 * poly(x, k)'s basis (model_design_expr.c). */
typedef struct {
    char *store;      /* the strings, one after another */
    char **s;         /* n levels, pointing into store */
    double *v;        /* n numbers (isnum) */
    size_t n, ref;
    int isnum;
    int factor;       /* coded as a factor: factor(x), or a bare NAME whose
                       * column holds a cell that is not a number (R's
                       * character column) */
    double *alpha, *norm2; /* poly: k and k + 2 values (R's coefs) */
} gmm_mdl_levels;

/* A correlated random-effect term's effects (model_bars.c): k effects,
 * each named (lme4's names), read from column col (the formula's; NULL:
 * the intercept, 1) as a number, or as the indicator of a factor's level
 * (owned; NULL: a number). */
typedef struct {
    size_t k;
    char *name[GMM_STACK_CORR_MAX];
    const char *col[GMM_STACK_CORR_MAX];
    char *level[GMM_STACK_CORR_MAX];
} mdl_corr;

struct gmm_mdl {
    int graph;
    char *data_file;       /* as given (messages) */
    char *data_rec;        /* as recorded in a model file: absolute, or "-" */
    char *graph_rec;
    char *model_path;      /* the model file as given (NULL: none) */
    char *model_rec;       /* the same, absolute */
    char *xname, *yname, *nodename, *ename;
    char *wname;       /* prior weights' column (NULL: none) */
    double *wt;        /* nrow prior weights (NULL: none) */
    char *spec_text;
    gmm_spec_node *spec;
    double center;
    int has_center;
    double merge_tol;
    gmm_model_factor factor; /* as the description asks (a model file records it) */
    int sparse;              /* the sparse path chosen (model_factor.c) */
    size_t nrow, nobs;
    size_t ndropped;   /* rows dropped for a missing value (model_na.c) */
    double *x, *y, *e; /* nrow each (y centred for Gaussian data, NAN missing) */
    size_t *line;      /* nrow: source line of each row */
    gmm_lik lik;           /* the family; its values only start a fit */
    gmm_lik lik_now;       /* at the current parameters (gmm_mdl_likelihood) */
    gmm_kernel *kernel;
    char *graph_file;
    char *edge_cols[3];
    int len_optional;
    gmm_graph *g;
    gmm_gmrf *gmrf;
    size_t *row_node;
    gmm_latent *lat;
    gmm_problem *prob;
    gmm_objective *obj;
    gmm_vi *vi;        /* a VI result's q (predictions use it), or NULL */
    /* a formula's model: its text, its terms, the latent's graph made of the
     * levels of the node column alone (iid), the fixed effects' design
     * (nrow x ncoef; owned here, the one copy: the problem borrows it,
     * gmm_problem_design.borrow) and the coefficients' names */
    char *formula;
    char *formula_rec; /* as a model file records it: graph= paths as data_rec */
    gmm_formula *fm;
    int edgeless;
    size_t ncoef;
    double *X;
    char (*coef_name)[64];
    char (*coef_label)[128]; /* R's model.matrix column names ("(Intercept)",
                              * "factor(g)B:x"); offsets: their label */
    size_t noffset;        /* the last noffset coefficients: offset() terms,
                            * held at 1 */
    int *aliased;          /* ncoef: a column the design's QR dropped (held at 0) */
    double *desc_value;    /* nparam: the values as gmm_mdl_describe writes them
                            * (NAN for an aliased coefficient) */
    gmm_mdl_levels *flev; /* fm->nvar: each variable's levels or basis */
    size_t nflev;
    /* a formula of several f() terms, or one of iid-free intrinsic models
     * (rw1, rw2, besag, bym2): a stacked latent (stack.h) whose sites are
     * the data rows; per term its graph (levels or nodes), its precision's
     * spec and gmrf (graph-precision terms); rowkey: each row's cells of the
     * formula's columns, joined, by which draws without latent states find
     * a new row's f[row] */
    int stack;
    size_t nterm;
    gmm_graph **sg;
    gmm_spec_node **sspec;
    gmm_gmrf **sgmrf;
    gmm_kernel **skern;    /* kernel-spec terms' kernels (NULL for others) */
    mdl_corr *scorr;       /* nterm: correlated terms' effects (k 0 for others) */
    char **rowkey;
};

/* model_bars.c: the column of each interaction grouping a:b of fm's bar
 * terms appended to t (gmm_table_join_column) unless t has one; a
 * correlated term's effects over data into *c (freed with
 * gmm_mdl_impl_corr_free; errors point at the effect), and the rows'
 * coefficients of table t into z (t->nrow x c->k; errors the table's). */
gmm_status gmm_mdl_impl_group_columns(const gmm_formula *fm, gmm_table *t);
void gmm_mdl_impl_corr_free(mdl_corr *c);
gmm_status gmm_mdl_impl_corr_rows(const mdl_corr *c, const gmm_table *t, double *z);
/* The columns of t that fm reads (gmm_mdl_impl_formula_columns) into col
 * (room: cap; their number gmm_mdl_impl_key_ncol), *nc of them: the cells
 * that make a row's key (gmm_mdl_impl_join_cells).  Errors: a missing
 * column, GMM_EINVAL over cap. */
size_t gmm_mdl_impl_key_ncol(const gmm_formula *fm);
/* fn(COLUMN, ctx) for every column fm reads, in the order the keys take
 * them: each latent term's index (with factors nonzero, an a:b grouping's
 * factors instead of its derived column), the fixed terms' and offsets'
 * columns, the random effects' slopes, group= and replicate=. */
void gmm_mdl_impl_formula_columns(const gmm_formula *fm, int factors,
                                  void (*fn)(const char *col, void *ctx), void *ctx);
gmm_status gmm_mdl_impl_key_columns(const gmm_formula *fm, const gmm_table *t, size_t *col,
                                    size_t cap, size_t *nc);

/* model_design.c: a transformed response's values in m->y (read from its
 * column by the caller), and the design of fm's fixed terms over table t
 * as R's model.matrix makes it (the intercept first when `intercept`, then the
 * terms' columns, treatment contrasts or indicators by R's rules), then a
 * column per offset() (its coefficient held at 1), into m->X, m->ncoef,
 * m->coef_name ("intercept", "coef.x", "coef.g[LEVEL]", "coef.g[B]:x",
 * "coef.I(x^2)", "coef.offset(log(e))") and m->coef_label (R's names).
 * Errors: the table's (a missing column, a covariate that is not a number
 * or missing: "FILE:LINE: column ..."), GMM_EDOM for a value a function
 * does not take (log(0)) or that is not finite, GMM_EPARSE for an empty
 * factor level or a reference level that is not one, GMM_EINVAL for a
 * factor with one level or a name over 63 bytes, GMM_ENOMEM.  *pos: the
 * formula offset of the term or column at fault (SIZE_MAX: none). */
gmm_status gmm_mdl_impl_design(gmm_mdl *m, const gmm_table *t, const gmm_formula *fm,
                               int intercept, size_t *pos);
/* The design rows (t->nrow x m->ncoef, row-major, caller-allocated) of the
 * rows of another table t with m's fixed terms: covariates from their
 * columns, factor levels coded by m's levels.  Errors: the table's (a
 * missing column or covariate value: "FILE:LINE: column ..."), GMM_EPARSE
 * "FILE:LINE: column 'C': level 'L' is not a level of the model's data
 * (...)" with gmm_error_index() the row, GMM_ENOMEM. */
gmm_status gmm_mdl_impl_design_rows(const gmm_mdl *m, const gmm_table *t, double *X);
void gmm_mdl_impl_levels_free(gmm_mdl *m);
/* The levels of column c of t, sorted (numeric order when every level is
 * a number), each once, into *out (store, s and v allocated: the caller
 * frees them); errors name an empty level.  Nonzero when column c holds a
 * cell that is neither missing nor a number: R's character column, a
 * factor wherever a NAME is read (fixed terms, random slopes). */
gmm_status gmm_mdl_impl_factor_levels(const gmm_table *t, size_t c, gmm_mdl_levels *out);
int gmm_mdl_impl_text_column(const gmm_table *t, size_t c);

/* model_design_expr.c: e's value at every row of t into out (t->nrow);
 * missing cells NAN when missing_ok, else an error.  Errors name FILE:LINE,
 * the value and the term `term` (GMM_EDOM: log() of a value <= 0, sqrt() of
 * one < 0, a value not finite), or are the table's; *pos (may be NULL) the
 * formula offset of the offending token. */
gmm_status gmm_mdl_impl_expr_eval(const gmm_formula_expr *e, const gmm_table *t,
                                  const char *term, int missing_ok, double *out, size_t *pos);
/* A transformed response (log(y) ~ ...) at every row of t into y (NAN where
 * its column is missing); nothing for a NAME.  Errors as above. */
gmm_status gmm_mdl_impl_response(const gmm_mdl *m, const gmm_table *t, double *y);
/* R's poly(x, degree) basis over x (n): alpha (degree), norm2 (degree + 2).
 * GMM_EINVAL when x has degree distinct values or fewer, GMM_ENOMEM. */
gmm_status gmm_mdl_impl_poly_fit(const double *x, size_t n, int degree, double *alpha,
                                 double *norm2);
/* The degree columns of that basis at x into z. */
void gmm_mdl_impl_poly_at(double x, int degree, const double *alpha, const double *norm2,
                          double *z);

/* model_sites.c: posterior mean (+ the centre) and variance of the linear
 * predictor at every data row (nrow each), under q when attached: where a
 * model with covariates predicts, whatever its family. */
gmm_status gmm_mdl_impl_predict_rows(gmm_mdl *m, double *mean, double *var);
/* Nonzero when m's sites are its data rows: a latent with inputs, or a
 * graph or iid term with covariates or factors (a node has no linear
 * predictor of its own then). */
int gmm_mdl_impl_rows(const gmm_mdl *m);
/* model.c: the gmm_stack_model (stack.h) of a stacked term named by a
 * keyword (iid, rw1, rw2, besag, bym2); -1 for a quoted spec (a graph
 * precision in a stack). */
int gmm_mdl_impl_stack_kind(const gmm_formula_latent *t);

/* model_names.c: the keyword models of f(NAME, MODEL) (gmm_mdl_term_model).
 * The index of term t's model among them, -1 for another (a quoted model
 * is never a keyword); the kind of the one at index k. */
int gmm_mdl_impl_term_model(const gmm_formula_latent *t);
gmm_stack_model gmm_mdl_impl_term_kind(int k);
/* The i-th parameter of the keyword model at index k ("variance", then
 * "phi" for bym2; NULL past the last): the f() key of its start value and
 * the last part of its name f.NAME.KEY; *unit (may be NULL) nonzero when it
 * lies in (0, 1) rather than (0, inf). */
const char *gmm_mdl_impl_term_param(int k, size_t i, int *unit);
/* 1 and the message "formula: ..." in msg when term t's model is a name
 * that is no model there: not a keyword, a kernel (without graph=) or a
 * precision family (with graph=); the message lists them all and suggests
 * the nearest.  0 for a known name or a spec that is more than a name. */
int gmm_mdl_impl_model_unknown(const gmm_formula_latent *t, char *msg, size_t size);

/* model_score.c: the sparse forms of the rows of t (a stacked model's, read by
 * gmm_mdl_rows_read) at the latent's parameters theta: row r's entries
 * ptr[r] .. ptr[r + 1] - 1 at idx with weights w (ptr: t->n + 1; idx, w:
 * t->n gmm_latent_stack_row_max) and the variance of its independent part
 * in evar[r] (gmm_latent_stack_row).  Errors: "FILE:LINE: ..." with the
 * row in gmm_error_index(). */
gmm_status gmm_mdl_impl_stack_forms(const gmm_mdl *m, const gmm_mdl_test *t,
                                    const double *theta, size_t *ptr, size_t *idx, double *w,
                                    double *evar);

/* model_draws.c: row r of t (a stacked model's) given one draw: its latent part's mean
 * from the draw's latent x (n) and the variance of its independent part at
 * the draw's parameters theta.  idx, w: the caller's scratch of
 * gmm_latent_stack_row_max(m->lat) (at least 1) entries each, allocated
 * once for all draws and rows.  Errors as gmm_mdl_impl_stack_forms. */
gmm_status gmm_mdl_impl_stack_draw(const gmm_mdl *m, const gmm_mdl_test *t, size_t r,
                                   const double *theta, const double *x, size_t *idx,
                                   double *w, double *mean, double *var);

/* model.c: row r's cells of columns col[0..nc), each followed by a unit
 * separator (allocated; NULL: out of memory): a stacked model's row key. */
char *gmm_mdl_impl_join_cells(const gmm_table *t, size_t r, const size_t *col, size_t nc);

/* model_draws.c: the column named `name` of draws d, or d->nvar. */
size_t gmm_mdl_impl_draws_var(const gmm_draws *d, const char *name);
/* th (ndraw x nparam, draw-major): each draw's parameters -- a sampled one
 * from its column, the others m's values. */
void gmm_mdl_impl_draws_theta(const gmm_mdl *m, const gmm_draws *d, double *th);
/* The column of x[1] when d carries the n latent states x[1..n] (hmc
 * --states: n consecutive columns ending in x[n]), else d->nvar. */
size_t gmm_mdl_impl_draws_states_at(const gmm_draws *d, size_t n);
/* xs (ndraw x n, draw-major) from the n columns of d from x1 on. */
void gmm_mdl_impl_draws_states(const gmm_draws *d, size_t x1, size_t n, double *xs);

/* var[r] += x_r'C x_r for the n design rows X (n x ncoef) of a model
 * without latent field, C the coefficients' covariance at the model's
 * values (gmm_fit_lincomb_var: the observed information), so that its
 * predictions carry the coefficients' uncertainty (R's predict.glm
 * se.fit); nothing for a model with a latent field, whose predictions hold
 * the coefficients at their values (model_sites.c).  Errors of
 * gmm_fit_lincomb_var (GMM_ENOTPD: not at a maximum), GMM_ENOMEM. */
gmm_status gmm_mdl_impl_coef_var(gmm_mdl *m, const double *X, size_t n, double *var);

#endif
