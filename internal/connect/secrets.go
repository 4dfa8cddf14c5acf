package connect

// Secrets: a config value its class calls secret (Class.Secret: a
// database password) is kept in the object store, under
// connect/secrets/<name>/<random id>, and the config in the shared
// log holds only a reference, ${strand-secret:<object key>}. The log is
// read by every agent, kept in snapshots and replayed by tools; the
// object store is where the cluster keeps what it already trusts to
// the operator's access rules. A reference is random, not a hash of the
// value, so that the key tells nothing about the password; a PUT of an
// unchanged password keeps its reference (it reads the stored value to
// compare), so the config, and the running task, stay as they are.
//
// The REST API shows every secret as "[hidden]", as Connect and
// Confluent do, and a PUT that sends "[hidden]" back keeps the stored
// value: a GET, edit and PUT round trip does not lose the password.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/strandkafka/strand/internal/objstore"
)

// Mask is what the REST API shows in place of a secret.
const Mask = "[hidden]"

// SecretPrefix is the object store prefix of the connectors' secrets.
const SecretPrefix = "connect/secrets/"

const (
	refOpen  = "${strand-secret:"
	refClose = "}"
	// maxSecretBytes bounds one secret, as meta bounds a config value.
	maxSecretBytes = 64 << 10
)

// ErrMaskedUnknown: a PUT sent the mask for a secret that has no
// stored value to keep.
var ErrMaskedUnknown = errors.New("a secret was sent as " + Mask + " but none is stored to keep")

// Secrets keeps secrets in an object store. Safe for concurrent use.
type Secrets struct {
	store objstore.Store
}

// NewSecrets keeps secrets in store.
func NewSecrets(store objstore.Store) *Secrets { return &Secrets{store: store} }

// secretDir is the prefix of one connector's secrets. The name is
// escaped so that no name reaches into another's prefix.
func secretDir(name string) string { return SecretPrefix + url.PathEscape(name) + "/" }

// IsRef reports whether v is a reference to a stored secret.
func IsRef(v string) bool { return strings.HasPrefix(v, refOpen) && strings.HasSuffix(v, refClose) }

func refKey(v string) string { return strings.TrimSuffix(strings.TrimPrefix(v, refOpen), refClose) }

// Seal returns cfg with every secret value of class stored and replaced
// by a reference: Mask keeps old's reference for the key (old is the
// connector's stored config, nil for a new one), a value equal to the
// one old's reference holds keeps that reference, anything else is
// stored under a new one. cfg is not changed.
func (s *Secrets) Seal(ctx context.Context, name string, class Class, cfg, old map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		out[k] = v
		if !class.Secret(k) {
			if IsRef(v) {
				return nil, fmt.Errorf("config %s: a value of the form %s...%s is reserved for secrets", k, refOpen, refClose)
			}
			continue
		}
		prev, had := old[k]
		had = had && IsRef(prev)
		if v == Mask {
			if !had {
				return nil, fmt.Errorf("config %s: %w", k, ErrMaskedUnknown)
			}
			out[k] = prev
			continue
		}
		if len(v) > maxSecretBytes {
			return nil, fmt.Errorf("config %s is longer than 64 KiB", k)
		}
		if had {
			if stored, err := s.get(ctx, prev); err == nil && stored == v {
				out[k] = prev
				continue
			}
		}
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, err
		}
		key := secretDir(name) + hex.EncodeToString(id[:])
		if err := s.store.Put(ctx, key, []byte(v)); err != nil {
			return nil, fmt.Errorf("storing secret %s: %w", k, err)
		}
		out[k] = refOpen + key + refClose
	}
	return out, nil
}

func (s *Secrets) get(ctx context.Context, ref string) (string, error) {
	b, err := s.store.Get(ctx, refKey(ref), 0, -1)
	return string(b), err
}

// Resolve returns cfg with every reference replaced by the secret it
// names. cfg is not changed.
func (s *Secrets) Resolve(ctx context.Context, cfg map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		if IsRef(v) {
			secret, err := s.get(ctx, v)
			if err != nil {
				return nil, fmt.Errorf("reading secret %s: %w", k, err)
			}
			v = secret
		}
		out[k] = v
	}
	return out, nil
}

// Masked returns cfg with every secret (every reference, and every key
// class calls secret) shown as Mask.
func Masked(class Class, cfg map[string]string) map[string]string {
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		if IsRef(v) || (class.Secret != nil && class.Secret(k)) {
			v = Mask
		}
		out[k] = v
	}
	return out
}

// sweeper deletes the secrets no connector refers to: a deleted
// connector's, and the ones a changed password replaced. An object is
// deleted only when two sweeps in a row found it unreferenced, since a
// PUT stores its secret before proposing the config that refers to it.
type sweeper struct {
	candidates map[string]bool
}

// sweep lists the secrets, and deletes those unreferenced now and at
// the previous sweep; live is every reference the connectors hold.
func (sw *sweeper) sweep(ctx context.Context, s *Secrets, live map[string]bool) (deleted int, err error) {
	objs, err := s.store.List(ctx, SecretPrefix)
	if err != nil {
		return 0, err
	}
	next := map[string]bool{}
	for _, o := range objs {
		if live[o.Key] {
			continue
		}
		if sw.candidates[o.Key] {
			if err := s.store.Delete(ctx, o.Key); err != nil {
				return deleted, err
			}
			deleted++
			continue
		}
		next[o.Key] = true
	}
	sw.candidates = next
	return deleted, nil
}
