"""Publishing measured numbers and figures to the book's prose (myst-nb ``glue``).

numpy scalars are converted to plain Python numbers first: myst-nb formats glued
values from their text representation, and ``np.float64(0.5)`` would not parse.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from myst_nb import glue as _myst_glue


def glue(name: str, value: Any, display: bool = False) -> None:
    """Glue ``value`` under ``name`` for ``{glue:text}`` / ``{glue:figure}`` references."""
    if isinstance(value, np.generic):
        value = value.item()
    _myst_glue(name, value, display=display)
