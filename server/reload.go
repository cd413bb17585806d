package server

import (
	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/mesh"
)

// Reload is the SIGHUP step of a rotation: it reloads the TLS certificate, key and CA
// (TLSConfig.Certs), then the gossip keys (ClusterConfig.GossipKeyFile). A reload that fails
// keeps what is in use and says why, never the files' contents. Without TLS it only logs that
// there is nothing to reload.
//
// It is safe from New on, from any goroutine, before, during and after Start and Run: the
// caller's signal handler runs from before the cluster starts, so that a SIGHUP meanwhile
// reloads the certificates rather than ending the process. The mesh is handed to Reload under
// a lock once it started (setHangupMesh); until then the gossip keys are not reloaded (the
// mesh starts with Config's keys). Reloads run one at a time.
func (s *Server) Reload() {
	s.hup.Lock()
	defer s.hup.Unlock()
	s.reloadTLS()
	s.reloadGossipKeys(s.hup.mesh)
}

// setHangupMesh gives Reload the mesh once it started.
func (s *Server) setHangupMesh(m *mesh.Mesh) {
	s.hup.Lock()
	defer s.hup.Unlock()
	s.hup.mesh = m
}

func (s *Server) reloadTLS() {
	log, t := s.log, &s.cfg.TLS
	if t.Certs == nil {
		log.Info("SIGHUP: nothing to reload (no --tls-cert)")
		return
	}
	if err := t.Certs.Reload(); err != nil {
		log.Error("SIGHUP: the TLS files did not reload; the certificates in use stay", "err", err)
		return
	}
	leaf := t.Certs.Leaf()
	log.Info("SIGHUP: reloaded the TLS certificate, key and CA", "cert", t.CertFile, "subject", leaf.Subject.CommonName,
		"serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter)
	if t.CheckNodeID != nil {
		if err := t.CheckNodeID(s.nodeID); err != nil {
			log.Warn("SIGHUP: the new certificate does not name this gateway; peers will refuse its requests", "err", err)
		}
	}
}

// reloadGossipKeys reads ClusterConfig.GossipKeyFile again and gives the mesh its keys, the
// first primary (mesh.Mesh.SetEncryptKeys). A file that does not read, or a key list the mesh
// refuses, keeps the keys in use and says why, never the keys. A key given otherwise cannot
// change without a restart.
func (s *Server) reloadGossipKeys(m *mesh.Mesh) {
	log, c := s.log, &s.cfg.Cluster
	if c.GossipKeyFile == "" {
		if c.GossipKey != "" {
			log.Info("SIGHUP: the gossip key comes from --mesh-encrypt-key or its variable; give --mesh-encrypt-key-file to rotate it without a restart")
		}
		return
	}
	if m == nil {
		return // the mesh is not started yet; it starts with the keys read at start
	}
	keys, err := c.ReadGossipKeys()
	if err != nil {
		log.Error("SIGHUP: the gossip key file did not reload; the keys in use stay", "err", err)
		return
	}
	if err := m.SetEncryptKeys(keys); err != nil {
		log.Error("SIGHUP: the gossip keys did not change; the keys in use stay", "err", err)
		return
	}
	log.Info("SIGHUP: reloaded the gossip keys", "file", c.GossipKeyFile)
}

// gossipKey is the key the mesh encrypts and authenticates gossip with: ClusterConfig.GossipKey
// when given, else, with an admin key, the gossip key derived from it (clusterkey), so that a
// process that holds neither cannot join the mesh, loopback included; else none.
func gossipKey(cfg *Config) string {
	if k := cfg.Cluster.GossipKey; k != "" {
		return k
	}
	if k := clusterkey.Derive(cfg.Gateway.AdminAPIKey); k != nil {
		return k.GossipKey()
	}
	return ""
}
