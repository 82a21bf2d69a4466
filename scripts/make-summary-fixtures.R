#!/usr/bin/env Rscript
# make-summary-fixtures.R -- the reference values for gmm-infer's posterior
# summary (src/infer/summary.c, tests/infer/test_summary.c), computed by the
# R package posterior (Debian r-cran-posterior; these fixtures were made with
# posterior 1.4.0 on R 4.2).
#
#   Rscript scripts/make-summary-fixtures.R [OUTDIR]
#
# OUTDIR defaults to tests/fixtures/summary.  For each set NAME it writes
#
#   draws_NAME.csv    fixed draws in the layout of `gmm-infer hmc`:
#                     .chain,.iteration,.draw,lp__,accept_stat__,<variables>,
#                     rows by chain then iteration, numbers with 17
#                     significant digits (they read back exactly), NA for a
#                     missing draw;
#   summary_NAME.csv  posterior::summarise_draws() of those draws (every
#                     column but .chain/.iteration/.draw/accept_stat__):
#                     variable,mean,median,sd,mad,q5,q95,rhat,ess_bulk,
#                     ess_tail,ess_mean, 17 significant digits, NA as R
#                     writes it.
#
# The draws are seeded (set.seed below), so the files are reproducible; the
# tests read the committed files and never need R.
suppressPackageStartupMessages(library(posterior))

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/summary"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)

# AR(1) started from its stationary law: x_t = rho x_{t-1} + e_t.
ar1 <- function(n, rho) {
    x <- numeric(n)
    x[1] <- rnorm(1) / sqrt(1 - rho^2)
    for (t in seq_len(n)[-1]) x[t] <- rho * x[t - 1] + rnorm(1)
    x
}

num <- function(x) ifelse(is.na(x), "NA", sprintf("%.17g", x))

write_csv <- function(df, path) {
    cols <- lapply(df, function(col) if (is.numeric(col)) num(col) else as.character(col))
    lines <- do.call(paste, c(cols, sep = ","))
    tmp <- paste0(path, ".tmp")
    writeLines(c(paste(names(df), collapse = ","), lines), tmp)
    invisible(file.rename(tmp, path))
}

# gen(chain, niter) returns a list of named variables, each niter draws.
make_set <- function(name, nchain, niter, gen) {
    chains <- lapply(seq_len(nchain), function(ch) {
        v <- gen(ch, niter)
        data.frame(.chain = ch, .iteration = seq_len(niter),
                   lp__ = -0.5 * v[[1]]^2 + rnorm(niter, sd = 0.1),
                   accept_stat__ = runif(niter), v, check.names = FALSE)
    })
    d <- do.call(rbind, chains)
    d <- cbind(d[1:2], .draw = seq_len(nrow(d)), d[-(1:2)])
    write_csv(d, file.path(outdir, paste0("draws_", name, ".csv")))

    x <- as_draws_df(d[setdiff(names(d), "accept_stat__")])
    s <- suppressWarnings(summarise_draws(x, "mean", "median", "sd", "mad", "quantile2",
                                          "rhat", "ess_bulk", "ess_tail", "ess_mean"))
    write_csv(as.data.frame(s), file.path(outdir, paste0("summary_", name, ".csv")))
}

set.seed(20240917)

# Four chains of 200: the shapes a sampler produces, and the edge cases.
make_set("main", 4, 200, function(ch, n) {
    x <- list(
        ar03 = ar1(n, 0.3),
        ar09 = ar1(n, 0.9),
        arneg = ar1(n, -0.6),             # antithetic: ESS > draws, capped
        gamma = rgamma(n, shape = 0.7),   # skewed
        heavy = rt(n, df = 1.5),          # heavy tails
        shift = rnorm(n, mean = 0.4 * (ch - 1)),  # chains disagree: R-hat > 1
        scale = rnorm(n, sd = c(1, 1, 1, 4)[ch]), # tails disagree: folded R-hat
        ties = rpois(n, 2),               # many ties (average ranks)
        const = rep(3.25, n),             # constant: NA diagnostics
        tiny = 1e-20 * rnorm(n),          # range below machine epsilon
        missing = rnorm(n))
    if (ch == 3) x$missing[17] <- NA      # one NA: every column NA
    x
})

# Odd chain length: the middle draw of each chain is left out when splitting.
make_set("odd", 3, 101, function(ch, n) {
    list(ar05 = ar1(n, 0.5), gamma = rgamma(n, shape = 2), shift = rnorm(n, mean = ch))
})

# One chain (split in two).
make_set("one", 1, 50, function(ch, n) list(ar05 = ar1(n, 0.5), gamma = rgamma(n, 3)))

# Split chains of 4: Geyer's loop never runs (tau = 2 by R's 1:0 indexing).
make_set("short", 4, 8, function(ch, n) list(x = rnorm(n), ar07 = ar1(n, 0.7)))

# Split chains of 2: too short for ESS (NA); R-hat is still defined.
make_set("few", 2, 5, function(ch, n) list(x = rnorm(n), y = rexp(n)))
