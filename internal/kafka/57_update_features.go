// UpdateFeatures: v0-2 (KIP-584)
//   - Finalizes feature levels in the shared log (meta.FinalizeFeatures):
//     strand.metadata.version, Strand's own, says which command versions
//     agents write to the log, so raising it lets a new build's commands
//     in once every agent reads them; transaction.version and
//     group.version are Kafka's (ApiVersions reports all three).
//   - Validated as Kafka's controller validates (FeatureControlManager),
//     in request order, with its wording: an unknown upgrade type, a
//     negative level, a level outside the range this agent or any live
//     agent supports, a lower level with upgrade type UPGRADE or a higher
//     one with a downgrade type are INVALID_UPDATE_VERSION.
//     strand.metadata.version never goes down (the log may hold what
//     builds of the lower level cannot read), as metadata.version refuses
//     a downgrade that might lose metadata; transaction.version and
//     group.version need strand.metadata.version 2, the level where the
//     log holds levels, as Kafka's features depend on metadata.version.
//   - Live agents are the agent table's. An agent registered at
//     strand.metadata.version 2 carries its ranges in the log; one
//     registered at level 1 carries none and is asked with ApiVersions
//     (Deps.Features): one that names no strand.metadata.version is a
//     build before levels, which supports level 1 only, and one that
//     does not answer may not support the update, which is refused.
//     Apply checks again what the log knows, so an agent that registers
//     meanwhile with narrower ranges still refuses it.
//   - Atomic, as Kafka 4's controller: the first refused feature fails
//     the request with a top-level INVALID_UPDATE_VERSION ("The update
//     failed for all features since the following feature had an
//     error: ...") and no results; success lists every feature with
//     NONE at v0-1, and nothing at v2, which has no results.
//   - v0: AllowDowngrade means SAFE_DOWNGRADE, else UPGRADE, as Kafka
//     maps it. v1+: ValidateOnly checks everything and writes nothing.
//     A feature named twice takes its last entry, as Kafka's map does.
//   - TimeoutMillis > 0 bounds the asking and the proposal; past it the
//     answer is REQUEST_TIMED_OUT (the levels may still change).
//   - ACLs (authz.go): Alter on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(57, 0, 2, handleUpdateFeatures) }

// Kafka's FeatureUpdate.UpgradeType codes.
const (
	upgradeTypeUpgrade         = 1
	upgradeTypeSafeDowngrade   = 2
	upgradeTypeUnsafeDowngrade = 3
)

// updateFailedPrefix leads the top-level message of a refused request,
// as QuorumController writes it.
const updateFailedPrefix = "The update failed for all features since the following feature had an error: "

// featureUpdate is one entry of the request, in Kafka's terms.
type featureUpdate struct {
	name        string
	level       int16
	upgradeType int8
}

func handleUpdateFeatures(ctx context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = e.Code, strPtr(msg)
		return resp, nil
	}
	if !r.authz().cluster(kmsg.ACLOperationAlter) {
		return fail(kerr.ClusterAuthorizationFailed, "")
	}
	ctx, cancel := withTimeoutMillis(ctx, req.TimeoutMillis)
	defer cancel()
	// Validate against the newest levels and agent table, not this
	// copy's, which may lag the log.
	if err := db.Sync(ctx); err != nil {
		return fail(proposeErrCode(err), err.Error())
	}
	v := db.View()
	logFeatures, err := v.Features()
	var agents []meta.AgentInfo
	if err == nil {
		agents, err = v.LiveAgents()
	}
	v.Close()
	if err != nil {
		return fail(kerr.UnknownServerError, err.Error())
	}

	updates := featureUpdates(req)
	chk := featureCheck{d: r.Deps, cur: r.Deps.reported(logFeatures), agents: agents, probed: map[int32]probeResult{}}
	for _, u := range updates {
		if msg := chk.validate(ctx, u, updates); msg != "" {
			return fail(kerr.InvalidUpdateVersion, updateFailedPrefix+msg)
		}
	}
	if len(updates) > 0 && !req.ValidateOnly {
		cmd := meta.FinalizeFeatures{}
		for _, u := range updates {
			cmd.Features = append(cmd.Features, meta.FeatureLevel{Name: u.name, Level: u.level})
		}
		slices.SortFunc(cmd.Features, func(a, b meta.FeatureLevel) int { return strings.Compare(a.Name, b.Name) })
		out := proposeAll(ctx, db, []meta.Command{cmd})[0]
		e, msg := out.code()
		if errors.Is(out.err, meta.ErrNotAtLevel) || errors.Is(out.err, meta.ErrUnsupportedFeature) {
			e = kerr.InvalidUpdateVersion // the levels moved since the check
		}
		if e == kerr.InvalidUpdateVersion {
			msg = updateFailedPrefix + msg
		}
		if e != nil {
			return fail(e, msg)
		}
	}
	if req.Version <= 1 {
		for _, fu := range req.FeatureUpdates {
			rr := kmsg.NewUpdateFeaturesResponseResult()
			rr.Feature = fu.Feature
			rr.ErrorMessage = strPtr("NONE") // Errors.NONE.message(), as Kafka fills it
			resp.Results = append(resp.Results, rr)
		}
	}
	return resp, nil
}

// featureUpdates reads the request's entries, a name given twice taking
// its last entry at the place of its first.
func featureUpdates(req *kmsg.UpdateFeaturesRequest) []featureUpdate {
	var us []featureUpdate
	at := map[string]int{}
	for _, fu := range req.FeatureUpdates {
		u := featureUpdate{name: fu.Feature, level: fu.MaxVersionLevel, upgradeType: fu.UpgradeType}
		if req.Version == 0 {
			u.upgradeType = upgradeTypeUpgrade
			if fu.AllowDowngrade {
				u.upgradeType = upgradeTypeSafeDowngrade
			}
		}
		if i, ok := at[u.name]; ok {
			us[i] = u
			continue
		}
		at[u.name] = len(us)
		us = append(us, u)
	}
	return us
}

// featureCheck validates updates against the levels the agent reports
// and the live agents.
type featureCheck struct {
	d      *Deps
	cur    clusterFeatures
	agents []meta.AgentInfo
	// probed caches what each agent registered without ranges answered.
	probed map[int32]probeResult
}

type probeResult struct {
	ranges []meta.FeatureRange
	err    error
}

// validate returns why u is refused, in Kafka's words, or "".
func (c *featureCheck) validate(ctx context.Context, u featureUpdate, all []featureUpdate) string {
	invalid := func(format string, args ...any) string {
		return fmt.Sprintf("Invalid update version %d for feature %s. %s", u.level, u.name, fmt.Sprintf(format, args...))
	}
	if u.upgradeType < upgradeTypeUpgrade || u.upgradeType > upgradeTypeUnsafeDowngrade {
		return invalid("The controller does not support the given upgrade type.")
	}
	if u.level < 0 {
		return invalid("A feature version cannot be less than 0.")
	}
	if why := c.notSupported(ctx, u); why != "" {
		return invalid("%s", why)
	}
	cur := c.cur.level(u.name)
	switch {
	case u.level < cur && u.upgradeType == upgradeTypeUpgrade:
		return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	case u.level > cur && u.upgradeType != upgradeTypeUpgrade:
		return invalid("Can't downgrade to a newer version.")
	}
	if u.name == meta.FeatureMetadata {
		switch {
		case u.level < cur && u.upgradeType == upgradeTypeUnsafeDowngrade:
			return fmt.Sprintf("Invalid %s %d. Unsafe metadata downgrade is not supported in this version.", u.name, u.level)
		case u.level < cur:
			return fmt.Sprintf("Invalid %s %d. Refusing to perform the requested downgrade: the log may hold commands that builds supporting only %d cannot read.",
				u.name, u.level, u.level)
		}
		return ""
	}
	// A level of another feature is a record in the log, which
	// strand.metadata.version 2 introduced.
	metaLevel := c.cur.level(meta.FeatureMetadata)
	for _, o := range all {
		if o.name == meta.FeatureMetadata {
			metaLevel = o.level
		}
	}
	if metaLevel < meta.MetadataLevel2 {
		return invalid("%s could not be set to %d because it depends on %s level %d", u.name, u.level, meta.FeatureMetadata, meta.MetadataLevel2)
	}
	return ""
}

// notSupported says which agent does not support u, or "": this agent by
// its build, the others by what they registered or, lacking that, what
// they answer.
func (c *featureCheck) notSupported(ctx context.Context, u featureUpdate) string {
	self := c.d.Cluster.NodeID
	local := fmt.Sprintf("Local agent %d", self)
	r, known := meta.SupportedRange(u.name)
	switch {
	case !known:
		// Kafka 4 knows the features of its release and no others.
		return local + " does not support this feature."
	case !r.Contains(u.level):
		return rangeReason(local, r)
	}
	for _, ag := range c.agents {
		if ag.NodeID == self {
			continue
		}
		ranges := ag.Features
		if len(ranges) == 0 {
			p := c.probe(ctx, ag)
			if p.err != nil {
				return fmt.Sprintf("Agent %d registered without its supported features and did not answer ApiVersions at %s (%v), so it may not support this feature.",
					ag.NodeID, hostPort(ag.Host, ag.Port), p.err)
			}
			ranges = p.ranges
		}
		r := featureRange(ranges, u.name)
		if !r.Contains(u.level) {
			return rangeReason(fmt.Sprintf("Agent %d", ag.NodeID), r)
		}
	}
	return ""
}

// probe asks ag once per request.
func (c *featureCheck) probe(ctx context.Context, ag meta.AgentInfo) probeResult {
	if p, ok := c.probed[ag.NodeID]; ok {
		return p
	}
	var p probeResult
	if c.d.Features == nil {
		p.err = fmt.Errorf("this agent cannot ask other agents")
	} else {
		p.ranges, p.err = c.d.Features.SupportedFeatures(ctx, ag.Host, ag.Port)
	}
	if p.err == nil {
		if _, ok := findFeature(p.ranges, meta.FeatureMetadata); !ok {
			// A build before feature levels: it writes, and reads,
			// level 1.
			p.ranges = append(slices.Clone(p.ranges), meta.FeatureRange{Name: meta.FeatureMetadata, Min: meta.MetadataLevel1, Max: meta.MetadataLevel1})
		}
	}
	c.probed[ag.NodeID] = p
	return p
}

// featureRange is name's range in rs: 0-0 for one not listed, which
// Kafka treats as not supported.
func featureRange(rs []meta.FeatureRange, name string) meta.FeatureRange {
	r, _ := findFeature(rs, name)
	return r
}

func findFeature(rs []meta.FeatureRange, name string) (meta.FeatureRange, bool) {
	for _, r := range rs {
		if r.Name == name {
			return r, true
		}
	}
	return meta.FeatureRange{Name: name}, false
}

// rangeReason is QuorumFeatures.reasonNotSupported's wording.
func rangeReason(who string, r meta.FeatureRange) string {
	if r.Max == 0 {
		return who + " does not support this feature."
	}
	return fmt.Sprintf("%s only supports versions %s", who, r)
}

func hostPort(host string, port int32) string { return fmt.Sprintf("%s:%d", host, port) }
