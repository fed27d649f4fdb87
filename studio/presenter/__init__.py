"""presenter."""
