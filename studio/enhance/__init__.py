"""enhance."""
