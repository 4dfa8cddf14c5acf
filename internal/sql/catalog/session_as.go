package catalog

import (
	"context"

	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/sql/pgwire"
)

// NewSessionAs is NewSession for a caller that is not a SQL login: the
// web console's SQL page runs its queries as the console's caller (the
// admin token, a client certificate's principal), through the same
// catalog and engine, authorized as p by Config.Authorize.
func (e *Engine) NewSessionAs(ctx context.Context, info pgwire.SessionInfo, p auth.Principal) (pgwire.Session, error) {
	s, err := e.NewSession(ctx, info)
	if err != nil {
		return nil, err
	}
	s.(*session).who.Principal = p
	return s, nil
}
