"""Inference engines for the GPU (or CPU) at hand: the silicon fingerprint, engine builders, verification against
eager output, the engine cache in engines/, cancellable compile jobs and the ``compile`` command.

    fingerprint() / supported_precisions(fp)        silicon.py
    BACKENDS, precision_choices(fp, backend)        builders.py (eager, inductor, cuda_graphs), onnx_backend.py,
                                                    tensorrt_backend.py; what they share: backend.py
    compile_target(...) / compile_generator(...)    jobs.py (generator workers yielding Progress)
    find_engine(...) + load_engine(entry, target)   cache.py / jobs.py (what the studio picks at start-up)

Plain Python and torch: no Qt here (the compile panel in studio.ui drives these).
"""
