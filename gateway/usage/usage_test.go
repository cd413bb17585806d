package usage

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

const (
	openAIBody = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,` +
		`"completion_tokens":8,"total_tokens":128,"prompt_tokens_details":{"cached_tokens":96}},"prompt_logprobs":null}`
	sglangBody = `{"text":"hi","meta_info":{"id":"x","finish_reason":{"type":"stop","matched":null},"prompt_tokens":50,` +
		`"weight_version":"default","completion_tokens":3,"cached_tokens":32,"e2e_latency":0.01}}`
	// noDetailsBody is an answer that does not report its cache (vLLM without
	// --enable-prompt-tokens-details, many OpenAI-compatible servers, make bench's upstream).
	noDetailsBody = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"fake-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! This is a fixed benchmark answer."},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":6,"total_tokens":18}}`
	chunk     = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":null}` + "\n\n"
	usageLast = `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,` +
		`"total_tokens":9,"prompt_tokens_details":{"cached_tokens":4}}}` + "\n\ndata: [DONE]\n\n"
)

func TestScan(t *testing.T) {
	big := strings.Repeat("x", 3*Window)
	for _, tc := range []struct {
		name string
		in   string
		want Tokens
		ok   bool
	}{
		{"openai body", openAIBody, Tokens{120, 96}, true},
		{"sglang body", sglangBody, Tokens{50, 32}, true},
		{"stream final chunk", strings.Repeat(chunk, 5) + usageLast, Tokens{7, 4}, true},
		{"sglang stream, last event wins",
			`data: {"text":"a","meta_info":{"prompt_tokens":5,"cached_tokens":1}}` + "\n\n" +
				`data: {"text":"ab","meta_info":{"prompt_tokens":5,"cached_tokens":2}}` + "\n\ndata: [DONE]\n\n", Tokens{5, 2}, true},
		{"continuous usage, last chunk wins",
			`data: {"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":1}}}` + "\n\n" +
				`data: {"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":8}}}` + "\n\n", Tokens{9, 8}, true},
		{"white space", "{ \"usage\" :\n { \"prompt_tokens\" : 3 ,\n \"prompt_tokens_details\" : { \"cached_tokens\" : 0 } } }", Tokens{3, 0}, true},
		{"usage after a long text", `{"choices":[{"text":"` + big + `"}],"usage":{"prompt_tokens":2,"prompt_tokens_details":{"cached_tokens":2}}}`, Tokens{2, 2}, true},
		{"zero", `{"usage":{"prompt_tokens":0,"prompt_tokens_details":{"cached_tokens":0}}}`, Tokens{}, true},
		{"max", `{"usage":{"prompt_tokens":1099511627775,"prompt_tokens_details":{"cached_tokens":1}}}`, Tokens{1<<40 - 1, 1}, true},

		{"no space after data:", `data:{"choices":[],"usage":{"prompt_tokens":7,"prompt_tokens_details":{"cached_tokens":4}}}` + "\n\ndata:[DONE]\n\n", Tokens{7, 4}, true},
		{"a report only before the last event", usageLast[:len(usageLast)-len("data: [DONE]\n\n")] + chunk + "data: [DONE]\n\n", Tokens{}, false},
		{"no usage", `{"choices":[{"message":{"content":"hi"}}]}`, Tokens{}, false},
		{"empty", ``, Tokens{}, false},
		{"usage null", strings.Repeat(chunk, 3), Tokens{}, false},
		{"details null (vLLM without the flag)", `{"usage":{"prompt_tokens":12,"prompt_tokens_details":null}}`, Tokens{}, false},
		{"no details", `{"usage":{"prompt_tokens":12,"total_tokens":14}}`, Tokens{}, false},
		{"cached at the wrong level", `{"usage":{"prompt_tokens":12,"cached_tokens":4}}`, Tokens{}, false},
		{"meta_info without cached", `{"meta_info":{"prompt_tokens":12}}`, Tokens{}, false},
		{"cached above prompt", `{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		{"usage as a text", `{"choices":[{"message":{"content":"usage"}}],"x":{"prompt_tokens":1}}`, Tokens{}, false},
		{"escaped in a text", `{"content":"\"usage\":{\"prompt_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":5}}"}`, Tokens{}, false},
		{"truncated", `{"usage":{"prompt_tokens":12,"prompt_tokens_details":{"cached_tokens":4}`, Tokens{}, false},
		{"malformed", `{"usage":{"prompt_tokens":12,,"prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		{"no colon", `{"usage" {"prompt_tokens":12,"prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		{"string number", `{"usage":{"prompt_tokens":"12","prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		{"negative", `{"usage":{"prompt_tokens":-12,"prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		{"float", `{"usage":{"prompt_tokens":12.5,"prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		{"exponent", `{"usage":{"prompt_tokens":1e3,"prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		{"huge", `{"usage":{"prompt_tokens":99999999999999999999999999,"prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		{"just too large", `{"usage":{"prompt_tokens":1099511627776,"prompt_tokens_details":{"cached_tokens":4}}}`, Tokens{}, false},
		// The answer's own report is the last usage key: one without a cached count ends the
		// search, and a nested object's usage before it is not the answer's.
		{"the last report has no cached count", `{"tool":{"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":5}}},` +
			`"usage":{"prompt_tokens":12,"completion_tokens":6,"total_tokens":18}}`, Tokens{}, false},
		{"the last report is null", `{"x":{"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":5}}},"usage":null}`, Tokens{}, false},
		// A "usage" that is not a key (an array's string) does not end it.
		{"usage as a string in an array", `{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":1}},"tags":["a","usage"]}`, Tokens{3, 1}, true},
		{"usage before the window", `{"usage":{"prompt_tokens":2,"prompt_tokens_details":{"cached_tokens":2}},"text":"` + big + `"}`, Tokens{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Scan([]byte(tc.in))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Scan = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestTailSplitReads writes a stream in reads of every size, so the usage chunk is split across
// reads in every place, and checks Scan reads the tail as it reads the whole stream.
func TestTailSplitReads(t *testing.T) {
	stream := []byte(strings.Repeat(chunk, 40) + usageLast)
	var tail Tail
	for size := 1; size <= len(stream); size += 1 + size/8 {
		tail.Reset()
		for b := stream; len(b) > 0; {
			n := min(size, len(b))
			tail.Write(b[:n])
			b = b[n:]
		}
		if got := tail.Bytes(); len(got) < Window || !bytes.HasSuffix(stream, got) {
			t.Fatalf("reads of %d: the tail holds %d bytes that do not end the stream", size, len(got))
		}
		if got, ok := Scan(tail.Bytes()); !ok || got != (Tokens{7, 4}) {
			t.Fatalf("reads of %d: Scan = %+v, %v", size, got, ok)
		}
	}
}

func TestTailShort(t *testing.T) {
	var tail Tail
	tail.Write([]byte("ab"))
	tail.Write([]byte("cd"))
	if got := string(tail.Bytes()); got != "abcd" {
		t.Fatalf("tail = %q", got)
	}
	tail.Reset()
	if len(tail.Bytes()) != 0 {
		t.Fatal("Reset left bytes")
	}
}

func TestScanAllocatesNothing(t *testing.T) {
	stream := []byte(strings.Repeat(chunk, 20) + usageLast)
	var tail Tail
	for _, in := range [][]byte{[]byte(openAIBody), []byte(sglangBody), stream} {
		if a := testing.AllocsPerRun(100, func() { Scan(in) }); a != 0 {
			t.Fatalf("Scan allocates %v times", a)
		}
	}
	if a := testing.AllocsPerRun(100, func() { tail.Write(stream[:100]) }); a != 0 {
		t.Fatalf("Tail.Write allocates %v times", a)
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range []string{openAIBody, sglangBody, usageLast, chunk, `{"usage":{}}`, `"usage":{"prompt_tokens":1`,
		`{"meta_info":{"prompt_tokens":1,"cached_tokens":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := Scan(b)
		if !ok {
			if got != (Tokens{}) {
				t.Fatalf("no report, but tokens %+v", got)
			}
			return
		}
		if got.Cached > got.Prompt || got.Prompt >= maxTokens {
			t.Fatalf("report %+v out of bounds", got)
		}
		// The prompt count is in the input, as digits.
		if !bytes.Contains(b, []byte(strconv.FormatUint(got.Prompt, 10))) {
			t.Fatalf("prompt %d is not in the input", got.Prompt)
		}
		// Split anywhere, the tail reads the same.
		var tail Tail
		cut := len(b) / 3
		tail.Write(b[:cut])
		tail.Write(b[cut:])
		if again, ok2 := Scan(tail.Bytes()); !ok2 || again != got {
			t.Fatalf("through the tail: %+v, %v; whole: %+v", again, ok2, got)
		}
	})
}

func BenchmarkScan(b *testing.B) {
	stream := []byte(strings.Repeat(chunk, 20) + usageLast)
	long := []byte(`{"choices":[{"text":"` + strings.Repeat("x", 100<<10) + `"}],"usage":{"prompt_tokens":2,"prompt_tokens_details":{"cached_tokens":2}}}`)
	for _, bc := range []struct {
		name string
		in   []byte
	}{
		{"openai-body", []byte(openAIBody)},
		{"no-details-body", []byte(noDetailsBody)},
		{"sglang-body", []byte(sglangBody)},
		{"stream-tail", stream},
		{"100KB-body", long},
		{"no-usage", []byte(strings.Repeat(chunk, 20))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpuPerOp(b, func() { Scan(bc.in) })
		})
	}
}

// BenchmarkTailWrite is the per-read cost a stream pays: one SSE event of about 150 bytes.
func BenchmarkTailWrite(b *testing.B) {
	ev := []byte(chunk)
	var tail Tail
	b.ReportAllocs()
	cpuPerOp(b, func() { tail.Write(ev) })
}
