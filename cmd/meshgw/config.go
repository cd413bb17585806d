package main

import (
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/server"
)

// serverConfig translates the parsed flags into the server's Config: the data plane's
// listener ln, the logs, the registry /metrics serves, and getenv for the state dir's
// default. It decides nothing the flags do not say.
func (o *options) serverConfig(ln net.Listener, getenv func(string) string, lg *logs, reg *prometheus.Registry) server.Config {
	gw := o.gw.config(&o.retry)
	gw.CacheAware = o.cache.config()
	gw.Locality = o.loc.config()
	gw.RequestLog, gw.RequestLogger = o.observe.requestLog, lg.reqLog
	gw.RequestLogWriter, gw.RequestLogJSON = lg.reqOut, lg.json
	cfg := server.Config{
		Listener:      ln,
		NodeID:        o.gw.nodeID,
		Color:         o.gw.color,
		Gateway:       gw,
		CacheFleet:    o.cache.scope == cacheScopeFleet,
		Workers:       o.gw.specs,
		Discovery:     o.disc.config(),
		Health:        o.health.cfg,
		Breaker:       o.breaker.config(),
		Raft:          o.state.consensus(o.cluster.raftBind()),
		StateDir:      o.state.stateDir,
		Getenv:        getenv,
		Cluster:       o.cluster.config(o.gw.host),
		TLS:           o.tls.config(),
		ShutdownGrace: time.Duration(o.gw.shutdownGrace) * time.Second,
		Logger:        lg.log,
		Registry:      reg,
	}
	if o.gw.healthCheckPort != 0 {
		cfg.ProbeAddr = net.JoinHostPort(o.gw.host, strconv.Itoa(o.gw.healthCheckPort))
	}
	if o.observe.prometheusPort != 0 {
		cfg.MetricsAddr, cfg.Pprof = o.observe.metricsAddr(o.gw.host), o.runtime.enablePprof
	}
	return cfg
}

// config is the cluster's part of the server's Config; host is --host, which the data plane
// listens on.
func (f *clusterFlags) config(host string) server.ClusterConfig {
	c := server.ClusterConfig{
		MeshBind:           f.meshBind(),
		MeshPort:           f.meshPort,
		MeshProfile:        f.meshProfile,
		AdvertiseHost:      f.meshAdvertiseHost,
		MeshAdvertise:      f.advertiseHost(f.meshBind()),
		RPCAdvertise:       f.advertiseHost(f.rpcBind()),
		HTTPAdvertise:      f.advertiseHost(ipOf(host)),
		RPCBind:            f.rpcBind(),
		RPCPort:            f.rpcPort,
		GossipKey:          f.meshEncryptKey,
		Join:               f.join,
		BootstrapExpect:    f.bootstrapExpect,
		Voters:             f.raftVoters,
		DeadVoterGrace:     f.deadVoterGraceDuration(),
		ReconcileInterval:  f.reconcileIntervalDuration(),
		OwnerFailoverGrace: f.ownerFailoverGraceDuration(),
		FleetAckTimeout:    time.Duration(f.fleetAckTimeout) * time.Second,
		AutoRebalance:      f.autoRebalance,
		LeaveOnTerminate:   f.leaveOnTerminate,
		DrainTimeout:       f.drainTimeoutDuration(),
	}
	if file := f.meshEncryptKeyFile; file != "" {
		c.GossipKeyFile = file
		c.ReadGossipKeys = func() (string, error) {
			var keys string
			err := keyFromFile(&keys, "mesh-encrypt-key", "mesh-encrypt-key-file", file)
			return keys, err
		}
	}
	return c
}

// config is the control plane's security as the server takes it.
func (f *tlsFlags) config() server.TLSConfig {
	return server.TLSConfig{Certs: f.store, CertFile: f.cert, HTTP: f.http, VerifyNodeID: f.verifyNodeID, Insecure: f.insecure,
		Warning: f.warning(), CheckNodeID: f.checkNodeID}
}
