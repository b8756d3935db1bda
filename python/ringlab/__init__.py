"""ringlab: exact attention, sequence-parallel plans, a simulator of P ranks, and a checker that says
where outputs computed elsewhere go wrong (the compiled part, ringlab._core), and ringlab.conformance,
the harness that verifies torch.distributed context-parallel implementations."""
try:
    from ._core import *  # noqa: F401,F403  (attention, attention_backward, plan, run, verify, ...)
except ImportError as _error:  # the pure-Python parts (ringlab.conformance) work without it
    _core_error = _error

    def __getattr__(name):
        raise AttributeError(f"ringlab.{name} needs the compiled module ringlab._core, which did not load "
                             f"({_core_error}); build it with `pip install .` or the CMake target ringlab_python")
