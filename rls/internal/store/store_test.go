package store

import "testing"

// Slots from Redis Cluster's specification (CLUSTER KEYSLOT).
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789": 12739, "foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061, "": 0,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
