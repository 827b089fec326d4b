// A tiny OpenAI-compatible model server: the daemon's `openai-http` backend
// pointed at it runs real jobs with answers we can predict.
//
// What the 0.1.1 daemon calls (byollm src/backends/openai-http.ts):
//   GET  <baseUrl>/models            health + model list; the configured
//                                    model must be in `data[].id` (exact,
//                                    case-insensitive, or with ":latest"),
//                                    or the service is not advertised
//   POST <baseUrl>/chat/completions  {model, messages:[{role:"user",
//                                    content: prompt}], stream:false}; it
//                                    reads choices[0].message.content and
//                                    choices[0].finish_reason
// The daemon flattens every job into one user message (src/compose.ts).
import { createServer } from "node:http";
import { createHash } from "node:crypto";

export const MODEL = "interop-echo";

/** The answer for a prompt: deterministic, and it names the prompt's hash. */
export function answerFor(prompt) {
  const digest = createHash("sha256").update(prompt).digest("hex").slice(0, 16);
  return `interop-answer ${digest} (${prompt.length} chars): ${prompt}`;
}

export async function startModelServer() {
  const calls = []; // every completion request, for the driver to check

  const server = createServer(async (req, res) => {
    const reply = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const url = new URL(req.url, "http://127.0.0.1");
    if (req.method === "GET" && url.pathname === "/v1/models") {
      return reply(200, { object: "list", data: [{ id: MODEL, object: "model", owned_by: "interop" }] });
    }
    if (req.method === "POST" && url.pathname === "/v1/chat/completions") {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return reply(400, { error: { message: "body is not JSON" } });
      }
      // 404 is what the daemon maps to model-not-found: a wrong model name
      // in our config should fail loudly, not answer.
      if (body.model !== MODEL) return reply(404, { error: { message: `no model ${body.model}` } });
      const prompt = (body.messages ?? []).map((m) => m.content).join("\n");
      calls.push({ model: body.model, messages: body.messages, stream: body.stream });
      return reply(200, {
        id: `chatcmpl-${calls.length}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: MODEL,
        choices: [{ index: 0, message: { role: "assistant", content: answerFor(prompt) }, finish_reason: "stop" }],
        usage: { prompt_tokens: prompt.length, completion_tokens: 1, total_tokens: prompt.length + 1 },
      });
    }
    return reply(404, { error: { message: "not found" } });
  });

  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    calls,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
