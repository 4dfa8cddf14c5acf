package quota

import (
	"github.com/strandkafka/strand/internal/meta"
)

// Quota keys, as Kafka names them.
const (
	// KeyProducerByteRate bounds the bytes a client produces per second.
	KeyProducerByteRate = "producer_byte_rate"
	// KeyConsumerByteRate bounds the bytes a client fetches per second.
	KeyConsumerByteRate = "consumer_byte_rate"
	// KeyRequestPercentage bounds the time an agent spends handling a
	// client's requests, in percent of one request handler.
	KeyRequestPercentage = "request_percentage"
	// KeyControllerMutationRate is Kafka's bound on topic and partition
	// mutations (KIP-599); Strand does not enforce it.
	KeyControllerMutationRate = "controller_mutation_rate"
)

// Kind is what a quota bounds.
type Kind uint8

const (
	Produce Kind = iota
	Fetch
	Request
	numKinds
)

// Key is the quota key of k.
func (k Kind) Key() string {
	return [...]string{KeyProducerByteRate, KeyConsumerByteRate, KeyRequestPercentage}[k]
}

// Client is who a request came from: the principal's name (Kafka's
// user, "ANONYMOUS" before authentication) and the header's client id.
type Client struct {
	User, ClientID string
}

// Set is the quotas an agent enforces, as the metadata database holds
// them. Safe for concurrent use: it never changes once built.
type Set struct {
	byEntity map[meta.QuotaEntity]map[string]float64
	// has says which kinds any entity bounds; a kind no entity bounds
	// costs a request nothing.
	has [numKinds]bool
	// shapes says which (user part, client id part) kinds any entity
	// has, so Resolve looks up only levels that can exist.
	shapes [meta.QuotaNamed + 1][meta.QuotaNamed + 1]bool
}

// NewSet builds a Set from the database's quotas. It keeps the maps.
func NewSet(qs []meta.ClientQuota) *Set {
	s := &Set{byEntity: make(map[meta.QuotaEntity]map[string]float64, len(qs))}
	for _, q := range qs {
		s.byEntity[q.Entity] = q.Values
		if u, c := q.Entity.User.Kind, q.Entity.ClientID.Kind; u <= meta.QuotaNamed && c <= meta.QuotaNamed {
			s.shapes[u][c] = true
		}
		for k := range numKinds {
			if _, ok := q.Values[k.Key()]; ok {
				s.has[k] = true
			}
		}
	}
	return s
}

// Empty reports whether the set bounds nothing of kind k.
func (s *Set) Empty(k Kind) bool { return s == nil || !s.has[k] }

// Resolve finds the quota of kind k that applies to c, in Kafka's order
// of precedence:
//
//	/config/users/<user>/clients/<client-id>
//	/config/users/<user>/clients/<default>
//	/config/users/<user>
//	/config/users/<default>/clients/<client-id>
//	/config/users/<default>/clients/<default>
//	/config/users/<default>
//	/config/clients/<client-id>
//	/config/clients/<default>
//
// It returns the bound and the Client whose usage it bounds: the parts
// of c the entity names, a <default> part standing for c's own (so each
// user or client id under a default is measured separately), an absent
// part empty (so every client id of a user shares the user's quota).
// ok is false when no entity bounds k for c.
func (s *Set) Resolve(k Kind, c Client) (bound float64, measured Client, ok bool) {
	if s.Empty(k) {
		return 0, Client{}, false
	}
	user, client := meta.Named(c.User), meta.Named(c.ClientID)
	def, none := meta.DefaultQuotaName, meta.QuotaName{}
	order := [...]struct {
		e        meta.QuotaEntity
		measured Client
	}{
		{meta.QuotaEntity{User: user, ClientID: client}, c},
		{meta.QuotaEntity{User: user, ClientID: def}, c},
		{meta.QuotaEntity{User: user, ClientID: none}, Client{User: c.User}},
		{meta.QuotaEntity{User: def, ClientID: client}, c},
		{meta.QuotaEntity{User: def, ClientID: def}, c},
		{meta.QuotaEntity{User: def, ClientID: none}, Client{User: c.User}},
		{meta.QuotaEntity{User: none, ClientID: client}, Client{ClientID: c.ClientID}},
		{meta.QuotaEntity{User: none, ClientID: def}, Client{ClientID: c.ClientID}},
	}
	key := k.Key()
	for _, o := range order {
		if !s.shapes[o.e.User.Kind][o.e.ClientID.Kind] {
			continue
		}
		if v, ok := s.byEntity[o.e][key]; ok {
			return v, o.measured, true
		}
	}
	return 0, Client{}, false
}
