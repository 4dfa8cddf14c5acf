// Package memobj is an in-memory objstore.Store for tests and simulations.
package memobj

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/strandkafka/strand/internal/objstore"
)

// Store keeps objects in a map. The zero value is not usable; call New.
type Store struct {
	mu struct {
		sync.Mutex
		objects map[string][]byte
	}
}

var _ objstore.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	s := &Store{}
	s.mu.objects = make(map[string][]byte)
	return s
}

func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp := append([]byte(nil), data...)
	s.mu.Lock()
	s.mu.objects[key] = cp
	s.mu.Unlock()
	return nil
}

func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp := append([]byte(nil), data...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.objects[key]; ok {
		return objstore.ErrExists
	}
	s.mu.objects[key] = cp
	return nil
}

func (s *Store) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	data, ok := s.mu.objects[key]
	s.mu.Unlock()
	if !ok {
		return nil, objstore.ErrNotFound
	}
	if offset < 0 || offset > int64(len(data)) {
		return nil, objstore.ErrInvalidRange
	}
	end := int64(len(data))
	if length >= 0 && offset+length < end {
		end = offset + length
	}
	// Stored slices are never mutated, but the caller owns what it gets.
	return append([]byte(nil), data[offset:end]...), nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.mu.objects, key)
	s.mu.Unlock()
	return nil
}

func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []objstore.ObjectInfo
	for k, v := range s.mu.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, objstore.ObjectInfo{Key: k, Size: int64(len(v))})
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}
