package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// Feature levels (meta/features.go) at an agent's start: it refuses a log
// whose finalized levels its build does not support, and the first agent
// of a new cluster finalizes its build's highest levels. A log that
// already served agents and finalized nothing is left at level 1, so
// agents of builds before levels keep running beside this one until an
// operator raises the level (strand features upgrade).
//
// Agents never raise a level themselves, even once every live agent
// supports a higher one: a raise cannot be undone, and only the operator
// knows that the rollout is finished rather than paused (an agent of the
// older build may be about to come back, or the new build rolled back),
// as Kafka leaves metadata.version to kafka-features after a rolling
// restart.

// probeTimeout bounds asking one agent its supported features.
const probeTimeout = 5 * time.Second

// checkFeatures refuses to run on a log that finalized a level this
// build does not support: its commands may be ones this build cannot
// read, and the others count on every live agent supporting the levels.
func checkFeatures(r *replica.Replica) error {
	if err := r.Features().CheckSupported(); err != nil {
		return fmt.Errorf("the shared log's feature levels: %w; run a build that supports them", err)
	}
	return nil
}

// bootstrapFeatures finalizes this build's levels on a new log: one no
// agent registered on. It runs before this agent registers. Two agents
// starting a new cluster together both propose it; apply keeps the
// first (meta.FinalizeFeatures.Bootstrap).
func bootstrapFeatures(ctx context.Context, r *replica.Replica, transactionVersion int16, logger *slog.Logger) error {
	if transactionVersion == 0 {
		transactionVersion = 2 // the flag's default, as kafka.Deps reads 0
	}
	if tv, ok := r.Features().Level(meta.FeatureTransaction); ok && tv != transactionVersion {
		logger.Warn("the shared log finalized another transaction.version than --transaction-version; the log's applies (strand features changes it)",
			"finalized", tv, "flag", transactionVersion)
	}
	v := r.View()
	clusterID, err := v.ClusterID()
	v.Close()
	if err != nil || clusterID != "" || r.Features().Epoch != 0 {
		return err
	}
	res, err := r.Propose(ctx, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{
		{Name: meta.FeatureGroup, Level: 1},
		{Name: meta.FeatureMetadata, Level: meta.MaxMetadataLevel},
		{Name: meta.FeatureTransaction, Level: transactionVersion},
	}})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return fmt.Errorf("finalizing the feature levels of a new cluster: %w", err)
	}
	return nil
}

// featureProber is kafka.FeatureProber: it asks an agent for ApiVersions
// over the Kafka protocol, the one way to learn what an agent registered
// at strand.metadata.version 1 supports (its heartbeats carry nothing
// builds before levels would not read).
type featureProber struct{}

func (featureProber) SupportedFeatures(ctx context.Context, host string, port int32) ([]meta.FeatureRange, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(net.JoinHostPort(host, strconv.Itoa(int(port)))),
		kgo.ClientID("strand-agent"), kgo.RequestRetries(0), kgo.RetryTimeout(probeTimeout))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strand", "agent"
	// The seed broker itself, not whichever broker kgo would pick.
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(resp.ErrorCode)
	}
	if resp.Version < 3 {
		return nil, errors.New("answered ApiVersions below v3, which carries no features")
	}
	var rs []meta.FeatureRange
	for _, f := range resp.SupportedFeatures {
		rs = append(rs, meta.FeatureRange{Name: f.Name, Min: f.MinVersion, Max: f.MaxVersion})
	}
	return rs, nil
}
