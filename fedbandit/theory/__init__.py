"""fedbandit.theory."""
