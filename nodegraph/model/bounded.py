"""The pure-Python arithmetic a graph file may call, bounded before it computes.

The allowlist lets a file name `operator` and `math` functions, which are harmless on
tensors but unbounded on Python values: ``math:factorial`` of 10^8 runs for minutes,
``operator:pow`` of 10 and 10^9 or ``operator:lshift`` of 1 and 10^10 build integers of
gigabytes, ``operator:mul`` of a string and 10^9 a string of gigabytes, all during
validation and before any memory estimate sees them. `guard` wraps each such function so
that the size of what it would make is decided from its operands' sizes (bit lengths,
sequence lengths, factorial and binomial arguments) first; a call over the limits raises
`TooLargeValue` (a `too_large` problem on its node), and tensors pass straight through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from nodegraph.model.errors import PortError

MAX_BITS = 1 << 14  # an integer operand or result: 16,384 bits (2 KB), far past any shape
MAX_ITEMS = 1 << 16  # a string, bytes or sequence made by an operator: 65,536 items
MAX_FACTORIAL = 1_500  # factorial(1500) has about 13,800 bits
_SEQUENCES = (str, bytes, bytearray, list, tuple)
HINT = ("an operator or math call in a graph computes shapes and small numbers; keep its "
        "operands small")


class TooLargeValue(PortError):
    """A pure-Python value too large to compute during validation or a run."""

    def __init__(self, message: str):
        super().__init__(None, message, HINT, kind="too_large")


def _bits(v: Any) -> int:
    return abs(v).bit_length() if isinstance(v, int) and not isinstance(v, bool) else 0


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _refuse(name: str, what: str) -> TooLargeValue:
    return TooLargeValue(f"{name} would make {what}, more than a graph may compute "
                         f"({MAX_BITS:,}-bit integers, {MAX_ITEMS:,}-item sequences)")


def _repeat(name: str, args: tuple) -> None:
    """seq * n, n * seq: the length of the result."""
    seq = next((a for a in args if isinstance(a, _SEQUENCES)), None)
    count = next((a for a in args if _int(a)), None)
    if seq is not None and count is not None and len(seq) * max(count, 0) > MAX_ITEMS:
        raise _refuse(name, f"a sequence of {len(seq):,} x {count:,} items")


def _check(name: str, args: tuple) -> None:
    """Raise TooLargeValue when `name(*args)` would make a value over the limits."""
    for a in args:
        if _bits(a) > MAX_BITS:
            raise _refuse(name, f"work on an integer of {_bits(a):,} bits")
        if isinstance(a, _SEQUENCES) and len(a) > MAX_ITEMS:
            raise _refuse(name, f"work on a sequence of {len(a):,} items")
    ints = [a for a in args if _int(a)]
    base = name.replace("operator:i", "operator:", 1)  # imul is mul, in place
    if base in ("operator:mul", "operator:matmul"):
        if len(ints) == 2 and sum(map(_bits, ints)) > MAX_BITS:
            raise _refuse(name, f"an integer of about {sum(map(_bits, ints)):,} bits")
        _repeat(name, args)
    elif base == "operator:pow" and len(ints) == 2:
        x, n = ints
        if n > 0 and _bits(x) > 1 and _bits(x) * n > MAX_BITS:
            raise _refuse(name, f"an integer of about {_bits(x) * n:,} bits")
    elif base == "operator:lshift" and len(ints) == 2:
        if ints[1] > MAX_BITS or _bits(ints[0]) + ints[1] > MAX_BITS:
            raise _refuse(name, f"an integer of about {_bits(ints[0]) + ints[1]:,} bits")
    elif base in ("operator:add", "operator:concat"):
        if len(args) == 2 and all(isinstance(a, _SEQUENCES) for a in args) and \
                len(args[0]) + len(args[1]) > MAX_ITEMS:
            raise _refuse(name, f"a sequence of {len(args[0]) + len(args[1]):,} items")
    elif base == "operator:mod" and args and isinstance(
            args[0], str | bytes):
        raise TooLargeValue(f"{name}: text formatting ('%' on a string) is not arithmetic a "
                            "graph computes")
    elif name == "math:factorial" and ints and ints[0] > MAX_FACTORIAL:
        raise _refuse(name, f"the factorial of {ints[0]:,}")
    elif name in ("math:comb", "math:perm") and len(ints) >= 1:
        n = ints[0]
        k = ints[1] if len(ints) > 1 else n
        if name == "math:comb":
            k = min(k, n - k) if 0 <= k <= n else 0
        if max(k, 0) * max(_bits(n), 1) > MAX_BITS:
            raise _refuse(name, f"an integer of about {k * _bits(n):,} bits")
    elif name in ("math:prod", "math:lcm"):
        values = args[0] if name == "math:prod" and args and isinstance(
            args[0], list | tuple) else args
        if sum(_bits(v) for v in values) > MAX_BITS:
            raise _refuse(name, "an integer of more bits than its operands' sum allows")


def guard(name: str, fn: Callable) -> Callable:
    """`fn` checked by `_check` before each call whose arguments hold a Python int or
    sequence (tensors and floats go straight through)."""

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if any(_int(a) or isinstance(a, _SEQUENCES) for a in args):
            _check(name, args)
        return fn(*args, **kwargs)

    bounded.__wrapped_allowlisted__ = fn  # type: ignore[attr-defined]
    return bounded


def python_bytes(value: Any, depth: int = 0) -> int:
    """Bytes a non-tensor value holds (an int's digits, a string's characters, a list's
    items), for the memory estimate; tensors count elsewhere."""
    if _int(value):
        return 28 + _bits(value) // 8
    if isinstance(value, str | bytes | bytearray):
        return 49 + len(value)
    if isinstance(value, list | tuple) and depth < 8:
        return 56 + 8 * len(value) + sum(python_bytes(v, depth + 1) for v in value[:10_000])
    return 0
