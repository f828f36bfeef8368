"""The seed ledger: every seed a chapter reserved or used (its page at the defaults, pilots, prototypes, revisions,
design runs, committed sweeps of held-out runs), written once.

Chapters take their reserved seeds from here instead of copying another chapter's by hand (chapter 13, which trains
chapter 6's network, avoids every seed of chapter 6). ``tests/test_repository.py`` holds the ledger to its rules: a
chapter's held-out seeds were used for nothing else of that chapter, a chapter avoids every seed of the chapters it
names in :data:`AVOIDS`, and its ``page`` seeds are its notebook's defaults.
"""

from __future__ import annotations

LEDGER: dict[str, dict[str, tuple[int, ...] | range]] = {
    "06_transfer": dict(page=range(0, 3), held_out=tuple(range(300, 320))),
    "10_zoo": dict(page=range(500, 505), revision=range(300, 305), design=range(400, 405),
                   explored=(*range(600, 605), 640), held_out=tuple(range(660, 690))),
    "11_zoo_networks": dict(page=range(710, 712), prototype=(0, 1), revision=tuple(range(700, 710)),
                            held_out=tuple(range(720, 730))),
    "12_sequential_complexity": dict(page=range(900, 903), pilot=(0, 1, 2), held_out=tuple(range(920, 940))),
    "13_initialization": dict(page=range(400, 403), held_out=tuple(range(500, 520))),
}
AVOIDS = {"13_initialization": ("06_transfer",)}  # chapter 13 trains chapter 6's network: none of its seeds may recur


def seeds(chapter: str, kind: str) -> tuple[int, ...] | range:
    """The seeds a chapter reserved or used for ``kind`` (``page``, ``held_out``, ``pilot``, ...)."""
    return LEDGER[chapter][kind]


def every_seed(chapter: str) -> frozenset[int]:
    """Every seed the ledger lists for a chapter, whatever it was used for."""
    return frozenset(s for kind in LEDGER[chapter].values() for s in kind)
