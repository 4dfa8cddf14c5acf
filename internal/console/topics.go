package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/kafka"
)

// maxCreateConfigs bounds the config lines of a create form.
const maxCreateConfigs = 64

type topicRow struct {
	Name       string
	Internal   bool
	Partitions int
	Records    int64
	// Compacted: Records is the offset span, an upper bound (the list
	// does not read records; the topic page counts them).
	Compacted bool
	Bytes     int64
	// Configs are the topic's own settings (not defaults), "key=value".
	Configs []string
	Err     string
}

type topicsData struct {
	Topics []topicRow
	Total  int
	Pager
}

func (c *Console) handleTopics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	all, err := c.adm.ListTopicsWithInternal(ctx)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("listing topics: %w", err))
		return
	}
	names, n, pages := pageOf(all.Names(), r)
	d := topicsData{Total: len(all), Pager: Pager{n, pages}}
	if len(names) > 0 {
		shown := kadm.TopicDetails{}
		for _, name := range names {
			shown[name] = all[name]
		}
		starts, ends, sizes, configs := c.topicStats(r, shown)
		for _, name := range names {
			td := all[name]
			row := topicRow{Name: name, Internal: td.IsInternal, Partitions: len(td.Partitions), Compacted: isCompacted(configs, name)}
			if td.Err != nil {
				row.Err = td.Err.Error()
			}
			for p := range td.Partitions {
				s, ok1 := starts.Lookup(name, p)
				e, ok2 := ends.Lookup(name, p)
				if ok1 && ok2 && s.Err == nil && e.Err == nil {
					row.Records += e.Offset - s.Offset
				}
				row.Bytes += sizes[name][p]
			}
			for _, rc := range configs {
				if rc.Name != name {
					continue
				}
				for _, cf := range rc.Configs {
					if cf.Source == kmsg.ConfigSourceDynamicTopicConfig {
						row.Configs = append(row.Configs, cf.Key+"="+cf.MaybeValue())
					}
				}
			}
			d.Topics = append(d.Topics, row)
		}
	}
	c.render(w, r, http.StatusOK, "topics", page{Title: "Topics", Nav: "topics", Data: d})
}

// topicStats reads the offsets, stored sizes and configs of topics. A
// part that fails stays empty: the page shows what it could read.
func (c *Console) topicStats(r *http.Request, topics kadm.TopicDetails) (starts, ends kadm.ListedOffsets, sizes map[string]map[int32]int64, configs kadm.ResourceConfigs) {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	names := topics.Names()
	starts, _ = c.adm.ListStartOffsets(ctx, names...)
	ends, _ = c.adm.ListEndOffsets(ctx, names...)
	// Each agent reports the partitions it leads, so every agent is
	// asked, for these partitions only.
	set := kadm.TopicsSet{}
	for _, td := range topics {
		for p := range td.Partitions {
			set.Add(td.Topic, p)
		}
	}
	sizes = map[string]map[int32]int64{}
	dirs, _ := c.adm.DescribeAllLogDirs(ctx, set)
	for _, ds := range dirs {
		ds.EachPartition(func(dp kadm.DescribedLogDirPartition) {
			if dp.Dir == kafka.DeadLogDirName {
				return // bytes of dead objects, not the partition's
			}
			if sizes[dp.Topic] == nil {
				sizes[dp.Topic] = map[int32]int64{}
			}
			sizes[dp.Topic][dp.Partition] = dp.Size
		})
	}
	configs, _ = c.adm.DescribeTopicConfigs(ctx, names...)
	return
}

type partitionRow struct {
	Partition int32
	Leader    int32
	Start     int64
	End       int64
	// Records is the count of records; unless Counted, the offset span,
	// which for a compacted topic is an upper bound (count.go).
	Records int64
	Counted bool
	Bytes   int64
	Err     string
}

type configRow struct {
	Key, Value, Source string
	// Own: set on the topic, not a default.
	Own bool
}

type topicData struct {
	Name     string
	Internal bool
	// Partitions are this page's; NumPartitions, Records and Bytes
	// count them all.
	Partitions    []partitionRow
	NumPartitions int
	Pager
	Records   int64
	Bytes     int64
	Configs   []configRow
	ConfigErr string
	// Compacted: Records were counted by reading (count.go); Counted:
	// every partition was read to its end, else CountNote says why not.
	Compacted, Counted bool
	CountNote          string
}

func (c *Console) handleTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	tds, err := c.adm.ListTopicsWithInternal(ctx, name)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("describing topic %s: %w", name, err))
		return
	}
	td, ok := tds[name]
	if !ok || td.Err != nil {
		err := td.Err
		if err == nil {
			err = errors.New("no such topic")
		}
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("topic %s: %w", name, err))
		return
	}
	starts, ends, sizes, configs := c.topicStats(r, tds)
	d := topicData{Name: name, Internal: td.IsInternal, Compacted: isCompacted(configs, name), Counted: true}
	var counts map[int32]int64
	var counted map[int32]bool
	if d.Compacted {
		spans := map[int32][2]int64{}
		for p := range td.Partitions {
			s, _ := starts.Lookup(name, p)
			e, _ := ends.Lookup(name, p)
			if s.Err == nil && e.Err == nil {
				spans[p] = [2]int64{s.Offset, e.Offset}
			}
		}
		counts, counted = c.countRecords(r.Context(), name, spans)
	}
	for _, p := range td.Partitions.Sorted() {
		row := partitionRow{Partition: p.Partition, Leader: p.Leader, Counted: true}
		s, _ := starts.Lookup(name, p.Partition)
		e, _ := ends.Lookup(name, p.Partition)
		row.Start, row.End = s.Offset, e.Offset
		if err := errors.Join(s.Err, e.Err); err != nil {
			row.Err = err.Error()
		} else {
			row.Records = e.Offset - s.Offset
		}
		if d.Compacted {
			if row.Counted = counted[p.Partition]; row.Counted {
				row.Records = counts[p.Partition]
			} else {
				d.Counted = false
			}
		}
		row.Bytes = sizes[name][p.Partition]
		d.Records += row.Records
		d.Bytes += row.Bytes
		d.Partitions = append(d.Partitions, row)
	}
	d.NumPartitions = len(d.Partitions)
	if !d.Counted {
		d.CountNote = fmt.Sprintf("counting reads at most %d records in %s", maxCountRecords, countTimeout)
	}
	d.Partitions, d.Page, d.Pages = pageOf(d.Partitions, r)
	for _, rc := range configs {
		if rc.Err != nil {
			d.ConfigErr = rc.Err.Error()
		}
		for _, cf := range rc.Configs {
			v := cf.MaybeValue()
			if cf.Sensitive {
				v = "(sensitive)"
			}
			d.Configs = append(d.Configs, configRow{Key: cf.Key, Value: v, Source: cf.Source.String(),
				Own: cf.Source == kmsg.ConfigSourceDynamicTopicConfig})
		}
	}
	slices.SortFunc(d.Configs, func(a, b configRow) int { return strings.Compare(a.Key, b.Key) })
	c.render(w, r, http.StatusOK, "topic", page{Title: "Topic " + name, Nav: "topics", Data: d})
}

func (c *Console) handleCreateTopic(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	partitions, err := formInt(r, "partitions", 1, 1, 1<<16)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	rf, err := formInt(r, "replication_factor", -1, -1, 32767)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	configs, err := parseConfigLines(r.PostFormValue("configs"))
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	// Kafka checks the name (legal characters, length) and answers
	// INVALID_TOPIC_EXCEPTION; the console shows what it says.
	res, err := c.adm.CreateTopic(ctx, int32(partitions), int16(rf), configs, name)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("creating topic %q: %w%s", name, err, detail(res.ErrMessage)))
		return
	}
	done(w, r, Prefix+"topics/"+url.PathEscape(name), "topic created")
}

func (c *Console) handleDeleteTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	if r.PostFormValue("confirm") != name {
		c.fail(w, r, http.StatusBadRequest, errors.New("type the topic's name to confirm deleting it"))
		return
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	res, err := c.adm.DeleteTopic(ctx, name)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("deleting topic %s: %w%s", name, err, detail(res.ErrMessage)))
		return
	}
	done(w, r, Prefix+"topics", "topic "+name+" deleted")
}

// handleAlterConfig sets one config of a topic, or with an empty value
// removes the topic's own setting (IncrementalAlterConfigs DELETE), so
// the default applies again.
func (c *Console) handleAlterConfig(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	key := strings.TrimSpace(r.PostFormValue("key"))
	if key == "" {
		c.fail(w, r, http.StatusBadRequest, errors.New("name the config to change"))
		return
	}
	ac := kadm.AlterConfig{Op: kadm.DeleteConfig, Name: key}
	if v := r.PostFormValue("value"); v != "" {
		ac = kadm.AlterConfig{Op: kadm.SetConfig, Name: key, Value: &v}
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	res, err := c.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{ac}, name)
	if err == nil {
		for _, rr := range res {
			if rr.Err != nil {
				err = fmt.Errorf("%w%s", rr.Err, detail(rr.ErrMessage))
			}
		}
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("changing %s of topic %s: %w", key, name, err))
		return
	}
	done(w, r, Prefix+"topics/"+url.PathEscape(name), "config "+key+" changed")
}

// parseConfigLines reads "key=value" lines.
func parseConfigLines(s string) (map[string]*string, error) {
	out := map[string]*string{}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("config line %q: want key=value", line)
		}
		if len(out) == maxCreateConfigs {
			return nil, fmt.Errorf("at most %d configs", maxCreateConfigs)
		}
		v = strings.TrimSpace(v)
		out[strings.TrimSpace(k)] = &v
	}
	return out, nil
}

// formInt reads an integer form field within [lo, hi], def if empty.
func formInt(r *http.Request, field string, def, lo, hi int64) (int64, error) {
	s := strings.TrimSpace(r.FormValue(field))
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s %q: want a whole number from %d to %d", field, s, lo, hi)
	}
	return n, nil
}

func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
