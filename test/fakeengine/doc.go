// Package fakeengine is a fake LLM inference engine with fault knobs, served over HTTP, gRPC or
// ZMQ, that tests and the fakeworker command start to stand in for SGLang-like workers.
//
// What it answers, on every transport alike:
//
//  1. Model routes (/v1/chat/completions, /v1/completions, /v1/embeddings, /generate) answer
//     AnswerText(node, prompt): "fake answer from NODE to: " and the first 40 characters of the
//     prompt (the last user message of a chat). A streamed answer is stream_chunks events whose
//     pieces concatenate to the same text (SGLang's /generate streams the text so far, as SGLang
//     does), then [DONE]. Embeddings are EmbeddingDim numbers derived from the input's hash.
//     A body that is not a request of its route (a chat without messages, messages that are not
//     a non-empty array of objects, a field of the wrong type) answers 400 with a one-line
//     message naming the field; with Config.CheckModel, an OpenAI request naming another model
//     answers vLLM's 404 NotFoundError.
//  2. Faults (DESIGN.md section 15) apply in this order: the request is counted, hang holds it
//     until the client leaves or the fault clears, latency_ms delays it, error_status answers
//     error_rate of requests with an OpenAI error envelope, and cut_stream_after breaks the
//     answer after that many chunks (half-way through a non-streamed body).
//  3. How a cut looks: HTTP hijacks and closes the TCP connection (the client reads an
//     unexpected EOF); gRPC aborts the Generate stream with UNAVAILABLE; ZMQ ends the answer
//     with ERROR engine_error.
//  4. How an injected error looks: HTTP answers the status; gRPC and ZMQ send one chunk whose
//     status is error_status and whose data is the envelope, and end normally (the RPC ends OK).
//  5. Health: HTTP GET /health answers health_status; gRPC grpc.health.v1 answers SERVING while
//     it is 2xx (services "", sglang.grpc.scheduler.SglangScheduler, meshgw.engine.v1.Engine);
//     ZMQ stops heartbeats and refuses HELLO while it is not 2xx.
//  6. Compute (Config.Compute; off by default) models a real engine's speed: a request waits
//     for one of Slots, looks its prompt up in an LRU prefix cache of chained-hash blocks, and
//     waits for the prefill of its uncached tokens (its time to first token is the two waits;
//     with PrefillLanes it first waits its turn for a lane, one forward pass at a time);
//     each further output token takes the decode time. Tokens are bytes of text / 4. The prompt
//     is meshgw's routing text (routingText): a chat's message texts and an assistant's
//     reasoning_content joined by one space, a completion's prompt, /generate's text, an
//     embedding's input, a batch of strings being one prompt of them joined by one space; only
//     the prompt is cached, not the answer, unless CacheAnswers (then a finished answer is
//     cached after its prompt, as SGLang and vLLM keep generated tokens, so a chat's next turn
//     finds it). Every answer reports
//     usage.prompt_tokens and usage.prompt_tokens_details.cached_tokens (vLLM's shape, embeddings
//     included; 0 without a cache), /generate SGLang's meta_info.cached_tokens in every event, and
//     a stream with stream_options.include_usage ends with a chunk of usage and no choices.
//  7. /_stats counts probes (GET /health, gRPC Check and Watch, ZMQ HELLO) and model requests,
//     split by X-Mesh-Gateway (gRPC metadata x-mesh-gateway or GenerateRequest.gateway; the
//     gateway id of a ZMQ HELLO). With Compute it also sums prompt and cached tokens, and counts
//     queue waits, running and waiting requests, and cache blocks and evictions.
//  8. Control endpoints: in HTTP mode on the engine's port; in gRPC mode on the same port over
//     HTTP/1.1 (connections are split by the HTTP/2 preface); in ZMQ mode on StartControl's
//     port.
package fakeengine
