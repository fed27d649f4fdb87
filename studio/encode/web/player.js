"use strict";
// NewsStudio's program player: H.264 access units and AAC frames from the studio's WebSocket server, decoded with
// WebCodecs (VideoDecoder onto the canvas, AudioDecoder into Web Audio). Pictures wait for their sound (audio-led);
// without sound they are drawn as soon as they are decoded. The stats line and the report sent back to the server
// every second: decoded fps, A/V offset (when a picture is drawn against when its sound plays), glass-to-glass latency
// (the frame's capture stamp to the first animation frame after it was drawn, on this machine's clock).
// Query: ?delivery=segments fetches HLS-like file segments instead of the push of single access units;
// ?measure=1 also finds the flash frames and beeps of the studio's sync test (stream A/V offset as decoded).
(() => {
  const params = new URLSearchParams(location.search);
  const delivery = params.get("delivery") === "segments" ? "segments" : "push";
  const measure = params.get("measure") === "1";
  const canvas = document.getElementById("screen");
  const screen = canvas.getContext("2d");
  const statsEl = document.getElementById("stats");
  const soundBtn = document.getElementById("sound");
  const probe = measure ? new OffscreenCanvas(16, 9).getContext("2d", { willReadFrequently: true }) : null;

  const KIND_VIDEO = 1, KIND_AUDIO = 2, HEADER_BYTES = 22;
  const AUDIO_LEAD_S = 0.03;  // jitter buffer of the sound
  const CATCH_UP_MS = 400;  // a picture that arrives this late is skipped, with the rest up to a keyframe
  let audioMaxAheadS = 0.1;  // the most sound that may wait (segments: a whole segment arrives at once)
  const st = {
    decoded: 0, drawn: 0, dropped: 0, catchUps: 0, audioResets: 0, audioTrims: 0, latencies: [], latencyCount: 0, avOffsets: [],
    decodeTimes: [], decodeLatencies: [], audioArrival: [], audioAhead: [], flashes: [], beeps: [], errors: [],
  };
  let videoDecoder = null, audioDecoder = null, config = null, waitingKey = true;
  let actx = null, audioBase = null, lastFlash = false, lastBeepUs = -1e12;
  const recentAhead = [];  // s each sound frame waited after it was scheduled, over the last second
  const captureByTs = new Map();
  let socket = null;

  const nowEpochMs = () => performance.timeOrigin + performance.now();
  const median = (a) => { if (!a.length) return NaN; const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
  const pct = (a, p) => { if (!a.length) return NaN; const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
  const keep = (a, n) => { if (a.length > n) a.splice(0, a.length - n); };

  // -- audio --------------------------------------------------------------------------------------------------------
  function openAudio(rate) {
    if (actx) return;
    try {
      actx = new AudioContext({ sampleRate: rate, latencyHint: "interactive" });
    } catch (e) {
      st.errors.push("audio output: " + e.message);
      return;
    }
    if (actx.state !== "running") {
      soundBtn.hidden = false;
      soundBtn.onclick = () => actx.resume().then(() => { soundBtn.hidden = true; });
    }
  }

  // performance.now() time at which program time tsUs is heard, or null without running audio
  function audioWallFor(tsUs) {
    if (!audioBase || !actx || actx.state !== "running") return null;
    const ctxT = audioBase.ctxTime + (tsUs - audioBase.ts) / 1e6;
    const o = actx.getOutputTimestamp ? actx.getOutputTimestamp() : null;
    if (o && o.performanceTime > 0) return o.performanceTime + (ctxT - o.contextTime) * 1000;
    const out = actx.outputLatency || actx.baseLatency || 0;
    return performance.now() + (ctxT - actx.currentTime + out) * 1000;
  }

  function onAudioData(ad) {
    const n = ad.numberOfFrames;
    const samples = new Float32Array(n);
    ad.copyTo(samples, { planeIndex: 0, format: "f32-planar" });
    if (measure) {
      for (let i = 0; i < n; i++) {
        if (Math.abs(samples[i]) > 0.4) {
          const t = ad.timestamp + (i * 1e6) / ad.sampleRate;
          if (t - lastBeepUs > 500000) { st.beeps.push(t / 1000); keep(st.beeps, 100); }
          lastBeepUs = t;
        }
      }
    }
    if (actx && actx.state === "running") {
      const buf = actx.createBuffer(1, n, ad.sampleRate);
      buf.copyToChannel(samples, 0);
      let at = audioBase ? audioBase.ctxTime + (ad.timestamp - audioBase.ts) / 1e6 : -1;
      // Start, an underrun, or too much sound waiting (a backlog when the page joined, or a stall): map this frame to
      // a small jitter buffer ahead of now. The pictures follow the sound, so the latency follows it too.
      if (!audioBase || at < actx.currentTime + 0.005 || at > actx.currentTime + audioMaxAheadS) {
        audioBase = { ctxTime: actx.currentTime + AUDIO_LEAD_S, ts: ad.timestamp };
        at = audioBase.ctxTime;
        st.audioResets++;
        recentAhead.length = 0;
      }
      // Latency creeps up after a stall (the sound re-anchored late, and everything after waits as long): when
      // every frame of the last second waited longer than the jitter buffer, play the sound that much earlier.
      recentAhead.push(at - actx.currentTime);
      if (recentAhead.length >= ad.sampleRate / n) {
        const spare = Math.min(...recentAhead) - AUDIO_LEAD_S;
        if (spare > 0.015) { audioBase.ctxTime -= spare; at -= spare; st.audioTrims++; }
        recentAhead.length = 0;
      }
      st.audioAhead.push((at - actx.currentTime) * 1000);
      keep(st.audioAhead, 100);
      const src = actx.createBufferSource();
      src.buffer = buf;
      src.connect(actx.destination);
      src.start(at);
    }
    ad.close();
  }

  // -- video --------------------------------------------------------------------------------------------------------
  function onVideoFrame(frame) {
    st.decoded++;
    st.decodeTimes.push(performance.now());
    keep(st.decodeTimes, 200);
    const cap = captureByTs.get(frame.timestamp);
    if (cap) { st.decodeLatencies.push(nowEpochMs() - cap); keep(st.decodeLatencies, 100); }
    if (measure) {
      probe.drawImage(frame, 0, 0, 16, 9);
      const px = probe.getImageData(0, 0, 16, 9).data;
      let sum = 0;
      for (let i = 0; i < px.length; i += 4) sum += px[i] + px[i + 1] + px[i + 2];
      const flash = sum / (px.length / 4) / 3 > 200;
      if (flash && !lastFlash) { st.flashes.push(frame.timestamp / 1000); keep(st.flashes, 100); }
      lastFlash = flash;
    }
    const due = audioWallFor(frame.timestamp);
    const wait = due === null ? 0 : due - performance.now();
    if (wait > 2) setTimeout(() => draw(frame), wait);
    else draw(frame);
  }

  function draw(frame) {
    if (canvas.width !== frame.displayWidth || canvas.height !== frame.displayHeight) {
      canvas.width = frame.displayWidth;
      canvas.height = frame.displayHeight;
    }
    screen.drawImage(frame, 0, 0);
    const ts = frame.timestamp;
    frame.close();
    st.drawn++;
    const drawnAt = performance.now();
    const heardAt = audioWallFor(ts);
    if (heardAt !== null) { st.avOffsets.push(heardAt - drawnAt); keep(st.avOffsets, 100); }
    const cap = captureByTs.get(ts);
    captureByTs.delete(ts);
    if (cap) {
      requestAnimationFrame(() => {
        st.latencies.push(nowEpochMs() - cap);
        st.latencyCount++;
        keep(st.latencies, 100);
      });
    }
  }

  // -- the stream ---------------------------------------------------------------------------------------------------
  function configure(cfg) {
    config = cfg;
    for (const d of [videoDecoder, audioDecoder]) if (d && d.state !== "closed") d.close();
    videoDecoder = new VideoDecoder({ output: onVideoFrame, error: (e) => st.errors.push("video: " + e.message) });
    // no description: the access units are Annex B with SPS/PPS on every keyframe
    videoDecoder.configure({ codec: cfg.video.codec, optimizeForLatency: true });
    audioDecoder = null;
    if (cfg.audio) {
      audioDecoder = new AudioDecoder({ output: onAudioData, error: (e) => st.errors.push("audio: " + e.message) });
      audioDecoder.configure({
        codec: cfg.audio.codec, sampleRate: cfg.audio.sampleRate, numberOfChannels: cfg.audio.numberOfChannels,
        description: new Uint8Array(cfg.audio.description),
      });
      openAudio(cfg.audio.sampleRate);
    }
    audioBase = null;
    waitingKey = true;
  }

  function onMedia(buf) {
    const dv = new DataView(buf);
    const kind = dv.getUint8(0), key = (dv.getUint8(1) & 1) === 1;
    const ts = Number(dv.getBigInt64(2, true)), cap = Number(dv.getBigInt64(10, true)), dur = dv.getUint32(18, true);
    const data = new Uint8Array(buf, HEADER_BYTES);
    if (kind === KIND_VIDEO && videoDecoder && videoDecoder.state === "configured") {
      if (waitingKey && !key) { st.dropped++; return; }
      // Fallen behind (decoding, or a backlog when the page opened): skip to the next keyframe, asked for now,
      // instead of showing every late picture.
      const late = cap && delivery === "push" ? nowEpochMs() - cap / 1000 : 0;  // segments come late by design
      if (!key && (videoDecoder.decodeQueueSize > 25 || late > CATCH_UP_MS)) {
        st.dropped++;
        st.catchUps++;
        waitingKey = true;
        askKeyframe();
        return;
      }
      waitingKey = false;
      if (cap) { captureByTs.set(ts, cap / 1000); if (captureByTs.size > 500) captureByTs.clear(); }
      videoDecoder.decode(new EncodedVideoChunk({ type: key ? "key" : "delta", timestamp: ts, duration: dur, data }));
    } else if (kind === KIND_AUDIO && audioDecoder && audioDecoder.state === "configured") {
      if (cap) { st.audioArrival.push(nowEpochMs() - cap / 1000); keep(st.audioArrival, 100); }
      audioDecoder.decode(new EncodedAudioChunk({ type: "key", timestamp: ts, duration: dur, data }));
    }
  }

  let lastAsk = 0;
  function askKeyframe() {  // at most one request a second
    const now = performance.now();
    if (socket && socket.readyState === WebSocket.OPEN && now - lastAsk > 1000) {
      lastAsk = now;
      socket.send(JSON.stringify({ type: "keyframe" }));
    }
  }

  function connect() {
    const ws = new WebSocket(`ws://${location.host}/ws${delivery === "segments" ? "?media=0" : ""}`);
    ws.binaryType = "arraybuffer";
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        const msg = JSON.parse(ev.data);
        if (msg.type === "config") configure(msg);
      } else {
        onMedia(ev.data);
      }
    };
    ws.onclose = () => { socket = null; setTimeout(connect, 1000); };
    socket = ws;
  }

  async function runSegments() {
    let n = null;
    for (;;) {
      try {
        if (n === null) {
          const idx = await (await fetch("/seg/index.json", { cache: "no-store" })).json();
          if (!idx.config) { await new Promise((r) => setTimeout(r, 200)); continue; }
          if (!config) configure(idx.config);
          audioMaxAheadS = idx.segment_s + 0.25;
          n = idx.next;  // the segment being written now: it is served once complete
        }
        const r = await fetch(`/seg/${n}.bin`, { cache: "no-store" });
        if (r.status !== 200) { n = null; continue; }
        const buf = await r.arrayBuffer();
        for (let off = 0; off + 4 <= buf.byteLength;) {
          const len = new DataView(buf, off, 4).getUint32(0, true);
          onMedia(buf.slice(off + 4, off + 4 + len));
          off += 4 + len;
        }
        n++;
      } catch (e) {
        st.errors.push("segments: " + e.message);
        keep(st.errors, 20);
        n = null;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  // -- stats --------------------------------------------------------------------------------------------------------
  function streamOffsetMs() {
    const d = [];
    for (const f of st.flashes) {
      let best = null;
      for (const b of st.beeps) if (best === null || Math.abs(b - f) < Math.abs(best - f)) best = b;
      if (best !== null && Math.abs(best - f) < 500) d.push(best - f);
    }
    return median(d);
  }

  let lastClock = null;
  setInterval(() => {
    const now = performance.now();
    let audioClock = null;
    if (actx) {  // how the audio output's clock relates to this page's (a stalled or slow clock delays every picture)
      const o = actx.getOutputTimestamp ? actx.getOutputTimestamp() : { contextTime: NaN, performanceTime: NaN };
      const rate = lastClock ? (actx.currentTime - lastClock[0]) * 1000 / (now - lastClock[1]) : NaN;
      lastClock = [actx.currentTime, now];
      audioClock = { rate, output_latency_ms: (actx.outputLatency || 0) * 1000, base_latency_ms: actx.baseLatency * 1000,
        output_behind_ms: (actx.currentTime - o.contextTime) * 1000, output_stamp_age_ms: now - o.performanceTime };
    }
    const recent = st.decodeTimes.filter((t) => t > now - 1000).length;
    const report = {
      type: "stats", delivery, decoded: st.decoded, drawn: st.drawn, dropped: st.dropped, catch_ups: st.catchUps,
      fps: recent,
      latency_ms: median(st.latencies), latency_p95_ms: pct(st.latencies, 0.95), latency_samples: st.latencyCount,
      decoded_latency_ms: median(st.decodeLatencies), audio_arrival_ms: median(st.audioArrival),
      audio_scheduled_ahead_ms: median(st.audioAhead),
      av_offset_ms: median(st.avOffsets), stream_av_offset_ms: measure ? streamOffsetMs() : null,
      flashes: st.flashes.length, beeps: st.beeps.length, audio: actx ? actx.state : "none",
      audio_resets: st.audioResets, audio_trims: st.audioTrims, audio_clock: audioClock, codec: config ? config.video.codec : null, errors: st.errors.slice(-5),
    };
    const f = (x) => (Number.isFinite(x) ? x.toFixed(0) : "–");
    statsEl.textContent = `${report.fps} fps decoded · A/V ${f(report.av_offset_ms)} ms · glass-to-glass `
      + `${f(report.latency_ms)} ms (p95 ${f(report.latency_p95_ms)}) · ${st.decoded} frames · ${delivery}`
      + (report.audio !== "running" ? " · no sound" : "") + (st.errors.length ? ` · ${st.errors[st.errors.length - 1]}` : "");
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(report));
  }, 1000);

  connect();
  if (delivery === "segments") runSegments();
})();
