"""jaxprove: a Groth16 proving engine for BLS12-381 on JAX.

Packages: ``ops`` (field/curve kernels), ``circuits`` (the tensor circuit
language), ``jaxprove`` (the prover: PCE, Groth16, formats, engine).  See
DESIGN.md in the shared folder and README.md.
"""
__version__ = "0.1.0"
