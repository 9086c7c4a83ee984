"""fedbandit: differentially private federated bandits, the package behind the book."""

__version__ = "0.1.0"
