/* tmpfiles.h -- scratch directories and files for tests that read or write
 * files (CSV fixtures, model files).  Kept apart from testutil.h so suites
 * that touch no files need not see <stdio.h> plumbing.  Failures abort the
 * test through Check's ck_assert. */
#ifndef GMM_TMPFILES_H
#define GMM_TMPFILES_H

#include <stddef.h>

/* A new empty directory under $TMPDIR (default /tmp); caller free()s the
 * returned path after tu_rmdir_all. */
char *tu_mkdtemp(void);
/* The path dir/name (caller free()s). */
char *tu_path(const char *dir, const char *name);
/* Write len bytes of data to dir/name; returns the path (caller free()s). */
char *tu_write_file(const char *dir, const char *name, const char *data, size_t len);
/* Same, for a NUL-terminated string. */
char *tu_write_str(const char *dir, const char *name, const char *text);
/* Whole file into a NUL-terminated buffer (caller free()s); NULL if it
 * cannot be opened.  *len (when non-NULL) gets the byte count. */
char *tu_read_file(const char *path, size_t *len);
/* Number of entries in dir other than "." and "..". */
size_t tu_dir_count(const char *dir);
/* Remove every file in dir (not recursive) and then dir itself. */
void tu_rmdir_all(const char *dir);

#endif
