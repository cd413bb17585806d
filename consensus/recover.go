package consensus

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
)

// PeersFile is the file an operator writes into a node's folder (the state directory's
// subfolder of the node) to force a new raft configuration at the next start, after a loss of
// quorum that cannot be undone (Consul's peers.json): a JSON list of {"id", "address",
// "non_voter"}. The node recovers with raft.RecoverCluster, which commits every entry of its
// log, and renames the file PeersFile+".applied" so that the next start does not do it again.
const PeersFile = "peers.json"

// recoveryServer is one server of a PeersFile.
type recoveryServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	NonVoter bool   `json:"non_voter"`
}

// readPeersFile returns the configuration of path; ok is false when there is no file.
func readPeersFile(path string) (conf raft.Configuration, ok bool, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return conf, false, nil
	}
	if err != nil {
		return conf, false, err
	}
	var servers []recoveryServer
	if err := json.Unmarshal(raw, &servers); err != nil {
		return conf, false, fmt.Errorf("%s is not a JSON list of {\"id\", \"address\", \"non_voter\"}: %v", path, err)
	}
	seen := map[string]bool{}
	voters := 0
	for i, s := range servers {
		switch {
		case s.ID == "" || s.Address == "":
			return conf, false, fmt.Errorf("%s: server %d needs an id and an address", path, i+1)
		case seen[s.ID]:
			return conf, false, fmt.Errorf("%s: server %s is listed twice", path, s.ID)
		}
		seen[s.ID] = true
		suffrage := raft.Voter
		if s.NonVoter {
			suffrage = raft.Nonvoter
		} else {
			voters++
		}
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Address), Suffrage: suffrage})
	}
	if voters == 0 {
		return conf, false, fmt.Errorf("%s names no voter", path)
	}
	return conf, true, nil
}

// recoverIfAsked runs raft.RecoverCluster when the node's folder holds a PeersFile, before raft
// starts. It needs raft state to recover (a node without any refuses the file).
func (n *Node) recoverIfAsked(rc *raft.Config) error {
	if n.cfg.Ephemeral || n.cfg.StateDir == "" {
		return nil
	}
	path := filepath.Join(n.cfg.StateDir, PeersFile)
	conf, ok, err := readPeersFile(path)
	if err != nil || !ok {
		return err
	}
	// RecoverCluster leaves the FSM it is given unusable: give it a scratch one. The node's
	// FSM then takes the snapshot RecoverCluster made, which is newer than its saved state.
	if err := raft.RecoverCluster(rc, fsm.New(n.log), n.stores.log, n.stores.stable, n.stores.snaps, n.trans, conf); err != nil {
		return fmt.Errorf("consensus: recover the raft configuration from %s: %w", path, err)
	}
	if err := os.Rename(path, path+".applied"); err != nil {
		return fmt.Errorf("consensus: recovered from %s, but could not rename it (remove it before the next start): %w", path, err)
	}
	n.log.Warn("recovered the raft configuration from "+PeersFile+"; every entry of this node's log is now committed",
		"servers", len(conf.Servers), "file", path+".applied")
	return nil
}
