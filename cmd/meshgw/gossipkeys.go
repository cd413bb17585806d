package main

import (
	"log/slog"

	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/mesh"
)

// reloadGossipKeys is the SIGHUP step of a gossip key rotation: it reads --mesh-encrypt-key-file
// again and gives the mesh its keys, the first primary (mesh.Mesh.SetEncryptKeys). A file that
// does not read, or a key list the mesh refuses, keeps the keys in use and says why, never the
// keys. A key given on the command line or in the variable cannot change without a restart.
func (f *clusterFlags) reloadGossipKeys(m *mesh.Mesh, log *slog.Logger) {
	if f.meshEncryptKeyFile == "" {
		if f.meshEncryptKey != "" {
			log.Info("SIGHUP: the gossip key comes from --mesh-encrypt-key or its variable; give --mesh-encrypt-key-file to rotate it without a restart")
		}
		return
	}
	if m == nil {
		return // the mesh is not started yet; it reads the file when it starts
	}
	var keys string
	if err := keyFromFile(&keys, "mesh-encrypt-key", "mesh-encrypt-key-file", f.meshEncryptKeyFile); err != nil {
		log.Error("SIGHUP: the gossip key file did not reload; the keys in use stay", "err", err)
		return
	}
	if err := m.SetEncryptKeys(keys); err != nil {
		log.Error("SIGHUP: the gossip keys did not change; the keys in use stay", "err", err)
		return
	}
	log.Info("SIGHUP: reloaded the gossip keys", "file", f.meshEncryptKeyFile)
}

// gossipKey is the key the mesh encrypts and authenticates gossip with: --mesh-encrypt-key
// (or its file) when given, else, with --admin-api-key, the gossip key derived from it
// (clusterkey), so that a process that holds neither cannot join the mesh, loopback included;
// else none.
func (c *cluster) gossipKey() string {
	if k := c.o.cluster.meshEncryptKey; k != "" {
		return k
	}
	if k := clusterkey.Derive(c.o.gw.adminAPIKey); k != nil {
		return k.GossipKey()
	}
	return ""
}
