/* outfile.c -- output files that appear whole or not at all, and that never
 * damage what they are written to; sets of them committed together
 * (gmm_outset, at the end); whether two paths are one file.
 *
 * Symlinks at path's last component are followed (a relative link from
 * the link's directory; the link stays a link and its target is replaced).
 * What is at the end decides how it is written:
 *
 *   - nothing, or a regular file: data go to a temporary ".NAME.tmpXXXXXX"
 *     in the target's directory (the same file system, so rename(2) replaces
 *     the target atomically: a reader sees the old file or the complete new
 *     one, never a prefix), and commit flushes, fsyncs and renames it over
 *     the target (then fsyncs the directory).  Abort leaves the target
 *     untouched and removes the temporary; a crash leaves the target
 *     untouched (and the temporary behind).  A new file gets mode
 *     0666 & ~umask; a replaced one keeps its permission bits, and its owner
 *     and group where the process may set them (root), else the group when
 *     the user belongs to it (set-user/group-ID bits are dropped then).
 *     ACLs and extended attributes are not copied, and a file with several
 *     hard links is replaced under this name only.  A target that exists
 *     but is not writable (mode 0444) is refused, as a shell's '>' would;
 *   - a character or block device (/dev/null), a FIFO, or anything reached
 *     through /proc (/dev/stdout, /dev/fd/N): opened and written in place,
 *     no temporary and no rename, which would put a regular file where
 *     the device or pipe was (a FIFO's open blocks until a reader
 *     comes, as a shell redirection does; a regular file reached through
 *     /proc is appended to).  Abort cannot unwrite what was flushed.  When
 *     the target is the file stdout is open on (/dev/stdout), the data
 *     go through the stdout stream itself, in order with the rest of it;
 *   - a directory is refused (EISDIR), a socket cannot be opened (ENXIO).
 *
 * Every message names the user's path, never the temporary.
 */
#include "gmm/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmm/alloc.h"

/* Symlinks followed before giving up (Linux's own limit is 40). */
#define MAX_LINKS 40
/* Bytes of the target's name kept in the temporary's: ".NAME.tmpXXXXXX"
 * must stay within NAME_MAX (255) when NAME does. */
#define TMP_NAME_KEEP 200

struct gmm_outfile {
    FILE *f;       /* stdout for "-", and for a path that leads to stdout's file */
    char *path;    /* the user's path, for messages; NULL for "-" */
    char *target;  /* path with symlinks followed: what commit replaces */
    char *tmp;     /* the temporary ("" when none, or when written in place) */
    int direct;    /* a non-regular target, written in place */
};

/* Where output to path goes: the target and what is there now. */
typedef struct {
    char *target;
    int exists;
    struct stat sb;  /* the target's, when exists */
    int direct;      /* write in place: not a regular file, or reached
                      * through /proc (/dev/stdout, /dev/fd/N) */
} out_plan;

static gmm_status cannot_write(const char *path, int err)
{
    return gmm_error(GMM_EIO, "%s: cannot write: %s", path, strerror(err));
}

static char *dir_of(const char *p);

/* The temporary beside target (path with links followed) could not be
 * created: said with the directory, which is what lacks the permission or
 * the space (a directory that is not there is cannot_write's "No such
 * file or directory"). */
static gmm_status cannot_create_temporary(const char *path, const char *target, int err)
{
    char *dir = err == ENOENT || err == ENOTDIR ? NULL : dir_of(target);
    if (!dir)
        return cannot_write(path, err);
    gmm_status st = gmm_error(GMM_EIO,
                              "%s: cannot write: the temporary file beside it could not be "
                              "created in directory '%s': %s",
                              path, dir, strerror(err));
    gmm_free(dir);
    return st;
}

/* The directory part of p ("." for "a", "/" for "/a"), allocated. */
static char *dir_of(const char *p)
{
    const char *slash = strrchr(p, '/');
    if (!slash)
        return gmm_strdup(".");
    if (slash == p)
        return gmm_strdup("/");
    size_t n = (size_t)(slash - p);
    char *d = gmm_malloc(n + 1, 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}

/* Is p's directory on the file system mounted at /proc (/proc/self/fd,
 * or /dev/fd after its link)?  Compared by device, so links on the way do
 * not matter; false when /proc is not a mount point or p's directory is
 * missing. */
static int in_proc(const char *p)
{
    struct stat proc, root, d;
    char *dir = dir_of(p);
    int yes = dir && stat("/proc", &proc) == 0 && stat("/", &root) == 0 &&
              proc.st_dev != root.st_dev && stat(dir, &d) == 0 && d.st_dev == proc.st_dev;
    gmm_free(dir);
    return yes;
}

/* Follow symlinks at the last component of path (a relative link is read
 * from the link's directory).  *target is allocated; *exists is 0 when
 * nothing is there (a new file, or a dangling link's target).  Under /proc
 * links are not followed by hand: /dev/stdout leads to /proc/self/fd/1,
 * whose "target" may be "pipe:[1234]"; there *magic is set and sb is what
 * the kernel's own resolution reaches.  Returns 0 or an errno value (ENOMEM
 * when an allocation failed). */
static int follow_links(const char *path, char **target, int *exists, int *magic,
                        struct stat *sb)
{
    char *cur = gmm_strdup(path), *link = NULL;
    int err = 0;
    *target = NULL;
    *magic = 0;
    if (!cur)
        return ENOMEM;
    for (int hops = 0;; hops++) {
        if (in_proc(cur)) {
            *magic = 1;
            if (stat(cur, sb) != 0) {
                err = errno;
                goto done;
            }
            *exists = 1;
            break;
        }
        if (lstat(cur, sb) != 0) {
            if (errno != ENOENT) {
                err = errno;
                goto done;
            }
            *exists = 0;
            break;
        }
        if (!S_ISLNK(sb->st_mode)) {
            *exists = 1;
            break;
        }
        if (hops == MAX_LINKS) {
            err = ELOOP;
            goto done;
        }
        /* st_size is the link's length, except on some pseudo file systems
         * (0 there): then PATH_MAX. */
        size_t cap = (sb->st_size > 0 ? (size_t)sb->st_size : PATH_MAX) + 1;
        link = gmm_malloc(cap, 1);
        if (!link) {
            err = ENOMEM;
            goto done;
        }
        ssize_t n = readlink(cur, link, cap);
        if (n < 0 || (size_t)n >= cap) {
            err = n < 0 ? errno : ENAMETOOLONG;
            goto done;
        }
        link[n] = '\0';
        char *next;
        const char *slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) {
            next = link;
            link = NULL;
        } else {
            size_t dlen = (size_t)(slash - cur) + 1;  /* keeps the '/' */
            next = gmm_malloc(dlen + (size_t)n + 1, 1);
            if (!next) {
                err = ENOMEM;
                goto done;
            }
            memcpy(next, cur, dlen);
            memcpy(next + dlen, link, (size_t)n + 1);
            gmm_free(link);
            link = NULL;
        }
        gmm_free(cur);
        cur = next;
    }
    /* A link to "dir/" names a directory, whatever is there. */
    if (!*cur || cur[strlen(cur) - 1] == '/')
        err = EISDIR;
done:
    gmm_free(link);
    if (err) {
        gmm_free(cur);
        return err;
    }
    *target = cur;
    return 0;
}

/* Everything that can be known about writing path without writing it:
 * a file name, links followed, not a directory, the target (when it is
 * there) writable, and the directory that will hold the temporary present
 * and writable.  Errors name path. */
static gmm_status plan_output(const char *path, out_plan *p)
{
    memset(p, 0, sizeof *p);
    size_t len = strlen(path);
    if (!len)
        return gmm_error(GMM_EIO, "'': cannot write: not a file name");
    if (path[len - 1] == '/')
        return cannot_write(path, EISDIR);
    int magic;
    int err = follow_links(path, &p->target, &p->exists, &magic, &p->sb);
    if (err == ENOMEM)
        return gmm_error(GMM_ENOMEM, "out of memory opening '%s'", path);
    if (err)
        return cannot_write(path, err);
    gmm_status st = GMM_OK;
    char *dir = NULL;
    if (p->exists && (S_ISDIR(p->sb.st_mode) || S_ISSOCK(p->sb.st_mode))) {
        /* open(2) of a socket fails with ENXIO: say so now. */
        st = cannot_write(path, S_ISDIR(p->sb.st_mode) ? EISDIR : ENXIO);
        goto done;
    }
    /* Writing in place, or replacing: either way the target must be
     * writable (a read-only file is not replaced behind its owner's back). */
    if (p->exists && faccessat(AT_FDCWD, p->target, W_OK, AT_EACCESS) != 0) {
        st = cannot_write(path, errno);
        goto done;
    }
    p->direct = magic || (p->exists && !S_ISREG(p->sb.st_mode));
    if (p->direct)
        goto done;
    /* The temporary is created beside the target. */
    dir = dir_of(p->target);
    if (!dir) {
        st = gmm_error(GMM_ENOMEM, "out of memory opening '%s'", path);
        goto done;
    }
    if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0)
        st = cannot_create_temporary(path, p->target, errno);
done:
    gmm_free(dir);
    if (st != GMM_OK) {
        gmm_free(p->target);
        p->target = NULL;
    }
    return st;
}

gmm_status gmm_outfile_check_kind(const char *path, int *in_place)
{
    if (!path || !strcmp(path, "-")) {
        if (in_place)
            *in_place = 1;
        return GMM_OK;
    }
    out_plan p;
    gmm_status st = plan_output(path, &p);
    if (st == GMM_OK && in_place)
        *in_place = p.direct;
    gmm_free(p.target);
    return st;
}

gmm_status gmm_outfile_check(const char *path) { return gmm_outfile_check_kind(path, NULL); }

static void outfile_free(gmm_outfile *o)
{
    gmm_free(o->path);
    gmm_free(o->target);
    gmm_free(o->tmp);
    gmm_free(o);
}

/* Give the new file fd what the file it replaces had: owner and group where
 * the process may set them (root; or the group alone for a member of it),
 * then the permission bits -- set-user/group-ID only when the owner came
 * across too.  A new file gets 0666 & ~umask, as an ordinary create would
 * (mkstemp makes it 0600).  0 or an errno value. */
static int copy_attributes(int fd, const out_plan *p)
{
    if (!p->exists) {
        /* umask can only be read by setting it: briefly changes process
         * state (harmless for a CLI, not thread-safe against concurrent
         * file creation). */
        mode_t mask = umask(077);
        umask(mask);
        return fchmod(fd, 0666 & ~mask) != 0 ? errno : 0;
    }
    struct stat now;
    if (fstat(fd, &now) != 0)
        return errno;
    int same_owner = now.st_uid == p->sb.st_uid && now.st_gid == p->sb.st_gid;
    if (!same_owner) {
        if (fchown(fd, p->sb.st_uid, p->sb.st_gid) == 0)
            same_owner = 1;
        else if (now.st_gid != p->sb.st_gid)
            (void)fchown(fd, (uid_t)-1, p->sb.st_gid);  /* best effort */
    }
    mode_t mode = p->sb.st_mode & (same_owner ? 07777 : 0777);
    return fchmod(fd, mode) != 0 ? errno : 0;
}

gmm_status gmm_outfile_open(const char *path, gmm_outfile **out)
{
    if (!out)
        return gmm_error(GMM_EINVAL, "gmm_outfile_open: NULL argument");
    *out = NULL;
    gmm_status st = GMM_OK;
    int fd = -1, err = 0;
    out_plan p = {0};
    gmm_outfile *o = gmm_calloc(1, sizeof *o);
    if (!o)
        return gmm_error(GMM_ENOMEM, "out of memory opening an output file");
    if (!path || !strcmp(path, "-")) {
        o->f = stdout;
        *out = o;
        return GMM_OK;
    }
    if ((st = plan_output(path, &p)) != GMM_OK)
        goto done;
    o->target = p.target;
    p.target = NULL;
    o->path = gmm_strdup(path);
    if (!o->path) {
        st = gmm_error(GMM_ENOMEM, "out of memory opening '%s'", path);
        goto done;
    }
    struct stat so;
    if (p.direct && fstat(STDOUT_FILENO, &so) == 0 && so.st_dev == p.sb.st_dev &&
        so.st_ino == p.sb.st_ino) {
        /* `-o /dev/stdout`, or a device or FIFO that stdout is open on:
         * through stdout's own stream, so the two keep their order and do
         * not overwrite each other at separate offsets. */
        o->f = stdout;
        goto done;
    }
    if (p.direct) {
        /* Written in place.  A FIFO blocks here until a reader opens it,
         * as a shell's redirection would.  A regular file reached through
         * /proc is another descriptor's file (`-o /dev/stdout > log`):
         * appended to, so that neither `>` nor `>>` loses what is there. */
        o->direct = 1;
        fd = open(o->target, O_WRONLY | O_NOCTTY | (S_ISREG(p.sb.st_mode) ? O_APPEND : 0));
        if (fd < 0) {
            st = cannot_write(path, errno);
            goto done;
        }
    } else {
        const char *base = strrchr(o->target, '/');
        base = base ? base + 1 : o->target;
        size_t dlen = (size_t)(base - o->target), blen = strlen(base);
        if (blen > TMP_NAME_KEEP)
            blen = TMP_NAME_KEEP;
        o->tmp = gmm_malloc(dlen + blen + sizeof "..tmpXXXXXX", 1);
        if (!o->tmp) {
            st = gmm_error(GMM_ENOMEM, "out of memory opening '%s'", path);
            goto done;
        }
        memcpy(o->tmp, o->target, dlen);
        sprintf(o->tmp + dlen, ".%.*s.tmpXXXXXX", (int)blen, base);
        fd = mkstemp(o->tmp);
        if (fd < 0) {
            st = cannot_create_temporary(path, o->target, errno);
            o->tmp[0] = '\0';
            goto done;
        }
        if ((err = copy_attributes(fd, &p)) != 0) {
            st = cannot_write(path, err);
            goto done;
        }
    }
    o->f = fdopen(fd, "w");
    if (!o->f) {
        st = cannot_write(path, errno);
        goto done;
    }
    fd = -1;
done:
    gmm_free(p.target);
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

int gmm_outfile_in_place(const gmm_outfile *o) { return o && (o->f == stdout || o->direct); }

gmm_status gmm_outfile_flush(gmm_outfile *o)
{
    if (!o || !o->f)
        return gmm_error(GMM_EINVAL, "gmm_outfile_flush: NULL argument");
    errno = 0;
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        err = errno ? errno : EIO;
    else if (o->f != stdout && !o->direct && fsync(fileno(o->f)) != 0)
        err = errno;
    if (err)
        return gmm_error(GMM_EIO, "%s: write error: %s", o->path ? o->path : "<stdout>",
                         strerror(err));
    return GMM_OK;
}

/* fsync the directory holding the target so the rename itself survives a
 * crash.  Some file systems refuse fsync on a directory (EINVAL); the data
 * are already safe then, so that is not an error. */
static void sync_dir(const char *target)
{
    char *dir = dir_of(target);
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    gmm_free(dir);
}

gmm_status gmm_outfile_commit(gmm_outfile *o)
{
    if (!o)
        return gmm_error(GMM_EINVAL, "gmm_outfile_commit: NULL argument");
    gmm_status st = GMM_OK;
    int err = 0;
    errno = 0;
    if (o->f == stdout) {
        if (fflush(stdout) != 0 || ferror(stdout))
            st = gmm_error(GMM_EIO, "%s: write error: %s", o->path ? o->path : "<stdout>",
                           strerror(errno ? errno : EIO));
        outfile_free(o);
        return st;
    }
    if (fflush(o->f) != 0 || ferror(o->f))
        err = errno ? errno : EIO;
    else if (!o->direct && fsync(fileno(o->f)) != 0)
        err = errno;
    if (fclose(o->f) != 0 && !err)
        err = errno;
    o->f = NULL;
    if (err) {
        st = gmm_error(GMM_EIO, "%s: write error: %s", o->path, strerror(err));
        goto done;
    }
    if (o->direct)
        goto done;
    if (rename(o->tmp, o->target) != 0) {
        st = cannot_write(o->path, errno);
        goto done;
    }
    o->tmp[0] = '\0';
    sync_dir(o->target);
done:
    if (o->tmp && o->tmp[0])
        unlink(o->tmp);
    outfile_free(o);
    return st;
}

void gmm_outfile_abort(gmm_outfile *o)
{
    if (!o)
        return;
    if (o->f == stdout) {
        /* What went to stdout cannot be taken back; push out what is
         * buffered so the stream stays consistent. */
        fflush(stdout);
    } else {
        /* A device or FIFO has had whatever was flushed: nothing to undo. */
        if (o->f)
            fclose(o->f);
        if (o->tmp && o->tmp[0])
            unlink(o->tmp);
    }
    outfile_free(o);
}

/* ---- sets of outputs committed together (io.h: gmm_outset) ---------------- */

/* gmm_outset_commit, in two steps:
 *
 *   1. pushes every member out: a temporary is flushed, fsynced and
 *      closed; stdout, a device or a FIFO is flushed.  A write error here
 *      (a full disk, /dev/full, a file size limit) -- where nearly every
 *      failure happens -- replaces nothing: every temporary is removed and
 *      every target is as it was;
 *   2. renames the temporaries over their targets, in the order the
 *      members were opened.  Before each rename an existing target is kept
 *      under a hard link beside it (".NAME.oldXXXXXX"); should a rename
 *      fail, the targets already replaced are put back (the old file
 *      renamed back, a new one removed) and the rest never replaced.  The
 *      links are removed after the last rename.
 *
 * What cannot be promised: output written in place (stdout, a pipe, a
 * device) cannot be taken back -- it is pushed out in step 1, before any
 * rename, so that its failure still replaces no file; a crash (or a
 * failing restore, reported as such) between two renames of step 2 leaves
 * some targets new and some old (and ".NAME.old*" links behind); where the
 * file system has no hard links, a failed rename cannot restore the targets
 * renamed before it (the message says which were replaced).  A file name
 * given twice to one set is replaced once, by the member opened last. */

struct gmm_outset {
    gmm_outfile **m;  /* members, in the order opened */
    char **backup;    /* during commit: an old target's hard link, or NULL */
    size_t n, cap;
};

gmm_status gmm_outset_alloc(gmm_outset **out)
{
    if (!out)
        return gmm_error(GMM_EINVAL, "gmm_outset_alloc: NULL argument");
    *out = gmm_calloc(1, sizeof **out);
    return *out ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory for the output files");
}

gmm_status gmm_outset_open(gmm_outset *s, const char *path, gmm_outfile **o)
{
    if (!s || !o)
        return gmm_error(GMM_EINVAL, "gmm_outset_open: NULL argument");
    *o = NULL;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4;
        gmm_outfile **m = gmm_realloc(s->m, cap, sizeof *m);
        if (!m)
            return gmm_error(GMM_ENOMEM, "out of memory opening '%s'", path ? path : "-");
        s->m = m;
        s->cap = cap;
    }
    gmm_status st = gmm_outfile_open(path, &s->m[s->n]);
    if (st != GMM_OK)
        return st;
    *o = s->m[s->n++];
    return GMM_OK;
}

static void outset_free(gmm_outset *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->m[i])
            gmm_outfile_abort(s->m[i]);
    for (size_t i = 0; s->backup && i < s->n; i++)
        gmm_free(s->backup[i]);
    gmm_free(s->backup);
    gmm_free(s->m);
    gmm_free(s);
}

void gmm_outset_abort(gmm_outset *s)
{
    if (s)
        outset_free(s);
}

/* Step 1 for member o: everything out.  A temporary is flushed, fsynced and
 * closed (o->f NULL after; the rename is left for step 2); stdout, a device
 * or a FIFO is flushed (and closed, but for stdout). */
static gmm_status push_out(gmm_outfile *o)
{
    const char *name = o->path ? o->path : "<stdout>";
    int err = 0;
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        err = errno ? errno : EIO;
    else if (o->f != stdout && !o->direct && fsync(fileno(o->f)) != 0)
        err = errno;
    if (o->f != stdout) {
        if (fclose(o->f) != 0 && !err)
            err = errno;
        o->f = NULL;
    }
    return err ? gmm_error(GMM_EIO, "%s: write error: %s", name, strerror(err)) : GMM_OK;
}

/* A hard link to o's existing target beside it, ".NAME.oldXXXXXX": the old
 * file, kept until the set is committed.  NULL when there is no target, or
 * no link can be made (then a failed set cannot restore this target). */
static char *keep_old(const gmm_outfile *o)
{
    struct stat sb;
    if (lstat(o->target, &sb) != 0 || !S_ISREG(sb.st_mode))
        return NULL;
    size_t len = strlen(o->tmp);
    char *b = gmm_malloc(len + 1, 1);
    if (!b)
        return NULL;
    /* o->tmp is ".NAME.tmpXXXXXX": the same with "old" */
    memcpy(b, o->tmp, len + 1);
    memcpy(b + len - 9, "old", 3);
    for (int tries = 0; tries < 8; tries++) {
        memcpy(b + len - 6, "XXXXXX", 6);
        int fd = mkstemp(b);
        if (fd < 0)
            break;
        close(fd);
        unlink(b);
        if (link(o->target, b) == 0)
            return b;
        if (errno != EEXIST)
            break;
    }
    gmm_free(b);
    return NULL;
}

/* Put members [0, k) back as they were before step 2 renamed them: the old
 * file renamed back from its link, a new one removed.  0, or the number of
 * targets that could not be restored (the last of them in *bad). */
static size_t restore(gmm_outset *s, size_t k, const char **bad)
{
    size_t nbad = 0;
    for (size_t i = k; i-- > 0;) {
        gmm_outfile *o = s->m[i];
        if (o->direct || !o->tmp)
            continue;
        if (s->backup[i] ? rename(s->backup[i], o->target) != 0 : unlink(o->target) != 0) {
            nbad++;
            *bad = o->path;
            continue;
        }
        gmm_free(s->backup[i]);
        s->backup[i] = NULL;
    }
    return nbad;
}

gmm_status gmm_outset_commit(gmm_outset *s)
{
    if (!s)
        return gmm_error(GMM_EINVAL, "gmm_outset_commit: NULL argument");
    gmm_status st = GMM_OK;
    /* 1: every member's data out, in place or into its temporary */
    for (size_t i = 0; i < s->n && st == GMM_OK; i++)
        st = push_out(s->m[i]);
    if (st != GMM_OK)
        goto done;
    if (!(s->backup = gmm_calloc(s->n ? s->n : 1, sizeof *s->backup))) {
        st = gmm_error(GMM_ENOMEM, "out of memory committing the output files");
        goto done;
    }
    /* 2: the renames, each old target kept until all are done */
    for (size_t i = 0; i < s->n; i++) {
        gmm_outfile *o = s->m[i];
        if (o->f == stdout || o->direct)
            continue;
        s->backup[i] = keep_old(o);
        if (rename(o->tmp, o->target) == 0) {
            o->tmp[0] = '\0';
            continue;
        }
        int err = errno;
        const char *bad = NULL;
        size_t nbad = restore(s, i, &bad);
        if (s->backup[i]) { /* this target was not replaced: its link goes */
            unlink(s->backup[i]);
            gmm_free(s->backup[i]);
            s->backup[i] = NULL;
        }
        if (nbad)
            st = gmm_error(GMM_EIO,
                           "%s: cannot write: %s; %zu file(s) written before it could not "
                           "be restored (%s is the new one)",
                           o->path, strerror(err), nbad, bad);
        else
            st = cannot_write(o->path, err);
        goto done;
    }
    for (size_t i = 0; i < s->n; i++) {
        gmm_outfile *o = s->m[i];
        if (s->backup[i])
            unlink(s->backup[i]);
        if (o->f != stdout && !o->direct)
            sync_dir(o->target);
    }
done:
    /* outset_free removes what temporaries remain */
    outset_free(s);
    return st;
}

/* ---- same file (io.h) ------------------------------------------------------ */

/* Where output to a path that does not exist would be created: its
 * directory's identity and its name (links at the last component
 * followed).  0, or -1 when that cannot be found (or path exists). */
static int new_file_place(const char *path, struct stat *dir, char **base)
{
    char *target = NULL;
    int exists = 0, magic = 0;
    struct stat sb;
    *base = NULL;
    if (follow_links(path, &target, &exists, &magic, &sb) != 0)
        return -1;
    int rc = -1;
    char *d = NULL;
    if (!exists && !magic && (d = dir_of(target)) && stat(d, dir) == 0) {
        const char *slash = strrchr(target, '/');
        *base = gmm_strdup(slash ? slash + 1 : target);
        rc = *base ? 0 : -1;
    }
    gmm_free(d);
    gmm_free(target);
    return rc;
}

int gmm_path_same_file(const char *a, const char *b)
{
    if (!a || !b || !*a || !*b || !strcmp(a, "-") || !strcmp(b, "-"))
        return 0;
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea || eb)
        return ea && eb && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *na = NULL, *nb = NULL;
    int same = new_file_place(a, &sa, &na) == 0 && new_file_place(b, &sb, &nb) == 0 &&
               sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && !strcmp(na, nb);
    gmm_free(na);
    gmm_free(nb);
    return same;
}
