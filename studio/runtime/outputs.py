"""The live outputs room: streams (RTMP, SRT, the browser's WebSocket, ...) put on air and taken off by URL."""

from __future__ import annotations

from studio.errors import StudioError
from studio.pipeline import commands as cmd
from studio.runtime.events import Outbox
from studio.runtime.supervisor import CoreSupervisor


class LiveOutputsRoom:
    """Every stream on air, by URL; each goes on across core restarts (the supervisor's attached outputs)."""

    def __init__(self, supervisor: CoreSupervisor, outbox: Outbox) -> None:
        self.supervisor = supervisor
        self.outbox = outbox
        self.streams: dict[str, object] = {}  # url -> the stream output on air

    def start(self, url: str, allow_remote: bool) -> None:
        from studio.encode.streams import output_for_url

        url = url.strip()
        if not url or url in self.streams:
            return
        try:
            if allow_remote and url.startswith(("ws://", "http://")):
                from studio.encode.websocket import WebSocketOutput

                out = WebSocketOutput.from_url(url, allow_remote=True)
            else:
                out = output_for_url(url)
            self.supervisor.attach(out)
        except StudioError as exc:
            self._changed(f"{url}: {exc}")
            return
        self.streams[url] = out
        self._changed("")

    def stop(self, url: str) -> None:
        out = self.streams.pop(url, None)
        if out is None:
            return
        try:
            self.supervisor.detach(out)
        except StudioError as exc:
            self._changed(f"{url}: {exc}")
            return
        self._changed("")

    def stop_all(self) -> None:
        for url in list(self.streams):
            self.stop(url)

    def stats(self) -> list:
        """(url, OutputStats) of every stream output (the Outputs panel polls it on the window's timer)."""
        return [(url, out.stats()) for url, out in list(self.streams.items())]

    def _changed(self, message: str) -> None:
        self.outbox.emit(cmd.OutputsChanged(tuple(self.streams), message))
