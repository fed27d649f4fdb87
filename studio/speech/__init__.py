"""Speech: text-to-speech engines with phone timings, and visemes (phones -> mouth shapes)."""

from studio.speech.registry import SpeechEngine, check_request, list_voices, plan_request, synthesize
from studio.speech.settings import SpeechSettings
from studio.speech.types import PhonemeTiming, Utterance, VoiceInfo, WordTiming

__all__ = [
    "PhonemeTiming",
    "SpeechEngine",
    "SpeechSettings",
    "Utterance",
    "VoiceInfo",
    "WordTiming",
    "check_request",
    "list_voices",
    "plan_request",
    "synthesize",
]
