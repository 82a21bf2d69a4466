/* laplace_impl.h -- what the files of a gmm_laplace share.  Private.
 * laplace_newton.c, laplace_sparse.c and laplace_sqrt.c call laplace.c;
 * the band form's draw and posterior solve hand a sparse workspace to
 * laplace_sparse.c. */
#ifndef GMM_LAPLACE_IMPL_H
#define GMM_LAPLACE_IMPL_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/constr.h"
#include "gmm/factor.h"
#include "gmm/laplace.h"
#include "gmm/likelihood.h"
#include "gmm/sparse.h"

/* What a workspace knows of its problem: nothing (the next evaluation
 * starts from x0, or 0 or the cold start); the mode x (a warm start may begin there;
 * gmm_laplace_mode stops here); or the approximation at the mode, from
 * which the posterior, the gradient and draws are read (the factor of P in
 * L, or the smoother's for the square-root form, and log q). */
typedef enum { LAPLACE_KNOWS_NOTHING, LAPLACE_KNOWS_MODE, LAPLACE_KNOWS_FIT } laplace_known;

/* How the square-root form's last evaluation ended: Newton stepped to the
 * mode; or it kept its start (the mode is x + dx, dx = mu - x) with the
 * smoother's variances in s and its gradient started (var), which the next
 * gmm_laplace_grad_sqrt uses up; or kept its start, the variances used. */
typedef enum {
    LAPLACE_SQRT_STEPPED,
    LAPLACE_SQRT_KEPT_START_VAR_READY,
    LAPLACE_SQRT_KEPT_START
} laplace_sqrt_end;

struct gmm_laplace {
    size_t n, kl, ckl, maxobs, width;
    size_t nconst;        /* the likelihood's row constants (obs->cst) */
    gmm_band *L, *S, *SQ;
    gmm_factor *fQ;       /* the prior's, when the caller has no log|Q| */
    double *x, *xt, *gr, *dx, *tmp, *z;   /* n each */
    double *f, *g, *w, *t, *s;            /* maxobs each */
    double *yt, *u;                       /* maxobs each: working data, adjoint (sqrt) */
    double *sh;                           /* maxobs x width: Sigma h_i (sqrt, coefbar) */
    double *dpar;         /* maxobs x 3 GMM_LIK_MAXPARAM, allocated by the first evaluation
                           * with a parametrised likelihood: the rows' dpar (gmm_lik_eval)
                           * at the mode, for the gradients */
    int dpar_ok;          /* dpar holds the last lik_sum's rows */
    double *cwork;                        /* the band Cholesky's panels */
    double *wfac;         /* the curvatures W the last factor of P was made with */
    size_t wfac_cap;      /* wfac's length */
    const gmm_laplace_smoother *sm;       /* the square-root form's, or NULL */
    const gmm_laplace_obs *obs;
    const double *wt;     /* the rows' prior weights (NULL: 1), gmm_laplace_set_weights */
    const gmm_lik *lik;
    const gmm_band *Q;
    double b, logq, psi;  /* psi: Psi at the mode */
    double lsum;          /* sum log p at psi()'s last x */
    size_t iter;
    laplace_known known;
    int logdet_here;      /* the last evaluation factored Q for its log-determinant (fQ) */
    laplace_sqrt_end sqrt_end; /* the square-root form's last evaluation */
    gmm_constr *con;  /* constraints A x = 0 (NULL: none) */
    /* the sparse form (gmm_laplace_alloc_sparse; all NULL for the others):
     * P's pattern Q's joined with H'H's, where each Newton step writes Q's
     * entries (qpos) and the rows' pairs (hpos) by position */
    gmm_sparse *P;        /* P = Q + H'WH (+ the pins), values of the last step */
    gmm_sparse *SP;       /* Sigma's entries on P's pattern (gradient, posterior) */
    gmm_sparse *Qpat;     /* Q's pattern: the one evaluations must bring */
    gmm_sparse *SQs;      /* Q^-1's entries on Q's pattern (fQs) */
    gmm_factor *fP;       /* the sparse factor of P */
    gmm_factor *fQs;      /* the sparse factor of Q when log|Q| is computed here (first need) */
    size_t *qpos;         /* Q's nnz: each entry's position in P */
    size_t *hptr;         /* nrows + 1: row i's pairs at hpos[hptr[i] ..) */
    size_t *hpos;         /* the pairs (a, c), a <= c, of a row's entries, row-major: in P */
    size_t *hent, *hlat;  /* the rows the pattern was made for: row i's entries
                           * hent[i] .. hent[i + 1] read the latents hlat[k] */
    const gmm_sparse *Qs; /* the sparse evaluation's Q */
};


/* log p(y_i | f) and its derivatives (gmm_lik_eval), from the row's
 * constants when the caller gave them, with its prior weight when there
 * are weights (gmm_lik_eval_weighted). */
static inline void row_eval(const gmm_laplace *w, size_t i, double f, double out[4], double *dpar)
{
    const gmm_laplace_obs *ob = w->obs;
    double e = ob->e ? ob->e[i] : 1.0;
    if (w->wt)
        gmm_lik_eval_weighted(w->lik, ob->y[i], e, w->wt[i],
                              ob->cst ? ob->cst + i * w->nconst : NULL, f, out, dpar);
    else if (ob->cst)
        gmm_lik_eval_const(w->lik, ob->y[i], e, ob->cst + i * w->nconst, f, out, dpar);
    else
        gmm_lik_eval(w->lik, ob->y[i], e, f, out, dpar);
}

/* What a Newton form's line search evaluates: value() puts Psi at the
 * trial point w->xt = w->x + step w->dx (filled in already) into *Pt,
 * leaving f, g, w and t there; restore() re-evaluates them at w->x after a
 * failed search and may update *Psi.  ctx is the form's own. */
typedef struct {
    gmm_status (*value)(gmm_laplace *w, void *ctx, double step, double *Pt);
    void (*restore)(gmm_laplace *w, void *ctx, double *Psi);
    void *ctx;
} ls_objective;

/* An assembled form of the Newton iterations: the band's (laplace_newton.c)
 * or the sparse one's (laplace_sparse.c), alike but for P's storage.
 *   psi      Psi(x) with f, g, w, t and w->lsum at x (keep: laplace_lik_sum's),
 *            Qx in w->tmp;
 *   factor   P = Q + H'WH at w's weights (clamp: negative ones taken as 0),
 *            plus tau at the constraints' pins, and its Cholesky factor;
 *   constrain  then the constraints' factors from it (constr.h);
 *   constrain_solve  the same and solve v, its solve joined to the
 *            constraints' (NULL: constrain, then solve);
 *   solve    v <- P^-1 v, or Sigma_c v under constraints;
 *   logdet   log|P~| of the last factor;
 *   qdiag    Q(j, j) of the evaluation's Q (the cold start's);
 *   flops    the predicted flops of one factorisation of P;
 *   sigma    after the gradient's selected inverse: Sigma_c(ia, ic) for
 *            row i's coef entries a and c. */
typedef struct {
    double (*psi)(gmm_laplace *w, const double *x, int keep);
    gmm_status (*factor)(gmm_laplace *w, int clamp, double tau);
    gmm_status (*constrain)(gmm_laplace *w, double tau);
    gmm_status (*constrain_solve)(gmm_laplace *w, double tau, double *v);
    gmm_status (*solve)(gmm_laplace *w, double *v);
    double (*logdet)(const gmm_laplace *w);
    double (*qdiag)(const gmm_laplace *w, size_t j);
    double (*flops)(const gmm_laplace *w);
    double (*sigma)(const gmm_laplace *w, size_t i, size_t a, size_t c);
} laplace_form;

/* laplace.c: Newton from x0 (or warm, or 0 or the cold start; obs, Q, lik set) to the mode
 * and, with logq, log q there (logdet_q given); tau at the pins. */
gmm_status laplace_newton_run(gmm_laplace *w, const laplace_form *form, const double *x0,
                              int warm, const gmm_laplace_params *par, double tau,
                              double logdet_q, double *logq);
/* laplace.c, the gradient's shared parts: s_i and z = P^-1 H'(s o t)/2
 * (form->solve); then per row c_i into bbar, shiftbar, parbar, coefbar. */
gmm_status laplace_grad_z(gmm_laplace *w, const laplace_form *form);
void laplace_grad_rows(gmm_laplace *w, const laplace_form *form, double *bbar, double *parbar,
                       double *coefbar, double *shiftbar);
/* sum log p(y_i | f_i) at x, nothing of w changed (draws' weights). */
double laplace_lik_value(const gmm_laplace *w, const double *x);
/* laplace_sparse.c: the draw and posterior solve of the sparse form. */
gmm_status laplace_sparse_draw(gmm_laplace *w, const double *z, double *x, double *logw);
gmm_status laplace_sparse_solve(gmm_laplace *w, double *v);

/* laplace.c: sum log p at x, with f, g, w, t there (keep: the rows' dpar
 * too); Newton's stopping test; the line search of both forms; obs, lik
 * and b made w's problem. */
double laplace_lik_sum(gmm_laplace *w, const double *x, int keep);
/* A workspace with the vectors every form uses (n latents, maxobs rows of
 * width), the rest NULL; NULL + GMM_ENOMEM. */
gmm_laplace *laplace_alloc_vectors(size_t n, size_t maxobs, size_t width);
/* Psi = sum - x'Qx/2 from Qx, which the form has put in w->tmp. */
double laplace_psi_from_qx(gmm_laplace *w, const double *x, double sum);
int laplace_newton_done(double dec, double Psi, double tol, double *best, int *stall);
/* GMM_ECANCEL when par's stop asks for it (before Newton step it), else
 * GMM_OK; both Newton loops poll it. */
gmm_status laplace_stop(const gmm_laplace_params *par, size_t it);
gmm_status laplace_line_search(gmm_laplace *w, const ls_objective *obj, double dec, size_t it,
                               size_t max_iter, double *Psi, double *step, int *final);
gmm_status laplace_set_obs(gmm_laplace *w, const gmm_laplace_obs *obs, const gmm_lik *lik,
                           double b);

#endif
