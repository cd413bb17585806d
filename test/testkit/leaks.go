package testkit

import "go.uber.org/goleak"

// Housekeeping are goleak's options for the goroutines that outlive a stopped server or client
// by design: net/http's idle keep-alive connections, and fasthttp's housekeeping goroutines,
// which sleep out their period before they end. Every goroutine of meshgw's own is still
// checked.
func Housekeeping() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	}
}
