"""The crash lab: every design at every crash point, killed for real, compared with no crash."""
