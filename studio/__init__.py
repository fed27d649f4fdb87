"""NewsStudio: one portrait photo becomes a live, lip-synced news presenter."""

__version__ = "0.1.0"
