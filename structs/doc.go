// Package structs holds the data types shared by every part of Trellis: the
// catalog (nodes, services, checks), the KV store, sessions, transactions, the
// RPC request and response envelopes, and the Raft command numbers.
//
// Field names follow Consul's so that the types encode to the JSON Consul's
// HTTP API produces and accept what its clients send. This package imports no
// other package of ours.
package structs
