"""lengthgen: why rotary attention extrapolates and learned absolute positions memorize.

The library behind the book. Notebooks set parameters, call into these modules,
plot and assert; every model, task, training loop and analysis lives here.
"""

__version__ = "0.1.0"
