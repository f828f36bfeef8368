"""The book's machinery: everything between the models and the rendered pages.

- ``parameters``: typed chapter parameters, their validation and the strict command-line values.
- ``harness``: :class:`Chapter`, the object behind a chapter's validate / record / assert / wall-time cells.
- ``records``: results records, the claim checks a chapter run wrote, and what produced them.
- ``fingerprint``: code fingerprints, notebook hashes and the build fingerprint.
- ``bookcache``: keeps the book's execution cache honest across builds.
- ``rerun``: rerun one chapter with other parameters (papermill).
- ``sweep``: resumable parameter sweeps over chapters, on local processes or a Dask cluster.
- ``parallel``: independent runs in worker processes, one torch thread each.
- ``glue``, ``plotting``, ``timing``, ``paths``: numbers into prose, the one plotting theme, wall time, where things live.
- ``size_plots``: exact match and training loss against instance size, for the full-sequence tasks.
- ``sphinx_offline``: a Sphinx extension that keeps the rendered book readable with no network.

Chapters use it through ``from lengthgen.book.harness import Chapter``.
"""
