"""fedbandit.book."""
