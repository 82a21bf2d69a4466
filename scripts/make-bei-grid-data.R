#!/usr/bin/env Rscript
# make-bei-grid-data.R -- the Barro Colorado Island trees (Beilschmiedia pendula,
# 3604 locations in a 1000 m x 500 m plot) binned into a lattice of square
# cells, with the plot's elevation and slope at each cell's centre: the classic
# log-Gaussian Cox process example (Moller & Waagepetersen; INLA's and the
# besag literature's), fitted as counts per cell,
#
#   count ~ elev + grad + f(cell, besag, graph = data/bei_grid_edges.csv), poisson
#
#   Rscript scripts/make-bei-grid-data.R [OUTDIR] [CELL]
#
# writes OUTDIR/bei_grid_cells.csv (cell,x,y,count,elev,grad; OUTDIR default
# data/) and OUTDIR/bei_grid_edges.csv (i,j: the 4-neighbour edges) for square
# cells of CELL metres (default 10: 100 x 50 = 5000 cells).  CELL must divide
# 500 and be a multiple of 10, so that every cell centre lies on the 5 m pixel
# grid of spatstat's covariate images: elev and grad are the pixel values there,
# not interpolated.  Cells are numbered 1.. row by row from the south-west
# corner (x fastest); x, y are the centre's coordinates in metres.  A tree on
# the plot's east or north edge (x = 1000 or y = 500) falls in the last cell.
# Needs Debian r-cran-spatstat.data (its bei, bei.extra; no spatstat itself).
# The output is the same byte for byte on every run.
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[[1]] else "data"
cell <- if (length(args) >= 2) as.numeric(args[[2]]) else 10
stopifnot(cell >= 10, cell %% 10 == 0, 500 %% cell == 0)
suppressMessages(library(spatstat.data))
bei <- spatstat.data::bei
bei.extra <- spatstat.data::bei.extra
pts <- unclass(bei)
win <- unclass(pts$window)
stopifnot(pts$n == 3604, win$xrange == c(0, 1000), win$yrange == c(0, 500))
nx <- 1000 / cell
ny <- 500 / cell
ix <- pmin(floor(pts$x / cell), nx - 1)
iy <- pmin(floor(pts$y / cell), ny - 1)
counts <- tabulate(iy * nx + ix + 1, nbins = nx * ny)
stopifnot(sum(counts) == pts$n)

# The image's value at (x, y), which must be one of its pixel centres.
pixel <- function(im, x, y) {
    im <- unclass(im)
    col <- match(x, im$xcol)
    row <- match(y, im$yrow)
    stopifnot(!anyNA(col), !anyNA(row))
    v <- im$v[cbind(row, col)]
    stopifnot(all(is.finite(v)))
    v
}
gx <- rep(seq_len(nx) - 1, times = ny)
gy <- rep(seq_len(ny) - 1, each = nx)
cx <- cell * gx + cell / 2
cy <- cell * gy + cell / 2
cells <- data.frame(cell = seq_len(nx * ny), x = cx, y = cy, count = counts,
                    elev = pixel(bei.extra$elev, cx, cy),
                    grad = pixel(bei.extra$grad, cx, cy))
id <- matrix(cells$cell, nrow = nx) # id[ix + 1, iy + 1]
east <- data.frame(i = as.vector(id[-nx, ]), j = as.vector(id[-1, ]))
north <- data.frame(i = as.vector(id[, -ny]), j = as.vector(id[, -1]))
edges <- rbind(east, north)
edges <- edges[order(edges$i, edges$j), ]
dir.create(out, showWarnings = FALSE, recursive = TRUE)
# The shortest of %.15g and %.17g that reads back as the same double.
fmt <- function(v) ifelse(as.numeric(sprintf("%.15g", v)) == v, sprintf("%.15g", v),
                          sprintf("%.17g", v))
write.csv(data.frame(cell = cells$cell, x = fmt(cells$x), y = fmt(cells$y),
                     count = cells$count, elev = fmt(cells$elev), grad = fmt(cells$grad)),
          file.path(out, "bei_grid_cells.csv"), row.names = FALSE, quote = FALSE)
write.csv(edges, file.path(out, "bei_grid_edges.csv"), row.names = FALSE, quote = FALSE)
cat(sprintf("bei: %d trees in %d x %d cells of %g m (%d empty), %d edges\n",
            pts$n, nx, ny, cell, sum(counts == 0), nrow(edges)), file = stderr())
