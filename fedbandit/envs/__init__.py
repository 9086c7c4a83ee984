"""fedbandit.envs.linear."""
