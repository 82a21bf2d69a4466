#!/usr/bin/env Rscript
# make-sleepstudy-data.R -- data/sleepstudy.csv, lme4's sleepstudy data set
# (Belenky et al. 2003: reaction times of 18 subjects over 10 days of sleep
# deprivation) as shipped with Debian's r-cran-lme4, written as CSV for the
# README's lme4-style example, Reaction ~ Days + (Days | Subject).
#
#   Rscript scripts/make-sleepstudy-data.R [OUT]        (OUT: data/sleepstudy.csv)
#
# Columns Reaction (ms), Days (0..9) and Subject (its label, "308" ...), in
# lme4's row order.  Numbers are written with %.17g, so every value reads back
# as the same double R holds; the output is the same byte for byte on every
# run with the same lme4.
suppressPackageStartupMessages(library(lme4))

args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[1] else "data/sleepstudy.csv"
d <- lme4::sleepstudy
stopifnot(nrow(d) == 180, identical(names(d), c("Reaction", "Days", "Subject")),
          !anyNA(d))
lines <- c("Reaction,Days,Subject",
           sprintf("%s,%s,%s", sprintf("%.17g", d$Reaction), sprintf("%.17g", d$Days),
                   as.character(d$Subject)))
tmp <- paste0(out, ".tmp")
writeLines(lines, tmp)
invisible(file.rename(tmp, out))
