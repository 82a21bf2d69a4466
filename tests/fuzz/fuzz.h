/* fuzz.h -- the entry point every harness in tests/fuzz/ defines: libFuzzer
 * calls it with each generated input (`make fuzz`), and replay.c with each
 * file of the kept corpora (`make check`, no clang needed).  A harness
 * returns 0; a broken invariant calls fuzz_fail, which aborts, so the
 * fuzzer keeps the input as a crash. */
#ifndef GMM_FUZZ_H
#define GMM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_require(cond)                                                                 \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
