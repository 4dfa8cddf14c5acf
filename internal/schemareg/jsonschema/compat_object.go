package jsonschema

// Comparing objects (properties, required ones, open and closed content
// models) and arrays (items, tuples, bounds).

import (
	"sort"
	"strconv"

	js "github.com/santhosh-tekuri/jsonschema/v6"
)

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
