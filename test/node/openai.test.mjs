// Drives a running meshgw with the official OpenAI Node SDK, as a user would.
// MESHGW_URL names the gateway (e.g. http://127.0.0.1:30000); the Go test in test/e2e starts
// the gateway and its fake engines, then runs this file with `node --test`.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = (process.env.MESHGW_URL ?? "http://127.0.0.1:30000") + "/v1";
const client = new OpenAI({ baseURL, apiKey: "unused-by-fake-engines", maxRetries: 0, timeout: 20_000 });
const prompt = "say hello to the mesh";

test("chat completion through the gateway", async () => {
  const res = await client.chat.completions.create({
    model: "fake-model",
    messages: [{ role: "user", content: prompt }],
  });
  assert.equal(res.object, "chat.completion");
  const text = res.choices[0].message.content;
  assert.ok(text.includes(prompt), `answer ${JSON.stringify(text)} does not echo the prompt`);
});

test("streamed chat completion through the gateway", async () => {
  const stream = await client.chat.completions.create({
    model: "fake-model",
    messages: [{ role: "user", content: prompt }],
    stream: true,
  });
  let chunks = 0;
  let text = "";
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    text += chunk.choices[0]?.delta?.content ?? "";
    chunks++;
  }
  assert.ok(chunks > 1, `got ${chunks} chunks; want a real stream`);
  assert.ok(text.includes(prompt), `streamed answer ${JSON.stringify(text)} does not echo the prompt`);
});

test("the models list is merged by the gateway", async () => {
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  assert.ok(models.includes("fake-model"), `models ${JSON.stringify(models)}`);
});
