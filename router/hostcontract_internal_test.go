package router

import "testing"

// A routes answer is known again by identity: the same remote map (the same header, however
// it was passed around) is the same answer, another map with the same contents is not, and
// empty maps, nil or not, are all the same answer.
func TestSameMapIsIdentity(t *testing.T) {
	a := map[string][]int32{"b": {1}}
	alias := a
	copied := map[string][]int32{"b": {1}}
	for _, tc := range []struct {
		name string
		x, y map[string][]int32
		same bool
	}{
		{"itself", a, alias, true},
		{"equal contents", a, copied, false},
		{"nil and empty", nil, map[string][]int32{}, true},
		{"empty and full", map[string][]int32{}, a, false},
	} {
		if got := sameMap(tc.x, tc.y); got != tc.same {
			t.Errorf("%s: sameMap %v, want %v", tc.name, got, tc.same)
		}
	}
}
