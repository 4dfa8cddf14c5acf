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

// difference is one of Confluent's Difference.Type at a path relative
// to the pair of schemas it was found in.
type difference struct {
	typ  string
	path []string
}

func (d difference) pointer() string { return "#/" + strings.Join(d.path, "/") }

// String is Confluent's Difference.toString, its description filled in
// as its registry does (update first, original second), naming the
// schemas reader and writer. The unbalanced quote at the end is
// Confluent's.
func (d difference) String() string {
	return `{errorType:"` + d.typ + `", description:"` +
		fmt.Sprintf(describe(d.typ, d.pointer()), "reader", "writer") + `'}`
}

func describe(typ, path string) string {
	switch typ {
	case maxLengthAdded, minLengthAdded, patternAdded, maximumAdded, minimumAdded,
		exclusiveMaximumAdded, exclusiveMinimumAdded, multipleOfAdded,
		requiredAttributeAdded, maxPropertiesAdded, minPropertiesAdded,
		maxItemsAdded, minItemsAdded, uniqueItemsAdded,
		additionalItemsRemoved, additionalPropertiesRemoved:
		return "The keyword at path '" + path + "' in the %s schema is not present in the %s schema"
	case minLengthIncreased, minimumIncreased, exclusiveMinimumIncreased,
		minPropertiesIncreased, multipleOfExpanded, minItemsIncreased:
		return "The value at path '" + path + "' in the %s schema is more than its value in the %s schema"
	case maxLengthDecreased, maximumDecreased, maxItemsDecreased,
		exclusiveMaximumDecreased, maxPropertiesDecreased:
		return "The value at path '" + path + "' in the %s schema is less than its value in the %s schema"
	case patternChanged, multipleOfChanged:
		return "The value at path '" + path + "' is different between the %s and %s schema"
	case additionalItemsNarrowed, enumArrayNarrowed, sumTypeNarrowed, additionalPropertiesNarrowed:
		return "An array or combined type at path '" + path + "' has fewer elements in the %s schema than the %s schema"
	case productTypeExtended, sumTypeExtended, notTypeExtended:
		return "An array or combined type at path '" + path + "' has more elements in the %s schema than the %s schema"
	case typeChanged, typeNarrowed, combinedTypeChanged, combinedTypeSubschemasChanged, enumArrayChanged:
		return "A type at path '" + path + "' is different between the %s schema and the %s schema"
	case requiredPropertyAddedToOpenContentModel, requiredPropertyWithDefaultAddedToOpenContentModel,
		optionalPropertyAddedToOpenContentModel, itemAddedToOpenContentModel:
		return "The %s schema has an open content model and has a property or item at path '" + path + "' which is missing in the %s schema"
	case requiredPropertyAddedToUnopenContentModel:
		return "The %s schema has an unopen content model and has a required property at path '" + path + "' which is missing in the %s schema"
	case propertyRemovedFromClosedContentModel, itemRemovedFromClosedContentModel:
		return "The %s has a closed content model and is missing a property or item present at path '" + path + "' in the %s schema"
	case propertyRemovedNotCoveredByPartiallyOpenContentModel, itemRemovedNotCoveredByPartiallyOpenContentModel:
		return "A property or item is missing in the %s schema but present at path '" + path + "' in the %s schema and is not covered by its partially open content model"
	case propertyAddedNotCoveredByPartiallyOpenContentModel, itemAddedNotCoveredByPartiallyOpenContentModel:
		return "The %s schema has a property or item at path '" + path + "' which is missing in the %s schema and is not covered by its partially open content model"
	case schemaAdded:
		return "A schema at path '" + path + "' in the %s schema is not present in the %s schema"
	}
	// Confluent leaves the rest blank; the path is worth having.
	return "A difference at path '" + path + "' between the %s and %s schema"
}

// Confluent's Difference.Type names used here.
const (
	schemaAdded   = "SCHEMA_ADDED"
	schemaRemoved = "SCHEMA_REMOVED"
	typeExtended  = "TYPE_EXTENDED"
	typeNarrowed  = "TYPE_NARROWED"
	typeChanged   = "TYPE_CHANGED"

	maxLengthAdded     = "MAX_LENGTH_ADDED"
	maxLengthRemoved   = "MAX_LENGTH_REMOVED"
	maxLengthIncreased = "MAX_LENGTH_INCREASED"
	maxLengthDecreased = "MAX_LENGTH_DECREASED"
	minLengthAdded     = "MIN_LENGTH_ADDED"
	minLengthRemoved   = "MIN_LENGTH_REMOVED"
	minLengthIncreased = "MIN_LENGTH_INCREASED"
	minLengthDecreased = "MIN_LENGTH_DECREASED"
	patternAdded       = "PATTERN_ADDED"
	patternRemoved     = "PATTERN_REMOVED"
	patternChanged     = "PATTERN_CHANGED"

	maximumAdded              = "MAXIMUM_ADDED"
	maximumRemoved            = "MAXIMUM_REMOVED"
	maximumIncreased          = "MAXIMUM_INCREASED"
	maximumDecreased          = "MAXIMUM_DECREASED"
	minimumAdded              = "MINIMUM_ADDED"
	minimumRemoved            = "MINIMUM_REMOVED"
	minimumIncreased          = "MINIMUM_INCREASED"
	minimumDecreased          = "MINIMUM_DECREASED"
	exclusiveMaximumAdded     = "EXCLUSIVE_MAXIMUM_ADDED"
	exclusiveMaximumRemoved   = "EXCLUSIVE_MAXIMUM_REMOVED"
	exclusiveMaximumIncreased = "EXCLUSIVE_MAXIMUM_INCREASED"
	exclusiveMaximumDecreased = "EXCLUSIVE_MAXIMUM_DECREASED"
	exclusiveMinimumAdded     = "EXCLUSIVE_MINIMUM_ADDED"
	exclusiveMinimumRemoved   = "EXCLUSIVE_MINIMUM_REMOVED"
	exclusiveMinimumIncreased = "EXCLUSIVE_MINIMUM_INCREASED"
	exclusiveMinimumDecreased = "EXCLUSIVE_MINIMUM_DECREASED"
	multipleOfAdded           = "MULTIPLE_OF_ADDED"
	multipleOfRemoved         = "MULTIPLE_OF_REMOVED"
	multipleOfExpanded        = "MULTIPLE_OF_EXPANDED"
	multipleOfReduced         = "MULTIPLE_OF_REDUCED"
	multipleOfChanged         = "MULTIPLE_OF_CHANGED"

	requiredAttributeAdded            = "REQUIRED_ATTRIBUTE_ADDED"
	requiredAttributeWithDefaultAdded = "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
	requiredAttributeRemoved          = "REQUIRED_ATTRIBUTE_REMOVED"
	maxPropertiesAdded                = "MAX_PROPERTIES_ADDED"
	maxPropertiesRemoved              = "MAX_PROPERTIES_REMOVED"
	maxPropertiesIncreased            = "MAX_PROPERTIES_INCREASED"
	maxPropertiesDecreased            = "MAX_PROPERTIES_DECREASED"
	minPropertiesAdded                = "MIN_PROPERTIES_ADDED"
	minPropertiesRemoved              = "MIN_PROPERTIES_REMOVED"
	minPropertiesIncreased            = "MIN_PROPERTIES_INCREASED"
	minPropertiesDecreased            = "MIN_PROPERTIES_DECREASED"
	additionalPropertiesAdded         = "ADDITIONAL_PROPERTIES_ADDED"
	additionalPropertiesRemoved       = "ADDITIONAL_PROPERTIES_REMOVED"
	additionalPropertiesExtended      = "ADDITIONAL_PROPERTIES_EXTENDED"
	additionalPropertiesNarrowed      = "ADDITIONAL_PROPERTIES_NARROWED"

	requiredPropertyAddedToOpenContentModel              = "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
	requiredPropertyWithDefaultAddedToOpenContentModel   = "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
	optionalPropertyAddedToOpenContentModel              = "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
	propertyWithEmptySchemaAddedToOpenContentModel       = "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
	requiredPropertyAddedToUnopenContentModel            = "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
	requiredPropertyWithDefaultAddedToUnopenContentModel = "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
	optionalPropertyAddedToUnopenContentModel            = "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
	propertyRemovedFromOpenContentModel                  = "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL"
	propertyWithFalseRemovedFromClosedContentModel       = "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL"
	propertyRemovedFromClosedContentModel                = "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"
	propertyRemovedIsCoveredByPartiallyOpenContentModel  = "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	propertyRemovedNotCoveredByPartiallyOpenContentModel = "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	propertyAddedIsCoveredByPartiallyOpenContentModel    = "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	propertyAddedNotCoveredByPartiallyOpenContentModel   = "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	itemAddedToOpenContentModel                          = "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
	itemWithEmptySchemaAddedToOpenContentModel           = "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
	itemAddedToClosedContentModel                        = "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL"
	itemRemovedFromOpenContentModel                      = "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL"
	itemWithFalseRemovedFromClosedContentModel           = "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL"
	itemRemovedFromClosedContentModel                    = "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"
	itemRemovedIsCoveredByPartiallyOpenContentModel      = "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	itemRemovedNotCoveredByPartiallyOpenContentModel     = "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	itemAddedIsCoveredByPartiallyOpenContentModel        = "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	itemAddedNotCoveredByPartiallyOpenContentModel       = "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	maxItemsAdded                                        = "MAX_ITEMS_ADDED"
	maxItemsRemoved                                      = "MAX_ITEMS_REMOVED"
	maxItemsIncreased                                    = "MAX_ITEMS_INCREASED"
	maxItemsDecreased                                    = "MAX_ITEMS_DECREASED"
	minItemsAdded                                        = "MIN_ITEMS_ADDED"
	minItemsRemoved                                      = "MIN_ITEMS_REMOVED"
	minItemsIncreased                                    = "MIN_ITEMS_INCREASED"
	minItemsDecreased                                    = "MIN_ITEMS_DECREASED"
	uniqueItemsAdded                                     = "UNIQUE_ITEMS_ADDED"
	uniqueItemsRemoved                                   = "UNIQUE_ITEMS_REMOVED"
	additionalItemsAdded                                 = "ADDITIONAL_ITEMS_ADDED"
	additionalItemsRemoved                               = "ADDITIONAL_ITEMS_REMOVED"
	additionalItemsExtended                              = "ADDITIONAL_ITEMS_EXTENDED"
	additionalItemsNarrowed                              = "ADDITIONAL_ITEMS_NARROWED"
	enumArrayExtended                                    = "ENUM_ARRAY_EXTENDED"
	enumArrayNarrowed                                    = "ENUM_ARRAY_NARROWED"
	enumArrayChanged                                     = "ENUM_ARRAY_CHANGED"
	combinedTypeExtended                                 = "COMBINED_TYPE_EXTENDED"
	combinedTypeChanged                                  = "COMBINED_TYPE_CHANGED"
	productTypeExtended                                  = "PRODUCT_TYPE_EXTENDED"
	productTypeNarrowed                                  = "PRODUCT_TYPE_NARROWED"
	sumTypeExtended                                      = "SUM_TYPE_EXTENDED"
	sumTypeNarrowed                                      = "SUM_TYPE_NARROWED"
	combinedTypeSubschemasChanged                        = "COMBINED_TYPE_SUBSCHEMAS_CHANGED"
	notTypeExtended                                      = "NOT_TYPE_EXTENDED"
	notTypeNarrowed                                      = "NOT_TYPE_NARROWED"
)

// compatibleChanges is Confluent's COMPATIBLE_CHANGES_STRICT, cut to
// the types reported here. Under it, adding any property to an open
// content model is incompatible (the writer may have written that
// property with another type) unless the new property's schema is
// empty.
var compatibleChanges = setOf(
	schemaRemoved, typeExtended,
	maxLengthIncreased, maxLengthRemoved, minLengthDecreased, minLengthRemoved, patternRemoved,
	maximumIncreased, maximumRemoved, minimumDecreased, minimumRemoved,
	exclusiveMaximumIncreased, exclusiveMaximumRemoved, exclusiveMinimumDecreased, exclusiveMinimumRemoved,
	multipleOfReduced, multipleOfRemoved,
	requiredAttributeWithDefaultAdded, requiredAttributeRemoved,
	maxPropertiesIncreased, maxPropertiesRemoved, minPropertiesDecreased, minPropertiesRemoved,
	additionalPropertiesAdded, additionalPropertiesExtended,
	propertyWithEmptySchemaAddedToOpenContentModel,
	requiredPropertyWithDefaultAddedToUnopenContentModel,
	optionalPropertyAddedToUnopenContentModel,
	propertyWithFalseRemovedFromClosedContentModel,
	propertyRemovedFromOpenContentModel,
	propertyAddedIsCoveredByPartiallyOpenContentModel,
	propertyRemovedIsCoveredByPartiallyOpenContentModel,
	maxItemsIncreased, maxItemsRemoved, minItemsDecreased, minItemsRemoved,
	uniqueItemsRemoved, additionalItemsAdded, additionalItemsExtended,
	itemWithEmptySchemaAddedToOpenContentModel, itemAddedToClosedContentModel,
	itemWithFalseRemovedFromClosedContentModel, itemRemovedFromOpenContentModel,
	itemAddedIsCoveredByPartiallyOpenContentModel, itemRemovedIsCoveredByPartiallyOpenContentModel,
	enumArrayExtended,
	combinedTypeExtended, productTypeNarrowed, sumTypeExtended, notTypeNarrowed,
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func compatible(ds []difference) bool {
	for _, d := range ds {
		if !compatibleChanges[d.typ] {
			return false
		}
	}
	return true
}

// under returns ds with segs prepended to their paths, as new slices:
// ds may be memoized.
func under(ds []difference, segs ...string) []difference {
	out := make([]difference, len(ds))
	for i, d := range ds {
		p := make([]string, 0, len(segs)+len(d.path))
		out[i] = difference{typ: d.typ, path: append(append(p, segs...), d.path...)}
	}
	return out
}

func diff(typ string, segs ...string) difference { return difference{typ: typ, path: segs} }

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

func (c *comparer) compareObject(o, u *js.Schema) []difference {
	var ds []difference
	oreq, ureq := setOf(o.Required...), setOf(u.Required...)

	for _, k := range sortedKeys(o.Properties) {
		if u.Properties[k] == nil {
			continue
		}
		switch {
		case oreq[k] && !ureq[k]:
			ds = append(ds, diff(requiredAttributeRemoved, "required", k))
		case !oreq[k] && ureq[k]:
			if hasDefault(u.Properties[k]) {
				ds = append(ds, diff(requiredAttributeWithDefaultAdded, "required", k))
			} else {
				ds = append(ds, diff(requiredAttributeAdded, "required", k))
			}
		}
	}

	keys := sortedKeys(o.Properties)
	for _, k := range sortedKeys(u.Properties) {
		if o.Properties[k] == nil {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		op, up := o.Properties[k], u.Properties[k]
		at := []string{"properties", k}
		switch {
		case up == nil:
			// Only the reader's content model decides whether it can
			// do without a property the writer knows.
			if openObject(u) {
				ds = append(ds, diff(propertyRemovedFromOpenContentModel, at...))
			} else if partial := partialObject(u, k); partial != nil {
				sub := c.compare(view{s: op}, view{s: partial})
				ds = append(ds, under(sub, at...)...)
				if compatible(sub) {
					ds = append(ds, diff(propertyRemovedIsCoveredByPartiallyOpenContentModel, at...))
				} else {
					ds = append(ds, diff(propertyRemovedNotCoveredByPartiallyOpenContentModel, at...))
				}
			} else if isFalse(op) {
				ds = append(ds, diff(propertyWithFalseRemovedFromClosedContentModel, at...))
			} else {
				ds = append(ds, diff(propertyRemovedFromClosedContentModel, at...))
			}
		case op == nil:
			// Only the writer's content model decides whether it may
			// have written the reader's new property already.
			if openObject(o) {
				switch {
				case shape(view{s: deref(up)}).kind == kEmpty:
					ds = append(ds, diff(propertyWithEmptySchemaAddedToOpenContentModel, at...))
				case ureq[k] && hasDefault(up):
					ds = append(ds, diff(requiredPropertyWithDefaultAddedToOpenContentModel, at...))
				case ureq[k]:
					ds = append(ds, diff(requiredPropertyAddedToOpenContentModel, at...))
				default:
					ds = append(ds, diff(optionalPropertyAddedToOpenContentModel, at...))
				}
				continue
			}
			if partial := partialObject(o, k); partial != nil {
				sub := c.compare(view{s: partial}, view{s: up})
				ds = append(ds, under(sub, at...)...)
				if compatible(sub) {
					ds = append(ds, diff(propertyAddedIsCoveredByPartiallyOpenContentModel, at...))
				} else {
					ds = append(ds, diff(propertyAddedNotCoveredByPartiallyOpenContentModel, at...))
				}
			}
			switch {
			case ureq[k] && hasDefault(up):
				ds = append(ds, diff(requiredPropertyWithDefaultAddedToUnopenContentModel, at...))
			case ureq[k]:
				ds = append(ds, diff(requiredPropertyAddedToUnopenContentModel, at...))
			default:
				ds = append(ds, diff(optionalPropertyAddedToUnopenContentModel, at...))
			}
		default:
			ds = append(ds, under(c.compare(view{s: op}, view{s: up}), at...)...)
		}
	}

	opermits, oschema := additional(o.AdditionalProperties)
	upermits, uschema := additional(u.AdditionalProperties)
	switch {
	case opermits != upermits:
		if upermits {
			ds = append(ds, diff(additionalPropertiesAdded, "additionalProperties"))
		} else {
			ds = append(ds, diff(additionalPropertiesRemoved, "additionalProperties"))
		}
	case oschema == nil && uschema != nil:
		ds = append(ds, diff(additionalPropertiesNarrowed, "additionalProperties"))
	case oschema != nil && uschema == nil:
		ds = append(ds, diff(additionalPropertiesExtended, "additionalProperties"))
	case oschema != nil:
		ds = append(ds, under(c.compare(view{s: oschema}, view{s: uschema}), "additionalProperties")...)
	}

	ds = boundDiff(ds, "maxProperties", intRat(o.MaxProperties), intRat(u.MaxProperties),
		maxPropertiesAdded, maxPropertiesRemoved, maxPropertiesIncreased, maxPropertiesDecreased)
	ds = boundDiff(ds, "minProperties", intRat(o.MinProperties), intRat(u.MinProperties),
		minPropertiesAdded, minPropertiesRemoved, minPropertiesIncreased, minPropertiesDecreased)
	return ds
}

func sortedKeys(m map[string]*js.Schema) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasDefault(s *js.Schema) bool { return deref(s).Default != nil }

func isFalse(s *js.Schema) bool {
	s = deref(s)
	return s.Bool != nil && !*s.Bool
}

// additional splits additionalProperties or additionalItems (absent,
// a boolean or a schema) as Everit holds it: whether more are
// permitted, and their schema if one is given.
func additional(a any) (permits bool, schema *js.Schema) {
	switch a := a.(type) {
	case bool:
		return a, nil
	case *js.Schema:
		if a.Bool != nil {
			return *a.Bool, nil
		}
		return true, a
	}
	return true, nil
}

// unevaluatedOpen reports whether an unevaluatedProperties or
// unevaluatedItems leaves the content model open (absent or empty).
func unevaluatedOpen(s *js.Schema) bool {
	return s == nil || shape(view{s: deref(s)}).kind == kEmpty
}

// openObject: any property may appear with any value.
func openObject(s *js.Schema) bool {
	permits, schema := additional(s.AdditionalProperties)
	return permits && schema == nil && len(s.PatternProperties) == 0 &&
		unevaluatedOpen(s.UnevaluatedProperties)
}

// partialObject is the schema an undeclared property k must match: a
// matching patternProperties', else additionalProperties', else (with
// additionalProperties absent) unevaluatedProperties'. Nil: none, so k
// is refused (closed) or free (open).
func partialObject(s *js.Schema, k string) *js.Schema {
	res := make([]string, 0, len(s.PatternProperties))
	byRe := map[string]*js.Schema{}
	for re, sch := range s.PatternProperties {
		if re.MatchString(k) {
			res = append(res, re.String())
			byRe[re.String()] = sch
		}
	}
	if len(res) > 0 {
		// Deterministic where several patterns match.
		sort.Strings(res)
		return byRe[res[0]]
	}
	if _, schema := additional(s.AdditionalProperties); schema != nil {
		return schema
	}
	if s.AdditionalProperties == nil {
		return unevaluatedPartial(s.UnevaluatedProperties)
	}
	return nil
}

func unevaluatedPartial(s *js.Schema) *js.Schema {
	if s == nil || isFalse(s) || unevaluatedOpen(s) {
		return nil
	}
	return s
}

// arrayParts is an array schema as Everit holds it: one schema for
// every item, or a tuple and what follows it.
func arrayParts(s *js.Schema) (all *js.Schema, tuple []*js.Schema, more any) {
	if s.PrefixItems != nil {
		var more any
		if s.Items2020 != nil {
			more = s.Items2020
		}
		return nil, s.PrefixItems, more
	}
	if s.Items2020 != nil {
		return s.Items2020, nil, nil
	}
	switch items := s.Items.(type) {
	case *js.Schema:
		return items, nil, nil
	case []*js.Schema:
		return nil, items, s.AdditionalItems
	}
	return nil, nil, nil
}

func openArray(s *js.Schema, more any) bool {
	permits, schema := additional(more)
	return permits && schema == nil && unevaluatedOpen(s.UnevaluatedItems)
}

func partialArray(s *js.Schema, more any) *js.Schema {
	if _, schema := additional(more); schema != nil {
		return schema
	}
	if more == nil {
		return unevaluatedPartial(s.UnevaluatedItems)
	}
	return nil
}

func (c *comparer) compareArray(o, u *js.Schema) []difference {
	oall, otuple, omore := arrayParts(o)
	uall, utuple, umore := arrayParts(u)
	ds := under(c.compareOpt(oall, uall), "items")

	for i := 0; i < max(len(otuple), len(utuple)); i++ {
		at := []string{"items", strconv.Itoa(i)}
		switch {
		case i < len(otuple) && i < len(utuple):
			ds = append(ds, under(c.compare(view{s: otuple[i]}, view{s: utuple[i]}), at...)...)
		case i < len(otuple):
			if openArray(u, umore) {
				ds = append(ds, diff(itemRemovedFromOpenContentModel, at...))
			} else if partial := partialArray(u, umore); partial != nil {
				sub := c.compare(view{s: otuple[i]}, view{s: partial})
				ds = append(ds, under(sub, at...)...)
				if compatible(sub) {
					ds = append(ds, diff(itemRemovedIsCoveredByPartiallyOpenContentModel, at...))
				} else {
					ds = append(ds, diff(itemRemovedNotCoveredByPartiallyOpenContentModel, at...))
				}
			} else if isFalse(otuple[i]) {
				ds = append(ds, diff(itemWithFalseRemovedFromClosedContentModel, at...))
			} else {
				ds = append(ds, diff(itemRemovedFromClosedContentModel, at...))
			}
		default:
			if openArray(o, omore) {
				if shape(view{s: deref(utuple[i])}).kind == kEmpty {
					ds = append(ds, diff(itemWithEmptySchemaAddedToOpenContentModel, at...))
				} else {
					ds = append(ds, diff(itemAddedToOpenContentModel, at...))
				}
			} else if partial := partialArray(o, omore); partial != nil {
				sub := c.compare(view{s: partial}, view{s: utuple[i]})
				ds = append(ds, under(sub, at...)...)
				if compatible(sub) {
					ds = append(ds, diff(itemAddedIsCoveredByPartiallyOpenContentModel, at...))
				} else {
					ds = append(ds, diff(itemAddedNotCoveredByPartiallyOpenContentModel, at...))
				}
			} else {
				ds = append(ds, diff(itemAddedToClosedContentModel, at...))
			}
		}
	}

	opermits, oschema := additional(omore)
	upermits, uschema := additional(umore)
	switch {
	case opermits != upermits:
		if opermits {
			ds = append(ds, diff(additionalItemsRemoved, "additionalItems"))
		} else {
			ds = append(ds, diff(additionalItemsAdded, "additionalItems"))
		}
	case oschema == nil && uschema != nil:
		ds = append(ds, diff(additionalItemsNarrowed, "additionalItems"))
	case oschema != nil && uschema == nil:
		ds = append(ds, diff(additionalItemsExtended, "additionalItems"))
	case oschema != nil:
		ds = append(ds, under(c.compare(view{s: oschema}, view{s: uschema}), "additionalItems")...)
	}

	ds = boundDiff(ds, "maxItems", intRat(o.MaxItems), intRat(u.MaxItems),
		maxItemsAdded, maxItemsRemoved, maxItemsIncreased, maxItemsDecreased)
	ds = boundDiff(ds, "minItems", intRat(o.MinItems), intRat(u.MinItems),
		minItemsAdded, minItemsRemoved, minItemsIncreased, minItemsDecreased)
	if o.UniqueItems != u.UniqueItems {
		if o.UniqueItems {
			ds = append(ds, diff(uniqueItemsRemoved, "uniqueItems"))
		} else {
			ds = append(ds, diff(uniqueItemsAdded, "uniqueItems"))
		}
	}
	return ds
}
