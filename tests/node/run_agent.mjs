// run_agent.mjs: drive a live AG-UI endpoint with the REAL @ag-ui/client@1.0.0 HttpAgent.
//
// Input (stdin), one JSON object:
//   {"url": "http://127.0.0.1:PORT/path",
//    "threadId"?, "initialMessages"?, "initialState"?, "headers"?,   // agent-level defaults
//    "runs": [{"input": {threadId?, runId?, messages?, state?, tools?, context?,
//                        forwardedProps?, resume?},
//              "abortAfterEvents": N | null, "headers": {...},
//              "answerTools": {toolName: content, ...},
//              "url"?: "http://...",                       // this run only: another server
//              "answerInterrupts"?: {status, payload?}}]}  // resume = buildResumeArray(...)
// ONE HttpAgent is built from the top-level fields, falling back to the first run's
// input.threadId / input.messages / input.state; the runs then go in order through
// `agent.runAgent({runId, tools, context, forwardedProps, resume})`, so messages, state and
// pendingInterrupts carry over between runs exactly as they do in an application. A later run's
// input.messages / input.state / input.threadId, when given, replace the agent's own first
// (setMessages / setState / threadId), i.e. they model the application editing the thread.
// Per-run `headers` are merged over the agent-level ones for that run only; a per-run `url` sends
// that run to another server (a second worker), the same agent (messages, pendingInterrupts) kept.
// `answerInterrupts` answers every interrupt the agent holds with that one response, through the
// client's own `buildResumeArray(agent.pendingInterrupts, {[id]: response})`: the run's
// `resume` is then exactly what the client builds (the request records it).
// `answerTools` plays the application's frontend tools: after the run, each pending tool call
// (onRunFinishedEvent's pendingToolCallIds) whose tool is named there is "executed": a tool
// message {id: "<toolCallId>-result", role: "tool", toolCallId, content} is appended with
// agent.addMessage (content: the string given, or JSON.stringify of any other value), so the
// next run sends it. Calls to tools not named there stay unanswered.
//
// HttpAgent POSTs the RunAgentInput that prepareRunAgentInput builds (threadId, runId,
// protocolVersion, tools, context, forwardedProps, state, messages minus activity messages,
// plus `resume` when given) with `Accept: text/event-stream`; we record that request too.
//
// Output (stdout), one JSON object: {"runs": [...], "messages", "state", "pendingInterrupts"}
// with, per run:
//   events           every event off the transport, as parsed (before the compatibility
//                    boundary, enforcement, chunk expansion and verification); on abort this
//                    includes the RUN_ERROR{code:"abort"} the client synthesizes
//   appliedEvents    what subscribers saw via onEvent (after the whole inbound pipeline)
//   error, errorName, errorStatus, errorPayload
//                    runAgent() rejection (status/payload are set for HTTP errors)
//   runFailed        the error message passed to onRunFailed, if it fired
//   runFinished      [{outcome, result, pendingToolCallIds, interrupts}] from onRunFinishedEvent
//   runErrors        RUN_ERROR events from onRunErrorEvent
//   result, newMessages   runAgent()'s resolved value
//   messages, state, pendingInterrupts   the agent after the run
//   request          {url, method, headers, body} as sent
//   aborted          whether abortAfterEvents fired
//   executedTools    [{toolCallId, name, arguments, content}] answered through answerTools
//                    (arguments: the call's argument text, JSON-parsed when it parses)
//   warnings, consoleErrors   captured console output
// stdout carries nothing but that JSON.

import { format } from "node:util";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";
import { tap } from "rxjs/operators";

delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

let sink = { warnings: [], consoleErrors: [] };
const plain = (item) => (item instanceof Error ? `${item.name}: ${item.message}` : item);
const capture = (bucket) => (...items) => {
  sink[bucket].push(format(...items.map(plain)));
};
console.warn = capture("warnings");
console.error = capture("consoleErrors");
console.log = capture("warnings");
console.info = capture("warnings");
console.debug = capture("warnings");
process.on("unhandledRejection", (reason) => {
  sink.consoleErrors.push(`unhandledRejection: ${format(plain(reason))}`);
});

/** JSON-safe deep copy (drops undefined, renders DOMException rawEvents as {}). */
const jsonCopy = (value) => (value === undefined ? null : JSON.parse(JSON.stringify(value)));

class RecordingHttpAgent extends HttpAgent {
  recorder = null;

  requestInit(input) {
    const init = super.requestInit(input);
    if (this.recorder) {
      this.recorder.request = {
        url: this.url,
        method: init.method,
        headers: init.headers,
        body: typeof init.body === "string" ? JSON.parse(init.body) : null,
      };
    }
    return init;
  }

  run(input) {
    const recorder = this.recorder;
    return super.run(input).pipe(
      tap((event) => {
        if (!recorder) return;
        recorder.events.push(jsonCopy(event));
        const limit = recorder.abortAfterEvents;
        if (limit != null && !recorder.aborted && recorder.events.length >= limit) {
          recorder.aborted = true;
          this.abortRun();
        }
      }),
    );
  }
}

function errorFields(err) {
  if (err instanceof Error) {
    return {
      error: err.message,
      errorName: err.name,
      errorStatus: err.status ?? null,
      errorPayload: err.payload === undefined ? null : err.payload,
    };
  }
  return { error: format(err), errorName: null, errorStatus: null, errorPayload: null };
}

/** Run the application's side of frontend tools: answer each pending call named in `answers`. */
function answerFrontendTools(agent, runFinished, answers) {
  const executed = [];
  const last = runFinished[runFinished.length - 1];
  if (!last || last.outcome !== "success") return executed;
  const calls = new Map();
  for (const message of agent.messages) {
    if (message.role !== "assistant") continue;
    for (const call of message.toolCalls ?? []) calls.set(call.id, call);
  }
  for (const toolCallId of last.pendingToolCallIds ?? []) {
    const call = calls.get(toolCallId);
    if (!call || !Object.hasOwn(answers, call.function.name)) continue;
    const answer = answers[call.function.name];
    const content = typeof answer === "string" ? answer : JSON.stringify(answer);
    let args = call.function.arguments;
    try {
      args = JSON.parse(args);
    } catch {
      // not JSON: report the text as it is
    }
    agent.addMessage({ id: `${toolCallId}-result`, role: "tool", toolCallId, content });
    executed.push({ toolCallId, name: call.function.name, arguments: args, content });
  }
  return executed;
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function main() {
  const spec = JSON.parse(await readStdin());
  if (!spec || typeof spec.url !== "string" || !Array.isArray(spec.runs)) {
    throw new Error('stdin must hold {"url": string, "runs": [...]}');
  }
  const first = spec.runs[0]?.input ?? {};
  const baseHeaders = spec.headers ?? {};
  const agent = new RecordingHttpAgent({
    url: spec.url,
    threadId: spec.threadId ?? first.threadId,
    initialMessages: spec.initialMessages ?? first.messages,
    initialState: spec.initialState ?? first.state,
    headers: baseHeaders,
  });

  const runs = [];
  for (const [index, run] of spec.runs.entries()) {
    sink = { warnings: [], consoleErrors: [] };
    const input = run.input ?? {};
    if (index > 0) {
      if (input.threadId !== undefined) agent.threadId = input.threadId;
      if (input.messages !== undefined) agent.setMessages(input.messages);
      if (input.state !== undefined) agent.setState(input.state);
    }
    agent.headers = { ...baseHeaders, ...(run.headers ?? {}) };
    agent.url = run.url ?? spec.url;
    const recorder = {
      events: [],
      request: null,
      aborted: false,
      abortAfterEvents: run.abortAfterEvents ?? null,
    };
    agent.recorder = recorder;

    const appliedEvents = [];
    const runFinished = [];
    const runErrors = [];
    let runFailed = null;
    const subscriber = {
      onEvent: ({ event }) => {
        appliedEvents.push(jsonCopy(event));
      },
      onRunFinishedEvent: ({ outcome, result, pendingToolCallIds, interrupts }) => {
        runFinished.push(jsonCopy({ outcome, result, pendingToolCallIds, interrupts }));
      },
      onRunErrorEvent: ({ event }) => {
        runErrors.push(jsonCopy(event));
      },
      onRunFailed: ({ error }) => {
        runFailed = error instanceof Error ? error.message : format(error);
      },
    };

    const parameters = {};
    for (const key of ["runId", "tools", "context", "forwardedProps", "resume"]) {
      if (input[key] !== undefined) parameters[key] = input[key];
    }
    if (run.answerInterrupts !== undefined) {
      const responses = Object.fromEntries(
        agent.pendingInterrupts.map((interrupt) => [interrupt.id, run.answerInterrupts]),
      );
      parameters.resume = buildResumeArray(agent.pendingInterrupts, responses);
    }

    const entry = {
      error: null,
      errorName: null,
      errorStatus: null,
      errorPayload: null,
      result: null,
      newMessages: null,
    };
    try {
      const { result, newMessages } = await agent.runAgent(parameters, subscriber);
      entry.result = jsonCopy(result);
      entry.newMessages = jsonCopy(newMessages);
    } catch (err) {
      Object.assign(entry, errorFields(err));
    }
    // Let void-ed background work (onFinalize, setMessages notifications) settle.
    await new Promise((resolve) => setImmediate(resolve));
    agent.recorder = null;
    const executedTools = answerFrontendTools(agent, runFinished, run.answerTools ?? {});
    await new Promise((resolve) => setImmediate(resolve));

    runs.push({
      events: recorder.events,
      appliedEvents,
      ...entry,
      runFailed,
      runFinished,
      runErrors,
      messages: jsonCopy(agent.messages),
      state: jsonCopy(agent.state),
      pendingInterrupts: jsonCopy(agent.pendingInterrupts),
      request: recorder.request,
      aborted: recorder.aborted,
      executedTools,
      warnings: sink.warnings,
      consoleErrors: sink.consoleErrors,
    });
  }

  process.stdout.write(
    JSON.stringify({
      runs,
      messages: jsonCopy(agent.messages),
      state: jsonCopy(agent.state),
      pendingInterrupts: jsonCopy(agent.pendingInterrupts),
    }),
  );
}

main().catch((err) => {
  process.stderr.write(`run_agent.mjs: ${err && err.stack ? err.stack : String(err)}\n`);
  process.exitCode = 2;
});
