// Package compat owns Strand's client compatibility matrix: it starts a
// real agent (the strand binary, on loopback, with a temp data dir), runs
// real Kafka clients against it and records, per client and capability,
// whether the client works.
//
// The clients are franz-go (its own pkg/kgo integration suite, copied out
// of the module cache at the version go.mod pins and pointed at the agent
// with KGO_SEEDS, and its kadm admin client in process for the admin APIs
// that suite leaves out), kcat (librdkafka), kafka-python,
// confluent-kafka-python, kafkajs and burrow. Each non-Go client is a script under clients/ that
// does its own checks and prints one result line per capability:
//
//	COMPAT {"cap":"produce","status":"pass","detail":"...","topic":"t","produced":1000}
//
// The runner then checks what the line claims against the agent itself
// (end offsets, the codec of stored batches, committed group offsets), so
// a script that checked nothing cannot pass. A capability a script was
// asked for and printed no line for is a failure.
//
// The agent also has SASL_PLAINTEXT, SASL_SSL and SSL listeners, a
// throwaway CA and a bootstrap SCRAM user (security.go): each client
// produces and consumes again over each of them for the security
// columns, and the kgo suite runs with KGO_TEST_SCRAM, so its SCRAM-gated
// tests run rather than skip.
//
// Burrow (burrow.go) is no script: the runner commits a known lag, starts
// burrow with a ZooKeeper of its own (testservers/zktest) and asks its
// HTTP API for the group's total lag, which burrow computes from the
// records in __consumer_offsets.
//
// TestQuickMatrix runs a small subset on every `go test`, and
// TestBurrowLag the burrow cell; the full matrix (the whole kgo suite,
// every client and capability) is `scripts/compat`, which runs
// ./compat/cmd/strand-compat.
package compat
