#!/usr/bin/env Rscript
# bench_glmer.R -- `gmm-infer fit` against lme4's glmer on one Poisson model
# with three covariates and a 1000-level random intercept, side by side:
#
#   Rscript scripts/bench_glmer.R GMM_INFER [N] [LEVELS]
#
# N rows (default 1e5) and LEVELS groups (default 1000) are drawn here from a
# seeded generator and written to a temporary CSV; then
#   glmer(y ~ x1 + x2 + x3 + (1 | g), family = poisson, nAGQ = 1) with its
#     default control, timed from the data frame (R's own set-up included),
#   gmm-infer fit --formula 'y ~ x1 + x2 + x3 + f(g, iid)' --likelihood
#     poisson, timed as a whole process (reading the CSV included),
# and prints both maximised log likelihoods, their relative difference, both
# times and their ratio.  glmer's default inner tolerance (tolPwrss 1e-7)
# moves its log likelihood by ~1e-4 absolute, far below 1e-6 relative at
# this size.  Exit status 1 when the log likelihoods differ by more than 1e-6
# relative (a correctness failure, not a slow run).
suppressPackageStartupMessages(library(lme4))

args <- commandArgs(trailingOnly = TRUE)
if (length(args) < 1) stop("usage: bench_glmer.R GMM_INFER [N] [LEVELS]")
gmm <- args[1]
n <- if (length(args) >= 2) as.integer(args[2]) else 100000L
G <- if (length(args) >= 3) as.integer(args[3]) else 1000L

set.seed(19)
g <- sprintf("g%04d", sample.int(G, n, replace = TRUE))
u <- setNames(rnorm(G, 0, 0.5), sprintf("g%04d", 1:G))
x1 <- round(rnorm(n), 4); x2 <- round(runif(n), 4); x3 <- round(rnorm(n), 4)
y <- rpois(n, exp(0.5 + 0.3 * x1 - 0.4 * x2 + 0.1 * x3 + u[g]))
d <- data.frame(y = y, x1 = x1, x2 = x2, x3 = x3, g = g)
csv <- tempfile(fileext = ".csv")
write.csv(d, csv, row.names = FALSE, quote = FALSE)

t_r <- system.time(m <- glmer(y ~ x1 + x2 + x3 + (1 | g), family = poisson, data = d,
                              nAGQ = 1))[["elapsed"]]
ll_r <- as.numeric(logLik(m))

out <- tempfile(fileext = ".json")
t_c <- system.time(rc <- system2(gmm, c("fit", "--formula", shQuote("y ~ x1 + x2 + x3 + f(g, iid)"),
                                        "--likelihood", "poisson", "-o", out, csv),
                                 stderr = FALSE))[["elapsed"]]
if (rc != 0) stop("gmm-infer fit failed")
js <- readLines(out)
ll_c <- as.numeric(sub(".*\"loglik\": ([^,]*),.*", "\\1", grep("\"loglik\":", js, value = TRUE)))
rel <- abs(ll_c - ll_r) / abs(ll_r)
cat(sprintf("poisson, %d rows, 3 covariates, %d-level iid\n", n, G))
cat(sprintf("  glmer     loglik %.10f  %8.3f s\n", ll_r, t_r))
cat(sprintf("  gmm-infer loglik %.10f  %8.3f s (whole process)\n", ll_c, t_c))
cat(sprintf("  ratio glmer / gmm-infer: %.1fx; loglik relative difference %.2g\n",
            t_r / t_c, rel))
unlink(c(csv, out))
if (rel > 1e-6) quit(status = 1)
