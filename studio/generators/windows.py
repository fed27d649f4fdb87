"""How a window engine (a video DiT that denoises a window of latent frames at a time) cuts a stream into windows.

Output frames per window: the video VAE compresses time by 4 with the first frame alone, so F latent frames decode to
``frames_of(F)`` = 4 (F - 1) + 1 frames (21 -> 81).

Two schedules:
- whole windows (``first_latents`` 0): every window has ``window_latents`` latent frames and stands alone (no frame is
  carried from one window to the next); the first frame of a stream waits for a whole window;
- streaming (``first_latents`` n > 0): the first window of a stream has only n latent frames (3 -> 9 frames), so
  that its first frame comes after a fraction of a window's work; every later window has ``window_latents`` latent
  frames, the first ``context_latents`` of them the previous window's last latent frames, given to the DiT as known
  frames (the InP mask) instead of being made again. The context decodes to the window's first ``frames_of(k)``
  frames, which were handed out already and are dropped, so each later window adds
  ``frames_of(window) - frames_of(k)`` frames (80 with one latent frame of context): frame for frame the stream
  follows on, the new frames continuing the motion of the old ones. The cost: the short window once per stream, and
  per later window the context's share of its tokens (1 of 21 latent frames).

Why this shape: attention stays bidirectional inside a window (as SoulX-FlashTalk keeps it inside its chunks), and
windows follow on through given frames, as EchoMimicV3's long videos do (overlapping parts, each part's first frames
the last part's).
"""

from __future__ import annotations

from dataclasses import dataclass

from studio.errors import InputError


def frames_of(latents: int) -> int:
    """Output frames ``latents`` latent frames decode to (4x in time, the first frame alone); 0 for none."""
    return 4 * (latents - 1) + 1 if latents > 0 else 0


@dataclass(frozen=True)
class WindowPlan:
    """One window of a stream."""

    latents: int  # latent frames the DiT denoises
    context: int  # of which the first ``context`` are the previous window's last ones, given (not made again)
    new_frames: int  # frames the window adds to the stream
    skip_frames: int  # leading frames of its decode that show the context (handed out before): dropped


@dataclass(frozen=True)
class WindowSchedule:
    """See the module docstring."""

    window_latents: int
    first_latents: int = 0  # 0: whole windows; n: a stream starts with a window of n latent frames
    context_latents: int = 1  # latent frames of the previous window each later window is given (streaming)

    def __post_init__(self) -> None:
        w, n, k = self.window_latents, self.first_latents, self.context_latents
        if w < 2:
            raise InputError(f"A window of {w} latent frames cannot stream: use 2 or more.")
        if not 0 <= n <= w:
            raise InputError(f"stream_first_latents {n} does not fit a window of {w} latent frames: use 0 (whole "
                             f"windows) or 1 to {w}.")
        if n and not 1 <= k <= min(n, w - 1):
            raise InputError(f"{k} latent frames of context do not fit a first window of {n} and a window of {w}: "
                             f"use 1 to {min(n, w - 1)}.")

    @property
    def streaming(self) -> bool:
        return self.first_latents > 0

    @property
    def first_window_frames(self) -> int:
        """Frames the first window of a stream makes when streaming; 0 for whole windows."""
        return frames_of(self.first_latents)

    def plan(self, index: int) -> WindowPlan:
        """Window ``index`` (0: the first) of a stream."""
        w = self.window_latents
        if not self.streaming:
            return WindowPlan(w, 0, frames_of(w), 0)
        if index == 0:
            return WindowPlan(self.first_latents, 0, frames_of(self.first_latents), 0)
        k = self.context_latents
        return WindowPlan(w, k, frames_of(w) - frames_of(k), frames_of(k))

    def windows_for(self, frames: int) -> list[WindowPlan]:
        """The windows a stream runs to make its first ``frames`` frames."""
        out: list[WindowPlan] = []
        made = 0
        while made < frames:
            out.append(self.plan(len(out)))
            made += out[-1].new_frames
        return out
