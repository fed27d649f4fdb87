"""NewsStudio: one portrait photo becomes a live, lip-synced news presenter."""

import os

from studio import startup  # noqa: F401  (the command's start: studio/startup.py)

__version__ = "0.1.0"

# One compute thread pool per process is torch's (sized by the pipeline). numpy, scipy and OpenCV each bring their own
# OpenBLAS with its own threads; our numpy work is small, so those pools only oversubscribe the cores and add
# concurrency hazards when pipeline stages call BLAS from several threads at once. Set before numpy loads; a value
# the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
