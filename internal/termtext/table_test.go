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
