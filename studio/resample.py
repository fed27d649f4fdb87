"""Polyphase resampling of mono audio in numpy: ``scipy.signal.resample_poly``'s result without its import.

Speech is resampled on the way to the first frame (22,050 Hz from the voice to the program's 48 kHz, and on to the
16 kHz analysis rate), and importing ``scipy.signal`` (it pulls in ``scipy.stats``) cost 0.8 s of CPU there on the
2-core machine, longer than the resampling itself. This is the same filter (a Kaiser-windowed sinc low-pass of
``20 * max(up, down) + 1`` taps, scaled by ``up``) applied the same way (zero-stuffed by ``up``, filtered, kept every
``down``-th sample, centred); only the order of the sums differs, so the results agree to float64 rounding.
"""

from __future__ import annotations

import math

import numpy as np

_BLOCK = 16384  # output samples computed at a time (bounded memory for any length)


def _lowpass(numtaps: int, cutoff: float, beta: float) -> np.ndarray:
    """``scipy.signal.firwin(numtaps, cutoff, window=("kaiser", beta))``: a windowed sinc with unit gain at DC
    (``cutoff`` a fraction of the Nyquist rate)."""
    m = np.arange(numtaps) - 0.5 * (numtaps - 1)
    h = cutoff * np.sinc(cutoff * m) * np.kaiser(numtaps, beta)
    return h / h.sum()


def resample_poly(x: np.ndarray, up: int, down: int, beta: float = 5.0) -> np.ndarray:
    """``scipy.signal.resample_poly(x, up, down, window=("kaiser", beta))`` for a 1-D signal, in float64: the
    signal at ``up / down`` times its rate, ``ceil(len(x) * up / down)`` samples long."""
    x = np.asarray(x, np.float64)
    g = math.gcd(int(up), int(down))
    up, down = int(up) // g, int(down) // g
    if up == down == 1:
        return x.copy()
    n_in = len(x)
    n_out = -(-n_in * up // down)
    half = 10 * max(up, down)
    h = _lowpass(2 * half + 1, 1.0 / max(up, down), beta) * up
    pre = down - half % down  # zeros before the filter put the output samples at its centre
    skip = (half + pre) // down  # output samples of the full convolution dropped at the start
    taps = -(-(len(h) + pre) // up)  # taps of each polyphase branch
    bank = np.zeros(taps * up)
    bank[pre:pre + len(h)] = h
    bank = bank.reshape(taps, up).T  # bank[phase, k] = h_padded[phase + k * up]
    # y[i] = sum_k bank[n % up, k] * x[n // up - k], n = (i + skip) * down, x zero outside 0..n_in-1
    last = ((n_out - 1 + skip) * down) // up
    padded = np.zeros(taps - 1 + max(n_in, last + 1))
    padded[taps - 1:taps - 1 + n_in] = x
    back = np.arange(taps)
    out = np.empty(n_out)
    for start in range(0, n_out, _BLOCK):
        n = (np.arange(start, min(n_out, start + _BLOCK)) + skip) * down
        rows = padded[(n // up)[:, None] - back[None, :] + taps - 1]
        out[start:start + len(n)] = np.einsum("ik,ik->i", rows, bank[n % up])
    return out
