"""What bench.py and step_overhead.py share around their timed loops."""
import contextlib
import gc


@contextlib.contextmanager
def gc_off():
    """Python's garbage collector off for the block, after one collection (as timeit does,
    and as engines freeze it around their decode loop): a collection inside a timed host
    part is Python's cost, not the step's."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
