"""`python main.py bench --leaderboard`: every talking-head engine that fits on this device, ranked by measured wall
time per output frame at 1080p output (the 16:9 canvas), each through the same core as the studio.

Each engine is measured within a fixed budget (``LeaderboardBudget``: a fixed number of output frames a run and a
fixed number of runs), on the bench's program (the default rundown with the station ident between stories, cut to
those frames):
- probe: one frame with every optimization on and one plain, each twice (the engine's load and warm-up, then
  timed); its time per frame gives the row's estimate, and on a device with a time budget (the CPU's default: about
  five minutes) a row whose estimate does not fit in what is left is listed with that estimate and the reason
  instead of a time;
- plain: the core with no optimization (the engine at its native size, every frame generated, no caches);
- optimized: every optimization that applies on this device (the HUD's pills), interleaved with the plain runs;
- with ``shares`` only: all but one, for each optimization that is on (what that one saves in company,
  (without - optimized) / plain), and best: the optimized set less every flag the engine ran faster without;
- the GPU time per output frame (CUDA events around generation and post-processing), the GPU memory peak (each form
  of the engine is built once for the row and kept for its later runs, so the peak holds every form opened so far),
  the audio cache's hit rate on the program and the encoder milliseconds one hit saves (measured cost of an encoder
  call).
Every row is in the JSON from the start (waiting, measuring, measured, or why not), and the file is rewritten whole
(write then rename) after every run, both at ``--json`` and in the data folder the studio's panel reads: what is
measured survives a cancel or a crash. Engines without installed weights run as timing twins (the same modules and
shapes with seeded random weights) and say so in every row; an engine too heavy for this device is listed with the
reason instead of a time. JSON + PNG.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import statistics
import sys
import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path

log = logging.getLogger(__name__)

# (engine, native size override (0: the engine's own), what the row is called, all-but-one rows too, plain run too)
ENTRIES = (
    ("builtin", 0, "", True, True),
    ("wav2lip", 0, "", True, True),
    ("musetalk-1.5", 0, "", True, True),
    ("liveportrait", 0, "", True, True),
    ("ditto", 0, "", True, True),
    ("wan2.1-1.3b", 512, "", True, True),
    ("wan2.1-1.3b", 1024, " at native 1024 px", False, True),  # beside the 512 row: the pyramidal ratio
    # the 512 row's engine with its options (studio.generators.wan_dit.variant_info), beside it
    ("wan2.1-1.3b-taehv", 512, "", False, True),
    ("wan2.1-1.3b-fp8", 512, "", False, True),
    ("wan2.1-1.3b-taehv-fp8", 512, "", True, True),  # the fastest DiT row: each flag's share on it too
    ("wan2.1-14b", 0, "", False, False),  # one 1024-px window of a 14 B DiT outlasts a device call: optimized only
)
PLAIN_SKIPPED = "not measured: one window at the native size outlasts the leaderboard's time on this device"
GPU_GB_14B = 45.0  # GiB: the 14 B twin's bf16 weights (37 GiB), its graphs and activations must fit in what is free


def _leaderboard_file() -> Path:
    from studio.pipeline.telemetry import leaderboard_path

    return leaderboard_path()


def last_leaderboard() -> dict | None:
    """The leaderboard this machine measured last (what the studio's panel shows at start), or None."""
    try:
        return json.loads(_leaderboard_file().read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class LeaderboardBudget:
    """What one leaderboard spends: ``frames`` output frames a run, ``repeats`` plain and optimized runs an engine
    (interleaved), the all-but-one runs only with ``shares``, and at most ``budget_s`` seconds in all (0: no limit;
    rows whose probe says they would not fit in what is left are listed with their estimate)."""

    frames: int = 8
    repeats: int = 2
    shares: bool = False
    budget_s: float = 300.0


def budget_for(device: str) -> LeaderboardBudget:
    """The CPU's default run takes what fits in about five minutes: 8 frames, one plain and one optimized run an
    engine (MuseTalk 1.5's one-frame probe is ~10 s a frame here: two runs fit beside the others, four do not); on
    CUDA 1 s at 60 fps, three runs each, no limit."""
    if device.startswith("cuda"):
        return LeaderboardBudget(frames=60, repeats=3, budget_s=0.0)
    return LeaderboardBudget(repeats=1)


def runs_per_row(budget: LeaderboardBudget, n_flags: int) -> int:
    """The measured runs of one row after its probe: plain and optimized ``repeats`` times each, and with ``shares``
    one run without each of ``n_flags`` flags, a third optimized run and the best set."""
    return 2 * budget.repeats + (n_flags + 2 if budget.shares else 0)


def row_estimate_s(probe_s_per_frame: float, frames: int, runs: int, run_overhead_s: float) -> float:
    """Seconds the measured runs of a row take, from its probe: each run ``frames`` frames at the probe's wall time per
    frame (it carries the first call's warm-up, so the estimate errs long) plus the core's start and stop."""
    return runs * (frames * probe_s_per_frame + run_overhead_s)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` whole: a reader (the panel) or a crash never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class _Board:
    """The leaderboard as it stands, rewritten to its files after every change (see the module docstring)."""

    def __init__(self, paths: list[Path], head: dict, kept: list[dict]) -> None:
        self.paths, self.head, self.kept = paths, head, kept
        self.rows: list[dict] = []

    def save(self, **extra) -> str:
        text = json.dumps({**self.head, **extra, "rows": self.kept + self.rows}, indent=1, default=_num)
        for path in self.paths:
            try:
                write_atomic(path, text)
            except OSError as exc:
                log.warning("leaderboard: cannot write %s: %s", path, exc)
        return text


def run_leaderboard(b, json_path: Path | None = None, progress=print, engines: tuple[str, ...] = (),
                    append: bool = False, budget: LeaderboardBudget | None = None) -> int:
    """Measure every entry that fits (see the module docstring); returns the exit status. ``append``: keep the rows
    of ``json_path`` that this run does not measure again, when that file holds a leaderboard of the same machine
    and output (a leaderboard measured in parts, each within a time limit). A cancel (KeyboardInterrupt) or a crash
    leaves the rows measured so far in the files, the others marked "cut short"."""
    import torch

    from studio.bench.harness import build_program, cut_program, load_program, machine_info
    from studio.contracts import GENERATORS
    from studio.presenter.anchor import build_anchor
    from studio.presenter.renderer import resolve_device

    t_start = time.perf_counter()
    dev = resolve_device(b.device)
    cuda = dev.type == "cuda"
    budget = budget or budget_for(str(dev))
    seconds = budget.frames / b.fps
    b = replace(b, device=str(dev), canvas=b.canvas or "1080p", seconds=seconds)
    anchor = build_anchor()
    # window engines (a DiT makes 81 frames at a time) run whole windows: up to 81 keyframes at the key stride
    full = load_program(b.program) if b.program else build_program(max(seconds, 6.0) if cuda else seconds)
    program = cut_program(full, seconds)
    probe = cut_program(program, 1 / b.fps)
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="leaderboard_"))
    output = f"{b.canvas} canvas at {b.fps:g} fps"
    entries = [e for e in ENTRIES if (not engines or e[0] in engines) and e[0] in GENERATORS.names()]
    machine = machine_info(str(dev))
    kept, parts = _earlier_rows(json_path, machine, output, entries) if append else ([], [])
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    head = {"started": started, "complete": False, "machine": machine, "output": output, "program_s": seconds,
            "budget": {"frames": budget.frames, "repeats": budget.repeats, "shares": budget.shares,
                       "budget_s": budget.budget_s}, "parts": parts}
    board = _Board([_leaderboard_file()] + ([json_path] if json_path is not None else []), head, kept)
    for name, native, suffix, *_ in entries:
        info = GENERATORS.create(name).info  # an unopened instance: its facts, no model
        board.rows.append({"engine": name, "label": info.label + suffix, "family": info.family,
                           "native_px": native or info.native_px, "pyramidal_px": info.pyramidal_px,
                           "audio_encoder": info.audio.encoder if info.audio else "", "device": str(dev),
                           "status": "waiting", "reason": "not measured yet"})
    board.save()
    all_opts = str(dev)  # each engine's own defaults: studio.pipeline.factory.default_optimizations
    try:
        for i, ((name, native, suffix, minus_one, with_plain), row) in enumerate(zip(entries, board.rows)):
            info = GENERATORS.create(name).info
            progress(f"leaderboard [{i + 1}/{len(entries)}] {row['label']}: starting")
            if not cuda and info.needs_gpu_reason:
                row.update(status="needs a GPU", reason=info.needs_gpu_reason)
                board.save()
                continue
            if cuda and name == "wan2.1-14b":
                free_gb = torch.cuda.mem_get_info(dev)[0] / 2 ** 30
                if free_gb < GPU_GB_14B:
                    row.update(status="needs a larger GPU",
                               reason=f"{free_gb:.0f} GiB free, {GPU_GB_14B:.0f} GiB needed")
                    board.save()
                    continue
            bb = replace(b, engine=name, native_px=native)
            if budget.budget_s and time.perf_counter() - t_start >= budget.budget_s:  # not even time for its probe
                row.update(status="over budget", reason=f"the {budget.budget_s:.0f}-s budget was spent before this "
                                                        f"engine: measure it alone with --engines {name}")
                board.save()
                continue
            row.update(status="measuring", reason="")

            def step(k: int, m: int, left_s: float, _i=i, _row=row) -> None:
                elapsed = time.perf_counter() - t_start
                _row["progress"] = f"run {k} of {m}"
                board.save()
                progress(f"leaderboard [{_i + 1}/{len(entries)}] {_row['label']}: run {k} of {m}, about "
                         f"{left_s:.0f} s left in this engine; {elapsed:.0f} s elapsed"
                         + (f" of a {budget.budget_s:.0f}-s budget" if budget.budget_s else ""))

            try:
                runs = _measure(anchor, program, probe, bb, all_opts, tmp, cuda, budget,
                                _Fit(row, name, budget, t_start), step,
                                minus_one and budget.shares, with_plain, full)
            except Exception as exc:  # an engine that fails here is listed with its error, and the others still run
                log.exception("leaderboard: %s failed", name)
                row.update(status="failed", reason=f"{type(exc).__name__}: {exc}")
                row.pop("progress", None)
                board.save()
                continue
            row.pop("progress", None)
            if runs is None:
                progress(f"  {row['reason']}")
                board.save()
                continue
            _fill_row(row, runs, b, cuda)
            progress(_row_line(row, runs))
            board.save()
    except BaseException:  # a cancel or a crash: what is measured stays, the rest says why it is not
        for row in board.rows:
            if row["status"] in ("waiting", "measuring"):
                row.update(status="cut short", reason="the run was stopped before this engine finished")
                row.pop("progress", None)
        board.save()
        raise
    rows = kept + board.rows
    measured = sorted((r for r in rows if r["status"] == "measured"), key=_rank_ms)
    for rank, r in enumerate(measured, 1):
        r["rank"] = rank
    board.kept, board.rows = [], measured + [r for r in rows if r["status"] != "measured"]
    board.head.update(parts=parts + [started])
    wall_s = time.perf_counter() - t_start
    text = board.save(complete=True, finished=time.strftime("%Y-%m-%d %H:%M:%S"), wall_s=round(wall_s, 1))
    if json_path is not None:
        try:
            write_chart(json.loads(text), json_path.with_suffix(".png"))
        except ImportError as exc:
            log.warning("leaderboard chart not drawn: %s", exc)
    for r in board.rows:
        if r["status"] == "measured":
            plain_ms = r["ms_per_frame_plain"]
            sys.stderr.write(f"{r['rank']:>2}. {r['label']}: {_rank_ms(r):.2f} ms/frame "
                             f"(plain {f'{plain_ms:.2f}' if plain_ms else 'not measured'})\n")
        else:
            sys.stderr.write(f" -. {r['label']}: {r['status']} ({r['reason']})\n")
    sys.stderr.write(f"leaderboard: {len(measured)} of {len(rows)} engines measured in {wall_s:.0f} s\n")
    return 0


class _Fit:
    """Whether a row's measured runs fit in what is left of the budget; a row that does not (or whose probe alone
    outlasted it) says so, with its estimate and what to run instead."""

    def __init__(self, row: dict, name: str, budget: LeaderboardBudget, t_start: float) -> None:
        self.row, self.name, self.budget, self.t_start = row, name, budget, t_start

    def left_s(self) -> float:
        if not self.budget.budget_s:
            return math.inf
        return self.budget.budget_s - (time.perf_counter() - self.t_start)

    def __call__(self, estimate_s: float, probe_ms: float) -> bool:
        self.row["estimate_s"] = round(estimate_s, 1)
        self.row["probe_ms_per_frame"] = probe_ms
        left = self.left_s()
        if estimate_s <= left:
            return True
        self.row.update(status="over budget",
                        reason=f"about {estimate_s:.0f} s to measure here (probe: {probe_ms:.0f} ms a frame), "
                               f"{max(0.0, left):.0f} s of the {self.budget.budget_s:.0f}-s budget left: measure it "
                               f"alone with --engines {self.name} (or --budget-s 0)")
        return False

    def probe_stopped(self) -> None:
        self.row.update(status="over budget",
                        reason=f"its probe (one frame, load and warm-up) alone outlasted what was left of the "
                               f"{self.budget.budget_s:.0f}-s budget: measure it alone with --engines {self.name}")


@contextlib.contextmanager
def _deadline(seconds: float):
    """An Event set after ``seconds`` (never, when infinite), for ``run_config``'s ``stop``."""
    import threading

    stop = threading.Event()
    timer = threading.Timer(max(0.0, seconds), stop.set) if math.isfinite(seconds) else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        yield stop
    finally:
        if timer is not None:
            timer.cancel()


def _fill_row(row: dict, runs: dict, b, cuda: bool) -> None:
    """A row's figures from its runs (``_measure``)."""
    from studio.bench.harness import _per_frame

    plain, opt = runs["plain"], runs["optimized"]
    o_ms = statistics.median(r[0].ms_per_frame for r in opt)
    best = runs.get("best")
    b_ms = min(o_ms, best[0][0].ms_per_frame) if best else o_ms
    p_ms = statistics.median(r[0].ms_per_frame for r in plain) if plain else None
    rep = opt[len(opt) // 2][0]
    shares = {}
    for key, reps in runs.items():
        if key.startswith("without_"):
            w_ms = statistics.median(r[0].ms_per_frame for r in reps)
            shares[key[len("without_"):]] = (w_ms - o_ms) / p_ms if p_ms else None
    feats = opt[len(opt) // 2][2]
    row.update(
        status="measured", reason="", twin=bool(runs["twin"]), backend="eager" + (" + CUDA graphs" if cuda else ""),
        precision=runs["precision"], optimizations=sorted(o.value for o in runs["opts"]),
        ms_per_frame_plain=p_ms, ms_per_frame_optimized=o_ms, compute_saved=1 - o_ms / p_ms if p_ms else None,
        # every flag that helped this engine here (those it ran faster without dropped), measured: the rank
        ms_per_frame_best=b_ms, compute_saved_best=1 - b_ms / p_ms if p_ms else None,
        best_optimizations=sorted(o.value for o in runs.get("best_opts", runs["opts"])) if best and
        best[0][0].ms_per_frame < o_ms else sorted(o.value for o in runs["opts"]),
        ms_per_frame_best_run=best[0][0].ms_per_frame if best else None,
        plain_note="" if plain else PLAIN_SKIPPED, program_frames={k: rs[0][0].frames_produced for k, rs in
                                                                  runs.items() if isinstance(rs, list) and rs},
        key_stride=b.key_stride, repeats={k: len(rs) for k, rs in runs.items() if isinstance(rs, list) and rs},
        first_frame_s=statistics.median(r[0].first_frame_s for r in opt if r[0].first_frame_s is not None)
        if any(r[0].first_frame_s is not None for r in opt) else None,
        gpu_ms_per_frame_plain=(statistics.median(_per_frame(r[0], "generate") + _per_frame(r[0], "post")
                                                  for r in plain) if cuda and plain else None),
        gpu_ms_per_frame_optimized=(statistics.median(_per_frame(r[0], "generate") + _per_frame(r[0], "post")
                                                      for r in opt) if cuda else None),
        gpu_mem_peak_mb=max(r[0].gpu_mem_peak_mb for rs in runs.values() if isinstance(rs, list) for r in rs)
        if cuda else None,
        saved_share=shares, shares_note="" if shares else "not measured: run with --shares",
        frames=rep.frames_produced, frames_generated=rep.frames_full,
        frames_interpolated=rep.frames_interpolated, silent_frames=rep.silent_frames,
        audio_cache=feats, measured=time.strftime("%Y-%m-%d %H:%M:%S"))
    if row["twin"]:
        row["label"] += " — timing twin (weights not installed)"


def _row_line(row: dict, runs: dict) -> str:
    p_ms, o_ms = row["ms_per_frame_plain"], row["ms_per_frame_optimized"]
    best = runs.get("best")
    return ((f"  plain {p_ms:.2f} ms/frame, optimized {o_ms:.2f} ms/frame ({100 * (1 - o_ms / p_ms):.0f}% saved)"
             if p_ms else f"  optimized {o_ms:.2f} ms/frame (plain {PLAIN_SKIPPED})")
            + (f"; without {', '.join(sorted(o.value for o in runs['opts'] - runs['best_opts']))}: "
               f"{best[0][0].ms_per_frame:.2f}" if best else ""))


def _measure(anchor, program, probe, b, all_opts, tmp, cuda: bool, budget: LeaderboardBudget, fits, step,
             minus_one: bool = False, with_plain: bool = True, full=None) -> dict | None:
    """Runs of one engine: the probe (one frame with every flag on and one plain, each twice: load and warm-up,
    then timed), then - when ``fits`` accepts the
    estimate it gives - plain and optimized ``budget.repeats`` times each, interleaved; with ``minus_one`` all-but-one
    for each flag on, a third optimized run, and the set without the flags it ran faster without. None: the row did
    not fit. An engine that generates whole windows (one batch size: a DiT's 81 frames) runs programs of whole
    windows instead of ``program``: one window of output frames, or of keyframes (window x key stride output frames)
    where keyframes are on. ``step(k, m, seconds_left)`` is called before each measured run."""
    from studio.bench.harness import cut_program, run_config
    from studio.pipeline.factory import default_optimizations
    from studio.contracts import GENERATORS
    from studio.pipeline.settings import Optimization as O

    info = GENERATORS.create(b.engine).info  # an unopened instance: its facts, no model
    opts = default_optimizations(all_opts, b.engine)
    if not info.has_pyramidal_route:
        opts = opts - {O.PYRAMIDAL}  # one native size: nothing smaller to generate
    runs: dict = {"opts": opts}
    window = info.batch_sizes[0] if len(info.batch_sizes) == 1 else 0

    def program_for(flags, base=program):
        if not window or full is None:
            return base
        frames = window * (b.key_stride if O.FRAME_INTERPOLATION in flags else 1)
        return cut_program(full, frames / b.fps)

    shares = sorted(opts - {O.KV_CACHE, O.GPU_ENCODE}, key=lambda o: o.value) if minus_one else []
    plan = [frozenset()] * budget.repeats if with_plain else []
    plan = [f for pair in zip(plan, [opts] * budget.repeats) for f in pair] if with_plain else [opts] * budget.repeats
    n_runs = len(plan) + (len(shares) + 2 if minus_one else 0)
    with _row_forms(cuda) as forms:
        done = {"runs": 0, "s_per_run": 0.0}

        def one(flags):
            step(done["runs"] + 1, n_runs, (n_runs - done["runs"]) * done["s_per_run"])
            t0 = time.perf_counter()
            rep, _, core = run_config(anchor, program_for(flags), b, flags, tmp, keep_core=True, forms=forms)
            feats = core.features.stats() if core.features is not None else None
            g = next(iter(core.pool.forms().values()))  # a form the run opened (never open another just to ask)
            runs["twin"], runs["precision"] = g.twin, g.precision_label
            core.close()
            del core, g
            _release(cuda)
            done["runs"] += 1
            done["s_per_run"] += (time.perf_counter() - t0 - done["s_per_run"]) / done["runs"]
            return rep, None, feats

        # the probe: the optimized form opened and warmed on the probe's frames, and the plain one where the row runs
        # it (so that no measured run pays for opening a form), then each timed once more (the first call's one-off
        # costs left out); the slower of the two per frame makes the estimate
        per_frame_s, overhead_s = 0.0, 0.0
        with _deadline(fits.left_s()) as stop:  # a probe that outlasts the budget left is stopped: the row is over
            probes = [opts, frozenset()] if with_plain else [opts]
            for i, flags in enumerate(probes * 2):
                t0 = time.perf_counter()
                rep, _ = run_config(anchor, program_for(flags, probe), b, flags, tmp, forms=forms, stop=stop)
                if stop.is_set():
                    fits.probe_stopped()
                    return None
                if i >= len(probes):  # the second round: warm
                    per_frame_s = max(per_frame_s, rep.wall_s / max(1, rep.frames_produced))
                    overhead_s = max(overhead_s, time.perf_counter() - t0 - rep.wall_s)
        frames_a_run = max(_frames_of(program_for(f), b.fps) for f in set(plan) | {opts})
        estimate = row_estimate_s(per_frame_s, frames_a_run, n_runs, overhead_s / 2)
        done["s_per_run"] = estimate / max(1, n_runs)
        if not fits(estimate, 1e3 * per_frame_s):
            return None
        runs["plain"], runs["optimized"] = [], []
        for flags in plan:
            runs["optimized" if flags else "plain"].append(one(flags))
        # what each flag saves this engine; the KV cache and GPU encode act outside the engine (the motion model, the
        # colour conversion) and are the same for every engine: the ablation bench measures them
        for f in shares:
            runs[f"without_{f.value}"] = [one(opts - {f})]
        # the flags that made this engine slower here (it ran faster without each), dropped: measured once more. A
        # further optimized run after the all-but-one runs brackets them, so that a machine warming up (or slowing
        # down) during the row does not pass for a flag's effect
        if minus_one:
            runs["optimized"].append(one(opts))
            o_ms = statistics.median(r[0].ms_per_frame for r in runs["optimized"])
            hurt = frozenset(f for f in opts if f"without_{f.value}" in runs
                             and runs[f"without_{f.value}"][0][0].ms_per_frame < o_ms)
            if hurt:
                runs["best"] = [one(opts - hurt)]
                runs["best_opts"] = opts - hurt
    return runs


def _frames_of(program, fps: float) -> int:
    """Output frames of a bench program."""
    from studio.contracts import ANALYSIS_RATE_HZ

    return round(sum(len(it.audio_16k) for it in program) / ANALYSIS_RATE_HZ * fps)


@contextlib.contextmanager
def _row_forms(cuda: bool):
    """The generator forms of one leaderboard row (``make_core``'s ``forms``): each form of the engine is built (and
    compiled) once for all the row's runs - a DiT's compile takes minutes, and one copy of a form at a time is what a
    14 B DiT leaves room for - and all are closed when the row ends, however it ends."""
    from studio.pipeline.pool import close_forms

    forms: dict = {}
    try:
        yield forms
    finally:
        close_forms(forms)
        _release(cuda)


def _earlier_rows(json_path: Path | None, machine: dict, output: str, entries) -> tuple[list[dict], list[str]]:
    """The rows of an earlier leaderboard in ``json_path`` to keep beside this run's (see ``run_leaderboard``), and
    when the runs they came from started. Only the same machine (GPU, or the CPU) and output: another's are
    replaced, and said so."""
    if json_path is None or not json_path.is_file():
        return [], []
    try:
        old = json.loads(json_path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("leaderboard: %s is not a leaderboard (%s): starting a new one", json_path, exc)
        return [], []
    same = old.get("output") == output and (old.get("machine", {}).get("gpu"), old.get("machine", {}).get("device")) \
        == (machine.get("gpu"), machine.get("device"))
    if not same:
        log.warning("leaderboard: %s holds another machine's or output's leaderboard (%s on %s): replaced", json_path,
                    old.get("output"), old.get("machine", {}).get("gpu") or "the CPU")
        return [], []
    again = {(name, native) for name, native, *_ in entries}
    kept = [r for r in old.get("rows", []) if (r.get("engine"), _native_of(r)) not in again]
    return kept, list(old.get("parts", [old.get("started", "?")]))


def _rank_ms(row: dict) -> float:
    """What a row is ranked by: its best measured set (rows of older leaderboards: every flag on)."""
    return row.get("ms_per_frame_best", row["ms_per_frame_optimized"])


def _native_of(row: dict) -> int:
    """The ENTRIES size override a row was measured with (0: the engine's own size)."""
    for name, native, *_ in ENTRIES:
        if name == row.get("engine") and native == row.get("native_px"):
            return native
    return 0


def _release(cuda: bool) -> None:
    """Collect what a finished run left (cycles through the core's threads and callbacks) and hand its cached GPU
    blocks back, so the next run of a large engine finds the memory free."""
    import gc

    gc.collect()
    if cuda:
        import torch

        torch.cuda.empty_cache()


def _num(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"not JSON: {type(x).__name__}")


def write_chart(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    rows = [r for r in result["rows"] if r["status"] == "measured"]
    names = [textwrap.fill(r["label"].replace(" — timing twin (weights not installed)", " (twin)"), 44)
             for r in rows][::-1]
    lines = sum(n.count("\n") + 1 for n in names)
    fig, ax = plt.subplots(figsize=(10, 0.32 * lines + 0.45 * len(rows) + 1.8))
    # three bars side by side per engine, so that none hides another (on a CPU "every optimization" can be the longest)
    y = list(range(len(rows)))
    h = 0.26
    plain = [r["ms_per_frame_plain"] or 0 for r in rows][::-1]
    ax.barh([v + h for v in y], plain, height=h, color="#bbb", label="plain")
    ax.barh(y, [r["ms_per_frame_optimized"] for r in rows][::-1], height=h, color="#7fc79b", label="every optimization")
    best = [_rank_ms(r) for r in rows][::-1]
    ax.barh([v - h for v in y], best, height=h, color="#1f7a45", label="the ones that helped")
    for v, ms in zip(y, best):  # the figure each row is ranked by
        ax.text(ms * 1.06, v - h, f"{ms:.2f} ms", va="center", fontsize=8, color="#1f7a45", fontweight="bold")
    left_edge = blended_transform_factory(ax.transAxes, ax.transData)
    for v, ms in zip(y, plain):
        if not ms:
            ax.text(0.005, v + h, "plain not measured", transform=left_edge, va="center", fontsize=7, color="#777")
    ax.set_yticks(y, names)
    ax.set_xscale("log")
    ax.set_xlabel("wall ms per output frame (log scale)")
    ax.set_title(f"{result['machine'].get('gpu', 'CPU')}: {result['output']}", pad=24)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
