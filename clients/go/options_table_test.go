package ratelimit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The module's option table (docs/options.json, written from src/commands/call/options.rs and held
// equal to it by the module's unit tests).
type optionTable struct {
	Shared   []string `json:"shared"`
	Commands map[string]struct {
		Takes    []string     `json:"takes"`
		Accepted []string     `json:"accepted"`
		Rules    []optionRule `json:"rules"`
	} `json:"commands"`
}

func readOptionTable(t *testing.T) optionTable {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "options.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table optionTable
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	return table
}

// A refusal: the options Refused together, unless Without is given too.
type optionRule struct {
	Refused []string `json:"refused"`
	Without string   `json:"without"`
}

// Each shared option with a value that makes it emit its token.
var sharedOptions = map[string]Option{
	"COST":       Cost(2),
	"PEEK":       Peek(),
	"BESTEFFORT": BestEffort(),
	"DEDUP":      Dedup("id"),
	"BLOCK":      Block(time.Second),
	"AT":         At(time.UnixMilli(1_700_000_000_000)),
	"DETAIL":     Detail(),
	"DELAY":      Delay(time.Second),
	"HOLD":       Hold(time.Second),
	"SHADOW":     Shadow(),
}

// The upper-case tokens opts emit (HOLD's test also gives Dedup: HOLD alone is refused).
func emittedTokens(t *testing.T, opts ...Option) []string {
	t.Helper()
	args, err := collect(opts).args()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range args {
		if s, ok := a.(string); ok && s != "" && s == upperWord(s) {
			out = append(out, s)
		}
	}
	return out
}

func upperWord(s string) string {
	for _, r := range s {
		if r < 'A' || r > 'Z' {
			return ""
		}
	}
	return s
}

func TestOptionsAreTheTablesSharedOptions(t *testing.T) {
	table := readOptionTable(t)
	var covered []string
	for token, opt := range sharedOptions {
		opts := []Option{opt}
		if token == "HOLD" {
			opts = append(opts, Dedup("id"))
		}
		got := emittedTokens(t, opts...)
		if token == "HOLD" {
			got = slices.DeleteFunc(got, func(s string) bool { return s == "DEDUP" })
		}
		if !slices.Equal(got, []string{token}) {
			t.Fatalf("%s emits %v", token, got)
		}
		covered = append(covered, token)
	}
	shared := slices.Clone(table.Shared)
	slices.Sort(shared)
	slices.Sort(covered)
	if !slices.Equal(shared, covered) {
		t.Fatalf("the table's shared options %v, the client's %v", shared, covered)
	}
	// Wait is RL.ACQUIRE's own option.
	if got := emittedTokens(t, Wait(time.Second)); !slices.Equal(got, []string{"WAIT"}) ||
		!slices.Contains(table.Commands["RL.ACQUIRE"].Accepted, "WAIT") {
		t.Fatalf("Wait emits %v; RL.ACQUIRE accepts %v", got, table.Commands["RL.ACQUIRE"].Accepted)
	}
}

// The options refuse a pair exactly when the table's RL.GCRA row refuses their tokens.
func TestOptionsRefuseWhatTheTableRefusesOnGCRA(t *testing.T) {
	rules := readOptionTable(t).Commands["RL.GCRA"].Rules
	for a, optA := range sharedOptions {
		for b, optB := range sharedOptions {
			given := []string{a, b}
			want := slices.ContainsFunc(rules, func(r optionRule) bool {
				for _, t := range r.Refused {
					if !slices.Contains(given, t) {
						return false
					}
				}
				return !slices.Contains(given, r.Without)
			})
			_, err := collect([]Option{optA, optB}).args()
			if (err != nil) != want {
				t.Errorf("%s with %s: refused %v, the table says %v", a, b, err != nil, want)
			}
		}
	}
}
