package agent

// Validate: what serve (and `strand config print`) refuses in a Config.

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/cleaner"
	"github.com/strandkafka/strand/internal/cost"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
)

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	var errs []error
	if c.Listeners == "" {
		if _, _, err := net.SplitHostPort(c.KafkaListen); err != nil {
			errs = append(errs, fmt.Errorf("kafka-listen %q: %w", c.KafkaListen, err))
		}
	}
	if err := c.validateListeners(); err != nil {
		errs = append(errs, err)
	}
	if c.Rack != "" && !kafka.ValidZone(c.Rack) {
		errs = append(errs, fmt.Errorf("rack %q: 1-64 letters, digits, '-', '_' or '.'", c.Rack))
	}
	if c.Advertise != "" {
		if host, port, err := net.SplitHostPort(c.Advertise); err != nil {
			errs = append(errs, fmt.Errorf("advertise %q: %w", c.Advertise, err))
		} else if host == "" || port == "0" {
			errs = append(errs, fmt.Errorf("advertise %q: needs a host and a fixed port", c.Advertise))
		}
	}
	if c.HTTPListen != "" {
		if _, _, err := net.SplitHostPort(c.HTTPListen); err != nil {
			errs = append(errs, fmt.Errorf("http-listen %q: %w", c.HTTPListen, err))
		}
	}
	if c.SchemaRegistryListen != "" {
		if _, _, err := net.SplitHostPort(c.SchemaRegistryListen); err != nil {
			errs = append(errs, fmt.Errorf("schema-registry-listen %q: %w", c.SchemaRegistryListen, err))
		}
	}
	if c.ConnectListen != "" {
		if _, _, err := net.SplitHostPort(c.ConnectListen); err != nil {
			errs = append(errs, fmt.Errorf("connect-listen %q: %w", c.ConnectListen, err))
		}
	}
	errs = append(errs, c.validateSASL()...)
	errs = append(errs, c.validateSQL()...)
	for _, h := range strings.Split(c.HTTPAllowedHosts, ",") {
		// A Host header's port is not compared; a name with one, or a
		// URL, would silently match nothing.
		if _, _, err := net.SplitHostPort(strings.TrimSpace(h)); err == nil || strings.Contains(h, "/") {
			errs = append(errs, fmt.Errorf("http-allowed-hosts %q: want host names without scheme or port", h))
		}
	}
	if c.AdminToken != "" && c.AdminTokenFile != "" {
		errs = append(errs, errors.New("admin-token-file and STRAND_ADMIN_TOKEN: give one"))
	}
	if c.HTTPTLS {
		files, err := c.tlsFiles()
		if err == nil {
			err = files.Validate()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("http-tls: %w", err))
		}
	}
	if _, err := c.latencyProfile(); err != nil {
		errs = append(errs, err)
	}
	if c.FlushInterval < 0 {
		errs = append(errs, errors.New("flush-interval must not be negative"))
	}
	// A run is held twice while it is compacted, outside the budget's
	// split: an eighth of the budget keeps that a quarter of it.
	if c.CompactionTargetBytes < 1<<10 || (c.Compaction && c.CompactionTargetBytes > c.MemoryBudget/8) {
		errs = append(errs, fmt.Errorf("compaction-target-bytes %d: must be between 1 KiB and an eighth of memory-budget (%s)",
			c.CompactionTargetBytes, FormatBytes(c.MemoryBudget/8)))
	}
	if c.CompactionMaxBytesPerSec < 0 || c.CompactionMinAge < 0 || c.CompactionMaxLag < 0 {
		errs = append(errs, errors.New("compaction-max-bytes-per-sec, compaction-min-age and compaction-max-lag must not be negative"))
	}
	if _, err := cost.LoadPrices(c.CostPrices); err != nil {
		errs = append(errs, fmt.Errorf("cost-prices: %w", err))
	}
	if c.MaxClockSkew < time.Second {
		errs = append(errs, fmt.Errorf("max-clock-skew %v: must be at least 1s, above the log clock's lead of %v",
			c.MaxClockSkew, time.Duration(meta.ClockLeadMs)*time.Millisecond))
	}
	if floor := time.Duration(meta.MinGCGraceMs) * time.Millisecond; c.GCGrace < 0 || (c.GCGrace > 0 && c.GCGrace < floor) {
		errs = append(errs, fmt.Errorf("gc-grace %v: must be at least %v, the longest an upload may take before its commit", c.GCGrace, floor))
	}
	if floor := time.Duration(meta.MinDeleteDelayMs) * time.Millisecond; c.GCDeleteDelay < 0 || (c.GCDeleteDelay > 0 && c.GCDeleteDelay < floor) {
		errs = append(errs, fmt.Errorf("gc-delete-delay %v: must be at least %v, above the longest object read of a fetch", c.GCDeleteDelay, floor))
	}
	if c.LogCleanerDedupeBufferSize < cleaner.EntryBytes || c.LogCleanerDedupeBufferSize > 1<<40 {
		errs = append(errs, fmt.Errorf("log-cleaner-dedupe-buffer-size %d: must be between %d and 1 TiB", c.LogCleanerDedupeBufferSize, cleaner.EntryBytes))
	}
	if c.MessageMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("message-max-bytes %d: must be positive", c.MessageMaxBytes))
	}
	if c.LogCleanerBackoff < time.Millisecond {
		errs = append(errs, fmt.Errorf("log-cleaner-backoff-ms %v: must be at least 1ms", c.LogCleanerBackoff))
	}
	if c.ObjStoreHedgePercentile >= 1 || c.ObjStoreHedgeMaxRatio < 0 || c.ObjStoreHedgeMaxRatio > 1 || c.ObjStoreHedgeMinDelay < 0 {
		errs = append(errs, fmt.Errorf("objstore-hedge-percentile %v must be below 1 (0: off), objstore-hedge-max-ratio %v between 0 and 1, objstore-hedge-min-delay %v not negative",
			c.ObjStoreHedgePercentile, c.ObjStoreHedgeMaxRatio, c.ObjStoreHedgeMinDelay))
	}
	if c.PacedObjectBytes < 1<<10 || c.PacedObjectBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("paced-object-bytes %d: must be between 1 KiB and 1 GiB", c.PacedObjectBytes))
	}
	if err := c.validateExpress(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxPutsPerSec < 0 {
		errs = append(errs, fmt.Errorf("max-puts-per-sec %v must not be negative (0: no budget)", c.MaxPutsPerSec))
	}
	if c.FlushBytes < 1<<10 || c.FlushBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("flush-bytes %d: must be between 1 KiB and 1 GiB", c.FlushBytes))
	}
	if c.DefaultPartitions < 1 || c.DefaultPartitions > 1<<16 {
		errs = append(errs, fmt.Errorf("default-partitions %d: must be between 1 and 65536", c.DefaultPartitions))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"group-min-session-timeout", c.GroupMinSessionTimeout},
		{"group-max-session-timeout", c.GroupMaxSessionTimeout},
		{"offsets-retention", c.OffsetsRetention},
		{"consumer-group-session-timeout", c.ConsumerGroupSessionTimeout},
		{"consumer-group-heartbeat-interval", c.ConsumerGroupHeartbeatInterval},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v: must not be negative", d.name, d.v))
		}
	}
	if c.GroupMinSessionTimeout > 0 && c.GroupMaxSessionTimeout > 0 && c.GroupMinSessionTimeout > c.GroupMaxSessionTimeout {
		errs = append(errs, fmt.Errorf("group-min-session-timeout %v: above group-max-session-timeout %v", c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout))
	}
	if c.ConsumerGroupSessionTimeout > 0 && c.ConsumerGroupHeartbeatInterval >= c.ConsumerGroupSessionTimeout {
		errs = append(errs, fmt.Errorf("consumer-group-heartbeat-interval %v: must be below consumer-group-session-timeout %v", c.ConsumerGroupHeartbeatInterval, c.ConsumerGroupSessionTimeout))
	}
	if c.GroupMaxSize < 0 {
		errs = append(errs, fmt.Errorf("group-max-size %d: must not be negative", c.GroupMaxSize))
	}
	if c.TransactionVersion < 0 || c.TransactionVersion > 2 {
		errs = append(errs, fmt.Errorf("transaction-version %d: must be 1 or 2", c.TransactionVersion))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max-connections %d: must be at least 1", c.MaxConnections))
	}
	overrides, err := kafka.ParseConnsPerIPOverrides(c.MaxConnectionsPerIPOverrides)
	if err != nil {
		errs = append(errs, fmt.Errorf("max-connections-per-ip-overrides: %w", err))
	}
	switch {
	case c.MaxConnectionsPerIP < 0 && c.MaxConnectionsPerIP != kafka.NoConnsPerIP:
		errs = append(errs, fmt.Errorf("max-connections-per-ip %d: must not be negative", c.MaxConnectionsPerIP))
	case c.MaxConnectionsPerIP == kafka.NoConnsPerIP && err == nil && len(overrides) == 0:
		errs = append(errs, errors.New("max-connections-per-ip 0: admits nobody without max-connections-per-ip-overrides"))
	}
	if c.MaxIncrementalFetchSessionCacheSlots < 0 && c.MaxIncrementalFetchSessionCacheSlots != kafka.NoFetchSessions {
		errs = append(errs, fmt.Errorf("max-incremental-fetch-session-cache-slots %d: must not be negative", c.MaxIncrementalFetchSessionCacheSlots))
	}
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node-id %d: must not be negative", c.NodeID))
	}
	if _, err := c.aclConfig(); err != nil {
		errs = append(errs, err)
	}
	if c.QuotaWindowNum < 0 {
		errs = append(errs, fmt.Errorf("quota-window-num %d: must be at least 1", c.QuotaWindowNum))
	}
	if c.QuotaWindowSizeSeconds < 0 || c.QuotaWindowSizeSeconds > 3600 {
		errs = append(errs, fmt.Errorf("quota-window-size-seconds %d: must be between 1 and 3600", c.QuotaWindowSizeSeconds))
	}
	if c.FetchReadAheadBytes > maxFetchReadAheadBytes {
		errs = append(errs, fmt.Errorf("fetch-read-ahead-bytes %s: must be at most %s", FormatBytes(c.FetchReadAheadBytes), FormatBytes(maxFetchReadAheadBytes)))
	}
	if c.FetchMaxParallelGets < 1 || c.FetchMaxParallelGets > MaxFetchMaxParallelGets {
		errs = append(errs, fmt.Errorf("fetch-max-parallel-gets %d: must be between 1 and %d", c.FetchMaxParallelGets, MaxFetchMaxParallelGets))
	}
	if c.MemoryBudget < minMemoryBudget {
		errs = append(errs, fmt.Errorf("memory-budget %s: must be at least %s", FormatBytes(c.MemoryBudget), FormatBytes(minMemoryBudget)))
	}
	if c.MaxPartitionsPerTopic < 1 || c.MaxPartitionsPerTopic > 1<<16 {
		errs = append(errs, fmt.Errorf("max-partitions-per-topic %d: must be between 1 and 65536", c.MaxPartitionsPerTopic))
	}
	if c.MaxFetchBytesPerSec < 0 {
		errs = append(errs, fmt.Errorf("max-fetch-bytes-per-sec %d: must not be negative", c.MaxFetchBytesPerSec))
	}
	if c.MaxPartitions < 1 {
		errs = append(errs, fmt.Errorf("max-partitions %d: must be at least 1", c.MaxPartitions))
	}
	if c.LogRetentionMs < -1 {
		errs = append(errs, fmt.Errorf("log-retention-ms %d: must be -1 (no limit) or positive", c.LogRetentionMs))
	}
	if c.LogRetentionBytes < -1 {
		errs = append(errs, fmt.Errorf("log-retention-bytes %d: must be -1 (no limit) or positive", c.LogRetentionBytes))
	}
	if c.LogRetentionCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("log-retention-check-interval %v: must be positive", c.LogRetentionCheckInterval))
	}
	if c.SnapshotKeep < 1 {
		errs = append(errs, fmt.Errorf("snapshot-keep %d: must be at least 1 (the newest snapshot is what a wiped agent restores)", c.SnapshotKeep))
	}
	if c.Lease < minLease || c.Lease > maxLease {
		errs = append(errs, fmt.Errorf("lease %v: must be between %v and %v", c.Lease, minLease, maxLease))
	}
	return errors.Join(errs...)
}
