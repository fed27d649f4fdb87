"""The up-front memory check on CUDA: free GPU memory is measured, and the estimate covers the renderer's measured
peak (run on the device machine: `pytest -m gpu tests/gpu`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from studio.errors import InputError
from studio.contracts.coeffs import N_COEFFS
from studio.presenter.renderer import Presenter, RenderSettings
from studio.validate import available_memory_bytes, check_render_memory, estimate_render_memory

pytestmark = pytest.mark.gpu


def test_free_gpu_memory_is_measured() -> None:
    free, where = available_memory_bytes("cuda")
    total = torch.cuda.get_device_properties(0).total_memory
    assert where == "GPU memory" and 0 < free <= total


def test_a_size_beyond_the_gpu_is_refused_with_the_reason() -> None:
    free, _ = available_memory_bytes("cuda")
    with pytest.raises(InputError, match="GPU memory"):
        check_render_memory(2160, (2160, 2160), batch_frames=8, device="cuda", available_bytes=free // 200)


@pytest.mark.parametrize("size", [1024, 2048])
def test_estimate_covers_the_measured_cuda_peak(default_anchor, size: int) -> None:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    presenter = Presenter(default_anchor, RenderSettings(size_px=size, batch_frames=8, device="cuda"))
    presenter.render(np.zeros((8, N_COEFFS), np.float32))
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    est = estimate_render_memory(size, (size, size), 8, available_bytes=1 << 40, device="cuda")
    print(f"size {size}: CUDA peak {peak / 1e6:.0f} MB, estimate {est.renderer_bytes / 1e6:.0f} MB")
    assert 0.3 * est.renderer_bytes <= peak <= 1.2 * est.renderer_bytes
