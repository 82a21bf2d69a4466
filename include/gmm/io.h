/* io.h -- reading CSV into a named-column table, and writing output files
 * atomically.  Every data error names file, line and column.
 *
 * Implemented in src/io/ (libcsv for CSV).  Library code: returns status
 * codes with a message recorded by gmm_error(); never prints.
 */
#ifndef GMM_IO_H
#define GMM_IO_H

#include <stdio.h>
#include <stddef.h>

#include "gmm/status.h"

/* A CSV file with one header row, kept as strings: a column is converted to
 * numbers only when a caller asks for it, so the error can name the column
 * the caller cares about.  Row r (0-based, excluding the header) came from
 * line table->line[r] of the file (1-based, the header being line 1 unless
 * blank lines precede it). */
typedef struct {
    char *file;        /* name used in messages ("-" shown as "<stdin>") */
    size_t ncol, nrow;
    char **header;     /* ncol names */
    char ***cell;      /* cell[r][c]: NUL-terminated, never NULL */
    size_t *line;      /* nrow source line numbers */
} gmm_table;

/* Read a whole CSV file ("-" = stdin) into a new table (*out, freed with
 * gmm_table_free).  Errors (GMM_EIO, GMM_EPARSE) name the file and line: an
 * unreadable file, an empty file (no header), an empty header name, a
 * duplicated header name, a ragged row ("file:L: expected C fields, found
 * F").  Blank lines are skipped. */
gmm_status gmm_table_read(const char *path, gmm_table **out);
void gmm_table_free(gmm_table *t);

/* Index of column `name`, or GMM_EPARSE ("file: no column 'name' (columns:
 * a, b, c)"). */
gmm_status gmm_table_column(const gmm_table *t, const char *name, size_t *col);

/* Convert column `col` to doubles (x, nrow entries).  A cell that is empty,
 * "NA", "NaN" or "nan" becomes NAN when allow_missing (else an error); any
 * other cell must be a finite number ("file:L: column 'y': 'abc' is not a
 * number", "...: 'inf' is not finite"). */
gmm_status gmm_table_column_double(const gmm_table *t, size_t col, int allow_missing,
                                   double *x);

/* ---- atomic output ------------------------------------------------------- */

/* An output stream that becomes `path` only on commit: data go to a temporary
 * file in the same directory, and commit flushes, fsyncs and renames it over
 * path.  Abort (or a crash) leaves path untouched and removes the temporary.
 * path NULL or "-" means stdout (commit then only flushes). */
typedef struct gmm_outfile gmm_outfile;
gmm_status gmm_outfile_open(const char *path, gmm_outfile **out);
FILE *gmm_outfile_stream(gmm_outfile *o);
gmm_status gmm_outfile_commit(gmm_outfile *o); /* frees o */
void gmm_outfile_abort(gmm_outfile *o);         /* frees o; NULL-safe */

#endif
