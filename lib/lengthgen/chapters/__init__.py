"""One analysis module per chapter, named like its notebook (``01_equivariance`` -> ``equivariance``).

Each module declares the chapter's ``Parameters`` (a frozen dataclass, see
:mod:`lengthgen.book.parameters`) and the measurements the notebook plots and asserts.
``claims`` holds the claims data of every chapter, ``common`` what several chapters share,
``stats`` the small statistics behind the checks.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def module_of(chapter: str) -> ModuleType:
    """The analysis module of a chapter: ``"06_transfer"`` -> :mod:`lengthgen.chapters.transfer`."""
    number, _, slug = chapter.partition("_")
    if not (number.isdigit() and slug):
        raise ValueError(f"{chapter!r} is not a chapter name of the form NN_slug")
    name = f"{__name__}.{slug}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        raise ValueError(f"chapter {chapter!r} has no analysis module {name}") from err


def parameters_of(chapter: str) -> type:
    """The chapter's ``Parameters`` declaration."""
    parameters = module_of(chapter).Parameters
    if parameters.chapter != chapter:
        raise ValueError(f"lengthgen.chapters.{chapter.partition('_')[2]}.Parameters declares chapter "
                         f"{parameters.chapter!r}, not {chapter!r}")
    return parameters
