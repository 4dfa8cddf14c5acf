package logurl

import "testing"

func TestPasswordsStayOutOfSegmentURLs(t *testing.T) {
	for _, tc := range []struct {
		in, stripped, password string
	}{
		{"postgres://strand:hunter2@db:5432/x?log=l", "postgres://strand@db:5432/x?log=l", "hunter2"},
		{"postgresql://strand@db/x?log=l&password=hunter2&sslmode=require", "postgresql://strand@db/x?log=l&sslmode=require", "hunter2"},
		{"postgres://strand@db/x?log=l", "postgres://strand@db/x?log=l", ""},
		{"etcd://h:2379/p", "etcd://h:2379/p", ""},
		{"file:///var/log/x", "file:///var/log/x", ""},
	} {
		if got := StripPassword(tc.in); got != tc.stripped {
			t.Errorf("StripPassword(%q) = %q, want %q", tc.in, got, tc.stripped)
		}
		if got := urlPassword(tc.in); got != tc.password {
			t.Errorf("urlPassword(%q) = %q, want %q", tc.in, got, tc.password)
		}
		if HasPassword(tc.stripped) {
			t.Errorf("HasPassword(%q) after stripping", tc.stripped)
		}
	}
	if got, want := withPassword("postgres://strand@db/x?log=l", "pw"), "postgres://strand:pw@db/x?log=l"; got != want {
		t.Errorf("withPassword = %q, want %q", got, want)
	}
	for _, keep := range []string{"postgres://db/x?log=l", "postgres://u:own@db/x?log=l", "etcd://h:1/p"} {
		if got := withPassword(keep, "pw"); got != keep {
			t.Errorf("withPassword(%q) = %q, want it unchanged", keep, got)
		}
	}
}
