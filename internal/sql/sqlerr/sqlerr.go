// Package sqlerr owns the errors the SQL engine's packages (types, expr,
// exec, and the sources and views built on them) return for the client
// to see: a PostgreSQL SQLSTATE and message. It sits below the wire
// server so that value and expression code need not import the protocol;
// the engine turns an *Error into the wire's ErrorResponse.
package sqlerr

import (
	"errors"
	"fmt"
)

// SQLSTATEs the engine answers with (PostgreSQL's Appendix A, its names).
const (
	FeatureNotSupported              = "0A000"
	CardinalityViolation             = "21000"
	StringDataRightTruncation        = "22001"
	InvalidRowCountInLimit           = "2201W"
	CharacterNotInRepertoire         = "22021"
	NumericValueOutOfRange           = "22003"
	NullValueNotAllowed              = "22004"
	InvalidDatetimeFormat            = "22007"
	DatetimeFieldOverflow            = "22008"
	InvalidTimeZoneDisplacementValue = "22009"
	DivisionByZero                   = "22012"
	InvalidEscapeSequence            = "22025"
	InvalidParameterValue            = "22023"
	InvalidRegularExpression         = "2201B"
	InvalidArgumentForLog            = "2201E"
	InvalidArgumentForPower          = "2201F"
	InvalidTextRepresentation        = "22P02"
	UntranslatableCharacter          = "22P05"
	InvalidJSONText                  = "22032"
	SyntaxError                      = "42601"
	UndefinedColumn                  = "42703"
	UndefinedFunction                = "42883"
	UndefinedTable                   = "42P01"
	UndefinedParameter               = "42P02"
	UndefinedObject                  = "42704"
	AmbiguousColumn                  = "42702"
	AmbiguousFunction                = "42725"
	DuplicateAlias                   = "42712"
	DuplicateObject                  = "42710"
	GroupingError                    = "42803"
	DatatypeMismatch                 = "42804"
	WrongObjectType                  = "42809"
	InsufficientPrivilege            = "42501"
	CannotCoerce                     = "42846"
	IndeterminateDatatype            = "42P18"
	InvalidColumnReference           = "42P10"
	InvalidObjectDefinition          = "42P17"
	// ObjectNotInPrerequisiteState is also what PostgreSQL answers for
	// reading a materialized view that has not been populated.
	ObjectNotInPrerequisiteState = "55000"
	AdminShutdown                = "57P01"
	QueryCanceled                = "57014"
	OutOfMemory                  = "53200"
	ConfigurationLimitExceeded   = "53400"
	ProgramLimitExceeded         = "54000"
	InternalError                = "XX000"
)

// Error is an error with a SQLSTATE. Position is the 1-based character
// offset in the statement it points at (0: none).
type Error struct {
	Code     string
	Message  string
	Detail   string
	Hint     string
	Position int32
}

func (e *Error) Error() string { return e.Message + " (SQLSTATE " + e.Code + ")" }

// Errorf makes an Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotSupported is feature_not_supported.
func NotSupported(format string, args ...any) *Error {
	return Errorf(FeatureNotSupported, format, args...)
}

// At sets e's position from a 0-based parser location (-1: unknown) and
// returns e.
func (e *Error) At(location int32) *Error {
	if location >= 0 && e.Position == 0 {
		e.Position = location + 1
	}
	return e
}

// Code is err's SQLSTATE, "" for an error without one.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
