package pgwire

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// The SQLSTATEs this server and the engines behind it answer with,
// PostgreSQL's codes (Appendix A of its manual) under its names.
const (
	CodeSuccessfulCompletion         = "00000"
	CodeProtocolViolation            = "08P01"
	CodeFeatureNotSupported          = "0A000"
	CodeInvalidParameterValue        = "22023"
	CodeInvalidTextRepresentation    = "22P02"
	CodeInvalidBinaryRepresentation  = "22P03"
	CodeNumericValueOutOfRange       = "22003"
	CodeDivisionByZero               = "22012"
	CodeInvalidCursorName            = "34000"
	CodeInvalidSQLStatementName      = "26000"
	CodeActiveSQLTransaction         = "25001"
	CodeNoActiveSQLTransaction       = "25P01"
	CodeInFailedSQLTransaction       = "25P02"
	CodeInvalidAuthorization         = "28000"
	CodeInvalidPassword              = "28P01"
	CodeSyntaxError                  = "42601"
	CodeInsufficientPrivilege        = "42501"
	CodeInvalidSchemaName            = "3F000"
	CodeDuplicateTable               = "42P07"
	CodeWrongObjectType              = "42809"
	CodeDependentObjectsStillExist   = "2BP01"
	CodeObjectNotInPrerequisiteState = "55000"
	CodeInvalidObjectDefinition      = "42P17"
	CodeUndefinedTable               = "42P01"
	CodeUndefinedParameter           = "42P02"
	CodeUndefinedObject              = "42704"
	CodeUndefinedFunction            = "42883"
	CodeDuplicateCursor              = "42P03"
	CodeDuplicatePreparedStatement   = "42P05"
	CodeDatatypeMismatch             = "42804"
	CodeCannotCoerce                 = "42846"
	CodeTooManyConnections           = "53300"
	CodeProgramLimitExceeded         = "54000"
	CodeQueryCanceled                = "57014"
	CodeAdminShutdown                = "57P01"
	CodeInternalError                = "XX000"
)

// Error is an error the client sees as PostgreSQL's ErrorResponse: a
// SQLSTATE, a message, and optionally a detail, a hint, and the 1-based
// character position in the statement it points at. It is the engine
// packages' sqlerr.Error, so an error from types, expr or exec reaches
// the client with its SQLSTATE unconverted; anything else reaches the
// client as XX000 internal_error.
type Error = sqlerr.Error

// Errorf makes an Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error { return sqlerr.Errorf(code, format, args...) }

// NotSupported is feature_not_supported naming what is not, yet.
func NotSupported(format string, args ...any) *Error { return sqlerr.NotSupported(format, args...) }

// errQueryCanceled is the cause a CancelRequest gives the running
// statement's context.
var errQueryCanceled = errors.New("canceling statement due to user request")

// asError turns any error from an engine or this package into the Error
// the client is sent; ctx is the statement's, whose cause tells a
// cancellation from other failures.
func asError(ctx context.Context, err error) *Error {
	var e *Error
	var pe *parse.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &pe):
		return &Error{Code: CodeSyntaxError, Message: pe.Message, Position: int32(pe.Position)}
	case errors.Is(err, parse.ErrTooLong):
		return &Error{Code: CodeProgramLimitExceeded, Message: err.Error()}
	case ctx != nil && errors.Is(context.Cause(ctx), errQueryCanceled):
		return &Error{Code: CodeQueryCanceled, Message: errQueryCanceled.Error()}
	default:
		return &Error{Code: CodeInternalError, Message: err.Error()}
	}
}

// response is e as the message; fatal ones end the connection.
func response(e *Error, fatal bool) *pgproto3.ErrorResponse {
	sev := "ERROR"
	if fatal {
		sev = "FATAL"
	}
	return &pgproto3.ErrorResponse{
		Severity:            sev,
		SeverityUnlocalized: sev,
		Code:                e.Code,
		Message:             e.Message,
		Detail:              e.Detail,
		Hint:                e.Hint,
		Position:            e.Position,
	}
}

// ErrorOf is err as the client would be sent it: an in-process caller
// of an engine (the web console's SQL page) reports what psql would.
func ErrorOf(err error) *Error { return asError(nil, err) }
