// verify.mjs: run AG-UI event streams through the REAL @ag-ui/client@1.0.0 inbound pipeline.
//
// Input (stdin): a JSON array of streams. A stream is either
//   - an array of wire-form events (camelCase dicts, exactly as they would arrive off SSE), or
//   - an object {"events": [...], "threadId"?, "initialMessages"?, "initialState"?,
//     "runAgent"?: {runId?, tools?, context?, forwardedProps?, resume?}} when the client-side
//     baseline matters (e.g. STATE_DELTA against a known state, or messages already on the thread).
// Output (stdout): a JSON array with one entry per stream, in order:
//   {"ok", "error", "errorName", "messages", "state", "pendingInterrupts", "runFinished",
//    "runErrors", "warnings", "consoleErrors"}
// stdout carries nothing but that JSON: every console.* call is captured per stream.
//
// Default mode = the full pipeline, exactly as an application drives it. Each stream gets a fresh
// `ReplayAgent` (a subclass of the client's own AbstractAgent whose run() returns an rxjs
// Observable emitting the given events, then completing) and we `await agent.runAgent()`.
// AbstractAgent.runAgent (client src/agent/agent.ts) composes, in this order:
//   0. onInitialize: the pending-interrupt/resume gate and onRunInitialized subscribers.
//   1. The middleware chain, with the always-on CompatibilityBoundary innermost, closest to
//      run(): THINKING_* -> REASONING_*, the tolerated legacy nulls (parentMessageId on
//      TOOL_CALL_START/CHUNK, RUN_FINISHED.outcome, rawEvent, result, ...) -> absent, each with
//      a console.warn, and 0.x binary content parts -> media parts.
//   2. enforceEvents: drop events of unknown type, strip unknown properties and unrecognised
//      union members (each with a console.warn), then the zod schema parse of
//      @ag-ui/core/schemas; a malformed known field (e.g. a null in an optional slot) throws a
//      ZodError and fails the run.
//   3. transformChunks: expand TEXT_MESSAGE_CHUNK / TOOL_CALL_CHUNK / REASONING_MESSAGE_CHUNK
//      into START/CONTENT|ARGS/END, per attribution lane.
//   4. verifyEvents: the sequencing rules (run lifecycle, open/close pairing, steps per owner,
//      reasoning spans/messages, subagent lifecycle, attribution consistency, null tags).
//   5. defaultApplyEvents + processApplyEvents: the reducer that builds agent.messages and
//      agent.state, fires the subscribers and sets agent.pendingInterrupts.
// Any error in 0-5 makes runAgent() reject (after onRunFailed subscribers and a
// console.error("Agent execution failed:", err)); we report its message as `error`. A stream
// carrying RUN_ERROR is well formed: runAgent() resolves and the event lands in `runErrors`.
//
// Events are delivered one per macrotask (setImmediate), like a slow network, so each event is
// fully reduced before the next one arrives and `messages`/`state` after a failure reflect every
// event before the failing one. `--sync` emits the whole stream synchronously instead (as when
// many SSE frames arrive in one network chunk); a failing stream may then show fewer applied
// events, because the error overtakes the reducer's async queue.
//
// `--verify-only` runs just stages 1-4 using the client's exported building blocks
// (CompatibilityBoundary, enforceEvents, transformChunks, verifyEvents) with no reducer;
// the entry then carries `events` (the expanded, verified stream) and `messages`/`state` are null.
// It is a cross-check, not the contract: the default full pipeline is what real clients run.

import { format } from "node:util";
import {
  AbstractAgent,
  CompatibilityBoundary,
  enforceEvents,
  transformChunks,
  verifyEvents,
} from "@ag-ui/client";
import { Observable, from, lastValueFrom } from "rxjs";
import { toArray } from "rxjs/operators";

// The warnings are part of the observable behaviour: never let the environment silence them.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

const args = new Set(process.argv.slice(2));
const VERIFY_ONLY = args.has("--verify-only");
const SYNC = args.has("--sync");

// ---- console capture -------------------------------------------------------------------------
let sink = { warnings: [], consoleErrors: [] };
// Errors are rendered as "Name: message" (no stack), so the texts are stable and comparable.
const plain = (item) => (item instanceof Error ? `${item.name}: ${item.message}` : item);
const capture = (bucket) => (...items) => {
  sink[bucket].push(format(...items.map(plain)));
};
console.warn = capture("warnings");
console.error = capture("consoleErrors");
console.log = capture("warnings");
console.info = capture("warnings");
console.debug = capture("warnings");
// A stray rejection from a background task (e.g. a void-ed onFinalize) must not kill the batch.
process.on("unhandledRejection", (reason) => {
  sink.consoleErrors.push(`unhandledRejection: ${format(reason)}`);
});

// ---- the agent -------------------------------------------------------------------------------
const nextTick = () => new Promise((resolve) => setImmediate(resolve));

function replay(events) {
  if (SYNC) return from(events);
  return new Observable((subscriber) => {
    let cancelled = false;
    (async () => {
      for (const event of events) {
        await nextTick();
        if (cancelled) return;
        subscriber.next(event);
      }
      await nextTick();
      if (!cancelled) subscriber.complete();
    })();
    return () => {
      cancelled = true;
    };
  });
}

class ReplayAgent extends AbstractAgent {
  // Set right after construction; run() is only called from runAgent().
  events = [];

  run() {
    return replay(this.events);
  }
}

function normalise(stream) {
  if (Array.isArray(stream)) return { events: stream };
  if (stream && typeof stream === "object" && Array.isArray(stream.events)) return stream;
  throw new Error("each stream must be an array of events or an object with an 'events' array");
}

function errorFields(err) {
  if (err instanceof Error) return { error: err.message, errorName: err.name };
  return { error: format(err), errorName: null };
}

async function runFull(spec) {
  const threadId =
    spec.threadId ??
    spec.events.find((e) => e && e.type === "RUN_STARTED" && typeof e.threadId === "string")
      ?.threadId;
  const agent = new ReplayAgent({
    threadId,
    initialMessages: spec.initialMessages,
    initialState: spec.initialState,
  });
  agent.events = spec.events;
  const runFinished = [];
  const runErrors = [];
  const subscriber = {
    onRunFinishedEvent: ({ outcome, result, pendingToolCallIds, interrupts }) => {
      runFinished.push({ outcome, result, pendingToolCallIds, interrupts });
    },
    onRunErrorEvent: ({ event }) => {
      runErrors.push(event);
    },
  };
  const entry = { ok: true, error: null, errorName: null };
  try {
    await agent.runAgent(spec.runAgent ?? {}, subscriber);
  } catch (err) {
    Object.assign(entry, { ok: false }, errorFields(err));
  }
  return {
    ...entry,
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts,
    runFinished,
    runErrors,
  };
}

async function runVerifyOnly(spec) {
  const input = {
    threadId: spec.threadId ?? "verify-only",
    runId: spec.runAgent?.runId ?? "verify-only",
    messages: structuredClone(spec.initialMessages ?? []),
    state: structuredClone(spec.initialState ?? {}),
    tools: [],
    context: [],
    forwardedProps: {},
  };
  const next = { run: () => from(spec.events) };
  const entry = { ok: true, error: null, errorName: null, events: null };
  try {
    const source$ = new CompatibilityBoundary().run(input, next);
    entry.events = await lastValueFrom(
      source$.pipe(enforceEvents(), transformChunks(), verifyEvents(), toArray()),
    );
  } catch (err) {
    Object.assign(entry, { ok: false }, errorFields(err));
  }
  return { ...entry, messages: null, state: null, runErrors: [] };
}

// ---- main ------------------------------------------------------------------------------------
async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function main() {
  const streams = JSON.parse(await readStdin());
  if (!Array.isArray(streams)) throw new Error("stdin must hold a JSON array of streams");
  const results = [];
  for (const raw of streams) {
    sink = { warnings: [], consoleErrors: [] };
    let result;
    try {
      const spec = normalise(raw);
      result = VERIFY_ONLY ? await runVerifyOnly(spec) : await runFull(spec);
      // Let void-ed background work (onFinalize) settle so its output lands on this stream.
      await nextTick();
    } catch (err) {
      result = { ok: false, ...errorFields(err), messages: null, state: null };
    }
    results.push({ ...result, warnings: sink.warnings, consoleErrors: sink.consoleErrors });
  }
  process.stdout.write(JSON.stringify(results));
}

main().catch((err) => {
  process.stderr.write(`verify.mjs: ${err && err.stack ? err.stack : String(err)}\n`);
  process.exitCode = 2;
});
