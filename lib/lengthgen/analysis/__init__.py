"""The analysis layer: measurements that more than one chapter makes, and that use no chapter.

Each module serves at least two chapters (``tests/test_repository.py`` holds it to that): ``planes``
(a rotary kernel as one cosine per plane), ``kernels`` (a head's logits read as a function of the
offset), ``carrier`` (the carrier measures of chapters 3 and 6), ``network_probes`` (what a
trained network's attention shows), ``held_out`` (the one reader of committed sweeps), ``network_zoo``
(chapter 11's verdicts), ``lrc`` (Linear Representation Complexity) and ``stats`` (intervals and summaries).
"""
