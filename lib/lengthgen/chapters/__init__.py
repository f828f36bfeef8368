"""The chapter layer: one module (or small package) per chapter, named like its notebook (``01_equivariance`` ->
``equivariance``), each declaring the chapter's ``Parameters`` (see :mod:`lengthgen.book.parameters`) and showing its
pipeline first; ``common`` and ``committed`` hold the parameter groups and runs several chapters share. No chapter
imports another: what two chapters measure alike lives in :mod:`lengthgen.analysis`. The book machinery finds a
chapter's module by name (:func:`lengthgen.book.parameters.module_of`).
"""
