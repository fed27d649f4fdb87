"""Talking-head engines as generators of the pipeline core (``studio.pipeline.roles.Generator``).

Each module registers its generator in ``studio.pipeline.roles.GENERATORS``; importing this package loads none of
them (the registry imports a module when its engine is first asked for).
"""
