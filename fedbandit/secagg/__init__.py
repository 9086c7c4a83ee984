"""fedbandit.secagg.protocol."""
