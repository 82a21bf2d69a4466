/* replay.c -- run a fuzzing harness on kept inputs, without libFuzzer:
 *
 *   build/release/fuzz/replay_table tests/fuzz/corpus/table tests/fuzz/regress/table
 *
 * Each argument is a file or a directory (its files, in name order; names
 * starting with '.' and README files are skipped).  Every file is passed
 * whole to the harness's LLVMFuzzerTestOneInput, as libFuzzer would; a
 * harness that finds a broken invariant aborts, so a regression case that
 * crashes again fails `make check` here (under SANITIZE=1 with the
 * sanitizers' report).  Prints "replay: N inputs" and exits 0, or 2 when a
 * file cannot be read. */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    unsigned char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            unsigned char *b = realloc(buf, cap *= 2);
            if (!b)
                free(buf);
            buf = b;
        }
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        free(buf);
        return -1;
    }
    /* An exact-size copy, so that ASan sees a read past the input. */
    unsigned char *data = malloc(len ? len : 1);
    if (!data) {
        free(buf);
        return -1;
    }
    memcpy(data, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    return 0;
}

static int skipped(const struct dirent *e)
{
    return e->d_name[0] != '.' && strncmp(e->d_name, "README", 6) != 0;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[a], strerror(errno));
            return 2;
        }
        if (!S_ISDIR(sb.st_mode)) {
            if (replay_file(argv[a]) != 0)
                return 2;
            count++;
            continue;
        }
        struct dirent **list;
        int n = scandir(argv[a], &list, skipped, alphasort);
        if (n < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[a], strerror(errno));
            return 2;
        }
        int rc = 0;
        for (int k = 0; k < n; k++) {
            size_t plen = strlen(argv[a]) + strlen(list[k]->d_name) + 2;
            char *p = malloc(plen);
            if (!p || (snprintf(p, plen, "%s/%s", argv[a], list[k]->d_name),
                       replay_file(p) != 0))
                rc = 2;
            else
                count++;
            free(p);
            free(list[k]);
        }
        free(list);
        if (rc)
            return rc;
    }
    printf("replay: %zu inputs\n", count);
    return 0;
}
