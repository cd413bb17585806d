package worker

import (
	"fmt"
	"math/bits"
	"strings"
)

// Capability is a set of things a worker can serve, as a bit mask so that matching a request
// against a worker is one AND.
type Capability uint16

// The capabilities a worker may declare and a request may require.
const (
	CapChat Capability = 1 << iota
	CapCompletions
	CapEmbeddings
	CapStreaming
	CapSpeech
	CapImageInput
	CapAudioInput
	CapVideoInput
	CapAudioOutput

	// CapAll is the default of a worker that declares none.
	CapAll = CapChat | CapCompletions | CapEmbeddings | CapStreaming | CapSpeech |
		CapImageInput | CapAudioInput | CapVideoInput | CapAudioOutput
)

var capNames = [...]string{
	"chat", "completions", "embeddings", "streaming", "speech",
	"image_input", "audio_input", "video_input", "audio_output",
}

// CapabilityNames lists every capability name in bit order.
func CapabilityNames() []string { return append([]string(nil), capNames[:]...) }

// ParseCapability returns the capability named name.
func ParseCapability(name string) (Capability, error) {
	n := strings.TrimSpace(strings.ToLower(name))
	for i, s := range capNames {
		if s == n {
			return 1 << i, nil
		}
	}
	return 0, fmt.Errorf("unknown capability %q; want one of %s", name, strings.Join(capNames[:], ", "))
}

// ParseCapabilities returns the union of the named capabilities.
func ParseCapabilities(names []string) (Capability, error) {
	var c Capability
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			continue
		}
		one, err := ParseCapability(n)
		if err != nil {
			return 0, err
		}
		c |= one
	}
	return c, nil
}

// Has reports whether c holds every capability in want.
func (c Capability) Has(want Capability) bool { return c&want == want }

// Names lists the capabilities in c in bit order.
func (c Capability) Names() []string {
	out := make([]string, 0, bits.OnesCount16(uint16(c)))
	for i, s := range capNames {
		if c&(1<<i) != 0 {
			out = append(out, s)
		}
	}
	return out
}

// String joins the names with commas.
func (c Capability) String() string { return strings.Join(c.Names(), ",") }
