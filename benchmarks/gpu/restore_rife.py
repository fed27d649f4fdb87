"""On the device machine: RIFE's fp16 transport copy (benchmarks/gpu/make_bundles.sh) back into the cache as the float32 state
dict the studio loads (the post stage casts it to fp16 on CUDA again).

    python3 benchmarks/gpu/restore_rife.py .whl/dif/rife4_fp16.pt .gpu_home/cache/enhance/rife4.pt
"""
import sys

import torch

state = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
torch.save({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, sys.argv[2])
