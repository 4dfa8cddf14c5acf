// ListConfigResources: v0-1 (KIP-1000's ListClientMetricsResources,
// renamed and widened by KIP-1142)
//   - v0 lists CLIENT_METRICS resources only; v1 takes ResourceTypes
//     (empty: every type it supports) among TOPIC, BROKER, BROKER_LOGGER,
//     CLIENT_METRICS and GROUP, and names each resource's type. Another
//     type is UNSUPPORTED_VERSION, as Kafka answers.
//   - Topics are every topic; brokers and broker loggers every live
//     agent (each serves its BROKER_LOGGER resource); groups every group
//     the metadata holds. CLIENT_METRICS: none. Strand's client
//     telemetry subscription is the agent's flags
//     (--client-telemetry-*, docs/protocol.md), not a config resource.
//   - Sorted by type, then name.
//   - ACLs (authz.go): DescribeConfigs on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED, as Kafka.

package kafka

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(74, 0, 1, handleListConfigResources) }

func handleListConfigResources(_ context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if code := r.authz().clusterCode(kmsg.ACLOperationDescribeConfigs); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	supported := []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	if req.Version >= 1 {
		supported = []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker,
			kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeGroupConfig}
	}
	wanted := supported
	if req.Version >= 1 && len(req.ResourceTypes) > 0 {
		wanted = nil
		for _, t := range req.ResourceTypes {
			if !slices.Contains(supported, kmsg.ConfigResourceType(t)) {
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				return resp, nil
			}
			wanted = append(wanted, kmsg.ConfigResourceType(t))
		}
	}
	view := db.View()
	defer view.Close()
	add := func(t kmsg.ConfigResourceType, names []string) {
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			cr := kmsg.NewListConfigResourcesResponseConfigResource()
			cr.Name, cr.Type = name, int8(t)
			resp.ConfigResources = append(resp.ConfigResources, cr)
		}
	}
	slices.Sort(wanted)
	for _, t := range slices.Compact(wanted) {
		var names []string
		switch t {
		case kmsg.ConfigResourceTypeTopic:
			ts, err := view.Topics()
			if err != nil {
				return nil, fmt.Errorf("kafka: list config resources: listing topics: %w", err)
			}
			for _, tp := range ts {
				names = append(names, tp.Name)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			for _, b := range r.Deps.brokers(r.Conn) {
				names = append(names, strconv.Itoa(int(b.NodeID)))
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			gs, err := view.Groups()
			if err != nil {
				return nil, fmt.Errorf("kafka: list config resources: listing groups: %w", err)
			}
			for _, g := range gs {
				names = append(names, g.Name)
			}
		}
		add(t, names)
	}
	return resp, nil
}
