"""Watching a graph being built: the constructor calls an export writes back as code.

A built module cannot be read back into the call that made it: `extra_repr` is written for
people, and most classes keep only some of their constructor arguments. So the exporter
watches the build. `recording` installs a profile hook (no class is patched, and only the
current thread is watched) that notes the arguments every `__init__` of a module,
optimizer, scheduler or metric receives — the first `__init__` run for an object is the
most derived class's, called with what the caller gave — and the `torch.nn.init` calls a
block makes on a module's tensors after building it (a layer started by Xavier's rule).
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Call:
    """One constructor call: the object made and every argument its `__init__` received."""

    obj: Any
    cls: Callable[..., Any]  # a class, or a function that builds the object
    args: dict[str, Any]  # by parameter name, defaults included
    varargs: tuple = ()
    varkw: dict[str, Any] = field(default_factory=dict)


class Recorder:
    """The constructor calls seen while recording, by object, and the `torch.nn.init` calls
    made on tensors after their module was built (a layer started by Xavier's rule)."""

    def __init__(self, bases: tuple[type, ...]):
        self.bases = bases
        self._calls: dict[int, Call] = {}  # Call.obj keeps the object alive, so ids stay unique
        self.inits: list[Call] = []  # Call.obj is the tensor initialised, Call.cls the function
        self._building: set[types.FrameType] = set()  # the outermost __init__ frames running

    def get(self, obj: Any) -> Call | None:
        """How `obj` was made; a class with no `__init__` of its own in Python (a metric
        that only resets) was made without arguments."""
        call = self._calls.get(id(obj))
        if call is not None and call.obj is obj:
            return call
        if isinstance(obj, self.bases) and type(obj).__init__ is object.__init__:
            return Call(obj, type(obj), {})
        return None

    def inits_of(self, tensor: Any) -> list[Call]:
        return [c for c in self.inits if c.obj is tensor]

    def event(self, frame: types.FrameType, event: str) -> None:
        if event == "return":
            self._building.discard(frame)
            return
        if event != "call":
            return
        name = frame.f_code.co_name
        if name == "__init__":
            self.note(frame)
        elif not self._building and frame.f_code.co_filename == INIT_FILE \
                and frame.f_back is not None and frame.f_back.f_code.co_filename != INIT_FILE \
                and callable(getattr(torch.nn.init, name, None)):
            self._note_init(frame, getattr(torch.nn.init, name))

    def note(self, frame: types.FrameType) -> None:
        """Record the call of `frame` when it is the first `__init__` run for its object:
        that is the most derived class's, with the arguments the caller gave."""
        code = frame.f_code
        if not code.co_argcount:
            return
        local = frame.f_locals
        obj = local.get(code.co_varnames[0])
        if not isinstance(obj, self.bases) or self.get(obj) is not None:
            return
        args, varargs, varkw = _arguments(frame, skip=1)
        self._calls[id(obj)] = Call(obj, type(obj), args, varargs, varkw)
        self._building.add(frame)

    def _note_init(self, frame: types.FrameType, fn: Callable) -> None:
        args, varargs, varkw = _arguments(frame, skip=0)
        tensor = next(iter(args.values()), None)
        if isinstance(tensor, torch.Tensor):
            self.inits.append(Call(tensor, fn, args, varargs, varkw))


INIT_FILE = torch.nn.init.__file__


def _arguments(frame: types.FrameType, skip: int) -> tuple[dict, tuple, dict]:
    """The arguments a frame was called with (the first `skip` left out), by name."""
    code, local = frame.f_code, frame.f_locals
    count = code.co_argcount + code.co_kwonlyargcount
    args = {k: _snapshot(local[k]) for k in code.co_varnames[skip:count] if k in local}
    varargs, varkw = (), {}
    if code.co_flags & inspect.CO_VARARGS:
        varargs = _snapshot(tuple(local[code.co_varnames[count]]))
        count += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        varkw = _snapshot(dict(local[code.co_varnames[count]]))
    return args, varargs, varkw


def _snapshot(value: Any) -> Any:
    """Plain containers copied, so a constructor that fills them in later (an optimizer
    adds its defaults to each param group) does not change what was recorded."""
    if type(value) is list:
        return [_snapshot(v) for v in value]
    if type(value) is tuple:
        return tuple(_snapshot(v) for v in value)
    if type(value) is dict:
        return {k: _snapshot(v) for k, v in value.items()}
    return value


@contextmanager
def recording(*bases: type) -> Iterator[Recorder]:
    """Record the constructor calls of instances of `bases` made in this thread."""
    recorder = Recorder(bases)
    previous = sys.getprofile()

    def hook(frame, event, arg):
        recorder.event(frame, event)
        if callable(previous):  # another Python-level profiler keeps its events
            previous(frame, event, arg)

    sys.setprofile(hook)
    try:
        yield recorder
    finally:
        sys.setprofile(previous)
