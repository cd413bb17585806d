package consensus

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

// meshOf is a mesh whose members never change.
type meshOf []mesh.Member

func (m meshOf) Members() []mesh.Member { return m }
