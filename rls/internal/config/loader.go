package config

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Dir is the configuration directory as envoyproxy/ratelimit composes it:
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY.
func Dir(root, sub, app string) string { return filepath.Join(root, sub, app) }

// ReadDir reads every file of dir (following symlinks, so a swapped RUNTIME_ROOT symlink is
// read anew); ignoreDot skips names starting with '.' (RUNTIME_IGNOREDOTFILES). It also returns a
// fingerprint of the contents that changes whenever a file is written, created or removed.
func ReadDir(dir string, ignoreDot bool) ([]File, string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", err
	}
	names := []string{}
	for _, e := range entries {
		n := e.Name()
		if ignoreDot && strings.HasPrefix(n, ".") {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil || st.IsDir() {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	files := make([]File, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
		files = append(files, File{Name: filepath.Join(dir, n), Content: b})
	}
	return files, fmt.Sprintf("%x", h.Sum(nil)), nil
}

// Watch loads dir now and again whenever its contents change (checked every interval), calling
// apply with each configuration that loads and fail with each error (the previous configuration
// stays in force). It returns after the first attempt; the polling runs until ctx ends.
func Watch(ctx context.Context, dir string, ignoreDot, merge bool, interval time.Duration,
	apply func(*Config), fail func(error)) {
	last := ""
	try := func() {
		files, sum, err := ReadDir(dir, ignoreDot)
		if err != nil {
			if last != "error:"+err.Error() {
				fail(err)
				last = "error:" + err.Error()
			}
			return
		}
		if sum == last {
			return
		}
		last = sum
		c, err := Load(files, merge)
		if err != nil {
			fail(err)
			return
		}
		apply(c)
	}
	try()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				try()
			}
		}
	}()
}
