// Poisson counts on a graph, latent GMRF with a fixed precision Q (the
// edge-ou precision of include/gmm/gmrf.h at gmm-infer's fitted values,
// built by scripts/bench_stan.R), non-centred: z ~ N(0, I), x = L^-T z with
// L the Cholesky factor of Q, so x ~ N(0, Q^-1) -- the whitening gmm-infer
// hmc samples in, so both samplers see the same target.
//
// Stan 2.21 has a data-matrix reverse mode for the lower-triangular solve
// (mdivide_left_tri_low) but promotes a data factor to autodiff variables in
// mdivide_right_tri_low(z', L)' (8x slower per gradient on the flu graph),
// so L^-T z is taken as K^-1 z with K = P L'^T P lower triangular, where
// P Q P = L' L'^T is the Cholesky factor of Q with its rows and columns
// reversed (P the reversal): Q = K^T K, cov(K^-1 z) = Q^-1.
data {
  int<lower=1> n;
  int<lower=0> y[n];
  vector[n] log_exposure;
  matrix[n, n] Q;
  real b;  // intercept
}
transformed data {
  int rev[n];
  matrix[n, n] K;
  for (i in 1:n)
    rev[i] = n + 1 - i;
  K = cholesky_decompose(Q[rev, rev])'[rev, rev];
}
parameters {
  vector[n] z;
}
model {
  z ~ std_normal();
  y ~ poisson_log(log_exposure + b + mdivide_left_tri_low(K, z));
}
generated quantities {
  vector[n] f = b + mdivide_left_tri_low(K, z);  // linear predictor, as gmm-infer's f[node]
}
