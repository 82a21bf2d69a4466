#!/usr/bin/env Rscript
# make-insteval-data.R -- lme4's InstEval (73 421 lecture ratings: 2972 students
# s x 1128 lecturers d x 14 departments dept) as CSV for the crossed random
# effects benchmark (scripts/bench_sparse.sh):
#
#   Rscript scripts/make-insteval-data.R [OUTDIR]
#
# writes OUTDIR/insteval.csv (default bench-data/, ignored by git): columns
# y (the rating, 1..5), service (0/1: whether the lecture is a service course),
# s, d, dept (the factors' level labels, written as text), studage, lectage
# (the ordered factors' codes, unused by the benchmark's model).  Rows in the
# data frame's order; the same file on every run (no random numbers).  Needs
# lme4 (Debian r-cran-lme4).
args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "bench-data"
suppressMessages(library(lme4))
d <- lme4::InstEval
stopifnot(nrow(d) == 73421, nlevels(d$s) == 2972, nlevels(d$d) == 1128,
          nlevels(d$dept) == 14)
out <- data.frame(y = d$y, service = as.integer(as.character(d$service)),
                  s = as.character(d$s), d = as.character(d$d),
                  dept = as.character(d$dept),
                  studage = as.integer(d$studage), lectage = as.integer(d$lectage))
dir.create(outdir, showWarnings = FALSE, recursive = TRUE)
write.csv(out, file.path(outdir, "insteval.csv"), row.names = FALSE, quote = FALSE)
