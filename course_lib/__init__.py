"""course_lib: the small shared package that every chapter notebook imports.

One module per idea, named after it:

- ``runtime``     seeds, device choice (cuda / mps / cpu), thread count, progress bars, paths
- ``data``        one loader per dataset in ``data/``, each checking its sha256 first
- ``attention``   scaled dot-product attention, single-head, multi-head and additive attention
- ``masks``       causal and padding masks (boolean, True = may attend)
- ``positional``  sinusoidal, learned and ALiBi positional information
- ``training``    a small ``fit`` loop with validation and early stopping
- ``viz``         attention heatmaps, grids of heads, loss curves
- ``results``     the results card each chapter writes at the end of a full run
"""

__version__ = "0.1.0"
