/* test_outfile.c -- atomic output: the target changes only on commit, and no
 * temporary file survives commit, abort or a failed commit; devices, FIFOs
 * and /proc links are written in place, symlinks followed (and kept), an
 * existing file's mode and owner kept; gmm_outfile_check names the user's
 * path.  Sets of outputs (gmm_outset) are committed all or none: a write
 * error replaces none, a failed rename puts back those renamed before it.
 * gmm_path_same_file sees through hard and symbolic links. */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "support/tmpfiles.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }

/* Remove dir's subdirectories (tu_rmdir_all is not recursive). */
static void rm_subdirs(const char *d)
{
    DIR *h = opendir(d);
    if (!h)
        return;
    struct dirent *e;
    while ((e = readdir(h)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *p = tu_path(d, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            chmod(p, 0700);
            rm_subdirs(p);
            tu_rmdir_all(p);
        }
        free(p);
    }
    closedir(h);
}

static void teardown(void)
{
    rm_subdirs(dir);
    tu_rmdir_all(dir);
    free(dir);
}

/* Run the next calls as an unprivileged user when the tests run as root,
 * so that permission bits matter; back with as_self(). */
static void as_nobody(void)
{
    if (geteuid() == 0) {
        ck_assert_int_eq(chmod(dir, 0755), 0);
        ck_assert_int_eq(seteuid(65534), 0);
    }
}

static void as_self(void)
{
    if (getuid() == 0)
        ck_assert_int_eq(seteuid(0), 0);
}

static char *in_dir(const char *name) { return tu_path(dir, name); }

START_TEST(test_commit_creates)
{
    char *path = in_dir("out.csv");
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    FILE *f = gmm_outfile_stream(o);
    ck_assert_ptr_nonnull(f);
    fputs("a,b\n1,2\n", f);
    /* Until commit only the temporary exists, and not under the target name. */
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    char *got = tu_read_file(path, NULL);
    ck_assert_str_eq(got, "a,b\n1,2\n");
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(got);
    free(path);
}
END_TEST

START_TEST(test_commit_replaces_and_mode)
{
    char *path = tu_write_str(dir, "m.json", "old\n");
    umask(022);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    fputs("new\n", gmm_outfile_stream(o));
    char *mid = tu_read_file(path, NULL);
    ck_assert_str_eq(mid, "old\n");
    ck_assert_uint_eq(tu_dir_count(dir), 2);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    char *got = tu_read_file(path, NULL);
    ck_assert_str_eq(got, "new\n");
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 0777, 0644);  /* not mkstemp's 0600 */
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(mid);
    free(got);
    free(path);
}
END_TEST

START_TEST(test_abort_keeps_old)
{
    char *path = tu_write_str(dir, "keep.txt", "precious\n");
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    fputs("half-written garbage", gmm_outfile_stream(o));
    fflush(gmm_outfile_stream(o));
    ck_assert_uint_eq(tu_dir_count(dir), 2);
    gmm_outfile_abort(o);
    char *got = tu_read_file(path, NULL);
    ck_assert_str_eq(got, "precious\n");
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    gmm_outfile_abort(NULL);
    free(got);
    free(path);

    /* Abort without a previous file leaves nothing at all. */
    path = in_dir("never.txt");
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    gmm_outfile_abort(o);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    ck_assert_int_ne(access(path, F_OK), 0);
    free(path);
}
END_TEST

START_TEST(test_relative_path_and_tmp_name)
{
    int here = open(".", O_RDONLY);
    ck_assert_int_ge(here, 0);
    ck_assert_int_eq(chdir(dir), 0);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open("rel.txt", &o), GMM_OK);
    /* The temporary is ".rel.txt.tmpXXXXXX" in the same directory. */
    DIR *d = opendir(".");
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            ck_assert_msg(!strncmp(e->d_name, ".rel.txt.tmp", 12) && strlen(e->d_name) == 18,
                          "temporary named '%s'", e->d_name);
            found++;
        }
    closedir(d);
    ck_assert_int_eq(found, 1);
    fputs("x", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    char *got = tu_read_file("rel.txt", NULL);
    ck_assert_str_eq(got, "x");
    free(got);
    ck_assert_int_eq(fchdir(here), 0);
    close(here);
}
END_TEST

START_TEST(test_stdout)
{
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open("-", &o), GMM_OK);
    ck_assert_ptr_eq(gmm_outfile_stream(o), stdout);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    ck_assert_int_eq(gmm_outfile_open(NULL, &o), GMM_OK);
    ck_assert_ptr_eq(gmm_outfile_stream(o), stdout);
    gmm_outfile_abort(o);
    ck_assert_ptr_null(gmm_outfile_stream(NULL));
}
END_TEST

/* open fails with GMM_EIO and exactly "<path><suffix>"; nothing created. */
static void open_fails(const char *path, const char *suffix)
{
    size_t before = tu_dir_count(dir);
    gmm_outfile *o = (gmm_outfile *)&o;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_EIO);
    ck_assert_ptr_null(o);
    char want[1024];
    snprintf(want, sizeof want, "%s%s", path, suffix);
    ck_assert_str_eq(gmm_error_message(), want);
    ck_assert_int_eq(gmm_outfile_check(path), GMM_EIO);
    ck_assert_str_eq(gmm_error_message(), want);
    ck_assert_uint_eq(tu_dir_count(dir), before);
}

START_TEST(test_open_errors)
{
    char *path = in_dir("no/such/dir/out.csv");
    open_fails(path, ": cannot write: No such file or directory");
    free(path);

    path = in_dir("sub/");
    open_fails(path, ": cannot write: Is a directory");
    free(path);
    /* A directory itself, a file used as a directory. */
    open_fails(dir, ": cannot write: Is a directory");
    char *file = tu_write_str(dir, "plain", "x");
    path = in_dir("plain/out.csv");
    open_fails(path, ": cannot write: Not a directory");
    free(path);
    free(file);
    /* A loop of links. */
    char *a = in_dir("loop-a"), *b = in_dir("loop-b");
    ck_assert_int_eq(symlink("loop-b", a), 0);
    ck_assert_int_eq(symlink("loop-a", b), 0);
    open_fails(a, ": cannot write: Too many levels of symbolic links");
    free(a);
    free(b);

    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open("", &o), GMM_EIO);
    ck_assert_str_eq(gmm_error_message(), "'': cannot write: not a file name");
    ck_assert_int_eq(gmm_outfile_check(""), GMM_EIO);
    ck_assert_int_eq(gmm_outfile_open("x", NULL), GMM_EINVAL);
}
END_TEST

/* The early check creates nothing and passes what open would accept. */
START_TEST(test_check_ok)
{
    char *path = in_dir("new.json");
    ck_assert_int_eq(gmm_outfile_check(path), GMM_OK);
    ck_assert_uint_eq(tu_dir_count(dir), 0);
    free(path);
    path = tu_write_str(dir, "old.json", "x");
    ck_assert_int_eq(gmm_outfile_check(path), GMM_OK);
    free(path);
    ck_assert_int_eq(gmm_outfile_check("-"), GMM_OK);
    ck_assert_int_eq(gmm_outfile_check(NULL), GMM_OK);
    ck_assert_int_eq(gmm_outfile_check("/dev/null"), GMM_OK);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
}
END_TEST

/* A read-only directory, and a read-only file in a writable one, for an
 * unprivileged user: refused by check and open, naming the user's path
 * (and the directory that cannot hold the temporary); nothing created, the
 * file untouched. */
START_TEST(test_read_only)
{
    char *ro = in_dir("ro");
    ck_assert_int_eq(mkdir(ro, 0755), 0);
    char *inside = in_dir("ro/out.json");
    char *rofile = tu_write_str(dir, "locked.json", "keep\n");
    ck_assert_int_eq(chmod(rofile, 0444), 0);
    ck_assert_int_eq(chmod(ro, 0555), 0);
    as_nobody();
    if (geteuid() == 0) /* could not drop root: permission bits do not apply */
        ck_assert_int_eq(chmod(ro, 0555), 0);
    gmm_status st1 = gmm_outfile_check(inside);
    char m1[GMM_ERROR_MAX];
    snprintf(m1, sizeof m1, "%s", gmm_error_message());
    gmm_outfile *o = NULL;
    gmm_status st2 = gmm_outfile_open(inside, &o);
    gmm_status st3 = gmm_outfile_check(rofile);
    char m3[GMM_ERROR_MAX];
    snprintf(m3, sizeof m3, "%s", gmm_error_message());
    gmm_status st4 = gmm_outfile_open(rofile, &o);
    as_self();
    char want[1024];
    snprintf(want, sizeof want,
             "%s: cannot write: the temporary file beside it could not be created in "
             "directory '%s': Permission denied",
             inside, ro);
    ck_assert_int_eq(st1, GMM_EIO);
    ck_assert_str_eq(m1, want);
    ck_assert_int_eq(st2, GMM_EIO);
    snprintf(want, sizeof want, "%s: cannot write: Permission denied", rofile);
    ck_assert_int_eq(st3, GMM_EIO);
    ck_assert_str_eq(m3, want);
    ck_assert_int_eq(st4, GMM_EIO);
    ck_assert_uint_eq(tu_dir_count(ro), 0);
    char *got = tu_read_file(rofile, NULL);
    ck_assert_str_eq(got, "keep\n");
    free(got);
    free(ro);
    free(inside);
    free(rofile);
}
END_TEST

/* rename fails at commit (a directory appeared at the target after open):
 * an error naming the user's path, and the temporary is removed. */
START_TEST(test_commit_error_cleans_up)
{
    char *path = in_dir("adir");
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    fputs("data", gmm_outfile_stream(o));
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_uint_eq(tu_dir_count(dir), 2);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_EIO);
    char want[1024];
    snprintf(want, sizeof want, "%s: cannot write: Is a directory", path);
    ck_assert_str_eq(gmm_error_message(), want);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    rmdir(path);
    free(path);
}
END_TEST

/* A failed write is an error at commit naming the path and the reason. */
START_TEST(test_write_error)
{
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open("/dev/full", &o), GMM_OK);
    fputs("data\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_EIO);
    ck_assert_str_eq(gmm_error_message(), "/dev/full: write error: No space left on device");
    /* Past the stream's buffer: the failure happens before commit, which
     * still reports it. */
    ck_assert_int_eq(gmm_outfile_open("/dev/full", &o), GMM_OK);
    for (int k = 0; k < 10000; k++)
        fputs("0123456789\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_EIO);
    ck_assert_str_eq(gmm_error_message(), "/dev/full: write error: No space left on device");
    struct stat sb;
    ck_assert_int_eq(stat("/dev/full", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
}
END_TEST

/* A character device is written in place: /dev/null stays a device. */
START_TEST(test_device_in_place)
{
    struct stat sb;
    ck_assert_int_eq(lstat("/dev/null", &sb), 0);
    ck_assert_msg(S_ISCHR(sb.st_mode), "/dev/null is not a character device before the test");
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open("/dev/null", &o), GMM_OK);
    fputs("discarded\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    ck_assert_int_eq(gmm_outfile_open("/dev/null", &o), GMM_OK);
    fputs("discarded too\n", gmm_outfile_stream(o));
    gmm_outfile_abort(o);
    ck_assert_int_eq(lstat("/dev/null", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    ck_assert_uint_eq(sb.st_mode & 0666, 0666);
    /* Through a symlink too: the link stays, the device stays. */
    char *link = in_dir("null-link");
    ck_assert_int_eq(symlink("/dev/null", link), 0);
    ck_assert_int_eq(gmm_outfile_open(link, &o), GMM_OK);
    fputs("x", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_int_eq(lstat("/dev/null", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(link);
}
END_TEST

/* check_kind tells a regular target (replaced on commit) from one written
 * in place; flush reports a full device before anything is committed and
 * leaves a regular target untouched until commit. */
START_TEST(test_kind_and_flush)
{
    int in_place = -1;
    char *file = in_dir("m.json"), *fifo = in_dir("pipe"), *full = in_dir("full");
    ck_assert_int_eq(gmm_outfile_check_kind(file, &in_place), GMM_OK);
    ck_assert_int_eq(in_place, 0);
    free(file);
    file = tu_write_str(dir, "m.json", "old\n");
    in_place = -1;
    ck_assert_int_eq(gmm_outfile_check_kind(file, &in_place), GMM_OK);
    ck_assert_int_eq(in_place, 0);
    ck_assert_int_eq(gmm_outfile_check_kind("-", &in_place), GMM_OK);
    ck_assert_int_eq(in_place, 1);
    in_place = -1;
    ck_assert_int_eq(gmm_outfile_check_kind("/dev/null", &in_place), GMM_OK);
    ck_assert_int_eq(in_place, 1);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    in_place = -1;
    ck_assert_int_eq(gmm_outfile_check_kind(fifo, &in_place), GMM_OK);
    ck_assert_int_eq(in_place, 1);
    in_place = -1;
    ck_assert_int_eq(gmm_outfile_check_kind(dir, &in_place), GMM_EIO);
    ck_assert_int_eq(in_place, -1);

    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(file, &o), GMM_OK);
    ck_assert_int_eq(gmm_outfile_in_place(o), 0);
    fputs("new\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_flush(o), GMM_OK);
    char *got = tu_read_file(file, NULL);
    ck_assert_str_eq(got, "old\n");
    free(got);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    got = tu_read_file(file, NULL);
    ck_assert_str_eq(got, "new\n");
    free(got);

    /* A device of our own where we may make one (root), not the real
     * /dev/full: a bug here must not replace the system's device. */
    const char *dev = "/dev/full";
    if (geteuid() == 0 && mknod(full, S_IFCHR | 0666, makedev(1, 7)) == 0)
        dev = full;
    ck_assert_int_eq(gmm_outfile_open(dev, &o), GMM_OK);
    ck_assert_int_eq(gmm_outfile_in_place(o), 1);
    fputs("data\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_flush(o), GMM_EIO);
    char want[1024];
    snprintf(want, sizeof want, "%s: write error: No space left on device", dev);
    ck_assert_str_eq(gmm_error_message(), want);
    gmm_outfile_abort(o);
    struct stat sb;
    ck_assert_int_eq(lstat(dev, &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    ck_assert_int_eq(gmm_outfile_open("-", &o), GMM_OK);
    ck_assert_int_eq(gmm_outfile_in_place(o), 1);
    gmm_outfile_abort(o);
    unlink(full);
    unlink(fifo);
    free(file);
    free(fifo);
    free(full);
}
END_TEST

typedef struct {
    const char *path;
    char buf[256];
    size_t len;
} fifo_reader;

static void *read_fifo(void *arg)
{
    fifo_reader *r = arg;
    int fd = open(r->path, O_RDONLY);
    if (fd < 0)
        return NULL;
    ssize_t n;
    while (r->len < sizeof r->buf - 1 &&
           (n = read(fd, r->buf + r->len, sizeof r->buf - 1 - r->len)) > 0)
        r->len += (size_t)n;
    r->buf[r->len] = '\0';
    close(fd);
    return NULL;
}

/* A FIFO is written in place, to its reader; it stays a FIFO and no
 * temporary appears beside it. */
START_TEST(test_fifo_in_place)
{
    char *path = in_dir("pipe");
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    fifo_reader r = {path, {0}, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, read_fifo, &r), 0);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK); /* waits for the reader */
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    fputs("node,mean\n0,1.5\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_str_eq(r.buf, "node,mean\n0,1.5\n");
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(path);
}
END_TEST

/* A socket cannot be opened for writing: an error, and the socket stays. */
START_TEST(test_socket_refused)
{
    char *path = in_dir("sock");
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    ck_assert_uint_lt(strlen(path), sizeof addr.sun_path);
    strcpy(addr.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&addr, sizeof addr), 0);
    open_fails(path, ": cannot write: No such device or address");
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISSOCK(sb.st_mode));
    close(s);
    free(path);
}
END_TEST

/* /proc links (/dev/stdout, /dev/fd/N) reach another descriptor's file:
 * written in place, a pipe's read end gets the data, a regular file is
 * appended to, and nothing is created beside it. */
START_TEST(test_proc_links_in_place)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[1]);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_check(path), GMM_OK);
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    fputs("through the pipe", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    close(fds[1]);
    char buf[64] = {0};
    ck_assert_int_eq(read(fds[0], buf, sizeof buf - 1), 16);
    ck_assert_str_eq(buf, "through the pipe");
    close(fds[0]);

    char *file = tu_write_str(dir, "log.txt", "");
    int fd = open(file, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "abc", 3), 3);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ck_assert_msg(gmm_outfile_open(path, &o) == GMM_OK, "%s", gmm_error_message());
    fputs("def", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    close(fd);
    char *got = tu_read_file(file, NULL);
    ck_assert_str_eq(got, "abcdef");
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(got);
    free(file);

    /* A descriptor that is not open: an error, nothing created in /proc. */
    ck_assert_int_eq(gmm_outfile_check("/dev/fd/987654"), GMM_EIO);
    ck_assert_str_eq(gmm_error_message(),
                     "/dev/fd/987654: cannot write: No such file or directory");
}
END_TEST

/* A symlink is followed and its target replaced atomically; the link stays
 * a link, a chain of links is followed to its end, a dangling link's target
 * is created, and the temporary lives beside the target (another
 * directory), not beside the link. */
START_TEST(test_symlink_followed)
{
    char *sub = in_dir("sub");
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    char *real = tu_write_str(sub, "real.json", "old\n");
    ck_assert_int_eq(chmod(real, 0640), 0);
    char *link = in_dir("link.json"), *link2 = in_dir("link2.json");
    ck_assert_int_eq(symlink("sub/real.json", link), 0);
    ck_assert_int_eq(symlink("link.json", link2), 0);

    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(link2, &o), GMM_OK);
    fputs("new\n", gmm_outfile_stream(o));
    ck_assert_uint_eq(tu_dir_count(sub), 2); /* the temporary, beside real.json */
    ck_assert_uint_eq(tu_dir_count(dir), 3);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    struct stat sb;
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_int_eq(lstat(link2, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    char buf[64];
    ssize_t n = readlink(link, buf, sizeof buf - 1);
    ck_assert_int_eq(n, 13);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "sub/real.json");
    char *got = tu_read_file(real, NULL);
    ck_assert_str_eq(got, "new\n");
    free(got);
    ck_assert_int_eq(lstat(real, &sb), 0);
    ck_assert(S_ISREG(sb.st_mode));
    ck_assert_uint_eq(sb.st_mode & 07777, 0640);
    ck_assert_uint_eq(tu_dir_count(sub), 1);

    /* A dangling link: its target is created, the link kept. */
    char *dangling = in_dir("dangling.json");
    ck_assert_int_eq(symlink("sub/made.json", dangling), 0);
    ck_assert_int_eq(gmm_outfile_open(dangling, &o), GMM_OK);
    fputs("made\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    ck_assert_int_eq(lstat(dangling, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    char *made = tu_path(sub, "made.json");
    got = tu_read_file(made, NULL);
    ck_assert_str_eq(got, "made\n");
    free(got);

    /* An absolute link to a missing directory: the link's path named. */
    char *bad = in_dir("bad.json");
    ck_assert_int_eq(symlink("/nonexistent-gmm-dir/x.json", bad), 0);
    open_fails(bad, ": cannot write: No such file or directory");

    free(bad);
    free(made);
    free(dangling);
    free(link);
    free(link2);
    free(real);
    free(sub);
}
END_TEST

/* An existing file keeps its permission bits whatever the umask (and its
 * owner and group, when the tests run as root). */
START_TEST(test_mode_and_owner_kept)
{
    char *path = tu_write_str(dir, "m.json", "old\n");
    ck_assert_int_eq(chmod(path, 0640), 0);
    int root = geteuid() == 0;
    if (root)
        ck_assert_int_eq(chown(path, 1234, 5678), 0);
    umask(077);
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    fputs("new\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    umask(022);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 07777, 0640);
    if (root) {
        ck_assert_uint_eq(sb.st_uid, 1234);
        ck_assert_uint_eq(sb.st_gid, 5678);
    }
    char *got = tu_read_file(path, NULL);
    ck_assert_str_eq(got, "new\n");
    free(got);

    /* Executable bits too (a script written by the tool stays runnable). */
    ck_assert_int_eq(chmod(path, 0755), 0);
    ck_assert_int_eq(gmm_outfile_open(path, &o), GMM_OK);
    ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 07777, 0755);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(path);
}
END_TEST

START_TEST(test_out_of_memory)
{
    char *path = in_dir("oom.txt");
    int ok = 0;
    for (long k = 0; k < 20 && !ok; k++) {
        gmm_outfile *o = NULL;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_outfile_open(path, &o);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            fputs("y", gmm_outfile_stream(o));
            ck_assert_int_eq(gmm_outfile_commit(o), GMM_OK);
            ok = 1;
        } else {
            ck_assert_int_eq(st, GMM_ENOMEM);
            ck_assert_uint_eq(tu_dir_count(dir), 0);
        }
    }
    ck_assert(ok);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(path);
}
END_TEST


/* ---- gmm_outset ---------------------------------------------------------- */

/* content of dir/name, or NULL */
static char *content(const char *name)
{
    char *p = in_dir(name);
    char *c = tu_read_file(p, NULL);
    free(p);
    return c;
}

static void expect_content(const char *name, const char *want)
{
    char *c = content(name);
    if (!want) {
        ck_assert_msg(c == NULL, "%s exists: '%s'", name, c ? c : "");
    } else {
        ck_assert_msg(c != NULL, "%s does not exist", name);
        ck_assert_str_eq(c, want);
    }
    free(c);
}

/* A set of three files (one replacing an old file) appears on commit, all
 * of them; until then only temporaries exist beside the old file. */
START_TEST(test_outset_commit)
{
    char *old = tu_write_str(dir, "b.json", "old b\n");
    char *a = in_dir("a.csv"), *c = in_dir("c.csv");
    gmm_outset *s = NULL;
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outset_alloc(&s), GMM_OK);
    ck_assert_int_eq(gmm_outset_open(s, a, &o), GMM_OK);
    fputs("a\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_open(s, old, &o), GMM_OK);
    fputs("new b\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_open(s, c, &o), GMM_OK);
    fputs("c\n", gmm_outfile_stream(o));
    ck_assert_uint_eq(tu_dir_count(dir), 4); /* b.json and three temporaries */
    expect_content("a.csv", NULL);
    expect_content("b.json", "old b\n");
    ck_assert_int_eq(gmm_outset_commit(s), GMM_OK);
    expect_content("a.csv", "a\n");
    expect_content("b.json", "new b\n");
    expect_content("c.csv", "c\n");
    ck_assert_uint_eq(tu_dir_count(dir), 3); /* no temporary, no old link */
    /* an empty set commits to nothing */
    ck_assert_int_eq(gmm_outset_alloc(&s), GMM_OK);
    ck_assert_int_eq(gmm_outset_commit(s), GMM_OK);
    free(old);
    free(a);
    free(c);
}
END_TEST

/* Abort, and a member that cannot be opened: nothing replaced, no
 * temporary left. */
START_TEST(test_outset_abort)
{
    char *old = tu_write_str(dir, "a.csv", "old a\n");
    char *b = in_dir("b.csv"), *bad = in_dir("no/such/c.csv");
    gmm_outset *s = NULL;
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outset_alloc(&s), GMM_OK);
    ck_assert_int_eq(gmm_outset_open(s, old, &o), GMM_OK);
    fputs("new a\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_open(s, b, &o), GMM_OK);
    fputs("b\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_open(s, bad, &o), GMM_EIO);
    ck_assert_ptr_null(o);
    ck_assert_str_eq(gmm_error_message() + strlen(dir),
                     "/no/such/c.csv: cannot write: No such file or directory");
    gmm_outset_abort(s);
    gmm_outset_abort(NULL);
    expect_content("a.csv", "old a\n");
    expect_content("b.csv", NULL);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    free(old);
    free(b);
    free(bad);
}
END_TEST

/* A write error in any member -- here a full device opened last, after two
 * regular files -- replaces none of them: the failure shows in step 1,
 * before any rename. */
START_TEST(test_outset_write_error)
{
    char *old = tu_write_str(dir, "a.csv", "old a\n");
    char *b = in_dir("b.csv");
    gmm_outset *s = NULL;
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outset_alloc(&s), GMM_OK);
    ck_assert_int_eq(gmm_outset_open(s, old, &o), GMM_OK);
    fputs("new a\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_open(s, b, &o), GMM_OK);
    fputs("b\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_open(s, "/dev/full", &o), GMM_OK);
    fputs("summary\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_commit(s), GMM_EIO);
    ck_assert_str_eq(gmm_error_message(), "/dev/full: write error: No space left on device");
    expect_content("a.csv", "old a\n");
    expect_content("b.csv", NULL);
    ck_assert_uint_eq(tu_dir_count(dir), 1);
    struct stat sb;
    ck_assert_int_eq(stat("/dev/full", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    free(old);
    free(b);
}
END_TEST

/* A rename that fails in step 2 (the third target became a directory
 * after it was opened) puts back the two targets renamed before it: the
 * old file from its link, the new one removed; nothing is left behind. */
START_TEST(test_outset_rename_fails)
{
    char *a = tu_write_str(dir, "a.csv", "old a\n");
    char *b = in_dir("b.csv"), *c = in_dir("c.csv");
    /* a second name of a.csv: the restore must keep it the same file */
    char *a2 = in_dir("a2.csv");
    ck_assert_int_eq(link(a, a2), 0);
    gmm_outset *s = NULL;
    gmm_outfile *o = NULL;
    ck_assert_int_eq(gmm_outset_alloc(&s), GMM_OK);
    ck_assert_int_eq(gmm_outset_open(s, a, &o), GMM_OK);
    fputs("new a\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_open(s, b, &o), GMM_OK);
    fputs("b\n", gmm_outfile_stream(o));
    ck_assert_int_eq(gmm_outset_open(s, c, &o), GMM_OK);
    fputs("c\n", gmm_outfile_stream(o));
    ck_assert_int_eq(mkdir(c, 0700), 0);
    ck_assert_int_eq(gmm_outset_commit(s), GMM_EIO);
    ck_assert_str_eq(gmm_error_message() + strlen(dir), "/c.csv: cannot write: Is a directory");
    expect_content("a.csv", "old a\n");
    expect_content("b.csv", NULL);
    struct stat s1, s2;
    ck_assert_int_eq(stat(a, &s1), 0);
    ck_assert_int_eq(stat(a2, &s2), 0);
    ck_assert(s1.st_ino == s2.st_ino); /* the very same old file */
    ck_assert_uint_eq(s1.st_nlink, 2);
    ck_assert_uint_eq(tu_dir_count(dir), 3); /* a.csv, a2.csv, the directory c.csv */
    ck_assert_int_eq(rmdir(c), 0);
    free(a);
    free(a2);
    free(b);
    free(c);
}
END_TEST

/* Out of memory anywhere in a set's life: a clean failure, nothing left. */
START_TEST(test_outset_out_of_memory)
{
    char *a = in_dir("a.txt"), *b = in_dir("b.txt");
    int ok = 0;
    for (long k = 0; k < 40 && !ok; k++) {
        gmm_outset *s = NULL;
        gmm_outfile *o = NULL;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_outset_alloc(&s);
        if (st == GMM_OK && (st = gmm_outset_open(s, a, &o)) == GMM_OK) {
            fputs("a", gmm_outfile_stream(o));
            if ((st = gmm_outset_open(s, b, &o)) == GMM_OK) {
                fputs("b", gmm_outfile_stream(o));
                st = gmm_outset_commit(s);
                s = NULL;
            }
        }
        gmm_outset_abort(s);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            ok = 1;
        } else {
            ck_assert_int_eq(st, GMM_ENOMEM);
            ck_assert_uint_eq(tu_dir_count(dir), 0);
        }
    }
    ck_assert(ok);
    expect_content("a.txt", "a");
    expect_content("b.txt", "b");
    ck_assert_uint_eq(tu_dir_count(dir), 2);
    free(a);
    free(b);
}
END_TEST

/* ---- gmm_path_same_file ---------------------------------------------------- */

START_TEST(test_same_file)
{
    char *a = tu_write_str(dir, "a.csv", "a\n"), *b = tu_write_str(dir, "b.csv", "a\n");
    char *hard = in_dir("hard.csv"), *soft = in_dir("soft.csv"), *sub = in_dir("sub");
    ck_assert_int_eq(link(a, hard), 0);
    ck_assert_int_eq(symlink("a.csv", soft), 0);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    char *dotdot = tu_path(sub, "../a.csv"), *dotdot_new = tu_path(sub, "../new.csv");
    char *new1 = in_dir("new.csv"), *dangling = in_dir("dangling.csv");
    ck_assert_int_eq(symlink("new.csv", dangling), 0);
    ck_assert_int_eq(gmm_path_same_file(a, a), 1);
    ck_assert_int_eq(gmm_path_same_file(a, hard), 1);      /* a hard link */
    ck_assert_int_eq(gmm_path_same_file(soft, a), 1);      /* a symbolic link */
    ck_assert_int_eq(gmm_path_same_file(dotdot, hard), 1); /* another spelling */
    ck_assert_int_eq(gmm_path_same_file(a, b), 0);         /* same content, other file */
    /* files not there yet: the same name in the same directory */
    ck_assert_int_eq(gmm_path_same_file(new1, dotdot_new), 1);
    ck_assert_int_eq(gmm_path_same_file(dangling, new1), 1);
    ck_assert_int_eq(gmm_path_same_file(new1, a), 0);
    ck_assert_int_eq(gmm_path_same_file(a, new1), 0);
    char *other = tu_path(sub, "new.csv");
    ck_assert_int_eq(gmm_path_same_file(new1, other), 0);
    /* stdin/stdout, and what cannot be examined */
    ck_assert_int_eq(gmm_path_same_file("-", "-"), 0);
    ck_assert_int_eq(gmm_path_same_file(a, "-"), 0);
    ck_assert_int_eq(gmm_path_same_file(NULL, a), 0);
    ck_assert_int_eq(gmm_path_same_file("", ""), 0);
    char *missing = in_dir("no/such/x.csv");
    ck_assert_int_eq(gmm_path_same_file(missing, missing), 0);
    /* a device and a FIFO are files like any other */
    ck_assert_int_eq(gmm_path_same_file("/dev/null", "/dev/null"), 1);
    char *fifo = in_dir("fifo"), *fifo_link = in_dir("fifo-link");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(symlink("fifo", fifo_link), 0);
    ck_assert_int_eq(gmm_path_same_file(fifo_link, fifo), 1);
    ck_assert_int_eq(gmm_path_same_file(fifo, a), 0);
    free(a);
    free(b);
    free(hard);
    free(soft);
    free(sub);
    free(dotdot);
    free(dotdot_new);
    free(new1);
    free(dangling);
    free(other);
    free(missing);
    free(fifo);
    free(fifo_link);
}
END_TEST

extern Suite *io_outfile_suite(void);
Suite *io_outfile_suite(void)
{
    Suite *s = suite_create("io_outfile");
    TCase *tc = tcase_create("outfile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_commit_creates);
    tcase_add_test(tc, test_commit_replaces_and_mode);
    tcase_add_test(tc, test_abort_keeps_old);
    tcase_add_test(tc, test_relative_path_and_tmp_name);
    tcase_add_test(tc, test_stdout);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_check_ok);
    tcase_add_test(tc, test_read_only);
    tcase_add_test(tc, test_commit_error_cleans_up);
    tcase_add_test(tc, test_write_error);
    tcase_add_test(tc, test_device_in_place);
    tcase_add_test(tc, test_kind_and_flush);
    tcase_add_test(tc, test_fifo_in_place);
    tcase_add_test(tc, test_socket_refused);
    tcase_add_test(tc, test_proc_links_in_place);
    tcase_add_test(tc, test_symlink_followed);
    tcase_add_test(tc, test_mode_and_owner_kept);
    tcase_add_test(tc, test_out_of_memory);
    tcase_add_test(tc, test_outset_commit);
    tcase_add_test(tc, test_outset_abort);
    tcase_add_test(tc, test_outset_write_error);
    tcase_add_test(tc, test_outset_rename_fails);
    tcase_add_test(tc, test_outset_out_of_memory);
    tcase_add_test(tc, test_same_file);
    suite_add_tcase(s, tc);
    return s;
}
