"""Stand-alone scripts run by a peer library's own interpreter (they must not import privclust)."""
