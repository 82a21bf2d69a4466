/* qfile.h -- the file of a vi result's q(x) = N(m, (L L')^-1) (OUT.q.csv
 * beside the model file): one row per latent i (0-based),
 *
 *   index,mean,l0,l1,...,lb     l_j = L(i, i - j), NaN above the corner
 *
 * with every number as %.17g, so that a read gives back the same doubles.
 * The file holds plain arrays, m and L's band: the whole-model layer moves
 * them in and out of a gmm_vi (model.h: gmm_mdl_load_vi, gmm_mdl_save_vi). */
#ifndef GMM_QFILE_H
#define GMM_QFILE_H

#include <stddef.h>
#include <stdio.h>

#include "gmm/band.h"
#include "gmm/io.h"
#include "gmm/modelfile.h"
#include "gmm/status.h"

/* Write mean (n) and L (n x n LOWER band holding bandwidth b) to f.
 * GMM_EINVAL (NULL, L not LOWER or not n x n); write errors are left on f
 * (ferror) for the caller's flush to report. */
gmm_status gmm_qfile_write(FILE *f, size_t n, size_t b, const double *mean, const gmm_band *L);

/* Read path into mean (n) and L (caller's LOWER band, n x n, holding
 * bandwidth b): n the model's latents, b the model file's q bandwidth.  The table's read
 * errors (gmm_table_read: GMM_EIO, GMM_EPARSE at file:line: column);
 * GMM_EPARSE when the file is not n rows of b + 3 columns, naming both
 * shapes; GMM_EPARSE at the row for a missing or malformed mean or l_j below
 * the corner; GMM_EINVAL for a NULL or a band of another shape. */
gmm_status gmm_qfile_read(const char *path, size_t n, size_t b, double *mean, gmm_band *L);

/* The q file's name beside the model file `model_path`: OUT.json ->
 * OUT.q.csv, another name gets .q.csv appended.  Allocated (gmm_free), NULL
 * when out of memory. */
char *gmm_qfile_path(const char *model_path);

/* A vi result's model file (gmm_model_read) into *mf: GMM_EPARSE "PATH:
 * not a vi result (no \"variational\")" when it has no q; gmm_model_read's
 * errors.  Free *mf with gmm_model_free either way. */
gmm_status gmm_qfile_read_result(const char *path, gmm_model *mf);

/* Where a vi result goes: *qpath (allocated, gmm_free) the q file beside
 * the model file path (gmm_qfile_path), after checking that path can be
 * written (gmm_outfile_check_kind); *in_place 1 when path is written in
 * place (stdout, a device, a FIFO), which has no "beside" (qpath is then
 * not checked), else 0 and qpath checked (gmm_outfile_check).  Errors:
 * those checks', GMM_ENOMEM (*qpath NULL). */
gmm_status gmm_qfile_targets(const char *path, char **qpath, int *in_place);

/* The model (out, naming q's file) to path and q (mean, L as
 * gmm_qfile_write's) to qpath, opened and written as members of the output
 * set `set` (io.h: gmm_outset; q first), not committed: the caller commits
 * them with its other outputs, so that a write error (a full disk)
 * replaces none.  gmm_outset_open's, gmm_qfile_write's and
 * gmm_model_write's errors. */
gmm_status gmm_qfile_save(const gmm_model *out, gmm_outset *set, const char *path,
                          const char *qpath, size_t n, size_t b, const double *mean,
                          const gmm_band *L);

#endif
