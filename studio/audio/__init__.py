"""Live audio: microphone capture into a ring, the silence sieve, streaming phone recognition, mic-driven motion.

Import the submodules directly (``studio.audio.capture`` ...): they pull in PortAudio, onnxruntime and
pocketsphinx, which the rest of the package should not pay for at import time.
"""
