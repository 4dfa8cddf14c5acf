package meta

import (
	"crypto/sha256"
	"encoding"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// Scenarios: apply's behaviour as data, in the manner of etcd raft's
// interaction tests. Each file under testdata/ is a sequence of
// directives whose expected output follows "----"; go test -run
// TestScenarios -rewrite regenerates the outputs, and the diff is the
// review. Directives:
//
//	propose [as=<writer>]     the input's commands, one entry; prints each result
//	repeat [as=<writer>]      appends the writer's last entry again (a retried append)
//	advance ms=<n>            moves the proposer clock (entries are stamped with it)
//	state [only=<kind>,...]   renders the replicated state, key by key
//	view <what> [args]        renders a View read: lso, live-agents, offsets, txns-due, features
//	versions [as=<writer>]    the command types and versions of the writer's last entry,
//	                          as the metadata level its copy held made it encode them
//
// A command is its table name and its fields as key=value, matched to the
// Go field names without regard to case ("topic" for a TopicID field);
// the elements of its one list of records follow on lines starting with
// "-". Topics are named, never given by id. Values: numbers, true/false,
// strings (quoted when they hold spaces), a,b,c for lists, k:v,k2:v2 for
// maps. Omitted fields take the defaults in scenarioDefaults.
//
// Every scenario runs twice, the second time with the Applier writing
// back its partition cache before every command: the outputs must not
// differ, which checks the table's partitions column. Every state
// directive also checks that all the scenario's writers hold equal
// digests.
func TestScenarios(t *testing.T) {
	configs := []struct {
		name       string
		flushEvery bool
	}{{"table", false}, {"flush-every-command", true}}
	if f := flag.Lookup("rewrite"); f != nil && f.Value.String() == "true" {
		configs = configs[:1] // both would rewrite the same file
	}
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		for _, cfg := range configs {
			t.Run(cfg.name, func(t *testing.T) {
				s := newScenario(t, cfg.flushEvery)
				datadriven.RunTest(t, path, s.run)
			})
		}
	})
}

// scenarioStart is the proposer clock when a scenario starts (unix ms).
const scenarioStart = 1000

type scenario struct {
	t          *testing.T
	log        *testLog
	flushEvery bool
	replicas   map[string]*testReplica
	// last is each writer's last proposed entry, for repeat.
	last map[string]int
	now  int64
	// names displays topic ids: a topic's name, with #2, #3... for
	// later topics of a name; ids is the newest id of each name.
	names   map[TopicID]string
	ids     map[string]TopicID
	objects int
}

func newScenario(t *testing.T, flushEvery bool) *scenario {
	return &scenario{
		t: t, log: newTestLog(), flushEvery: flushEvery, now: scenarioStart,
		replicas: map[string]*testReplica{}, last: map[string]int{},
		names: map[TopicID]string{}, ids: map[string]TopicID{},
	}
}

// replica returns writer's copy, opening it on first use.
func (s *scenario) replica(writer string) *testReplica {
	r, ok := s.replicas[writer]
	if !ok {
		r = openReplica(s.t, s.log, nil, writer, func(c *testConfig) {
			c.Now = func() time.Time { return time.UnixMilli(s.now) }
			c.flushEveryCommand = s.flushEvery
		})
		s.replicas[writer] = r
	}
	return r
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	writer := "w"
	d.MaybeScanArgs(t, "as", &writer)
	switch d.Cmd {
	case "propose":
		return s.propose(t, d, writer)
	case "repeat":
		i, ok := s.last[writer]
		if !ok {
			d.Fatalf(t, "%s proposed nothing yet", writer)
		}
		s.log.entries = append(s.log.entries, s.log.entries[i])
		outs, err := s.replica(writer).play()
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		if outs[len(outs)-1].Dropped {
			return "dropped\n"
		}
		return "applied again\n"
	case "advance":
		var ms int64
		d.ScanArgs(t, "ms", &ms)
		s.now += ms
		return fmt.Sprintf("now %d\n", s.now)
	case "versions":
		i, ok := s.last[writer]
		if !ok {
			d.Fatalf(t, "%s proposed nothing yet", writer)
		}
		e, err := DecodeEntry(s.log.entries[i])
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		var b strings.Builder
		for _, rc := range e.Commands {
			fmt.Fprintf(&b, "%v v%d\n", rc.Type, rc.Version)
		}
		return b.String()
	case "state":
		var only string
		d.MaybeScanArgs(t, "only", &only)
		return s.renderState(t, writer, only)
	case "view":
		return s.renderView(t, d, writer)
	}
	d.Fatalf(t, "unknown directive %q", d.Cmd)
	return ""
}

func (s *scenario) propose(t *testing.T, d *datadriven.TestData, writer string) string {
	var cmds []Command
	lines := strings.Split(strings.TrimSpace(d.Input), "\n")
	for i := 0; i < len(lines); {
		head := lines[i]
		i++
		var elems []string
		for i < len(lines) && (strings.HasPrefix(strings.TrimSpace(lines[i]), "-") || strings.HasPrefix(strings.TrimSpace(lines[i]), "+")) {
			elems = append(elems, strings.TrimSpace(lines[i]))
			i++
		}
		c, err := s.parseCommand(head, elems)
		if err != nil {
			d.Fatalf(t, "%s: %v", head, err)
		}
		cmds = append(cmds, c)
	}
	r := s.replica(writer)
	res, err := r.ProposeBatch(testCtx(t), cmds)
	if errors.Is(err, ErrNotAtLevel) || errors.Is(err, ErrUnsupportedFeature) {
		// Refused before the log, as the driver refuses it.
		return fmt.Sprintf("refused: %v\n", err)
	}
	if err != nil {
		d.Fatalf(t, "propose: %v", err)
	}
	s.last[writer] = len(s.log.entries) - 1
	s.learnTopics(t, r)
	var b strings.Builder
	for i, c := range cmds {
		s.renderResult(&b, c, res[i])
	}
	return b.String()
}

// learnTopics names the topic ids the state holds that are new.
func (s *scenario) learnTopics(t *testing.T, r *testReplica) {
	ts, err := viewOf(t, r).Topics()
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range ts {
		if _, ok := s.names[tp.ID]; ok {
			continue
		}
		name := tp.Name
		if _, used := s.ids[name]; used {
			n := 2
			for s.nameTaken(fmt.Sprintf("%s#%d", tp.Name, n)) {
				n++
			}
			name = fmt.Sprintf("%s#%d", tp.Name, n)
		}
		s.names[tp.ID] = name
		s.ids[tp.Name] = tp.ID
	}
}

func (s *scenario) nameTaken(name string) bool {
	for _, n := range s.names {
		if n == name {
			return true
		}
	}
	return false
}

// topicID resolves a topic name as scenarios write it: the newest topic
// of that name, "name#n" for an earlier one, and for a name never created
// an id derived from it, so a scenario can address a missing topic.
func (s *scenario) topicID(name string) TopicID {
	for id, n := range s.names {
		if n == name && strings.Contains(name, "#") {
			return id
		}
	}
	if id, ok := s.ids[name]; ok {
		return id
	}
	var id TopicID
	sum := sha256.Sum256([]byte("scenario missing topic " + name))
	copy(id[:], sum[:])
	s.names[id] = name + "?"
	return id
}

func (s *scenario) topicName(id TopicID) string {
	if n, ok := s.names[id]; ok {
		return n
	}
	return id.String()
}

// scenarioDefaults are the field values a scenario need not write: the
// "none" values of the wire (-1 for no producer, generation or expiry)
// and a valid batch.
var scenarioDefaults = map[reflect.Type]any{
	reflect.TypeFor[CommitBatch](): CommitBatch{Length: 100, Records: 1, BatchCount: 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
	reflect.TypeFor[IndexEntry](): IndexEntry{Length: 100, Records: 1, BatchCount: 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
	reflect.TypeFor[OffsetCommit]():              OffsetCommit{Generation: -1, RetentionMs: -1},
	reflect.TypeFor[OffsetCommitPartition]():     OffsetCommitPartition{LeaderEpoch: -1, CommitTimestamp: -1},
	reflect.TypeFor[TxnOffsetCommit]():           TxnOffsetCommit{Generation: -1},
	reflect.TypeFor[AllocateProducerID]():        AllocateProducerID{ProducerID: -1, ProducerEpoch: -1},
	reflect.TypeFor[InitTransactionalProducer](): InitTransactionalProducer{ProducerID: -1, ProducerEpoch: -1, TimeoutMs: 60000},
	reflect.TypeFor[EndTxn]():                    EndTxn{Seq: -1},
	reflect.TypeFor[ShareAcquire]():              ShareAcquire{LockMs: 30000, DeliveryLimit: 5, MaxLocks: 2000},
	reflect.TypeFor[ShareAck]():                  ShareAck{LockMs: 30000, DeliveryLimit: 5},
	reflect.TypeFor[ShareRelease]():              ShareRelease{DeliveryLimit: 5},
}

// parseCommand parses a command line and the lines of its list.
func (s *scenario) parseCommand(head string, elems []string) (Command, error) {
	fields, err := splitFields(head)
	if err != nil || len(fields) == 0 {
		return nil, fmt.Errorf("no command (%v)", err)
	}
	typ, ok := scenarioCommandTypes()[fields[0]]
	if !ok {
		return nil, fmt.Errorf("unknown command %q", fields[0])
	}
	v := newDefault(typ)
	given, err := s.setFields(v, fields[1:])
	if err != nil {
		return nil, err
	}
	if len(elems) > 0 {
		lists := recordLists(typ)
		for _, line := range elems {
			// "-" lines go to the command's first list, "+" lines to
			// its second (SwapIndex: old entries, then new ones).
			n := 0
			if line[0] == '+' {
				n = 1
			}
			if n >= len(lists) {
				return nil, fmt.Errorf("%s has no list %d for %q", fields[0], n+1, line)
			}
			lv := v.Field(lists[n])
			ef, err := splitFields(line[1:])
			if err != nil {
				return nil, err
			}
			ev := newDefault(lv.Type().Elem())
			egiven, err := s.setFields(ev, ef)
			if err != nil {
				return nil, err
			}
			lv.Set(reflect.Append(lv, ev))
			if co, ok := v.Addr().Interface().(*CommitObject); ok {
				s.placeBatch(co, egiven)
			}
		}
	}
	if sw, ok := v.Addr().Interface().(*SwapIndex); ok && !given["objects"] {
		// The new objects are those the new entries name, each as
		// large as its last entry's end.
		for _, e := range sw.New {
			if e.ObjectKey == "" {
				continue
			}
			i := slices.IndexFunc(sw.Objects, func(o SwapObject) bool { return o.Key == e.ObjectKey })
			if i < 0 {
				sw.Objects = append(sw.Objects, SwapObject{Key: e.ObjectKey})
				i = len(sw.Objects) - 1
			}
			sw.Objects[i].Size = max(sw.Objects[i].Size, e.Position+e.Length)
		}
	}
	if co, ok := v.Addr().Interface().(*CommitObject); ok {
		if !given["objectkey"] {
			s.objects++
			co.ObjectKey = fmt.Sprintf("o%d", s.objects)
		}
		if !given["objectsize"] && len(co.Batches) > 0 {
			last := co.Batches[len(co.Batches)-1]
			co.ObjectSize = last.Position + last.Length
		}
	}
	return v.Interface().(Command), nil
}

// placeBatch puts the batch just added after the one before it, unless
// the scenario gave its position.
func (s *scenario) placeBatch(co *CommitObject, given map[string]bool) {
	n := len(co.Batches)
	if given["position"] || n < 2 {
		return
	}
	prev := co.Batches[n-2]
	co.Batches[n-1].Position = prev.Position + prev.Length
}

// scenarioCommandTypes maps table names to Go types, from the fuzz seeds
// (TestCommandTable checks there is one for every row).
func scenarioCommandTypes() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, c := range seedCommands() {
		m[c.Type().String()] = reflect.TypeOf(c)
	}
	return m
}

func newDefault(typ reflect.Type) reflect.Value {
	v := reflect.New(typ).Elem()
	if d, ok := scenarioDefaults[typ]; ok {
		v.Set(reflect.ValueOf(d))
	}
	return v
}

// recordLists are the indexes of typ's lists of structs, in field order.
func recordLists(typ reflect.Type) []int {
	var lists []int
	for i := range typ.NumField() {
		if f := typ.Field(i).Type; f.Kind() == reflect.Slice && f.Elem().Kind() == reflect.Struct {
			lists = append(lists, i)
		}
	}
	return lists
}

// splitFields splits a line at spaces outside double quotes.
func splitFields(line string) ([]string, error) {
	var fields []string
	var cur strings.Builder
	inQuote, started := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && inQuote && i+1 < len(line):
			cur.WriteByte(c)
			i++
			cur.WriteByte(line[i])
		case c == '"':
			inQuote = !inQuote
			cur.WriteByte(c)
			started = true
		case c == ' ' && !inQuote:
			if started {
				fields = append(fields, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteByte(c)
			started = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if started {
		fields = append(fields, cur.String())
	}
	return fields, nil
}

// setFields sets v's fields from key=value fields and reports which keys
// were given (lower case).
func (s *scenario) setFields(v reflect.Value, fields []string) (map[string]bool, error) {
	given := map[string]bool{}
	for _, f := range fields {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", f)
		}
		if strings.HasPrefix(val, `"`) {
			uq, err := strconv.Unquote(val)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", key, err)
			}
			val = uq
		}
		// "entity.user" reaches into a struct field.
		target, top := v, -1
		for {
			outer, inner, nested := strings.Cut(key, ".")
			if !nested {
				break
			}
			i, ok := fieldIndex(target.Type(), outer)
			if !ok {
				return nil, fmt.Errorf("%s has no field %q", target.Type().Name(), outer)
			}
			if top < 0 {
				top = i
			}
			target, key = target.Field(i), inner
		}
		i, ok := fieldIndex(target.Type(), key)
		if !ok {
			return nil, fmt.Errorf("%s has no field %q", target.Type().Name(), key)
		}
		if err := s.setValue(target.Field(i), val); err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
		if top >= 0 {
			i = top
		}
		given[strings.ToLower(v.Type().Field(i).Name)] = true
	}
	return given, nil
}

func fieldIndex(typ reflect.Type, key string) (int, bool) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if strings.EqualFold(f.Name, key) || (key == "topic" && f.Type == reflect.TypeFor[TopicID]()) {
			return i, true
		}
	}
	return 0, false
}

func (s *scenario) setValue(f reflect.Value, val string) error {
	switch f.Type() {
	case reflect.TypeFor[TopicID]():
		f.Set(reflect.ValueOf(s.topicID(val)))
		return nil
	case reflect.TypeFor[GroupKind]():
		switch val {
		case "classic":
			f.Set(reflect.ValueOf(GroupClassic))
		case "consumer":
			f.Set(reflect.ValueOf(GroupConsumer))
		case "share":
			f.Set(reflect.ValueOf(GroupShare))
		default:
			n, err := strconv.ParseUint(val, 10, 8)
			f.SetUint(n)
			return err
		}
		return nil
	case reflect.TypeFor[[]byte]():
		f.SetBytes([]byte(val))
		return nil
	case reflect.TypeFor[[]TopicID]():
		var ids []TopicID
		for _, n := range strings.Split(val, ",") {
			ids = append(ids, s.topicID(n))
		}
		f.Set(reflect.ValueOf(ids))
		return nil
	case reflect.TypeFor[ShareAckTypes]():
		var ts ShareAckTypes
		for _, n := range strings.Split(val, ",") {
			t, err := strconv.ParseUint(n, 10, 8)
			if err != nil {
				return err
			}
			ts = append(ts, byte(t))
		}
		f.Set(reflect.ValueOf(ts))
		return nil
	case reflect.TypeFor[*string]():
		f.Set(reflect.ValueOf(&val))
		return nil
	case reflect.TypeFor[[]string]():
		if val != "" {
			f.Set(reflect.ValueOf(strings.Split(val, ",")))
		}
		return nil
	case reflect.TypeFor[[]int32]():
		for _, n := range strings.Split(val, ",") {
			if n == "" {
				continue
			}
			i, err := strconv.ParseInt(n, 10, 32)
			if err != nil {
				return err
			}
			f.Set(reflect.Append(f, reflect.ValueOf(int32(i))))
		}
		return nil
	case reflect.TypeFor[[]uint64]():
		for _, n := range strings.Split(val, ",") {
			if n == "" {
				continue
			}
			i, err := strconv.ParseUint(n, 10, 64)
			if err != nil {
				return err
			}
			f.Set(reflect.Append(f, reflect.ValueOf(i)))
		}
		return nil
	case reflect.TypeFor[RelationKind]():
		for k := RelationSource; k <= RelationSink; k++ {
			if strings.ReplaceAll(k.String(), " ", "") == val {
				f.Set(reflect.ValueOf(k))
				return nil
			}
		}
		n, err := strconv.ParseUint(val, 10, 8)
		f.SetUint(n)
		return err
	case reflect.TypeFor[QuotaName]():
		// "<default>", or a name.
		if val == "<default>" {
			f.Set(reflect.ValueOf(DefaultQuotaName))
		} else {
			f.Set(reflect.ValueOf(Named(val)))
		}
		return nil
	case reflect.TypeFor[map[string]float64]():
		m := map[string]float64{}
		for _, kv := range strings.Split(val, ",") {
			k, v, _ := strings.Cut(kv, ":")
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return err
			}
			m[k] = n
		}
		f.Set(reflect.ValueOf(m))
		return nil
	case reflect.TypeFor[[]AgentEndpoint]():
		// NAME://host:port,... as Kafka writes listeners.
		for _, item := range strings.Split(val, ",") {
			name, addr, ok := strings.Cut(item, "://")
			host, port, ok2 := strings.Cut(addr, ":")
			n, err := strconv.ParseInt(port, 10, 32)
			if !ok || !ok2 || err != nil {
				return fmt.Errorf("endpoint %q is not NAME://host:port", item)
			}
			f.Set(reflect.Append(f, reflect.ValueOf(AgentEndpoint{Listener: name, Host: host, Port: int32(n)})))
		}
		return nil
	case reflect.TypeFor[map[string]string]():
		if val == "" {
			return nil
		}
		m := map[string]string{}
		for _, kv := range strings.Split(val, ",") {
			k, v, _ := strings.Cut(kv, ":")
			m[k] = v
		}
		f.Set(reflect.ValueOf(m))
		return nil
	}
	if u, ok := f.Addr().Interface().(encoding.TextUnmarshaler); ok && f.Kind() == reflect.Int8 && u.UnmarshalText([]byte(val)) == nil {
		// The wire's ACL enums, by name (topic, prefixed, read, allow)
		// or by number.
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(val)
	case reflect.Bool:
		b, err := strconv.ParseBool(val)
		f.SetBool(b)
		return err
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(val, 10, f.Type().Bits())
		f.SetInt(n)
		return err
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(val, 10, f.Type().Bits())
		f.SetUint(n)
		return err
	default:
		return fmt.Errorf("cannot write a %v in a scenario", f.Type())
	}
	return nil
}
