"""A healthy spectral analysis whose every step is one LAPACK call lasting minutes.

Scenario
    An ``Analyzer`` actor computes the eigenvalues of three large covariance-like matrices, one
    ``np.linalg.eigvals`` call each (a 3500x3500 matrix on one BLAS thread: a minute or more per
    call, longer on a loaded machine); the driver waits in ``ray.get`` and prints the spectra's
    largest values. Nothing is printed during a call. The job ends successfully.

Mechanism
    Nothing is wrong. During a call the actor's thread is in numpy's ``eigvals`` wrapper, at one
    Python line, in every sample: the CPU goes to LAPACK (C and Fortran) below Python, which a
    Python stack cannot show moving. No bytes written, no log line, no task finishing.

What misleads
    The same line in every sample, 100 % CPU, a driver blocked on it: the stack of a spin. Wrong:
    the line is a call, and a Python spin needs the interpreter going round a loop of Python
    lines — here one call holds every sample, the signature of a long C computation.

Expected diagnosis
    ``inconclusive`` (busy in one call, not a spin; nothing seen to advance) or ``no-hang`` —
    never ``hang``.
"""

import os

import numpy as np
import ray

EXPECTED = {
    "verdict": "inconclusive",
    "verdicts": ["inconclusive", "no-hang"],
    "pattern": None,
    "culprits": [],
    "ready": "spectrum 0: eigvals",
    "notes": "healthy: Analyzer.spectrum is one np.linalg.eigvals call on a 3500x3500 matrix (a minute or "
    "more of LAPACK under one Python line), three times; the driver waits in ray.get.",
}

SIZE = 3500
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@ray.remote(num_cpus=0.1, runtime_env={"env_vars": ONE_THREAD})
class Analyzer:
    def spectrum(self, seed: int) -> float:
        a = np.random.default_rng(seed).standard_normal((SIZE, SIZE))
        print(f"spectrum {seed}: eigvals of a {SIZE}x{SIZE} matrix", flush=True)
        vals = np.linalg.eigvals(a)
        return float(np.abs(vals).max())


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    analyzer = Analyzer.remote()
    for seed in range(3):
        print(f"spectrum {seed}: largest |eigenvalue| {ray.get(analyzer.spectrum.remote(seed)):.2f}", flush=True)


if __name__ == "__main__":
    main()
