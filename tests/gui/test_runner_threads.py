"""The training runner's thread never frees a Qt object: many short runs in a row, with the
garbage collector forced (or provoked) in the run's thread while the GUI thread makes and
drops menus, actions and canvas items. Before the fix this deadlocked now and then
(issue #12): a collection in the reader destroyed Qt objects the GUI had dropped."""

from __future__ import annotations

import gc
import threading
import types
import weakref

import pytest
from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QGraphicsRectItem, QGraphicsScene, QMenu

import nodegraph
from nodegraph.gui.base import collector
from nodegraph.gui.training import runner
from nodegraph.gui.training.runner import TrainingRunner, _ProcessWorker
from nodegraph.runtime import train_process


class QtLitter:
    """Makes and drops Qt objects on the GUI thread every few ms while runs go on, and
    records the thread each was freed on."""

    def __init__(self, cyclic: bool):
        self.cyclic = cyclic
        self.made = 0
        self.freed_on: list[int] = []
        self._refs: list[weakref.ref] = []
        self.scene = QGraphicsScene()
        self.timer = QTimer(interval=2)
        self.timer.timeout.connect(self.litter)

    def _watch(self, obj) -> None:
        self._refs.append(weakref.ref(obj, lambda ref: self.freed_on.append(
            threading.get_ident())))
        self.made += 1

    def litter(self) -> None:
        menu = QMenu()
        action = menu.addAction("gone")
        plain = QObject()
        item = QGraphicsRectItem(0, 0, 10, 10)
        self.scene.addItem(item)
        self.scene.removeItem(item)
        if self.cyclic:  # garbage only the cycle collector frees
            menu.me, plain.me, action.keep = menu, plain, (action, menu)
        for obj in (menu, plain, action):
            self._watch(obj)


def xor_graph():
    return nodegraph.load("examples/xor.json")


def run_many(runner_: TrainingRunner, count: int, litter: QtLitter) -> list:
    results = []
    for i in range(count):
        runner_.start(xor_graph(), i, epochs=2)
        assert runner_.running
        assert runner_.wait(60), f"run {i} did not end"
        results.append(runner_.result)
    return results


def test_many_runs_with_gc_forced_in_the_reader_thread_all_finish(qtbot, monkeypatch):
    reader_threads: set[int] = set()
    calls = []

    def collect_in_reader() -> None:
        reader_threads.add(threading.get_ident())
        calls.append(gc.collect())

    monkeypatch.setattr(runner, "after_message", collect_in_reader)
    litter = QtLitter(cyclic=True)  # garbage only a collection frees: it must not be theirs
    litter.timer.start()
    try:
        in_process, in_thread = TrainingRunner(), TrainingRunner(in_process=False)
        results = run_many(in_process, 12, litter) + run_many(in_thread, 12, litter)
    finally:
        litter.timer.stop()
    assert all(r is not None and len(r.history) == 2 for r in results)
    assert len(calls) > 24 and threading.get_ident() not in reader_threads
    assert not any(calls)  # a collection off the GUI thread found nothing while runs went on
    gc.collect()
    assert litter.made > 100 and len(litter.freed_on) == litter.made
    assert set(litter.freed_on) == {threading.get_ident()}


def qt_objects_reachable(root) -> list:
    """Qt wrappers reachable from `root` through plain data (modules, classes and
    functions' globals are not followed: they are shared by everything)."""
    from shiboken6 import Shiboken

    skip = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
            types.CodeType, types.MethodType)
    seen, todo, found = {id(root)}, [root], []
    while todo:
        obj = todo.pop()
        if isinstance(obj, Shiboken.Object):
            found.append(obj)
            continue
        for ref in gc.get_referents(obj):
            if id(ref) not in seen and not isinstance(ref, skip):
                seen.add(id(ref))
                todo.append(ref)
    return found


def test_a_runs_thread_can_reach_no_qt_object(xor_window):
    """What the run's thread holds (its worker: the graph copy, the process, the queue)
    leads to no Qt object, so it can never drop the last reference to one."""
    w = xor_window
    w.epochs.setValue(200)
    assert w.start_training()
    try:
        worker = w.runner._worker
        assert worker.thread.is_alive()
        assert qt_objects_reachable(worker) == []
        assert qt_objects_reachable(worker.thread) == []
    finally:
        w.runner.stop()
        assert w.runner.wait(120)


def test_garbage_the_gui_dropped_is_freed_on_the_gui_thread_during_runs(qtbot, monkeypatch):
    """The reader allocates as unpickling does, so automatic collection would start there;
    while a run goes on it runs on the GUI thread instead, and is restored after."""
    monkeypatch.setattr(runner, "after_message", lambda: [[] for _ in range(3000)])
    litter = QtLitter(cyclic=True)
    was_enabled = gc.isenabled()
    gc.enable()
    litter.timer.start()
    try:
        process_runner = TrainingRunner()
        assert train_process.wait_ready()  # until it is warm, a run trains in a thread
        for i in range(4):
            process_runner.start(xor_graph(), i, epochs=5)
            assert isinstance(process_runner._worker, _ProcessWorker)
            assert collector.holding() and not gc.isenabled()
            assert process_runner.wait(180)
            assert not collector.holding() and gc.isenabled()
        thread_runner = TrainingRunner(in_process=False)
        for i in range(4):
            thread_runner.start(xor_graph(), i, epochs=5)
            assert thread_runner.wait(180)
    finally:
        litter.timer.stop()
        if not was_enabled:
            gc.disable()
    gc.collect()
    assert litter.made > 30 and len(litter.freed_on) == litter.made
    assert set(litter.freed_on) == {threading.get_ident()}


def test_collection_on_the_gui_thread_frees_cycles_while_held(qtbot):
    release = collector.hold()
    try:
        assert not gc.isenabled()
        freed = []
        obj = QObject()
        obj.me = obj
        ref = weakref.ref(obj, lambda _: freed.append(threading.get_ident()))
        del obj
        assert ref() is not None  # only the cycle collector frees it
        kept: list = []

        def allocate_and_look() -> bool:  # past the first threshold, as a busy program does
            kept.extend([] for _ in range(gc.get_threshold()[0] + 10))
            return bool(freed)

        qtbot.waitUntil(allocate_and_look, timeout=30_000)
        assert freed == [threading.get_ident()] and kept
    finally:
        release()
        release()  # a second call does nothing
    assert gc.isenabled() and not collector.holding()


def test_collection_is_handed_over_only_from_the_gui_thread():
    errors = []

    def off_thread() -> None:
        try:
            collector.hold()
        except RuntimeError as e:
            errors.append(e)

    thread = threading.Thread(target=off_thread)
    thread.start()
    thread.join()
    assert errors and gc.isenabled()


@pytest.fixture(autouse=True)
def _gc_restored():
    yield
    assert not collector.holding()
