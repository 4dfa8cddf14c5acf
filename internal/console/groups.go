package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

type groupRow struct {
	Name, State, ProtocolType string
	// Type is classic, consumer or share (ListGroups v5+).
	Type        string
	Coordinator int32
	Members     int
	Err         string
}

type groupsData struct {
	Groups []groupRow
	Total  int
	Pager
}

func (c *Console) handleGroups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	listed, err := c.adm.ListGroups(ctx)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("listing groups: %w", err))
		return
	}
	rows, n, pages := pageOf(listed.Sorted(), r)
	d := groupsData{Total: len(listed), Pager: Pager{n, pages}}
	names := make([]string, len(rows))
	for i, g := range rows {
		names[i] = g.Group
	}
	// Member counts are in DescribeGroups only (ShareGroupDescribe for
	// share groups); for this page's groups.
	var classic, share []string
	for _, g := range rows {
		if g.GroupType == "share" {
			share = append(share, g.Group)
		} else {
			classic = append(classic, g.Group)
		}
	}
	described, _ := c.adm.DescribeGroups(ctx, classic...)
	var shareDescribed kadm.DescribedShareGroups
	if len(share) > 0 {
		shareDescribed, _ = c.adm.DescribeShareGroups(ctx, share...)
	}
	for _, g := range rows {
		row := groupRow{Name: g.Group, State: g.State, ProtocolType: g.ProtocolType, Type: g.GroupType, Coordinator: g.Coordinator}
		if sg, ok := shareDescribed[g.Group]; ok {
			row.Members = len(sg.Members)
			if sg.Err != nil {
				row.Err = sg.Err.Error()
			} else if sg.GroupState != "" {
				row.State = sg.GroupState
			}
		} else if dg, ok := described[g.Group]; ok {
			row.Members = len(dg.Members)
			if dg.Err != nil {
				row.Err = dg.Err.Error()
			} else if dg.State != "" {
				row.State = dg.State
			}
		}
		d.Groups = append(d.Groups, row)
	}
	c.render(w, r, http.StatusOK, "groups", page{Title: "Consumer groups", Nav: "groups", Data: d})
}

type memberRow struct {
	MemberID, InstanceID, ClientID, ClientHost string
	// Assigned is "topic: partitions" per assigned topic.
	Assigned []string
}

type lagRow struct {
	Topic             string
	Partition         int32
	Committed         int64 // -1: no commit
	Start, End, Lag   int64
	Member, Err       string
	HasCommit, HasLag bool
}

type groupData struct {
	Name, State, Protocol, ProtocolType string
	Coordinator                         int32
	Members                             []memberRow
	Lag                                 []lagRow
	TotalLag                            int64
	// Cut: more partitions than maxLagRows.
	Cut bool
	// Topics are the topics the group has offsets or assignments in,
	// for the reset form.
	Topics []string
	Empty  bool
	Err    string
}

func (c *Console) handleGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	if c.isShareGroup(r, name) {
		c.handleShareGroup(w, r, name)
		return
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	lags, err := c.adm.Lag(ctx, name)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("group %s: %w", name, err))
		return
	}
	gl, ok := lags[name]
	if !ok {
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("group %s: not described", name))
		return
	}
	if gl.State == "Dead" {
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("group %s does not exist", name))
		return
	}
	d := groupData{Name: name, State: gl.State, Protocol: gl.Protocol, ProtocolType: gl.ProtocolType,
		Coordinator: gl.Coordinator.NodeID, Empty: gl.State == "Empty"}
	if err := gl.Error(); err != nil {
		d.Err = err.Error()
	}
	for _, m := range gl.Members {
		row := memberRow{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
		if m.InstanceID != nil {
			row.InstanceID = *m.InstanceID
		}
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				ps := make([]string, len(t.Partitions))
				for i, p := range t.Partitions {
					ps[i] = fmt.Sprint(p)
				}
				row.Assigned = append(row.Assigned, t.Topic+": "+strings.Join(ps, ", "))
			}
		}
		d.Members = append(d.Members, row)
	}
	topics := map[string]bool{}
	for _, l := range gl.Lag.Sorted() {
		topics[l.Topic] = true
		if len(d.Lag) == maxLagRows {
			d.Cut = true
			continue
		}
		row := lagRow{Topic: l.Topic, Partition: l.Partition, Committed: l.Commit.At, Start: l.Start.Offset,
			End: l.End.Offset, Lag: l.Lag, HasCommit: l.Commit.At >= 0, HasLag: l.Lag >= 0}
		if l.Member != nil {
			row.Member = l.Member.ClientID + " " + l.Member.MemberID
		}
		if l.Err != nil {
			row.Err = l.Err.Error()
		}
		if row.HasLag {
			d.TotalLag += l.Lag
		}
		d.Lag = append(d.Lag, row)
	}
	for t := range topics {
		d.Topics = append(d.Topics, t)
	}
	slices.Sort(d.Topics)
	c.render(w, r, http.StatusOK, "group", page{Title: "Group " + name, Nav: "groups", Data: d})
}

// handleResetOffsets commits new offsets for one topic of a group (all
// its partitions, or one): the earliest, the latest, or a given offset
// (clamped into the log).
// As Kafka's kafka-consumer-groups --reset-offsets, only for a group
// without members: a live member would overwrite the reset with its next
// commit, and the coordinator refuses commits from outside the
// generation anyway.
func (c *Console) handleResetOffsets(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	topic := strings.TrimSpace(r.PostFormValue("topic"))
	to := r.PostFormValue("to")
	if topic == "" {
		c.fail(w, r, http.StatusBadRequest, errors.New("name the topic whose offsets to reset"))
		return
	}
	part, err := formInt(r, "partition", -1, -1, 1<<16)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	dgs, err := c.adm.DescribeGroups(ctx, name)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if dg := dgs[name]; dg.Err != nil || (dg.State != "Empty" && dg.State != "Dead") {
		if dg.Err != nil {
			c.fail(w, r, http.StatusBadGateway, dg.Err)
		} else {
			c.fail(w, r, http.StatusConflict, fmt.Errorf("group %s is %s with %d members: offsets can be reset only while it is empty (stop its consumers first)", name, dg.State, len(dg.Members)))
		}
		return
	}
	if to != "earliest" && to != "latest" && to != "offset" {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("reset to %q: want earliest, latest or offset", to))
		return
	}
	at := int64(-1)
	if to == "offset" {
		if at, err = formInt(r, "offset", -1, 0, 1<<62); err != nil || at < 0 {
			c.fail(w, r, http.StatusBadRequest, errors.Join(errors.New("give the offset to reset to"), err))
			return
		}
	}
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	ends, eerr := c.adm.ListEndOffsets(ctx, topic)
	if eerr == nil {
		eerr = ends.Error()
	}
	if err = errors.Join(err, eerr); err != nil {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("listing offsets of %s: %w", topic, err))
		return
	}
	offsets := kadm.Offsets{}
	for _, end := range ends[topic] {
		if part >= 0 && end.Partition != int32(part) {
			continue
		}
		start, _ := starts.Lookup(topic, end.Partition)
		o := end.Offset
		switch to {
		case "earliest":
			o = start.Offset
		case "offset":
			// Into the log, as `strand group reset-offsets` and
			// Kafka's tool clamp: past its end a consumer would get
			// OFFSET_OUT_OF_RANGE and reset by its own policy.
			o = max(start.Offset, min(at, end.Offset))
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: end.Partition, At: o, LeaderEpoch: -1})
	}
	if len(offsets) == 0 {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("topic %s has no partition %d", topic, part))
		return
	}
	res, err := c.adm.CommitOffsets(ctx, name, offsets)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("committing offsets for %s: %w", name, err))
		return
	}
	done(w, r, Prefix+"groups/"+url.PathEscape(name), "offsets of "+topic+" reset to "+to)
}
