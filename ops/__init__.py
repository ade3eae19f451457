"""Numeric kernels for BLS12-381: limb arithmetic, fields, curves (and, later,
NTT, MSM, SpMV, pairing).  Kernels that multiply field elements are Pallas
(Triton) kernels on CUDA; the same formulas run as plain jax.numpy elsewhere."""
