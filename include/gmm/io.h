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
 * gmm_table_free; NULL on failure).  RFC 4180 quoting (a field may hold
 * commas, doubled quotes and line breaks); LF, CRLF and lone CR line ends;
 * a leading UTF-8 byte-order mark is dropped; blanks around unquoted fields
 * are trimmed; blank (or all-blank) lines are skipped, so a one-column file
 * cannot hold an unquoted empty cell.  A header with no data rows is a
 * valid table with nrow 0 (callers decide).  Errors name the file and line
 * (the line where the row starts): GMM_EIO for an unreadable file
 * ("file: cannot open: <strerror>"); GMM_EPARSE for an empty file (no
 * header), an empty or duplicated header name, a ragged row ("file:L:
 * expected C fields, found F"; gmm_error_index() is the 0-based data row),
 * malformed quoting ("file:L:COL: ..." with COL the 1-based byte column)
 * and a quoted field left open at the end of the file.  Memory: a few
 * allocations, O(file size); time O(file size). */
gmm_status gmm_table_read(const char *path, gmm_table **out);
void gmm_table_free(gmm_table *t);

/* Index of column `name`, or GMM_EPARSE ("file: no column 'name' (columns:
 * a, b, c)"). */
gmm_status gmm_table_column(const gmm_table *t, const char *name, size_t *col);

/* Convert column `col` to doubles (x, nrow entries, caller-allocated).
 * Blanks around a cell are ignored.  A cell that is empty, "NA", "NaN" or
 * "nan" becomes NAN when allow_missing (else "file:L: column 'y': empty
 * cell" / "...: missing value 'NA'"); any other cell must be one finite
 * strtod number ("file:L: column 'y': 'abc' is not a number", "...: 'inf'
 * is not finite"; overflow is not finite, underflow to a subnormal is
 * accepted).  GMM_EPARSE with gmm_error_index() the 0-based row; GMM_EDIM
 * for col >= ncol.  strtod is locale-dependent: callers keep LC_NUMERIC "C"
 * (the CLI does).  O(nrow). */
gmm_status gmm_table_column_double(const gmm_table *t, size_t col, int allow_missing,
                                   double *x);

/* ---- atomic output ------------------------------------------------------- */

/* An output stream that becomes `path` only on commit: data go to a temporary
 * file ".NAME.tmpXXXXXX" in the same directory, and commit flushes, fsyncs
 * and renames it over path (then fsyncs the directory).  Abort leaves path
 * untouched and removes the temporary; a crash leaves path untouched (and
 * the temporary behind).  The new file gets mode 0666 & ~umask.  path NULL
 * or "-" means stdout (commit then only flushes; abort cannot unwrite).
 * Errors are GMM_EIO with the path and strerror text (open: cannot create
 * the temporary; commit: write/fsync/rename failures, after which the
 * temporary is removed), or GMM_ENOMEM. */
typedef struct gmm_outfile gmm_outfile;
gmm_status gmm_outfile_open(const char *path, gmm_outfile **out);
FILE *gmm_outfile_stream(gmm_outfile *o);
gmm_status gmm_outfile_commit(gmm_outfile *o); /* frees o */
void gmm_outfile_abort(gmm_outfile *o);         /* frees o; NULL-safe */

#endif
