package inflight

import "testing"

// TestKeyOfIsStable pins KeyOf's identities: State.KeyTails persists them, so a change of the
// hash would make a restored tail name keys no record has.
func TestKeyOfIsStable(t *testing.T) {
	for _, c := range []struct {
		key string
		id  uint64
	}{
		{"", 0x0},
		{"a", 0xc94a014d3e08c11b},
		{"ab", 0x8dfed8dd849417f2},
		{"abc", 0xa9f2a5a9a63dde4b},
		{"key-7", 0x9989a565182a3d01},
		{"key-42", 0xc2410f5621d9094f},
		{"key-999", 0xf1f782901ee064d2},
		{"key-1234", 0x2c7824a6950179f3},
		{"key-12345", 0xf1e8b9950f5a49ce},
		{"0123456789abcdef", 0xec9c7fb9339ad193},
		{"0123456789abcdefg", 0xb007007ce7fb2c82},
		{"\x00", 0x8e09836fb72f25d8},
		{"\x00\x00\x00\x00\x00\x00\x00\x00", 0x8f2c28b4592db893},
		{"\xff\xfe\xfd\xfc\xfb\xfa\xf9", 0x82731547cc05786f},
		{"order-3f2a9c1e-8b7d-4e2f-a1c0-5d6e7f8091a2", 0xe2b3b2b43fcfd691},
	} {
		if got := KeyOf([]byte(c.key)); got != c.id {
			t.Errorf("KeyOf(%q) = %#x, want %#x", c.key, got, c.id)
		}
	}
}
