// Decode binary AG-UI streams with the official client's parseProtoStream
// (@ag-ui/client 1.0.4 over @ag-ui/proto 1.0.4).
//
// stdin: {"piece": n, "streams": ["<base64 of a response body>", ...]}. Each body is fed to
// parseProtoStream in pieces of n bytes (0: whole), so frames arrive cut at arbitrary
// places as over a socket. stdout: one {"events": [...]} or {"error": "...", "events": [...]}
// per stream, as a JSON array.
import { parseProtoStream } from "@ag-ui/client";
import { Subject } from "rxjs";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));

function decode(body, piece) {
  // A hot source: parseProtoStream subscribes at once and returns a Subject of its own.
  const source = new Subject();
  const result = { events: [] };
  parseProtoStream(source).subscribe({
    next: (event) => result.events.push(event),
    error: (error) => {
      result.error = String(error);
    },
  });
  const step = piece > 0 ? piece : Math.max(body.length, 1);
  for (let i = 0; i < body.length; i += step) {
    source.next({ type: "data", data: new Uint8Array(body.subarray(i, i + step)) });
  }
  source.complete();
  return result;
}

const out = request.streams.map((b64) => decode(Buffer.from(b64, "base64"), request.piece ?? 0));
process.stdout.write(JSON.stringify(out));
