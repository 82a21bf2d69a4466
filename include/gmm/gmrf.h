/* gmrf.h -- Gaussian Markov random fields on graphs: a precision matrix Q
 * over the nodes of a graph (graph.h) with its derivative in each precision
 * parameter (paper, sections 2, 3.1 and 5.3).  gmm_gmrf_alloc orders the
 * graph once (RCM) and maps every edge to its slot of the permuted band;
 * gmm_gmrf_assemble fills Q per parameter value in O(n bw + m), never
 * reordering and never forming a dense n x n matrix.
 */
#ifndef GMM_GMRF_H
#define GMM_GMRF_H

#include <stddef.h>

#include "gmm/band.h"
#include "gmm/graph.h"
#include "gmm/marglik.h"
#include "gmm/spec.h"
#include "gmm/status.h"

/* MEMORY.  The band of Q holds (bw + 1) n doubles; the marginal likelihood
 * keeps about five such bands (Q, its factor, the posterior factor, Qbar and
 * the inverse subset).  Bands above a limit (GMM_GMRF_BAND_LIMIT, 1 GiB per
 * band, unless the caller passes another) are refused with GMM_ENOMEM and a
 * message giving n, bandwidth and bytes, before anything large is allocated. */
#define GMM_GMRF_BAND_LIMIT ((size_t)1 << 30)

/* NUMBERING.  Q, Qbar and every vector handed to the marginal likelihood are
 * in the PERMUTED numbering: graph node v is row iperm[v] of Q; row r of Q is
 * graph node perm[r].
 *
 * PRECISION SPECS (the grammar of spec.h).  A sum of terms,
 * each one of the families below; parameters are named
 * `<leaf index>.<family>.<param>`, e.g. "0.edge-ou.lengthscale".  Missing
 * arguments take the defaults shown.  Products are not defined for
 * precisions (a product of precision matrices is not a precision of the
 * product kernel): a '*' is a GMM_EPARSE pointing at the '*'.
 *
 *   edge-ou(variance = 1, lengthscale = 1)
 *       The paper's Matern-1/2 pair precision summed over edges, in its
 *       corrected form (see the paper's README: the text's "lambda" is a
 *       correlation rho, not sigma^2 rho).  Each edge (i, j) of length d adds
 *
 *           1 / (variance (1 - rho^2)) [[1, -rho], [-rho, 1]]  -  1/(2 variance) I
 *
 *       on rows/columns (i, j), rho = exp(-d / lengthscale), 1 - rho^2
 *       computed as -expm1(-2 d / lengthscale) (exact for short edges).  An
 *       isolated node gets 1 / variance.  Edges without lengths have d = 1.
 *       Q is positive definite; `variance` scales the whole precision, it is
 *       not a node's marginal variance (gmrf.c).
 *   laplacian(precision = 1, ridge = 1)
 *       precision * (D - A) + ridge * I: the graph Laplacian (unweighted:
 *       lengths are ignored; D the degrees, A the adjacency) plus a ridge.
 *       ridge may be 0 only when another term makes Q definite.
 *
 * Parameter domains: every parameter finite and > 0, except ridge >= 0.
 * Values outside are GMM_EPARSE in a spec and GMM_EDOM at evaluation (an
 * ordinary outcome a line search handles). */

/* A precision family (one row of the table in src/model/gmrf/gmrf.c). */
typedef struct gmm_precision_type gmm_precision_type;

/* The symbolic model.  Read-only for callers; freed with gmm_gmrf_free. */
typedef struct {
    size_t n;            /* nodes (rows of Q) */
    size_t nedge;        /* distinct edges */
    size_t bw;           /* lower bandwidth of Q after RCM */
    size_t bw_before;    /* lower bandwidth in the graph's own numbering */
    size_t *perm;        /* n: perm[row] = graph node */
    size_t *iperm;       /* n: iperm[graph node] = row */
    /* Edge e joins rows ehi[e] > elo[e] (permuted), length elen[e]; sorted
     * by (elo, ehi) so assembly walks the band column by column. */
    size_t *ehi, *elo;
    double *elen;
    size_t *deg;         /* n: degree of each row's node */
    /* Terms of the sum and their parameters. */
    size_t nterm;
    const gmm_precision_type **term;
    size_t *term_off;    /* nterm: offset of the term's parameters in theta */
    size_t nparam;
    char **param_name;   /* nparam: "<i>.<family>.<param>" */
    double *param_value; /* nparam: values given in the spec, or defaults */
    int *param_zero_ok;  /* nparam: nonzero when 0 is allowed (ridge) */
} gmm_gmrf;

/* The symbolic step: check the spec (text: the spec's source, used to
 * point at a '*'; may be NULL), order g by RCM, translate the edges to band
 * slots.  g is only read (the model keeps no pointer to it).  Errors:
 * GMM_EPARSE with gmm_error_index() the offset in the spec text (unknown
 * family or parameter, a repeated parameter, a value out of its domain, a
 * product); GMM_ENOMEM.  O(n + m log dmax). */
gmm_status gmm_gmrf_alloc(const gmm_graph *g, const gmm_spec_node *spec, const char *text,
                          gmm_gmrf **out);
void gmm_gmrf_free(gmm_gmrf *m); /* NULL-safe */

/* The name of the i-th precision family of the table (NULL past the end),
 * for listings. */
const char *gmm_gmrf_family_at(size_t i);
/* The family name of term t of m ("edge-ou", ...), NULL past the last. */
const char *gmm_gmrf_term_family(const gmm_gmrf *m, size_t t);

/* Index of the parameter with this full name, or GMM_EINVAL. */
gmm_status gmm_gmrf_param_find(const gmm_gmrf *m, const char *name, size_t *k);

/* GMM_OK when every theta[k] (nparam values) is in its domain; GMM_EDOM
 * naming the first one that is not. */
gmm_status gmm_gmrf_theta_check(const gmm_gmrf *m, const double *theta);

/* Bytes of one band of Q ((bw + 1) n doubles; SIZE_MAX on overflow). */
size_t gmm_gmrf_band_bytes(const gmm_gmrf *m);
/* GMM_OK when a band of Q fits in `limit` bytes (0: GMM_GMRF_BAND_LIMIT),
 * else GMM_ENOMEM with a message giving n, bandwidth and bytes. */
gmm_status gmm_gmrf_band_check(const gmm_gmrf *m, size_t limit);
/* A zeroed SYMMETRIC band n x n with lower bandwidth bw, after
 * gmm_gmrf_band_check(m, limit); NULL and GMM_ENOMEM (with the numbers) when
 * refused or when the allocation fails. */
gmm_band *gmm_gmrf_band_alloc(const gmm_gmrf *m, size_t limit);

/* One line for --verbose: "n = N nodes, E edges, bandwidth B (B0 before
 * reordering), band of Q: X MB", into buf (size bytes, truncated). */
void gmm_gmrf_describe(const gmm_gmrf *m, char *buf, size_t size);

/* The numeric step: Q = sum of the terms at theta (nparam values).  Q
 * SYMMETRIC, n x n, kl == m->bw (GMM_EDIM otherwise); overwritten.  GMM_EDOM
 * for theta outside its domain (Q then unspecified).  O(n bw + m). */
gmm_status gmm_gmrf_assemble(const gmm_gmrf *m, const double *theta, gmm_band *Q);

/* Reverse mode: thetabar[k] += sum over stored (i, j) of Qbar(i, j)
 * dQ_stored(i, j)/dtheta_k, with Qbar in band.h's symmetric convention (an
 * off-diagonal Qbar(i, j), i > j, already stands for both mirrored entries:
 * nothing is doubled).  Qbar SYMMETRIC with kl >= m->bw (entries outside
 * Q's band are not read).  O(n + m). */
gmm_status gmm_gmrf_assemble_rev(const gmm_gmrf *m, const double *theta, const gmm_band *Qbar,
                                 double *thetabar);

/* The same for Q's stored entries kept elsewhere (the sparse path,
 * sparse.h): val[pos[r]] += Q(r, r) for each row r and val[pos[n + e]] +=
 * Q(ehi[e], elo[e]) for each edge e (the permuted numbering), the values
 * gmm_gmrf_assemble puts in the band, to the bit.  val is added to, not
 * cleared; the positions may repeat only where the caller wants the sums.
 * GMM_EDOM as there.  O(n + m). */
gmm_status gmm_gmrf_assemble_at(const gmm_gmrf *m, const double *theta, const size_t *pos,
                                double *val);
/* Its reverse: thetabar += sum over the n + m entries of valbar[pos[.]]
 * times the entry's derivative (symmetric convention, as
 * gmm_gmrf_assemble_rev's).  O(n + m). */
gmm_status gmm_gmrf_assemble_at_rev(const gmm_gmrf *m, const double *theta, const size_t *pos,
                                    const double *valbar, double *thetabar);

/* ---- data on nodes -------------------------------------------------------- */

/* Observations of the field at nodes, for marglik.h: the selection E whose
 * row k picks row offset[k] of Q (width 1, coef {1.0}, coef_stride 0).
 * `obs` points into the arrays below; do not copy the struct. */
typedef struct {
    gmm_obs obs;
    size_t *offset;   /* nobs permuted rows */
    double *y;        /* nobs outcomes */
    size_t *row;      /* nobs: data row each observation came from */
} gmm_gmrf_obs;

/* Build the observations from nrow data rows: node[r] the graph node of row
 * r (gmm_graph_attach_nodes), y[r] its outcome; rows whose y is NaN are
 * skipped (latent nodes without data).  Several rows may share a node.
 * GMM_EINVAL for a node >= n or an infinite y; GMM_ENOMEM.  Freed with
 * gmm_gmrf_obs_free. */
gmm_status gmm_gmrf_obs_alloc(const gmm_gmrf *m, size_t nrow, const size_t *node,
                              const double *y, gmm_gmrf_obs **out);
void gmm_gmrf_obs_free(gmm_gmrf_obs *o);

#endif
