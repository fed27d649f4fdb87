"""The window's event table: every event the runtime can send has a handler, and nothing else is listed."""

from __future__ import annotations

import typing

import pytest

from studio.pipeline import commands as rt
from studio.ui.event_routes import ROUTES

pytestmark = pytest.mark.qt


def test_every_runtime_event_has_a_handler() -> None:
    assert set(ROUTES) == set(typing.get_args(rt.Event))
    assert all(callable(h) for h in ROUTES.values())
