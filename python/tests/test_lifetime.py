"""Handle lifetimes: context managers, explicit close and finalizers close children
(events, plans, graph sets, modules, arrays) before their runtime."""
import gc
import os
import subprocess
import sys

import pytest

import cgrt
from conftest import REPO


def _children(rt):
    ev = rt.event()
    plan = rt.mla_plan(max_num_seqs=1, heads=16, max_model_len=64)
    gs = rt.graphs(lambda s, b: None, max_num_seqs=1, max_model_len=8)
    mod = rt.load_module(b"image")
    return ev, plan, gs, mod


def test_closing_the_runtime_closes_its_children_first(warnings_log):
    rt = cgrt.Runtime(driver="emulated")
    kids = _children(rt)
    ptrs = [k.handle for k in kids]
    rt.close()
    assert all(k.closed for k in kids) and rt.closed
    # children were destroyed through their own destroy calls: the runtime found none left
    assert not [m for _, m in warnings_log if "still alive" in m], warnings_log
    with pytest.raises(cgrt.InvalidHandleError):
        cgrt.lib.cgrt_event_record(ptrs[0], None)  # the C handle is gone too
    with pytest.raises(cgrt.InvalidHandleError):
        cgrt.lib.cgrt_graphs_capture(ptrs[2])


def test_context_managers_close_in_order(warnings_log):
    with cgrt.Runtime(driver="emulated") as rt:
        with rt.event() as ev:
            ev.record()
        assert ev.closed and not rt.closed
        plan = rt.mla_plan(max_num_seqs=1, heads=16, max_model_len=64)
    assert rt.closed and plan.closed
    assert not [m for _, m in warnings_log if "still alive" in m]


def test_a_child_keeps_its_runtime_alive_and_gc_finalizes_children_first(warnings_log):
    rt = cgrt.Runtime(driver="emulated")
    ev = rt.event()
    rt_ptr = rt.handle
    del rt
    gc.collect()
    ev.record()  # the runtime is still alive: the event holds it
    assert ev._parent.handle == rt_ptr
    del ev
    gc.collect()
    with pytest.raises(cgrt.InvalidHandleError):
        cgrt.lib.cgrt_runtime_synchronize(rt_ptr)  # both finalized
    assert not [m for _, m in warnings_log if "still alive" in m], warnings_log


def test_graph_set_keeps_its_step_until_destroyed():
    rt = cgrt.Runtime(driver="emulated")
    calls = []
    gs = rt.graphs(lambda s, b: calls.append(b.capturing), max_num_seqs=1, max_model_len=8, capture_sizes=[1])
    gs.capture()
    gs.step(1)
    assert calls == [False, True]  # warm-up, capture; the step itself is a replay
    rt.close()
    assert gs.closed


def test_interpreter_exit_destroys_children_before_runtimes():
    code = """
import cgrt
cgrt.set_log_callback(lambda level, msg: print("LOG", level, msg), "warn")
rt = cgrt.Runtime(driver="emulated")
ev = rt.event(); ev.record()
plan = rt.mla_plan(max_num_seqs=1, heads=16, max_model_len=64)
gs = rt.graphs(lambda s, b: None, max_num_seqs=1, max_model_len=8, capture_sizes=[1])
gs.capture()
rt2 = cgrt.Runtime(driver="emulated")
ev2 = rt2.event()
print("END")
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("END"), r.stdout
    assert "still alive" not in r.stdout and r.stderr == "", r.stdout + r.stderr
