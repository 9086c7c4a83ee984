"""fedbandit.accounting.zcdp."""
