"""Light entry points that trainers' plug-in registries import in every process.

Each module here registers bandsolve's names with a trainer and defers the
real work (numba, the kernels, ``bandsolve.torch``) to the first call.
"""
