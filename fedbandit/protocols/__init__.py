"""fedbandit.protocols.tree."""
