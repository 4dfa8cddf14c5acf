package connect

import (
	"fmt"
	"slices"
	"strings"
)

// ClassSet is the connector classes an agent runs, found by
// connector.class: the full Java name, or the simple name after its
// last dot, as Connect's plugin loader accepts both. Immutable after
// Classes; safe for concurrent use.
type ClassSet struct {
	list   []Class
	byName map[string]int
}

// Classes returns the set of cs. Two classes of one name, or two whose
// simple names collide, are a wiring mistake: Classes panics.
func Classes(cs ...Class) *ClassSet {
	s := &ClassSet{byName: map[string]int{}}
	for _, c := range cs {
		if c.Name == "" || c.New == nil || c.Validate == nil {
			panic(fmt.Sprintf("connect: class %q lacks a name, New or Validate", c.Name))
		}
		if c.Secret == nil {
			c.Secret = func(string) bool { return false }
		}
		for _, n := range []string{c.Name, simpleName(c.Name)} {
			if i, dup := s.byName[n]; dup && s.list[i].Name != c.Name {
				panic(fmt.Sprintf("connect: classes %q and %q are both named %q", s.list[i].Name, c.Name, n))
			}
			s.byName[n] = len(s.list)
		}
		s.list = append(s.list, c)
	}
	slices.SortFunc(s.list, func(a, b Class) int { return strings.Compare(a.Name, b.Name) })
	for i, c := range s.list {
		s.byName[c.Name], s.byName[simpleName(c.Name)] = i, i
	}
	return s
}

// Lookup finds the class connector.class names.
func (s *ClassSet) Lookup(name string) (Class, bool) {
	if s == nil {
		return Class{}, false
	}
	i, ok := s.byName[name]
	if !ok {
		return Class{}, false
	}
	return s.list[i], true
}

// List is every class, sorted by name. The caller owns the slice.
func (s *ClassSet) List() []Class {
	if s == nil {
		return nil
	}
	return slices.Clone(s.list)
}

func simpleName(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }
