"""fedbandit.experiments.grid."""
