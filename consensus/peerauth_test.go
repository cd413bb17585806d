package consensus

import (
	"context"
	"testing"
	"time"

	"github.com/meshgw/meshgw/mesh"
)

// meshOf is a mesh whose members never change.
type meshOf []mesh.Member

func (m meshOf) Members() []mesh.Member { return m }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}
