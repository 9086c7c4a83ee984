"""fedbandit.audit.epsilon."""
