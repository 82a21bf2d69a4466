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
 * malformed quoting ("file:L:COL: ..." with COL the 1-based byte column),
 * a NUL byte anywhere ("file:L:COL: NUL byte (not a text file? ...)": a
 * cell is a C string, so "1\0junk" would otherwise read as "1") and a
 * quoted field left open at the end of the file.  Memory: a few
 * allocations, O(file size); time O(file size). */
gmm_status gmm_table_read(const char *path, gmm_table **out);
/* The same from an open stream, read to its end and not closed; `name`
 * (NULL: "<input>") is the file named in messages and in t->file. */
gmm_status gmm_table_read_stream(FILE *f, const char *name, gmm_table **out);
void gmm_table_free(gmm_table *t);

/* Options of gmm_table_read_opts. */
#define GMM_TABLE_COMMENT_MAX 256
typedef struct {
    int comments;  /* skip comment lines: a '#' in column 1 where a row could start (before
                    * the header, between rows, at the end; not inside a quoted field) */
    /* Called, if not NULL, with each comment line's text from its '#' (line end excluded,
     * cut to GMM_TABLE_COMMENT_MAX - 1 bytes) and its 1-based line number. */
    void (*on_comment)(void *user, const char *text, size_t line);
    void *user;
} gmm_table_opts;

/* gmm_table_read with options (opts NULL: none, as gmm_table_read); the
 * lines numbers in t->line and in messages count comment lines. */
gmm_status gmm_table_read_opts(const char *path, const gmm_table_opts *opts, gmm_table **out);

/* A new last column `name` (copied) whose row r holds the cells of columns
 * col[0 .. nc-1] joined by ':' (the interaction a:b of factors a and b: one
 * level per observed combination), its index into *out.  Pointers into the
 * old header and rows (t->cell[r]) are invalidated; the cells stay.
 * GMM_EINVAL (NULL, nc 0, a column out of range), GMM_ENOMEM. */
gmm_status gmm_table_join_column(gmm_table *t, const char *name, const size_t *col, size_t nc,
                                 size_t *out);

/* Index of column `name`, or GMM_EPARSE ("file: no column 'name' (columns:
 * a, b, c)"). */
gmm_status gmm_table_column(const gmm_table *t, const char *name, size_t *col);

/* Convert column `col` to doubles (x, nrow entries, caller-allocated).
 * Blanks around a cell are ignored.  A cell that is empty, "NA", "NaN" or
 * "nan" becomes NAN when allow_missing (else "file:L: column 'y': empty
 * cell" / "...: missing value 'NA'"); any other cell must be one finite
 * decimal number, [+-] digits [. digits] [e [+-] digits] (or .digits):
 * "file:L: column 'y': 'abc' is not a number", "...: '0x10' is not a
 * decimal number" (strtod's hexadecimal is refused, as are "nan(...)"
 * and other spellings of NaN), "...: 'inf' is not finite" (also
 * "Infinity" and overflow such as 1e999); underflow to a subnormal or zero
 * is accepted.  GMM_EPARSE with gmm_error_index() the 0-based row; GMM_EDIM
 * for col >= ncol.  strtod is locale-dependent: callers keep LC_NUMERIC "C"
 * (the CLI does).  O(nrow). */
gmm_status gmm_table_column_double(const gmm_table *t, size_t col, int allow_missing,
                                   double *x);

/* Nonzero when cell (r, col) reads as missing in gmm_table_column_double
 * (empty, "NA", "NaN", "nan", blanks around ignored); 0 out of range. */
int gmm_table_cell_missing(const gmm_table *t, size_t r, size_t col);
/* Keep the rows r with keep[r] nonzero (nrow flags), in their order, and
 * drop the others in place: nrow, cell and line shrink together, so later
 * messages still name each kept row's source line (the dropped cells stay
 * allocated until gmm_table_free).  O(nrow). */
void gmm_table_keep_rows(gmm_table *t, const unsigned char *keep);
/* Distinct decimal numbers in column `col` that read as the same double --
 * x = 1e16 + year turns 2001 and 2002 into one input -- so that callers can
 * warn before they merge rows.  x is the column as gmm_table_column_double
 * gave it (rows with a non-finite x are skipped).  Two cells are the same
 * number when they are as decimals ("1", "1.0", "10e-1", "-0" and "0"
 * agree), so a repeated input is never a collision.  *count is the number
 * of decimals lost: for every double that k > 1 distinct decimals read as,
 * k - 1.  *row_a < *row_b (0-based rows; t->line[] gives the lines) are one
 * example: two different numbers with the same double, row_b the earliest
 * row in the file where such a merge shows; both GMM_NO_INDEX when *count
 * is 0.  GMM_EINVAL (NULL), GMM_EDIM (col >= ncol), GMM_ENOMEM.  Memory
 * 8 nrow bytes, plus 24 per row whose double is repeated; time
 * O(nrow log nrow). */
gmm_status gmm_table_column_collisions(const gmm_table *t, size_t col, const double *x,
                                       size_t *count, size_t *row_a, size_t *row_b);

/* ---- numbers as text ------------------------------------------------------ */

/* Room for any double as gmm_fmt_g17 writes it, with its NUL. */
#define GMM_FMT_G17_SIZE 32

/* x into buf (at least GMM_FMT_G17_SIZE bytes) exactly as
 * snprintf(buf, size, "%.17g", x) writes it in the C locale: 17 significant
 * digits correctly rounded (ties to even), so every double round-trips;
 * trailing zeros dropped, "1e+20", "-0", "inf", "nan".  Returns the length
 * (without the NUL).  The numbers of draws files, where printf's general
 * conversion cost as much as the sampling: for 1e-16 <= |x| < 2^127 it
 * forms the digits with 128-bit integers (src/io/numfmt.c), elsewhere it
 * calls snprintf. */
size_t gmm_fmt_g17(double x, char *buf);

/* ---- CSV cells out (csv_cells.c) ----------------------------------------- */

/* A CSV field, quoted when it needs to be (RFC 4180): commas, quotes,
 * line breaks, or blanks at either end (which readers would trim). */
void gmm_csv_put_field(FILE *f, const char *s);
/* A number as R's write.csv would read it back exactly: %.17g, NA for
 * NaN, Inf and -Inf. */
void gmm_csv_put_number(FILE *f, double x);

/* ---- output files -------------------------------------------------------- */

/* An output stream that becomes `path` only on commit, and never damages
 * what path names (symlinks at its last component followed; the rules per
 * kind of target: outfile.c).  A regular file or nothing yet: written to a
 * temporary beside it and renamed over it on commit, so a reader sees the
 * old file or the whole new one; abort or a crash leaves the target
 * untouched; a replaced file keeps its permission bits; a target that is
 * not writable is refused, as a shell's '>' would.  A device, a FIFO or
 * anything reached through /proc (/dev/stdout): written in place (abort
 * cannot unwrite what was flushed).  A directory is refused, a socket
 * cannot be opened.  path NULL or "-" means stdout (commit only flushes).
 * Errors are GMM_EIO and name the user's path, never the temporary:
 * "PATH: cannot write: <strerror>" when it cannot be opened (as
 * gmm_outfile_check) or renamed, "PATH: write error: <strerror>" when a
 * write, flush, fsync or close fails at commit ("<stdout>: write error:
 * ..." for stdout; the temporary is removed); GMM_ENOMEM. */
typedef struct gmm_outfile gmm_outfile;
gmm_status gmm_outfile_open(const char *path, gmm_outfile **out);
FILE *gmm_outfile_stream(gmm_outfile *o);
gmm_status gmm_outfile_commit(gmm_outfile *o); /* frees o */
void gmm_outfile_abort(gmm_outfile *o);         /* frees o; NULL-safe */

/* Can gmm_outfile_open(path) be expected to succeed?  Call it before long
 * work so that a bad -o is reported at once.  Checks, without creating
 * anything: path is a file name (not "" nor ending in '/'), its links lead
 * somewhere (ELOOP, ENOTDIR, EACCES otherwise), the target is not a
 * directory, an existing target is writable, and the directory that will
 * hold the temporary exists and is writable and searchable (for the
 * effective user: root passes permission bits, not a read-only file
 * system).  GMM_OK for NULL and "-" (stdout).  GMM_EIO "PATH: cannot write:
 * <strerror>" ("out/m.json: cannot write: No such file or directory",
 * "...: Permission denied", "...: Read-only file system", "...: Is a
 * directory"), naming the user's path; GMM_ENOMEM.  A later open can still
 * fail (a full disk, a race); the caller still checks it. */
gmm_status gmm_outfile_check(const char *path);

/* gmm_outfile_check, and whether output to path would be written in place
 * (*in_place 1: stdout, a device, a FIFO, a file reached through /proc) or
 * go to a regular file replaced on commit (0).  A command that writes a
 * companion file beside its output (FILE.json, FILE.q.csv) asks this first:
 * beside /dev/full or a FIFO is no place for one.  in_place may be NULL;
 * it is set only on GMM_OK. */
gmm_status gmm_outfile_check_kind(const char *path, int *in_place);

/* 1 when o writes in place (as above), 0 when commit renames a temporary
 * over the target. */
int gmm_outfile_in_place(const gmm_outfile *o);

/* Push o's data out without committing: flush the stream and, for a
 * temporary, fsync it, so that a full disk or device shows now ("PATH:
 * write error: <strerror>", GMM_EIO).  A command with several files to
 * write flushes them all before it commits any, so that one failing
 * leaves none replaced.  o stays open either way: commit or abort follow
 * (commit repeats nothing costly). */
gmm_status gmm_outfile_flush(gmm_outfile *o);

/* ---- sets of output files ------------------------------------------------ */

/* Several outputs of one run, committed together: all of them or none.
 * Members are opened with gmm_outset_open (each a gmm_outfile as above)
 * and belong to the set.  gmm_outset_commit first pushes every member out
 * -- a write error there (a full disk) replaces nothing -- then renames the
 * temporaries over their targets in the order opened, putting back those
 * already replaced should a rename fail (outfile.c says what cannot be
 * promised: output written in place, a crash between two renames).  A file
 * name given twice to one set is replaced once, by the member opened last.
 * Errors: gmm_outfile_open's (opening a member; the set stays usable and
 * the caller aborts it), gmm_outfile_commit's (naming the member's path),
 * GMM_ENOMEM.  Commit and abort free the set (abort is NULL-safe); neither
 * may be followed by another use of it or of its members. */
typedef struct gmm_outset gmm_outset;
gmm_status gmm_outset_alloc(gmm_outset **out);
/* Open path ("-" or NULL: stdout) as a member of s; *o (its stream:
 * gmm_outfile_stream) stays valid until s is committed or aborted.  The
 * caller never commits or aborts *o itself. */
gmm_status gmm_outset_open(gmm_outset *s, const char *path, gmm_outfile **o);
gmm_status gmm_outset_commit(gmm_outset *s);
void gmm_outset_abort(gmm_outset *s);

/* ---- same file ----------------------------------------------------------- */

/* 1 when paths a and b lead to the same file, else 0: both name an existing
 * file with the same st_dev and st_ino (stat(2): through symbolic links at
 * any component, and hard links), or neither exists and both would be
 * created as the same name in the same directory (symbolic links at the
 * last component followed as gmm_outfile_open follows them: "./x", "d/../x"
 * and a dangling link to x are x).  "-" and NULL (stdin or stdout) are
 * never the same as anything.  What cannot be examined (a missing
 * directory, no permission, no memory) is 0: a later open reports it.  For
 * a command to refuse an output that would replace one of its inputs. */
int gmm_path_same_file(const char *a, const char *b);

#endif
