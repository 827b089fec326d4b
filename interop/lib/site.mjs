// The real site SDK (`@byollm/server` 0.1.1) on its cloud lane: the site
// never talks to the daemon, only to the relay's /relay/site/* plane.
import { ByollmApp, MemoryStore, generateSiteKeys } from "@byollm/server";
import { publicIdentityOf } from "@byollm/protocol";
import { answerFor } from "./model-server.mjs";

export function makeSite() {
  const keys = generateSiteKeys();
  return { keys, identity: publicIdentityOf(keys) };
}

export function siteApp({ keys, siteId, relayUrl }) {
  return new ByollmApp({
    store: new MemoryStore(),
    siteKeys: keys,
    lane: { relayOrigin: relayUrl, siteId },
  });
}

/**
 * Job n: alternate the two kinds so both payload shapes cross the relay.
 * `prompt` is what the daemon will hand the model: generate sends the prompt
 * as is; chat is flattened to "User: <content>" turns (byollm src/compose.ts).
 */
export function jobNumber(n, owner) {
  const text = `interop job ${n}: say something about the number ${n * 7}`;
  const input =
    n % 2 === 0
      ? { kind: "llm.generate", owner, payload: { prompt: text } }
      : { kind: "llm.chat", owner, payload: { messages: [{ role: "user", content: text }] } };
  const prompt = input.kind === "llm.generate" ? text : `User: ${text}`;
  return { input, expected: answerFor(prompt) };
}
