package main

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/mesh"
)

// meshFlags are the flags every subcommand has: the mesh's size and profile, the bound on the
// whole command and the nodes' log level.
type meshFlags struct {
	peers    *int
	profile  *string
	timeout  *time.Duration
	logLevel *string
	level    slog.Level
}

func addMeshFlags(fs *flag.FlagSet, peers int, profile string, timeout time.Duration) *meshFlags {
	return &meshFlags{
		peers:    fs.Int("peers", peers, "mesh nodes, all in this process on 127.0.0.1"),
		profile:  fs.String("profile", profile, "memberlist profile: lan, wan or local"),
		timeout:  fs.Duration("timeout", timeout, "bound on the whole command"),
		logLevel: fs.String("log-level", "error", "level of the nodes' own log lines on stderr: debug, info, warn or error"),
	}
}

// check validates the flags (after Parse) and sets level.
func (f *meshFlags) check() error {
	if err := f.level.UnmarshalText([]byte(*f.logLevel)); err != nil {
		return toolcmd.BadFlags{Msg: fmt.Sprintf("--log-level %q: want debug, info, warn or error", *f.logLevel)}
	}
	switch {
	case *f.peers < 2 || *f.peers > 1000:
		return toolcmd.BadFlags{Msg: "--peers must be 2..1000"}
	case *f.timeout <= 0:
		return toolcmd.BadFlags{Msg: "--timeout must be positive"}
	case *f.profile != mesh.ProfileLAN && *f.profile != mesh.ProfileWAN && *f.profile != mesh.ProfileLocal:
		return toolcmd.BadFlags{Msg: fmt.Sprintf("--profile %q: want lan, wan or local", *f.profile)}
	}
	return nil
}
