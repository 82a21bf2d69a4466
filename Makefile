# gmm-infer -- one Makefile: objects -> libgmm.a -> gmm-infer and the tests.
#
#   make                 build gmm-infer (installs missing Debian packages first)
#   make check           build and run every test suite and the CLI tests
#   make check SANITIZE=1  the same under -fsanitize=address,undefined
#   make fuzz            libFuzzer on the CSV reader, the spec parser and the
#                        model-file reader, FUZZ_SECONDS (60) each (needs clang:
#                        scripts/install-deps.sh --fuzz); crashes are kept in
#                        tests/fuzz/regress/, which `make check` replays with cc
#   make bench           run the benchmarks (BENCH_CSV=FILE, BENCH_QUICK=1)
#   make demo            the README's main job on the shipped data
#   make demo-flu        the influenza counts as a space-time model (a few minutes)
#   make demo-grid       the bei trees counted on a 100 x 50 lattice (besag), as a map
#   make install PREFIX=/usr/local
#
# Debugging a test: CK_FORK=no CK_RUN_SUITE=band_chol build/release/tests/run

PREFIX ?= /usr/local
CC ?= cc
OPT ?= -O3
SANITIZE ?=
WERROR ?=

ifeq ($(SANITIZE),1)
BUILD := build/sanitize
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD := build/release
SAN :=
endif

WARN := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wvla -Wundef -Wpointer-arith -Wcast-align
ifeq ($(WERROR),1)
WARN += -Werror
endif

# Deferred (=) so that pkg-config runs after the dependency step has had its
# chance to install pkg-config and the libraries.
PKGS = gsl jansson liblbfgs
CPPFLAGS = -Iinclude -I/usr/include/suitesparse -D_POSIX_C_SOURCE=200809L
CFLAGS = -std=c11 $(OPT) -g $(WARN) $(SAN) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# GSL's CBLAS calls go to OpenBLAS (which also provides LAPACK's dpbtrf).
# CHOLMOD and its orderings are linked from libsuitesparse-dev's archives:
# shared, they and what they pull in (reference LAPACK and BLAS, whose
# calls OpenBLAS answers anyway) were ten more libraries to load, 2.5 ms
# more at every start; archived, their BLAS and LAPACK calls bind to
# OpenBLAS.  METIS ships shared only.  CHOLMOD's supernodal factorisation
# times every BLAS call it makes, statistics nothing here reads: --wrap
# sends those clock reads to a stub (factor_sparse_serial.c).
CHOLMOD_LIBS = -Wl,-Bstatic -lcholmod -lamd -lcamd -lcolamd -lccolamd -lsuitesparseconfig \
               -Wl,-Bdynamic -l:libmetis.so.5 -Wl,--wrap=SuiteSparse_time
LDLIBS = $(shell pkg-config --libs-only-L $(PKGS) 2>/dev/null) -lgsl -lopenblas -lcsv \
         -ljansson -llbfgs $(CHOLMOD_LIBS) -lgomp -lm -pthread
TEST_LDLIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lpthread)

# The library's folders are its layers (docs/design.md, Layers), bottom up:
# core/, band/ and sparse/ (the two storages), factor/ (one interface to the factorisations), io/, the components -- graph/ and model/ (a room per
# component: lik/, kernel/, ssm/, gmrf/, stack/; the latent type they share
# at its top level) --, infer/, and mdl/, the whole model.  cli/ is the
# program.
LIB_SRC := $(sort $(wildcard src/core/*.c src/band/*.c src/sparse/*.c src/factor/*.c src/io/*.c src/graph/*.c \
                             src/model/*.c src/model/*/*.c src/infer/*.c src/mdl/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SUPPORT_SRC := $(sort $(wildcard tests/support/*.c))
TEST_SRC := $(sort $(wildcard tests/*/test_*.c))
BENCH_SRC := $(sort $(wildcard tests/bench/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/%.o) $(TEST_SRC:%.c=$(BUILD)/%.o) \
            $(BUILD)/tests/runner.o
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)
# Reference programs of the CLI tests (tests/cli/ref/): independent of the
# library, they link GSL and jansson only.
REF_SRC := $(sort $(wildcard tests/cli/ref/*.c))
REF_BIN := $(REF_SRC:tests/cli/ref/%.c=$(BUILD)/tests/ref/%)

LIB := $(BUILD)/libgmm.a
BIN := $(BUILD)/gmm-infer
TEST_BIN := $(BUILD)/tests/run

.PHONY: all deps deps-bench deps-demo deps-fuzz check check-unit check-cli check-fuzz fuzz \
        bench demo demo-flu demo-grid install clean

all: gmm-infer

deps:
	@scripts/install-deps.sh

deps-bench:
	@scripts/install-deps.sh --bench

deps-demo:
	@scripts/install-deps.sh --demo

deps-fuzz:
	@scripts/install-deps.sh --fuzz

# The top-level ./gmm-infer is a copy of the release build, so the README's
# commands work from the checkout.
gmm-infer: $(BIN)
	cp $(BIN) $@.tmp && mv -f $@.tmp $@

# The square-root fold's short row copies stay inline loops (band_qr_fold.c):
# GCC would otherwise turn them into library calls, which cost more than the
# copies at these lengths (measured: 3% of the CO2 loglik + gradient).  The
# fold's other files (band_qr*.c: the tape's reverse, the moments) keep the
# same flag, so that their loops compile as they were measured.
NO_LDP := $(shell $(CC) -fno-tree-loop-distribute-patterns -Werror -x c -c /dev/null \
                  -o /dev/null 2>/dev/null && echo -fno-tree-loop-distribute-patterns)
$(patsubst %.c,$(BUILD)/%.o,$(wildcard src/band/band_qr*.c)): CFLAGS += $(NO_LDP)

$(BUILD)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -MMD -MP $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

# Test suites register themselves: every `Suite *NAME_suite(void)` defined in
# tests/*/test_*.c is collected here, so adding a suite never edits the runner.
$(BUILD)/tests/suites.h: $(TEST_SRC) Makefile
	@mkdir -p $(dir $@)
	@grep -ho '^Suite \*[a-z0-9_]*_suite(void)' $(TEST_SRC) /dev/null | \
	  sed 's/^Suite \*\([a-z0-9_]*\)_suite(void)/GMM_SUITE(\1)/' > $@.tmp && mv $@.tmp $@

$(BUILD)/tests/runner.o: tests/runner.c $(BUILD)/tests/suites.h | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(BUILD)/tests -Itests $(CFLAGS) -c $< -o $@

$(BUILD)/tests/%.o: CPPFLAGS += -Itests
# Suites are found by the generated runner, not by a header.
$(BUILD)/tests/%.o: WARN += -Wno-missing-prototypes

$(TEST_BIN): $(TEST_OBJ) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(LIB) $(LDLIBS) $(TEST_LDLIBS)

$(BUILD)/bench/%: tests/bench/%.c $(LIB) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

check: check-unit check-cli check-fuzz

check-unit: $(TEST_BIN)
	$(TEST_BIN)

$(BUILD)/tests/ref/%: tests/cli/ref/%.c $(wildcard tests/cli/ref/*.h) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDLIBS)

check-cli: $(BIN) $(REF_BIN)
	@if [ -x tests/cli/run.sh ]; then GMM_INFER=$(BIN) GMM_REF=$(abspath $(BUILD)/tests/ref) \
	  tests/cli/run.sh; fi

# ---- fuzzing (tests/fuzz/) ------------------------------------------------
# Each harness tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput.  `make
# check` links it with tests/fuzz/replay.c (cc, no clang) and runs it on the
# seed corpus and the kept regression cases; `make fuzz` builds it and the
# library with clang -fsanitize=fuzzer,address,undefined into build/fuzz/ and
# runs each harness in turn, one process, for FUZZ_SECONDS seconds
# (scripts/fuzz.sh: working corpus in build/fuzz/corpus/NAME, crashes copied
# to tests/fuzz/regress/NAME/).
FUZZ_NAMES := table spec modelfile graph
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_BUILD := build/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -O1 -g $(WARN) -Wno-format-nonliteral $(FUZZ_SAN) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FUZZ_LIB := $(FUZZ_BUILD)/libgmm.a
FUZZ_BIN := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)
REPLAY_BIN := $(FUZZ_NAMES:%=$(BUILD)/fuzz/replay_%)

$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(LIB) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/fuzz $(CFLAGS) -o $@ tests/fuzz/fuzz_$*.c tests/fuzz/replay.c \
	  $(LIB) $(LDLIBS)

check-fuzz: $(REPLAY_BIN)
	@for n in $(FUZZ_NAMES); do \
	  dirs="tests/fuzz/corpus/$$n"; \
	  [ -d tests/fuzz/regress/$$n ] && dirs="$$dirs tests/fuzz/regress/$$n"; \
	  printf 'fuzz %s ' "$$n"; $(BUILD)/fuzz/replay_$$n $$dirs || exit 1; \
	done

$(FUZZ_BUILD)/%.o: %.c | deps-fuzz
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) -MMD -MP $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_LIB): $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_LIB) | deps-fuzz
	$(FUZZ_CC) $(CPPFLAGS) -Itests/fuzz $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB) \
	  $(LDLIBS)

fuzz: $(FUZZ_BIN)
	scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_NAMES)

BENCH_CSV ?=
BENCH_QUICK ?=
# gmm-infer hmc against Stan: all cases, 4 x (1000 + 1000); quick: the fixed
# cases, 4 x (300 + 300)
STAN_QUICK := --cases flu,chicago --warmup 300 --draws 300
bench: $(BENCH_BIN) $(BIN) | deps-bench
	@for b in $(BENCH_BIN); do \
	  echo "== $$b"; \
	  BENCH_CSV="$(BENCH_CSV)" BENCH_QUICK="$(BENCH_QUICK)" $$b || exit 1; \
	done
	@if [ -x scripts/bench.sh ]; then GMM_INFER=$(BIN) BENCH_QUICK="$(BENCH_QUICK)" \
	  BENCH_CSV="$(BENCH_CSV)" scripts/bench.sh; fi
	@echo "== scripts/bench_marginal.sh"; GMM_INFER=$(BIN) BENCH_QUICK="$(BENCH_QUICK)" \
	  scripts/bench_marginal.sh
	@echo "== scripts/bench_stack_sqrt.sh"; GMM_INFER=$(BIN) BENCH_QUICK="$(BENCH_QUICK)" \
	  scripts/bench_stack_sqrt.sh
	@echo "== scripts/bench_stan.sh"; scripts/bench_stan.sh --out $(BUILD)/bench-stan \
	  $(if $(BENCH_QUICK),$(STAN_QUICK))

demo: gmm-infer | deps-demo
	scripts/demo.sh

demo-flu: gmm-infer
	scripts/demo-flu.sh

demo-grid: gmm-infer
	scripts/demo-grid.sh

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/gmm-infer
	install -m 644 man/gmm-infer.1 $(DESTDIR)$(PREFIX)/share/man/man1/gmm-infer.1

clean:
	rm -rf build gmm-infer

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) \
         $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.d)
