/* infer_impl.h -- what the optimisers of src/infer/ share.  Private. */
#ifndef GMM_INFER_IMPL_H
#define GMM_INFER_IMPL_H

/* A static description of how a liblbfgs run ended (its return code). */
const char *infer_lbfgs_message(int ret);

#endif
