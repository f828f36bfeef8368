"""The models and how they are trained and scored: everything a chapter measures is built here.

Nothing in this package knows about chapters, notebooks or the book: it imports neither
``lengthgen.chapters`` nor ``lengthgen.book`` (a test enforces the direction).

- ``seeding``: one integer seed, separate random streams per purpose; the device a run uses.
- ``tasks``: fixed-offset retrieval (``shift``) and ``copy``, sampled at any length.
- ``encodings``: rotary position encoding (both pairings), frequency sets, rotation.
- ``position_zoo``: the other common encodings from their formulas (sinusoidal, randomized, T5, ALiBi, partial rotary, FIRE).
- ``zoo_heads``: a single position-only head for every encoding of the zoo (chapter 10) and its run configuration.
- ``xpos``: xPos (RoPE with a per-plane decay) for the zoo's single head, and its run configuration.
- ``sequence_tasks``: shift, copy with distinct tokens and reversal by instance size, scored by exact match.
- ``zoo_network``: chapter 11's runs of the decoder with an encoding of the zoo, and their exact match.
- ``heads``: single position-only attention heads (RoPE, learned APE, linear rotary kernel) and their run configurations.
- ``transformer``: the book's one decoder (small, GPT-style) with any encoding of the zoo, and its run configuration.
- ``config``: the one configuration base.
- ``training``: the base of every run configuration and the one training loop every model uses.
- ``evaluation``: accuracy against sequence length (the one ``length_sweep``).
- ``pola``: position-only linear attention (chapter 8's model family), its closed-form prediction and LRC.
- ``linear_rnn``: overparameterized linear RNNs on impulse-response targets (chapter 9).
"""
