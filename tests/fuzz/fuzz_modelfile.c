/* fuzz_modelfile.c -- the model-file reader (gmm_model_read): any bytes are
 * a model or a GMM_EPARSE naming the file, never a crash.  A model read
 * back is self-consistent (one of kernel/precision, named parameters that
 * gmm_model_param_index finds), and when gmm_model_write accepts it, what it
 * writes reads back to the same model, doubles bit for bit. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "gmm/modelfile.h"

/* gmm_model_read takes a path: each input is written to one scratch file
 * per process (removed at exit). */
static char in_path[64], out_path[64];

static void remove_scratch(void)
{
    unlink(in_path);
    unlink(out_path);
}

/* In $TMPDIR, else /dev/shm (memory: a file on disk costs ~5 ms per input
 * on this project's machine, 100 times the parse), else /tmp. */
static int scratch(char *path, const char *tag)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir || strlen(dir) >= 32)
        dir = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, 64, "%s/gmm-fuzz-%s-XXXXXX", dir, tag);
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int write_all(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = size ? fwrite(data, 1, size, f) : 0;
    return (fclose(f) == 0 && n == size) ? 0 : -1;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_model(const gmm_model *m)
{
    fuzz_require(!m->desc.kernel != !m->desc.precision);
    fuzz_require(m->desc.likelihood && m->desc.data.file);
    for (size_t i = 0; i < m->nparam; i++) {
        size_t j = (size_t)-1;
        fuzz_require(m->param_name[i]);
        fuzz_require(gmm_model_param_index(m, m->param_name[i], &j) == GMM_OK);
        fuzz_require(!strcmp(m->param_name[j], m->param_name[i]));
    }
    /* Written out and read back: the same model. */
    FILE *f = fopen(out_path, "wb");
    if (!f)
        return;
    gmm_status st = gmm_model_write(m, f, out_path);
    if (fclose(f) != 0 || st != GMM_OK)
        return;
    gmm_model b;
    gmm_model_init(&b);
    st = gmm_model_read(out_path, &b);
    fuzz_require(st == GMM_OK || st == GMM_ENOMEM);
    if (st != GMM_OK)
        return;
    const gmm_model_desc *d = &m->desc, *e = &b.desc;
    fuzz_require(same_str(d->kernel, e->kernel) && same_str(d->precision, e->precision));
    fuzz_require(same_str(d->likelihood, e->likelihood) && same_str(d->graph, e->graph));
    fuzz_require(same_str(d->data.file, e->data.file) && same_str(d->data.x, e->data.x) &&
                 same_str(d->data.y, e->data.y) && same_str(d->data.node, e->data.node));
    fuzz_require(m->nparam == b.nparam);
    for (size_t i = 0; i < m->nparam; i++) {
        fuzz_require(!strcmp(m->param_name[i], b.param_name[i]));
        fuzz_require(!memcmp(&m->param_value[i], &b.param_value[i], sizeof(double)));
    }
    fuzz_require(!memcmp(&m->loglik, &b.loglik, sizeof(double)));
    fuzz_require(m->has_center == b.has_center && m->converged == b.converged &&
                 m->iterations == b.iterations);
    gmm_model_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!in_path[0]) {
        if (scratch(in_path, "in") != 0 || scratch(out_path, "out") != 0)
            abort();
        atexit(remove_scratch);
    }
    if (write_all(in_path, data, size) != 0)
        abort();
    gmm_model m;
    gmm_model_init(&m);
    gmm_status st = gmm_model_read(in_path, &m);
    fuzz_require(st == GMM_OK || st == GMM_EPARSE || st == GMM_ENOMEM);
    if (st == GMM_OK)
        check_model(&m);
    else
        fuzz_require(!strncmp(gmm_error_message(), in_path, strlen(in_path)));
    gmm_model_free(&m);
    return 0;
}
