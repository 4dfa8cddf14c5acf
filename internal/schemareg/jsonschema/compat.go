package jsonschema

// Compatibility follows Confluent's json/diff package (SchemaDiff and
// its per-type diffs): the writer's schema is the "original", the
// reader's the "update", every difference found is one of Confluent's
// Difference.Type names at a JSON pointer, and the differences outside
// Confluent's STRICT set of compatible changes (its default policy)
// make the schemas incompatible. The walk is over the compiled schemas,
// so $refs (local, and to references) are already resolved.
//
// Left out, each a difference Confluent may report and this may not:
//   - dependencies / dependentRequired / dependentSchemas,
//   - unevaluatedProperties and unevaluatedItems compared between
//     versions (they count only in deciding whether a content model is
//     open), contains / minContains / maxContains,
//   - id, title, description and default changes (all compatible in
//     Confluent, so they never change the answer),
//   - siblings of a $ref in drafts 2019-09 and 2020-12: the $ref's
//     target is compared, its siblings are not; $recursiveRef and
//     $dynamicRef are not followed,
//   - duplicate subschemas of a combined type are not collapsed before
//     counting branches, and if/then/else is not compared,
//   - Confluent's "connect.type": "bytes" equivalence,
//   - Confluent's LENIENT policy, and its fixpoint pass for recursive
//     schemas: a pair met again on its own path counts as compatible
//     (as in Confluent's first pass) and results touched by such a
//     cut are not reused.

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	js "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/strandkafka/strand/internal/schemareg"
)

// maxComparisons bounds the schema pairs one Compatible call compares
// (about a second's work): oneOf/anyOf branches are compared pairwise,
// so nested combinations grow as a product. Past it the schemas are
// reported incompatible, as Confluent's are when its request times out.
const maxComparisons = 1 << 20

// Compatible reports why data written with writer cannot be read with
// reader, as Confluent's messages (nil: compatible).
func (Format) Compatible(reader, writer schemareg.Schema) []string {
	r, ok1 := reader.(*Schema)
	w, ok2 := writer.(*Schema)
	if !ok1 || !ok2 {
		return []string{"Incompatible because of different schema type"}
	}
	return incompatible(r, w, maxComparisons)
}

// incompatible is Compatible comparing at most limit schema pairs.
func incompatible(reader, writer *Schema, limit int) []string {
	c := comparer{onPath: map[pair]bool{}, memo: map[pair][]difference{}, limit: limit}
	diffs := c.compare(view{s: writer.compiled}, view{s: reader.compiled})
	var msgs []string
	seen := map[string]bool{}
	for _, d := range diffs {
		if compatibleChanges[d.typ] {
			continue
		}
		m := d.String()
		if !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	if c.exhausted {
		msgs = append(msgs, fmt.Sprintf("Incompatible: the check compared more than %d schema pairs", limit))
	}
	return msgs
}

// view is a compiled schema seen as one of Everit's schema classes,
// which Confluent's rules are written against. as is "" for the whole
// schema; a type name ("object", "integer", ...) for its constraints
// of that type; "types" for the anyOf Everit makes of a type list;
// "enum", "const", "not", "allOf", "anyOf" or "oneOf" for that
// keyword alone. A whole schema with several of these is the allOf of
// them, as in Everit. Views are comparable, so a pair of them keys the
// memo and the cycle check.
type view struct {
	s  *js.Schema
	as string
}

type kind int

const (
	kEmpty kind = iota
	kFalse
	kString
	kNumber
	kBoolean
	kNull
	kObject
	kArray
	kEnum
	kConst
	kNot
	kCombined
)

// node is a view's class and, for a combined one, its subschemas.
type node struct {
	kind      kind
	integer   bool   // kNumber: "integer"
	criterion string // kCombined: allOf, anyOf or oneOf
	subs      []view // kCombined
}

// maxRefHops bounds a chain of $refs followed to its target.
const maxRefHops = 64

// deref follows a whole schema's $ref: in drafts up to 7 its siblings
// are ignored; later, see the package's list of what is left out.
func deref(s *js.Schema) *js.Schema {
	for i := 0; i < maxRefHops && s.Ref != nil; i++ {
		s = s.Ref
	}
	return s
}

func shape(v view) node {
	s := v.s
	switch v.as {
	case "":
		if s.Bool != nil {
			if *s.Bool {
				return node{kind: kEmpty}
			}
			return node{kind: kFalse}
		}
		var parts []view
		if s.Types != nil && !s.Types.IsEmpty() {
			if ts := s.Types.ToStrings(); len(ts) == 1 {
				parts = append(parts, view{s, ts[0]})
			} else {
				parts = append(parts, view{s, "types"})
			}
		} else {
			// Without "type", Everit makes a schema of each type whose
			// keywords appear.
			if hasObjectKeywords(s) {
				parts = append(parts, view{s, "object"})
			}
			if hasArrayKeywords(s) {
				parts = append(parts, view{s, "array"})
			}
			if s.MinLength != nil || s.MaxLength != nil || s.Pattern != nil {
				parts = append(parts, view{s, "string"})
			}
			if s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil ||
				s.ExclusiveMaximum != nil || s.MultipleOf != nil {
				parts = append(parts, view{s, "number"})
			}
		}
		if s.Enum != nil {
			parts = append(parts, view{s, "enum"})
		}
		if s.Const != nil {
			parts = append(parts, view{s, "const"})
		}
		if s.Not != nil {
			parts = append(parts, view{s, "not"})
		}
		for _, c := range []struct {
			name string
			subs []*js.Schema
		}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
			if len(c.subs) > 0 {
				parts = append(parts, view{s, c.name})
			}
		}
		switch len(parts) {
		case 0:
			return node{kind: kEmpty}
		case 1:
			return shape(parts[0])
		}
		return node{kind: kCombined, criterion: "allOf", subs: parts}
	case "types":
		n := node{kind: kCombined, criterion: "anyOf"}
		for _, t := range s.Types.ToStrings() {
			n.subs = append(n.subs, view{s, t})
		}
		return n
	case "string":
		return node{kind: kString}
	case "number":
		return node{kind: kNumber}
	case "integer":
		return node{kind: kNumber, integer: true}
	case "boolean":
		return node{kind: kBoolean}
	case "null":
		return node{kind: kNull}
	case "object":
		return node{kind: kObject}
	case "array":
		return node{kind: kArray}
	case "enum":
		return node{kind: kEnum}
	case "const":
		return node{kind: kConst}
	case "not":
		return node{kind: kNot}
	}
	n := node{kind: kCombined, criterion: v.as}
	var subs []*js.Schema
	switch v.as {
	case "allOf":
		subs = s.AllOf
	case "anyOf":
		subs = s.AnyOf
	case "oneOf":
		subs = s.OneOf
	}
	for _, sub := range subs {
		n.subs = append(n.subs, view{s: sub})
	}
	return n
}

func hasObjectKeywords(s *js.Schema) bool {
	return s.Properties != nil || s.PatternProperties != nil || s.AdditionalProperties != nil ||
		s.Required != nil || s.MinProperties != nil || s.MaxProperties != nil ||
		s.PropertyNames != nil || s.UnevaluatedProperties != nil
}

func hasArrayKeywords(s *js.Schema) bool {
	return s.Items != nil || s.Items2020 != nil || s.PrefixItems != nil || s.AdditionalItems != nil ||
		s.MinItems != nil || s.MaxItems != nil || s.UniqueItems || s.UnevaluatedItems != nil
}

type pair struct{ o, u view }

// comparer is one Compatible call's walk.
type comparer struct {
	onPath    map[pair]bool
	memo      map[pair][]difference
	cut       bool // a pair on the path was met again since the flag was cleared
	steps     int
	limit     int // of steps
	exhausted bool
}

// compareOpt is SchemaDiff.compare with a schema that may be absent.
func (c *comparer) compareOpt(o, u *js.Schema) []difference {
	switch {
	case o == nil && u == nil:
		return nil
	case o == nil:
		return []difference{diff(schemaAdded)}
	case u == nil:
		return []difference{diff(schemaRemoved)}
	}
	return c.compare(view{s: o}, view{s: u})
}

// compare returns the differences from original o to update u, with
// paths relative to them.
func (c *comparer) compare(o, u view) []difference {
	if o.as == "" {
		o.s = deref(o.s)
	}
	if u.as == "" {
		u.s = deref(u.s)
	}
	p := pair{o, u}
	if ds, ok := c.memo[p]; ok {
		return ds
	}
	if c.onPath[p] {
		// A recursive schema: assume the pair compatible, as Confluent
		// does, and keep results that relied on it out of the memo.
		c.cut = true
		return nil
	}
	if c.steps >= c.limit {
		c.exhausted = true
		return nil
	}
	c.steps++
	outerCut := c.cut
	c.cut = false
	c.onPath[p] = true
	ds := c.compareTypes(o, u)
	delete(c.onPath, p)
	if !c.cut {
		c.memo[p] = ds
	}
	c.cut = c.cut || outerCut
	return ds
}

func (c *comparer) compareTypes(o, u view) []difference {
	on, un := shape(o), shape(u)
	if on.kind != kCombined && un.kind == kCombined {
		if len(un.subs) == 1 {
			if ds := c.compare(o, un.subs[0]); compatible(ds) {
				return ds
			}
		} else if un.criterion == "anyOf" || un.criterion == "oneOf" {
			for _, sub := range un.subs {
				if ds := c.compare(o, sub); compatible(ds) {
					return append(under(ds), diff(sumTypeExtended))
				}
			}
		}
	} else if on.kind == kCombined && un.kind != kCombined {
		if len(on.subs) == 1 {
			if ds := c.compare(on.subs[0], u); compatible(ds) {
				return ds
			}
		} else if on.criterion == "allOf" {
			for _, sub := range on.subs {
				if ds := c.compare(sub, u); compatible(ds) {
					return append(under(ds), diff(productTypeNarrowed))
				}
			}
		}
	}
	if on.kind != un.kind {
		// Everything reads as the empty schema; nothing is written as
		// false.
		if on.kind == kFalse || un.kind == kEmpty {
			return nil
		}
		return []difference{diff(typeChanged)}
	}
	switch on.kind {
	case kString:
		return compareString(o.s, u.s)
	case kNumber:
		ds := compareNumber(o.s, u.s)
		if on.integer != un.integer {
			if on.integer {
				ds = append(ds, diff(typeExtended))
			} else {
				ds = append(ds, diff(typeNarrowed))
			}
		}
		return ds
	case kEnum:
		return compareEnum(o.s.Enum.Values, u.s.Enum.Values)
	case kConst:
		if jsonKey(*o.s.Const) != jsonKey(*u.s.Const) {
			return []difference{diff(enumArrayChanged, "const")}
		}
		return nil
	case kNot:
		// Reversed: what the writer excludes, the reader must exclude.
		if compatible(c.compare(view{s: u.s.Not}, view{s: o.s.Not})) {
			return []difference{diff(notTypeNarrowed, "not")}
		}
		return []difference{diff(notTypeExtended, "not")}
	case kCombined:
		return c.compareCombined(on, un)
	case kObject:
		return c.compareObject(o.s, u.s)
	case kArray:
		return c.compareArray(o.s, u.s)
	}
	return nil
}

func compareString(o, u *js.Schema) []difference {
	var ds []difference
	ds = boundDiff(ds, "maxLength", intRat(o.MaxLength), intRat(u.MaxLength),
		maxLengthAdded, maxLengthRemoved, maxLengthIncreased, maxLengthDecreased)
	ds = boundDiff(ds, "minLength", intRat(o.MinLength), intRat(u.MinLength),
		minLengthAdded, minLengthRemoved, minLengthIncreased, minLengthDecreased)
	switch {
	case o.Pattern == nil && u.Pattern != nil:
		ds = append(ds, diff(patternAdded, "pattern"))
	case o.Pattern != nil && u.Pattern == nil:
		ds = append(ds, diff(patternRemoved, "pattern"))
	case o.Pattern != nil && o.Pattern.String() != u.Pattern.String():
		ds = append(ds, diff(patternChanged, "pattern"))
	}
	return ds
}

func compareNumber(o, u *js.Schema) []difference {
	var ds []difference
	ds = boundDiff(ds, "maximum", o.Maximum, u.Maximum,
		maximumAdded, maximumRemoved, maximumIncreased, maximumDecreased)
	ds = boundDiff(ds, "minimum", o.Minimum, u.Minimum,
		minimumAdded, minimumRemoved, minimumIncreased, minimumDecreased)
	ds = boundDiff(ds, "exclusiveMaximum", o.ExclusiveMaximum, u.ExclusiveMaximum,
		exclusiveMaximumAdded, exclusiveMaximumRemoved, exclusiveMaximumIncreased, exclusiveMaximumDecreased)
	ds = boundDiff(ds, "exclusiveMinimum", o.ExclusiveMinimum, u.ExclusiveMinimum,
		exclusiveMinimumAdded, exclusiveMinimumRemoved, exclusiveMinimumIncreased, exclusiveMinimumDecreased)
	om, um := o.MultipleOf, u.MultipleOf
	switch {
	case om == nil && um == nil:
	case om == nil:
		ds = append(ds, diff(multipleOfAdded, "multipleOf"))
	case um == nil:
		ds = append(ds, diff(multipleOfRemoved, "multipleOf"))
	case om.Cmp(um) == 0:
	case isMultiple(um, om):
		ds = append(ds, diff(multipleOfExpanded, "multipleOf"))
	case isMultiple(om, um):
		ds = append(ds, diff(multipleOfReduced, "multipleOf"))
	default:
		ds = append(ds, diff(multipleOfChanged, "multipleOf"))
	}
	return ds
}

// isMultiple reports whether a is a whole multiple of b.
func isMultiple(a, b *big.Rat) bool {
	if b.Sign() == 0 {
		return false
	}
	return new(big.Rat).Quo(a, b).IsInt()
}

func intRat(p *int) *big.Rat {
	if p == nil {
		return nil
	}
	return new(big.Rat).SetInt64(int64(*p))
}

// boundDiff appends the difference between two values of one keyword.
func boundDiff(ds []difference, keyword string, o, u *big.Rat, added, removed, increased, decreased string) []difference {
	switch {
	case o == nil && u == nil:
	case o == nil:
		ds = append(ds, diff(added, keyword))
	case u == nil:
		ds = append(ds, diff(removed, keyword))
	case o.Cmp(u) < 0:
		ds = append(ds, diff(increased, keyword))
	case o.Cmp(u) > 0:
		ds = append(ds, diff(decreased, keyword))
	}
	return ds
}

func compareEnum(o, u []any) []difference {
	ok, uk := map[string]bool{}, map[string]bool{}
	for _, v := range o {
		ok[jsonKey(v)] = true
	}
	for _, v := range u {
		uk[jsonKey(v)] = true
	}
	covers := func(a, b map[string]bool) bool {
		for k := range b {
			if !a[k] {
				return false
			}
		}
		return true
	}
	switch {
	case covers(uk, ok) && covers(ok, uk):
		return nil
	case covers(uk, ok):
		return []difference{diff(enumArrayExtended, "enum")}
	case covers(ok, uk):
		return []difference{diff(enumArrayNarrowed, "enum")}
	}
	return []difference{diff(enumArrayChanged, "enum")}
}

// jsonKey is a JSON value's identity: keys sorted, numbers by value.
func jsonKey(v any) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteByte('{')
		for _, k := range keys {
			b.WriteString(strconv.Quote(k) + ":" + jsonKey(v[k]) + ",")
		}
		return b.String() + "}"
	case []any:
		var b strings.Builder
		b.WriteByte('[')
		for _, e := range v {
			b.WriteString(jsonKey(e) + ",")
		}
		return b.String() + "]"
	case string:
		return strconv.Quote(v)
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	}
	if r, ok := new(big.Rat).SetString(fmt.Sprint(v)); ok {
		return r.RatString()
	}
	return fmt.Sprint(v)
}

func (c *comparer) compareCombined(o, u node) []difference {
	var ds []difference
	if o.criterion != u.criterion {
		single := func(n node) bool { return len(n.subs) == 1 }
		if u.criterion == "anyOf" || (single(o) && single(u)) ||
			(single(o) && u.criterion == "oneOf") || (single(u) && o.criterion == "allOf") {
			ds = append(ds, diff(combinedTypeExtended))
		} else {
			return []difference{diff(combinedTypeChanged)}
		}
	}
	switch {
	case len(o.subs) < len(u.subs):
		if u.criterion == "allOf" {
			ds = append(ds, diff(productTypeExtended))
		} else {
			ds = append(ds, diff(sumTypeExtended))
		}
	case len(o.subs) > len(u.subs):
		if o.criterion == "allOf" {
			ds = append(ds, diff(productTypeNarrowed))
		} else {
			ds = append(ds, diff(sumTypeNarrowed))
		}
	}
	// Every compatible (original, update) branch pair is an edge; the
	// branches match if a maximum matching covers the smaller side.
	edges := make([][][]difference, len(o.subs))
	for i, os := range o.subs {
		edges[i] = make([][]difference, len(u.subs))
		for j, us := range u.subs {
			sub := c.compare(os, us)
			if compatible(sub) {
				edges[i][j] = under(sub, o.criterion, strconv.Itoa(i))
				if edges[i][j] == nil {
					edges[i][j] = []difference{}
				}
			}
		}
	}
	matchU := maxMatching(edges, len(u.subs))
	matched := 0
	for j, i := range matchU {
		if i >= 0 {
			matched++
			ds = append(ds, edges[i][j]...)
		}
	}
	if matched < min(len(o.subs), len(u.subs)) {
		ds = append(ds, diff(combinedTypeSubschemasChanged))
	}
	return ds
}

// maxMatching is a maximum bipartite matching (augmenting paths) over
// edges[i][j] != nil; it returns, for each right vertex j, its left
// vertex or -1.
func maxMatching(edges [][][]difference, right int) []int {
	matchU := make([]int, right)
	for j := range matchU {
		matchU[j] = -1
	}
	var try func(i int, seen []bool) bool
	try = func(i int, seen []bool) bool {
		for j := range right {
			if edges[i][j] == nil || seen[j] {
				continue
			}
			seen[j] = true
			if matchU[j] < 0 || try(matchU[j], seen) {
				matchU[j] = i
				return true
			}
		}
		return false
	}
	for i := range edges {
		try(i, make([]bool, right))
	}
	return matchU
}
