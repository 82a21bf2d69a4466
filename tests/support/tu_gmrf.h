/* tu_gmrf.h -- a graph GMRF observed with Gaussian noise as one objective
 * (latent.h + likelihood.h + problem.h), for the graph regression tests.
 * Header-only.  The struct must stay where it is while the problem lives
 * (the problem borrows its likelihood). */
#ifndef GMM_TU_GMRF_H
#define GMM_TU_GMRF_H

#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"

typedef struct {
    gmm_latent *lat;
    gmm_lik lik;
    gmm_problem *p;
} tu_gprob;

static inline void tu_gmrf_problem_free(tu_gprob *b)
{
    gmm_problem_free(b->p);
    gmm_latent_free(b->lat);
    b->p = NULL;
    b->lat = NULL;
}

/* Rows r observe node[r] (graph numbering) with outcome y[r] (NAN: none);
 * theta = (precision parameters, likelihood.variance starting at noise). */
static inline gmm_status tu_gmrf_problem(const gmm_gmrf *m, size_t nrow, const size_t *node,
                                         const double *y, double noise, tu_gprob *b)
{
    b->lat = NULL;
    b->p = NULL;
    gmm_status st = gmm_lik_parse("gaussian", &b->lik);
    if (st)
        return st;
    b->lik.par[0] = noise;
    if (!(noise > 0.0))
        return gmm_error(GMM_EINVAL, "noise %g must be > 0", noise);
    if ((st = gmm_latent_gmrf_alloc(m, nrow, node, &b->lat)) ||
        (st = gmm_problem_alloc(b->lat, &b->lik, y, NULL, 0, 0.0, &b->p)))
        tu_gmrf_problem_free(b);
    return st;
}

#endif
