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

func TestParseDetail(t *testing.T) {
	v := []any{int64(0), int64(1), int64(0), int64(500), int64(500), "b", "limit", []any{
		[]any{"d0", "a", int64(1), int64(0), int64(3), int64(2), int64(0), int64(500), int64(60000), nil},
		[]any{"d1", "b", int64(1), int64(0), int64(1), int64(0), int64(500), int64(500), int64(60000), nil},
	}}
	ok, rs, err := parseDetail(v, 2)
	if err != nil || ok || len(rs) != 2 || rs[0].Denies() || !rs[1].Denies() || rs[0].Remaining != 2 {
		t.Fatalf("%v %v %+v", ok, err, rs)
	}
	if _, _, err := parseDetail([]any{int64(1)}, 1); err == nil {
		t.Fatal("short reply accepted")
	}
}
