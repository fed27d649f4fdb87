"""Integration fixtures live in tests/conftest.py (the virtual microphone is shared with tests/qt)."""
