package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Names inside a node's folder.
const (
	RaftDBName       = "raft.db"
	SnapshotsDirName = "snapshots"
)

// EnvStateDir is the environment variable that sets the state directory when --state-dir does
// not.
const EnvStateDir = "MESHGW_STATE_DIR"

const (
	dirMode     = 0o700
	maxNodeName = 128
)

// Location is the resolved state directory and which setting chose it.
type Location struct {
	// Path is absolute, e.g. /home/ops/.local/state/meshgw.
	Path string
	// Source names the setting, for the start-up log: "--state-dir", "$MESHGW_STATE_DIR",
	// "$XDG_STATE_HOME" or "home".
	Source string
}

// ResolveStateDir picks the state directory: flag (--state-dir), then $MESHGW_STATE_DIR, then
// $XDG_STATE_HOME/meshgw, then home/.local/state/meshgw. getenv reads the environment (os.Getenv
// in production) and home is the user's home directory (os.UserHomeDir, "" if unknown). A
// relative flag or $MESHGW_STATE_DIR is made absolute against the working directory; a relative
// $XDG_STATE_HOME is ignored, as the XDG base directory specification requires. It fails when
// nothing applies; there is no temporary-directory fallback.
func ResolveStateDir(flag string, getenv func(string) string, home string) (Location, error) {
	if flag != "" {
		return absLocation(flag, "--state-dir")
	}
	if v := getenv(EnvStateDir); v != "" {
		return absLocation(v, "$"+EnvStateDir)
	}
	if v := getenv("XDG_STATE_HOME"); v != "" && filepath.IsAbs(v) {
		return Location{Path: filepath.Join(v, "meshgw"), Source: "$XDG_STATE_HOME"}, nil
	}
	if home != "" && filepath.IsAbs(home) {
		return Location{Path: filepath.Join(home, ".local", "state", "meshgw"), Source: "home"}, nil
	}
	return Location{}, errors.New("state dir cannot be resolved: no home directory; " +
		"set --state-dir or $" + EnvStateDir + " (or run with --ephemeral)")
}

func absLocation(p, source string) (Location, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return Location{}, fmt.Errorf("state dir %s (from %s) cannot be made absolute: %v", p, source, err)
	}
	return Location{Path: abs, Source: source}, nil
}

// NodeDirName turns a node id into the name of its folder: every byte outside [A-Za-z0-9._-]
// becomes '_', so "127.0.0.1:30000" gives "127.0.0.1_30000". Ids that differ only in such bytes
// share a folder, and then the folder lock keeps the second gateway out. An empty id, ".", ".."
// or a name longer than 128 bytes is refused.
func NodeDirName(nodeID string) (string, error) {
	if nodeID == "" {
		return "", errors.New("state dir needs a node id (or the listener's host_port)")
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, nodeID)
	// strings.Map replaces a multi-byte rune by one '_', which is fine: the name only has to be
	// safe and stable.
	if name == "." || name == ".." || len(name) > maxNodeName {
		return "", fmt.Errorf("node id %q cannot name a state folder", nodeID)
	}
	return name, nil
}

// NodeDir is one gateway's folder inside the state directory. The folder is 0700 and its files
// 0600; it holds RaftDBName (the raft log and stable store) and SnapshotsDirName.
type NodeDir struct {
	Path string
}

// RaftDB is the path to pass to Open.
func (d NodeDir) RaftDB() string { return filepath.Join(d.Path, RaftDBName) }

// Snapshots is the directory for raft.NewFileSnapshotStore.
func (d NodeDir) Snapshots() string { return filepath.Join(d.Path, SnapshotsDirName) }

// PrepareNodeDir creates (or checks) the folder of node nodeID under base and makes sure it can
// be written, so that a gateway refuses to start with one line saying which path and why instead
// of failing later inside raft. base is created 0700 if missing and otherwise left as the
// operator made it. The node folder and its snapshots folder are created 0700; if they exist
// with group or other permission bits, those bits are removed and a warning logged (the folder
// holds worker api_keys); permissions are never loosened. An existing raft.db is tightened to
// 0600 the same way. A nil logger means slog.Default().
//
// PrepareNodeDir takes no lock: Open's lock on raft.db is what keeps a second gateway out, so
// open the store before writing anything else in the folder.
func PrepareNodeDir(base, nodeID string, logger *slog.Logger) (NodeDir, error) {
	if logger == nil {
		logger = slog.Default()
	}
	name, err := NodeDirName(nodeID)
	if err != nil {
		return NodeDir{}, err
	}
	if err := os.MkdirAll(base, dirMode); err != nil {
		return NodeDir{}, pathError(base, "cannot be created", err)
	}
	d := NodeDir{Path: filepath.Join(base, name)}
	for _, dir := range []string{d.Path, d.Snapshots()} {
		if err := ensureDir(dir, logger); err != nil {
			return NodeDir{}, err
		}
	}
	if err := tighten(d.RaftDB(), fileMode, logger); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return NodeDir{}, pathError(d.RaftDB(), "cannot be secured", err)
	}
	for _, dir := range []string{d.Path, d.Snapshots()} {
		if err := probeWritable(dir); err != nil {
			return NodeDir{}, err
		}
	}
	return d, nil
}

// ensureDir creates dir 0700, or checks that the existing one is a directory and tightens it.
func ensureDir(dir string, logger *slog.Logger) error {
	err := os.Mkdir(dir, dirMode)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return pathError(dir, "cannot be created", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return pathError(dir, "cannot be read", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("state dir %s is not a directory", dir)
	}
	if err := tighten(dir, dirMode, logger); err != nil {
		return pathError(dir, "cannot be secured", err)
	}
	return nil
}

// tighten removes from path's mode every permission bit outside allowed, logging when it does.
func tighten(path string, allowed fs.FileMode, logger *slog.Logger) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	perm := info.Mode().Perm()
	if perm&^allowed == 0 {
		return nil
	}
	if err := os.Chmod(path, perm&allowed); err != nil {
		return err
	}
	logger.Warn("tightened state dir permissions", "path", path,
		"from", fmt.Sprintf("%#o", perm), "to", fmt.Sprintf("%#o", perm&allowed))
	return nil
}

// probeWritable creates, syncs and removes a file in dir.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return pathError(dir, "is not writable", err)
	}
	_, err = f.Write([]byte("meshgw"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(f.Name()); err == nil {
		err = rerr
	}
	if err != nil {
		return pathError(dir, "is not writable", err)
	}
	return nil
}

// pathError says "state dir PATH WHAT: REASON" with the bare reason (e.g. "permission denied")
// and, when the failing path is another one (a parent that is a file), that path too. It wraps
// the cause, so errors.Is(err, fs.ErrPermission) works.
func pathError(path, what string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if pe.Path != path && !strings.HasPrefix(pe.Path, path+string(filepath.Separator)) {
			return fmt.Errorf("state dir %s %s: %w (at %s)", path, what, pe.Err, pe.Path)
		}
		return fmt.Errorf("state dir %s %s: %w", path, what, pe.Err)
	}
	return fmt.Errorf("state dir %s %s: %w", path, what, err)
}
