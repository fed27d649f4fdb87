"""The role interfaces of the pipeline core, the data that flows between them, and the registry of generators.

The bottom layer of studio's packages: the core, the drivers and every plug-in import from here; nothing here
imports them.
``formats`` (the program's picture and sound), ``chunk`` (what flows through the loop), ``roles`` (source, motion
source, post-processor), ``generator``, ``output``, ``coeffs`` (the motion coefficients' layout) and ``registry``.

One frame loop (``studio.pipeline.core.Core``) drives every mode; a mode only picks a source, a motion source, a
generator, post-processors and outputs::

    Source --chunk--> MotionSource --coeffs--> Generator --frames--> PostProcessor* --frames--> Output*
    (stage A: audio, motion, audio features)   (stage B)             (stage C: post + encode)

- ``Source``: what is said and when. It paces the loop: ``next_chunk`` blocks until the next frame slots are due
  (the studio's program clock, the microphone's arrival of audio) or returns them at once (``render``, ``bench``).
  A chunk carries the program audio of its span (48 kHz, contiguous across chunks, also over skipped slots) and the
  same span at 16 kHz for analysis.
- ``MotionSource``: turns a chunk into motion coefficients (``studio.contracts.coeffs``), one row per slot. It knows
  the source only by its chunks: a live one hears ``Chunk.fresh``, and its look-ahead (``lead_s``) reaches the source
  through ``Pacing``.
- ``Generator``: pixels from motion and / or audio features, on its device (``GeneratorInfo`` says what it needs and
  what it can do: the core reads those capabilities, never an engine's name).
- ``PostProcessor``: frames to frames on the device (flow interpolation, super-resolution, the broadcast canvas).
- ``Output``: frames + audio leave the core (preview, recorder, streams). ``write`` never blocks the loop for long:
  an output that falls behind drops (and counts) frames, never audio.

Frames are ``N x 3 x H x W`` float tensors in 0..255 on the generator's device until the outputs; outputs get
``ProgramBatch`` (uint8 RGB on the host, and the device tensor for encoders that take it there).
"""

from studio.contracts.chunk import Chunk, ProgramBatch
from studio.contracts.formats import (ANALYSIS_RATE_HZ, PROGRAM_RATE_HZ, CastLayout, Layout, OnAir,
                                       ProgramFormat)
from studio.contracts.generator import (STREAM_FIRST_LATENTS, AudioFeatureSpec, CompileTarget, Generator,
                                        GeneratorInfo, GeneratorSettings, InterpolationKind)
from studio.contracts.output import Output, OutputState, OutputStats, RateMeter
from studio.contracts.registry import GENERATORS, Registry, cast_refusal
from studio.contracts.roles import MotionSource, Pacing, PostProcessor, Source

__all__ = [
    "ANALYSIS_RATE_HZ", "GENERATORS", "PROGRAM_RATE_HZ", "AudioFeatureSpec", "Chunk", "CompileTarget", "Generator",
    "CastLayout", "GeneratorInfo", "GeneratorSettings", "InterpolationKind", "Layout", "MotionSource", "OnAir", "Output",
    "OutputState", "OutputStats", "Pacing", "PostProcessor", "ProgramBatch", "ProgramFormat", "RateMeter", "Registry",
    "STREAM_FIRST_LATENTS", "Source", "cast_refusal",
]
