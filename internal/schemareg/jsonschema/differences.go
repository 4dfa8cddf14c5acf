package jsonschema

// The differences Confluent's json/diff names, how they read, and which
// of them its STRICT policy counts as compatible.

import (
	"fmt"
	"strings"
)

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
