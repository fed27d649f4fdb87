"""The project's own neural audio-to-motion engine: log-mel -> causal encoder -> autoregressive motion transformer."""
