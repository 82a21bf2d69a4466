# shellcheck shell=bash
# 00_basics.sh -- top-level options, the command table and usage errors.
# Sourced by tests/cli/run.sh (see there for the helpers).

version=$(sed -n 's/^#define GMM_VERSION "\(.*\)"$/\1/p' "$ROOT/include/gmm/version.h")
version_re=${version//./\\.}

begin "--help prints usage on stdout and exits 0"
run "$GMM_INFER" --help
expect_exit 0
expect_stdout '^Usage: gmm-infer '
expect_stdout '^Commands:'
expect_stdout '^  version +print the version'
expect_stderr_empty

begin "-h and 'help' are --help"
run "$GMM_INFER" -h
expect_exit 0
expect_stdout '^Usage: gmm-infer '
run "$GMM_INFER" help
expect_exit 0
expect_stdout '^Usage: gmm-infer '

begin "--version prints the version from version.h"
run "$GMM_INFER" --version
expect_exit 0
expect_stdout "^gmm-infer ${version_re}\$"
expect_stdout_eq "gmm-infer $version"
expect_stderr_empty

begin "-V and the version command agree with --version"
run "$GMM_INFER" -V
expect_exit 0
expect_stdout_eq "gmm-infer $version"
run "$GMM_INFER" version
expect_exit 0
expect_stdout_eq "gmm-infer $version"

begin "no command: usage on stderr, exit 2"
run "$GMM_INFER"
expect_exit 2
expect_stdout_empty
expect_stderr '^Usage: gmm-infer '

begin "unknown command: message on stderr, exit 2"
run "$GMM_INFER" frobnicate
expect_exit 2
expect_stdout_empty
expect_stderr "^gmm-infer: unknown command 'frobnicate'\$"
expect_stderr '^Usage: gmm-infer '

begin "unknown top-level option is an unknown command"
run "$GMM_INFER" --bogus
expect_exit 2
expect_stdout_empty
expect_stderr "unknown command '--bogus'"
