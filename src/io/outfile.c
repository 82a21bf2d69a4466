/* outfile.c -- output files that appear whole or not at all.
 *
 * Data go to ".NAME.tmpXXXXXX" beside the target (the same directory, hence
 * the same file system, so rename(2) replaces the target atomically); commit
 * flushes, fsyncs, closes and renames.  A reader of the target therefore
 * sees the old file or the complete new one, never a prefix, and a failed
 * run leaves yesterday's model in place.
 */
#include "gmm/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmm/alloc.h"

struct gmm_outfile {
    FILE *f;
    char *path;  /* NULL for stdout */
    char *tmp;
};

static void outfile_free(gmm_outfile *o)
{
    gmm_free(o->path);
    gmm_free(o->tmp);
    gmm_free(o);
}

static char *dup_str(const char *s)
{
    char *d = gmm_malloc(strlen(s) + 1, 1);
    if (d)
        strcpy(d, s);
    return d;
}

gmm_status gmm_outfile_open(const char *path, gmm_outfile **out)
{
    if (!out)
        return gmm_error(GMM_EINVAL, "gmm_outfile_open: NULL argument");
    *out = NULL;
    gmm_status st = GMM_OK;
    int fd = -1;
    gmm_outfile *o = gmm_calloc(1, sizeof *o);
    if (!o)
        return gmm_error(GMM_ENOMEM, "out of memory opening an output file");
    if (!path || !strcmp(path, "-")) {
        o->f = stdout;
        *out = o;
        return GMM_OK;
    }
    size_t len = strlen(path);
    if (!len || path[len - 1] == '/') {
        st = gmm_error(GMM_EIO, "'%s': not a file name", path);
        goto done;
    }
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;  /* keeps the '/' */
    o->path = dup_str(path);
    o->tmp = gmm_malloc(len + sizeof ".tmpXXXXXX" + 1, 1);
    if (!o->path || !o->tmp) {
        st = gmm_error(GMM_ENOMEM, "out of memory opening '%s'", path);
        goto done;
    }
    memcpy(o->tmp, path, dirlen);
    snprintf(o->tmp + dirlen, len - dirlen + sizeof ".tmpXXXXXX" + 1, ".%s.tmpXXXXXX",
             path + dirlen);
    fd = mkstemp(o->tmp);
    if (fd < 0) {
        st = gmm_error(GMM_EIO, "cannot create a temporary file for '%s': %s", path,
                       strerror(errno));
        o->tmp[0] = '\0';
        goto done;
    }
    /* mkstemp makes the file 0600; the result should have the permissions
     * an ordinary create would give.  umask can only be read by setting it,
     * so this briefly changes process state (harmless for a CLI, not
     * thread-safe against concurrent file creation). */
    mode_t mask = umask(077);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) {
        st = gmm_error(GMM_EIO, "cannot set permissions of '%s': %s", o->tmp, strerror(errno));
        goto done;
    }
    o->f = fdopen(fd, "w");
    if (!o->f) {
        st = gmm_error(GMM_EIO, "cannot open '%s': %s", o->tmp, strerror(errno));
        goto done;
    }
    fd = -1;
done:
    if (st != GMM_OK) {
        if (fd >= 0)
            close(fd);
        if (o->tmp && o->tmp[0])
            unlink(o->tmp);
        outfile_free(o);
        return st;
    }
    *out = o;
    return GMM_OK;
}

FILE *gmm_outfile_stream(gmm_outfile *o) { return o ? o->f : NULL; }

/* fsync the directory holding path so the rename itself survives a crash.
 * Some file systems refuse fsync on a directory (EINVAL); the data are
 * already safe then, so that is not an error. */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        strcpy(dir, ".");
    else if (slash == path)
        strcpy(dir, "/");
    else if ((size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

gmm_status gmm_outfile_commit(gmm_outfile *o)
{
    if (!o)
        return gmm_error(GMM_EINVAL, "gmm_outfile_commit: NULL argument");
    gmm_status st = GMM_OK;
    errno = 0;
    if (!o->path) {
        if (fflush(stdout) != 0 || ferror(stdout))
            st = gmm_error(GMM_EIO, "cannot write to standard output: %s",
                           strerror(errno ? errno : EIO));
        outfile_free(o);
        return st;
    }
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        err = errno ? errno : EIO;
    else if (fsync(fileno(o->f)) != 0)
        err = errno;
    if (fclose(o->f) != 0 && !err)
        err = errno;
    o->f = NULL;
    if (err) {
        st = gmm_error(GMM_EIO, "cannot write '%s': %s", o->path, strerror(err));
        goto done;
    }
    if (rename(o->tmp, o->path) != 0) {
        st = gmm_error(GMM_EIO, "cannot rename '%s' to '%s': %s", o->tmp, o->path,
                       strerror(errno));
        goto done;
    }
    o->tmp[0] = '\0';
    sync_dir(o->path);
done:
    if (o->tmp[0])
        unlink(o->tmp);
    outfile_free(o);
    return st;
}

void gmm_outfile_abort(gmm_outfile *o)
{
    if (!o)
        return;
    if (!o->path) {
        /* What went to stdout cannot be taken back; push out what is
         * buffered so the stream stays consistent. */
        fflush(stdout);
    } else {
        if (o->f)
            fclose(o->f);
        if (o->tmp[0])
            unlink(o->tmp);
    }
    outfile_free(o);
}
