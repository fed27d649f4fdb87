"""The render farm: rundowns rendered on a Ray cluster, one task per segment, stitched into one bulletin each.

Layers: this package sits beside the pipeline and drives ``studio.pipeline.render`` (one segment) on Ray workers.

- ``plan``: rundown files -> segment jobs (anchor, voice, seed per segment; a rundown's cast, the speaker and the
  layout), bad segments named up front.
- ``store``: where a segment's MP4 lives, how it is verified, committed once (atomic link) and found again on resume.
- ``worker``: what runs inside a Ray worker: the anchor pack cache (packs come through the object store) and the warm
  engine of that process; a segment of a cast renders through ``render --rundown``'s programme.
- ``stitch``: the bulletin from its segments: video packets remuxed (no re-encoding), one continuous AAC track.
- ``driver``: ``run_farm``, a generator worker that connects (embedded cluster or ``--address``), submits, retries
  lost segments, yields ``FarmProgress`` and returns the ``FarmResult``.

Ray is imported only inside ``driver`` and ``worker`` functions: the rest is plain Python and tested without it.
"""

from studio.farm.settings import FarmSettings

__all__ = ["FarmSettings"]
