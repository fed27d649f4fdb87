"""CUDA graphs of fixed-batch tensor functions: the generators' (``studio.generators``); the core's post stage
uses them too."""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)


class Graphed:
    """A CUDA-graph version of ``fn(*tensors)`` for a fixed batch: inputs are copied into static buffers (padded by
    repeating the last row), the graph replays, outputs are sliced and cloned (so a later replay, of this graph or of
    another sharing its memory ``pool``, never changes what a caller holds).

    ``thread_local``: capture while other threads keep using CUDA (the core's stages run in threads of their own);
    otherwise another thread's CUDA call during the capture is an error, as torch's default capture mode says."""

    def __init__(self, fn: Callable, examples: tuple[torch.Tensor, ...], stream: torch.cuda.Stream,
                 pool=None, thread_local: bool = False) -> None:
        self.static_in = [e.clone() for e in examples]
        self.batch = examples[0].shape[0]
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up (allocator, lazy init) off the default stream
                fn(*self.static_in)
        stream.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool, stream=stream,
                              capture_error_mode="thread_local" if thread_local else "global"):
            out = fn(*self.static_in)
        self.static_out = out if isinstance(out, tuple) else (out,)
        self.single = not isinstance(out, tuple)
        self.compiled = False  # made by TorchInductor (``graphed``)

    @torch.inference_mode()  # the static buffers are inference tensors (captured under inference mode)
    def __call__(self, *inputs: torch.Tensor):
        n = inputs[0].shape[0]
        outs = []
        for i in range(0, n, self.batch):
            part = [x[i:i + self.batch] for x in inputs]
            k = part[0].shape[0]
            for buf, x in zip(self.static_in, part):
                buf[:k].copy_(x)
                if k < self.batch:
                    buf[k:].copy_(x[-1:].expand(self.batch - k, *x.shape[1:]))
            self.graph.replay()
            outs.append([o[:k].clone() for o in self.static_out])
        res = tuple(torch.cat([o[j] for o in outs]) if len(outs) > 1 else outs[0][j]
                    for j in range(len(self.static_out)))
        return res[0] if self.single else res


def graphed(fn: Callable, examples: tuple[torch.Tensor, ...], stream: torch.cuda.Stream, *, compile: bool = False,
            compiled_fn: Callable | None = None, pool=None, thread_local: bool = False, name: str = "") -> Graphed:
    """``Graphed(fn)``, or with ``compile`` a CUDA graph of ``fn`` compiled by TorchInductor for these shapes (its
    kernels fused: the built-in renderer 0.24 -> 0.15 ms a 1080p frame and the Wan 1.3B DiT 1.74 -> 0.89 s a window on
    an H100). Where inductor cannot compile (no Triton, an unsupported operation) the eager ``fn`` is
    graphed instead and ``compiled`` says so. ``compiled_fn``: the compiled form to graph where only part of ``fn`` is
    compiled (default: all of it)."""
    if compile:
        from studio.generators.inductor_cache import use_compile_cache

        use_compile_cache()  # the kernels of an earlier run of this machine are loaded, not compiled again
        try:
            g = Graphed(compiled_fn or torch.compile(fn, dynamic=False), examples, stream, pool=pool, thread_local=thread_local)
            g.compiled = True
            return g
        except Exception as exc:  # the boundary to dynamo / inductor / triton: fall back to the eager graph
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            log.warning("TorchInductor could not compile %s (%s): its CUDA graph replays the eager code", name or fn,
                        first)
    g = Graphed(fn, examples, stream, pool=pool, thread_local=thread_local)
    g.compiled = False
    return g


class GraphSet:
    """``fn`` as CUDA graphs of the batch sizes 1, 2, 4 ... ``max_batch`` (a power of two): a call of N rows replays
    the ``max_batch`` graph for each whole batch and the graphs of the remainder's binary digits for the rest (5 rows:
    4 + 1), so no row is padded (a padded row costs what a real one does). Graphs are made on first use, or all by
    ``capture_all`` (the core's ``warm``: no capture inside timed or on-air frames). They share one memory pool and
    replay one after another.

    ``examples(n)``: the inputs to capture a graph of batch ``n`` with."""

    def __init__(self, fn: Callable, examples: Callable[[int], tuple[torch.Tensor, ...]], device: torch.device,
                 max_batch: int) -> None:
        if max_batch < 1 or max_batch & (max_batch - 1):
            raise ValueError(f"max_batch must be a power of two, got {max_batch}")
        self.fn = fn
        self.examples = examples
        self.max_batch = max_batch
        self.stream = torch.cuda.Stream(device)
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs: dict[int, Graphed] = {}

    def _graph(self, n: int) -> Graphed:
        g = self.graphs.get(n)
        if g is None:
            g = self.graphs[n] = Graphed(self.fn, self.examples(n), self.stream, pool=self.pool, thread_local=True)
        return g

    def sizes(self) -> list[int]:
        return [1 << i for i in range(self.max_batch.bit_length())]

    def capture_all(self) -> None:
        for n in self.sizes():
            self._graph(n)

    def __call__(self, *inputs: torch.Tensor):
        spans = batch_spans(inputs[0].shape[0], self.max_batch)
        parts = [self._graph(size)(*[x[a:b] for x in inputs]) for a, b, size in spans]
        if len(parts) == 1:
            return parts[0]
        if isinstance(parts[0], tuple):
            return tuple(torch.cat(p) for p in zip(*parts))
        return torch.cat(parts)


def batch_spans(n: int, max_batch: int) -> list[tuple[int, int, int]]:
    """(start, end, graph batch size) of the replays a ``GraphSet`` makes for ``n`` rows: the whole ``max_batch``
    batches as one span (that graph replays once per batch), then one span per binary digit of the remainder."""
    whole = n - n % max_batch
    spans = [(0, whole, max_batch)] if whole else []
    start = whole
    size = max_batch // 2
    while size:
        if (n - whole) & size:
            spans.append((start, start + size, size))
            start += size
        size //= 2
    return spans
