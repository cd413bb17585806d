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

// Errors, as the SDK surfaces them: the status, the envelope's type and code, and the request
// id (x-request-id, which the gateway answers on every model route, errors included).
// MESHGW_EMPTY_URL names a gateway with no worker; MESHGW_URL's --max-payload-size is 64 KiB.
const empty = new OpenAI({
  baseURL: (process.env.MESHGW_EMPTY_URL ?? "http://127.0.0.1:30001") + "/v1",
  apiKey: "unused-by-fake-engines", maxRetries: 0, timeout: 20_000,
});
const gatewayID = /^mgw-[0-9a-f]{12}-[0-9a-f]+$/;

test("the request id of an answer is the gateway's, or the client's own", async () => {
  const { data, response } = await client.chat.completions
    .create({ model: "fake-model", messages: [{ role: "user", content: prompt }] })
    .withResponse();
  assert.match(data._request_id, gatewayID);
  assert.equal(response.headers.get("x-mesh-request-id"), data._request_id);
  const mine = await client.chat.completions.create(
    { model: "fake-model", messages: [{ role: "user", content: prompt }] },
    { headers: { "x-request-id": "node-sdk-req-1" } },
  );
  assert.equal(mine._request_id, "node-sdk-req-1");
});

test("a 400 for a body the gateway refuses", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 7, messages: [{ role: "user", content: prompt }] }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `got ${err}`);
      assert.equal(err.status, 400);
      assert.equal(err.type, "invalid_request_error");
      assert.match(err.message, /model/);
      assert.match(err.requestID, gatewayID);
      return true;
    },
  );
});

test("a 503 no_available_workers when nothing can serve", async () => {
  await assert.rejects(
    empty.chat.completions.create(
      { model: "fake-model", messages: [{ role: "user", content: prompt }] },
      { headers: { "x-request-id": "node-sdk-req-503" } },
    ),
    (err) => {
      assert.ok(err instanceof OpenAI.InternalServerError, `got ${err}`);
      assert.equal(err.status, 503);
      assert.equal(err.code, "no_available_workers");
      assert.equal(err.type, "service_unavailable");
      assert.equal(err.requestID, "node-sdk-req-503");
      return true;
    },
  );
});

test("a 413 for a body over --max-payload-size", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "fake-model", messages: [{ role: "user", content: "x".repeat(100_000) }] }),
    (err) => {
      assert.ok(err instanceof OpenAI.APIError, `got ${err}`);
      assert.equal(err.status, 413);
      assert.equal(err.type, "payload_too_large");
      assert.match(err.requestID, gatewayID);
      return true;
    },
  );
});
