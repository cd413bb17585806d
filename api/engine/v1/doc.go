// Package enginev1 is the generated Go code of meshgw.engine.v1, the gRPC service meshgw speaks
// to gRPC engine workers (engine.proto); regenerate it with `make proto`.
package enginev1
