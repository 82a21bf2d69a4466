/* factor_sparse_serial.c -- the sparse factor's numeric work on one
 * thread (factor_sparse_impl.h).  Its own file: both the factorisation
 * (factor_sparse.c) and the supernodal selected inverse
 * (factor_sparse_super.c) call it. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "factor_sparse_impl.h"

/* Why serial.  CHOLMOD's supernodal factorisation opens an OpenMP team
 * of four (compiled in) around its scatter loops of large supernodes, and
 * calls OpenBLAS, threaded itself, for each supernode's small dsyrk, dgemm
 * and dpotrf; the selected inverse and the solves call BLAS per supernode
 * too.  On a 300 x 300 lattice the two thread pools' hand-offs (futex
 * waits; OpenBLAS's workers spin on sched_yield between calls) cost more
 * CPU than the work they share.  OpenMP
 * serves nothing else in the program: max-active-levels 0 makes every
 * parallel region a team of one (OpenMP 5.0 sec. 2.6.1); OpenBLAS keeps its
 * threads for the band path, which gets its setting back after each call. */
/* Threads (hmc's chains) may factor at once.  OpenMP's max-active-levels
 * is each thread's own (libgomp keeps it per thread): set and restored per
 * thread, nested calls counted.  OpenBLAS's thread count is the process's:
 * the first thread in saves it and the last out restores it, both under one
 * lock, so that a thread entering while another leaves cannot save the
 * serial setting as the one to restore. */
static _Thread_local int depth, saved_levels;
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static int inside, saved_blas;

void gmm_factor_impl_sparse_serial_begin(void)
{
    if (depth++ == 0) {
        saved_levels = omp_get_max_active_levels();
        omp_set_max_active_levels(0);
    }
    pthread_mutex_lock(&blas_lock);
    if (inside++ == 0) {
        saved_blas = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
    pthread_mutex_unlock(&blas_lock);
}

void gmm_factor_impl_sparse_serial_end(void)
{
    pthread_mutex_lock(&blas_lock);
    if (--inside == 0)
        openblas_set_num_threads(saved_blas);
    pthread_mutex_unlock(&blas_lock);
    if (--depth == 0)
        omp_set_max_active_levels(saved_levels);
}

/* A team of one still costs libgomp a team's set-up and, at its end, a
 * futex wake (config/linux/bar.c wakes the barrier's waiters whether or
 * not there are any).  CHOLMOD opens a region per supernode and
 * descendant: about 1e5 regions, 1.6 s of system time, in one 300 x 300
 * lattice loglik of 3.3 s.  Inside a serial section this program's
 * definition of the entry point GCC emits for `#pragma omp parallel`
 * (CHOLMOD's only one) runs the region's body on the calling thread, as
 * the team of one would: its worksharing loops see omp_get_num_threads()
 * 1 and thread 0, and so take every iteration.  Elsewhere, and inside
 * an enclosing team, it hands the region to libgomp's.  max-active-levels 0 above keeps the regions
 * serial should another definition be bound before this one. */
typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
static gomp_parallel_fn gomp_parallel_next;
static pthread_once_t gomp_once = PTHREAD_ONCE_INIT;

static void gomp_resolve(void)
{
    void *f = dlsym(RTLD_NEXT, "GOMP_parallel");
    memcpy(&gomp_parallel_next, &f, sizeof f); /* ISO C: no object-to-function cast */
}

/* CHOLMOD's clock.  Debian's CHOLMOD brackets each dsyrk, dgemm, dtrsm and
 * dpotrf of the supernodal factorisation with SuiteSparse_time, for
 * timing statistics in its Common that nothing here reads: two clock reads
 * per BLAS call, on a lattice's tens of thousands of small supernodes a
 * visible share of the CPU (docs/benchmarks.md).  The Makefile links with
 * --wrap=SuiteSparse_time, which binds CHOLMOD's calls to this stub; the
 * statistics read 0.  Linked without it, the stub is unused. */
double __wrap_SuiteSparse_time(void);
double __wrap_SuiteSparse_time(void) { return 0.0; }

void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags)
{
    /* Inside an enclosing team (a program calling the library from its own
     * parallel region) the body would see that team's size and number and
     * take only its share of the iterations: libgomp's team of one then */
    if (depth == 0 || omp_get_level() > 0) {
        pthread_once(&gomp_once, gomp_resolve);
        if (gomp_parallel_next) {
            gomp_parallel_next(fn, data, num_threads, flags);
            return;
        }
    }
    fn(data); /* the team of one, without the team */
}
