"""Bridges from the book's mechanisms to the frameworks a reader deploys with.

* :mod:`fedbandit.integrations.flower` -- the distributed discrete Gaussian of chapter 5 in
  Flower (``flwr``, the optional extra ``fedbandit[flower]``): a client mod before
  SecAgg+, a server workflow that decodes and accounts, a momentum strategy and a
  simulation runner.

Layer: above :mod:`fedbandit.experiments`, below :mod:`fedbandit.book`.  ``import fedbandit``
and ``import fedbandit.integrations`` never import ``flwr``.
"""

__all__: list[str] = []
