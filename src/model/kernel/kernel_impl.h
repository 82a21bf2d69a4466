/* kernel_impl.h -- private to the composite kernel: the tree of sums and
 * products (kernel.c builds it, kernel_eval.c runs its numerics), the kernel
 * and its workspace.  Private to src/model/. */
#ifndef GMM_KERNEL_IMPL_H
#define GMM_KERNEL_IMPL_H

#include <stddef.h>

#include "gmm/kernel.h"

typedef enum { KN_LEAF, KN_SUM, KN_PROD } kn_op;

typedef struct knode {
    kn_op op;
    size_t d;
    size_t nchild;
    struct knode **child;
    /* leaf */
    const gmm_kernel_type *type;
    size_t leaf;
    double sval[GMM_KERNEL_MAXPARAM]; /* structural values (others unused) */
    size_t tix[GMM_KERNEL_MAXPARAM];  /* index in theta, SIZE_MAX if structural */
    int var_first;                    /* first factor of its product term */
    int damped;                       /* zero-noise factor regularised by damping */
    int demod;                        /* damped oscillator in rotating coordinates */
    int osc_partner;                  /* inside a product with a cosine/periodic factor */
    /* arena offsets (doubles) */
    size_t oA, oQ, oP, oH, oAb, oQb, oPb, oM, oMb, odA, odQ, odP;
    size_t oHt, oHb, odH; /* H(tau), its adjoint; leaf dH/dp (nparam x d) */
} knode;

struct gmm_kernel {
    knode *root;
    size_t d, nparam, nleaves, arena;
    knode **leaves;
    char **name;
    double *value;
    int damped_any;
    int modulated; /* some leaf is demodulated: H depends on time */
    double zweight; /* 1/Z: share of the damping rate each zero-noise factor gets */
};

struct gmm_kernel_work {
    double *a;
    double *lp; /* nleaves * GMM_KERNEL_MAXPARAM leaf parameter values */
    double damp;
    double dt;
    int have_stat, have_disc;
};

#endif
