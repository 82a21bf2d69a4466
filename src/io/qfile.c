/* qfile.c -- a vi result's q in its CSV file (qfile.h). */
#include "gmm/qfile.h"

#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"

gmm_status gmm_qfile_write(FILE *f, size_t n, size_t b, const double *mean, const gmm_band *L)
{
    if (!f || !mean || !L || L->kind != GMM_BAND_LOWER || L->n != n)
        return gmm_error(GMM_EINVAL, "q file: NULL argument or L not an n x n lower band");
    fputs("index,mean", f);
    for (size_t j = 0; j <= b; j++)
        fprintf(f, ",l%zu", j);
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%zu,%.17g", i, mean[i]);
        for (size_t j = 0; j <= b; j++) {
            if (j <= i)
                fprintf(f, ",%.17g", gmm_band_get(L, i, i - j));
            else
                fputs(",NaN", f);
        }
        fputc('\n', f);
    }
    return GMM_OK; /* write errors stay on f, for the caller's flush to report */
}

gmm_status gmm_qfile_read(const char *path, size_t n, size_t b, double *mean, gmm_band *L)
{
    if (!path || !mean || !L || L->kind != GMM_BAND_LOWER || L->n != n)
        return gmm_error(GMM_EINVAL, "q file: NULL argument or L not an n x n lower band");
    gmm_table *t = NULL;
    gmm_status s = gmm_table_read(path, &t);
    if (s != GMM_OK)
        return s;
    if (t->nrow != n || t->ncol != b + 3) {
        s = gmm_error(GMM_EPARSE,
                      "%s: %zu rows of %zu columns; the model has %zu latents and q bandwidth "
                      "%zu (%zu columns: index,mean,l0..l%zu)",
                      path, t->nrow, t->ncol, n, b, b + 3, b);
        gmm_table_free(t);
        return s;
    }
    double *col = gmm_malloc(n ? n : 1, sizeof *col);
    if (!col) {
        gmm_table_free(t);
        return gmm_error(GMM_ENOMEM, "out of memory for %s", path);
    }
    s = gmm_table_column_double(t, 1, 0, mean);
    for (size_t j = 0; s == GMM_OK && j <= b; j++) {
        /* l_j = L(i, i - j): missing (NaN) above the corner */
        if ((s = gmm_table_column_double(t, 2 + j, 1, col)) != GMM_OK)
            break;
        for (size_t i = j; i < n; i++)
            *gmm_band_ptr(L, i, i - j) = col[i];
    }
    gmm_free(col);
    gmm_table_free(t);
    return s;
}

char *gmm_qfile_path(const char *model_path)
{
    size_t ol = strlen(model_path);
    char *q = gmm_malloc(ol + 7, 1);
    if (!q)
        return NULL;
    size_t stem = ol > 5 && !strcmp(model_path + ol - 5, ".json") ? ol - 5 : ol;
    memcpy(q, model_path, stem);
    strcpy(q + stem, ".q.csv");
    return q;
}

gmm_status gmm_qfile_read_result(const char *path, gmm_model *mf)
{
    gmm_status s = gmm_model_read(path, mf);
    if (s == GMM_OK && !mf->has_vi)
        s = gmm_error(GMM_EPARSE, "%s: not a vi result (no \"variational\")", path);
    return s;
}

gmm_status gmm_qfile_targets(const char *path, char **qpath, int *in_place)
{
    *in_place = 0;
    if (!(*qpath = gmm_qfile_path(path)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    gmm_status s = gmm_outfile_check_kind(path, in_place);
    if (s != GMM_OK || *in_place)
        return s;
    return gmm_outfile_check(*qpath);
}

gmm_status gmm_qfile_save(const gmm_model *out, gmm_outset *set, const char *path,
                          const char *qpath, size_t n, size_t b, const double *mean,
                          const gmm_band *L)
{
    gmm_outfile *oq = NULL, *om = NULL;
    gmm_status s;
    if ((s = gmm_outset_open(set, qpath, &oq)) == GMM_OK &&
        (s = gmm_qfile_write(gmm_outfile_stream(oq), n, b, mean, L)) == GMM_OK &&
        (s = gmm_outset_open(set, path, &om)) == GMM_OK)
        s = gmm_model_write(out, gmm_outfile_stream(om), path);
    return s;
}
