"""The observation / action space of the environments: any printable text (docs/design.md §5).

`UnicodeText` is a `gymnasium.spaces.Text` over every printable character of the Basic
Multilingual Plane, so that `check_env` and `contains` accept real news text. `dump_observation`
writes JSON whose characters all lie in that charset (controls, surrogates and astral characters
become JSON `\\u` escapes).
"""

from __future__ import annotations

import json
import re
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.error import CustomSpaceError
from gymnasium.spaces.space import Space
from gymnasium.vector.utils import create_shared_memory

#: Characters outside the space's charset (C0/C1 controls, lone surrogates, astral planes); in an
#: observation they only occur inside JSON strings and are written as JSON \u escapes instead.
_OUTSIDE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\U00010000-\U0010ffff]")
_CHARSET_CACHE: dict[str, Any] = {}


def _charset() -> dict[str, Any]:
    if not _CHARSET_CACHE:
        chars = tuple(chr(c) for c in range(0x20, 0x10000) if not (0x7F <= c <= 0x9F or 0xD800 <= c <= 0xDFFF))
        _CHARSET_CACHE.update(
            list=chars,
            set=frozenset(chars),
            index={ch: np.int32(i) for i, ch in enumerate(chars)},
            str="".join(sorted(chars)),
        )
    return _CHARSET_CACHE


class UnicodeText(spaces.Text):
    """`spaces.Text` over every printable character of the Basic Multilingual Plane.

    `contains` is a single regex scan; the charset tables are built once per process and shared by
    every instance (copies included), so many environments and vector batches stay cheap. Being a
    real `Text` space, it flattens and travels through AsyncVectorEnv shared memory.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None):
        cs = _charset()
        self.min_length = int(min_length)
        self.max_length = int(max_length)
        self._char_set = cs["set"]
        self._char_list = cs["list"]
        self._char_index = cs["index"]
        self._char_str = cs["str"]
        Space.__init__(self, dtype=str, seed=seed)

    def contains(self, x: Any) -> bool:
        return (isinstance(x, str) and self.min_length <= len(x) <= self.max_length
                and _OUTSIDE.search(x) is None)

    def __deepcopy__(self, memo: dict) -> UnicodeText:
        new = UnicodeText(self.max_length, min_length=self.min_length)
        new._np_random = deepcopy(self._np_random, memo)
        return new

    def __reduce__(self):  # pickles as its parameters, not its 63k-character tables
        return (_rebuild_text, (self.max_length, self.min_length, self._np_random))

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


@create_shared_memory.register(UnicodeText)
def _no_shared_memory(space: UnicodeText, n: int = 1, ctx: Any = None) -> Any:
    # Gymnasium reads Text shared memory into a tuple once, at creation: later steps would return
    # stale observations. Refuse, so that AsyncVectorEnv says to pass shared_memory=False.
    raise CustomSpaceError("forecast-env observations are text: use AsyncVectorEnv(..., shared_memory=False)")


def _rebuild_text(max_length: int, min_length: int, rng: np.random.Generator | None) -> UnicodeText:
    space = UnicodeText(max_length, min_length=min_length)
    space._np_random = rng  # type: ignore[assignment]  # gymnasium seeds a None generator lazily
    return space


def _escape_outside(m: re.Match) -> str:
    c = ord(m.group())
    if c > 0xFFFF:
        c -= 0x10000
        return f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}"
    return f"\\u{c:04x}"


def dump_observation(obj: Any) -> str:
    """JSON text of `obj` whose characters all lie in `UnicodeText`'s charset."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    return _OUTSIDE.sub(_escape_outside, text)
