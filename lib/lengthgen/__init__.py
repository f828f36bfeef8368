"""lengthgen: why rotary attention extrapolates and learned absolute positions memorize.

The library behind the book, in five layers. Notebooks set parameters, call into them, plot
and assert. A run's key covers the model, analysis and chapter modules it imports (what
measures), never the claims or the book machinery (what judges and renders).

``lengthgen.model`` - the models and how they are trained and scored (imports nothing else here):
    ``seeding``      one integer seed, separate random streams per purpose; the run's device
    ``tasks``        fixed-offset retrieval (shift) and copy, sampled at any length; the loss on them
    ``encodings``    rotary position encoding in both pairings, frequency sets, the identifiable base
    ``position_zoo`` sinusoidal, randomized, T5 bias, ALiBi, partial rotary and FIRE, from their formulas
    ``zoo_heads``    a single position-only head for every encoding of the zoo, and its runs
    ``xpos``         xPos (RoPE with a per-plane decay) for the zoo's single head, and its runs
    ``sequence_tasks`` shift, copy with distinct tokens and reversal by instance size, scored by exact match
    ``zoo_network``  chapter 11's runs of the decoder with an encoding of the zoo, and their exact match
    ``heads``        single position-only heads (RoPE, learned APE, the linear rotary kernel) and their runs
    ``transformer``  the book's one decoder (small, GPT-style) with any encoding of the zoo, and its runs
    ``config``       the one configuration base (frozen dataclass with ``with_`` and ``as_dict``)
    ``training``     the base of every run configuration and the one training loop every model uses
    ``evaluation``   accuracy against sequence length: the one ``length_sweep``
    ``programs``     step-by-step programs of reasoning tasks (copy, reversal, parity with and without a chain of
                     thought, addition, mode) and their Sequential Representation Complexity under each scheme
    ``reasoning_tasks`` the programs' tasks as token sequences at any scale, with coupled position ids
    ``relation_network`` the decoder whose positions enter only as a learned bias on a scheme's relations
    ``pola``         position-only linear attention: tasks, positional relations, the closed-form gradient-descent
                     prediction, preconditioned SGD, Linear Representation Complexity
    ``linear_rnn``   overparameterized linear RNNs trained on an impulse response; Hankel rank of the learned system

``lengthgen.analysis`` - measurements more than one chapter makes (imports no chapter; each serves two or more):
    ``planes``       a rotary kernel as one cosine per plane; max-margin and min-norm alternatives; the
                     random-phase tail that predicts the first far offset to beat the target
    ``kernels``      a head's logits as a function of the offset: the offset profile and the Toeplitz test
    ``carrier``      the carrier (one cosine per plane, in phase at the target) and how close a kernel is to it
    ``network_probes`` what chapters 6 and 13 read off a trained network's attention: target mass per head,
                     content-averaged kernels, mean query and key on training-length sequences
    ``held_out``     the one reader of committed sweeps, ``committed_runs`` (chapters 6, 10, 11, 12, 13)
    ``network_zoo``  chapter 11's registered verdicts, the per-cell tables and the study of its committed runs (6, 11)
    ``lrc``          Linear Representation Complexity verdicts by linear algebra alone (chapters 8, 9)
    ``stats``        binomial intervals, seed summaries, prediction agreement

``lengthgen.chapters`` - one module or small package per chapter, named like its notebook, its
    ``Parameters`` and pipeline first: ``equivariance`` (01), ``absolute_pinning`` (02), ``carrier`` (03),
    ``dilution_law`` (04), ``linear_control`` (05), ``transfer`` (06), ``robustness`` (07), ``position_only`` (08),
    ``connections`` (09), ``zoo`` (10), ``zoo_networks`` (11), ``sequential_complexity`` (12),
    ``initialization`` (13), ``claims_summary`` (99). A package keeps its fixed settings in ``registered`` and
    splits what it measures into modules named for it (``transfer.masking``, ``zoo.held_out``). No chapter
    imports another. Shared by the chapters:
    ``common``       parameter groups and run configurations several chapters share
    ``committed``    the ``committed_sweep`` parameter group: the sweep a chapter reads, its held-out seeds kept
                     off the page (chapters 6, 10, 11, 12 and 13)
    ``seeds``        the seed ledger: every chapter's page, pilot, revision and held-out seeds, written once

``lengthgen.claims`` - the claims data, outside every run's key: the ``Claim`` record and its roles, one
    module per chapter named like its analysis module (``claims.transfer``), each with its ``CLAIMS`` (one line
    of data a claim), ``register/``, per chapter the full arguments and every revision, and ``paper``, the
    papers' claims with the checks, limits and deciding number behind each verdict

``lengthgen.book`` - the machinery between the models and the rendered book:
    ``harness``      ``Chapter``: validate, record, assert and time a chapter, in one object
    ``audit``        which chapter records of a build are current (the summary page's audit)
    ``parameters``   typed chapter parameters, their rules, strict command-line values; a chapter's module by name
    ``records``      results records and what produced them
    ``judging``      stored values judged against the claims as they are now, never by a stored verdict
    ``fingerprint``  measurement and page fingerprints, notebook hashes, the build fingerprint
    ``bookcache``    keeps the book's execution cache honest across builds
    ``rerun``        rerun one chapter with other parameters (papermill)
    ``sweep``        resumable sweeps over chapters, on local processes or a Dask cluster; the manifest that
                     seals each stored run; carrying runs over to new keys after a verified move of code
    ``parallel``     independent runs in worker processes, one torch thread each
    ``glue``         numbers and figures into the prose
    ``plotting``     the one seaborn theme and the length-sweep plot
    ``size_plots``   exact match and training loss against instance size (the full-sequence tasks)
    ``headline``     the landing page's figure, RoPE against APE, drawn from the records
    ``timing``       wall time
    ``paths``        where things live in the repository
    ``sphinx_offline``  a Sphinx extension: no CDN scripts, no console errors, so the book reads offline
    ``sphinx_claims``   a Sphinx extension: claim tables and Provenance blocks judged when the book is built
"""

__version__ = "0.4.0"
