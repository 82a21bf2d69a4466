/* fit_impl.h -- what fit.c (the L-BFGS runs), fit_cert.c (the test at the
 * returned point) and fit_info.c (the observed information) share: one
 * run's state and its evaluation on the optimisation scale.  Private to
 * src/infer/. */
#ifndef GMM_FIT_IMPL_H
#define GMM_FIT_IMPL_H

#include "gmm/fit.h"
#include "infer_impl.h"

/* The central differences' step, CERT_STEP max(1, |u_k|) (fit_cert.c). */
#define CERT_STEP 1e-4

typedef struct {
    gmm_objective *obj;
    const gmm_fit_params *par;
    size_t nfree;
    const size_t *idx;   /* free variable k is parameter idx[k] */
    double *theta;       /* nparam, natural scale (fixed entries preset) */
    double *grad;        /* nparam, objective's gradient */
    infer_scale sc;      /* u, the optimisation scale (infer_impl.h) */
    infer_lbfgs lb;      /* the run, its anchor (the last accepted iterate) */
    size_t start, evals;
    size_t iter0;        /* scoring steps before L-BFGS (the progress' count) */
    int cancelled;
    int domain_hit;      /* a trial point was refused by the objective ... */
    char domain_msg[GMM_ERROR_MAX]; /* ... with this message (the last one) */
    gmm_status fail_status;
} run_ctx;

/* theta's free entries from u; 0 (and fail_status set) when a variable
 * leaves its domain in floating point.  -loglik and its gradient on the
 * optimisation scale; 0 on a domain failure (fit_eval.c). */
int fit_map_theta(run_ctx *c, const double *u);
int fit_eval_min(run_ctx *c, const double *u, double *f, double *g);

/* An accepted iterate u (-loglik f, gradient norm gnorm, iteration iter)
 * to params->progress: nonzero when the fit is to stop (c->cancelled). */
int fit_report(run_ctx *c, const double *u, double f, double gnorm, size_t iter);

/* fit_scoring.c (SCORING): Newton steps on obj->info from u (nfree; the
 * last accepted point on return, *fu its -loglik and *gnorm its gradient's
 * norm when *iters > 0 or *done).  *done 1 when the decrement fell to
 * SCORE_GAIN (fit then tests the point), 0 when the steps stopped short or
 * could not start (L-BFGS goes on from u).  GMM_ENOMEM. */
gmm_status fit_scoring(run_ctx *c, double *u, double *fu, double *gnorm, size_t *iters,
                       int *done);

/* fit_cert.c: H = the Hessian of -loglik over act[0 .. na) at u0 and its
 * Cholesky factor (*pd 0 when not definite, *bad the pivot's variable); the
 * standard errors from that factor; the test at the best point u. */
int fit_hessian_chol(run_ctx *c, const double *u0, const size_t *act, size_t na, double step,
                     double *H, double *wu, double *gp, double *gm, int *pd, size_t *bad);
/* H (na x na, symmetric, lower part read) into its lower Cholesky factor
 * in place: 1, or 0 when it is not positive definite (*bad the failing
 * pivot).  With L from it and g (nfree): the decrement |L^-1 g_act|^2 / 2
 * returned and the Newton step -H^-1 g_act into dir (nfree, 0 off the
 * active set act[0 .. na)); z: na doubles. */
int fit_chol(double *H, size_t na, size_t *bad);
double fit_newton_dir(size_t nf, const size_t *act, size_t na, const double *L, const double *g,
                      double *z, double *dir);
void fit_std_errors_from(run_ctx *c, const size_t *act, size_t na, const double *L, double *v,
                         double *z, double *se);
gmm_status fit_certify(run_ctx *c, double *u, const double *init, gmm_fit_result *res);

#endif
