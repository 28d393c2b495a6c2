"""tilelang.contrib.nvcc: the compute capability queries upstream programs make.

Answered by this project's runtime (the device the kernels run on), not by
nvcc: get_target_compute_version() is "9.0" on an H200 and raises ValueError
when the runtime sees no CUDA device, as upstream does without a GPU.
"""


def get_target_compute_version(target=None):
    """"major.minor" of the first CUDA device the runtime can launch on."""
    from ..testing import cuda_compute_version, cuda_skip_reason
    reason = cuda_skip_reason()
    if reason is not None:
        raise ValueError(f"no CUDA device: {reason}")
    major, minor = cuda_compute_version()
    return f"{major}.{minor}"


def parse_compute_version(compute_version):
    """"9.0" -> (9, 0)."""
    parts = str(compute_version).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise ValueError(f"compute version {compute_version!r} is not major.minor") from None


def have_tensorcore(compute_version=None, target=None):
    major, _ = parse_compute_version(compute_version or get_target_compute_version(target))
    return major >= 7
