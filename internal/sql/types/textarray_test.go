package types

import (
	"slices"
	"testing"
)

func strs(ss ...any) []*string {
	var out []*string
	for _, s := range ss {
		if s == nil {
			out = append(out, nil)
			continue
		}
		v := s.(string)
		out = append(out, &v)
	}
	return out
}

func show(es []*string) []string {
	var out []string
	for _, e := range es {
		if e == nil {
			out = append(out, "<NULL>")
		} else {
			out = append(out, *e)
		}
	}
	return out
}

// TestTextArray: array literals as PostgreSQL's array_out writes them
// (quoting what needs it) and array_in reads them.
func TestTextArray(t *testing.T) {
	for _, c := range []struct {
		elems []*string
		text  string
	}{
		{strs(), "{}"},
		{strs("a", "b"), "{a,b}"},
		{strs("a b", "", "NULL", nil, `q"\`), `{"a b","","NULL",NULL,"q\"\\"}`},
		{strs("{x}", "1,2"), `{"{x}","1,2"}`},
	} {
		if got := FormatTextArray(c.elems); got != c.text {
			t.Errorf("format %v: %s, want %s", show(c.elems), got, c.text)
		}
		back, err := ParseTextArray(c.text)
		if err != nil || !slices.Equal(show(back), show(c.elems)) {
			t.Errorf("parse %s: %v %v, want %v", c.text, show(back), err, show(c.elems))
		}
	}
	if got, err := ParseTextArray(" { 1 , 2 ,null } "); err != nil || !slices.Equal(show(got), []string{"1", "2", "<NULL>"}) {
		t.Errorf("spaces: %v %v", show(got), err)
	}
	if got, err := ParseTextArray("[0:1]={3,4}"); err != nil || !slices.Equal(show(got), []string{"3", "4"}) {
		t.Errorf("bounds: %v %v", show(got), err)
	}
	for _, bad := range []string{"", "{", "a,b", `{"a}`, "{{1},{2}}", `{a"b}`} {
		if _, err := ParseTextArray(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
