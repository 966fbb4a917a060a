package termtext

import (
	"bytes"
	"testing"
)

func TestTable(t *testing.T) {
	tb := Table{
		Header: []string{"SEQ", "ERROR", "EFFECT"},
		Rows:   [][]string{{"1", Dash(""), "changed"}, {"12", Clip("café déjà vu", 6), "stale"}},
		Extra:  []string{"    raw #7", ""},
	}
	var b bytes.Buffer
	if err := tb.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "SEQ  ERROR   EFFECT\n" +
		"1    -       changed\n" +
		"    raw #7\n" +
		"12   café …  stale\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := Plural(1, "tenant") + ", " + Plural(2, "tenant"); got != "1 tenant, 2 tenants" {
		t.Errorf("Plural: %q", got)
	}
}

func TestTableEmptyAndFooter(t *testing.T) {
	for _, tc := range []struct {
		name string
		tb   Table
		want string
	}{
		{"Empty", Table{Header: []string{"TENANT"}, Empty: "no tenants match", Footer: []string{"more: --page-token x"}}, "no tenants match\nmore: --page-token x\n"},
		{"HeaderOnly", Table{Header: []string{"TENANT"}}, "TENANT\n"},
		{"Footer", Table{Header: []string{"TENANT"}, Rows: [][]string{{"acme"}}, Empty: "none", Footer: []string{"1 tenant"}}, "TENANT\nacme\n1 tenant\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.tb.Write(&b); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
