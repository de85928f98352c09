// ambient_runs run viewer: plain JavaScript, no dependencies, no build step.
//
// It talks AG-UI 1.0 to one endpoint as a page does: each turn POSTs a RunAgentInput
// (the thread's messages and state, the page's tools, resume answers) and reads the SSE
// reply with a fetch stream, folding the events into the chat, the timeline (one lane per
// subagent invocation, nested under its parent, on the run's time axis), the state and the
// raw event list. With a store, runs are opened by their ids through the resumable
// endpoints (GET …/threads/T/runs/R: join, or ?after=0: replay).
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const uid = () => (crypto.randomUUID ? crypto.randomUUID() : "id-" + Math.random().toString(16).slice(2) + Date.now().toString(16));
  const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
  const brief = (v, n = 140) => {
    const s = typeof v === "string" ? v : JSON.stringify(v);
    return s === undefined ? "" : s.length > n ? s.slice(0, n - 1) + "…" : s;
  };
  // A subagent id as the run minted it ("<runId>-sub-2") reads best without the run id.
  const shortId = (id, run) => (run && id && id.length > 24 && id.startsWith(run.runId + "-") ? "…" + id.slice(run.runId.length) : id);
  const secs = (ms) => (ms < 1000 ? Math.max(0, Math.round(ms)) + " ms" : (ms / 1000).toFixed(2) + " s");

  // ------------------------------------------------------------------ page state
  const meta = document.querySelector('meta[name="ambient-runs-endpoint"]');
  const params = new URLSearchParams(location.search);
  const S = {
    endpoint: params.get("endpoint") || (meta && meta.content) || location.pathname,
    threadId: uid(),
    messages: [], // the thread's messages, carried into every run as a page does
    state: {}, // the thread's state, likewise
    tools: [], // the page's own tools (RunAgentInput.tools)
    runs: [], // every run this page has shown
    view: null, // the run the timeline shows
    live: null, // the run streaming now
    abort: null,
    resumable: false,
    changed: new Set(),
    marks: [], // chat notes (an interrupt asked, answered), each after the message it followed
  };
  const KNOWN = new Set(("RUN_STARTED RUN_FINISHED RUN_ERROR STEP_STARTED STEP_FINISHED TEXT_MESSAGE_START " +
    "TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TEXT_MESSAGE_CHUNK TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END " +
    "TOOL_CALL_CHUNK TOOL_CALL_RESULT STATE_SNAPSHOT STATE_DELTA MESSAGES_SNAPSHOT ACTIVITY_SNAPSHOT " +
    "ACTIVITY_DELTA RAW CUSTOM REASONING_START REASONING_MESSAGE_START REASONING_MESSAGE_CONTENT " +
    "REASONING_MESSAGE_END REASONING_MESSAGE_CHUNK REASONING_END REASONING_ENCRYPTED_VALUE " +
    "SUBAGENT_STARTED SUBAGENT_FINISHED SUBAGENT_ERROR").split(" "));
  const base = () => S.endpoint.replace(/\/+$/, "");

  // ------------------------------------------------------------------ JSON Patch (RFC 6902)
  const unescape = (t) => t.replace(/~1/g, "/").replace(/~0/g, "~");
  const tokens = (path) => (path === "" ? [] : path.slice(1).split("/").map(unescape));
  function walk(doc, toks) {
    let at = doc;
    for (const t of toks) {
      if (at === null || typeof at !== "object" || !(t in at)) throw new Error("no such path");
      at = at[t];
    }
    return at;
  }
  function put(doc, path, value, insert) {
    const toks = tokens(path);
    if (!toks.length) return value;
    const key = toks.pop();
    const parent = walk(doc, toks);
    if (Array.isArray(parent)) {
      const i = key === "-" ? parent.length : Number(key);
      if (insert) parent.splice(i, 0, value); else parent[i] = value;
    } else parent[key] = value;
    return doc;
  }
  function drop(doc, path) {
    const toks = tokens(path);
    const key = toks.pop();
    const parent = walk(doc, toks);
    const old = parent[key];
    if (Array.isArray(parent)) parent.splice(Number(key), 1); else delete parent[key];
    return old;
  }
  function applyPatch(doc, ops) {
    let out = clone(doc);
    for (const op of ops) {
      if (op.op === "add") out = put(out, op.path, clone(op.value), true);
      else if (op.op === "replace") { walk(out, tokens(op.path)); out = put(out, op.path, clone(op.value), false); }
      else if (op.op === "remove") drop(out, op.path);
      else if (op.op === "move") { const v = drop(out, op.from); out = put(out, op.path, v, true); }
      else if (op.op === "copy") out = put(out, op.path, clone(walk(out, tokens(op.from))), true);
      else if (op.op === "test" && JSON.stringify(walk(out, tokens(op.path))) !== JSON.stringify(op.value)) throw new Error("test failed");
    }
    return out;
  }
  function diffPaths(a, b, path = "", out = new Set()) {
    if (JSON.stringify(a) === JSON.stringify(b)) return out;
    if (a && b && typeof a === "object" && typeof b === "object" && Array.isArray(a) === Array.isArray(b)) {
      for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) diffPaths(a[k], b[k], path + "/" + k, out);
    } else out.add(path);
    return out;
  }

  // ------------------------------------------------------------------ a run and its lanes
  function newRun(threadId, runId, how) {
    const run = {
      threadId, runId, how, status: "running", t0: null, t1: null, events: [], problems: 0,
      lanes: new Map(), items: new Map(), open: new Set(), interrupts: [], pending: [],
      answers: new Map(), results: new Map(), state: clone(S.state), error: null, ended: false, lastId: null,
    };
    run.lanes.set("", { key: "", id: null, name: "run", parent: null, start: null, end: null, status: "running", items: [] });
    S.runs.push(run);
    S.view = run;
    return run;
  }
  function laneOf(run, e, at) {
    const key = e.subagentRunId === undefined ? "" : e.subagentRunId;
    if (!run.lanes.has(key)) { // tagged before (or without) SUBAGENT_STARTED: a continued invocation
      const lane = { key, id: key, name: "(continued)", parent: "", start: at, end: null, status: "running", items: [] };
      run.lanes.set(key, lane);
      run.lanes.get("").items.push({ kind: "lane", key });
    }
    return run.lanes.get(key);
  }

  // A light verification of what arrives: the structure rules a reader can check alone.
  function check(run, e) {
    const problems = [];
    if (!e || typeof e.type !== "string") return ["not an event (no type)"];
    if (!KNOWN.has(e.type)) problems.push(`unknown event type ${e.type}`);
    if (run.events.length === 1 && e.type !== "RUN_STARTED" && e.type !== "RUN_ERROR") problems.push("the first event is not RUN_STARTED");
    if (run.ended && e.type !== "RUN_STARTED") problems.push("an event after the terminal event");
    if (e.subagentRunId === null) problems.push("subagentRunId: null (omit it instead)");
    for (const k of Object.keys(e)) if (e[k] === null && !["value", "snapshot", "event"].includes(k)) problems.push(`${k}: null`);
    const id = e.messageId || e.toolCallId;
    if (/_(CONTENT|ARGS|END)$/.test(e.type) && e.type !== "REASONING_END" && id && !run.open.has(id)) problems.push(`${e.type} for ${id}, which is not open`);
    if (/_START$/.test(e.type) && e.type !== "REASONING_START" && id && run.open.has(id)) problems.push(`${id} is already open`);
    if (e.type === "RUN_FINISHED" && run.open.size) problems.push(`still open at RUN_FINISHED: ${[...run.open].join(", ")}`);
    return problems;
  }

  function item(run, lane, it) { lane.items.push(it); return it; }

  function handle(run, e) {
    const at = typeof e.timestamp === "number" ? e.timestamp : Date.now();
    if (run.t0 === null) run.t0 = at;
    run.events.push(e);
    const problems = check(run, e);
    if (problems.length) run.problems += problems.length;
    addEventRow(run, e, problems);
    const root = run.lanes.get("");
    if (root.start === null) root.start = at;
    const lane = laneOf(run, e, at);
    const isLive = run === S.live || run.adopt;
    switch (e.type) {
      case "RUN_STARTED":
        if (run.ended) { run.ended = false; run.status = "running"; }
        if (e.input && run.adopt) {
          if (e.input.messages) S.messages = clone(e.input.messages);
          if (e.input.state !== undefined) { run.state = clone(e.input.state); S.state = clone(run.state); }
        }
        break;
      case "SUBAGENT_STARTED": {
        const parent = e.parentSubagentRunId === undefined ? "" : e.parentSubagentRunId;
        const old = run.lanes.get(e.subagentRunId);
        const sub = old && old.name === "(continued)" ? old : { key: e.subagentRunId, id: e.subagentRunId, items: [] };
        Object.assign(sub, { name: e.name, description: e.description, parent, start: at, end: null, status: "running" });
        run.lanes.set(e.subagentRunId, sub);
        if (!old) (run.lanes.get(parent) || root).items.push({ kind: "lane", key: e.subagentRunId });
        break;
      }
      case "SUBAGENT_FINISHED": {
        const suspended = e.outcome && e.outcome.type === "suspended";
        lane.end = at; lane.status = suspended ? "suspended" : "finished";
        item(run, lane, { kind: "outcome", cls: suspended ? "" : "good", label: suspended ? "suspended" : "finished",
          text: suspended ? "waiting on " + (e.outcome.interruptIds || []).join(", ") : e.result === undefined ? `in ${secs(at - lane.start)}` : brief(e.result, 200) });
        break;
      }
      case "SUBAGENT_ERROR":
        lane.end = at; lane.status = "error";
        item(run, lane, { kind: "outcome", cls: "bad", label: "error", text: e.message + (e.code ? ` (${e.code})` : "") });
        break;
      case "STEP_STARTED":
        item(run, lane, { kind: "step", name: e.stepName, start: at, end: null });
        break;
      case "STEP_FINISHED": {
        const step = [...lane.items].reverse().find((i) => i.kind === "step" && i.name === e.stepName && i.end === null);
        if (step) step.end = at;
        break;
      }
      case "TEXT_MESSAGE_START": case "TEXT_MESSAGE_CHUNK": case "REASONING_MESSAGE_START": case "REASONING_MESSAGE_CHUNK": {
        const reasoning = e.type.startsWith("REASONING");
        if (e.type.endsWith("CHUNK") && run.items.has(e.messageId)) { textDelta(run, e, isLive); break; }
        const it = item(run, lane, { kind: reasoning ? "reasoning" : "text", id: e.messageId, text: "", start: at });
        run.items.set(e.messageId, it);
        if (!e.type.endsWith("CHUNK")) run.open.add(e.messageId);
        if (isLive) {
          const m = { id: e.messageId, role: reasoning ? "reasoning" : e.role || "assistant", content: "" };
          if (e.subagentRunId !== undefined) m.subagentRunId = e.subagentRunId;
          S.messages.push(m);
        }
        if (e.delta) textDelta(run, e, isLive);
        break;
      }
      case "TEXT_MESSAGE_CONTENT": case "REASONING_MESSAGE_CONTENT":
        textDelta(run, e, isLive);
        break;
      case "TEXT_MESSAGE_END": case "REASONING_MESSAGE_END": {
        run.open.delete(e.messageId);
        const it = run.items.get(e.messageId);
        if (it) it.end = at;
        break;
      }
      case "TOOL_CALL_START": case "TOOL_CALL_CHUNK": {
        if (e.type === "TOOL_CALL_CHUNK" && run.items.has(e.toolCallId)) { argsDelta(run, e, isLive); break; }
        const it = item(run, lane, { kind: "tool", id: e.toolCallId, name: e.toolCallName, args: "", result: undefined, start: at });
        run.items.set(e.toolCallId, it);
        if (e.type === "TOOL_CALL_START") run.open.add(e.toolCallId);
        if (isLive) {
          const call = { id: e.toolCallId, type: "function", function: { name: e.toolCallName, arguments: "" } };
          let host = e.parentMessageId && S.messages.find((m) => m.id === e.parentMessageId && m.role === "assistant");
          if (!host) {
            host = { id: e.parentMessageId || e.toolCallId, role: "assistant" };
            if (e.subagentRunId !== undefined) host.subagentRunId = e.subagentRunId;
            S.messages.push(host);
          }
          (host.toolCalls = host.toolCalls || []).push(call);
        }
        if (e.delta) argsDelta(run, e, isLive);
        break;
      }
      case "TOOL_CALL_ARGS":
        argsDelta(run, e, isLive);
        break;
      case "TOOL_CALL_END":
        run.open.delete(e.toolCallId);
        break;
      case "TOOL_CALL_RESULT": {
        const it = run.items.get(e.toolCallId);
        if (it) { it.result = e.content; it.end = at; } else item(run, lane, { kind: "tool", id: e.toolCallId, name: "?", args: "", result: e.content, start: at, end: at });
        if (isLive) {
          const m = { id: e.messageId, role: "tool", toolCallId: e.toolCallId, content: e.content };
          if (e.subagentRunId !== undefined) m.subagentRunId = e.subagentRunId;
          S.messages.push(m);
        }
        break;
      }
      case "STATE_SNAPSHOT": case "STATE_DELTA": {
        const before = run.state === undefined ? {} : run.state;
        try {
          run.state = e.type === "STATE_SNAPSHOT" ? clone(e.snapshot) : applyPatch(before, e.delta);
        } catch (err) {
          addProblem(run, `STATE_DELTA did not apply: ${err.message}`);
          break;
        }
        const paths = diffPaths(before, run.state);
        item(run, lane, { kind: "state", text: e.type === "STATE_SNAPSHOT" ? `snapshot (${paths.size} changed)` : e.delta.map((o) => `${o.op} ${o.path}`).join(", ") });
        logDeltas(run, e);
        if (isLive || run === S.view) { S.state = clone(run.state); S.changed = paths; dirty.state = true; }
        break;
      }
      case "MESSAGES_SNAPSHOT":
        if (isLive) S.messages = clone(e.messages);
        item(run, lane, { kind: "state", text: `messages snapshot (${e.messages.length})` });
        break;
      case "ACTIVITY_SNAPSHOT": case "ACTIVITY_DELTA":
        item(run, lane, { kind: "activity", text: `${e.activityType || ""} ${brief(e.content || e.patch, 160)}` });
        break;
      case "CUSTOM":
        item(run, lane, { kind: "custom", label: String(e.name).split(".").pop().slice(0, 10), text: brief(e.value, 160), title: e.name });
        break;
      case "RUN_FINISHED": {
        run.ended = true; run.t1 = at; root.end = at;
        const o = e.outcome || { type: "success" };
        if (o.type === "interrupt") {
          run.interrupts = o.interrupts || [];
          run.status = "interrupted";
          root.status = "suspended";
          for (const i of run.interrupts) {
            const host = run.lanes.get(i.subagentRunId === undefined ? "" : i.subagentRunId) || root;
            item(run, host, { kind: "interrupt", text: `${i.reason}${i.message ? ": " + i.message : ""}` });
          }
          if (isLive) S.marks.push({ after: lastMessageId(), text: `${run.interrupts.length} interrupt${run.interrupts.length === 1 ? "" : "s"}: answer below`, cls: "warn" });
        } else if (o.type === "cancelled") {
          run.status = "cancelled"; root.status = "error";
        } else {
          run.pending = o.pendingToolCallIds || [];
          run.status = run.pending.length ? "waiting" : "finished";
          root.status = "finished";
        }
        item(run, root, { kind: "outcome", cls: o.type === "cancelled" ? "bad" : o.type === "interrupt" ? "" : "good", label: o.type,
          text: (e.result === undefined ? "" : brief(e.result, 200)) + (run.pending.length ? ` pending: ${run.pending.join(", ")}` : "") +
            (o.type === "interrupt" ? `waiting for ${run.interrupts.length} answer${run.interrupts.length === 1 ? "" : "s"}` : "") });
        break;
      }
      case "RUN_ERROR":
        run.ended = true; run.t1 = at; root.end = at; run.status = "error"; root.status = "error";
        run.error = e.message;
        item(run, root, { kind: "outcome", cls: "bad", label: "error", text: e.message + (e.code ? ` (${e.code})` : "") });
        break;
      default:
        break;
    }
    for (const l of run.lanes.values()) if (l.end === null && run.ended) l.end = at;
    dirty.all = true;
    schedule();
  }
  function textDelta(run, e, isLive) {
    const it = run.items.get(e.messageId);
    if (!it || !e.delta) return;
    it.text += e.delta;
    if (isLive) {
      const m = S.messages.find((x) => x.id === e.messageId);
      if (m) m.content = (m.content || "") + e.delta;
    }
  }
  function argsDelta(run, e, isLive) {
    const it = run.items.get(e.toolCallId);
    if (!it || !e.delta) return;
    it.args += e.delta;
    if (isLive) {
      for (const m of S.messages) for (const c of m.toolCalls || []) if (c.id === e.toolCallId) c.function.arguments += e.delta;
    }
  }

  // ------------------------------------------------------------------ the wire
  async function readSSE(run, response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    const block = (text) => {
      const data = [];
      for (const line of text.split("\n")) {
        if (line.startsWith("data:")) data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        else if (line.startsWith("id:")) run.lastId = line.slice(3).trim();
      }
      if (!data.length) return;
      let e;
      try { e = JSON.parse(data.join("\n")); } catch (err) { addProblem(run, `a frame that is not JSON: ${brief(data.join(" "), 80)}`); return; }
      handle(run, e);
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) { block(buffer.slice(0, cut)); buffer = buffer.slice(cut + 2); }
    }
    if (buffer.trim()) block(buffer);
  }
  async function follow(run, request) {
    setStatus(run);
    const abort = (S.abort = new AbortController());
    $("stop").disabled = false;
    $("send").disabled = true;
    const read = async (url, init) => {
      const response = await fetch(url, { ...init, signal: abort.signal });
      if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
      await readSSE(run, response);
    };
    // With a store every frame has an id: a stream cut before the run's end picks up
    // right after the last event seen (GET …/runs/R?after=<id>); the run went on meanwhile.
    const resumable = () => S.resumable && run.lastId !== null && !run.ended;
    try {
      let next = request;
      for (let tries = 0; ; tries += 1) {
        try {
          await read(next.url, next.init);
        } catch (err) {
          if (err.name === "AbortError" || !resumable() || tries >= 5) throw err;
        }
        if (!resumable() || tries >= 5) break;
        rows.push([run, { type: "(stream cut: resuming)" }, []]);
        await new Promise((done) => setTimeout(done, 150 * (tries + 1)));
        next = {
          url: `${base()}/threads/${encodeURIComponent(run.threadId)}/runs/${encodeURIComponent(run.runId)}?after=${encodeURIComponent(run.lastId)}`,
          init: { headers: { accept: "text/event-stream" } },
        };
      }
      if (!run.ended) { run.status = "error"; run.error = "the stream ended without a terminal event"; addProblem(run, run.error); }
    } catch (err) {
      run.status = err.name === "AbortError" ? "cancelled" : "error";
      run.error = err.name === "AbortError" ? "stopped from the page" : err.message;
      run.lanes.get("").status = "error";
      run.ended = true;
    } finally {
      S.abort = null;
      if (S.live === run) S.live = null;
      run.adopt = false;
      $("stop").disabled = true;
      $("send").disabled = false;
      dirty.all = true; dirty.state = true;
      schedule();
    }
  }

  function startRun(extra = {}) {
    if (S.live) return;
    const runId = uid();
    const input = {
      threadId: S.threadId, runId, state: clone(S.state), messages: clone(S.messages),
      tools: clone(S.tools), context: [], forwardedProps: {}, ...extra,
    };
    const run = newRun(S.threadId, runId, extra.resume ? "resume" : "post");
    run.input = input;
    S.live = run;
    return follow(run, {
      url: S.endpoint,
      init: { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, body: JSON.stringify(input) },
    });
  }

  function openRun(threadId, runId, replay) {
    if (S.live || !threadId || !runId) return;
    S.threadId = threadId;
    S.messages = []; S.state = {};
    const run = newRun(threadId, runId, replay ? "replay" : "join");
    run.adopt = true; // the page takes the thread over: its messages and state come from the run
    S.live = run;
    const url = `${base()}/threads/${encodeURIComponent(threadId)}/runs/${encodeURIComponent(runId)}${replay ? "?after=0" : ""}`;
    return follow(run, { url, init: { headers: { accept: "text/event-stream" } } });
  }

  // ------------------------------------------------------------------ answers
  const lastMessageId = () => (S.messages.length ? S.messages[S.messages.length - 1].id : null);
  function answerInterrupt(run, interrupt, status, payload) {
    const entry = { interruptId: interrupt.id, status };
    if (payload !== undefined) entry.payload = payload;
    run.answers.set(interrupt.id, entry);
    const said = status === "cancelled" ? "dismissed" : payload && payload.approved === true ? "approved" : payload && payload.approved === false ? "denied" : "answered " + brief(payload, 60);
    S.marks.push({ after: lastMessageId(), text: `${interrupt.reason}: ${said}`, cls: "" });
    dirty.all = true; schedule();
    if (run.interrupts.every((i) => run.answers.has(i.id))) startRun({ resume: run.interrupts.map((i) => run.answers.get(i.id)) });
  }
  function answerTool(run, callId, content) {
    run.results.set(callId, content);
    S.messages.push({ id: uid(), role: "tool", toolCallId: callId, content });
    dirty.all = true; schedule();
    if (run.pending.every((c) => run.results.has(c))) startRun();
  }
  const parsed = (text) => { try { return JSON.parse(text); } catch (err) { return text; } };

  // ------------------------------------------------------------------ rendering
  const dirty = { all: true, state: true };
  let frame = 0;
  function schedule() { if (!frame) frame = requestAnimationFrame(paint); }
  function paint() {
    frame = 0;
    if (dirty.all) { renderChat(); renderAsks(); renderHistory(); }
    renderTimeline(); // the bars grow while a run streams
    if (dirty.state) renderState();
    flushEvents();
    dirty.all = false; dirty.state = false;
    if (S.view && !S.view.ended) schedule();
    setStatus(S.view);
  }
  function setStatus(run) {
    const status = run ? run.status : "idle";
    const el = $("run-status");
    el.dataset.runStatus = status;
    el.textContent = status;
    el.title = run && run.error ? run.error : "";
    $("thread-id").textContent = S.threadId;
    $("run-id").textContent = run ? run.runId : "–";
    document.body.dataset.runStatus = status;
  }

  function renderChat() {
    const live = S.live;
    const html = [];
    const marks = (id) => S.marks.filter((k) => k.after === id).map((k) => `<div class="mark ${k.cls}" data-chat-note>${esc(k.text)}</div>`).join("");
    html.push(marks(null));
    for (const m of S.messages) {
      const after = marks(m.id);
      if (m.subagentRunId !== undefined || m.role === "reasoning" || m.role === "activity" || m.role === "system" || m.role === "developer") { html.push(after); continue; }
      const streaming = live && live.open.has(m.id) ? " streaming" : "";
      if (m.role === "user") {
        const text = typeof m.content === "string" ? m.content : (m.content || []).map((p) => p.text || `[${p.type}]`).join(" ");
        html.push(`<div class="msg" data-chat-message data-role="user" data-message-id="${esc(m.id)}">${esc(text)}</div>`);
      } else if (m.role === "assistant") {
        if (m.content) html.push(`<div class="msg${streaming}" data-chat-message data-role="assistant" data-message-id="${esc(m.id)}">${esc(m.content)}</div>`);
        for (const c of m.toolCalls || []) html.push(`<div class="msg" data-role="tool" data-tool-call="${esc(c.id)}"><span class="who">calls</span>${esc(c.function.name)}(${esc(brief(c.function.arguments, 200))})</div>`);
      } else if (m.role === "tool") {
        html.push(`<div class="msg" data-role="tool" data-message-id="${esc(m.id)}"><span class="who">result ${esc(m.toolCallId)}</span>${esc(brief(m.content, 300))}</div>`);
      }
      html.push(after);
    }
    if (!S.messages.length) html.push(`<div class="empty">Send a message to start a run.<br><span class="hint">Each turn is one AG-UI run on thread <code>${esc(S.threadId.slice(0, 8))}…</code>; messages and state carry over.</span></div>`);
    const box = $("messages");
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    box.innerHTML = html.join("");
    if (atBottom) box.scrollTop = box.scrollHeight;
    const subs = S.view ? S.view.lanes.size - 1 : 0;
    $("chat-hint").textContent = subs ? `${subs} subagent${subs === 1 ? "" : "s"} in this run: see the timeline` : "";
  }

  function renderAsks() {
    const run = S.runs[S.runs.length - 1];
    const ints = [];
    const tools = [];
    if (run && run.ended) {
      for (const i of run.interrupts) {
        const done = run.answers.get(i.id);
        ints.push(`<div class="ask${done ? " answered" : ""}" data-interrupt-id="${esc(i.id)}" data-reason="${esc(i.reason)}">
          <div class="title">${esc(i.reason)}${i.message ? ": " + esc(i.message) : ""}</div>
          <div class="meta">interrupt ${esc(i.id)}${i.subagentRunId !== undefined ? " · subagent " + esc(i.subagentRunId) : ""}${i.responseSchema ? " · answer schema " + esc(brief(i.responseSchema, 120)) : ""}</div>
          ${done ? `<div class="meta">answered: ${esc(JSON.stringify(done))}</div>` : `
          <textarea rows="2" data-interrupt-input placeholder="input (JSON or text) for Send input"></textarea>
          <div class="row">
            <button type="button" data-action="approve">Approve</button>
            <button type="button" class="danger" data-action="deny">Deny</button>
            <button type="button" class="ghost" data-action="input">Send input</button>
            <button type="button" class="ghost" data-action="cancel" title="status: cancelled">Dismiss</button>
          </div>`}
        </div>`);
      }
      for (const id of run.pending) {
        const it = run.items.get(id);
        const done = run.results.has(id);
        tools.push(`<div class="ask${done ? " answered" : ""}" data-tool-call-id="${esc(id)}">
          <div class="title">The agent calls your tool <code>${esc(it ? it.name : "?")}</code></div>
          <div class="meta">${esc(id)} · arguments ${esc(brief(it ? it.args : "", 200))}</div>
          ${done ? `<div class="meta">answered: ${esc(run.results.get(id))}</div>` : `
          <textarea rows="2" data-tool-result placeholder='its result, e.g. {"confirmed": true}'></textarea>
          <div class="row"><button type="button" data-action="result">Send result</button></div>`}
        </div>`);
      }
    }
    $("interrupts").innerHTML = ints.join("");
    $("pending-tools").innerHTML = tools.join("");
  }

  function laneHTML(run, lane, span, depth) {
    const start = (lane.start === null ? run.t0 : lane.start) - run.t0;
    const end = (lane.end === null ? (run.ended ? run.t1 : Date.now()) : lane.end) - run.t0;
    const left = (100 * start) / span;
    const width = Math.max(0, (100 * (end - start)) / span);
    // Each tool call of the lane as a darker segment of its bar, from its start to its result.
    const ticks = lane.items.filter((i) => i.kind === "tool" && i.start !== undefined).map((i) => {
      const from = i.start - run.t0;
      const to = (i.end !== undefined ? i.end : run.ended ? run.t1 : Date.now()) - run.t0;
      return `<span class="seg" style="left:${((100 * from) / span).toFixed(2)}%;width:${((100 * Math.max(0, to - from)) / span).toFixed(2)}%" title="${esc(i.name)} · ${secs(to - from)}"></span>`;
    }).join("");
    const attrs = lane.id === null
      ? `data-lane="run" data-run-id="${esc(run.runId)}"`
      : `data-subagent-id="${esc(lane.id)}" data-subagent-name="${esc(lane.name)}" data-parent-subagent-id="${esc(lane.parent || "")}"`;
    const closed = collapsed.has(run.runId + "|" + lane.key) ? " closed" : "";
    const body = lane.items.map((i) => (i.kind === "lane" ? laneHTML(run, run.lanes.get(i.key), span, depth + 1) : itemHTML(run, i))).join("");
    return `<div class="lane${closed}" ${attrs} data-lane-status="${lane.status}" data-key="${esc(lane.key)}">
      <div class="lane-head" style="--label:calc(var(--label-w) - ${depth * 25}px)">
        <div class="lane-title"><span class="caret">▾</span><span class="dot"></span><span class="name">${esc(lane.name)}</span>
          ${lane.id === null ? `<span class="sid" title="run ${esc(run.runId)}">${esc(run.runId)}</span>` : `<span class="sid" title="${esc(lane.id)}${lane.description ? " · " + esc(lane.description) : ""}">${esc(shortId(lane.id, run))}</span>`}
          <span class="dur">${secs(end - start)}</span></div>
        <div class="track"><span class="bar" style="left:${left.toFixed(2)}%;width:${width.toFixed(2)}%"></span>${ticks}</div>
      </div>
      <div class="lane-body">${body || `<div class="item"><span class="kind"></span><span class="what hint">nothing yet</span></div>`}</div>
    </div>`;
  }
  function itemHTML(run, i) {
    const row = (cls, kind, what, extra = "") => `<div class="item ${cls}"${extra}><span class="kind">${esc(kind)}</span><span class="what">${what}</span></div>`;
    switch (i.kind) {
      case "text": return row("text", "says", esc(i.text) + (run.open.has(i.id) ? "▍" : ""), ` data-message-id="${esc(i.id)}"`);
      case "reasoning": return row("reasoning", "thinks", esc(i.text));
      case "tool": {
        const result = i.result !== undefined ? `<span class="res"> → ${esc(brief(i.result, 220))}</span>`
          : run.pending.includes(i.id) ? `<span class="res pending"> → your page's tool: answer it in the chat</span>`
          : run.open.has(i.id) || !run.ended ? `<span class="res pending"> …</span>` : "";
        return row("tool", "tool", `<span class="fn">${esc(i.name)}</span>(${esc(brief(i.args, 220))})${result}`, ` data-tool-call-id="${esc(i.id)}"`);
      }
      case "step": return row("step", "step", `▸ ${esc(i.name)}${i.end !== null ? ` · ${secs(i.end - i.start)}` : " …"}`);
      case "state": return row("state", "state", esc(i.text));
      case "activity": return row("state", "activity", esc(i.text));
      case "custom": return row("step", i.label || "custom", esc(i.text), ` title="CUSTOM ${esc(i.title)}"`);
      case "interrupt": return row("interrupt", "interrupt", esc(i.text));
      case "outcome": return row(`outcome ${i.cls}`, i.label, esc(i.text));
      default: return "";
    }
  }
  const collapsed = new Set();
  let shown = 0;
  function renderTimeline() {
    const lanes = $("lanes");
    if (!S.view) { lanes.innerHTML = `<div class="empty">No run yet. Each run of the thread appears here, one lane per subagent invocation, live.</div>`; return; }
    // Every run of the thread, in order, each on its own time axis: a resume continues the story.
    const runs = S.runs.filter((r) => r.threadId === S.view.threadId);
    const blocks = runs.map((run) => {
      if (run.t0 === null) return `<div class="run-block" data-run-block="${esc(run.runId)}"><div class="empty">Waiting for the first event of run ${esc(run.runId)}…</div></div>`;
      const span = Math.max(1, (run.ended ? run.t1 : Date.now()) - run.t0);
      const axis = [0, 0.25, 0.5, 0.75, 1].map((f) => `<span style="left:${f * 100}%">${secs(f * span)}</span>`).join("");
      const current = run === S.view ? " current" : "";
      return `<div class="run-block${current}" data-run-block="${esc(run.runId)}" data-run-block-status="${esc(run.status)}"><div class="axis">${axis}</div>${laneHTML(run, run.lanes.get(""), span, 0)}</div>`;
    });
    const scroll = lanes.scrollTop;
    lanes.innerHTML = blocks.join("");
    if (runs.length !== shown) { // a new run: bring it into view
      shown = runs.length;
      const last = lanes.lastElementChild;
      lanes.scrollTop = last ? last.offsetTop - lanes.offsetTop - 4 : 0;
    } else lanes.scrollTop = scroll;
  }

  function jsonHTML(v, path, ind) {
    const mark = (inner) => (S.changed.has(path) ? `<span class="changed" data-changed-path="${esc(path)}">${inner}</span>` : inner);
    const pad = "  ".repeat(ind);
    if (v === null) return mark(`<span class="b">null</span>`);
    if (Array.isArray(v)) {
      if (!v.length) return mark("[]");
      return mark("[\n" + v.map((x, i) => pad + "  " + jsonHTML(x, `${path}/${i}`, ind + 1)).join(",\n") + "\n" + pad + "]");
    }
    if (typeof v === "object") {
      const keys = Object.keys(v);
      if (!keys.length) return mark("{}");
      return mark("{\n" + keys.map((k) => {
        const p = `${path}/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`;
        const inner = `<span class="k">${esc(JSON.stringify(k))}</span>: ${jsonHTML(v[k], p, ind + 1)}`;
        return pad + "  " + (S.changed.has(p) ? `<span class="changed" data-changed-path="${esc(p)}">${inner}</span>` : inner);
      }).join(",\n") + "\n" + pad + "}");
    }
    const cls = typeof v === "string" ? "s" : typeof v === "number" ? "n" : "b";
    return mark(`<span class="${cls}">${esc(JSON.stringify(v))}</span>`);
  }
  function renderState() {
    const state = S.view && S.view !== S.live && S.view.state !== undefined && !S.live ? S.view.state : S.state;
    $("state").innerHTML = jsonHTML(state === undefined ? {} : state, "", 0);
  }
  function logDeltas(run, e) {
    const list = $("deltas");
    const ops = e.type === "STATE_SNAPSHOT" ? [{ op: "snapshot", path: "", value: e.snapshot }] : e.delta;
    for (const o of ops) {
      const li = document.createElement("li");
      li.innerHTML = `<span class="op op-${esc(o.op)}">${esc(o.op)}</span> ${esc(o.path)}${o.from ? " ← " + esc(o.from) : ""} ${o.value !== undefined ? esc(brief(o.value, 100)) : ""}${e.subagentRunId !== undefined ? ` <span class="run-id" title="${esc(e.subagentRunId)}">· ${esc(shortId(e.subagentRunId, run))}</span>` : ""}`;
      list.prepend(li);
    }
  }

  const rows = [];
  function addEventRow(run, e, problems) { rows.push([run, e, problems]); }
  function addProblem(run, text) { run.problems += 1; rows.push([run, { type: "(stream)" }, [text]]); schedule(); }
  function flushEvents() {
    if (!rows.length) return;
    const list = $("events");
    const frag = document.createDocumentFragment();
    for (const [run, e, problems] of rows.splice(0)) {
      const li = document.createElement("li");
      li.dataset.eventType = e.type;
      if (e.type.startsWith("(")) li.className = "note";
      li.dataset.runId = run.runId;
      if (/_(CONTENT|ARGS)$/.test(e.type) || /CHUNK$/.test(e.type)) li.classList.add("delta");
      if (problems.length) li.classList.add("bad");
      const who = e.subagentRunId !== undefined ? ` <span class="who" title="${esc(e.subagentRunId)}">${esc(shortId(e.subagentRunId, run))}</span>` : "";
      const n = run.events.indexOf(e) + 1;
      li.innerHTML = `<span class="n">${n || (problems.length ? "!" : "↻")}</span><span class="t">${esc(e.type)}</span>${who} ${esc(brief(e.delta || e.stepName || e.toolCallName || e.name || e.message || "", 60))}` +
        problems.map((p) => `<span class="problem">✗ ${esc(p)}</span>`).join("") + `<pre>${esc(JSON.stringify(e, null, 2))}</pre>`;
      frag.appendChild(li);
    }
    list.appendChild(frag);
    const total = S.runs.reduce((n, r) => n + r.events.length, 0);
    const bad = S.runs.reduce((n, r) => n + r.problems, 0);
    $("event-count").textContent = total;
    const verify = $("verify");
    verify.dataset.verify = bad ? "problems" : "ok";
    verify.textContent = bad ? `${bad} problem${bad === 1 ? "" : "s"} seen` : `${total} events, no problems seen`;
  }
  function renderHistory() {
    $("history").innerHTML = S.runs.map((r, n) => `<li><a data-show="${n}">${esc(r.runId.slice(0, 18))}</a> <span>${esc(r.how)}</span><span class="s">${esc(r.status)}</span></li>`).reverse().join("");
  }

  // ------------------------------------------------------------------ wiring
  function setTools(text) {
    try {
      const tools = JSON.parse(text);
      if (!Array.isArray(tools) || tools.some((t) => !t || typeof t.name !== "string")) throw new Error("a JSON array of {name, description, parameters}");
      S.tools = tools;
      $("tool-count").textContent = tools.length;
      $("tools-note").textContent = tools.length ? `offering ${tools.map((t) => t.name).join(", ")}` : "offering none";
    } catch (err) {
      $("tools-note").textContent = "not used: " + err.message;
    }
  }
  function send() {
    const box = $("prompt");
    const text = box.value.trim();
    if (!text || S.live) return;
    box.value = "";
    S.messages.push({ id: uid(), role: "user", content: text });
    dirty.all = true;
    startRun();
  }
  $("composer").addEventListener("submit", (ev) => { ev.preventDefault(); send(); });
  $("prompt").addEventListener("keydown", (ev) => { if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); send(); } });
  $("stop").addEventListener("click", async () => {
    const run = S.live;
    if (!run) return;
    if (S.resumable && run.how !== "join" && run.how !== "replay") { // ask the owner to cancel: the run ends with the cancelled outcome
      try {
        const r = await fetch(`${base()}/threads/${encodeURIComponent(run.threadId)}/runs/${encodeURIComponent(run.runId)}/cancel`, { method: "POST", headers: { "content-type": "application/json" } });
        if (r.ok) return;
      } catch (err) { /* fall through to aborting the stream */ }
    }
    if (S.abort) S.abort.abort();
  });
  $("new-thread").addEventListener("click", () => {
    if (S.live) return;
    S.threadId = uid(); S.messages = []; S.state = {}; S.changed = new Set(); S.view = null; S.marks = [];
    $("deltas").innerHTML = "";
    dirty.all = true; dirty.state = true; schedule();
  });
  $("endpoint").value = S.endpoint;
  $("endpoint").addEventListener("change", (ev) => { S.endpoint = ev.target.value.trim() || S.endpoint; probe(); });
  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      for (const t of document.querySelectorAll(".tab")) t.classList.toggle("on", t === tab);
      for (const p of document.querySelectorAll(".tab-body")) p.classList.toggle("on", p.dataset.pane === tab.dataset.tab);
    });
  }
  $("hide-deltas").addEventListener("change", (ev) => $("events").classList.toggle("hide-deltas", ev.target.checked));
  $("events").classList.add("hide-deltas");
  $("events").addEventListener("click", (ev) => { const li = ev.target.closest("li"); if (li) li.classList.toggle("open"); });
  $("lanes").addEventListener("click", (ev) => {
    const head = ev.target.closest(".lane-head");
    if (!head || !S.view) return;
    const key = S.view.runId + "|" + head.parentElement.dataset.key;
    if (collapsed.has(key)) collapsed.delete(key); else collapsed.add(key);
    schedule();
  });
  $("history").addEventListener("click", (ev) => {
    const a = ev.target.closest("[data-show]");
    if (!a) return;
    S.view = S.runs[Number(a.dataset.show)];
    dirty.all = true; dirty.state = true; schedule();
  });
  $("tools").value = JSON.stringify(S.tools, null, 2);
  $("tools").placeholder = '[{"name": "confirm", "description": "Ask the user yes or no", "parameters": {"type": "object", "properties": {"question": {"type": "string"}}}}]';
  $("tools-save").addEventListener("click", () => setTools($("tools").value));
  $("asks").addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-action]");
    if (!button || S.live) return;
    const run = S.runs[S.runs.length - 1];
    const card = button.closest(".ask");
    const action = button.dataset.action;
    if (card.dataset.interruptId !== undefined) {
      const interrupt = run.interrupts.find((i) => i.id === card.dataset.interruptId);
      const text = card.querySelector("textarea").value.trim();
      if (action === "approve") answerInterrupt(run, interrupt, "resolved", { approved: true });
      else if (action === "deny") answerInterrupt(run, interrupt, "resolved", { approved: false });
      else if (action === "input") answerInterrupt(run, interrupt, "resolved", text ? parsed(text) : null);
      else if (action === "cancel") answerInterrupt(run, interrupt, "cancelled");
    } else if (card.dataset.toolCallId !== undefined && action === "result") {
      answerTool(run, card.dataset.toolCallId, card.querySelector("textarea").value);
    }
  });
  $("join").addEventListener("click", () => openRun($("open-thread").value.trim(), $("open-run").value.trim(), false));
  $("replay").addEventListener("click", () => openRun($("open-thread").value.trim(), $("open-run").value.trim(), true));

  async function probe() {
    try {
      const r = await fetch(`${base()}/capabilities`, { headers: { accept: "application/json" } });
      const caps = r.ok ? await r.json() : {};
      S.resumable = Boolean(caps.transport && caps.transport.resumable);
      const name = caps.identity && caps.identity.name;
      if (name) document.title = `${name} · ambient_runs viewer`;
    } catch (err) {
      S.resumable = false;
    }
    $("open-note").textContent = S.resumable ? "this app keeps its runs in a store" : "this app has no store: its runs cannot be opened by id";
    for (const id of ["join", "replay"]) $(id).disabled = !S.resumable;
  }
  window.ambientRunsViewer = S; // for the curious, and for tests: the page's model
  probe().then(() => {
    if (params.get("thread") && params.get("run")) openRun(params.get("thread"), params.get("run"), params.get("replay") !== null);
  });
  schedule();
})();
