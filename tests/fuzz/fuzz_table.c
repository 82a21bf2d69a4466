/* fuzz_table.c -- the CSV reader (gmm_table_read_stream, the code behind
 * gmm_table_read) and the numeric conversion of every column: any input is
 * a table or a located GMM_EPARSE, never a crash, a leak or undefined
 * behaviour; a table has sane shape and line numbers; a numeric column
 * holds finite numbers or NaN, and its collision count is consistent. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "gmm/alloc.h"
#include "gmm/io.h"

static void check_table(const gmm_table *t)
{
    fuzz_require(t->ncol >= 1);
    for (size_t c = 0; c < t->ncol; c++) {
        fuzz_require(t->header[c] && t->header[c][0]);
        size_t col = (size_t)-1;
        /* Header names are unique: the lookup finds this very column. */
        fuzz_require(gmm_table_column(t, t->header[c], &col) == GMM_OK && col == c);
    }
    for (size_t r = 0; r < t->nrow; r++) {
        fuzz_require(t->line[r] >= 2);
        fuzz_require(r == 0 || t->line[r] > t->line[r - 1]);
        for (size_t c = 0; c < t->ncol; c++)
            fuzz_require(t->cell[r][c] != NULL);
    }
    double *x = gmm_malloc(t->nrow ? t->nrow : 1, sizeof *x);
    if (!x)
        return;
    for (size_t c = 0; c < t->ncol; c++) {
        for (int allow_missing = 0; allow_missing < 2; allow_missing++) {
            gmm_status st = gmm_table_column_double(t, c, allow_missing, x);
            fuzz_require(st == GMM_OK || st == GMM_EPARSE);
            if (st != GMM_OK) {
                fuzz_require(gmm_error_index() < t->nrow);
                fuzz_require(strstr(gmm_error_message(), t->file) == gmm_error_message());
                continue;
            }
            size_t missing = 0;
            for (size_t r = 0; r < t->nrow; r++) {
                fuzz_require(isfinite(x[r]) || (allow_missing && isnan(x[r])));
                missing += isnan(x[r]) != 0;
            }
            size_t n = 0, a = 0, b = 0;
            st = gmm_table_column_collisions(t, c, x, &n, &a, &b);
            fuzz_require(st == GMM_OK || st == GMM_ENOMEM);
            if (st != GMM_OK)
                continue;
            fuzz_require(n < t->nrow - missing || n == 0);
            if (n) {
                fuzz_require(a < b && b < t->nrow && x[a] == x[b]);
                fuzz_require(strcmp(t->cell[a][c], t->cell[b][c]) != 0);
            } else {
                fuzz_require(a == GMM_NO_INDEX && b == GMM_NO_INDEX);
            }
        }
    }
    gmm_free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f)
        return 0;
    gmm_table *t = NULL;
    gmm_status st = gmm_table_read_stream(f, "fuzz.csv", &t);
    fclose(f);
    fuzz_require(st == GMM_OK || st == GMM_EPARSE || st == GMM_ENOMEM);
    if (st == GMM_OK) {
        fuzz_require(t && !strcmp(t->file, "fuzz.csv"));
        check_table(t);
    } else {
        fuzz_require(!t);
        fuzz_require(!strncmp(gmm_error_message(), "fuzz.csv", 8));
    }
    gmm_table_free(t);
    return 0;
}
